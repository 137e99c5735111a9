"""Gandiva baseline: time slicing, grow-shrink, migration, and whole traces finishing.

Hand-computed with the toy profile of ``test_hand_scenarios.py``: model ``toy``
trains 1 sample/s per V100 with free all-reduce, so n workers give n samples/s
wherever they sit and a job's work is duration x requested GPUs. Overheads are
set explicitly in every scenario.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lyra_baselines.gandiva import GandivaLoanScheduler, GandivaScheduler
from lyra_baselines.placement import UnrunnableJobWarning
from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.trace import load_trace
from toy import TOY, job, run
from toy import config as toy_config

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "traces" / "default.csv"



def config(training: int = 1, gpus: int = 8, restart: float = 0.0, rescale: float = 30.0,
           migrate: float = 45.0, resume: float = 1.0) -> SimConfig:
    return SimConfig(
        cluster=ClusterConfig(training=(ServerGroup(training, "v100", gpus),), inference=ServerGroup(0, "t4", gpus)),
        overheads=OverheadConfig(rescale_s=rescale, restart_s=restart, migrate_s=migrate, resume_s=resume),
    )


def rows(result) -> dict[str, dict]:
    return {r["job_id"]: r for r in result.jobs}


def test_oversubscribed_jobs_take_turns_every_quantum_paying_resume():
    # One server of 4 GPUs; quantum 60 s (ticks at 60, 120, ...); restart 5 s, resume 1 s.
    # A: 4 GPUs x 150 s = 600 samples at 4/s; B: 4 GPUs x 100 s = 400 samples, arrives at 10.
    #   0: A starts (restart to 5).              10: B waits (A's quantum is not over).
    #  60: A suspended (55 s done), B starts (restart to 65).
    # 120: B suspended (55 s done), A resumes (to 121).
    # 180: A suspended (55 + 59 = 114 s done), B resumes (to 181); B needs 45 s more -> ends 226.
    # 226: A resumes at once (to 227), 36 s left -> ends 263. JCTs: A 263, B 216.
    jobs = [job("A", 0, 4, 150), job("B", 10, 4, 100)]
    result = simulate(jobs, GandivaScheduler(), config(gpus=4, restart=5.0, resume=1.0), profiles=TOY)
    r = rows(result)
    assert (r["A"]["jct_s"], r["B"]["jct_s"]) == (pytest.approx(263, abs=1e-9), pytest.approx(216, abs=1e-9))
    assert (r["A"]["first_start"], r["B"]["first_start"]) == (0, 60)
    assert r["A"]["queue_total_s"] == pytest.approx(60 + 46)   # suspended 60-120 and 180-226
    assert r["B"]["queue_total_s"] == pytest.approx(50 + 60)   # waited 10-60, suspended 120-180
    m = result.metrics
    assert m["suspensions"] == 3 and m["preemptions"] == 0 and m["migrations"] == 0


def test_a_large_job_is_not_overtaken_by_later_small_ones():
    # One server of 4 GPUs, no overheads. S1 (1 GPU, 1000 s) starts at 0; L (4 GPUs, 60 s)
    # arrives at 1; S2 and S3 (1 GPU each) at 2 and 3. Strict round-robin order: L has
    # waited longest, so the 3 free GPUs stay idle for it; at 60 S1 is suspended and L runs
    # 60-120. Then S2, S3 and S1 share the server (no one waits): S2 and S3 end at 120 + 100.
    jobs = [job("S1", 0, 1, 1000), job("L", 1, 4, 60), job("S2", 2, 1, 100), job("S3", 3, 1, 100)]
    result = simulate(jobs, GandivaScheduler(), config(gpus=4, resume=0.0), profiles=TOY)
    r = rows(result)
    assert r["L"]["first_start"] == 60 and r["L"]["finish_time"] == 120
    assert r["S2"]["finish_time"] == 220 and r["S3"]["finish_time"] == 220
    assert r["S1"]["finish_time"] == pytest.approx(1060)  # 60 s suspended
    assert result.metrics["suspensions"] == 1


def test_elastic_job_grows_onto_idle_gpus_and_shrinks_when_a_job_arrives():
    # One server of 8 GPUs; rescale 30 s, no restart. E: elastic 1..8, requested 2, 400 s at
    # 2 GPUs = 800 samples. B: 4 GPUs x 50 s = 200 samples, arrives at 100.
    #   0: E starts on 2 GPUs.
    #  60: quantum, nobody waits: 680 left, 340 s at 2/s vs 85 s at 8/s (gain 255 >= 120)
    #      -> grows to 8, rescale to 90.
    # 100: B arrives, no free GPU: E shrinks back to 2 (80 samples done at 8/s since 90,
    #      600 left, rescale to 130); B starts on 4 and ends at 150.
    # 120: quantum, E still in its rescale: no grow. 150: B ends (no grow between quanta).
    # 180: 600 - 2 x 50 = 500 left: 250 s vs 62.5 s -> grows to 8, rescale to 210, ends 272.5.
    jobs = [job("E", 0, 2, 400, elastic=True, lo=1, hi=8), job("B", 100, 4, 50)]
    result = simulate(jobs, GandivaScheduler(), config(gpus=8, rescale=30.0), profiles=TOY)
    r = rows(result)
    assert r["E"]["jct_s"] == pytest.approx(272.5, abs=1e-9)
    assert r["B"]["jct_s"] == pytest.approx(50, abs=1e-9) and r["B"]["queue_s"] == 0
    assert (r["E"]["scale_outs"], r["E"]["scale_ins"]) == (2, 1)
    assert result.metrics["suspensions"] == 0


@pytest.mark.parametrize("min_gain, expected_jct, grows", [(120.0, 160, 0), (60.0, 115, 1)])
def test_grow_needs_the_predicted_gain(min_gain, expected_jct, grows):
    # E: 2 GPUs x 160 s = 320 samples. At the quantum at 60, 200 left: 100 s at 2/s vs 25 s
    # at 8/s, a gain of 75 s. Below the default 120 s it never grows (ends 160); with 60 s it
    # grows to 8 (rescale 30 s to 90, then 25 s -> ends 115).
    jobs = [job("E", 0, 2, 160, elastic=True, lo=1, hi=8)]
    result = simulate(jobs, GandivaScheduler(grow_min_gain_s=min_gain), config(gpus=8), profiles=TOY)
    assert rows(result)["E"]["jct_s"] == pytest.approx(expected_jct, abs=1e-9)
    assert result.metrics["scale_outs"] == grows


def test_a_spread_job_is_consolidated_at_the_next_quantum_with_migrate_overhead():
    # Two servers of 4 GPUs; migrate 10 s, no restart. X (3 GPUs, 90 s) best-fits server 0,
    # Y (3 GPUs, 1000 s) server 1, so S (2 GPUs, 600 s = 1200 samples) is spread 1 + 1.
    # X ends at 90; at the quantum at 120 S (240 samples done, 480 s left >= 300) moves onto
    # one server: best fit is server 1 (its own GPU + Y's spare one). Overhead to 130,
    # 960 samples at 2/s -> ends 610. Once on one server it is never moved again.
    jobs = [job("X", 0, 3, 90), job("Y", 0, 3, 1000), job("S", 0, 2, 600)]
    result = simulate(jobs, GandivaScheduler(), config(training=2, gpus=4, migrate=10.0), profiles=TOY)
    r = rows(result)
    assert r["S"]["jct_s"] == pytest.approx(610, abs=1e-9)
    assert r["S"]["migrations"] == 1 and result.metrics["migrations"] == 1
    assert r["Y"]["jct_s"] == 1000 and r["X"]["jct_s"] == 90


def test_a_job_near_its_end_is_not_migrated():
    jobs = [job("X", 0, 3, 90), job("Y", 0, 3, 1000), job("S", 0, 2, 600)]
    policy = GandivaScheduler(migrate_min_remaining_s=600.0)
    result = simulate(jobs, policy, config(training=2, gpus=4, migrate=10.0), profiles=TOY)
    assert rows(result)["S"]["jct_s"] == 600 and result.metrics["migrations"] == 0


def test_a_job_no_one_type_can_hold_never_starts_where_types_may_not_mix():
    # One V100 server and one loaned T4 server of 4 GPUs each (toy: a T4 does 0.5 samples/s).
    # A: 2 GPUs x 1000 s, starts at 0 on the V100 server. B (6 GPUs) arrives at 10: 2 V100s
    # and 4 T4s are free, but no one type can hold 6 and types may not mix, so B never starts
    # (warned about by name) and does not block C (4 GPUs x 100 s = 400 samples, at 20), which
    # runs on the 4 T4s at 2 samples/s: 20 -> 220.
    cfg = toy_config(training=1, gpus=4, inference=1)
    jobs = [job("A", 0, 2, 1000), job("B", 10, 6, 100), job("C", 20, 4, 100)]
    with pytest.warns(UnrunnableJobWarning, match="job 'B' needs 6 GPUs"):
        result = run(jobs, GandivaLoanScheduler(), cfg)
    r = rows(result)
    assert r["A"]["jct_s"] == 1000 and r["C"]["jct_s"] == pytest.approx(200, abs=1e-9)
    assert r["B"]["first_start"] is None and result.metrics["jobs_unfinished"] == 1


def test_a_job_no_one_type_can_hold_spans_types_where_the_config_allows_it():
    # As above with allow_mixed_gpu_types (and C after B): B, too large for one type, spans the
    # 2 free V100s and the 4 loaned T4s as lyra lets it, at the T4s' pace (6 x 0.5 = 3 samples/s:
    # 600 samples in 200 s, 10 -> 210). C (4 GPUs, at 220) then runs on the T4s: 220 -> 420.
    # (Until issue 23 item 7, B never started here.)
    cfg = replace(toy_config(training=1, gpus=4, inference=1), allow_mixed_gpu_types=True)
    jobs = [job("A", 0, 2, 1000), job("B", 10, 6, 100), job("C", 220, 4, 100)]
    result = run(jobs, GandivaLoanScheduler(), cfg)
    r = rows(result)
    assert {j: r[j]["jct_s"] for j in "ABC"} == pytest.approx({"A": 1000, "B": 200, "C": 200}, abs=1e-9)
    assert result.metrics["suspensions"] == 0 and result.metrics["jobs_unfinished"] == 0


@pytest.mark.parametrize("placement, jcts, suspensions, migrations", [
    ("spread", {"A": 1000, "B": 1000, "C": 100}, 0, 0),
    ("consolidated", {"A": 1100, "B": 1000, "C": 210}, 3, 0),
])
def test_the_placement_rule_is_honoured(placement, jcts, suspensions, migrations):
    # Two servers of 4 GPUs; no restart or resume overhead, migrate 10 s. A and B (3 GPUs x
    # 1000 s = 3000 samples each) start at 0 on servers 0 and 1. C (2 GPUs x 100 s) at 10:
    # - spread: C takes the free GPU of each server at once, 10 -> 110.
    # - consolidated: C waits for one server with 2 free GPUs. 60 (quantum): the counts find
    #   room but not on one server, so A (running longest; ties: first in the trace) is
    #   suspended (180 samples done) and C runs on server 0 from 60. 120 (quantum): A swaps
    #   back in on its own server 0 (C suspended after 60 s; no migration), 180 done -> 360.
    #   180: C swaps back in, runs its last 40 s, ends 220 (JCT 210). A resumes at 220 and
    #   runs 2640 / 3 = 880 s -> ends 1100. B keeps server 1 to 1000. 3 suspensions.
    jobs = [job("A", 0, 3, 1000), job("B", 0, 3, 1000), job("C", 10, 2, 100)]
    cfg = replace(config(training=2, gpus=4, migrate=10.0, resume=0.0), placement=placement)
    result = simulate(jobs, GandivaScheduler(), cfg, profiles=TOY)
    r = rows(result)
    assert {j: r[j]["jct_s"] for j in jcts} == pytest.approx(jcts, abs=1e-9)
    m = result.metrics
    assert (m["suspensions"], m["migrations"], m["preemptions"]) == (suspensions, migrations, 0)


@pytest.mark.parametrize("policy", [GandivaScheduler, GandivaLoanScheduler])
def test_every_job_of_the_default_trace_finishes(policy):
    jobs = load_trace(DEFAULT_TRACE)
    result = simulate(jobs, policy(), SimConfig(), seed=0)
    m = result.metrics
    assert m["jobs_finished"] == m["jobs_total"] == len(jobs)
    if policy is GandivaLoanScheduler:
        assert m["servers_borrowed"] > 0


def test_same_seed_gives_identical_job_rows():
    jobs = load_trace(DEFAULT_TRACE)
    runs = [simulate(jobs, GandivaLoanScheduler(reclaim_rule="random"), SimConfig(), seed=3).jobs for _ in range(2)]
    assert runs[0] == runs[1]


def test_parameters():
    assert GandivaScheduler().tick_interval == 60.0
    assert GandivaScheduler(quantum_s=30.0).tick_interval == 30.0
    assert (GandivaScheduler.name, GandivaLoanScheduler.name) == ("gandiva", "gandiva+loan")
    assert GandivaLoanScheduler().loaning.enabled and not GandivaScheduler().loaning.enabled
    with pytest.raises(ValueError, match="quantum_s"):
        GandivaScheduler(quantum_s=0)
    with pytest.raises(ValueError, match="reclaim_rule"):
        GandivaScheduler(reclaim_rule="nope")


def test_a_suspended_job_swaps_back_in_on_its_own_servers():
    # Two 4-GPU servers; A and B (4 GPUs, 1,000 s) start at 0, C (4 GPUs, 1,000 s) arrives at 1.
    # At the t=60 quantum C displaces A (the longest running, lowest index) on server 0. From then on
    # A and C time-slice server 0 (each resumes where its state waits: 1 s resume, no migration) and
    # B keeps server 1 to its end at 1,000 s. By 1,000: A ran 60 + 7 x 59 + 39 = 512 s (its slice from
    # 960 goes on), C 60 + 7 x 59 = 473 s. At 1,000 C moves to the freed server 1 (a 45 s migration):
    # A ends at 1,000 + 488 = 1,488 s, C at 1,045 + 527 = 1,572 s.
    jobs = [job("A", 0, 4, 1000), job("B", 0, 4, 1000), job("C", 1, 4, 1000)]
    result = run(jobs, GandivaScheduler(), toy_config(training=2, gpus=4, resume_s=1.0, migrate_s=45.0))
    rows = {r["job_id"]: r for r in result.jobs}
    assert (rows["A"]["finish_time"], rows["B"]["finish_time"], rows["C"]["finish_time"]) == (1488, 1000, 1572)
    assert (rows["A"]["migrations"], rows["B"]["migrations"], rows["C"]["migrations"]) == (0, 0, 1)
