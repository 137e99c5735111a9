"""Priced preemption: the work since a job's last checkpoint is lost when it is preempted or a
reclaim stops it (``overheads.checkpoint_interval_s``; ``lyra_gym.sim.overheads``;
``docs/model.md`` "Preemption cost"). Every expectation is computed by hand.

Toy profile (tests/toy.py): 1 sample/s per V100 worker, free all-reduce, so a job of
requested size n and duration d has n x d samples and runs at n samples/s on n V100s. The rule:
a checkpoint after every I s of run time (time making progress, outside overheads) since the
checkpoint clock's origin; the origin is every start, restart, resume, rescale and migration
(each a checkpoint of the work done then).
"""

from __future__ import annotations

import numpy as np
import pytest

from lyra_gym.errors import ConfigError
from lyra_gym.model.config import ModelCheckpoint, OverheadConfig, config_from_dict, config_to_dict
from lyra_gym.model.demand import DemandCurve
from tests.sim.test_engine_overheads import Script, step
from toy import config, jct, job, run

A = job("A", 0, 2, 300)    # 600 samples, 2/s on 2 V100s
F = job("F", 0, 2, 1000)   # keeps the run alive while A is queued
G = job("G", 0, 2, 1000, elastic=True, lo=2, hi=4)  # 2000 samples; 2/s on 2, 4/s on 4


def row(result, job_id: str) -> dict:
    return next(r for r in result.jobs if r["job_id"] == job_id)


def preempt_a(interval: float):
    """A starts at 0 (10 s restart: progress from 10), is preempted at 260, restarts at 300."""
    script = Script([step(0, A={0: 2}, F={0: 2}), step(260, A=None), step(300, A={0: 2})])
    return run([A, F], script, config(gpus=4, restart=10.0, checkpoint_interval_s=interval))


def test_preemption_loses_the_work_since_the_last_checkpoint():
    # 250 s of run time by 260 (500 samples); checkpoints after 100 and 200 s of run time (400
    # samples): 50 s (100 samples, 2 GPUs x 50 s) lost. Restarted at 300: stalled to 310, 200
    # samples at 2/s -> finish at 410.
    result = preempt_a(100.0)
    assert jct(result, "A") == pytest.approx(410, abs=1e-9)
    assert row(result, "A")["work_lost_s"] == pytest.approx(50.0)
    assert result.metrics["work_lost_gpu_s"] == pytest.approx(100.0)
    assert result.metrics["preemptions"] == 1


def test_zero_interval_is_free_preemption():
    # Same script, nothing lost: 100 samples left at 300 -> 310 + 50 = 360.
    result = preempt_a(0.0)
    assert jct(result, "A") == pytest.approx(360, abs=1e-9)
    assert row(result, "A")["work_lost_s"] == 0.0
    assert result.metrics["work_lost_gpu_s"] == 0.0


def test_preemption_inside_the_restart_or_before_the_first_checkpoint():
    # Preempted at 5, inside the 10 s restart: no run time, nothing lost. Restarted at 20:
    # 600 samples from 30 -> 330.
    script = Script([step(0, A={0: 2}, F={0: 2}), step(5, A=None), step(20, A={0: 2})], tick=5.0)
    result = run([A, F], script, config(gpus=4, restart=10.0, checkpoint_interval_s=100.0))
    assert jct(result, "A") == pytest.approx(330, abs=1e-9)
    assert result.metrics["work_lost_gpu_s"] == 0.0
    # Preempted at 90 (80 s of run time, no checkpoint yet): all 160 samples lost; restarted at
    # 100: 600 samples from 110 -> 410.
    script = Script([step(0, A={0: 2}, F={0: 2}), step(90, A=None), step(100, A={0: 2})])
    result = run([A, F], script, config(gpus=4, restart=10.0, checkpoint_interval_s=100.0))
    assert jct(result, "A") == pytest.approx(410, abs=1e-9)
    assert row(result, "A")["work_lost_s"] == pytest.approx(80.0)
    assert result.metrics["work_lost_gpu_s"] == pytest.approx(160.0)


