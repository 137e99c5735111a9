"""Hand-computed scenarios: exact JCTs, overheads, reclaims and violations (toy profile: tests/toy.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lyra_gym.model.demand import DemandCurve
from lyra_gym.sim.scheduler import Scheduler
from toy import config, jct, job, run

# --- two jobs queued behind a third on one server -------------------------------------
# X (8 GPUs, 50 s) starts at 0; A (100 s) arrives at 1, B (20 s) at 2.
# FIFO: A 50-150, B 150-170 -> JCTs X 50, A 149, B 168.
# SJF:  B 50-70,  A 70-170  -> JCTs X 50, B 68,  A 169.
ONE_SERVER = [job("X", 0, 8, 50), job("A", 1, 8, 100), job("B", 2, 8, 20)]


def test_fifo_runs_queued_jobs_in_submit_order():
    result = run(ONE_SERVER, "fifo", config())
    assert (jct(result, "X"), jct(result, "A"), jct(result, "B")) == (50, 149, 168)
    assert result.metrics["jct_mean_s"] == pytest.approx((50 + 149 + 168) / 3)
    assert result.metrics["queue_mean_s"] == pytest.approx((0 + 49 + 148) / 3)
    assert result.metrics["makespan_s"] == 170
    assert result.metrics["gpu_usage_training"] == pytest.approx(1.0)


def test_sjf_runs_the_shorter_queued_job_first():
    result = run(ONE_SERVER, "sjf", config())
    assert (jct(result, "X"), jct(result, "B"), jct(result, "A")) == (50, 68, 169)
    assert result.metrics["jct_mean_s"] == pytest.approx((50 + 68 + 169) / 3)


def test_restart_overhead_delays_completion_exactly():
    result = run([job("A", 0, 8, 100)], "fifo", config(restart=15.0))
    assert jct(result, "A") == 115


# --- an elastic job scaled from 2 to 4 workers mid-run ---------------------------------
class ScaleAt(Scheduler):
    """Starts every queued job at its requested size; at time >= ``when`` grows job E to 4 GPUs."""

    tick_interval = 10.0

    def __init__(self, when: float) -> None:
        self.when = when

    def decide(self, view):
        plan = view.current_plan()
        for j in view.queued_jobs():
            plan.allocations[j.id] = {0: j.spec.num_gpus}
        for j in view.running_jobs():
            if view.now >= self.when and j.workers == 2:
                plan.allocations[j.id] = {0: 4}
        return plan


def test_elastic_scale_out_with_rescale_overhead_gives_exact_finish():
    # work = 100 s x 2 GPUs = 200 samples. Start at 0 with a 5 s restart:
    # 2/s from 5 to 40 -> 70 samples. Scale to 4 at 40, 30 s rescale -> no progress
    # until 70; 130 samples at 4/s -> 32.5 s -> finish at 102.5.
    spec = job("E", 0, 2, 100, elastic=True, lo=2, hi=4)
    result = run([spec], ScaleAt(when=40), config(gpus=4, restart=5.0, rescale=30.0))
    assert jct(result, "E") == pytest.approx(102.5, abs=1e-9)
    assert result.metrics["scale_events"] == 1 and result.metrics["scale_outs"] == 1


# --- reclaiming a loaned server ----------------------------------------------------------
class BorrowAll(Scheduler):
    """Borrows every loanable server, first-fits queued jobs, and answers reclaims if ``answer``."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer

    def decide(self, view):
        plan = view.current_plan()
        plan.borrow = view.loanable_servers()
        if self.answer and view.reclaim_pending:
            back = view.loaned_servers()[: view.reclaim_pending]
            plan.give_back = back
            for j in list(view.running_jobs()):
                if any(s in back for s in j.allocation):
                    del plan.allocations[j.id]
        free = view.free_gpus()
        for sid in plan.borrow:
            free[sid] = view.servers[sid].num_gpus
        for sid in plan.give_back:
            free[sid] = 0
        for j in view.queued_jobs():
            for sid, f in enumerate(free):
                if f >= j.spec.num_gpus:
                    plan.allocations[j.id] = {sid: j.spec.num_gpus}
                    free[sid] -= j.spec.num_gpus
                    break
        return plan


