"""Pollux baseline: goodput-driven sizes, an exact optimiser, the restart penalty, whole traces.

Toy profile: ``good`` trains 1 sample/s per GPU with free all-reduce (n GPUs: n samples/s);
``poor`` has an in-server all-reduce unit as long as its compute step (n GPUs:
n / (1 + 2(n-1)/n) samples/s, so 2 GPUs are no faster than 1). Local batch 1, so with the
assumed noise-scale ratio 2 (``noise_scale_ratio=2.0``: Pollux's own efficiency model instead of
the engine's, whose toy models have no measured curve) a job requesting n GPUs has efficiency
3n / (2n + x) at x GPUs. The engine's goodput, batch adaptation and the fair-share base are
tested in tests/baselines/test_pollux_adaptive.py.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines.pollux import PolluxLoanScheduler, PolluxScheduler
from lyra_baselines.pollux_optimizer import best_sizes, most_jobs, power_mean, restart_factor, utility
from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import parse_profiles
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.engine import Engine
from lyra_gym.workloads.trace import load_trace

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "traces" / "default.csv"


def _model(allreduce: float) -> dict:
    return {"local_batch": 1, "restart_overhead_s": 0, "gpus": {
        "v100": {"step_compute_s": 1.0, "allreduce_intra_s": allreduce, "allreduce_inter_s": allreduce},
        "t4": {"step_compute_s": 2.0, "allreduce_intra_s": allreduce, "allreduce_inter_s": allreduce},
    }}


TOY = parse_profiles({
    "format": "lyra-gym-profiles/1",
    "metadata": {"reference_gpu": "v100"},
    "models": {"good": _model(0.0), "poor": _model(1.0)},
})


def job(job_id: str, submit: float, gpus: int, duration: float, elastic: bool = False,
        lo: int | None = None, hi: int | None = None, model: str = "good") -> JobSpec:
    return JobSpec(job_id, submit, gpus, duration, model, elastic, lo or gpus, hi or gpus)


def config(training: int = 1, gpus: int = 8, inference: int = 0, restart: float = 0.0,
           rescale: float = 30.0, grace: float = 0.0) -> SimConfig:
    return SimConfig(
        cluster=ClusterConfig(training=(ServerGroup(training, "v100", gpus),),
                              inference=ServerGroup(inference, "t4", gpus)),
        overheads=OverheadConfig(rescale_s=rescale, restart_s=restart),
        reclaim_grace_s=grace,
    )


def run(jobs, policy, cfg):
    return simulate(jobs, policy, cfg, profiles=TOY)


def jct(result, job_id: str) -> float:
    return next(r for r in result.jobs if r["job_id"] == job_id)["jct_s"]


class Recording(PolluxScheduler):
    """PolluxScheduler that records, at each decision, the time and every job's GPU count."""

    def reset(self, rng):
        super().reset(rng)
        self.log: list[tuple[float, dict[str, int]]] = []
        self.view = None

    def decide(self, view):
        plan = super().decide(view)
        self.view = view
        self.log.append((view.now, {j: sum(a.values()) for j, a in plan.allocations.items()}))
        return plan


def toy_view(cfg: SimConfig):
    return Engine([job("x", 0, 1, 1)], PolluxScheduler(noise_scale_ratio=2.0), cfg, TOY, DemandCurve.constant(0),
                  np.random.default_rng(0)).view


# --- the goodput model -----------------------------------------------------------------
def test_speedup_is_throughput_times_noise_scale_efficiency_relative_to_the_request():
    view = toy_view(config())
    pollux = PolluxScheduler(noise_scale_ratio=2.0)
    x = np.arange(1, 7)
    # good, requesting 2: throughput x/2 of the request's, efficiency (2*2 + 2) / (2*2 + x)
    assert pollux.speedups(view, "good", 2, 1, 6) == pytest.approx(x / 2 * 6 / (4 + x))
    # poor, requesting 1: throughput x^2/(3x-2), efficiency 3 / (2 + x)
    assert pollux.speedups(view, "poor", 1, 1, 6) == pytest.approx(x**2 / (3 * x - 2) * 3 / (2 + x))
    # a larger noise-scale ratio k makes big batches cheaper: efficiency (k+1)n / (kn + x)
    assert PolluxScheduler(model_noise_scale_ratio={"good": 8.0}).speedups(view, "good", 2, 4, 4) \
        == pytest.approx(2 * 18 / 20)


