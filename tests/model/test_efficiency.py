"""Statistical efficiency: the formula by hand, its shape, the shipped table, and its derivation."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from lyra_gym.model import efficiency as eff
from lyra_gym.model.efficiency import EfficiencyError, builtin_efficiency, parse_efficiency
from lyra_gym.model.profiles import builtin_profiles

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "tests" / "fixtures" / "adaptdl_validation"
TOY_TRACES = ROOT / "tests" / "fixtures" / "efficiency_toy"
SHIPPED = ROOT / "lyra_gym" / "data" / "efficiency.json"
SHIPPED_MODELS = {"bert", "deepspeech2", "ncf", "resnet18", "resnet50", "yolov3"}


@lru_cache(maxsize=1)
def _tool():
    """tools/derive_efficiency.py as a module (loaded once, so its exception class is one object)."""
    spec = importlib.util.spec_from_file_location("derive_efficiency", ROOT / "tools" / "derive_efficiency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def toy(**entry):
    """A one-model table: M0 = 100, phi = 300 at progress 0 rising linearly to 700 at progress 1."""
    model = {"init_batch": 100, "progress": [0.0, 1.0], "noise_scale": [300.0, 700.0]}
    model.update(entry)
    return {"format": "lyra-gym-efficiency/1", "models": {"m": model}}


# --- the formula ---------------------------------------------------------------------------------

def test_efficiency_matches_hand_computation():
    table = parse_efficiency(toy())
    # progress 0: phi = 300 -> (300 + 100) / (300 + 400) = 4/7
    assert table.efficiency("m", 400, 0.0) == pytest.approx(4 / 7)
    # progress 0.5: phi = 500 -> (500 + 100) / (500 + 200) = 6/7
    assert table.efficiency("m", 200, 0.5) == pytest.approx(6 / 7)
    # a reference batch of 200 replaces M0: (500 + 200) / (500 + 800) = 7/13
    assert table.efficiency("m", 800, 0.5, reference_batch=200) == pytest.approx(7 / 13)
    # below M0 a sample is worth more than one at M0: (300 + 100) / (300 + 50)
    assert table.efficiency("m", 50, 0.0) == pytest.approx(400 / 350)


def test_goodput_is_throughput_times_efficiency():
    table = parse_efficiency(toy())
    assert table.goodput(1000.0, "m", 400, 0.0) == pytest.approx(1000.0 * 4 / 7)
    assert eff.goodput(1000.0, "m", 400, 0.0, table=table) == pytest.approx(1000.0 * 4 / 7)
    assert table.goodput(0.0, "m", 400, 0.0) == 0.0


def test_efficiency_is_one_at_the_initial_batch():
    table = builtin_efficiency()
    for key, curve in table.models.items():
        for p in (0.0, 0.3, 1.0):
            assert table.efficiency(key, curve.init_batch, p) == pytest.approx(1.0)


def test_efficiency_is_at_most_one_above_the_initial_batch():
    # phi is measured per batch, so E need not fall monotonically between measured batches
    # (bert mid-run measures a larger phi at 192 than at 96), but a batch above M0 never gains
    table = builtin_efficiency()
    for key, curve in table.models.items():
        for p in (0.0, 0.5, 1.0):
            values = [table.efficiency(key, curve.init_batch * k, p) for k in (1, 2, 4, 16, 256)]
            assert values[0] == pytest.approx(1.0) and all(v <= 1.0 + 1e-12 for v in values), (key, p, values)


def test_efficiency_between_two_measured_files_is_the_interpolation_by_hand():
    # imagenet (resnet50) in epoch 45, batch 1,200 = halfway between the 800 and 1,600 runs:
    # grad_sqr and grad_var each interpolated linearly in the batch (get_grad_stats)
    data = json.loads(SHIPPED.read_text())["models"]["resnet50"]
    i800, i1600 = data["batches"].index(800), data["batches"].index(1600)
    sqr = (data["grad_sqr"][i800][45] + data["grad_sqr"][i1600][45]) / 2
    var = (data["grad_var"][i800][45] + data["grad_var"][i1600][45]) / 2
    phi = 200 * var / sqr
    p = (data["epoch_end"][44] + data["epoch_end"][45]) / 2
    assert eff.noise_scale("resnet50", p) == pytest.approx(200 * data["grad_var"][0][45] / data["grad_sqr"][0][45])
    assert builtin_efficiency().model("resnet50").noise_scale_at(p, 1200) == pytest.approx(phi)
    assert eff.efficiency("resnet50", 1200, p) == pytest.approx((phi + 200) / (phi + 1200))
    # at a measured batch it is that file's own row: imagenet mid-run, 11,397 at 200 vs 36,255 at 6,400
    curve = builtin_efficiency().model("resnet50")
    assert curve.noise_scale_at(p, 200) == pytest.approx(11396.84, rel=1e-5)
    assert curve.noise_scale_at(p, 6400) == pytest.approx(36255.33, rel=1e-5)
    assert curve.efficiency(6400, p) == pytest.approx(0.8546, abs=1e-4)
    # beyond the measured batches: held at the end run
    assert curve.noise_scale_at(p, 20000) == curve.noise_scale_at(p, 12800)


def test_zero_gradient_norm_means_efficiency_one():
    curve = builtin_efficiency().model("deepspeech2")  # validation-20.csv row 56 has grad_sqr = 0
    p = (curve.epoch_end[55] + curve.epoch_end[56]) / 2
    assert curve.grad_sqr[0][56] == 0
    assert math.isinf(curve.noise_scale_at(p, 20))
    assert curve.efficiency(20, p) == 1.0


def test_m0_per_model_is_the_artifacts_initial_batch():
    # simulator/applications.py init_batch_size = min(validation); isolated_jobs.csv's init_batch_size
    expected = {"bert": 12, "resnet18": 128, "deepspeech2": 20, "resnet50": 200, "ncf": 256, "yolov3": 8}
    table = builtin_efficiency()
    assert {k: table.model(k).init_batch for k in expected} == expected
    reference = json.loads((ROOT / "benchmarks" / "pollux_reference.json").read_text())
    apps = {"bert": "bert", "cifar10": "resnet18", "deepspeech2": "deepspeech2", "imagenet": "resnet50",
            "ncf": "ncf", "yolov3": "yolov3"}
    for row in reference["isolated"]:
        assert table.model(apps[row["application"]]).init_batch == row["init_batch_size"]


def test_efficiency_increases_with_noise_scale():
    batches = (200, 800, 6400)
    for m in batches:
        values = [parse_efficiency(toy(noise_scale=[phi, phi])).efficiency("m", m, 0.5)
                  for phi in (0, 10, 300, 1e4, 1e7)]
        assert all(b > a for a, b in zip(values, values[1:])), (m, values)
        assert values[0] == pytest.approx(100 / m)  # phi = 0: no gain from a larger batch
        assert values[-1] == pytest.approx(1.0, rel=1e-3)  # huge phi: every sample counts fully


# --- interpolation -------------------------------------------------------------------------------

def test_noise_scale_interpolates_linearly_and_holds_beyond_the_ends():
    table = parse_efficiency(toy(progress=[0.2, 0.6, 0.8], noise_scale=[100.0, 500.0, 300.0]))
    assert table.noise_scale("m", 0.0) == 100.0     # before the first point: held
    assert table.noise_scale("m", 0.2) == 100.0
    assert table.noise_scale("m", 0.3) == pytest.approx(200.0)   # 100 + (0.1 / 0.4) * 400
    assert table.noise_scale("m", 0.6) == pytest.approx(500.0)
    assert table.noise_scale("m", 0.75) == pytest.approx(350.0)  # 500 - (0.15 / 0.2) * 200
    assert table.noise_scale("m", 1.0) == 300.0     # after the last point: held
    # the efficiency uses the interpolated phi: (200 + 100) / (200 + 400)
    assert table.efficiency("m", 400, 0.3) == pytest.approx(0.5)


# --- the shipped table ---------------------------------------------------------------------------

def test_every_shipped_model_loads_with_finite_positive_numbers():
    table = builtin_efficiency()
    assert set(table.models) == SHIPPED_MODELS
    for key, curve in table.models.items():
        assert math.isfinite(curve.init_batch) and curve.init_batch >= 1
        assert len(curve.epoch_end) >= 2 and curve.epoch_end[-1] == 1.0
        assert len(curve.grad_sqr) == len(curve.batches) == len(curve.grad_var)
        assert all(x >= 0 for row in curve.grad_sqr + curve.grad_var for x in row), key
        for p in (0.0, 0.25, 0.5, 0.75, 1.0):
            phi = table.noise_scale(key, p)
            assert phi > 0
            assert 0 < table.efficiency(key, 4 * curve.init_batch, p) <= 1


def test_shipped_models_are_profile_keys():
    profiles = builtin_profiles()
    for key in builtin_efficiency().models:
        assert key in profiles, key


def test_shipped_entries_cite_their_source():
    data = json.loads(SHIPPED.read_text())
    for key, entry in data["models"].items():
        src = entry["source"]
        assert src["repo"] == "petuum/adaptdl" and src["license"] == "Apache-2.0"
        assert src["files"] == [f"simulator/traces/{entry['artifact_model']}/validation-{b}.csv"
                                for b in entry["batches"]]
        assert len(src["commit"]) == 40


def test_shipped_noise_scale_is_the_artifact_formula_on_its_rows():
    # resnet18 = the artifact's cifar10 at M0 = 128; row 0 of validation-128.csv, phi = 128 * var / sqr
    curve = builtin_efficiency().model("resnet18")
    assert curve.init_batch == 128 and curve.batches[0] == 128
    row = next(iter(__import__("csv").DictReader(open(ARTIFACT / "cifar10" / "validation-128.csv"))))
    assert curve.noise_scale_at(0.0) == pytest.approx(128 * float(row["grad_var"]) / float(row["grad_sqr"]))


# --- the derivation tool -------------------------------------------------------------------------

def test_shipped_json_is_what_the_tool_derives_from_the_artifact_files():
    assert _tool().derive(ARTIFACT) == json.loads(SHIPPED.read_text())


def test_tool_command_line_writes_the_same_json(tmp_path):
    out = tmp_path / "efficiency.json"
    subprocess.run([sys.executable, str(ROOT / "tools" / "derive_efficiency.py"), str(ARTIFACT), "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    assert out.read_text() == SHIPPED.read_text()


def test_tool_on_a_toy_trace_matches_hand_computation():
    # validation-4.csv (M0 = 4): rows (progress, grad_sqr, grad_var) = (10, 2, 1), (30, 1, 2), (40, 0.5, 4);
    # validation-16.csv: (10.5, 1, 100), (31, 1, 100), (41, 1, 100). Epoch ends = the smaller progress.
    doc = _tool().derive(TOY_TRACES, epochs={"toy": 3})
    entry = doc["models"]["toy"]
    assert entry["init_batch"] == 4 and entry["batches"] == [4, 16]
    assert entry["epoch_end"] == [10 / 40, 30 / 40, 1.0]
    assert entry["grad_sqr"] == [[2.0, 1.0, 0.5], [1.0, 1.0, 1.0]]
    assert entry["grad_var"] == [[1.0, 2.0, 4.0], [100.0, 100.0, 100.0]]
    table = parse_efficiency(doc)
    # at M0 in epoch 1: phi = 4 * 2 / 1 = 8; batch 8 -> (8 + 4) / (8 + 8)
    assert table.efficiency("toy", 8, 0.5) != pytest.approx(0.75)  # batch 8 reads between the runs
    assert table.noise_scale("toy", 0.5) == pytest.approx(8.0)
    # batch 10 = halfway between 4 and 16 in epoch 1: sqr 1, var 51 -> phi 204
    assert table.efficiency("toy", 10, 0.5) == pytest.approx((204 + 4) / (204 + 10))


@pytest.mark.parametrize(
    "text, message",
    [
        ("progress,grad_sqr\n1,1\n2,1\n3,1\n", "missing column"),
        ("progress,grad_sqr,grad_var\n1,1,1\n2,1,1\n", "2 rows"),
        ("progress,grad_sqr,grad_var\n1,1,1\n1,1,1\n2,1,1\n", "progress: must increase"),
        ("progress,grad_sqr,grad_var\n1,-1,1\n2,1,1\n3,1,1\n", "grad_sqr: must be >= 0"),
        ("progress,grad_sqr,grad_var\n1,1,x\n2,1,1\n3,1,1\n", "grad_var: expected a number"),
    ],
)
def test_tool_rejects_bad_files_naming_file_and_column(tmp_path, text, message):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "validation-8.csv").write_text(text)
    with pytest.raises(_tool().DeriveError, match=message):
        _tool().derive(tmp_path, epochs={"toy": 3})


def test_tool_reports_a_missing_model_folder(tmp_path):
    with pytest.raises(_tool().DeriveError, match="no validation"):
        _tool().derive(tmp_path)


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: t.efficiency("gpt9", 100, 0.5), "unknown model key 'gpt9'.*m"),
        (lambda t: t.efficiency("m", 0, 0.5), "batch: must be >= 1"),
        (lambda t: t.efficiency("m", 0.5, 0.5), "batch: must be >= 1"),
        (lambda t: t.efficiency("m", float("nan"), 0.5), "batch: expected a finite number"),
        (lambda t: t.efficiency("m", float("inf"), 0.5), "batch: expected a finite number"),
        (lambda t: t.efficiency("m", "64", 0.5), "batch: expected a number"),
        (lambda t: t.efficiency("m", 100, -0.01), r"progress: must be in \[0, 1\]"),
        (lambda t: t.efficiency("m", 100, 1.5), r"progress: must be in \[0, 1\]"),
        (lambda t: t.efficiency("m", 100, float("nan")), "progress: expected a finite number"),
        (lambda t: t.efficiency("m", 100, True), "progress: expected a number"),
        (lambda t: t.efficiency("m", 100, 0.5, reference_batch=0), "reference_batch: must be >= 1"),
        (lambda t: t.noise_scale("m", 2), "progress"),
        (lambda t: t.goodput(-1.0, "m", 100, 0.5), "throughput: must be >= 0"),
        (lambda t: t.goodput(float("nan"), "m", 100, 0.5), "throughput: expected a finite number"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, message):
    with pytest.raises(ValueError, match=message):
        call(parse_efficiency(toy()))


def test_unknown_model_in_the_shipped_table_lists_the_known_keys():
    with pytest.raises(EfficiencyError, match="'transformer'.*resnet50"):
        eff.efficiency("transformer", 64, 0.5)


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.update(format="x"), "format"),
        (lambda d: d.update(models=[]), "models"),
        (lambda d: d["models"]["m"].update(init_batch=0), "models.m.init_batch"),
        (lambda d: d["models"]["m"].update(init_batch="big"), "models.m.init_batch"),
        (lambda d: d["models"]["m"].update(progress=[0.5, 0.5]), "models.m.progress"),
        (lambda d: d["models"]["m"].update(progress=[0.0, 1.5]), "models.m.progress"),
        (lambda d: d["models"]["m"].update(progress=[]), "models.m.progress"),
        (lambda d: d["models"]["m"].update(noise_scale=[1.0]), "2 points, noise_scale 1"),
        (lambda d: d["models"]["m"].update(noise_scale=[1.0, -1.0]), "models.m.noise_scale"),
        (lambda d: d["models"]["m"].update(noise_scale=[1.0, float("nan")]), r"models.m.noise_scale\[1\]"),
    ],
)
def test_bad_file_names_the_field(mutate, field):
    data = toy()
    mutate(data)
    with pytest.raises(EfficiencyError, match=field):
        parse_efficiency(data)


def test_load_efficiency_reads_a_file_and_rejects_bad_json(tmp_path):
    good = tmp_path / "e.json"
    good.write_text(json.dumps(toy()))
    assert eff.load_efficiency(good).efficiency("m", 400, 0.0) == pytest.approx(4 / 7)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(EfficiencyError, match="not valid JSON"):
        eff.load_efficiency(bad)