# Server 0: training, 4 V100. Server 1: inference, 4 T4, idle until inference needs it at t=100.
# A and B (4 GPUs, 100 s -> 400 samples each) arrive at 0; A gets server 0 (4/s), B the loaned
# server 1 (2/s). Restart overhead 10 s.
RECLAIM_JOBS = [job("A", 0, 4, 100), job("B", 0, 4, 100)]
DEMAND = DemandCurve(np.array([0.0, 100.0]), np.array([0, 1]))


def test_reclaim_preempts_the_inelastic_job_on_the_loaned_server():
    # B: overhead to 10, 2/s until 100 -> 180 samples. Reclaimed at 100 -> preempted.
    # A finishes at 10 + 400/4 = 110; B restarts on server 0: overhead to 120, 220/4 = 55 s -> 175.
    result = run(RECLAIM_JOBS, BorrowAll(answer=True), config(gpus=4, inference=1, restart=10.0), DEMAND)
    assert jct(result, "A") == 110
    assert jct(result, "B") == pytest.approx(175, abs=1e-9)
    m = result.metrics
    assert m["preemptions"] == 1 and m["servers_borrowed"] == 1 and m["servers_returned"] == 1
    assert m["inference_violations"] == 0
    assert m["preempted_job_share"] == 0.5
    assert m["reclaim_disruptions"] == 1  # B, preempted off the returned server


def test_unanswered_reclaim_counts_a_violation_and_returns_by_default_rule():
    # Grace 20 s: deadline 120. B keeps running on the T4 server: 10..120 -> 220 samples.
    # At 120 the engine returns server 1 itself (violation) and preempts B; the scheduler then
    # restarts B on server 0 (free since 110): overhead to 130, 180/4 = 45 s -> 175.
    cfg = config(gpus=4, inference=1, restart=10.0, grace=20.0)
    result = run(RECLAIM_JOBS, BorrowAll(answer=False), cfg, DEMAND)
    m = result.metrics
    assert m["inference_violations"] == 1 and m["servers_returned"] == 1 and m["preemptions"] == 1
    assert m["reclaim_disruptions"] == 1  # B, preempted by the default rule
    assert jct(result, "A") == 110
    assert jct(result, "B") == pytest.approx(175, abs=1e-9)


def test_forced_return_scales_in_an_elastic_job_above_its_minimum():
    # E (elastic 4..8) runs on server 0 (4 V100) and loaned server 1 (4 T4): 8 workers at the
    # slowest pace (T4: 0.5/s each) = 4/s. Unanswered reclaim at 100 (grace 0): E keeps its
    # 4 training workers (scale-in, 30 s rescale), no preemption.
    class Spread(BorrowAll):
        def decide(self, view):
            plan = view.current_plan()
            plan.borrow = view.loanable_servers()
            for j in view.queued_jobs():
                plan.allocations[j.id] = {0: 4, **({1: 4} if plan.borrow else {})}
            return plan

    # 150 s at 4 -> 600 samples; 400 done by 100, rescale to 130, then 200 samples at
    # 4/s (4 V100) -> 50 s -> finish 180.
    spec = job("E", 0, 4, 150, elastic=True, lo=4, hi=8)
    cfg = dataclasses.replace(config(gpus=4, inference=1, restart=0.0), allow_mixed_gpu_types=True)  # E spans types
    result = run([spec], Spread(answer=False), cfg, DEMAND)
    assert jct(result, "E") == pytest.approx(180, abs=1e-9)
    m = result.metrics
    assert m["inference_violations"] == 1 and m["scale_ins"] == 1 and m["preemptions"] == 0
    assert m["reclaim_disruptions"] == 1  # E, scaled in by the default rule
