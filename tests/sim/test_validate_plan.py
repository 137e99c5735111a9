"""``lyra_gym.sim.validate.validate_plan`` as a pure function on a hand-built state.

State: servers 0, 1 (training, V100 x 4), 2 (training, A100 x 4), 3 (inference T4 x 4, on loan),
4 and 5 (inference T4 x 4, off loan). Running: "run" (elastic 1..4) holds {0: 2}, "loan" holds
{3: 1}. Queued: "q" (2 GPUs, 2..2). Finished: "done". Every test checks the rule named in the
error, the field it names, and that nothing in the state changed.
"""

from __future__ import annotations

import numpy as np
import pytest

from lyra_gym.model.jobs import Job, JobState
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.plan import Plan, PlanError
from lyra_gym.sim.validate import validate_batches, validate_plan


def _state():
    servers = [Server(0, Pool.TRAINING, "v100", 4), Server(1, Pool.TRAINING, "v100", 4),
               Server(2, Pool.TRAINING, "a100", 4)]
    servers += [Server(i, Pool.INFERENCE, "t4", 4) for i in (3, 4, 5)]
    servers[3].loaned = True
    specs = [JobSpec("run", 0.0, 2, 100.0, "resnet50", True, 1, 4), JobSpec("loan", 0.0, 1, 100.0, "bert", False, 1, 1),
             JobSpec("q", 0.0, 2, 100.0, "ncf", False, 2, 2), JobSpec("done", 0.0, 1, 100.0, "ncf", False, 1, 1)]
    jobs = [Job(i, spec, 100.0) for i, spec in enumerate(specs)]
    for job, allocation in ((jobs[0], {0: 2}), (jobs[1], {3: 1})):
        job.state, job.allocation, job.workers = JobState.RUNNING, allocation, sum(allocation.values())
        for sid, gpus in allocation.items():
            servers[sid].used += gpus
            servers[sid].jobs[job.index] = gpus
    jobs[2].state = JobState.QUEUED
    jobs[3].state = JobState.FINISHED
    by_id = {job.spec.job_id: job for job in jobs}
    running = {"run": jobs[0].allocation, "loan": jobs[1].allocation}
    return servers, by_id, running


def _frozen(servers, by_id):
    return ([(s.id, s.used, dict(s.jobs), s.loaned) for s in servers],
            [(j.spec.job_id, j.state, dict(j.allocation)) for j in by_id.values()])


def check(plan: Plan, *, loanable: int = 2, mixed: bool = True):
    servers, by_id, running = _state()
    before = _frozen(servers, by_id)
    try:
        return validate_plan(plan, None, servers, by_id, running, object(), loanable, mixed)
    finally:
        assert _frozen(servers, by_id) == before  # pure: nothing changed, valid or not


def rejected(plan: Plan, rule: str, field: str, **kwargs) -> PlanError:
    with pytest.raises(PlanError) as info:
        check(plan, **kwargs)
    assert info.value.rule == rule and f"[{rule}]" in str(info.value)
    assert field in str(info.value), str(info.value)
    return info.value


def keep(**changes):
    """A full plan: every running job kept, then ``changes`` (None removes a job)."""
    allocations = {"run": {0: 2}, "loan": {3: 1}}
    for job_id, new in changes.items():
        if new is None:
            del allocations[job_id]
        else:
            allocations[job_id] = new
    return allocations


def test_a_valid_plan_lists_its_changes_in_plan_order_then_the_running_jobs_it_leaves_out():
    changes = check(Plan(allocations={"q": {1: 2}, "run": {0: 2, 1: 1}}, borrow=(4,)))
    assert [(job.spec.job_id, new) for job, new in changes] == [("q", {1: 2}), ("run", {0: 2, 1: 1}), ("loan", None)]


def test_unchanged_plan_has_no_changes():
    assert check(Plan(allocations=keep())) == []


def test_numpy_ids_and_counts_become_plain_ints():
    [(job, new)] = check(Plan(allocations=keep(q={np.int64(1): np.int32(2)})))
    assert job.spec.job_id == "q" and new == {1: 2}
    assert all(type(k) is int and type(v) is int for k, v in new.items())


def test_unknown_server_in_borrow():
    rejected(Plan(allocations=keep(), borrow=(99,)), "unknown-server", "borrow")


