"""The lazy line of move-back candidates (``lyra_line``) against the reference walk (every key
computed, the whole line sorted), decision for decision.

Both walks call ``move_back`` and ``_admit_one`` (the only steps that change a decision) for the
same jobs in the same order, at every decision of a run: the runs are compared call by call.
A lazy line whose bound is not a lower bound (a negative margin), one that misses the engine's
changes, and one that keeps a resting bound past its expiry must be caught.
"""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import HealthCheck, given, settings

import lyra_baselines.lyra_admission as admission
import lyra_baselines.lyra_line as lyra_line
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_line import MovingLine
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace
from test_lyra_invariants import CONFIG, workloads
from toy import TOY

LOADED = SimConfig(cluster=ClusterConfig(training=(ServerGroup(5, "v100", 8),), inference=ServerGroup(6, "t4", 8)))


def _calls(monkeypatch, lazy: bool, run) -> tuple[list, dict]:
    """Every move_back / _admit_one call of ``run()`` as (time, step, job id, answer), and counts
    summed over the lazy line's decisions: candidates (jobs on loaned GPUs), jobs visited (not
    resting) and keys computed."""
    calls: list = []
    seen = {"keys": 0, "candidates": 0, "visited": 0}
    move_back, admit_one, keys, start = admission.move_back, admission._admit_one, MovingLine.keys, MovingLine.start

    def logged_move_back(d, job):
        moved = move_back(d, job)
        calls.append((d.view.now, "move", job.id, moved))
        return moved

    def logged_admit_one(d, job):
        placed = admit_one(d, job)
        calls.append((d.view.now, "admit", job.id, placed))
        return placed

    def counted_keys(self, view, jobs):
        seen["keys"] += len(jobs)
        return keys(self, view, jobs)

    def counted_start(self, view, touched, on_loaned):
        visit = start(self, view, touched, on_loaned)
        seen["candidates"] += len(on_loaned)
        seen["visited"] += len(visit)
        return visit

    with monkeypatch.context() as m:
        m.setattr(admission, "LAZY_LINE", lazy)
        m.setattr(admission, "move_back", logged_move_back)
        m.setattr(admission, "_admit_one", logged_admit_one)
        m.setattr(MovingLine, "keys", counted_keys)
        m.setattr(MovingLine, "start", counted_start)
        result = run()
    return calls + [result.metrics["jct_mean_s"]], seen


def _loaded_run(elastic: bool):
    jobs = generate_trace("bench-15d", 3)[:700]  # a small cluster: long queues, loaning, move-backs
    return lambda: simulate(jobs, LyraScheduler(elastic=elastic), LOADED, seed=0)


@pytest.mark.parametrize("elastic", [True, False])
def test_the_lazy_line_walks_like_the_sorted_line_on_a_loaded_cluster(elastic, monkeypatch):
    run = _loaded_run(elastic)
    expected, _ = _calls(monkeypatch, False, run)
    got, seen = _calls(monkeypatch, True, run)
    assert got == expected
    assert sum(step == "move" for _, step, *_ in expected[:-1]) > 20  # move-backs were walked
    assert seen["candidates"] > 2 * seen["keys"] > 0  # most candidates waited with a bound
    assert seen["candidates"] > 3 * seen["visited"] > 0  # most rested: not visited at all


def test_a_bound_above_the_key_is_caught(monkeypatch):
    run = _loaded_run(True)
    expected, _ = _calls(monkeypatch, False, run)
    monkeypatch.setattr(lyra_line, "MARGIN", -0.2)  # "bounds" up to 20 % of the work above the key
    got, _ = _calls(monkeypatch, True, run)
    assert got != expected


class _DeafFeed:
    """A change feed that reports no change (a broken line that misses resized or stopped jobs)."""

    def __init__(self, feed) -> None:
        self.feed = feed

    def changed(self):
        self.feed.changed()
        return {}


class _SometimesIgnored(LyraScheduler):
    """Lyra whose plan is dropped at every 5th decision for the current allocations less one job
    on loaned GPUs (stopped): a change only the engine's feed reports to Lyra."""

    def decide(self, view):
        plan = super().decide(view)
        self.count = getattr(self, "count", 0) + 1
        running = [job_id for job_id in self.memory.on_loaned if view.job(job_id).workers]
        if self.count % 5 or not running:
            return plan
        fresh = view.current_plan()
        fresh.allocations.pop(running[0])
        return fresh


def _overruled_run():
    jobs = generate_trace("bench-15d", 3)[:700]
    return lambda: simulate(jobs, _SometimesIgnored(elastic=True), LOADED, seed=0)


def _check_resting(monkeypatch, broken: list) -> None:
    """After each decision's lazy_candidates: every resting job is a move-back candidate now
    (running on the same allocation, on loaned GPUs only) whose bound is at most its key;
    a violation is appended to ``broken``."""
    lazy = admission.lazy_candidates

    def checked(d):
        line = lazy(d)
        kept, view = d.memory.line, d.view
        for job_id, item in kept.resting_of.items():
            job = view.job(job_id)
            alloc = d.allocations.get(job_id)
            if alloc is None or alloc is not job.allocation or job.rate <= 0 or job_id not in d.memory.on_loaned:
                broken.append((view.now, job_id, "not a candidate"))
                continue
            entry = kept.known.get(job_id)
            key = kept.keys(view, [job])[0][0]
            kept.known[job_id] = entry  # (as it was: the check changes nothing)
            if item[0] > key:
                broken.append((view.now, job_id, item[0], key))
        return line

    monkeypatch.setattr(admission, "lazy_candidates", checked)


