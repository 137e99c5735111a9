"""Plan validation: every invalid Plan is rejected whole, with the rule it breaks.

The engine state is built by hand: jobs are admitted with the engine's own
event processing at t = 0, then one valid plan starts some of them, borrowing
an inference server and placing a job on it in the same plan.

Cluster (server ids in brackets)::

    training   [0] [1]  v100 x 4 GPUs     [2]  a100 x 4 GPUs
    inference  [3] [4] [5]  t4 x 4 GPUs   demand = 1 server

After the setup plan: "alpha" (4, inelastic) fills server 0, "bravo"
(elastic 1..4) holds 2 GPUs on server 1, "charlie" (2, inelastic) holds 2 GPUs
on the loaned server 3; "delta" (1 GPU) is queued and "late" is not submitted
yet. One more server is loanable (3 inference servers - 1 demand - 1 loaned).
"""

from __future__ import annotations

import numpy as np
import pytest

from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobs import JobState
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import builtin_profiles
from lyra_gym.sim.engine import Engine
from lyra_gym.sim.plan import Plan, PlanError
from lyra_gym.sim.scheduler import Scheduler

PROFILES = builtin_profiles()


class _Unused(Scheduler):
    def decide(self, view):  # pragma: no cover - the tests call engine.apply directly
        raise AssertionError("not called")


def make_engine(allow_mixed_gpu_types: bool = True) -> Engine:
    config = SimConfig(
        cluster=ClusterConfig(
            training=(ServerGroup(2, "v100", 4), ServerGroup(1, "a100", 4)),
            inference=ServerGroup(3, "t4", 4),
        ),
        allow_mixed_gpu_types=allow_mixed_gpu_types,
    )
    jobs = [
        JobSpec("alpha", 0.0, 4, 5000.0, "resnet50", False, 4, 4),
        JobSpec("bravo", 0.0, 2, 5000.0, "bert", True, 1, 4),
        JobSpec("charlie", 0.0, 2, 5000.0, "ncf", False, 2, 2),
        JobSpec("delta", 0.0, 1, 5000.0, "resnet18", False, 1, 1),
        JobSpec("late", 1000.0, 1, 5000.0, "resnet18", False, 1, 1),
    ]
    engine = Engine(jobs, _Unused(), config, PROFILES, DemandCurve.constant(1), np.random.default_rng(0))
    # admit the jobs submitted at t = 0 with the engine's own event processing
    engine._advance_clock(0.0)
    engine._process_events(0.0, engine.demand.times_s, engine.demand.servers)
    assert [j.id for j in engine.view.queued_jobs()] == ["alpha", "bravo", "charlie", "delta"]
    assert engine.view.loanable_servers() == (3, 4)
    return engine


@pytest.fixture(params=[True, False], ids=["mixed-ok", "no-mixing"])
def engine(request) -> Engine:
    """The state described in the module docstring (reached by a valid plan)."""
    engine = make_engine(allow_mixed_gpu_types=request.param)
    changed = engine.apply(Plan(
        allocations={"alpha": {0: 4}, "bravo": {1: 2}, "charlie": {3: 2}},
        borrow=(3,),
    ))
    assert changed
    return engine


def snapshot(engine: Engine) -> dict:
    """Everything a plan could change."""
    return {
        "servers": [(s.id, s.used, dict(s.jobs), s.loaned) for s in engine.servers],
        "jobs": [
            (j.spec.job_id, j.state, dict(j.allocation), j.workers, j.work_done, j.rate, j.version,
             j.overhead_until, j.preemptions, j.scale_ins, j.scale_outs, j.migrations, j.first_start)
            for j in engine.jobs
        ],
        "queue": list(engine.queue),
        "running": list(engine.running),
        "loaned_count": engine.loaned_count,
        "used": (engine.used_training, engine.used_loaned),
        "counts": dict(engine.counts),
        "requests": [list(r) for r in engine._requests],
        "heap": sorted(engine._heap),
        "now": engine.now,
    }


