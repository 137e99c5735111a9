"""``LyraRates.settle``: runs on one profile set share Lyra's pure caches through its memo.

Only the caches that are pure functions of the profiles, the scaling settings, the GPUs per
server and ``value_rate`` (packed rates, goodput rows, value rows) are shared, and only between
runs with the same settings; the caches by job id never are (a job id's remaining work differs
between runs). The values a run reads are the same doubles either way.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

import lyra_baselines.lyra_rates as lyra_rates
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_rates import LyraRates
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.model.profiles import builtin_profiles
from lyra_gym.run.simulate import build_engine, simulate
from lyra_gym.sim.engine import Engine
from lyra_gym.sim.view import ClusterView, JobView
from lyra_gym.workloads.tracegen import generate_trace
from toy import TOY, config, job

JOBS = [job("a", 0.0, 2, 3600.0, elastic=True, lo=1, hi=4), job("b", 0.0, 4, 7200.0, elastic=True, lo=2, hi=8)]
PER_SERVER = {"v100": 8, "t4": 8}


def _engine(profiles=TOY, **changes) -> Engine:
    """An engine on the toy jobs stopped at its first decision (both jobs queued)."""
    cfg = dataclasses.replace(config(training=2, inference=1), **changes)
    engine = build_engine(JOBS, LyraScheduler(), cfg, 0, profiles, demand=DemandCurve.constant(0))
    engine.begin()
    assert engine.next_decision()
    return engine


def _jobs(view: ClusterView) -> list[JobView]:
    return sorted(view.queued_jobs(), key=lambda j: j.id)


def _asked(rates: LyraRates, view: ClusterView) -> list:
    """Every kind of answer of ``rates`` for the toy jobs (the caches filled on the way), settled
    first as a run's first decision does (``LyraMemory.start``)."""
    if rates._token is None:
        rates.settle(view)
    answers: list = []
    for j in _jobs(view):
        answers += [rates.job_rates(view, j, "v100", 6).tolist(), rates.value_row(view, j, "v100", 3, 900.0),
                    rates.charged_row(view, j, "t4", 4, 1e5, 1), rates.remaining_estimate(view, j),
                    rates.time_on(view, j, 3, "t4"), rates.packed_rates(view, j.spec.model, "t4", 8, 5).tolist()]
    answers.append([key for key, _, _ in rates.running_line(view, _jobs(view))])
    return answers


def _filled(value_rate: str = "goodput", view: ClusterView | None = None) -> LyraRates:
    rates = LyraRates(value_rate)
    rates.per_server = dict(PER_SERVER)
    _asked(rates, view or _engine().view)
    return rates


_PURE = ("_rates", "_goodputs", "_rows")


def _settled(view: ClusterView, value_rate: str = "goodput", per_server: dict | None = None) -> LyraRates:
    rates = LyraRates(value_rate)
    rates.per_server = dict(per_server or PER_SERVER)
    rates.settle(view)
    return rates


def test_runs_on_one_profile_set_share_the_pure_caches_and_not_those_by_job_id():
    previous = _filled()
    assert previous._sjf_keys and previous._queued_times and previous._reference_rates and previous._part_spans
    rates = _settled(_engine().view)  # a later run on the same profiles (TOY)
    assert all(getattr(rates, name) is getattr(previous, name) for name in _PURE)
    answers = _asked(rates, _engine().view)
    alone = _settled(_engine(copy.deepcopy(TOY)).view)  # equal profiles, another object: its own memo
    assert not any(getattr(alone, name) is getattr(previous, name) for name in _PURE)
    assert answers == _asked(alone, _engine(copy.deepcopy(TOY)).view)  # the same doubles
    for name in ("_sjf_keys", "_queued_times", "_reference_rates", "_part_spans"):
        kept = getattr(rates, name)
        assert kept is not getattr(previous, name) and set(kept) == set(getattr(alone, name))


def test_throughput_rates_are_shared_too():
    previous = _filled("throughput")
    rates = _settled(_engine().view, "throughput")
    _asked(rates, _engine().view)
    assert rates._rates is previous._rates and rates._rows is previous._rows