def test_the_clock_restarts_at_the_restart_after_a_preemption():
    # Preempted at 260 (back to 400 samples), restarted at 300 (run from 310), preempted again at
    # 380: 70 s of run time since the restart, under one interval: 140 samples lost again (back
    # to 400). Restarted at 400: 200 samples from 410 -> 510.
    script = Script([step(0, A={0: 2}, F={0: 2}), step(260, A=None), step(300, A={0: 2}),
                     step(380, A=None), step(400, A={0: 2})])
    result = run([A, F], script, config(gpus=4, restart=10.0, checkpoint_interval_s=100.0))
    assert jct(result, "A") == pytest.approx(510, abs=1e-9)
    assert row(result, "A")["work_lost_s"] == pytest.approx(50.0 + 70.0)
    assert result.metrics["work_lost_gpu_s"] == pytest.approx(2 * 120.0)


def test_a_rescale_checkpoints_and_a_scale_in_loses_nothing():
    # No overheads. G on 2 from 0; at 150 scaled out to 4 (300 samples, checkpointed); scaled in
    # to 2 at 200 (500 samples, checkpointed, nothing lost); preempted at 250 (600 samples; 50 s
    # on 2 GPUs since the scale-in, under one 100 s interval): back to 500, 100 GPU-s lost.
    # Restarted on 4 at 300: 1500 samples at 4/s -> 675.
    script = Script([step(0, G={0: 2}, F={0: 2}), step(150, G={0: 4}), step(200, G={0: 2}),
                     step(250, G=None), step(300, G={0: 4})])
    result = run([G, F], script, config(gpus=6, rescale=0.0, checkpoint_interval_s=100.0))
    assert jct(result, "G") == pytest.approx(675, abs=1e-9)
    assert row(result, "G")["work_lost_s"] == pytest.approx(50.0)
    assert result.metrics["work_lost_gpu_s"] == pytest.approx(100.0)
    assert result.metrics["scale_ins"] == 1 and result.metrics["scale_outs"] == 1


def test_a_reclaim_that_stops_a_job_loses_its_work():
    # A on a loaned T4 server (id 1): 1 sample/s (0.5 per T4). Inference wants the server back at
    # 250; the script does not answer, so the engine's default rule preempts A (a violation).
    # 240 s of run time since the 10 s restart: checkpoint after 200 s (200 samples), 40 s lost
    # (2 T4s x 40 s = 80 GPU-s). Restarted on the V100 server at 300: 400 samples at 2/s from 310
    # -> 510.
    demand = DemandCurve(np.array([0.0, 250.0]), np.array([0, 1]))
    script = Script([step(0, borrow=[1], A={1: 2}, F={0: 2}), step(300, A={0: 2})])
    result = run([A, F], script, config(gpus=4, inference=1, restart=10.0, checkpoint_interval_s=100.0),
                 demand=demand)
    assert result.metrics["inference_violations"] == 1 and result.metrics["preemptions"] == 1
    assert row(result, "A")["work_lost_s"] == pytest.approx(40.0)
    assert result.metrics["work_lost_gpu_s"] == pytest.approx(80.0)
    assert jct(result, "A") == pytest.approx(510, abs=1e-9)


class SuspendAt(Script):
    """A Script that suspends (``Plan.suspend``) the jobs it stops at ``at``."""

    def __init__(self, steps, at: float, **kwargs) -> None:
        super().__init__(steps, **kwargs)
        self.at = at

    def decide(self, view):
        plan = super().decide(view)
        if view.now == self.at:
            plan.suspend = tuple(j for j in ("A",) if j not in plan.allocations)
        return plan


def test_a_suspended_job_loses_nothing():
    # Suspended at 260 (500 samples kept in host memory), resumed where it was at 300 (1 s resume):
    # 100 samples from 301 -> 351.
    script = SuspendAt([step(0, A={0: 2}, F={0: 2}), step(260, A=None), step(300, A={0: 2})], at=260.0)
    result = run([A, F], script, config(gpus=4, restart=10.0, resume_s=1.0, checkpoint_interval_s=100.0))
    assert result.metrics["suspensions"] == 1 and result.metrics["preemptions"] == 0
    assert jct(result, "A") == pytest.approx(351, abs=1e-9)
    assert result.metrics["work_lost_gpu_s"] == 0.0