def test_restart_factor_is_pollux_age_discount():
    assert restart_factor(90.0, 0, 30.0) == pytest.approx(0.75)
    assert restart_factor(90.0, 1, 30.0) == pytest.approx(0.5)
    assert restart_factor(20.0, 1, 30.0) == 0.0
    assert restart_factor(5.0, 3, 0.0) == 1.0


# --- sizing ------------------------------------------------------------------------------
def test_better_scaling_job_gets_more_gpus():
    # Both request 1 GPU, may take 1..8, on one 8-GPU server. Speed-ups: good 3x/(2+x)
    # (7 GPUs: 2.33); poor 1, 0.75, 0.77, ... (a second GPU adds no throughput and costs
    # efficiency). Power mean p=-1: (7, 1) -> 1/2.33 + 1 = 1.43 beats (6, 1) -> 1.44,
    # (4, 4) -> 1/2 + 1/0.8 = 1.75, ... so good gets 7 and poor 1.
    jobs = [job("good", 0, 1, 700, True, 1, 8), job("poor", 0, 1, 300, True, 1, 8, model="poor")]
    pollux = Recording(noise_scale_ratio=2.0)
    result = run(jobs, pollux, config())
    assert pollux.log[0] == (0.0, {"good": 7, "poor": 1})
    assert jct(result, "good") == pytest.approx(100)  # 700 samples at 7/s, never resized
    assert jct(result, "poor") == pytest.approx(300)  # stays on 1 GPU even when alone
    assert result.metrics["scale_events"] == 0


def test_arrival_shrinks_an_elastic_job_to_admit_it():
    # E (good, requests 2, 1..4) is alone on 4 GPUs: takes 4 (4/s). I (2 GPUs, 20 s) arrives at
    # 10: E's minimum is 1, so I fits; the 1 spare GPU goes to E -> 2 GPUs, 30 s rescale.
    # E: 40 samples by 10, resumes at 40 at 2/s, 160 left -> done at 120. Regrowing is not worth
    # it: E's restart factor (one re-allocation) is max(30 - 30, 0)/60 = 0 at 30 (I done) and
    # 30/90 at the tick at 60 (1.5 * 1/3 < 1); E ends at the next tick, 120.
    jobs = [job("E", 0, 2, 100, True, 1, 4), job("I", 10, 2, 20)]
    pollux = Recording(noise_scale_ratio=2.0)
    result = run(jobs, pollux, config(gpus=4))
    assert pollux.log[0][1] == {"E": 4}
    assert pollux.log[1] == (10.0, {"E": 2, "I": 2})
    assert (jct(result, "E"), jct(result, "I")) == (pytest.approx(120), pytest.approx(20))


def test_backfill_lets_a_small_job_pass_a_blocked_one():
    # 4 GPUs. A (2 GPUs, 100 s) runs; B (4 GPUs) cannot fit; C (2 GPUs, 10 s) can.
    jobs = [job("A", 0, 2, 100), job("B", 1, 4, 10), job("C", 2, 2, 10)]
    passed = run(jobs, PolluxScheduler(noise_scale_ratio=2.0), config(gpus=4))
    assert (jct(passed, "C"), jct(passed, "B")) == (10, 109)  # C 2-12, B 100-110
    blocked = run(jobs, PolluxScheduler(noise_scale_ratio=2.0, backfill=False, preempt=False), config(gpus=4))
    assert (jct(blocked, "B"), jct(blocked, "C")) == (109, 118)  # B 100-110, C 110-120


def test_preemption_runs_the_most_jobs_and_keeps_running_ones_on_ties():
    # 4 GPUs, inelastic jobs. A (4 GPUs, 100 s) runs; B and C (1 GPU, 20 s) arrive at 10: two
    # jobs beat one in Pollux's objective (an unallocated job costs 1/1e-3), so A is preempted
    # after 10 s of its work. D (4 GPUs, 10 s) arrives at 15: it would run alone, not two jobs:
    # B and C keep running. At 30 A and D tie on size; D (never started) goes first, 30-40, then
    # A runs its last 90 s, 40-130 (restart costs are 0 here).
    jobs = [job("A", 0, 4, 100), job("B", 10, 1, 20), job("C", 10, 1, 20), job("D", 15, 4, 10)]
    pollux = Recording(noise_scale_ratio=2.0)
    result = run(jobs, pollux, config(gpus=4))
    assert pollux.log[:4] == [(0.0, {"A": 4}), (10.0, {"B": 1, "C": 1}), (15.0, {"B": 1, "C": 1}),
                              (30.0, {"D": 4})]
    assert [jct(result, j) for j in "ABCD"] == [130, 20, 20, 25]
    assert result.metrics["preemptions"] == 1
    # without preemption A runs to the end, then B and C (100-120), then D (120-130)
    kept = run(jobs, PolluxScheduler(noise_scale_ratio=2.0, preempt=False), config(gpus=4))
    assert [jct(kept, j) for j in "ABCD"] == [100, 110, 110, 115]
    assert kept.metrics["preemptions"] == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 8), max_size=5), st.lists(st.integers(1, 8), max_size=5), st.integers(0, 20))
