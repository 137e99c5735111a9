"""The engine between two of an agent's steps (issue 24, the env step's speed): the shortcuts
``Engine.submit`` and ``Episode.run`` take must give what the full paths give.

- ``submit`` answers an unchanged current plan of this state (``plan.unchanged_current``) without
  ``apply``; every other plan still goes through ``apply`` (and an overdue reclaim is still enforced).
- a progress event reuses the GPU types ``_assign`` found (``Engine._job_types``): they must be
  those of the job's allocation at every decision point.
- ``SpanReward`` of the one ``jct`` term gives the float ``reward(weights, StepOutcome)`` gives.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lyra_gym.sim.engine as engine_module
from lyra_gym.envs.rewards import SpanReward, StepOutcome, reward
from lyra_gym.sim.plan import Plan, unchanged_current
from toy import engine_at_first_decision, job, masked_random_rollout, one_running_one_queued


@pytest.fixture
def engine():
    """Two jobs on one 4-GPU server: ``a`` (2 GPUs) running, ``b`` (2 GPUs) queued."""
    return one_running_one_queued()


def _token(engine):
    return (engine.identity, engine.state_version)


def test_unchanged_current_by_hand(engine):
    token = _token(engine)
    assert unchanged_current(engine.view.current_plan(), token)  # unread
    plan = engine.view.current_plan()
    assert dict(plan.allocations) == {"a": {0: 2}}
    assert unchanged_current(plan, token)  # read, not written
    plan.allocations["a"] = plan.allocations["a"]
    assert not unchanged_current(plan, token)  # touched (same value: apply finds no change)
    plan = engine.view.current_plan()
    plan.assign("b", {0: 2})
    assert not unchanged_current(plan, token)  # an assign
    plan = engine.view.current_plan()
    plan.suspend = ("a",)
    assert not unchanged_current(plan, token)  # a suspend
    plan = engine.view.current_plan()
    plan.batch_sizes = {"a": 8.0}
    assert not unchanged_current(plan, token)
    assert not unchanged_current(Plan(allocations={"a": {0: 2}}), token)  # not a current plan
    stale = engine.view.current_plan()
    read = engine.view.current_plan()
    read.allocations  # read
    new = engine.view.current_plan()
    new.assign("b", {0: 2})
    assert engine.submit(new)  # the state moves on: both earlier plans are stale now
    assert unchanged_current(stale, token) and unchanged_current(read, token)  # of their own state
    assert not unchanged_current(stale, _token(engine)) and not unchanged_current(read, _token(engine))


def test_submit_skips_apply_only_for_an_unchanged_current_plan(engine, monkeypatch):
    calls: list = []
    real = engine_module.Engine.apply

    def counted(self, plan):
        calls.append(plan)
        return real(self, plan)

    monkeypatch.setattr(engine_module.Engine, "apply", counted)
    decisions, version = engine.counts["decisions"], engine.state_version
    plan = engine.view.current_plan()
    plan.allocations  # read
    assert engine.submit(engine.view.current_plan()) is False and engine.submit(plan) is False
    assert calls == [] and engine.state_version == version
    assert engine.counts["decisions"] == decisions + 2
    touched = engine.view.current_plan()
    touched.allocations["a"] = touched.allocations["a"]
    assert engine.submit(touched) is False and calls == [touched]  # checked by apply: no change
    started = engine.view.current_plan()
    started.assign("b", {0: 2})
    assert engine.submit(started) is True and calls == [touched, started]
    assert engine.jobs[1].workers == 2


def test_submit_of_an_unchanged_plan_still_enforces_an_overdue_reclaim(monkeypatch):
    engine = engine_at_first_decision([job("a", 0.0, 2, 100.0)])
    called: list = []
    monkeypatch.setattr(engine_module.Engine, "_enforce_reclaims", lambda self: called.append(1) or True)
    engine._requests.append([1, engine.now])  # an open request (what _enforce_reclaims is asked about)
    engine._changed = False
    assert engine.submit(engine.view.current_plan()) is True
    assert called == [1] and engine._redecide and engine._changed


def _check_job_types(engine) -> None:
    for index in engine.running:
        job = engine.jobs[index]
        assert engine._job_types[index] == frozenset(engine.servers[sid].gpu_type for sid in job.allocation)


def test_the_gpu_types_kept_per_job_are_those_of_its_allocation(monkeypatch):
    """At every decision point of a guided rollout (progress events between them reuse them)."""
    seen: list = []
    real = engine_module.Engine.next_decision

    def checked(self):
        more = real(self)
        _check_job_types(self)
        seen.append(len(self.running))
        return more

    monkeypatch.setattr(engine_module.Engine, "next_decision", checked)
    masked_random_rollout("LyraGym/Cluster-v1", 60, seed=3)
    assert len(seen) > 60 and max(seen) > 0


@given(st.sampled_from([1.0, 2.5, 0.5, -1.0, 0.0, 1e-300]),
       st.one_of(st.sampled_from([0.0, -0.0, 60.0, 1e-9]), st.floats(0.0, 1e7, allow_nan=False)),
       st.integers(0, 5000), st.sampled_from([3600.0, 1.0, 7.5]))
def test_span_reward_of_jct_alone_is_the_reward_of_the_outcome(w, elapsed, in_system, scale):
    fast = SpanReward({"jct": w}, scale)(elapsed, in_system, 0, 0.5, 0)
    full = reward({"jct": w}, StepOutcome(elapsed, in_system, 0, 0.5, 0), scale)
    assert type(fast) is float and math.copysign(1.0, fast) == math.copysign(1.0, full)
    assert fast == full