def test_a_model_override_takes_precedence():
    # checkpoint_interval_s 100 for every model, but 0 for toy: A's preemption is free again.
    script = Script([step(0, A={0: 2}, F={0: 2}), step(260, A=None), step(300, A={0: 2})])
    free = run([A, F], script, config(gpus=4, restart=10.0, checkpoint_interval_s=100.0,
                                      checkpoint_by_model=(ModelCheckpoint("toy", 0.0),)))
    assert jct(free, "A") == pytest.approx(360, abs=1e-9)
    # and 60 for toy alone, with no global interval: checkpoints after 60 .. 240 s (480 samples),
    # 10 s lost; 120 samples left from 310 -> 370
    script = Script([step(0, A={0: 2}, F={0: 2}), step(260, A=None), step(300, A={0: 2})])
    priced = run([A, F], script, config(gpus=4, restart=10.0, checkpoint_by_model=(ModelCheckpoint("toy", 60.0),)))
    assert jct(priced, "A") == pytest.approx(370, abs=1e-9)
    assert row(priced, "A")["work_lost_s"] == pytest.approx(10.0)


def test_config_reads_and_checks_the_checkpoint_settings():
    cfg = config_from_dict({"overheads": {"checkpoint_interval_s": 1800,
                                          "checkpoint_by_model": [{"model": "bert", "interval_s": 3600}]}})
    assert cfg.overheads.checkpoint_interval("bert") == 3600.0
    assert cfg.overheads.checkpoint_interval("resnet50") == 1800.0
    assert config_from_dict(config_to_dict(cfg)) == cfg
    with pytest.raises(ConfigError, match="overheads.checkpoint_interval_s"):
        config_from_dict({"overheads": {"checkpoint_interval_s": -1}})
    with pytest.raises(ConfigError, match=r"overheads.checkpoint_by_model\[0\].interval_s"):
        config_from_dict({"overheads": {"checkpoint_by_model": [{"model": "bert", "interval_s": "x"}]}})
    with pytest.raises(ConfigError, match="given twice"):
        OverheadConfig(checkpoint_by_model=(ModelCheckpoint("bert", 1.0), ModelCheckpoint("bert", 2.0)))


def test_an_override_for_a_model_the_profile_lacks_is_refused():
    script = Script([step(0, A={0: 2})])
    with pytest.raises(ConfigError, match=r"checkpoint_by_model\[0\].model: unknown model 'nope'"):
        run([A], script, config(gpus=4, checkpoint_by_model=(ModelCheckpoint("nope", 60.0),)))


def test_every_policy_pays_alike_and_runs_stay_deterministic():
    """A preemptive heuristic on a contended toy trace: lost work appears, never negative, and the
    same seed gives the same run bit for bit."""
    jobs = [job(f"j{i}", 50.0 * i, 1 + i % 3, 400.0 + 97 * i) for i in range(12)]
    cfg = config(gpus=4, restart=10.0, checkpoint_interval_s=120.0)
    first = run(jobs, "tiresias", cfg)
    again = run(jobs, "tiresias", cfg)
    assert {k: v for k, v in first.metrics.items() if k != "sim_wall_s"} == \
        {k: v for k, v in again.metrics.items() if k != "sim_wall_s"}
    assert first.jobs == again.jobs
    assert first.metrics["jobs_unfinished"] == 0
    assert first.metrics["preemptions"] >= 1 and first.metrics["work_lost_gpu_s"] > 0.0
    assert min(r["work_lost_s"] for r in first.jobs) >= 0.0
    free = run(jobs, "tiresias", config(gpus=4, restart=10.0))
    assert free.metrics["work_lost_gpu_s"] == 0.0
    assert free.metrics["jct_mean_s"] < first.metrics["jct_mean_s"]