def test_most_jobs_matches_exhaustive_search(running, waiting, capacity):
    running, waiting = sorted(running), sorted(waiting)
    best = max(((len(r) + len(w), len(r))
                for nr in range(len(running) + 1) for r in itertools.combinations(running, nr)
                for nw in range(len(waiting) + 1) for w in itertools.combinations(waiting, nw)
                if sum(r) + sum(w) <= capacity))
    kept, started = most_jobs(running, waiting, capacity)
    assert (kept + started, kept) == best
    assert sum(running[:kept]) + sum(waiting[:started]) <= capacity


# --- the optimiser -----------------------------------------------------------------------
def _exhaustive(jobs, capacity, p):
    ranges = [range(lo, lo + len(s)) for lo, s in jobs]
    return max(sum(float(utility(s[x - lo], p)) for (lo, s), x in zip(jobs, xs))
               for xs in itertools.product(*ranges) if sum(xs) <= capacity)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.lists(st.floats(0.0, 4.0), min_size=1, max_size=5)),
             min_size=1, max_size=4),
    st.integers(0, 8),
    st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0]),
)
def test_optimizer_matches_exhaustive_search(raw, extra, p):
    jobs = [(lo, np.array(s)) for lo, s in raw]
    capacity = sum(lo for lo, _ in jobs) + extra
    sizes = best_sizes(jobs, capacity, p)
    assert sum(sizes) <= capacity
    assert all(lo <= x < lo + len(s) for (lo, s), x in zip(jobs, sizes))
    value = sum(float(utility(s[x - lo], p)) for (lo, s), x in zip(jobs, sizes))
    assert value == pytest.approx(_exhaustive(jobs, capacity, p), rel=1e-9, abs=1e-12)


def test_optimizer_rejects_minimums_above_capacity():
    with pytest.raises(ValueError, match="minimums need 5 GPUs"):
        best_sizes([(2, np.ones(3)), (3, np.ones(1))], 4, -1.0)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["good", "poor"]), st.integers(1, 2), st.integers(0, 4)),
                min_size=2, max_size=3))
def test_scheduler_sizes_maximise_the_power_mean(raw):
    # Elastic jobs all arriving at 0 on one 8-GPU server: the first plan's sizes reach the
    # largest power mean (p = -1) of speed-ups over every feasible choice of sizes.
    specs = [job(f"j{i}", 0, n, 100, True, 1, n + more, model=m) for i, (m, n, more) in enumerate(raw)]
    pollux = Recording(noise_scale_ratio=2.0)
    run(specs, pollux, replace(config(), horizon_s=1.0))
    chosen = pollux.log[0][1]
    tables = {s.job_id: pollux.speedups(pollux.view, s.model, s.num_gpus, 1, s.max_gpus) for s in specs}

    def mean(sizes):
        return power_mean([tables[s.job_id][x - 1] for s, x in zip(specs, sizes)], -1.0)

    best = max(mean(xs) for xs in itertools.product(*[range(1, s.max_gpus + 1) for s in specs]) if sum(xs) <= 8)
    assert mean([chosen[s.job_id] for s in specs]) == pytest.approx(best, rel=1e-12)


