"""Scaling semantics (lyra_gym/model/scaling.py): goodput by hand under each rule, batch and worker
changes mid-run, progress-dependent noise scale, and the requested size left exact.

Toy model ``lin`` (local batch 1, one V100 step = 1 s of which ``step_fixed_s`` = 0.2 s does not
shrink with the local batch; free all-reduce). A job ``J`` requests 2 GPUs for 100 s: its work is
100 s x 2 samples/s = 200 samples at its initial batch B0 = 2. Its noise scale is a constant 2
samples (relative rule, M0 = 2 in the toy efficiency file) unless a test says otherwise.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from lyra_gym.sim.plan import Plan, PlanError
from lyra_gym.model.profiles import parse_profiles
from lyra_gym.model.scaling import PROGRESS_BINS
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.run.simulate import simulate
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.trace import load_trace, write_trace
from lyra_gym.model.demand import DemandCurve
from toy import config

LIN = parse_profiles({
    "format": "lyra-gym-profiles/1",
    "metadata": {"reference_gpu": "v100"},
    "models": {"lin": {"local_batch": 1, "restart_overhead_s": 0, "gpus": {
        "v100": {"step_compute_s": 1.0, "step_fixed_s": 0.2, "allreduce_intra_s": 0.0, "allreduce_inter_s": 0.0},
    }}},
})


def efficiency_file(tmp_path, noise_scale=(2.0, 2.0), progress=(0.0, 1.0), init_batch=2.0) -> str:
    path = tmp_path / "eff.json"
    path.write_text(json.dumps({"format": "lyra-gym-efficiency/1", "models": {"lin": {
        "init_batch": init_batch, "progress": list(progress), "noise_scale": list(noise_scale)}}}))
    return str(path)


class Fixed(Scheduler):
    """Starts every queued job on ``workers`` GPUs of server 0; from ``when`` on, ``later`` GPUs
    (and, under adaptive scaling, ``batch`` / ``later_batch``)."""

    def __init__(self, workers, later=None, when=float("inf"), batch=None, later_batch=None, tick=10.0):
        self.workers, self.later, self.when, self.tick_interval = workers, later, when, tick
        self.batch, self.later_batch = batch, later_batch

    def decide(self, view):
        plan = view.current_plan()
        late = view.now >= self.when
        for j in view.queued_jobs():
            plan.allocations[j.id] = {0: self.workers}
        for j in view.running_jobs():
            if late and self.later is not None and j.workers != self.later:
                plan.allocations[j.id] = {0: self.later}
        batch = self.later_batch if late and self.later_batch is not None else self.batch
        if batch is not None:
            plan.batch_sizes = {j.id: batch for j in (*view.queued_jobs(), *view.running_jobs())}
        return plan


JOB = JobSpec("J", 0.0, 2, 100.0, "lin", True, 1, 4)


def run(tmp_path, scheduler, scaling, jobs=(JOB,), **eff):
    cfg = dataclasses.replace(config(training=1, gpus=8, rescale=0.0), scaling=scaling,
                              efficiency=efficiency_file(tmp_path, **eff))
    return simulate(list(jobs), scheduler, cfg, profiles=LIN, demand=DemandCurve.constant(0))


def jct(result):
    return result.jobs[0]["jct_s"]


# --------------------------------------------------------------------- the requested size is exact
@pytest.mark.parametrize("scaling", ["fixed-local", "fixed-global", "adaptive", "throughput"])
def test_the_requested_size_runs_for_the_trace_duration_under_every_rule(tmp_path, scaling):
    assert jct(run(tmp_path, Fixed(2), scaling)) == pytest.approx(100.0)


# --------------------------------------------------------------------- four GPUs from the start
def test_fixed_local_charges_statistical_efficiency(tmp_path):
    # 4 workers keep local batch 1: M = 4, 4 samples/s, E = (2 + 2) / (2 + 4) = 2/3 -> 8/3 per s
    assert jct(run(tmp_path, Fixed(4), "fixed-local")) == pytest.approx(200 / (8 / 3))  # 75 s


def test_fixed_global_splits_the_batch_and_pays_the_fixed_part(tmp_path):
    # M = 2 over 4 workers: local 0.5, step 0.2 + 0.8 x 0.5 = 0.6 s, 4 x 0.5 / 0.6 = 10/3 per s; E = 1
    assert jct(run(tmp_path, Fixed(4), "fixed-global")) == pytest.approx(200 / (10 / 3))  # 60 s


def test_throughput_rule_is_the_old_free_scale_out(tmp_path):
    assert jct(run(tmp_path, Fixed(4), "throughput")) == pytest.approx(50.0)  # 4 samples/s, nothing charged


def test_adaptive_without_a_choice_keeps_the_initial_batch(tmp_path):
    assert jct(run(tmp_path, Fixed(4), "adaptive")) == pytest.approx(60.0)  # as fixed-global


def test_adaptive_charges_the_chosen_batch(tmp_path):
    # batch 8 on 4 workers: local 2, step 0.2 + 0.8 x 2 = 1.8 s, 8 / 1.8 samples/s; E = 4 / 10
    rate = 8 / 1.8 * 0.4
    assert jct(run(tmp_path, Fixed(4, batch=8), "adaptive")) == pytest.approx(200 / rate)  # 112.5 s


def test_a_larger_noise_scale_makes_a_larger_batch_pay(tmp_path):
    # phi = 200: E(8) = 202 / 208; rate 8 / 1.8 x 202 / 208 = 4.316 > 10/3 at the initial batch
    big = run(tmp_path, Fixed(4, batch=8), "adaptive", noise_scale=(200.0, 200.0))
    assert jct(big) == pytest.approx(200 / (8 / 1.8 * 202 / 208))
    assert jct(big) < 60.0


def test_batch_sizes_are_refused_unless_the_rule_is_adaptive(tmp_path):
    with pytest.raises(PlanError) as err:
        run(tmp_path, Fixed(4, batch=8), "fixed-local")
    assert err.value.rule == "bad-batch"


@pytest.mark.parametrize("batch", [0, -1, float("nan"), "8", True])
def test_a_bad_batch_is_refused_naming_the_job(tmp_path, batch):
    with pytest.raises(PlanError) as err:
        run(tmp_path, Fixed(4, batch=batch), "adaptive")
    assert err.value.rule == "bad-batch" and "'J'" in str(err.value)


# --------------------------------------------------------------------- changes mid-run
def test_a_worker_change_mid_run_under_fixed_local(tmp_path):
    # 0-30 s on 2 GPUs (E = 1): 60 samples. From 30 s on 4 GPUs: 140 / (8/3) = 52.5 s -> ends 82.5
    result = run(tmp_path, Fixed(2, later=4, when=30.0), "fixed-local")
    assert jct(result) == pytest.approx(30 + 140 / (8 / 3))


def test_a_batch_change_mid_run_costs_no_overhead(tmp_path):
    # 4 workers at B0 (10/3 per s) for 30 s = 100 samples; then batch 8 (rate 8 / 1.8 x 0.4) for 100
    result = run(tmp_path, Fixed(4, when=30.0, later_batch=8), "adaptive")
    assert jct(result) == pytest.approx(30 + 100 / (8 / 1.8 * 0.4))
    assert result.metrics["scale_events"] == 0 and result.metrics["migrations"] == 0


# --------------------------------------------------------------------- noise scale over training
def test_noise_scale_follows_progress_in_equal_parts(tmp_path):
    # phi rises linearly from 0 to 20 over training; part b holds phi at its middle,
    # (b + 0.5) / PROGRESS_BINS x 20. On 4 workers (fixed-local, M = 4) each part of 200 / PROGRESS_BINS
    # samples runs at 4 x (phi + 2) / (phi + 4).
    result = run(tmp_path, Fixed(4), "fixed-local", noise_scale=(0.0, 20.0))
    expected = 0.0
    for b in range(PROGRESS_BINS):
        phi = (b + 0.5) / PROGRESS_BINS * 20.0
        expected += (200 / PROGRESS_BINS) / (4 * (phi + 2) / (phi + 4))
    assert jct(result) == pytest.approx(expected)


def test_progress_parts_are_not_decision_points(tmp_path):
    flat = run(tmp_path, Fixed(4, tick=None), "fixed-local")
    rising = run(tmp_path, Fixed(4, tick=None), "fixed-local", noise_scale=(0.0, 20.0))
    assert rising.metrics["decisions"] == flat.metrics["decisions"]
    assert rising.metrics["events"] == flat.metrics["events"]


def test_absolute_noise_scale_ignores_the_job_batch(tmp_path):
    # M0 = 20 in the file and phi = 2. Relative: the job's phi = 2 x 2 / 20 = 0.2 against B0 = 2, so on
    # 4 workers (M = 4) E = 2.2 / 4.2. Absolute: E = (2 + 20) / (2 + 4) against M0 = 20 (a batch below M0
    # is worth more per sample), and the work stays 200 samples (duration at perfect efficiency).
    cfg = dataclasses.replace(config(training=1, gpus=8, rescale=0.0), scaling="fixed-local",
                              efficiency=efficiency_file(tmp_path, init_batch=20.0))
    absolute = simulate([JOB], Fixed(4), dataclasses.replace(cfg, noise_scale="absolute"), profiles=LIN,
                        demand=DemandCurve.constant(0))
    relative = simulate([JOB], Fixed(4), cfg, profiles=LIN, demand=DemandCurve.constant(0))
    assert jct(absolute) == pytest.approx(200 / (4 * 22 / 6))
    assert jct(relative) == pytest.approx(200 / (4 * 2.2 / 4.2))


# --------------------------------------------------------------------- batch size in the trace
def test_trace_batch_size_column_round_trips_and_sets_b0(tmp_path):
    jobs = [dataclasses.replace(JOB, batch_size=4), dataclasses.replace(JOB, job_id="K")]
    path = tmp_path / "t.csv"
    write_trace(jobs, path)
    assert path.read_text().splitlines()[0].endswith(",batch_size")
    assert load_trace(path) == jobs
    # B0 = 4 on 2 GPUs: local batch 2, step 0.2 + 0.8 x 2 = 1.8 s: the work is 100 s x 4 / 1.8 samples/s,
    # and the requested size still takes 100 s
    assert jct(run(tmp_path, Fixed(2), "fixed-local", jobs=jobs[:1])) == pytest.approx(100.0)


def test_a_trace_without_batch_sizes_is_written_as_before(tmp_path):
    path = tmp_path / "t.csv"
    write_trace([JOB], path)
    assert path.read_text().splitlines()[0] == "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus"


def test_a_bad_batch_size_cell_names_line_and_field(tmp_path):
    from lyra_gym.workloads.trace import TraceError

    path = tmp_path / "bad.csv"
    path.write_text("job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus,batch_size\n"
                    "a,0,1,10,lin,0,,,0\n")
    with pytest.raises(TraceError) as err:
        load_trace(path)
    assert err.value.line == 2 and err.value.field == "batch_size"


def test_the_rule_is_recorded_in_the_config(tmp_path):
    from lyra_gym.model.config import config_to_dict

    result = run(tmp_path, Fixed(2), "fixed-global")
    assert config_to_dict(result.config)["scaling"] == "fixed-global"
