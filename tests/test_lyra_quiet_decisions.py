"""Lyra's shortcuts for decisions where little changed (a quiet cluster's knapsack rounds), against
the full path at every decision of runs:

- ``Decision._set_avail``: on a clean plan, ``avail``/``avail_cells``/``loaned_room`` copied from the
  last clean decision while the index version and ``RunningElastic.generation`` are the same; checked
  against a fresh computation at every decision (and reused at most quiet ticks).
- ``lyra_admission.admit`` with nothing in line returns at once (``EMPTY_LINE_EXIT``): the same
  plans, decision for decision, as the walk over the empty line.
"""

from __future__ import annotations

import pytest

from lyra_baselines import lyra_admission
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_state import Decision
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace
from tests.toy import masked_random_rollout

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