# --- the restart penalty -------------------------------------------------------------------
# A (good, requests 2, may grow) and B (inelastic) start together and fill the server; B ends at
# 50. A's speed-up at 4 GPUs is 2 * 6/8 = 1.5, at 8 GPUs 4 * 6/12 = 2; changing discounts it by
# age / (age + 45) (no re-allocations yet). A: 600 samples (300 s at 2/s).
def test_restart_penalty_holds_back_a_gain_below_it():
    # max 4: grow iff 1.5 * age/(age+45) > 1 iff age > 90. Decisions at 50 (B done), ticks at 60,
    # 120: A grows at 120. 240 samples by then, 30 s rescale, 360 at 4/s -> done at 240.
    jobs = [job("A", 0, 2, 300, True, 2, 4), job("B", 0, 2, 50)]
    pollux = Recording(noise_scale_ratio=2.0, restart_penalty_s=45.0)
    result = run(jobs, pollux, config(gpus=4))
    assert [(t, a["A"]) for t, a in pollux.log if t <= 120] == [(0, 2), (50, 2), (60, 2), (120, 4)]
    assert jct(result, "A") == pytest.approx(240)
    assert result.metrics["scale_outs"] == 1
    # Without the penalty A grows as soon as B is done: 100 samples by 50, rescale to 80,
    # 500 at 4/s -> 205.
    assert jct(run(jobs, PolluxScheduler(noise_scale_ratio=2.0, restart_penalty_s=0.0), config(gpus=4)), "A") == pytest.approx(205)


def test_restart_penalty_lets_a_larger_gain_through():
    # max 8 on 8 GPUs, B holds 6: at 50 the factor is 50/95, 2 * 50/95 = 1.05 > 1: A grows to 8
    # at once. 100 samples by 50, rescale to 80, 500 at 8/s -> done at 142.5.
    jobs = [job("A", 0, 2, 300, True, 2, 8), job("B", 0, 6, 50)]
    pollux = Recording(noise_scale_ratio=2.0, restart_penalty_s=45.0)
    result = run(jobs, pollux, config(gpus=8))
    assert [(t, a["A"]) for t, a in pollux.log[:2]] == [(0, 2), (50, 8)]
    assert jct(result, "A") == pytest.approx(142.5)


# --- whole traces ----------------------------------------------------------------------------
@pytest.mark.parametrize("make", [PolluxScheduler, PolluxLoanScheduler], ids=["pollux", "pollux+loan"])
@pytest.mark.slow
def test_every_default_trace_job_finishes_and_same_seed_repeats(make):
    jobs = load_trace(DEFAULT_TRACE)
    first, second = simulate(jobs, make(), seed=7), simulate(jobs, make(), seed=7)
    assert first.metrics["jobs_unfinished"] == 0
    assert all(row["finished"] for row in first.jobs) and len(first.jobs) == len(jobs)
    assert first.jobs == second.jobs
    assert first.policy == make.name
    if make is PolluxLoanScheduler:
        assert first.metrics["servers_borrowed"] > 0 and first.metrics["servers_returned"] > 0
    else:
        assert first.metrics["servers_borrowed"] == 0


def test_random_reclaim_rule_is_passed_to_loaning():
    assert PolluxLoanScheduler(reclaim_rule="random").loaning.reclaim_rule == "random"
    assert PolluxLoanScheduler().loaning.enabled and not PolluxScheduler(noise_scale_ratio=2.0).loaning.enabled
    with pytest.raises(ValueError, match="reclaim_rule"):
        PolluxScheduler(reclaim_rule="nope")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=12), st.lists(st.integers(0, 4), max_size=12),
       st.lists(st.integers(0, 23), max_size=2))
def test_admission_tiers_are_each_level_highest_first_in_the_jobs_order(running_levels, queued_levels, stopped):
    """``_tiers`` against its definition: one tier per level present, highest first, each holding
    the running and the queued jobs of that level in their given order."""
    from types import SimpleNamespace

    from lyra_baselines.guided import Levels
    from lyra_baselines.pollux_admission import _tiers

    running = [SimpleNamespace(id=f"r{i}") for i in range(len(running_levels))]
    queued = [SimpleNamespace(id=f"q{i}") for i in range(len(queued_levels))]
    given_levels = {**{j.id: v for j, v in zip(running, running_levels)}, **{j.id: v for j, v in zip(queued, queued_levels)}}
    levels = Levels(given_levels, [f"r{i}" for i in stopped])
    tiers = _tiers(running, queued, levels)  # type: ignore[arg-type]
    if not levels.active:
        assert tiers == [(running, queued)]
        return
    present = sorted({levels.level(j.id) for j in (*running, *queued)}, reverse=True)
    assert tiers == [([j for j in running if levels.level(j.id) == t], [j for j in queued if levels.level(j.id) == t])
                     for t in present]