@pytest.mark.parametrize("other", ["value_rate", "per_server", "profiles", "scaling", "adaptive", "knowledge"])
def test_runs_of_other_settings_keep_their_own(other):
    previous = _filled()
    before = {name: dict(getattr(previous, name)) for name in _PURE}
    engine = {"profiles": lambda: _engine(copy.deepcopy(TOY)),  # equal content, another object
              "scaling": lambda: _engine(scaling="fixed-global"),
              "adaptive": lambda: _engine(scaling="adaptive"),
              "knowledge": lambda: _engine(knowledge=KnowledgeConfig(mode="estimate"))}.get(other, _engine)()
    rates = _settled(engine.view, "throughput" if other == "value_rate" else "goodput",
                     {"v100": 4, "t4": 8} if other == "per_server" else None)
    _asked(rates, engine.view)
    for name, kept in before.items():
        assert getattr(rates, name) is not getattr(previous, name)
        assert getattr(previous, name) == kept  # not written into either
    if other in ("adaptive", "knowledge"):  # not pure: this run's own, shared with none
        assert rates._token == ()
        assert not any(getattr(_settled(engine.view), name) is getattr(rates, name) for name in _PURE)


def test_a_full_memo_starts_afresh(monkeypatch):
    previous = _filled()
    monkeypatch.setattr(lyra_rates, "SHARED_ENTRIES", sum(len(getattr(previous, name)) for name in _PURE) - 1)
    rates = _settled(_engine().view)
    assert not any(getattr(rates, name) is getattr(previous, name) for name in _PURE)
    assert not any(getattr(rates, name) for name in _PURE)


@pytest.mark.parametrize("mode", ["plain", "adaptive"])
def test_a_fork_shares_the_pure_caches_only(mode):
    """``copy.deepcopy`` (an env's fork) shares the settled pure caches, so a fork costs no copy of
    them, and gives the same answers; where they are not pure (the adaptive rule: the rates follow
    a job's batch) it copies them, so the fork's asks never reach the original's caches."""
    view = _engine(scaling="adaptive").view if mode == "adaptive" else _engine().view
    rates = _filled(view=view)
    clone = copy.deepcopy(rates)
    pure = ("_rates", "_goodputs", "_rows")
    shared = [getattr(clone, name) is getattr(rates, name) for name in pure]
    assert shared == ([True] * 3 if mode == "plain" else [False] * 3)
    assert clone._sjf_keys is not rates._sjf_keys and clone._sjf_keys == rates._sjf_keys  # by job id: copied
    assert _asked(clone, view) == _asked(rates, view)


@pytest.mark.parametrize("policy", ["lyra", "lyra-noloan"])
def test_simulations_handed_one_profile_set_share_the_caches_and_give_the_same_results(policy, monkeypatch):
    """Runs handed one ``profiles`` (as the benchmark's windows are) start with the rows earlier runs
    computed, and give what runs on profile sets of their own give, bit for bit."""
    warm: list[bool] = []
    settle = LyraRates.settle

    def watched(self, view):
        settle(self, view)
        warm.append(bool(self._rows))

    monkeypatch.setattr(LyraRates, "settle", watched)
    cfg = SimConfig(cluster=ClusterConfig(training=(ServerGroup(5, "v100", 8),), inference=ServerGroup(6, "t4", 8)))
    trace = generate_trace("bench-15d", 3)
    windows = [trace[:120], trace[120:240], trace[:120]]
    shared = builtin_profiles()
    together = [simulate(jobs, policy, cfg, seed=0, profiles=shared) for jobs in windows]
    assert warm == [False, True, True]
    alone = [simulate(jobs, policy, cfg, seed=0, profiles=builtin_profiles()) for jobs in windows]
    assert warm[3:] == [False, False, False]  # a profile set of its own each: nothing shared
    for a, b in zip(together, alone):
        assert a.jobs == b.jobs
        assert {k: v for k, v in a.metrics.items() if "wall" not in k} == {k: v for k, v in b.metrics.items()
                                                                           if "wall" not in k}
