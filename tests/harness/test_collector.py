"""Benchmark collector: a tiny CPU run writes a profile the simulator uses; merging keeps other GPU types."""

from __future__ import annotations

import json
import math

import pytest

from lyra_gym.collector.cli import main as collector_main
from lyra_gym.collector.models import MODEL_SPECS, build_model, resolve_models
from lyra_gym.collector.profile_writer import gpu_key_from_name, merge_profile, step_at_batch
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import ProfileError, builtin_profiles, load_profiles
from lyra_gym.run.simulate import simulate

TINY = ["--device", "cpu", "--tiny", "--steps", "2", "--warmup", "1", "--quiet", "--cpu-threads", "1"]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One tiny CPU run of two models, keyed as GPU type 'cpu-tiny'."""
    path = tmp_path_factory.mktemp("profile") / "measured.json"
    rc = collector_main([*TINY, "--models", "resnet18,ncf", "--batch-sizes", "2,4", "--gpu-name", "cpu-tiny",
                         "--out", str(path)])
    assert rc == 0
    return path


def _jobs(models):
    return [JobSpec(f"j{i}", 10.0 * i, g, 600.0, m, False, g, g)
            for i, (m, g) in enumerate((models[i % len(models)], g) for i, g in enumerate((1, 2, 4, 8, 1, 2)))]


def test_cpu_tiny_run_writes_a_profile_that_loads_and_simulates(measured):
    profiles = load_profiles(measured)
    assert profiles.reference_gpu == "cpu-tiny"
    assert sorted(profiles.models) == ["ncf", "resnet18"]
    for key in ("ncf", "resnet18"):
        model = profiles.model(key)
        assert model.local_batch == 4  # largest batch that ran (1 sample unit per item for these models)
        gpu = model.gpu("cpu-tiny")
        assert gpu.step_compute_s > 0 and gpu.allreduce_inter_s > gpu.allreduce_intra_s > 0
        assert model.restart_overhead_s > 0
    doc = json.loads(measured.read_text())
    meta = doc["metadata"]
    assert meta["device"] == "cpu" and meta["precision"] == "fp32" and meta["torch"]
    assert meta["batch_sizes"] == {"resnet18": [2, 4], "ncf": [2, 4]}
    assert meta["allreduce"]["method"] == "assumed"  # no GPUs here: the bandwidth is assumed, and says so
    entry = doc["models"]["ncf"]["gpus"]["cpu-tiny"]
    assert "assumed" in entry["source"] and entry["allreduce_method"] == "assumed"
    assert [m["batch"] for m in entry["measurements"]] == [2, 4]
    assert all(m["inference_samples_per_s"] > 0 for m in entry["measurements"])

    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(2, "cpu-tiny", 8),),
                                             inference=ServerGroup(0, "t4", 8)), profiles=str(measured))
    result = simulate(_jobs(["resnet18", "ncf"]), "fifo", config)
    assert result.metrics["jobs_finished"] == 6


def test_merge_adds_the_measured_type_and_keeps_the_others(measured, tmp_path):
    out = tmp_path / "merged.json"
    assert collector_main(["--from-measured", str(measured), "--merge-into", "builtin", "--out", str(out),
                           "--quiet"]) == 0
    merged, builtin = load_profiles(out), builtin_profiles()
    assert merged.reference_gpu == builtin.reference_gpu == "v100"
    for key, model in builtin.models.items():
        m = merged.model(key)
        assert m.local_batch == model.local_batch and m.restart_overhead_s == model.restart_overhead_s
        for gpu, timing in model.gpus.items():
            assert m.gpu(gpu) == timing
        assert ("cpu-tiny" in m.gpus) == (key in ("ncf", "resnet18"))
    doc = json.loads(out.read_text())
    assert doc["metadata"]["merged"][0]["gpu"] == "cpu-tiny"
    assert "extrapolated" in doc["models"]["ncf"]["gpus"]["cpu-tiny"]["source"]  # 131072 >> tiny batches
    result = simulate(_jobs(["resnet18", "ncf"]), "fifo", SimConfig(profiles=str(out)))
    assert result.metrics["jobs_finished"] == 6

    # Merging the merged file again replaces the entry instead of duplicating it.
    again = merge_profile(doc, json.loads(measured.read_text()), "merged", "measured")
    assert len(again["metadata"]["merged"]) == 2
    assert set(again["models"]["ncf"]["gpus"]) == {"v100", "a100", "t4", "cpu-tiny"}


def test_merge_refuses_models_the_target_lacks_and_unit_mismatches(measured):
    measured_doc = json.loads(measured.read_text())
    target = json.loads(json.dumps(measured_doc))
    target["metadata"]["reference_gpu"] = "v100"
    for entry in target["models"].values():
        entry["gpus"] = {"v100": entry["gpus"]["cpu-tiny"]}
    del target["models"]["ncf"]
    with pytest.raises(ProfileError, match="'ncf' is not in"):
        merge_profile(target, measured_doc)
    target["models"]["ncf"] = dict(target["models"]["resnet18"], sample_unit="tokens")
    with pytest.raises(ProfileError, match="models.ncf.sample_unit"):
        merge_profile(target, measured_doc)


def test_bad_model_key_is_named(tmp_path, capsys):
    with pytest.raises(KeyError, match="'gpt9'"):
        resolve_models("resnet18,gpt9")
    rc = collector_main([*TINY, "--models", "resnet18,gpt9", "--out", str(tmp_path / "x.json")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "'gpt9'" in err and "resnet18" in err  # names the bad key and lists the known ones
    assert not (tmp_path / "x.json").exists()


def test_lyra_gym_profile_subcommand_wires_run_profile(tmp_path):
    import argparse

    from lyra_gym.collector.cli import add_profile_parser

    parser = argparse.ArgumentParser()
    add_profile_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["profile", *TINY, "--models", "ncf", "--amp", "--no-inference",
                              "--out", str(tmp_path / "p.json")])
    assert args.func(args) == 0
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["metadata"]["precision"] == "amp-bf16" and doc["metadata"]["reference_gpu"] == "cpu"
    with pytest.raises(ProfileError, match="CUDA is not available"):
        import torch

        if torch.cuda.is_available():  # pragma: no cover - only on GPU machines
            raise ProfileError("CUDA is not available (skipped: this machine has CUDA)")
        args.func(parser.parse_args(["profile", "--device", "cuda", "--models", "ncf", "--out", str(tmp_path / "q")]))


def test_every_model_trains_one_tiny_step():
    import torch

    g = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: threads only add contention on a busy machine
    try:
        for key in MODEL_SPECS:
            model = build_model(key, tiny=True)
            loss = model.loss(model.synthetic_batch(2, torch.device("cpu"), g))
            loss.backward()
            assert math.isfinite(float(loss.detach())), key
            assert all(p.grad is not None for p in model.parameters() if p.requires_grad), key
    finally:
        torch.set_num_threads(threads)


def test_step_at_batch_measures_interpolates_and_extrapolates():
    pts = [(64, 0.1), (128, 0.18)]
    assert step_at_batch(pts, 128) == (0.18, "measured")
    value, how = step_at_batch(pts, 96)
    assert how == "interpolated" and value == pytest.approx(0.14)
    value, how = step_at_batch(pts, 256)
    assert how.startswith("extrapolated") and value == pytest.approx(0.34)  # line 0.02 + 0.00125 x
    value, how = step_at_batch([(32, 0.01)], 64)
    assert how.startswith("extrapolated") and value == pytest.approx(0.02)  # constant samples/s


@pytest.mark.parametrize("name, key", [("NVIDIA H200", "h200"), ("Tesla V100-SXM2-16GB", "v100"),
                                       ("NVIDIA A100-SXM4-80GB", "a100"), ("Tesla T4", "t4"),
                                       ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA L4", "l4"),
                                       ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090")])
def test_gpu_key_from_device_name(name, key):
    assert gpu_key_from_name(name) == key


def test_ring_fit_recovers_the_unit():
    from lyra_gym.collector.benchmark import fit_ring_unit

    assert fit_ring_unit({n: 0.05 * 2 * (n - 1) / n for n in (2, 4, 8)}) == pytest.approx(0.05)


@pytest.mark.slow
def test_allreduce_measurement_path_runs_with_gloo():
    """The multi-process all-reduce timing (NCCL on GPUs) runs end to end with gloo on CPU."""
    from lyra_gym.collector.benchmark import fit_ring_unit, measure_allreduce

    times = measure_allreduce({"small": 1_000, "large": 200_000}, [2], backend="gloo", iters=3, warmup=1)
    assert set(times) == {"small", "large"} and all(set(t) == {2} for t in times.values())
    assert all(fit_ring_unit(t) > 0 for t in times.values())


def test_a_model_that_never_fits_is_left_out_and_listed():
    from lyra_gym.collector.benchmark import BatchMeasurement, ModelMeasurement
    from lyra_gym.collector.profile_writer import assumed_allreduce, build_profile

    ok = ModelMeasurement("ncf", "", "samples", 1, 10, 40, "adamw",
                          [BatchMeasurement(8, 8.0, "ok", 0.01, 0.01, 0.01, 800.0)])
    oom = ModelMeasurement("bert", "", "sequences", 1, 10, 40, "adamw", [BatchMeasurement(64, 64.0, "oom")])
    doc = build_profile([ok, oom], "g1", {k: assumed_allreduce(40) for k in ("ncf", "bert")}, {})
    assert list(doc["models"]) == ["ncf"] and "bert" in doc["metadata"]["skipped_models"]
    with pytest.raises(ProfileError, match="no model ran"):
        build_profile([oom], "g1", {"bert": assumed_allreduce(40)}, {})


def _sweep(batches):
    from lyra_gym.collector.benchmark import BatchMeasurement, ModelMeasurement

    rows = [BatchMeasurement(b, float(b), "oom") if t is None else BatchMeasurement(b, float(b), "ok", t, t, t, b / t)
            for b, t in batches]
    return ModelMeasurement("ncf", "", "samples", 1, 10, 40, "adamw", rows)


def test_batch_sweep_keeps_fixed_step_part_and_memory_cap():
    """Hand check: step = 0.05 + 0.00625 x batch at 8 / 16 / 32, 64 out of memory: step_fixed_s =
    0.25 - 0.00625 x 32 = 0.05, max_local_batch 32 (the largest that ran), min_local_batch 8."""
    from lyra_gym.collector.profile_writer import assumed_allreduce, build_profile
    from lyra_gym.model.profiles import parse_profiles

    m = _sweep([(8, 0.1), (16, 0.15), (32, 0.25), (64, None)])
    doc = build_profile([m], "g1", {"ncf": assumed_allreduce(40)}, {})
    entry = doc["models"]["ncf"]
    assert entry["local_batch"] == 32 and entry["max_local_batch"] == 32 and entry["min_local_batch"] == 8
    assert entry["gpus"]["g1"]["step_fixed_s"] == pytest.approx(0.05)
    assert "64 ran out of memory" in entry["batch_source"]
    model = parse_profiles(doc).model("ncf")
    assert model.max_local_batch == 32 and model.min_local_batch == 8
    assert model.step_time(1, 1, ["g1"], 8) == pytest.approx(0.1)  # the measured step at 8, from the fit


def test_batch_sweep_without_oom_writes_no_cap_and_one_batch_no_fixed_part():
    from lyra_gym.collector.profile_writer import assumed_allreduce, build_profile

    doc = build_profile([_sweep([(8, 0.1), (16, 0.15)])], "g1", {"ncf": assumed_allreduce(40)}, {})
    entry = doc["models"]["ncf"]
    assert "max_local_batch" not in entry and "memory limit was not reached" in entry["batch_source"]
    assert entry["gpus"]["g1"]["step_fixed_s"] == pytest.approx(0.05)
    one = build_profile([_sweep([(8, 0.1)])], "g1", {"ncf": assumed_allreduce(40)}, {})["models"]["ncf"]
    assert "step_fixed_s" not in one["gpus"]["g1"] and "left out" in one["batch_source"]


def test_cpu_tiny_run_keeps_the_sweep(measured):
    doc = json.loads(measured.read_text())
    for key in ("ncf", "resnet18"):
        entry = doc["models"][key]
        assert "min_local_batch" in entry and "batch_source" in entry
        timing = entry["gpus"]["cpu-tiny"]
        if "step_fixed_s" in timing:
            assert 0 <= timing["step_fixed_s"] <= timing["step_compute_s"]
