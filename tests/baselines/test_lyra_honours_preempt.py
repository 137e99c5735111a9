"""Lyra honours ``Guidance.preempt`` (issue 38 item 1): an agent's preemptions at random points.

At every decision a seeded chooser may name running jobs to preempt. Each decision must drop
exactly those jobs from the plan and not restart them in it; Lyra's kept state (the running
elastic jobs' splits kept by the change feed) must equal a rebuild from scratch at every
decision (``_CheckedDecision`` below); the lazy move-back line must give the
same jobs as the reference walk; every job still finishes. Plain runs are unchanged bit for
bit (``test_golden_results.py``, ``test_env_equivalence.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import lyra_baselines.lyra as lyra_module
import lyra_baselines.lyra_admission as admission_module
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_state import Decision
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Guidance
from lyra_gym.sim.view import ClusterView
from tests.baselines.test_lyra_random_workloads import CONFIG, SWITCHES, workloads
from toy import TOY, job


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


class _Preempting(LyraScheduler):
    """Lyra whose every decision may preempt random running jobs (a seeded chooser, at most
    ``budget`` preemptions a run, so every job finishes)."""

    chooser_seed = 0
    budget = 6
    share = 0.3  # chance that a decision preempts

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self.chooser = np.random.default_rng(self.chooser_seed)
        self.left = self.budget
        self.chosen_total = 0

    def decide(self, view: ClusterView) -> Plan:
        running = [j.id for j in view.running_jobs()]
        chosen: frozenset[str] = frozenset()
        if running and self.left > 0 and self.chooser.random() < self.share:
            count = int(self.chooser.integers(1, min(len(running), self.left) + 1))
            chosen = frozenset(self.chooser.choice(running, size=count, replace=False).tolist())
            self.left -= count
        # an id that is not running (queued or unknown) is ignored
        plan = self.decide_guided(view, Guidance(preempt=chosen | {"no-such-job"}))
        assert not chosen & plan.allocations.keys(), "a preempted job was restarted in the same decision"
        self.chosen_total += len(chosen)
        return plan


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setattr(lyra_module, "Decision", _CheckedDecision)
    _CheckedDecision.checked = _CheckedDecision.overlays = 0
    return _CheckedDecision


@pytest.mark.parametrize("backfill, loaned_rule, move_back, flex_horizon", SWITCHES[::3])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
@pytest.mark.sample(3)
def test_random_preemptions_keep_lyras_state_equal_to_a_rebuild(case, backfill, loaned_rule, move_back,
                                                                flex_horizon, checked):
    jobs, demand = case
    policy = _Preempting(backfill=backfill, loaned_rule=loaned_rule, move_back=move_back, flex_horizon=flex_horizon)
    result = simulate(jobs, policy, CONFIG, seed=0, profiles=TOY, demand=demand)
    assert result.metrics["jobs_unfinished"] == 0
    assert result.metrics["preemptions"] >= policy.chosen_total  # reclaims may preempt more


@pytest.mark.parametrize("move_back", [True, False])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
def test_random_preemptions_lazy_line_matches_the_reference_walk(case, move_back, monkeypatch):
    jobs, demand = case
    lazy = simulate(jobs, _Preempting(move_back=move_back), CONFIG, seed=0, profiles=TOY, demand=demand)
    monkeypatch.setattr(admission_module, "LAZY_LINE", False)
    monkeypatch.setattr(admission_module, "EMPTY_LINE_EXIT", False)
    reference = simulate(jobs, _Preempting(move_back=move_back), CONFIG, seed=0, profiles=TOY, demand=demand)
    assert lazy.jobs == reference.jobs


def test_a_preempted_job_waits_and_its_gpus_go_to_the_queue():
    """Hand-computed, 8 V100s (CONFIG: 2 servers x 4): ``a`` (4 GPUs) runs from 0 s; ``b``
    (2 GPUs, 100 s) arrives at 10 s and the agent preempts ``a`` then. ``b`` is admitted and ``a``
    is not restarted in that decision although 6 GPUs are free (no work was done yet: the
    first 20 s are its start overhead)."""
    jobs = [job("a", 0.0, 4, 1000.0), job("b", 10.0, 2, 100.0)]
    seen = {}

    class _Once(LyraScheduler):
        def decide(self, view: ClusterView) -> Plan:
            if view.now == 10.0:
                plan = self.decide_guided(view, Guidance(preempt=frozenset({"a"})))
                seen["plan"] = {job_id: sum(alloc.values()) for job_id, alloc in plan.allocations.items()}
                return plan
            return super().decide(view)

    result = simulate(jobs, _Once(loan=False), CONFIG, seed=0, profiles=TOY)
    assert seen["plan"] == {"b": 2}
    a = next(j for j in result.jobs if j["job_id"] == "a")
    assert a["preemptions"] == 1 and result.metrics["jobs_unfinished"] == 0
    # queued from 10 s until Lyra's next admission (its round at 120 s), then 20 s restart + 1000 s of work
    assert a["first_start"] == 0.0 and a["queue_total_s"] == 110.0 and a["finish_time"] == 1140.0


def test_an_empty_preempt_is_plain_lyra():
    """The neutral guidance is the heuristic (a check of the contract's default)."""
    assert Guidance().preempt == frozenset()
