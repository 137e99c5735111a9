"""The small seams of ``lyra_gym.sim`` as units: event queue, reclaim ledger and default rule,
accounting, overhead rules. Expectations computed by hand."""

from __future__ import annotations

import pytest

from lyra_gym.model.config import OverheadConfig
from lyra_gym.model.jobs import Job, JobState
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.sim.accounting import COUNT_NAMES, Accounting
from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.events import COMPLETION, DEADLINE, TICK, EventQueue
from lyra_gym.sim.overheads import OverheadModel
from lyra_gym.sim.reclaim import ReclaimLedger, free_victims, loanable, owed, reclaim_victims
from tests.toy import TOY


def _job(index: int, job_id: str = "j", elastic: bool = False, lo: int = 1, hi: int = 1) -> Job:
    """A job of ``hi`` GPUs (elastic: ``lo`` to ``hi``)."""
    return Job(index, JobSpec(job_id, 0.0, hi, 10.0, "toy", elastic, lo if elastic else hi, hi), 10.0)


# --------------------------------------------------------------------------- event queue
def test_queue_orders_by_time_then_push_order_and_drops_stale_completions():
    jobs = [_job(0), _job(1)]
    for job in jobs:
        job.state = JobState.RUNNING
    queue = EventQueue(jobs)
    assert queue.live_top() is None
    queue.push(5.0, COMPLETION, 0, 0)
    queue.push(5.0, TICK)
    queue.push(3.0, COMPLETION, 1, 0)
    queue.push(4.0, DEADLINE)
    assert queue.seq == 4 and len(queue) == 4
    jobs[1].version = 1  # job 1 changed since its completion was pushed: stale
    assert queue.live_top() == (4.0, 4, DEADLINE, -1, 0) and len(queue) == 3
    assert queue.pop() == (4.0, 4, DEADLINE, -1, 0)
    assert queue.live_top() == (5.0, 1, COMPLETION, 0, 0)  # same instant: pushed first, first
    jobs[0].state = JobState.QUEUED  # stopped: its completion is stale too
    assert queue.live_top() == (5.0, 2, TICK, -1, 0)
    assert queue.live_top() is queue.heap[0]


# --------------------------------------------------------------------------- reclaim ledger
def test_owed_and_loanable_counts():
    # 4 inference servers, 2 on loan: demand 1 -> 1 loanable, nothing owed; demand 3 -> 1 owed
    assert (loanable(4, 2, 1), owed(4, 2, 1)) == (1, 0)
    assert (loanable(4, 2, 3), owed(4, 2, 3)) == (0, 1)
    assert owed(4, 2, 9) == 2  # never more than is on loan


def test_ledger_opens_a_request_per_shortfall_and_pays_the_oldest_first():
    ledger = ReclaimLedger(grace_s=60.0)
    assert not ledger and ledger.deadline() is None
    assert ledger.sync(2, now=10.0) == 70.0
    assert ledger.sync(3, now=20.0) == 80.0  # one more owed: a second request
    assert [list(r) for r in ledger.requests] == [[2, 70.0], [1, 80.0]]
    assert ledger.sync(3, now=30.0) is None  # unchanged
    assert ledger.due(69.0) == 0 and ledger.due(70.0) == 2 and ledger.due(80.0) == 3
    assert ledger.sync(1, now=40.0) is None  # two paid: the oldest request first
    assert [list(r) for r in ledger.requests] == [[1, 80.0]] and ledger.deadline() == 80.0
    assert ledger.sync(0, now=50.0) is None and not ledger


def test_default_rule_returns_least_used_servers_and_scales_in_or_preempts():
    servers = [Server(i, Pool.INFERENCE, "t4", 4) for i in range(4)]
    for s in servers[:3]:
        s.loaned = True
    jobs = [_job(0, "elastic", elastic=True, lo=1, hi=4), _job(1, "rigid", hi=2)]
    for server, job, gpus in ((servers[0], 0, 2), (servers[1], 0, 1), (servers[1], 1, 2)):
        server.jobs[job] = gpus
        server.used += gpus
    # used: server 0: 2, server 1: 3, server 2: 0 (server 3 is not on loan)
    assert [s.id for s in reclaim_victims(servers, 2)] == [2, 0]
    allocations = {"elastic": {0: 2, 1: 1}, "rigid": {1: 2}}
    free_victims(allocations, [servers[1]], jobs)
    assert allocations == {"elastic": {0: 2}}  # elastic scaled in (2 >= 1), rigid preempted
    free_victims(allocations, [servers[0]], jobs)
    assert allocations == {}  # 0 GPUs left: below its minimum


# --------------------------------------------------------------------------- accounting
def test_accounting_integrates_gpu_seconds():
    accounting = Accounting(start_time=0.0, gpus_per_inference_server=4, inference_servers=3)
    assert list(accounting.counts) == list(COUNT_NAMES) and not any(accounting.counts.values())
    accounting.used_training, accounting.used_loaned = 6, 2
    accounting.integrate(10.0, loaned=1, demand=1)
    # training 6 x 10; loaned 2 x 10; loaned capacity 1 server x 4 GPUs x 10;
    # serving min(demand 1, 3 - 1 loaned) = 1 server x 4 GPUs x 10
    assert (accounting.gpu_s_training, accounting.gpu_s_loaned, accounting.gpu_s_loaned_capacity,
            accounting.gpu_s_inference_busy) == (60.0, 20.0, 40.0, 40.0)
    accounting.integrate(5.0, loaned=0, demand=5)  # serving capped at the 3 servers there are
    assert (accounting.gpu_s_training, accounting.gpu_s_loaned, accounting.gpu_s_inference_busy) == (90.0, 20.0, 100.0)


# --------------------------------------------------------------------------- overheads
def test_overheads_of_rescale_migration_resume_and_restart():
    counts = dict.fromkeys(COUNT_NAMES, 0)
    model = OverheadModel(OverheadConfig(restart_s=30.0, rescale_s=5.0, migrate_s=7.0, resume_s=1.0), TOY, counts)
    job = _job(0, elastic=True, hi=4)
    assert model.rescale(job, 4, 2) == 5.0 and job.scale_outs == 1
    assert model.rescale(job, 1, 4) == 5.0 and job.scale_ins == 1
    assert model.rescale(job, 1, 1) == 7.0 and job.migrations == 1
    assert model.start(job, {0: 1}) == 30.0  # preempted (not suspended): restart
    model.suspend(job, {0: 1, 1: 1})
    job.suspended = True
    assert model.start(job, {1: 2, 0: 3}) == 1.0 and not job.suspended  # same servers: resume
    model.suspend(job, {0: 1})
    job.suspended = True
    assert model.start(job, {1: 1}) == 7.0 and job.migrations == 2  # elsewhere: a migration
    assert (counts["scale_outs"], counts["scale_ins"], counts["migrations"]) == (1, 1, 2)


def test_restart_overhead_of_the_profile_when_the_config_has_none():
    model = OverheadModel(OverheadConfig(restart_s=None), TOY, dict.fromkeys(COUNT_NAMES, 0))
    assert model.start(_job(0), {0: 1}) == pytest.approx(TOY.model("toy").restart_overhead_s)
