"""The engine's short cut for a plan that changes nothing (issue 24, the env step's speed).

A current plan whose allocations were read but not changed (``TrackedAllocations`` of this
state, nothing touched, no loans, suspends or batches) is answered without ``validate_plan``;
any other plan is still validated in full (the same PlanError as before).
"""

from __future__ import annotations

import pytest

import lyra_gym.sim.engine as engine_module
from lyra_gym.sim.plan import PlanError
from toy import one_running_one_queued


@pytest.fixture
def engine():
    """Two jobs on one 4-GPU server: ``a`` (2 GPUs) running, ``b`` (2 GPUs) queued."""
    return one_running_one_queued()


def _no_validation(monkeypatch) -> list:
    calls: list = []
    real = engine_module.validate_plan

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_module, "validate_plan", counted)
    return calls


def test_a_current_plan_read_but_unchanged_is_no_change_without_validation(engine, monkeypatch):
    calls = _no_validation(monkeypatch)
    plan = engine.view.current_plan()
    assert dict(plan.allocations) == {"a": {0: 2}}  # read: the allocations are materialized
    version = engine.state_version
    assert engine.apply(plan) is False
    assert calls == [] and engine.state_version == version


def test_a_touched_or_stale_or_loaning_current_plan_is_still_validated(engine, monkeypatch):
    calls = _no_validation(monkeypatch)
    plan = engine.view.current_plan()
    plan.allocations["a"] = plan.allocations["a"]  # touched, same value: validated, no change
    assert engine.apply(plan) is False and len(calls) == 1
    plan = engine.view.current_plan()
    plan.allocations["b"] = {0: 9}  # touched, invalid: the same error as before
    with pytest.raises(PlanError, match="worker-range|server-overfull"):
        engine.apply(plan)
    plan = engine.view.current_plan()
    plan.allocations  # read
    plan.suspend = ("a",)  # suspending a job the plan does not stop: bad-suspend, not a silent no-op
    with pytest.raises(PlanError, match="bad-suspend"):
        engine.apply(plan)
    stale = engine.view.current_plan()
    stale.allocations  # read
    fresh = engine.view.current_plan()
    fresh.assign("b", {0: 2})
    assert engine.submit(fresh)  # b starts: the state moves on
    before = len(calls)
    assert engine.apply(stale) is True  # an earlier state's plan: checked in full, stops b again
    assert len(calls) == before + 1