def test_the_resting_line_follows_the_engines_own_changes(monkeypatch):
    run = _overruled_run()
    expected, _ = _calls(monkeypatch, False, run)
    broken: list = []
    with monkeypatch.context() as m:
        _check_resting(m, broken)
        got, _ = _calls(m, True, run)
    assert got == expected and not broken
    start = MovingLine.start

    def deaf_start(self, view, touched, on_loaned):
        if self.feed is not None and not isinstance(self.feed, _DeafFeed):
            self.feed = _DeafFeed(self.feed)
        return start(self, view, touched, on_loaned)

    monkeypatch.setattr(MovingLine, "start", deaf_start)
    _check_resting(monkeypatch, broken)
    with contextlib.suppress(ZeroDivisionError):  # (it may go on to move back a stopped job)
        _calls(monkeypatch, True, run)
    assert any(b[2] == "not a candidate" for b in broken)  # a line deaf to the engine's changes is caught


def test_a_resting_bound_kept_past_its_expiry_is_caught(monkeypatch):
    run = _loaded_run(True)
    expected, _ = _calls(monkeypatch, False, run)
    start = MovingLine.start

    def start_without_expiry(self, view, touched, on_loaned):
        self.expiry.clear()  # bounds never woken when no longer proven (a part exit, say)
        return start(self, view, touched, on_loaned)

    monkeypatch.setattr(MovingLine, "start", start_without_expiry)
    got, _ = _calls(monkeypatch, True, run)
    assert got != expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
def test_the_lazy_line_walks_like_the_sorted_line_on_small_workloads(case, monkeypatch):
    jobs, demand = case

    def run():
        return simulate(jobs, LyraScheduler(), CONFIG, seed=0, profiles=TOY, demand=demand)

    assert _calls(monkeypatch, True, run)[0] == _calls(monkeypatch, False, run)[0]


# ------------------------------------------------------------------ loaned_pays with kept times
def _reference_pays(d, job, need, placement):
    """``loaned_pays`` as it was: every time asked of ``LyraRates.time_on``."""
    view, time_on = d.view, d.rates.time_on
    if d.settings.loaned_rule == "overflow":
        return True
    best, wait, training_type = math.inf, math.inf, None
    for gpu_type, ids in d.facts.training_types.items():
        if need > len(ids) * d.facts.per_server[gpu_type]:
            continue
        w = d.timeline(gpu_type).wait_for(d.waiting.get(gpu_type, 0) + need - d.available(gpu_type))
        t = w + time_on(view, job, need, gpu_type)
        if t < best:
            best, wait, training_type = t, w, gpu_type
    on_loaned = time_on(view, job, need, d.facts.gpu_types[next(iter(placement))])
    options = [(on_loaned, on_loaned)]
    if d.settings.move_back and on_loaned > wait and training_type is not None:
        options.append((wait + view.overheads.migrate_s + (1.0 - wait / on_loaned) * time_on(
            view, job, need, training_type), wait))
    safe = admission.safe_loaned_s(d, placement)
    return min((finish for finish, stay in options if stay <= safe), default=math.inf) < best


def _checked_pays(monkeypatch, seen):
    pays = admission.loaned_pays

    def checked(d, job, need, placement):
        expected = _reference_pays(d, job, need, placement)
        got = pays(d, job, need, placement)
        assert got == expected
        for gpu_type, seconds in admission.times_on(d, job, need).items():  # the kept times themselves
            assert seconds == d.rates.time_on(d.view, job, need, gpu_type)
        seen[got] = seen.get(got, 0) + 1
        return got

    monkeypatch.setattr(admission, "loaned_pays", checked)


@pytest.mark.parametrize("move_back", [True, False])
def test_loaned_pays_with_kept_times_answers_as_every_time_asked(move_back, monkeypatch):
    seen: dict = {}
    _checked_pays(monkeypatch, seen)
    jobs = generate_trace("bench-15d", 3)[:700]
    simulate(jobs, LyraScheduler(move_back=move_back), LOADED, seed=0)
    assert seen.get(True, 0) > 50 and seen.get(False, 0) > 500


def test_times_kept_past_a_change_of_remaining_work_are_caught(monkeypatch):
    def stale(d, job, need):  # kept per job whatever its remaining work: wrong once it ran
        cache = d.memory.__dict__.setdefault("_stale", {})
        return {} if job.workers else cache.setdefault(job.id, {})

    _checked_pays(monkeypatch, {})
    monkeypatch.setattr(admission, "times_on", stale)
    jobs = generate_trace("bench-15d", 3)[:700]
    with pytest.raises(AssertionError):
        simulate(jobs, LyraScheduler(), LOADED, seed=0)
