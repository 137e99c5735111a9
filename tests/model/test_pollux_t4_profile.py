"""The T4 profile derived from the Pollux artifact's measurements (traces/pollux-t4-profile.json):
the shipped file on its own (loads, finite positive numbers, hand-checked against measured rows),
the derivation tool on synthetic data with known units, the tool against the artifact copy (skipped
where ``../shared/data/pollux_t4`` is absent, as in CI), and a conversion + run on the testbed."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lyra_gym.cli.app import main
from lyra_gym.model.profiles import load_profiles
from lyra_gym.workloads.realtraces import POLLUX_APPLICATIONS, load_pollux

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "traces" / "pollux-t4-profile.json"
TOOL = ROOT / "tools" / "derive_pollux_t4_profile.py"
ARTIFACT = ROOT.parent / "shared" / "data" / "pollux_t4"  # not in a plain clone of the repository (CI)
TINY = ROOT / "tests" / "fixtures" / "pollux" / "workload-tiny.csv"
TESTBED = ROOT / "traces" / "pollux-testbed.yaml"


def _tool():
    """tools/derive_pollux_t4_profile.py as a module (registered, as its dataclass needs; loaded once)."""
    name = "derive_pollux_t4_profile"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TOOL)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ------------------------------------------------------------------ the shipped file on its own


def test_shipped_profile_loads_with_t4_reference_and_the_converters_model_keys():
    profiles = load_profiles(SHIPPED)
    assert profiles.reference_gpu == "t4"
    assert set(profiles.models) == {a.model for a in POLLUX_APPLICATIONS.values()}
    doc = json.loads(SHIPPED.read_text())
    for app, a in POLLUX_APPLICATIONS.items():
        entry = doc["models"][a.model]
        assert entry["pollux_application"] == app
        assert entry["pollux_init_batch_size"] == a.init_batch_size
        # the measured batch nearest b0: equal, or the artifact grid's 129 / 257 for 128 / 256
        assert abs(entry["local_batch"] - a.init_batch_size) <= 1
        assert set(entry["gpus"]) == {"t4"}


def test_shipped_profile_numbers_are_finite_and_positive():
    doc = json.loads(SHIPPED.read_text())
    for key, entry in doc["models"].items():
        g = entry["gpus"]["t4"]
        for field in ("step_compute_s", "allreduce_intra_s", "allreduce_inter_s"):
            assert math.isfinite(g[field]) and g[field] > 0, (key, field)
        assert g["allreduce_inter_s"] > g["allreduce_intra_s"], key  # Ethernet across nodes, PCIe inside
        assert entry["local_batch"] > 0 and entry["restart_overhead_s"] == 30.0
        assert entry["measured_row"]["step_time"] == g["step_compute_s"]
        for group in entry["fit"].values():
            if group["rows"]:
                assert 0 <= group["mape_pct"] <= group["max_pct"] < 100, key
        assert "placements.csv" in g["source"] and "de25dcc9" in g["source"]


def test_shipped_bert_matches_measured_rows_by_hand():
    # petuum/adaptdl@de25dcc9 simulator/traces/bert/placements.csv (shared/data/pollux_t4/bert/):
    #   1,12,0.9215156733989716,...     one T4, local batch 12
    #   4,12,0.9571182131767273,...     4 T4 in one node
    #   1111,12,1.470600575208664,...   4 nodes x 1 T4
    bert = load_profiles(SHIPPED).model("bert")
    assert bert.local_batch == 12
    assert bert.throughput(1, 1, ["t4"]) == pytest.approx(12 / 0.9215156733989716, rel=1e-12)  # 13.02 seq/s
    # the fitted units: within the fit's own reported errors (1-node max 2.1 %, multi-node max 34 %)
    assert bert.step_time(4, 1, ["t4"]) == pytest.approx(0.9571182131767273, rel=0.03)
    assert bert.step_time(4, 4, ["t4"]) == pytest.approx(1.470600575208664, rel=0.10)


def test_shipped_bert_at_another_local_batch_matches_its_measured_row_by_hand():
    # petuum/adaptdl@de25dcc9 simulator/traces/bert/placements.csv: 1,8,0.7032617032527924,... (one T4, batch 8)
    bert = load_profiles(SHIPPED).model("bert")
    t4 = bert.gpu("t4")
    assert bert.max_local_batch == 12  # the largest batch of the one-GPU grid
    assert 0 < t4.step_fixed_s < t4.step_compute_s
    compute8 = t4.step_fixed_s + (t4.step_compute_s - t4.step_fixed_s) * 8 / 12
    assert bert.step_time(1, 1, ["t4"], 8) == pytest.approx(compute8, rel=1e-12)
    assert bert.throughput(1, 1, ["t4"], 8) == pytest.approx(8 / compute8, rel=1e-12)
    reported = json.loads(SHIPPED.read_text())["models"]["bert"]["fit"]["one_gpu_by_batch"]["max_pct"]  # 2.1 %
    assert abs(compute8 - 0.7032617032527924) / 0.7032617032527924 * 100 <= reported + 0.01
    # sub-linear: half the batch takes more than half the step (the fixed part stays)
    assert bert.step_time(1, 1, ["t4"], 6) > t4.step_compute_s / 2


def test_converter_durations_are_t4_run_times_at_the_profiles_rates():
    profiles = load_profiles(SHIPPED)
    jobs = {j.job_id: j for j in load_pollux(TINY, profiles=profiles)}
    # bert-2: 4 replicas -> one node of 4 T4; work = P* x b0 = 14,774 x 12 sequences
    # at batch 384: local 96 > max_local_batch 12, so 7 accumulation steps of micro-batch 12 and one
    # all-reduce per optimizer step (batch_limit: accumulate): 384 sequences per step + 7 x compute
    bert = profiles.model("bert").gpu("t4")
    step = bert.step_compute_s + 1.5 * bert.allreduce_intra_s + 7 * bert.step_compute_s
    assert jobs["bert-2"].duration == pytest.approx(14774.0 * 12 / (384 / step), rel=1e-12)
    # imagenet-4: 8 replicas -> 2 nodes of 4 T4, the across-node unit
    r50 = profiles.model("resnet50").gpu("t4")
    # at batch 3200: local 400 > 200, so one accumulation step (micro-batch 200, batch 3200)
    step = r50.step_compute_s + 1.75 * r50.allreduce_inter_s + r50.step_compute_s
    assert jobs["imagenet-4"].duration == pytest.approx(576525.594895604 * 200 / (3200 / step), rel=1e-12)


def test_converted_trace_runs_on_the_testbed_with_the_profile(tmp_path, capsys):
    out = tmp_path / "tiny.csv"
    assert main(["trace", "convert", "--format", "pollux", "--in", str(TINY), "--out", str(out),
                 "--profiles", str(SHIPPED)]) == 0
    config = tmp_path / "testbed-t4.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(TESTBED.read_text()), "profiles": str(SHIPPED)}))
    run = tmp_path / "fifo"
    assert main(["simulate", "--policy", "fifo", "--trace", str(out), "--config", str(config),
                 "--out", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["jobs_finished"] == 6 and metrics["jobs_unfinished"] == 0
    capsys.readouterr()


# ------------------------------------------------------------------ the tool


UNITS = {  # app -> (local batches written, 1-GPU step at the batch nearest b0, intra, inter)
    "bert": ((4, 12), 0.9, 0.02, 0.4),
    "cifar10": ((64, 129), 0.1, 0.008, 0.04),  # b0 128 -> the nearest measured 129
    "deepspeech2": ((20,), 0.7, 0.08, 0.25),
    "imagenet": ((200,), 0.9, 0.05, 0.06),
    "ncf": ((257, 513), 0.0074, 0.0026, 0.0097),
    "yolov3": ((8,), 0.33, 0.08, 0.42),
}
PLACEMENTS = ("1", "2", "3", "4", "11", "22", "44", "1213", "4444")


def _synthetic(root: Path) -> Path:
    for app, (batches, compute, intra, inter) in UNITS.items():
        lines = ["placement,local_bsz,step_time,sync_time"]
        near = min(batches, key=lambda b: abs(b - POLLUX_APPLICATIONS[app].init_batch_size))
        for b in batches:  # other batches: compute proportional to the batch, a decoy the fit must ignore
            c = compute if b == near else compute * b / near
            for p in PLACEMENTS:
                n, k = sum(map(int, p)), len(p)
                step = c if n == 1 else c + 2 * (n - 1) / n * (intra if k == 1 else inter)
                lines.append(f"{p},{b},{step!r},0.0")
        (root / app).mkdir(parents=True)
        (root / app / "placements.csv").write_text("\n".join(lines) + "\n")
    return root


def test_tool_recovers_known_units_with_zero_error(tmp_path):
    doc = _tool().derive(_synthetic(tmp_path / "data"))
    for app, (batches, compute, intra, inter) in UNITS.items():
        entry = doc["models"][POLLUX_APPLICATIONS[app].model]
        g = entry["gpus"]["t4"]
        assert entry["local_batch"] == min(batches, key=lambda b: abs(b - POLLUX_APPLICATIONS[app].init_batch_size))
        assert g["step_compute_s"] == compute
        assert g["allreduce_intra_s"] == pytest.approx(intra, rel=1e-9)
        assert g["allreduce_inter_s"] == pytest.approx(inter, rel=1e-9)
        assert entry["fit"]["all"] == {"rows": len(PLACEMENTS), "mape_pct": 0.0, "max_pct": 0.0}
        assert entry["fit"]["held_out_6_16_nodes"] == {"rows": 0, "mape_pct": None, "max_pct": None}
        # the decoy batches have compute proportional to the batch: no fixed part, and the largest is the cap
        assert g["step_fixed_s"] == pytest.approx(0.0, abs=1e-9)
        assert entry["max_local_batch"] == max(batches)
        assert entry["fit"]["one_gpu_by_batch"]["mape_pct"] == pytest.approx(0.0, abs=0.01)
    assert doc["metadata"]["reference_gpu"] == "t4"


def test_tool_cli_prints_the_document_and_refuses_a_missing_folder(tmp_path):
    data = _synthetic(tmp_path / "data")
    out = subprocess.run([sys.executable, str(TOOL), "--data", str(data), "--out", "-"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == _tool().derive(data)
    bad = subprocess.run([sys.executable, str(TOOL), "--data", str(tmp_path / "nope"), "--out", "-"], cwd=ROOT,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not a folder" in bad.stderr


def test_tool_refuses_data_without_a_one_gpu_row(tmp_path):
    data = _synthetic(tmp_path / "data")
    path = data / "yolov3" / "placements.csv"
    path.write_text("\n".join(x for x in path.read_text().splitlines() if not x.startswith("1,")) + "\n")
    with pytest.raises(ValueError, match="placement=1, local_bsz=8"):
        _tool().derive(data)


@pytest.mark.skipif(not ARTIFACT.is_dir(), reason=f"artifact copy {ARTIFACT} absent (a plain clone, e.g. CI)")
def test_shipped_profile_is_what_the_tool_derives_from_the_artifact():
    tool = _tool()
    assert tool.render(tool.derive(ARTIFACT)) == SHIPPED.read_text(encoding="utf-8")


@pytest.mark.skipif(not ARTIFACT.is_dir(), reason=f"artifact copy {ARTIFACT} absent (a plain clone, e.g. CI)")
def test_the_batch_line_predicts_measured_one_gpu_steps_within_its_reported_error():
    profile = json.loads(SHIPPED.read_text())["models"]
    tool = _tool()
    for key, entry in profile.items():
        rows = [r for r in tool.read_placements(ARTIFACT / entry["pollux_application"] / "placements.csv") if r.n == 1]
        model = load_profiles(SHIPPED).model(key)
        worst = max(abs(model.step_time(1, 1, ["t4"], r.b) - r.step) / r.step * 100 for r in rows)
        assert worst <= entry["fit"]["one_gpu_by_batch"]["max_pct"] + 0.01