def test_unknown_server_in_an_allocation():
    rejected(Plan(allocations=keep(q={7: 2})), "unknown-server", "allocations['q']")


def test_not_loanable_a_training_server_or_one_already_on_loan():
    rejected(Plan(allocations=keep(), borrow=(0,)), "not-loanable", "borrow: server 0")
    rejected(Plan(allocations=keep(), borrow=(3,)), "not-loanable", "borrow: server 3")


def test_not_loanable_more_than_loanable():
    rejected(Plan(allocations=keep(), borrow=(4, 5)), "not-loanable", "2 servers asked, 1 loanable", loanable=1)


def test_not_on_loan_give_back():
    rejected(Plan(allocations=keep(), give_back=(4,)), "not-on-loan", "give_back: server 4")


def test_unknown_job_and_a_finished_one():
    rejected(Plan(allocations=keep(ghost={0: 1})), "unknown-job", "'ghost'")
    rejected(Plan(allocations=keep(done={0: 1})), "unknown-job", "'done'")


@pytest.mark.parametrize("gpus", [0, -1, True, 1.5])
def test_bad_gpu_count(gpus):
    rejected(Plan(allocations=keep(q={1: gpus})), "bad-gpu-count", "allocations['q']")


def test_server_unavailable_inference_server_off_loan():
    rejected(Plan(allocations=keep(q={4: 2})), "server-unavailable", "allocations['q']: server 4")


def test_server_unavailable_a_server_given_back_is_not_usable_in_the_same_plan():
    rejected(Plan(allocations=keep(loan={3: 1}), give_back=(3,)), "server-unavailable", "server 3")


def test_server_unavailable_a_returned_server_still_holding_a_job():
    # "loan" is left unchanged (not in the changes): its GPUs stay on server 3
    with pytest.raises(PlanError) as info:
        servers, by_id, running = _state()
        plan = Plan(allocations=keep(q={1: 2}), give_back=(3,))
        plan.allocations.pop("loan")
        plan.allocations["loan"] = running["loan"]  # the same object: no change
        validate_plan(plan, None, servers, by_id, running, object(), 2, True)
    assert info.value.rule == "server-unavailable" and "give_back: server 3" in str(info.value)


def test_worker_range():
    rejected(Plan(allocations=keep(run={0: 4, 1: 1})), "worker-range", "allocations['run']: 5 GPUs outside [1, 4]")
    rejected(Plan(allocations=keep(q={1: 1})), "worker-range", "allocations['q']")


def test_mixed_gpu_types_only_when_not_allowed():
    plan = Plan(allocations=keep(run={0: 2, 2: 1}))
    assert len(check(plan)) == 1
    rejected(plan, "mixed-gpu-types", "allocations['run']: spans GPU types ['a100', 'v100']", mixed=False)


def test_server_overfull_counts_gpus_freed_by_other_changes():
    rejected(Plan(allocations=keep(q={0: 2}, run={0: 3})), "server-overfull", "server 0: 5 GPUs planned, 4 present")
    assert len(check(Plan(allocations=keep(q={0: 2}, run={1: 2})))) == 2  # run's 2 GPUs on 0 freed first


def test_bad_suspend_a_job_the_plan_does_not_stop():
    rejected(Plan(allocations=keep(), suspend=("run",)), "bad-suspend", "suspend: job 'run'")
    assert [new for _, new in check(Plan(allocations=keep(run=None), suspend=("run",)))] == [None]


def test_batches_only_under_the_adaptive_rule_and_numbers_at_least_one():
    servers, by_id, running = _state()
    with pytest.raises(PlanError, match=r"\[bad-batch\].*this run: linear"):
        validate_batches(Plan(batch_sizes={"run": 64.0}), "linear", by_id)
    with pytest.raises(PlanError, match=r"\[bad-batch\]: batch_sizes\['run'\]: 0.5"):
        validate_batches(Plan(batch_sizes={"run": 0.5}), "adaptive", by_id)
    with pytest.raises(PlanError, match=r"\[unknown-job\]: batch_sizes: no job 'done'"):
        validate_batches(Plan(batch_sizes={"done": 64.0}), "adaptive", by_id)
    [(job, batch)] = validate_batches(Plan(batch_sizes={"run": np.int64(64)}), "adaptive", by_id)
    assert job.spec.job_id == "run" and batch == 64.0 and type(batch) is float