def current(engine: Engine) -> Plan:
    """A mutable copy of the plan that changes nothing."""
    return Plan(allocations={k: dict(v) for k, v in engine.view.current_plan().allocations.items()})


def assert_rejected(engine: Engine, plan: Plan, rule: str, *names: str) -> PlanError:
    before = snapshot(engine)
    with pytest.raises(PlanError) as info:
        engine.apply(plan)
    err = info.value
    assert err.rule == rule, str(err)
    assert f"[{rule}]" in str(err)
    for name in names:
        assert name in str(err), (name, str(err))
    assert snapshot(engine) == before, "a rejected plan changed the state"
    return err


# --------------------------------------------------------------------------- the setup itself
def test_setup_plan_borrows_and_places_in_one_plan(engine):
    s3 = engine.servers[3]
    assert s3.loaned and s3.used == 2 and engine.loaned_count == 1
    charlie = engine.job_by_id("charlie")
    assert charlie.state is JobState.RUNNING and dict(charlie.allocation) == {3: 2}
    assert engine.counts["servers_borrowed"] == 1 and engine.counts["starts"] == 3
    assert engine.num_loanable() == 1
    assert engine.job_by_id("delta").state is JobState.QUEUED
    assert engine.job_by_id("late").state is JobState.PENDING


def test_valid_plan_borrows_a_server_and_places_a_job_on_it(engine):
    plan = current(engine)
    plan.borrow = (4,)
    plan.allocations["delta"] = {4: 1}
    assert engine.apply(plan) is True
    assert engine.servers[4].loaned and engine.servers[4].used == 1
    assert engine.servers[4].jobs == {engine.job_by_id("delta").index: 1}
    assert engine.loaned_count == 2 and engine.num_loanable() == 0
    assert engine.job_by_id("delta").state is JobState.RUNNING
    assert engine.counts["servers_borrowed"] == 2


def test_unchanged_plan_changes_nothing(engine):
    before = snapshot(engine)
    assert engine.apply(current(engine)) is False
    assert engine.apply(engine.view.current_plan()) is False
    assert snapshot(engine) == before


# --------------------------------------------------------------------------- invalid plans
def test_server_overfull(engine):
    plan = current(engine)
    plan.allocations["delta"] = {0: 1}  # server 0 is full with alpha
    assert_rejected(engine, plan, "server-overfull", "server 0")
    plan = current(engine)
    plan.allocations["bravo"] = {1: 4}
    plan.allocations["delta"] = {1: 1}  # 5 GPUs on a 4-GPU server, from two jobs
    assert_rejected(engine, plan, "server-overfull", "server 1")


def test_worker_count_outside_range(engine):
    plan = current(engine)
    plan.allocations["charlie"] = {3: 1}  # inelastic job of 2 given 1
    assert_rejected(engine, plan, "worker-range", "charlie")
    plan = current(engine)
    plan.allocations["bravo"] = {1: 2, 3: 2, 4: 1}  # elastic max 4, given 5
    plan.borrow = (4,)
    assert_rejected(engine, plan, "worker-range", "bravo")
    plan = current(engine)
    plan.allocations["delta"] = {1: 2}  # a queued job started above its maximum
    assert_rejected(engine, plan, "worker-range", "delta")


def test_unknown_job(engine):
    plan = current(engine)
    plan.allocations["no-such-job"] = {1: 1}
    assert_rejected(engine, plan, "unknown-job", "no-such-job")
    plan = current(engine)
    plan.allocations["late"] = {1: 1}  # in the trace, but not submitted yet
    assert_rejected(engine, plan, "unknown-job", "late")
    plan = current(engine)
    del plan.allocations["alpha"]  # a preemption does not hide the bad id
    plan.allocations["ghost"] = {0: 1}
    assert_rejected(engine, plan, "unknown-job", "ghost")


