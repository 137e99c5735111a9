"""Pollux on the engine's goodput: batch-size adaptation, the fair-share base, whole runs.

Toy model ``lin`` (tests/model/test_scaling.py): local batch 1, one V100 step 1 s of which 0.2 s does not
shrink with the batch, free all-reduce; a constant noise scale ``phi`` (relative rule, M0 = 2).
A job requesting 2 GPUs has B0 = 2; on x GPUs at batch M its goodput is
M / (0.2 + 0.8 M / x) x (phi + 2) / (phi + M).
"""

from __future__ import annotations

import dataclasses

import pytest

from lyra_baselines.pollux import MAX_BATCH_GROWTH, PolluxScheduler, batch_candidates
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import simulate
from tests.model.test_scaling import LIN, efficiency_file
from toy import config


def goodput(x: int, m: float, phi: float) -> float:
    return m / (0.2 + 0.8 * m / x) * (phi + 2) / (phi + m)


class Recording(PolluxScheduler):
    def reset(self, rng):
        super().reset(rng)
        self.plans = []

    def decide(self, view):
        plan = super().decide(view)
        self.plans.append((view.now, {j: sum(a.values()) for j, a in plan.allocations.items()},
                           dict(plan.batch_sizes)))
        return plan


def run(tmp_path, jobs, scheduler, phi, scaling="adaptive", gpus=4):
    cfg = dataclasses.replace(config(training=1, gpus=gpus, rescale=0.0), scaling=scaling,
                              efficiency=efficiency_file(tmp_path, noise_scale=(phi, phi)))
    return simulate(jobs, scheduler, cfg, profiles=LIN, demand=DemandCurve.constant(0))


ALONE = [JobSpec("J", 0.0, 2, 100.0, "lin", True, 1, 4)]


def test_batch_candidates_grow_by_quarter_octaves_from_b0_within_memory():
    assert batch_candidates(8, 2, None)[:5] == [8.0, 10.0, 11.0, 13.0, 16.0]  # 8 x 2^(k/4), rounded
    assert batch_candidates(8, 2, None)[-1] == 8 * MAX_BATCH_GROWTH
    assert batch_candidates(8, 2, 8.0) == [8.0, 10.0, 11.0, 13.0, 16.0]  # 2 workers x 8 samples
    assert batch_candidates(8, 1, 4.0) == [8.0]  # never below B0


@pytest.mark.parametrize("phi", [0.5, 20.0, 2000.0])
def test_pollux_picks_the_batch_of_best_goodput(tmp_path, phi):
    pollux = Recording()
    run(tmp_path, ALONE, pollux, phi)
    _, sizes, batches = pollux.plans[0]
    assert sizes == {"J": 4}  # alone: every GPU
    best = max(batch_candidates(2, 4, None), key=lambda m: (goodput(4, m, phi), -m))
    assert batches.get("J", 2.0) == best


def test_a_larger_noise_scale_gives_a_larger_batch(tmp_path):
    chosen = []
    for phi in (0.5, 20.0, 2000.0):
        pollux = Recording()
        run(tmp_path, ALONE, pollux, phi)
        chosen.append(pollux.plans[0][2].get("J", 2.0))
    assert chosen[0] < chosen[1] < chosen[2]


def test_adapting_the_batch_finishes_sooner_when_large_batches_pay(tmp_path):
    # phi = 2000: E stays near 1, so a larger batch (less fixed time per sample) speeds the job up
    adaptive = run(tmp_path, ALONE, PolluxScheduler(), 2000.0, "adaptive")
    fixed = run(tmp_path, ALONE, PolluxScheduler(), 2000.0, "fixed-global")
    work = 100 * goodput(2, 2, 2000.0)  # 100 s at the requested size
    m = max(batch_candidates(2, 4, None), key=lambda b: goodput(4, b, 2000.0))
    assert adaptive.jobs[0]["jct_s"] == pytest.approx(work / goodput(4, m, 2000.0))
    assert fixed.jobs[0]["jct_s"] == pytest.approx(work / goodput(4, 2, 2000.0))
    assert adaptive.jobs[0]["jct_s"] < fixed.jobs[0]["jct_s"]


def test_speedups_are_against_a_fair_share(tmp_path):
    # Two jobs on 4 GPUs: the fair share is 2 GPUs each, where the speed-up is exactly 1.
    jobs = [JobSpec("A", 0.0, 2, 100.0, "lin", True, 1, 4), JobSpec("B", 0.0, 2, 100.0, "lin", True, 1, 4)]

    class Probe(PolluxScheduler):
        def decide(self, view):
            plan = super().decide(view)
            job = view.job("A")
            self.seen = self.job_speedups(view, job, 1, 4, "v100", 4, fair_share=2)
            self.request = PolluxScheduler(speedup_base="request").job_speedups(view, job, 1, 4, "v100", 4, 2)
            return plan

    probe = Probe()
    run(tmp_path, jobs, probe, 20.0, "fixed-local", gpus=4)
    assert probe.seen[1] == pytest.approx(1.0)
    assert probe.seen[0] == pytest.approx(goodput(1, 1, 20.0) / goodput(2, 2, 20.0))
    assert probe.request == pytest.approx(probe.seen)  # requested 2 = fair share 2 here


def test_fixed_local_pollux_sees_the_efficiency_the_engine_charges(tmp_path):
    # phi = 0.5: E(4) = 2.5 / 4.5, so 4 GPUs at local batch 1 are worth 4 x 0.556 = 2.2 samples/s
    # against 2 at 2 GPUs. Pollux's table is the engine's rate.
    class Probe(PolluxScheduler):
        def decide(self, view):
            self.table = self.goodputs(view, view.job("J"), 4, "v100", 4)[0]
            return super().decide(view)

    probe = Probe()
    run(tmp_path, ALONE, probe, 0.5, "fixed-local")
    assert list(probe.table[:4]) == pytest.approx([x * 2.5 / (0.5 + x) for x in (1, 2, 3, 4)])
