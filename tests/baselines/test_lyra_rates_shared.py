"""``LyraRates.settle``: runs on one profile set share Lyra's pure caches (``lyra_rates.SHARED``,
Lyra's own, weakly keyed by the profile set: nothing of Lyra's is kept in the model's
``ProfileSet.memo``).

Only the caches that are pure functions of the profiles, the scaling settings, the GPUs per
server and ``value_rate`` (packed rates, goodput rows, value rows) are shared, and only between
runs with the same settings; the caches by job id never are (a job id's remaining work differs
between runs). The values a run reads are the same doubles either way.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import weakref

import pytest

import lyra_baselines.lyra_rates as lyra_rates
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_rates import LyraRates
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.model.profiles import ProfileSet, builtin_profiles
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
    if not rates.settled:
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


_PURE = ("packed", "goodputs", "rows")


def _settled(view: ClusterView, value_rate: str = "goodput", per_server: dict | None = None) -> LyraRates:
    rates = LyraRates(value_rate)
    rates.per_server = dict(per_server or PER_SERVER)
    rates.settle(view)
    return rates


def test_runs_on_one_profile_set_share_the_pure_caches_and_not_those_by_job_id():
    previous = _filled()
    assert all(previous.job_caches.values())
    rates = _settled(_engine().view)  # a later run on the same profiles (TOY)
    assert all(rates.pure_caches[name] is previous.pure_caches[name] for name in _PURE)
    answers = _asked(rates, _engine().view)
    alone = _settled(_engine(copy.deepcopy(TOY)).view)  # equal profiles, another object: its own memo
    assert not any(alone.pure_caches[name] is previous.pure_caches[name] for name in _PURE)
    assert answers == _asked(alone, _engine(copy.deepcopy(TOY)).view)  # the same doubles
    for name, kept in rates.job_caches.items():
        assert kept is not previous.job_caches[name] and set(kept) == set(alone.job_caches[name])


def test_throughput_rates_are_shared_too():
    previous = _filled("throughput")
    rates = _settled(_engine().view, "throughput")
    _asked(rates, _engine().view)
    assert all(rates.pure_caches[name] is previous.pure_caches[name] for name in _PURE)


@pytest.mark.parametrize("other", ["value_rate", "per_server", "profiles", "scaling", "adaptive", "knowledge"])
def test_runs_of_other_settings_keep_their_own(other):
    previous = _filled()
    before = {name: dict(previous.pure_caches[name]) for name in _PURE}
    engine = {"profiles": lambda: _engine(copy.deepcopy(TOY)),  # equal content, another object
              "scaling": lambda: _engine(scaling="fixed-global"),
              "adaptive": lambda: _engine(scaling="adaptive"),
              "knowledge": lambda: _engine(knowledge=KnowledgeConfig(mode="estimate"))}.get(other, _engine)()
    rates = _settled(engine.view, "throughput" if other == "value_rate" else "goodput",
                     {"v100": 4, "t4": 8} if other == "per_server" else None)
    _asked(rates, engine.view)
    for name, kept in before.items():
        assert rates.pure_caches[name] is not previous.pure_caches[name]
        assert previous.pure_caches[name] == kept  # not written into either
    if other in ("adaptive", "knowledge"):  # not pure: this run's own, shared with none
        assert rates.settled and not rates.shared
        assert not any(_settled(engine.view).pure_caches[name] is rates.pure_caches[name] for name in _PURE)


def test_a_full_memo_starts_afresh(monkeypatch):
    previous = _filled()
    monkeypatch.setattr(lyra_rates, "SHARED_ENTRIES", sum(len(previous.pure_caches[name]) for name in _PURE) - 1)
    rates = _settled(_engine().view)
    assert not any(rates.pure_caches[name] is previous.pure_caches[name] for name in _PURE)
    assert not any(rates.pure_caches[name] for name in _PURE)


@pytest.mark.parametrize("mode", ["plain", "adaptive"])
def test_a_fork_shares_the_pure_caches_only(mode):
    """``copy.deepcopy`` (an env's fork) shares the settled pure caches, so a fork costs no copy of
    them, and gives the same answers; where they are not pure (the adaptive rule: the rates follow
    a job's batch) it copies them, so the fork's asks never reach the original's caches."""
    view = _engine(scaling="adaptive").view if mode == "adaptive" else _engine().view
    rates = _filled(view=view)
    clone = copy.deepcopy(rates)
    shared = [clone.pure_caches[name] is rates.pure_caches[name] for name in _PURE]
    assert shared == ([True] * 3 if mode == "plain" else [False] * 3)
    assert clone.job_caches["sjf_keys"] is not rates.job_caches["sjf_keys"]  # by job id: copied
    assert clone.job_caches["sjf_keys"] == rates.job_caches["sjf_keys"]
    assert _asked(clone, view) == _asked(rates, view)


@pytest.mark.parametrize("policy", ["lyra", "lyra-noloan"])
@pytest.mark.sample(1)
def test_simulations_handed_one_profile_set_share_the_caches_and_give_the_same_results(policy, monkeypatch):
    """Runs handed one ``profiles`` (as the benchmark's windows are) start with the rows earlier runs
    computed, and give what runs on profile sets of their own give, bit for bit."""
    warm: list[bool] = []
    settle = LyraRates.settle

    def watched(self, view):
        settle(self, view)
        warm.append(bool(self.pure_caches["rows"]))

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


class WatchedProfiles(ProfileSet):
    """A profile set that records the keys of the memos asked of it."""

    def __init__(self, profiles: ProfileSet) -> None:
        super().__init__(profiles.models, profiles.reference_gpu, profiles.source)
        self.asked: list = []

    def memo(self, key):
        self.asked.append(key)
        return super().memo(key)


def test_lyra_keeps_its_caches_itself_not_in_the_profile_sets_memo():
    """A run asks the profile set's memo only for the model's own (``ScalingModel``'s) memos;
    Lyra's rows are in ``SHARED`` under that profile set, and the next run finds them there."""
    watched = WatchedProfiles(TOY)
    cfg = config(training=2, inference=1)
    simulate(JOBS, "lyra", cfg, seed=0, profiles=watched, demand=DemandCurve.constant(0))
    assert watched.asked and all(key[0] == "scaling" for key in watched.asked)
    (kept,) = lyra_rates.SHARED[watched].values()
    assert kept["packed"] or kept["goodputs"]
    rates = _settled(_engine(watched).view, per_server={"v100": 8, "t4": 8})
    assert rates.pure_caches["packed"] is kept["packed"] and rates.pure_caches["goodputs"] is kept["goodputs"]


def test_the_shared_caches_go_with_their_profile_set():
    profiles = copy.deepcopy(TOY)
    _filled(view=_engine(profiles).view)
    assert profiles in lyra_rates.SHARED
    gone = weakref.ref(profiles)
    del profiles
    gc.collect()
    assert gone() is None and all(p is not None for p in lyra_rates.SHARED.keys())


def test_at_most_shared_settings_are_kept_per_profile_set(monkeypatch):
    monkeypatch.setattr(lyra_rates, "SHARED_SETTINGS", 2)
    profiles = copy.deepcopy(TOY)
    first = lyra_rates.shared_caches(profiles, ("a",))
    assert lyra_rates.shared_caches(profiles, ("a",)) is first
    lyra_rates.shared_caches(profiles, ("b",))
    lyra_rates.shared_caches(profiles, ("c",))  # a third: all dropped, then kept
    assert len(lyra_rates.SHARED[profiles]) == 1 and lyra_rates.shared_caches(profiles, ("a",)) is not first
