"""The public view members the observation builder reads (issue 41 item 2): ``JobView.snapshot()``
and ``ClusterView.snapshots(jobs)`` are the job's members read one by one, in every knowledge mode; the queue
aggregates are the per-job members folded; a finished job's duration is the trace's."""

from __future__ import annotations

import dataclasses
import random

import pytest

from lyra_baselines.lyra import LyraScheduler
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobs import JobState
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.model.scaling import PROGRESS_BINS
from lyra_gym.run.simulate import build_engine
from lyra_gym.sim.plan import Plan
from toy import TOY, config, job


def run_to(t: float, mode: str = "oracle", start_d: bool = False):
    """A (elastic 2..8, 1000 s) on 3 GPUs and B (2 GPUs, 1000 s) on a borrowed server from 0; C
    (8 GPUs) and D (1 GPU, 10 s) wait (D runs on server 1 if ``start_d``); E arrives at 500. The plan
    stands until ``t``."""
    jobs = [job("A", 0, 4, 1000, True, 2, 8), job("B", 0, 2, 1000), job("C", 0, 8, 50), job("D", 0, 1, 10),
            job("E", 500, 1, 10)]
    cfg = config(training=2, gpus=4, inference=2, rescale=0.0, restart=60.0)
    if mode != "oracle":
        cfg = dataclasses.replace(cfg, knowledge=KnowledgeConfig(mode=mode, sigma=0.5))
    engine = build_engine(jobs, LyraScheduler(), cfg, 0, TOY, demand=DemandCurve.constant(0))
    engine.begin()
    assert engine.next_decision()
    started = {"A": {0: 3}, "B": {2: 2}, **({"D": {1: 1}} if start_d else {})}
    engine.submit(Plan(allocations=started, borrow=(2,)))
    while engine.next_decision() and engine.now < t:
        engine.submit(engine.view.current_plan())
    return engine.view


@pytest.mark.parametrize("mode", ["oracle", "estimate"])
@pytest.mark.parametrize("t", [0.0, 30.0, 600.0])
def test_snapshot_is_the_members_read_one_by_one(mode, t):
    view = run_to(t, mode)
    for j in view.all_jobs():
        expected = (j.state, j.allocation, j.workers, j.rate, j.overhead_until, j.remaining_work, j.attained_gpu_s,
                    j.progress_part)
        assert j.snapshot() == expected, j.id
        assert j.snapshot()[1] is j.allocation  # the engine's mapping itself (replaced, never changed)


def test_the_believed_remaining_work_with_the_true_part():
    truth, believed = run_to(600.0), run_to(600.0, "estimate")
    a_true, a_believed = truth.job("A").snapshot(), believed.job("A").snapshot()
    assert a_true[5] != a_believed[5] and a_true[7] == a_believed[7] > 0  # sigma 0.5: another belief


def test_queue_aggregates_fold_the_job_members():
    view = run_to(30.0)
    queued = list(view.queued_jobs())
    assert [j.id for j in queued] == ["C", "D"]
    assert view.longest_wait_s() == max(j.waiting_s for j in queued) == view.now == 60.0  # Lyra's tick
    assert view.queued_gpus() == 9
    jobs, left = view.queued_remaining_work()
    assert jobs == queued and left == [50.0 * 8, 10.0]  # C: 8 GPUs x 50 s of 1 sample/s; D: 10 s on 1
    assert view.demand_curve.at(view.now) == view.inference_demand == 0


def test_a_finished_jobs_duration_is_the_traces():
    view = run_to(600.0, "estimate", start_d=True)
    done = [j for j in view.all_jobs() if j.state is JobState.FINISHED]
    assert done and all(j.finish_time is not None and j.finish_time <= view.now for j in done)
    assert {j.id: j.completed_duration for j in done} == {"D": 10.0}
    assert all(j.completed_duration is None and j.finish_time is None for j in view.all_jobs()
               if j.state is not JobState.FINISHED)


def test_snapshots_by_hand():
    """A: 3 V100s from 0 (1 sample/s each), restarting until 60 s, 4,000 samples; B: 2 T4s (0.5 each)
    from 0, until 60 s, 2,000 samples; C waits with all its 400 samples."""
    view = run_to(600.0)
    now = view.now
    assert now >= 600.0
    a, b, c = view.snapshots([view.job("A"), view.job("B"), view.job("C")])
    assert a[0] is JobState.RUNNING and a[2:7] == (3, 3.0, 60.0, 4000.0 - 3.0 * (now - 60.0), 3.0 * now)
    assert b[2:7] == (2, 1.0, 60.0, 2000.0 - (now - 60.0), 2.0 * now)
    assert c == (JobState.QUEUED, {}, 0, 0.0, c[4], 400.0, 0.0, 0)
    assert a[7] == int((3.0 * (now - 60.0)) / 4000.0 * PROGRESS_BINS)  # the part of 4,000 done


@pytest.mark.parametrize("mode", ["oracle", "estimate", "history"])
def test_snapshots_are_the_per_job_reads_on_random_states(mode):
    """ClusterView.snapshots equals each job's snapshot() and its members read one by one, at every
    decision of a random run (the believed remaining work under a knowledge mode)."""
    cfg = config(training=4, gpus=4, inference=2, rescale=5.0, restart=30.0)
    if mode != "oracle":
        cfg = dataclasses.replace(cfg, knowledge=KnowledgeConfig(mode=mode, sigma=0.5))
    rng = random.Random(7)
    jobs = [job(f"j{i}", rng.uniform(0, 3000), rng.choice([1, 2, 4, 8]), rng.uniform(50, 2000),
                elastic := rng.random() < 0.5, 1 if elastic else None, 8 if elastic else None) for i in range(30)]
    jobs.sort(key=lambda j: j.submit_time)
    engine = build_engine(jobs, LyraScheduler(), cfg, 0, TOY, demand=DemandCurve.constant(1))
    engine.begin()
    decisions = 0
    while engine.next_decision():
        view = engine.view
        every = list(view.all_jobs())
        rng.shuffle(every)  # any order, any subset
        chosen = every[: rng.randint(0, len(every))]
        expected = [(j.state, j.allocation, j.workers, j.rate, j.overhead_until, j.remaining_work, j.attained_gpu_s,
                     j.progress_part) for j in chosen]
        assert view.snapshots(chosen) == [j.snapshot() for j in chosen] == expected
        queued = list(view.queued_jobs())
        assert view.queued_remaining_work() == (queued, [j.remaining_work for j in queued])
        engine.submit(engine.scheduler.decide(view) if decisions % 3 else view.current_plan())
        decisions += 1
    assert decisions > 20
