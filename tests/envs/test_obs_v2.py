"""Observation version 2 (``lyra_gym/envs/observation_v2.py``): each feature hand-computed on a toy
cluster, version 1's values untouched, and the layout's names.

Toy profile (tests/toy.py): ``toy`` trains 1 sample/s per V100 and 0.5 per T4, no efficiency curve
(E = 1), so a job's work is duration x requested GPUs and its reference rate its requested GPUs.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from lyra_baselines.lyra import LyraScheduler
from lyra_gym.envs.observation import (
    CLUSTER_FEATURES,
    JOB_FEATURES,
    ObservationBuilder,
    job_slots,
    log_time,
    observation_names,
    server_slots,
)
from lyra_gym.envs.observation_v2 import V2_CLUSTER_FEATURES, V2_JOB_FEATURES
from lyra_gym.model.demand import DemandCurve
from lyra_gym.run.simulate import build_engine
from lyra_gym.sim.plan import Plan
from toy import TOY, config, job

#: the window the cluster features are read against: starts at 400 s (A-D are warm-up jobs), 1000 s long
WINDOW = SimpleNamespace(start_s=400.0, length_s=1000.0)


def engine_at(t: float, checkpoint_s: float = 100.0):
    """Two 4-GPU V100 training servers, two 4-GPU T4 inference servers, restart 60 s, checkpoints
    every ``checkpoint_s`` s of run time. At 0: A (elastic 2..8, requested 4, 1000 s) starts on 3
    GPUs of server 0, B (2 GPUs, 1000 s) on borrowed server 2; C (8 GPUs) and D (1 GPU) wait. E and
    F (1 GPU) arrive at 500 and 900. The plan stands (Lyra's 60 s ticks pass) until time ``t``."""
    jobs = [job("A", 0, 4, 1000, True, 2, 8), job("B", 0, 2, 1000), job("C", 0, 8, 50), job("D", 0, 1, 10),
            job("E", 500, 1, 10), job("F", 900, 1, 10)]
    cfg = config(training=2, gpus=4, inference=2, rescale=0.0, restart=60.0, checkpoint_interval_s=checkpoint_s)
    engine = build_engine(jobs, LyraScheduler(), cfg, 0, TOY, demand=DemandCurve.constant(0))
    engine.begin()
    assert engine.next_decision()
    engine.submit(Plan(allocations={"A": {0: 3}, "B": {2: 2}}, borrow=(2,)))
    while engine.next_decision() and engine.now < t:
        engine.submit(engine.view.current_plan())
    assert engine.now == t
    return engine


def observe(view, k=6, window=WINDOW, version=2):
    builder = ObservationBuilder(k, 2, version=version)
    slots = job_slots(view, k)
    return builder, slots, builder.build(view, slots, server_slots(view, 2), window)


def v2_rows(builder, slots, obs) -> dict[str, dict[str, float]]:
    """Job id -> its version 2 features."""
    start, _, width = builder.layout["jobs"]
    first = start + len(JOB_FEATURES)
    return {j.id: dict(zip(V2_JOB_FEATURES, obs[first + i * width:first + i * width + len(V2_JOB_FEATURES)]))
            for i, j in enumerate(slots)}


def v2_cluster(builder, obs) -> dict[str, float]:
    start = builder.layout["cluster"][0] + len(CLUSTER_FEATURES)
    return dict(zip(V2_CLUSTER_FEATURES, obs[start:start + len(V2_CLUSTER_FEATURES)]))


def test_running_jobs_show_service_speedup_and_what_a_preemption_would_cost():
    builder, slots, obs = observe(engine_at(500.0).view)
    a, b = v2_rows(builder, slots, obs)["A"], v2_rows(builder, slots, obs)["B"]
    assert a["attained_service"] == pytest.approx(3 * 500 / 36000)  # 3 GPUs held for 500 s
    assert b["attained_service"] == pytest.approx(2 * 500 / 36000)
    assert a["statistical_efficiency"] == 1 and b["statistical_efficiency"] == 1  # toy: no curve
    assert a["speedup"] == pytest.approx(math.log2(1 + 3 / 4) / 4)  # 3 V100 against its 4 requested
    assert b["speedup"] == pytest.approx(math.log2(1 + 1 / 2) / 4)  # 2 T4 (1 sample/s) against 2 V100
    # restart 60 s + run time since the last checkpoint: 440 s of progress (after the 60 s start), one every 100 s
    assert a["preempt_cost"] == pytest.approx(log_time(60 + 40)) and b["preempt_cost"] == a["preempt_cost"]
    assert a["preemptions"] == 0


def test_without_checkpoints_a_preemption_costs_the_restart_alone():
    builder, slots, obs = observe(engine_at(500.0, checkpoint_s=0.0).view)
    assert v2_rows(builder, slots, obs)["A"]["preempt_cost"] == pytest.approx(log_time(60))


def test_queued_jobs_show_neutral_rates_and_a_preempted_job_counts_it():
    engine = engine_at(500.0)
    engine.submit(Plan(allocations={"B": {2: 2}}))  # A is preempted
    assert engine.next_decision()
    builder, slots, obs = observe(engine.view)
    rows = v2_rows(builder, slots, obs)
    a = rows["A"]
    assert engine.view.job("A").state.value == "queued"
    assert a["preemptions"] == pytest.approx(1 / 8)
    assert a["attained_service"] == pytest.approx(1500 / 36000)  # it keeps the service it had
    assert (a["statistical_efficiency"], a["speedup"], a["preempt_cost"]) == (1, 0, 0)
    assert rows["C"] == {"attained_service": 0, "statistical_efficiency": 1, "speedup": 0, "preemptions": 0,
                         "preempt_cost": 0}


def test_cluster_shows_time_in_window_and_arrivals_left():
    builder, _, obs = observe(engine_at(500.0).view)
    c = v2_cluster(builder, obs)
    assert c["window_elapsed"] == pytest.approx(0.1)           # (500 - 400) / 1000
    assert c["arrivals_left"] == pytest.approx(math.log1p(1) / 6)  # F; E arrived at 500 (queued now)
    assert c["arrivals_left_share"] == pytest.approx(1 / 2)    # of E and F, the window's jobs
    builder, _, obs = observe(engine_at(60.0).view)
    c = v2_cluster(builder, obs)
    assert c["window_elapsed"] == 0                            # before the window's start: clipped
    assert c["arrivals_left"] == pytest.approx(math.log1p(2) / 6) and c["arrivals_left_share"] == 1


def test_without_a_window_arrivals_are_counted_over_the_run():
    builder, _, obs = observe(engine_at(500.0).view, window=None)
    c = v2_cluster(builder, obs)
    assert c["window_elapsed"] == 0 and c["arrivals_left_share"] == pytest.approx(1 / 6)


def test_version_1_values_are_untouched_and_every_entry_is_named():
    view = engine_at(500.0).view
    v1, slots, one = observe(view, version=1)
    v2, _, two = observe(view)
    k, w1, w2 = 6, len(JOB_FEATURES), len(JOB_FEATURES) + len(V2_JOB_FEATURES)
    assert v2.names == observation_names(k, 2, JOB_FEATURES + V2_JOB_FEATURES, CLUSTER_FEATURES + V2_CLUSTER_FEATURES)
    assert v2.size == len(two) == v1.size + k * len(V2_JOB_FEATURES) + len(V2_CLUSTER_FEATURES)
    assert np.array_equal(two[:k * w2].reshape(k, w2)[:, :w1], one[:k * w1].reshape(k, w1))
    c1, c2 = v1.layout["cluster"][0], v2.layout["cluster"][0]
    assert np.array_equal(two[c2:c2 + len(CLUSTER_FEATURES)], one[c1:c1 + len(CLUSTER_FEATURES)])
    assert np.array_equal(two[v2.layout["servers"][0]:], one[v1.layout["servers"][0]:])
    assert v2.names[w1] == "job[0].attained_service"
    assert v2.names[c2 + len(CLUSTER_FEATURES)] == "cluster.window_elapsed"
    assert not two[len(slots) * w2:k * w2].any()  # empty slots: all 0


def test_an_env_s_own_features_follow_version_2_s():
    view = engine_at(500.0).view
    builder = ObservationBuilder(2, 1, ("x",), ("z",), version=2)
    obs = builder.build(view, job_slots(view, 2), server_slots(view, 1), WINDOW)
    width = len(JOB_FEATURES) + len(V2_JOB_FEATURES) + 1
    assert builder.job_width == width and builder.names[width - 1] == "job[0].x" and obs[width - 1] == 0
    start, _, cluster_width = builder.layout["cluster"]
    assert builder.names[start + cluster_width - 1] == "cluster.z" and obs[start + cluster_width - 1] == 0


@pytest.mark.parametrize("version", [0, 3, "2", True, None])
def test_an_unknown_version_is_refused_naming_the_field(version):
    with pytest.raises(ValueError, match=r"^version: must be one of \(1, 2\)"):
        ObservationBuilder(2, 1, version=version)
