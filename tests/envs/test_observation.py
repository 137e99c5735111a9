"""The common observation (``lyra_gym/envs/observation.py``), hand-computed on a toy cluster.

Toy profile (tests/toy.py): ``toy`` trains 1 sample/s per V100 and 0.5 per T4, all-reduce free,
so a job's work is duration x requested GPUs and n GPUs run n (V100) or n/2 (T4) samples/s.
"""

from __future__ import annotations

import numpy as np
import pytest

from lyra_baselines.lyra import LyraScheduler
from lyra_gym.model.demand import DemandCurve
from lyra_gym.envs.observation import (
    CLUSTER_FEATURES, JOB_FEATURES, ObservationBuilder, job_slots, log_time, observation_layout, server_slots,
)
from lyra_gym.sim.plan import Plan
from lyra_gym.run.simulate import build_engine
from toy import TOY, config, job


@pytest.fixture
def view():
    """Two 4-GPU V100 training servers (0, 1), two 4-GPU T4 inference servers (2, 3), no demand.
    A (elastic 2..8, requested 4) runs on 3 GPUs of server 0; B (2 GPUs) on borrowed server 2;
    C (8 GPUs) and D (1 GPU) wait."""
    jobs = [job("A", 0, 4, 1000, True, 2, 8), job("B", 0, 2, 100), job("C", 0, 8, 50), job("D", 0, 1, 10)]
    cfg = config(training=2, gpus=4, inference=2, rescale=0.0)
    engine = build_engine(jobs, LyraScheduler(), cfg, 0, TOY, demand=DemandCurve.constant(0))
    engine.begin()
    assert engine.next_decision()
    engine.submit(Plan(allocations={"A": {0: 3}, "B": {2: 2}}, borrow=(2,)))
    return engine.view


def rows(obs, builder):
    start, k, width = builder.layout["jobs"]
    return obs[start:start + k * width].reshape(k, width)


def cluster(obs, builder):
    start, _, width = builder.layout["cluster"]
    return dict(zip(CLUSTER_FEATURES, obs[start:start + width]))


def test_job_rows_show_pool_rate_flexible_workers_and_remaining_times(view):
    builder = ObservationBuilder(4, 2)
    slots = job_slots(view, 4)
    assert [j.id for j in slots] == ["D", "C", "A", "B"]  # queued by remaining time, elastic, inelastic
    obs = builder.build(view, slots, server_slots(view, 2))
    a, b = (dict(zip(JOB_FEATURES, r)) for r in rows(obs, builder)[2:])
    assert a["on_loaned"] == 0 and b["on_loaned"] == 1
    assert a["rate_ratio"] == pytest.approx(1.0)        # 3 V100 packed: the reference rate
    assert b["rate_ratio"] == pytest.approx(0.5)        # 2 T4: half of 2 V100
    assert a["flexible_workers"] == pytest.approx(1 / 64) and b["flexible_workers"] == 0  # A: 3 - min 2
    assert a["remaining_now"] == pytest.approx(log_time(4000 / 3))  # work 1000 x 4 at 3 samples/s
    assert b["remaining_now"] == pytest.approx(log_time(200))       # work 100 x 2 at 1 sample/s
    assert a["remaining_loaned"] == pytest.approx(log_time(2000))   # 4 T4: 2 samples/s
    assert b["remaining_loaned"] == pytest.approx(log_time(200))
    d = dict(zip(JOB_FEATURES, rows(obs, builder)[0]))
    assert d["queued"] == 1 and d["rate_ratio"] == 0 and d["remaining_now"] == pytest.approx(log_time(10))


def test_cluster_block_shows_fragmentation_and_what_the_slots_hide(view):
    builder = ObservationBuilder(1, 2)
    obs = builder.build(view, job_slots(view, 1), server_slots(view, 2))
    c = cluster(obs, builder)
    # server 0 has 1 free GPU, server 1 has 4
    assert [c[f] for f in ("servers_free_0", "servers_free_1", "servers_free_2_3", "servers_free_4_7",
                           "servers_free_8")] == [0, 0.5, 0, 0.5, 0]
    assert c["queue_head_wait"] == 0                      # t = 0: nobody has waited yet
    assert c["queue_tail_gpus"] == pytest.approx(8 / 8)   # C (8 GPUs) is outside the one slot
    assert c["running_unseen"] == pytest.approx(np.log1p(2) / 6)  # A and B
    assert c["free_training"] == pytest.approx(5 / 8)


def test_appended_features_widen_the_layout_and_are_left_zero(view):
    plain, wide = ObservationBuilder(2, 1), ObservationBuilder(2, 1, ("x", "y"), ("z",))
    slots, servers = job_slots(view, 2), server_slots(view, 1)
    p, w = plain.build(view, slots, servers), wide.build(view, slots, servers)
    assert wide.layout == observation_layout(2, 1, len(JOB_FEATURES) + 2, len(CLUSTER_FEATURES) + 1)
    assert wide.size == plain.size + 2 * 2 + 1
    wr = rows(w, wide)
    assert np.array_equal(wr[:, :len(JOB_FEATURES)], rows(p, plain)) and not wr[:, len(JOB_FEATURES):].any()
    start, _, width = wide.layout["cluster"]
    assert np.array_equal(w[start:start + width - 1], p[plain.layout["cluster"][0]:plain.layout["servers"][0]])
    assert w[start + width - 1] == 0
    assert np.array_equal(w[wide.layout["servers"][0]:], p[plain.layout["servers"][0]:])
