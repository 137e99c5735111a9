"""Lyra's speed-aware loaning, stable allocations and comparison points, on hand-computed toys.

Toy profile (tests/toy.py): a V100 trains 1 sample/s, a T4 0.5 samples/s, all-reduce is
free, restarts cost nothing; a job's work is duration x requested GPUs.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lyra_baselines.lyra import LyraScheduler
from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig
from lyra_gym.sim.plan import FrozenAllocation, Plan
from toy import config, jct, job, run


def v100_and_t4(training_gpus: int = 4, inference_gpus: int = 8, migrate: float = 45.0) -> SimConfig:
    """One V100 training server and one idle T4 inference server (demand 0: always loanable)."""
    return SimConfig(
        cluster=ClusterConfig(training=(ServerGroup(1, "v100", training_gpus),),
                              inference=ServerGroup(1, "t4", inference_gpus)),
        overheads=OverheadConfig(rescale_s=30.0, restart_s=0.0, migrate_s=migrate),
    )


def row(result, job_id):
    return next(r for r in result.jobs if r["job_id"] == job_id)


# --- speed-aware loaning ----------------------------------------------------------------------
SPEED_JOBS = [job("A", 0, 4, 1000), job("B", 10, 4, 100), job("C", 10, 4, 5000)]


def test_a_short_job_takes_a_t4_now_while_a_long_one_waits_for_the_v100():
    # At t=10 the V100s free at t=1000 (A). B: 200 s on 4 T4 < 990 s wait + 100 s -> T4 now.
    # C: 10,000 s on T4 > 990 + 5,000 s -> waits for the V100s and runs 1000..6000.
    result = run(SPEED_JOBS, LyraScheduler(move_back=False), v100_and_t4())
    assert jct(result, "A") == pytest.approx(1000)
    assert jct(result, "B") == pytest.approx(200)
    assert jct(result, "C") == pytest.approx(5990)


def test_the_overflow_rule_puts_the_long_job_on_the_slow_gpus_too():
    result = run(SPEED_JOBS, LyraScheduler(move_back=False, loaned_rule="overflow"), v100_and_t4())
    assert jct(result, "B") == pytest.approx(200)
    assert jct(result, "C") == pytest.approx(10000)  # 4 T4 at 0.5 samples/s for 20,000 samples


def test_a_job_moves_back_to_training_gpus_when_that_pays_after_the_migration():
    # B at t=10 waits 290 s for the V100s; on T4 with a move back it expects
    # 290 + 45 + (1 - 290/2000) * 1000 = 1190 s < 290 + 1000 s, so it starts on the T4s.
    # At t=300 A ends: B did 290 s x 2 samples/s = 580 of 4000 samples; staying takes
    # 3420 / 2 = 1710 s, moving 45 + 3420 / 4 = 900 s -> it moves, ends at 345 + 855 = 1200.
    jobs = [job("A", 0, 4, 300), job("B", 10, 4, 1000)]
    result = run(jobs, LyraScheduler(), v100_and_t4())
    assert jct(result, "B") == pytest.approx(1190)
    assert row(result, "B")["migrations"] == 1
    # Without moving back the T4s would take 2000 s > 290 + 1000 s: B waits for the V100s.
    wait = run(jobs, LyraScheduler(move_back=False), v100_and_t4())
    assert jct(wait, "B") == pytest.approx(1290)


def test_no_move_back_when_the_migration_costs_more_than_it_saves():
    # Same, but a 2,000 s migration: moving at t=300 would take 2000 + 855 s > 1710 s staying.
    # The loaned estimate (290 + 2000 + 855) also exceeds waiting (1290), so B waits instead.
    jobs = [job("A", 0, 4, 300), job("B", 10, 4, 1000)]
    result = run(jobs, LyraScheduler(), v100_and_t4(migrate=2000.0))
    assert jct(result, "B") == pytest.approx(290 + 1000)
    assert row(result, "B")["migrations"] == 0


# --- stable allocations -----------------------------------------------------------------------
def test_an_arrival_takes_free_gpus_before_displacing_flexible_workers():
    # E (2..4, asks 4) starts at its minimum on server 0 and grows to 4 there. F (2 GPUs) fits
    # best-fit on E's flexible GPUs of server 0, but server 1 is free: F goes there.
    jobs = [job("E", 0, 4, 1000, elastic=True, lo=2, hi=4), job("F", 100, 2, 500)]
    result = run(jobs, LyraScheduler(), config(training=2, gpus=4))
    assert jct(result, "E") == pytest.approx(1000)
    assert jct(result, "F") == pytest.approx(500)
    assert row(result, "E")["scale_ins"] == 0 and row(result, "E")["migrations"] == 0


def test_a_job_whose_worker_count_does_not_change_keeps_its_servers():
    # Two 8-GPU servers. X: base 1 on server 1, 3 extra on server 0; Y: base 1 and 2 extra on
    # server 1. Y now gets 8 extra, X keeps 3. Filling Y first in server order used to take
    # server 0's GPUs from under X and move X; X must keep its exact allocation.
    x = SimpleNamespace(id="X", index=1)
    y = SimpleNamespace(id="Y", index=0)
    current_x = FrozenAllocation({1: 1, 0: 3})
    plan = Plan(allocations={"X": current_x, "Y": FrozenAllocation({1: 3})})
    base = {"X": {1: 1}, "Y": {1: 1}}
    flex = {"X": {0: 3}, "Y": {1: 2}}
    avail = [5 + 3, 4 + 2]  # free + flexible GPUs per server
    LyraScheduler._place_extras(plan, [y, x], [10, 3], base, flex, avail, [0, 1], loaned=set())
    assert plan.allocations["X"] is current_x
    assert plan.allocations["Y"] == {1: 1 + 2 + 3, 0: 5}
    assert avail == [0, 1]  # 14 available, 13 placed


def test_displaced_flexible_workers_are_dropped_when_moving_them_does_not_pay():
    # One 4-GPU server. E (1..4, asks 4) grows to 4 at t=0; F (3 GPUs) arrives at t=100 and
    # needs 3 of E's extra workers: with nowhere to move them, E scales in to 1 (rescale 30 s).
    # E: 400 of 4000 samples by t=100, then 30 s stall, 3600 samples at 1 sample/s -> 3730 s.
    jobs = [job("E", 0, 4, 1000, elastic=True, lo=1, hi=4), job("F", 100, 3, 100)]
    result = run(jobs, LyraScheduler(round_s=1e9), config(training=1, gpus=4))
    assert row(result, "E")["scale_ins"] == 1 and row(result, "E")["migrations"] == 0
    assert jct(result, "F") == pytest.approx(100)


# --- comparison points and placement rules ----------------------------------------------------
def test_baseline_min_runs_elastic_jobs_at_their_minimum():
    jobs = [job("E", 0, 4, 100, elastic=True, lo=2, hi=8)]  # 400 samples
    assert jct(run(jobs, "baseline", config()), "E") == pytest.approx(100)
    assert jct(run(jobs, "baseline-min", config()), "E") == pytest.approx(200)


@pytest.mark.parametrize("policy", ["baseline", "lyra", "sjf", "fifo"])
def test_backfill_lets_a_later_job_start_past_a_blocked_one(policy):
    # One 4-GPU server. A (2 GPUs) runs 0..100; B (4 GPUs, 100 s) is blocked until 100; C (2 GPUs,
    # 200 s) is behind B by submit time and by length. Without backfill C waits for B
    # (starts 200); with it C starts at once and B waits for A and C (starts 202).
    jobs = [job("A", 0, 2, 100), job("B", 1, 4, 100), job("C", 2, 2, 200)]
    strict = run(jobs, policy, config(training=1, gpus=4))
    assert (jct(strict, "B"), jct(strict, "C")) == pytest.approx((199, 398))
    from lyra_gym.sim.scheduler import make
    backfilled = run(jobs, make(policy, backfill=True), config(training=1, gpus=4))
    assert (jct(backfilled, "B"), jct(backfilled, "C")) == pytest.approx((301, 200))


def test_lyra_places_a_job_across_training_gpu_types_when_the_config_allows_it():
    # 2 V100 + 2 T4 training GPUs and a 4-GPU job: it spans both types and runs at the T4 pace,
    # 4 x 0.5 samples/s for 4 x 100 samples -> 200 s. Without mixing it can never start.
    cfg = SimConfig(cluster=ClusterConfig(training=(ServerGroup(1, "v100", 2), ServerGroup(1, "t4", 2)),
                                          inference=ServerGroup(0, "t4", 8)),
                    overheads=OverheadConfig(restart_s=0.0), allow_mixed_gpu_types=True)
    for policy in ("lyra", "baseline", "fifo"):
        assert jct(run([job("J", 0, 4, 100)], policy, cfg), "J") == pytest.approx(200)


@pytest.mark.parametrize("key, value", [("loaned_rule", "fast"), ("flex_horizon", "never"),
                                        ("fixed_size", "max"), ("round_s", 0.0)])
def test_bad_parameters_name_the_field(key, value):
    with pytest.raises(ValueError, match=key):
        LyraScheduler(**{key: value})


def test_no_loaned_placement_that_would_outlast_the_next_reclaim():
    # The T4 server goes back to inference at t=500 (demand 0 -> 1 server). B (100 s on V100s,
    # 200 s on T4s) is done by then and takes the T4s at t=10. C needs 800 s on T4s, so it would be
    # preempted there at t=500: it waits for the V100s instead (1000..1400, JCT 1390). Without
    # the reclaim it would finish on the T4s at t=810.
    from lyra_gym.model.demand import DemandCurve

    jobs = [job("A", 0, 4, 1000), job("B", 10, 4, 100), job("C", 10, 4, 400)]
    cfg = v100_and_t4()
    reclaimed = run(jobs, LyraScheduler(), cfg, demand=DemandCurve(times_s=[0.0, 500.0], servers=[0, 1]))
    assert jct(reclaimed, "B") == pytest.approx(200)
    assert jct(reclaimed, "C") == pytest.approx(1390)
    assert row(reclaimed, "C")["preemptions"] == 0
    free = run(jobs, LyraScheduler(), cfg)
    assert jct(free, "C") == pytest.approx(800)


def test_a_move_back_does_not_free_flexible_gpus_another_job_just_took():
    # 4 V100s (A until t=1000) and an 8-GPU T4 server. E (2..4) runs on the T4s and grows to 4.
    # At t=1000 Q (6 GPUs, shortest) takes the T4s' 4 free GPUs and E's 2 extra ones; E moves to
    # the freed V100s; R (4 GPUs) must then see only E's 2 base GPUs free on the T4 server (it
    # waits), not E's extra ones again (which would over-fill the server: a PlanError).
    jobs = [job("A", 0, 4, 1000), job("E", 1, 2, 3000, elastic=True, lo=2, hi=4),
            job("Q", 1000, 6, 100), job("R", 1000, 4, 5000)]
    result = run(jobs, LyraScheduler(loaned_rule="overflow"), v100_and_t4())
    assert result.metrics["jobs_unfinished"] == 0
    assert jct(result, "Q") == pytest.approx(200)  # 600 samples on 6 T4s at 0.5 samples/s each
    assert row(result, "E")["migrations"] == 1


def test_knapsack_rounds_run_on_a_quiet_cluster_and_a_short_hold_does_not_stop_growth():
    # One 4-GPU server. E (1..4, asks 4, 40,000 samples) grows to 4 at t=0; F (3 GPUs, 10 s) takes
    # 3 of them at t=5 (E: 20 samples done, rescale 5..35). F ends at 15 and nothing else happens:
    # the round due at 60 waits for the cluster to be quiet for a whole round (last decision at 15),
    # so Lyra's tick at 120 runs it. The observed 5 s hold is floored at round_s (60 s), so 3 extra
    # workers are worth 60 x 3 - 30 - 30 s: E grows back (rescale 120..150) after 85 more samples.
    # E ends at 150 + (40000 - 105) / 4 = 10,123.75 s.
    jobs = [job("E", 0, 4, 10000, elastic=True, lo=1, hi=4), job("F", 5, 3, 10)]
    result = run(jobs, LyraScheduler(), config(training=1, gpus=4))
    assert jct(result, "E") == pytest.approx(10123.75)


def test_staying_on_loaned_gpus_counts_when_moving_back_would_cost_more():
    # B at t=1 waits 1,499 s for the V100s; a 2,000 s migration makes moving back worse than
    # staying on the T4s (2,000 s) -- still better than waiting (1,499 + 1,000 s).
    jobs = [job("A", 0, 4, 1500), job("B", 1, 4, 1000)]
    assert jct(run(jobs, LyraScheduler(), v100_and_t4(migrate=2000.0)), "B") == pytest.approx(2000)


def test_a_job_no_training_pool_can_hold_neither_blocks_nor_stops_growth():
    # BIG (6 GPUs) fits only the 8 T4s, busy serving until t=5000; E (1..4) runs at 4 on the 4 V100s.
    from lyra_gym.model.demand import DemandCurve

    demand = DemandCurve(times_s=[0.0, 5000.0], servers=[1, 0])
    jobs = [job("E", 0, 4, 2000, elastic=True, lo=1, hi=4), job("BIG", 0, 6, 100)]
    result = run(jobs, LyraScheduler(backfill=True), v100_and_t4(), demand=demand)
    assert jct(result, "E") == pytest.approx(2000)
    assert jct(result, "BIG") == pytest.approx(5200)  # 600 samples on 6 T4s from t=5000


def test_a_job_larger_than_any_pool_spans_training_and_loaned_servers_when_mixing_is_allowed():
    # 4 V100s + 4 loaned T4s and a 6-GPU job: feasible only across both, at the T4 pace (200 s).
    cfg = SimConfig(cluster=ClusterConfig(training=(ServerGroup(1, "v100", 4),), inference=ServerGroup(1, "t4", 4)),
                    overheads=OverheadConfig(restart_s=0.0), allow_mixed_gpu_types=True)
    result = run([job("BIG", 0, 6, 100)], LyraScheduler(), cfg)
    assert jct(result, "BIG") == pytest.approx(200)
