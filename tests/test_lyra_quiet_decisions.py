"""Lyra's shortcuts for decisions where little changed (a quiet cluster's knapsack rounds), against
the full path at every decision of runs:

- ``Decision._set_avail``: on a clean plan, ``avail``/``avail_cells``/``loaned_room`` copied from the
  last clean decision while the index version and ``RunningElastic.generation`` are the same; checked
  against a fresh computation at every decision (and reused at most quiet ticks).
- ``lyra_admission.admit`` with nothing in line returns at once (``EMPTY_LINE_EXIT``): the same
  plans, decision for decision, as the walk over the empty line (a job stopped by our own reclaim
  answer is in line: it restarts in that decision).
"""

from __future__ import annotations

import numpy as np
import pytest

from lyra_baselines import lyra_admission
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_state import Decision
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace
from tests.toy import config, jct, job, masked_random_rollout, run

LOADED = SimConfig(cluster=ClusterConfig(training=(ServerGroup(5, "v100", 8),), inference=ServerGroup(6, "t4", 8)))


def _checked_set_avail(monkeypatch) -> dict[str, int]:
    """Wrap ``Decision._set_avail``: its answer (reused or not) against one made with no kept
    set-up, at every decision; counts decisions, reuses and mismatches."""
    seen = {"decisions": 0, "reused": 0, "mismatches": 0}
    original = Decision._set_avail

    def checked(self, free, flex_cells):
        memory = self.memory
        before = memory.setup
        original(self, free, flex_cells)
        got = (list(self.avail), list(self.avail_cells), self.loaned_room)
        after = memory.setup
        seen["decisions"] += 1
        seen["reused"] += before is not None and after is before and _clean(self)
        memory.setup = None
        original(self, free, flex_cells)  # from scratch
        fresh = (list(self.avail), list(self.avail_cells), self.loaned_room)
        memory.setup = after
        self.avail, self.avail_cells, self.loaned_room = got[0], got[1], got[2]
        seen["mismatches"] += got != fresh

    monkeypatch.setattr(Decision, "_set_avail", checked)
    return seen


def _clean(d: Decision) -> bool:
    allocations = d.allocations
    return not (getattr(allocations, "touched", True) or d.plan.borrow or d.plan.give_back)


def test_the_reused_set_up_equals_a_fresh_one_in_a_guided_env(monkeypatch):
    seen = _checked_set_avail(monkeypatch)
    masked_random_rollout("LyraGym/Cluster-v1", 400, seed=3)
    assert seen["mismatches"] == 0
    assert seen["reused"] > 100 and seen["reused"] < seen["decisions"]  # quiet ticks reuse it, events do not


def test_the_reused_set_up_equals_a_fresh_one_on_a_loaded_cluster(monkeypatch):
    seen = _checked_set_avail(monkeypatch)
    jobs = generate_trace("bench-15d", 3)[:500]  # a small cluster: queues, loaning, reclaims
    simulate(jobs, LyraScheduler(), LOADED, seed=0)
    assert seen["mismatches"] == 0 and seen["reused"] > 20


def _plans(monkeypatch, exit_early: bool, run) -> list:
    """Every plan Lyra returns in ``run()``: (time, allocations, borrow, give_back)."""
    plans: list = []
    decide = LyraScheduler.decide_guided

    def logged(self, view, guidance):
        plan = decide(self, view, guidance)
        plans.append((view.now, dict(plan.allocations), tuple(plan.borrow), tuple(plan.give_back)))
        return plan

    with monkeypatch.context() as m:
        m.setattr(lyra_admission, "EMPTY_LINE_EXIT", exit_early)
        m.setattr(LyraScheduler, "decide_guided", logged)
        run()
    return plans


@pytest.mark.parametrize("env_id", ["LyraGym/Cluster-v1", "LyraGym/Elastic-v1"])
def test_admission_with_an_empty_line_decides_as_the_walk(env_id, monkeypatch):
    def run():
        masked_random_rollout(env_id, 250, seed=5)
    expected = _plans(monkeypatch, False, run)
    got = _plans(monkeypatch, True, run)
    assert got == expected
    assert len(got) > 300


def test_admission_with_an_empty_line_decides_as_the_walk_on_a_loaded_cluster(monkeypatch):
    jobs = generate_trace("bench-15d", 3)[:400]

    def run():
        simulate(jobs, LyraScheduler(), LOADED, seed=0)
    assert _plans(monkeypatch, True, run) == _plans(monkeypatch, False, run)


def test_a_job_our_reclaim_stops_restarts_in_the_same_decision_with_an_empty_line(monkeypatch):
    # Training server 0 (2 V100s), loaned server 1 (2 V100s); no move-back, so nothing but our own
    # reclaim answer puts a job in line. a (100 s) runs on 0, b (1000 s) on 1 ("overflow": no
    # waiting). a ends at 100; at 200 inference wants server 1 back with no job queued: b is
    # stopped and moves to server 0 in that very decision (45 s migration), 1000 - 200 = 800 s
    # left -> finishes at 200 + 45 + 800; left queued until the next tick (240) it would finish later.
    demand = DemandCurve(np.array([0.0, 200.0]), np.array([0, 1]))
    cfg = config(training=1, gpus=2, inference=1, inference_gpu="v100")
    jobs = [job("a", 0, 2, 100), job("b", 0, 2, 1000)]
    results = []

    def simulate_toy():
        results.append(run(jobs, LyraScheduler(move_back=False, loaned_rule="overflow"), cfg, demand))
    walked = _plans(monkeypatch, False, simulate_toy)
    got = _plans(monkeypatch, True, simulate_toy)
    assert got == walked
    assert (200.0, {"b": {0: 2}}, (), (1,)) in got
    assert [jct(r, "b") for r in results] == [pytest.approx(200 + 45 + 800)] * 2