def test_unknown_server(engine):
    plan = current(engine)
    plan.allocations["delta"] = {99: 1}
    assert_rejected(engine, plan, "unknown-server", "99", "delta")
    plan = current(engine)
    plan.allocations["delta"] = {-1: 1}
    assert_rejected(engine, plan, "unknown-server", "-1", "delta")
    assert_rejected(engine, Plan(allocations=current(engine).allocations, borrow=(42,)), "unknown-server", "42")
    assert_rejected(engine, Plan(allocations=current(engine).allocations, give_back=(42,)), "unknown-server", "42")


@pytest.mark.parametrize("gpus", [0, -1, 1.5, True])
def test_bad_gpu_count(engine, gpus):
    plan = current(engine)
    plan.allocations["delta"] = {1: gpus}
    assert_rejected(engine, plan, "bad-gpu-count", "delta", "server 1")
    plan = current(engine)
    plan.allocations["bravo"] = {1: 2, 2: gpus}  # on a running job too
    assert_rejected(engine, plan, "bad-gpu-count", "bravo", "server 2")


def test_numpy_integers_are_valid_and_kept_as_plain_ints(engine):
    plan = current(engine)
    plan.allocations["delta"] = {np.int64(2): np.int32(1)}
    plan.allocations["bravo"] = {np.int16(1): np.int64(3)}  # a running job: scaled out
    assert engine.apply(plan) is True
    for job_id, expected in (("delta", {2: 1}), ("bravo", {1: 3})):
        allocation = engine.job_by_id(job_id).allocation
        assert allocation == expected
        assert all(type(k) is int and type(v) is int for k, v in allocation.items()), allocation
        assert all(type(v) is int for v in engine.running_allocations[job_id].values())
    assert engine.servers[1].used == 3 and engine.servers[2].used == 1 and engine.used_training == 4 + 3 + 1
    assert engine.job_by_id("bravo").workers == 3 and engine.counts["scale_outs"] == 1


def test_inference_server_not_on_loan_is_unavailable(engine):
    plan = current(engine)
    plan.allocations["delta"] = {4: 1}
    assert_rejected(engine, plan, "server-unavailable", "delta", "server 4")
    plan = current(engine)
    plan.allocations["bravo"] = {1: 2, 5: 1}  # scale-out onto an unloaned server
    assert_rejected(engine, plan, "server-unavailable", "bravo", "server 5")


def test_give_back_a_server_not_on_loan(engine):
    assert_rejected(engine, Plan(allocations=current(engine).allocations, give_back=(4,)), "not-on-loan", "4")
    assert_rejected(engine, Plan(allocations=current(engine).allocations, give_back=(0,)), "not-on-loan", "0")
    plan = current(engine)  # a server cannot be borrowed and given back in one plan
    plan.borrow, plan.give_back = (4,), (4,)
    assert_rejected(engine, plan, "not-on-loan", "4")


def test_borrow_more_than_loanable_or_a_training_server(engine):
    assert engine.num_loanable() == 1
    err = assert_rejected(engine, Plan(allocations=current(engine).allocations, borrow=(4, 5)), "not-loanable")
    assert "2" in str(err) and "1 loanable" in str(err)
    assert_rejected(engine, Plan(allocations=current(engine).allocations, borrow=(0,)), "not-loanable", "server 0")
    assert_rejected(engine, Plan(allocations=current(engine).allocations, borrow=(3,)), "not-loanable", "server 3")
    assert_rejected(engine, Plan(allocations=current(engine).allocations, borrow=(4, 4)), "not-loanable", "4")


def test_give_back_a_server_the_plan_keeps_a_job_on(engine):
    plan = current(engine)  # charlie stays on server 3
    plan.give_back = (3,)
    assert_rejected(engine, plan, "server-unavailable", "server 3")
    plan = current(engine)  # charlie moved onto the server being given back
    plan.allocations["bravo"] = {1: 2, 3: 1}
    plan.give_back = (3,)
    assert_rejected(engine, plan, "server-unavailable", "3")


