"""Tiresias (discretized 2D-LAS): hand-computed queues, preemptions, promotion and loaning.

The toy profile makes arithmetic easy: model ``toy`` trains 1 sample/s per V100
and 0.5 samples/s per T4, with free all-reduce, so n V100s give n samples/s and
a job's work is duration x requested GPUs. Restart overhead is zero, so a
preempted job resumes exactly where it stopped. Attained service is GPUs held
x seconds.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from lyra_baselines.tiresias import TiresiasLoanScheduler, TiresiasScheduler
from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig, load_config
from lyra_gym.model.demand import DemandCurve
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.trace import load_trace
from toy import TOY, job

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "traces" / "default.csv"
ARTIFACT_CONFIG = Path(__file__).resolve().parents[2] / "traces" / "tiresias-artifact.yaml"


def config(gpus: int = 4, inference: int = 0) -> SimConfig:
    """One training server of ``gpus`` V100s, ``inference`` servers of ``gpus`` T4s, no restart overhead."""
    return SimConfig(
        cluster=ClusterConfig(training=(ServerGroup(1, "v100", gpus),), inference=ServerGroup(inference, "t4", gpus)),
        overheads=OverheadConfig(restart_s=0.0),
    )


def run(jobs, policy, cfg, demand=None):
    """simulate() with the toy profile and, if given, a fixed inference-demand curve."""
    return simulate(jobs, policy, cfg, profiles=TOY, demand=demand)


def jcts(result) -> dict[str, float]:
    return {row["job_id"]: row["jct_s"] for row in result.jobs}


def cluster(*training: ServerGroup, placement: str = "spread", mixed: bool = False) -> SimConfig:
    """Training groups ``training``, no inference servers, no restart overhead."""
    return SimConfig(cluster=ClusterConfig(training=training, inference=ServerGroup(0, "t4", 4)),
                     overheads=OverheadConfig(restart_s=0.0), placement=placement, allow_mixed_gpu_types=mixed)


# --- demotion and preemption ------------------------------------------------------------
# One server, 4 GPUs, one threshold at 400 GPU-s. A (4 GPUs, 300 s) starts at 0 and reaches
# 400 GPU-s at t=100: it drops to queue 1.
def test_demoted_job_is_preempted_by_a_newly_arrived_job():
    # B (4 GPUs, 50 s) arrives at 150 in queue 0 and preempts A (queue 1): B runs 150-200.
    # A resumes at 200 with 300 - 150 = 150 s left -> 350. JCTs: A 350, B 50.
    result = run([job("A", 0, 4, 300), job("B", 150, 4, 50)], TiresiasScheduler(thresholds=(400,)), config())
    assert jcts(result) == {"A": 350, "B": 50}
    assert result.metrics["preemptions"] == 1


def test_a_running_job_of_the_same_queue_is_not_preempted():
    # Default thresholds: A attains at most 1,200 GPU-s and stays in queue 0, like B (arrives
    # at 50): B waits. A 0-300, B 300-350.
    result = run([job("A", 0, 4, 300), job("B", 50, 4, 50)], TiresiasScheduler(), config())
    assert jcts(result) == {"A": 300, "B": 300}
    assert result.metrics["preemptions"] == 0


@pytest.mark.parametrize("tick, c_start", [(60.0, 120), (10.0, 100)])
def test_the_tick_acts_on_a_threshold_crossing_between_events(tick, c_start):
    # C (4 GPUs, 50 s) waits from 50 behind A (same queue). A crosses 400 GPU-s at 100, between
    # events; the first tick at or after 100 (120 with the default 60 s tick, 100 with 10 s)
    # lets C preempt A. C: c_start .. c_start + 50. A has run c_start s, resumes at c_start + 50
    # with 300 - c_start s left -> finishes at 350 either way.
    sched = TiresiasScheduler(thresholds=(400,), tick_interval=tick)
    result = run([job("A", 0, 4, 300), job("C", 50, 4, 50)], sched, config())
    assert jcts(result) == {"A": 350, "C": c_start}  # finishes at c_start + 50, submitted at 50


# --- order inside a queue ----------------------------------------------------------------
def test_fifo_inside_the_top_queue_follows_submit_order():
    # X (4 GPUs, 100 s) holds the server until 100. Queued in queue 0: C (4 GPUs, 10 s, at 1),
    # A (2 GPUs, 30 s, at 2), B (2 GPUs, 20 s, at 3). FIFO: C 100-110, then A and B together:
    # A 110-140, B 110-130. JCTs: X 100, C 109, A 138, B 127. (Smallest-first would start A and
    # B at 100 and C at 130.)
    jobs = [job("X", 0, 4, 100), job("C", 1, 4, 10), job("A", 2, 2, 30), job("B", 3, 2, 20)]
    result = run(jobs, TiresiasScheduler(), config())
    assert jcts(result) == {"X": 100, "C": 109, "A": 138, "B": 127}


def test_a_job_that_does_not_fit_lets_later_ones_of_its_queue_start():
    # X (2 GPUs, 100 s) runs from 0. C (4 GPUs, 10 s) at 1 does not fit and may not preempt X
    # (same queue); A (2 GPUs, 30 s) at 2 fits and starts: A 2-32. C runs 100-110.
    jobs = [job("X", 0, 2, 100), job("C", 1, 4, 10), job("A", 2, 2, 30)]
    result = run(jobs, TiresiasScheduler(), config())
    assert jcts(result) == {"X": 100, "C": 109, "A": 30}


def test_fifo_inside_a_lower_queue_follows_the_time_a_job_entered_it():
    # 8 GPUs, threshold 100 GPU-s. P (1 GPU, 1000 s) submitted at 0 reaches queue 1 at 100;
    # Q (4 GPUs, 1000 s) submitted at 1 reaches it at 1 + 100/4 = 26, so Q is ahead of P there.
    # Z (8 GPUs, 10 s) arrives at 200 and preempts both (3 free + 1 + 4 = 8): Z 200-210.
    # W (4 GPUs, 100 s) arrives at 205 (queue 0) and waits for Z. At 210 the order is W, Q, P:
    # W 210-310, Q resumes with 1000 - 199 = 801 s -> 1011, P waits for W and resumes at 310
    # with 800 s left -> 1110. (Submit order would run P at 210 and leave Q waiting.)
    jobs = [job("P", 0, 1, 1000), job("Q", 1, 4, 1000), job("Z", 200, 8, 10), job("W", 205, 4, 100)]
    result = run(jobs, TiresiasScheduler(thresholds=(100,)), config(gpus=8))
    assert jcts(result) == {"P": 1110, "Q": 1010, "Z": 10, "W": 105}
    assert result.metrics["preemptions"] == 2


# --- starvation promotion ------------------------------------------------------------------
# 4 GPUs, threshold 100 GPU-s, 10 s tick. L (4 GPUs, 100 s) reaches queue 1 at 25;
# H (4 GPUs, 200 s) arrives at 50 and preempts it. L has run 50 s.
STARVE_JOBS = [job("L", 0, 4, 100), job("H", 50, 4, 200)]


def test_starvation_promotion_returns_a_waiting_job_to_the_top_queue():
    # Factor 1: L has waited 50 s = 1 x its 50 s of run time at t=100 -> back to queue 0, where
    # it preempts H (in queue 1 since 75). L finishes its last 50 s at 150. H (ran 50-100)
    # resumes at 150 with 150 s left -> 300. JCTs: L 150, H 250.
    sched = TiresiasScheduler(thresholds=(100,), starvation_factor=1.0, tick_interval=10.0)
    result = run(STARVE_JOBS, sched, config())
    assert jcts(result) == {"L": 150, "H": 250}
    assert result.metrics["preemptions"] == 2


def test_no_starvation_promotion_when_it_is_off():
    # Default (off): H runs 50-250; L, in H's queue from 75 on, waits; L 250-300.
    result = run(STARVE_JOBS, TiresiasScheduler(thresholds=(100,), tick_interval=10.0), config())
    assert jcts(result) == {"L": 300, "H": 200}
    assert result.metrics["preemptions"] == 1


# --- loaning --------------------------------------------------------------------------------
# Server 0: training, 4 V100. Server 1: inference, 4 T4, idle until inference needs it at 60.
# A and B (4 GPUs, 100 s -> 400 samples each) arrive at 0.
LOAN_JOBS = [job("A", 0, 4, 100), job("B", 0, 4, 100)]
DEMAND = DemandCurve(np.array([0.0, 60.0]), np.array([0, 1]))


def test_loan_borrows_idle_inference_servers_and_returns_them_on_reclaim():
    # A runs on the training server (4/s): 0-100. B runs on the borrowed T4 server (2/s) and
    # has 120 samples at 60, when the server is reclaimed: B is preempted (no room elsewhere)
    # and resumes at 100 on server 0: 280 / 4 = 70 s -> 170.
    result = run(LOAN_JOBS, TiresiasLoanScheduler(), config(inference=1), DEMAND)
    assert jcts(result) == {"A": 100, "B": 170}
    m = result.metrics
    assert m["servers_borrowed"] == 1 and m["servers_returned"] == 1
    assert m["inference_violations"] == 0 and m["preemptions"] == 1


def test_without_loan_nothing_is_borrowed():
    result = run(LOAN_JOBS, TiresiasScheduler(), config(inference=1), DEMAND)
    assert jcts(result) == {"A": 100, "B": 200}
    assert result.metrics["servers_borrowed"] == 0


def test_a_job_never_spans_training_and_loaned_servers():
    # Inference idle throughout: server 1 stays on loan. X (2 GPUs, 50 s) and V (2 GPUs, 1000 s)
    # fill the training server; W (2 GPUs, 1000 s, at 2) goes to the loaned T4s (1/s: 2000 s).
    # At 60 U (4 GPUs, 10 s) finds 2 free V100s and 2 free T4s: it waits for V (same queue, no
    # preemption) rather than run across both at the T4s' pace. U 1001-1011: JCT 951.
    jobs = [job("X", 0, 2, 50), job("V", 1, 2, 1000), job("W", 2, 2, 1000), job("U", 60, 4, 10)]
    idle = DemandCurve(np.array([0.0]), np.array([0]))
    result = run(jobs, TiresiasLoanScheduler(), config(inference=1), idle)
    assert jcts(result) == {"X": 50, "V": 1000, "W": 2000, "U": 951}


# --- artifact mode ----------------------------------------------------------------------------
# One server, 4 GPUs, one threshold at 100 GPU-s, 5 s tick (crossings fall on ticks).
# B (4 GPUs, 100 s) starts at 0 and crosses 100 GPU-s at 25: queue 1.
# A (4 GPUs, 100 s) arrives at 30 in queue 0 and preempts B (both modes). B has run 30 s: 70 s left.
# A crosses at 30 + 100/4 = 55 and joins queue 1, where B waits since 25.
#   artifact: A goes to the tail of queue 1, behind B; the walk reaches B first, B fits (4 GPUs
#     counting A's), A no longer does: B preempts A at 55 (the queue-tail rule). A has run 25 s:
#     75 s left. B runs 55-.. .
#     C (2 GPUs, 20 s) arrives at 60 in queue 0: the walk gives C 2 of the 4 GPUs, B (4) no longer
#     fits and is preempted (5 s more done: 65 s left), A (4) does not fit either. C 60-80; 2 GPUs
#     idle. Queue 1 now holds B then A (both waiting). At 80 B resumes: 80-145. A resumes at 145
#     with 75 s left: 145-220.
#   realistic: A and B are in the same queue, so B never preempts A. At 60 C (queue 0) preempts A
#     (queue 1): A has run 30 s, 70 s left. C 60-80. At 80 B (entered queue 1 at 25) goes before A
#     (entered at 55): B 80-150, A 150-220.
# Rows: (first start, finish, preemptions).
ARTIFACT_JOBS = [job("B", 0, 4, 100), job("A", 30, 4, 100), job("C", 60, 2, 20)]


@pytest.mark.parametrize("mode, expected, preemptions", [
    ("artifact", {"B": (0, 145, 2), "A": (30, 220, 1), "C": (60, 80, 0)}, 3),
    ("realistic", {"B": (0, 150, 1), "A": (30, 220, 1), "C": (60, 80, 0)}, 2),
])
def test_artifact_mode_lets_a_waiting_job_preempt_one_demoted_behind_it(mode, expected, preemptions):
    sched = TiresiasScheduler(thresholds=(100,), tick_interval=5.0, mode=mode)
    result = run(ARTIFACT_JOBS, sched, config())
    rows = {r["job_id"]: (r["first_start"], r["finish_time"], r["preemptions"]) for r in result.jobs}
    assert rows == expected
    assert result.metrics["preemptions"] == preemptions


# Two servers of 4 V100s, default thresholds (no job leaves queue 0, so nothing is preempted).
# B0 (4 GPUs, 10 s) takes server 0 and A1 (1 GPU, 100 s) server 1 at 0; B1 (3 GPUs, 20 s) fills
# server 1. B0 ends at 10, when A2 (1 GPU, 100 s) arrives: server 0. B1 ends at 20: each server
# has 3 free GPUs. Z (6 GPUs, 10 s) arrives at 30.
COUNT_JOBS = [job("B0", 0, 4, 10), job("A1", 0, 1, 100), job("B1", 0, 3, 20), job("A2", 10, 1, 100),
              job("Z", 30, 6, 10)]


@pytest.mark.parametrize("mode, placement, z_jct", [
    ("artifact", "consolidated", 10),   # 6 free GPUs counted: Z runs 30-40 on 3 + 3 (rule ignored)
    ("realistic", "spread", 10),        # best fit splits Z over the two servers too
    ("realistic", "consolidated", 90),  # Z needs two wholly free servers: A1 ends 100, A2 110; Z 110-120
])
def test_artifact_mode_places_by_gpu_count(mode, placement, z_jct):
    result = run(COUNT_JOBS, TiresiasScheduler(mode=mode), cluster(ServerGroup(2, "v100", 4), placement=placement))
    assert jcts(result) == {"B0": 10, "A1": 100, "B1": 20, "A2": 100, "Z": z_jct}


# Two servers of 4 V100s. X (4 GPUs, 10 s) takes server 0, A (2 GPUs, 100 s) and Y (2 GPUs, 20 s)
# server 1 at 0. X ends at 10, when C (2 GPUs, 100 s) arrives: server 0. Y ends at 20: each server
# has 2 free GPUs. J (4 GPUs, 10 s) arrives at 30.
@pytest.mark.parametrize("placement, j_jct", [
    ("spread", 10),         # 2 + 2 on the two servers: 30-40
    ("consolidated", 80),   # waits for one server: A ends at 100, J 100-110
])
def test_realistic_mode_honours_the_placement_rule(placement, j_jct):
    jobs = [job("X", 0, 4, 10), job("A", 0, 2, 100), job("Y", 0, 2, 20), job("C", 10, 2, 100), job("J", 30, 4, 10)]
    result = run(jobs, TiresiasScheduler(), cluster(ServerGroup(2, "v100", 4), placement=placement))
    assert jcts(result) == {"X": 10, "A": 100, "Y": 20, "C": 100, "J": j_jct}


# Two servers of 4 V100s, threshold 100 GPU-s. X (4 GPUs, 10 s) takes server 0, L1 (2 GPUs, 1000 s)
# and Y (2 GPUs, 20 s) server 1 at 0. X ends at 10, when L2 (2 GPUs, 1000 s) arrives: server 0. Y
# ends at 20: 2 free GPUs on each server. L1 enters queue 1 at 50, L2 at 60. H (4 GPUs, 10 s)
# arrives at 100 in queue 0.
@pytest.mark.parametrize("placement, l2_jct, preemptions", [
    ("spread", 1000, 0),        # H runs 100-110 on 2 + 2 free GPUs; nothing is stopped
    ("consolidated", 1010, 1),  # H needs one server: it stops L2 (lower priority: entered queue 1
                                # later) to free server 0, runs 100-110; L2 (90 s done) 110-1020
])
def test_realistic_preemption_frees_what_the_placement_rule_needs(placement, l2_jct, preemptions):
    jobs = [job("X", 0, 4, 10), job("L1", 0, 2, 1000), job("Y", 0, 2, 20), job("L2", 10, 2, 1000),
            job("H", 100, 4, 10)]
    result = run(jobs, TiresiasScheduler(thresholds=(100,)), cluster(ServerGroup(2, "v100", 4), placement=placement))
    assert jcts(result) == {"X": 10, "L1": 1000, "Y": 20, "L2": l2_jct, "H": 10}
    assert result.metrics["preemptions"] == preemptions


# One server of 4 V100s (server 0), one of 4 T4s (server 1). W (4 GPUs, 10 s) takes the V100s at 0,
# X (2 GPUs, 100 s = 200 samples at 0.5/s per T4: 200 s) the T4s. W ends at 10, when V (2 GPUs,
# 100 s) arrives: V100s. At 20 Z (4 GPUs, 10 s = 40 samples) finds 2 free V100s and 2 free T4s.
@pytest.mark.parametrize("mode", ["realistic", "artifact"])
@pytest.mark.parametrize("mixed, z_jct", [
    (False, 100),  # one type only: Z waits for V (ends 110) and runs 110-120 on the V100s
    (True, 20),    # 2 V100 + 2 T4 at the T4s' pace (4 x 0.5 = 2 samples/s): 20-40
])
def test_a_job_spans_gpu_types_only_when_the_config_allows(mode, mixed, z_jct):
    jobs = [job("W", 0, 4, 10), job("X", 0, 2, 100), job("V", 10, 2, 100), job("Z", 20, 4, 10)]
    cfg = cluster(ServerGroup(1, "v100", 4), ServerGroup(1, "t4", 4), mixed=mixed)
    result = run(jobs, TiresiasScheduler(mode=mode), cfg)
    assert jcts(result) == {"W": 10, "X": 200, "V": 100, "Z": z_jct}


def test_artifact_mode_warns_unless_preemption_is_free():
    # the engine's default restart overhead (per model, 15-250 s) is not the artifact's free restart
    jobs = load_trace(DEFAULT_TRACE)[:20]
    with pytest.warns(UserWarning, match="restart_s"):
        simulate(jobs, TiresiasScheduler(mode="artifact"), seed=0)
    cfg = load_config(ARTIFACT_CONFIG)
    assert dataclasses.astuple(cfg.overheads) == (0.0, 0.0, 0.0, 0.0, 0.0, ())  # free restarts, free preemption
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        simulate(jobs, TiresiasScheduler(mode="artifact"), cfg, seed=0)
        simulate(jobs, TiresiasScheduler(), seed=0)  # realistic mode never warns


# --- whole traces -------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["realistic", "artifact"])
@pytest.mark.parametrize("scheduler", [TiresiasScheduler, TiresiasLoanScheduler])
def test_every_job_of_the_default_trace_finishes(scheduler, mode):
    cfg = load_config(ARTIFACT_CONFIG) if mode == "artifact" else None
    result = simulate(load_trace(DEFAULT_TRACE), scheduler(mode=mode), cfg, seed=0)
    m = result.metrics
    assert m["jobs_unfinished"] == 0 and m["jobs_finished"] == m["jobs_total"] == 400
    assert m["inference_violations"] == 0
    assert (m["servers_borrowed"] > 0) == (scheduler is TiresiasLoanScheduler)


def test_same_seed_gives_identical_job_rows():
    jobs = load_trace(DEFAULT_TRACE)

    def once():
        return simulate(jobs, TiresiasLoanScheduler(reclaim_rule="random", starvation_factor=2.0), seed=7).jobs

    assert once() == once()


# --- parameters -----------------------------------------------------------------------------
def test_parameters_are_checked_and_named():
    sched = TiresiasScheduler(thresholds=[57600])  # a config file gives a list
    assert sched.thresholds == (57600.0,) and sched.name == "tiresias" and not sched.loaning.enabled
    loan = TiresiasLoanScheduler(reclaim_rule="random")
    assert loan.name == "tiresias+loan" and loan.loaning.enabled and loan.loaning.reclaim_rule == "random"
    with pytest.raises(ValueError, match="thresholds"):
        TiresiasScheduler(thresholds=(7200, 3250))
    with pytest.raises(ValueError, match="starvation_factor"):
        TiresiasScheduler(starvation_factor=-1)
    with pytest.raises(ValueError, match="reclaim_rule"):
        TiresiasScheduler(reclaim_rule="nope")
    assert TiresiasScheduler().mode == "realistic" and TiresiasLoanScheduler(mode="artifact").artifact
    with pytest.raises(ValueError, match=r"^mode: must be one of 'realistic', 'artifact', got 'Artifact'$"):
        TiresiasScheduler(mode="Artifact")


def test_one_threshold_from_the_command_line_means_two_queues():
    from lyra_baselines.tiresias import TiresiasScheduler

    assert TiresiasScheduler(thresholds=57600).thresholds == (57600.0,)


# --- the Pollux artifact's switches (issue 25) -----------------------------------------------
def test_most_free_placement_takes_the_emptiest_server_first():
    from lyra_baselines.tiresias import most_free_in_groups

    # free 1, 3, 2, 4: 5 GPUs = 4 of server 3, then 1 of server 1 (3 free, the most left)
    assert most_free_in_groups([1, 3, 2, 4], 5, [[0, 1, 2, 3]]) == {3: 4, 1: 1}
    # 2 GPUs go to the emptiest server, not the tightest (best fit would take server 2)
    assert most_free_in_groups([1, 3, 2, 4], 2, [[0, 1, 2, 3]]) == {3: 2}
    assert most_free_in_groups([1, 0], 2, [[0, 1]]) is None


def test_rounds_only_waits_for_the_round_from_time_zero():
    # A (4 GPUs, 100 s) arrives at 53 on an idle cluster and starts at the first round, 60:
    # ends at 160, JCT 107. B (4 GPUs, 10 s) arrives at 70 and waits: A's GPUs come free at 160,
    # B starts at the next round, 180 (not 160; the rounds are at multiples of 60 from 0, not
    # from 53): JCT B = 190 - 70 = 120.
    sched = TiresiasScheduler(mode="artifact", rounds_only=True)
    result = run([job("A", 53, 4, 100), job("B", 70, 4, 10)], sched, config())
    assert jcts(result) == {"A": 107, "B": 120}
    free = run([job("A", 53, 4, 100), job("B", 70, 4, 10)], TiresiasScheduler(mode="artifact"), config())
    assert jcts(free) == {"A": 100, "B": 93}  # events: B starts at 153


def test_arrival_order_lets_an_earlier_queue_mate_preempt():
    # One 4-GPU server. A (2 GPUs, 100 s) at 0, B (4 GPUs, 50 s) at 1 waits, C (2 GPUs, 200 s) at 2
    # skips ahead of B. A ends at 100: in arrival order B (ahead of C) now fits in the count and
    # preempts C: B 100-150, C resumes 150 with 102 s left -> 252. Running-first (the Tiresias
    # artifact's) keeps C ahead of B: C ends at 202, B runs 202-252.
    jobs = [job("A", 0, 2, 100), job("B", 1, 4, 50), job("C", 2, 2, 200)]
    arrival = run(jobs, TiresiasScheduler(mode="artifact", queue_order="arrival", tick_interval=None), config())
    assert jcts(arrival) == {"A": 100, "B": 149, "C": 250}
    assert arrival.metrics["preemptions"] == 1
    first = run(jobs, TiresiasScheduler(mode="artifact", tick_interval=None), config())
    assert jcts(first) == {"A": 100, "B": 251, "C": 200}


def test_switch_values_are_checked():
    with pytest.raises(ValueError, match="queue_order"):
        TiresiasScheduler(queue_order="lifo")
    with pytest.raises(ValueError, match="artifact_placement"):
        TiresiasScheduler(artifact_placement="worst")
    with pytest.raises(ValueError, match="rounds_only"):
        TiresiasScheduler(rounds_only=True, tick_interval=None)
