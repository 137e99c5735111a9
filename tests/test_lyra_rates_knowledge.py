"""Lyra's kept rates under a knowledge mode (``SimConfig.knowledge``): every answer of a run's
``LyraRates`` (and of the move-back line's ``MovingLine.keys``) equals the one a fresh
``LyraRates`` computes for that job then, at every decision.

Under ``estimate`` and ``history`` a job view's total and remaining work are believed, but the
rate (``ClusterView.goodput``) is the one at the job's true progress part (visible by design,
``JobView.progress_part``). Caches keyed by the part of the *believed* work would hand one job
another job's rate (same model, batch and size, same believed part, another true part), or keep
a job's rate past its true part's end.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import lyra_baselines.lyra_admission as admission
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_line import MovingLine
from lyra_baselines.lyra_rates import LyraRates
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace

_SEEN: dict[str, int] = {}


class _Plain(LyraRates):
    """LyraRates with its own methods (the fixture gives it the originals back)."""


def _fresh(rates: LyraRates) -> LyraRates:
    fresh = _Plain(rates.value_rate)
    fresh.per_server = rates.per_server
    return fresh


def _same(got: float, expected: float) -> bool:
    return got == expected or (math.isnan(got) and math.isnan(expected))


def _bits(values) -> bytes:
    return np.asarray(values, dtype=np.float64).tobytes()


@pytest.fixture
def checked(monkeypatch):
    """Wraps every LyraRates answer (and MovingLine.keys) with a check against a fresh LyraRates."""
    originals = {name: getattr(LyraRates, name) for name in (
        "job_rates", "time_on", "value_row", "charged_row", "remaining_at", "remaining_estimate", "running_line",
        "queued_line")}
    for name, method in originals.items():  # fresh ones answer by the code under test, unchecked
        monkeypatch.setattr(_Plain, name, method, raising=False)
    keys = MovingLine.keys

    def job_rates(self, view, job, gpu_type, top, low=1):
        got = originals["job_rates"](self, view, job, gpu_type, top, low)
        expected = originals["job_rates"](_fresh(self), view, job, gpu_type, top, low)
        _SEEN["job_rates"] += 1
        assert _bits(got[max(low, 1): top + 1]) == _bits(expected[max(low, 1): top + 1]), (job.id, gpu_type, top, low)
        return got

    def time_on(self, view, job, workers, gpu_type):
        got = originals["time_on"](self, view, job, workers, gpu_type)
        _SEEN["time_on"] += 1
        assert _same(got, originals["time_on"](_fresh(self), view, job, workers, gpu_type)), (job.id, workers)
        return got

    def row(name):
        def checked_row(self, view, job, *args):
            got = originals[name](self, view, job, *args)
            _SEEN["rows"] += 1
            assert _bits(got) == _bits(originals[name](_fresh(self), view, job, *args)), (name, job.id, args)
            return got
        return checked_row

    def remaining_at(self, view, job, workers):
        got = originals["remaining_at"](self, view, job, workers)
        _SEEN["remaining_at"] += 1
        assert _same(got, originals["remaining_at"](_fresh(self), view, job, workers)), (job.id, workers)
        return got

    def remaining_estimate(self, view, job):
        got = originals["remaining_estimate"](self, view, job)
        _SEEN["remaining_estimate"] += 1
        assert _same(got, originals["remaining_at"](_fresh(self), view, job, job.spec.num_gpus)), job.id
        return got

    def queued_line(self, view, jobs):  # every estimate through remaining_estimate (checked above)
        return [(self.remaining_estimate(view, job), job.index, job) for job in jobs]

    def running_line(self, view, jobs):
        jobs = list(jobs)
        got = originals["running_line"](self, view, jobs)
        fresh = _fresh(self)
        _SEEN["running_line"] += len(jobs)
        assert got == [(originals["remaining_at"](fresh, view, j, j.spec.num_gpus), j.index, j) for j in jobs]
        return got

    def line_keys(self, view, jobs):
        got = keys(self, view, jobs)
        fresh = _Plain("goodput")
        _SEEN["line_keys"] += len(got)
        assert got == [(originals["remaining_at"](fresh, view, j, j.spec.num_gpus), j.index, j) for j in jobs]
        return got

    for name, wrapper in (("job_rates", job_rates), ("time_on", time_on), ("value_row", row("value_row")),
                          ("charged_row", row("charged_row")), ("remaining_at", remaining_at),
                          ("remaining_estimate", remaining_estimate), ("queued_line", queued_line),
                          ("running_line", running_line)):
        monkeypatch.setattr(LyraRates, name, wrapper)
    monkeypatch.setattr(MovingLine, "keys", line_keys)
    for name in ("job_rates", "time_on", "rows", "remaining_at", "remaining_estimate", "running_line", "line_keys"):
        _SEEN[name] = 0
    yield _SEEN


SMALL_CLUSTER = ClusterConfig(training=(ServerGroup(5, "v100", 8),), inference=ServerGroup(6, "t4", 8))


_slow = pytest.mark.slow


@pytest.mark.parametrize("knowledge, lazy_line", [
    ({"mode": "estimate"}, True), ({"mode": "history"}, False),
    pytest.param({"mode": "estimate"}, False, marks=_slow), pytest.param({"mode": "history"}, True, marks=_slow),
    pytest.param({"mode": "estimate", "sigma": 2.0, "bias": 0.3}, True, marks=_slow),
    pytest.param({"mode": "oracle"}, True, marks=_slow)])  # (the control: true today as before)
def test_kept_rates_equal_fresh_ones_under_a_knowledge_mode(knowledge, lazy_line, checked, monkeypatch):
    monkeypatch.setattr(admission, "LAZY_LINE", lazy_line)
    jobs = generate_trace("bench-15d", 3)[:250]  # long queues, loaning, move-backs, knapsack rounds
    config = SimConfig(cluster=SMALL_CLUSTER, knowledge=KnowledgeConfig(**knowledge))
    simulate(jobs, LyraScheduler(), config, seed=0)
    assert checked["rows"] > 500 and checked["time_on"] > 500 and checked["remaining_estimate"] > 500
    assert checked["running_line"] + checked["line_keys"] > 100


# ------------------------------------------------------------------ by hand: a rate that moves with the
# true part at the requested size (none of the shipped rules has one there, so a fake view gives it)
from types import SimpleNamespace  # noqa: E402

from lyra_gym.model.jobs import JobState  # noqa: E402
from lyra_gym.model.jobspec import JobSpec  # noqa: E402
from lyra_gym.model.knowledge import Knowledge  # noqa: E402
from lyra_gym.sim.view import KnownJobView  # noqa: E402


class _Believed(Knowledge):
    """Every job believed to need ``ratio`` times its true work (no growth past it in these tests)."""

    def __init__(self, ratio: float) -> None:
        super().__init__([], 2.0)
        self.ratio = ratio

    def initial(self, job) -> float:
        return self.ratio * job.total_work


class _Job:
    """A job record doing ``rate`` samples/s from time 0 (what KnownJobView reads of one)."""

    def __init__(self, index: int, total: float, rate: float = 1.0) -> None:
        self.spec = JobSpec(f"j{index}", 0.0, 4, 1000.0, "m", True, 1, 8)
        self.index, self.total_work, self.init_batch, self.batch, self.speed = index, total, 64.0, None, rate
        self.workers, self.state = 4, JobState.RUNNING
        self.reference_rate = total / self.spec.duration  # samples/s at the requested size

    def remaining_work(self, now: float) -> float:
        return max(0.0, self.total_work - self.speed * now)

    def work_done_at(self, now: float) -> float:
        return min(self.total_work, self.speed * now)


def _rate(job, workers: int) -> float:
    """The fake goodput: a function of the true part and the workers (samples/s)."""
    return 10.0 + 3.0 * job.progress_part + 0.5 * workers


def _fake_view(engine) -> SimpleNamespace:
    return SimpleNamespace(scaling="fixed-local", rate_settings=None, now=0.0, reference_server=lambda: ("v100", 8),
                           goodput=lambda job, w, t, ps: _rate(job, w),
                           goodputs=lambda job, low, high, t, ps: [_rate(job, w) for w in range(low, high)],
                           overheads=SimpleNamespace(rescale_s=30.0), engine=engine)


def test_a_jobs_kept_reference_rate_follows_its_true_part_not_its_believed_one():
    """Believed total 3x the truth: the believed part moves a third as fast as the true one, so a
    rate kept by the believed part (or a span of believed work in one part) goes stale."""
    engine = SimpleNamespace(now=0.0)
    job = KnownJobView(_Job(0, 1000.0), engine, _Believed(3.0))
    view = _fake_view(engine)
    kept, line = LyraRates("goodput"), MovingLine()
    checked = 0
    for now in [7.0 * k for k in range(143)] + [500.0, 2.0, 999.0]:  # (back in time: a fresh start's path)
        engine.now = view.now = now
        believed_remaining = 3000.0 - now
        expected = believed_remaining / _rate(job, 4)  # by hand: the believed work over the true part's rate
        assert kept.remaining_at(view, job, 4) == expected
        assert kept.running_line(view, [job]) == [(expected, 0, job)]
        assert line.keys(view, [job]) == [(expected, 0, job)]
        checked += 1
    assert checked == 146


def test_two_jobs_alike_but_for_their_true_part_get_their_own_rates():
    """Same model, batch and size, the same believed part (0), true parts 0 and 10: each job's
    rates, times and value rows are its own, whichever asks first."""
    engine = SimpleNamespace(now=100.0)
    near = KnownJobView(_Job(0, 2000.0), engine, _Believed(20.0))   # true part 1 (100 of 2000)
    far = KnownJobView(_Job(1, 200.0), engine, _Believed(100.0))    # true part 10 (100 of 200)
    assert (near.progress_part, far.progress_part) == (1, 10)
    view = _fake_view(engine)
    for first, second in ((near, far), (far, near)):
        kept = LyraRates("goodput")
        kept.per_server = {"v100": 8}
        for job in (first, second):
            rates = kept.job_rates(view, job, "v100", 6)
            assert rates.tolist() == [0.0] + [_rate(job, w) for w in range(1, 7)]
            assert kept.time_on(view, job, 3, "v100") == job.remaining_work / _rate(job, 3)
            row = kept.value_row(view, job, "v100", 2, math.inf)  # min_gpus 1: rates of 1, 2, 3 workers
            first_time = job.remaining_work / _rate(job, 1)
            assert row == [first_time - job.remaining_work / _rate(job, w) for w in (1, 2, 3)]
