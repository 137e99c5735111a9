"""Gradient accumulation (issue 25): the artifact's split of a batch above GPU memory and its step
time, by hand on the Pollux T4 profile (traces/pollux-t4-profile.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_gym.model.efficiency import builtin_efficiency
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import load_profiles
from lyra_gym.model.scaling import ScalingModel

ROOT = Path(__file__).resolve().parents[2]
PROFILE = load_profiles(ROOT / "traces" / "pollux-t4-profile.json")
T4 = frozenset(("t4",))


def model(batch_limit="accumulate"):
    return ScalingModel(PROFILE, builtin_efficiency(), "adaptive", "absolute", batch_limit)


def spec(app_model, gpus, batch):
    return JobSpec("j", 0.0, gpus, 1.0, app_model, True, 1, 64, batch)


def test_bert_6_x_384_on_t4_runs_at_the_artifacts_step_time():
    # local = ceil(384 / 6) = 64; accum = ceil(64 / 12) - 1 = 5; atomic = ceil(64 / 6) = 11, then
    # min(11, int(384 / (6 x 6))) = 10: the artifact's atomic 10 and 5 accumulation steps
    s, scaling = spec("bert", 6, 384), model()
    assert scaling.split(s, 384.0, 6, 384.0) == (10.0, 5, 360.0)
    g = PROFILE.model("bert").gpu("t4")
    compute = g.step_fixed_s + (g.step_compute_s - g.step_fixed_s) * 10 / 12
    sync = 2 * 5 / 6 * g.allreduce_inter_s            # 6 GPUs = 2 nodes: the across-node unit
    step = compute + sync + 5 * compute               # one all-reduce, 5 more micro-batches
    assert scaling.samples_per_s(s, 6, 2, T4, 384.0, 384.0) == pytest.approx(360 / step, rel=1e-12)


def test_every_isolated_job_splits_as_the_artifact_reports():
    reference = json.loads((ROOT / "benchmarks" / "pollux_reference.json").read_text())
    apps = {"bert": "bert", "cifar10": "resnet18", "deepspeech2": "deepspeech2", "imagenet": "resnet50",
            "ncf": "ncf", "yolov3": "yolov3"}
    scaling = model()
    for row in reference["isolated"]:
        n, b = row["num_replicas"], row["batch_size"]
        atomic, accum, _ = scaling.split(spec(apps[row["application"]], n, b), float(b), n, float(b))
        assert (atomic, accum) == (row["atomic_bsz"], row["accum_steps"]), row
        assert PROFILE.model(apps[row["application"]]).max_local_batch == row["max_local_bsz"]


def test_a_one_gpu_job_above_its_initial_batch_accumulates_at_least_once():
    # ncf 1 x 32,768: fits (max local 32,768) but the artifact still takes one accumulation step
    assert model().split(spec("ncf", 1, 32768), 32768.0, 1, 32768.0) == (16384.0, 1, 32768.0)


def test_the_cut_rule_is_the_old_behaviour():
    s = spec("bert", 6, 384)
    assert model("cut").split(s, 384.0, 6, 384.0) == (12.0, 0, 72.0)
    assert model("cut").samples_per_s(s, 6, 2, T4, 384.0) == PROFILE.throughput("bert", 6, 2, T4)
