"""Lyra's shortcuts against its general path, decision for decision.

The running elastic jobs' state ``LyraMemory`` keeps through the engine's change feed
(``lyra_running.RunningElastic``) must equal a rebuild from scratch at every decision.

``lyra_rebalance.rebalance_admitted`` visits only the elastic jobs admitted in a decision when nothing
else changed; ``lyra_rebalance.rebalance_types`` visits every running elastic job. With the shortcut
switched off (``_admitted_fast_path = False``) every run must give the same jobs, bit for bit,
on random workloads (over Lyra's switches) and on a generated trace on a two-type training pool.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import lyra_baselines.lyra as lyra_module
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_state import Decision
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace
from test_lyra_invariants import CONFIG, SWITCHES, workloads
from toy import TOY


class _GeneralPath(LyraScheduler):
    _admitted_fast_path = False


@pytest.mark.parametrize("backfill, loaned_rule, move_back, flex_horizon", SWITCHES[::3])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
def test_admitted_shortcut_matches_the_general_path(case, backfill, loaned_rule, move_back, flex_horizon):
    jobs, demand = case
    switches = dict(backfill=backfill, loaned_rule=loaned_rule, move_back=move_back, flex_horizon=flex_horizon)
    fast = simulate(jobs, LyraScheduler(**switches), CONFIG, seed=0, profiles=TOY, demand=demand)
    general = simulate(jobs, _GeneralPath(**switches), CONFIG, seed=0, profiles=TOY, demand=demand)
    assert fast.jobs == general.jobs
    assert fast.metrics["decisions"] == general.metrics["decisions"]


@pytest.mark.parametrize("training", [
    (ServerGroup(12, "v100", 8),),
    (ServerGroup(6, "v100", 8), ServerGroup(6, "a100", 8)),  # two training types: the multi-type fallbacks
])
def test_admitted_shortcut_matches_on_a_generated_trace(training):
    jobs = generate_trace("bench-15d", 3)[:1500]
    config = SimConfig(cluster=ClusterConfig(training=training, inference=ServerGroup(8, "t4", 8)))
    fast = simulate(jobs, LyraScheduler(), config, seed=0)
    general = simulate(jobs, _GeneralPath(), config, seed=0)
    assert fast.jobs == general.jobs
    assert fast.metrics["jct_mean_s"] == general.metrics["jct_mean_s"]


# ------------------------------------------------------------------ the change feed's state
class _CheckedDecision(Decision):
    """A Decision that rebuilds the running elastic jobs' state from scratch (every job of the
    plan's allocations split afresh) and compares it with the one kept by the change feed."""

    checked = 0
    overlays = 0

    def __init__(self, settings, memory, view, plan, levels):
        super().__init__(settings, memory, view, plan, levels)
        fresh = Decision.__new__(Decision)
        fresh.settings, fresh.memory, fresh.view, fresh.facts = settings, memory, view, self.facts
        fresh.allocations = dict(self.allocations)  # a plain dict: the from-scratch path
        flex_cells = fresh._split_all() if settings.elastic else {}
        assert list(self.base.items()) == list(fresh.base.items())  # same jobs, same order, same splits
        assert list(self.flex.items()) == list(fresh.flex.items())
        assert [j.id for j in self.elastic_jobs] == [j.id for j in fresh.elastic_jobs]
        assert dict(self.flex_on) == fresh.flex_on
        avail, cells = self.free.tolist(), self.free.totals()
        for sid, g in fresh.flex_on.items():
            avail[sid] += g
        for c, g in flex_cells.items():
            cells[c] += g
        assert self.avail == avail and self.avail_cells == cells
        type(self).checked += 1
        type(self).overlays += bool(getattr(self.allocations, "touched", None))


@pytest.fixture
def checked_decisions(monkeypatch):
    monkeypatch.setattr(lyra_module, "Decision", _CheckedDecision)
    _CheckedDecision.checked = _CheckedDecision.overlays = 0
    return _CheckedDecision


@pytest.mark.parametrize("backfill, loaned_rule, move_back, flex_horizon", SWITCHES[::5])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
def test_kept_running_state_equals_a_rebuild_at_every_decision(case, backfill, loaned_rule, move_back,
                                                                 flex_horizon, checked_decisions):
    jobs, demand = case
    switches = dict(backfill=backfill, loaned_rule=loaned_rule, move_back=move_back, flex_horizon=flex_horizon)
    simulate(jobs, LyraScheduler(**switches), CONFIG, seed=0, profiles=TOY, demand=demand)


def test_kept_running_state_equals_a_rebuild_on_a_generated_trace(checked_decisions):
    jobs = generate_trace("bench-15d", 3)[:800]
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(6, "v100", 8),), inference=ServerGroup(6, "t4", 8)))
    simulate(jobs, LyraScheduler(), config, seed=0)
    assert checked_decisions.checked > 500 and checked_decisions.overlays > 0  # reclaim answers' edits too
