"""Lyra's shortcuts against its general path, decision for decision.

``lyra_rebalance.rebalance_admitted`` visits only the elastic jobs admitted in a decision when nothing
else changed; ``lyra_rebalance.rebalance_types`` visits every running elastic job. With the shortcut
switched off (``_admitted_fast_path = False``) every run must give the same jobs, bit for bit,
on random workloads (over Lyra's switches) and on a generated trace on a two-type training pool.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from lyra_baselines.lyra import LyraScheduler
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