def test_give_back_after_freeing_the_server_is_valid(engine):
    plan = current(engine)
    plan.allocations["charlie"] = {1: 2}  # move charlie off the loaned server
    plan.give_back = (3,)
    assert engine.apply(plan) is True
    assert not engine.servers[3].loaned and engine.servers[3].used == 0 and engine.loaned_count == 0
    assert dict(engine.job_by_id("charlie").allocation) == {1: 2}
    assert engine.counts["servers_returned"] == 1 and engine.counts["migrations"] == 1


def test_mixed_gpu_types():
    engine = make_engine(allow_mixed_gpu_types=False)
    engine.apply(Plan(allocations={"alpha": {0: 4}, "bravo": {1: 2}, "charlie": {3: 2}}, borrow=(3,)))
    plan = current(engine)
    plan.allocations["bravo"] = {1: 2, 2: 1}  # v100 + a100
    assert_rejected(engine, plan, "mixed-gpu-types", "bravo", "a100", "v100")
    plan = current(engine)
    plan.allocations["bravo"] = {1: 2, 3: 2}  # v100 + loaned t4
    assert_rejected(engine, plan, "mixed-gpu-types", "bravo", "t4")
    plan = current(engine)
    plan.allocations["bravo"] = {1: 2, 0: 0}  # a GPU count error comes before the mixing rule
    assert_rejected(engine, plan, "bad-gpu-count", "bravo")


def test_mixed_gpu_types_allowed_by_default():
    engine = make_engine(allow_mixed_gpu_types=True)
    engine.apply(Plan(allocations={"alpha": {0: 4}, "bravo": {1: 2}, "charlie": {3: 2}}, borrow=(3,)))
    plan = current(engine)
    plan.allocations["bravo"] = {1: 2, 2: 1, 3: 1}  # v100 + a100 + t4
    assert engine.apply(plan) is True
    bravo = engine.job_by_id("bravo")
    assert bravo.workers == 4 and bravo.scale_outs == 1


def test_nothing_is_half_applied(engine):
    """A plan with many valid parts and one bad part leaves no trace."""
    plan = current(engine)
    del plan.allocations["alpha"]                 # preempt alpha
    plan.allocations["bravo"] = {1: 4}            # scale bravo out
    plan.allocations["charlie"] = {0: 2}          # move charlie off the loaned server
    plan.allocations["delta"] = {4: 1}            # start delta on a server borrowed below
    plan.borrow = (4,)
    plan.give_back = (3,)
    plan.allocations["late"] = {2: 1}             # ... but "late" is not in the system yet
    assert_rejected(engine, plan, "unknown-job", "late")
    del plan.allocations["late"]
    plan.allocations["delta"] = {4: 1, 2: 1}      # ... or delta above its maximum
    assert_rejected(engine, plan, "worker-range", "delta")
    plan.allocations["delta"] = {4: 1}            # the rest is valid and applies in one go
    assert engine.apply(plan) is True
    assert engine.job_by_id("alpha").state is JobState.QUEUED
    assert engine.servers[3].loaned is False and engine.servers[4].loaned is True
    assert [engine.servers[i].used for i in range(6)] == [2, 4, 0, 0, 1, 0]


def test_a_copied_or_pickled_current_plan_is_a_plain_dict_checked_in_full():
    import copy
    import pickle

    from lyra_gym.sim.plan import TrackedAllocations

    tracked = TrackedAllocations({"a": {0: 1}}, token=("engine", 1))
    tracked["b"] = {1: 2}
    for clone in (pickle.loads(pickle.dumps(tracked)), copy.copy(tracked)):
        assert type(clone) is dict and clone == {"a": {0: 1}, "b": {1: 2}}
    assert list(tracked.touched) == ["b"]
