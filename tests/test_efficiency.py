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

from lyra_gym import efficiency as eff
from lyra_gym.efficiency import EfficiencyError, builtin_efficiency, parse_efficiency
from lyra_gym.profiles import builtin_profiles

ROOT = Path(__file__).resolve().parents[1]
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


def test_efficiency_decreases_with_batch():
    table = builtin_efficiency()
    for key, curve in table.models.items():
        for p in (0.0, 0.5, 1.0):
            values = [table.efficiency(key, curve.init_batch * k, p) for k in (1, 2, 4, 16, 256)]
            assert all(b < a for a, b in zip(values, values[1:])), (key, p, values)


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


def test_shipped_interpolation_between_two_points_by_hand():
    data = json.loads(SHIPPED.read_text())
    bert = data["models"]["bert"]
    (p0, p1), (y0, y1) = bert["progress"], bert["noise_scale"]
    mid = (p0 + p1) / 2
    assert eff.noise_scale("bert", mid) == pytest.approx((y0 + y1) / 2)
    assert eff.efficiency("bert", 96, mid) == pytest.approx(((y0 + y1) / 2 + 12) / ((y0 + y1) / 2 + 96))


# --- the shipped table ---------------------------------------------------------------------------

def test_every_shipped_model_loads_with_finite_positive_numbers():
    table = builtin_efficiency()
    assert set(table.models) == SHIPPED_MODELS
    for key, curve in table.models.items():
        assert math.isfinite(curve.init_batch) and curve.init_batch >= 1
        assert len(curve.progress) >= 2 and len(curve.progress) == len(curve.noise_scale)
        assert all(math.isfinite(x) and x > 0 for x in curve.noise_scale), key
        assert all(0 <= x <= 1 for x in curve.progress), key
        for p in (0.0, 0.25, 0.5, 0.75, 1.0):
            phi = table.noise_scale(key, p)
            assert math.isfinite(phi) and phi > 0
            assert 0 < table.efficiency(key, 4 * curve.init_batch, p) < 1


def test_shipped_models_are_profile_keys():
    profiles = builtin_profiles()
    for key in builtin_efficiency().models:
        assert key in profiles, key


def test_shipped_entries_cite_their_source():
    data = json.loads(SHIPPED.read_text())
    for key, entry in data["models"].items():
        src = entry["source"]
        assert src["repo"] == "petuum/adaptdl" and src["license"] == "Apache-2.0"
        assert src["file"] == f"simulator/traces/{entry['artifact_model']}/validation-{entry['init_batch']}.csv"
        assert len(src["commit"]) == 40


def test_shipped_noise_scale_is_the_artifact_formula_on_its_rows():
    # resnet18 = the artifact's cifar10 at M0 = 256; first kept epoch is row 0:
    # grad_sqr 17.379458169870425, grad_var 13.937760473946334 -> phi = 256 * var / sqr
    curve = builtin_efficiency().model("resnet18")
    assert curve.init_batch == 256
    assert curve.noise_scale[0] == pytest.approx(256 * 13.937760473946334 / 17.379458169870425, rel=1e-5)
    # its midpoint: (0 + 390.71438596642224) / 2 over the run's end 39062.90816659533
    assert curve.progress[0] == pytest.approx(390.71438596642224 / 2 / 39062.90816659533, abs=1e-6)


# --- the derivation tool -------------------------------------------------------------------------

def test_shipped_json_is_what_the_tool_derives_from_the_artifact_files():
    assert _tool().derive(ARTIFACT) == json.loads(SHIPPED.read_text())


def test_tool_command_line_writes_the_same_json(tmp_path):
    out = tmp_path / "efficiency.json"
    subprocess.run([sys.executable, str(ROOT / "tools" / "derive_efficiency.py"), str(ARTIFACT), "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, text=True)
    assert out.read_text() == SHIPPED.read_text()


def test_tool_on_a_toy_trace_matches_hand_computation():
    # validation-4.csv (M0 = 4, the smallest file): rows (progress, grad_sqr, grad_var) =
    # (10, 2, 1), (30, 1, 2), (40, 0.5, 4) and a 4th row beyond the 3-epoch run.
    doc = _tool().derive(TOY_TRACES, epochs={"toy": 3})
    entry = doc["models"]["toy"]
    assert entry["init_batch"] == 4
    assert entry["epoch"] == [0, 1, 2]
    assert entry["noise_scale"] == [4 * 1 / 2, 4 * 2 / 1, 4 * 4 / 0.5]   # 2, 8, 32
    assert entry["progress"] == [5 / 40, 20 / 40, 35 / 40]              # epoch midpoints over the end (40)
    assert entry["source"]["file"] == "simulator/traces/toy/validation-4.csv"
    # thinned to 2 points: first and last epoch
    thin = _tool().derive(TOY_TRACES, max_points=2, epochs={"toy": 3})["models"]["toy"]
    assert thin["epoch"] == [0, 2] and thin["noise_scale"] == [2.0, 32.0]
    # and the result loads: E at batch 8, progress 0.5 (phi = 8) = (8 + 4) / (8 + 8)
    assert parse_efficiency(doc).efficiency("toy", 8, 0.5) == pytest.approx(0.75)


def test_tool_thins_long_runs_evenly_keeping_first_and_last_epoch():
    tool = _tool()
    assert tool.kept_epochs(5, 11) == [0, 1, 2, 3, 4]
    kept = tool.kept_epochs(100, 11)
    assert len(kept) == 11 and kept[0] == 0 and kept[-1] == 99


@pytest.mark.parametrize(
    "text, message",
    [
        ("progress,grad_sqr\n1,1\n2,1\n3,1\n", "missing column"),
        ("progress,grad_sqr,grad_var\n1,1,1\n2,1,1\n", "2 rows"),
        ("progress,grad_sqr,grad_var\n1,1,1\n1,1,1\n2,1,1\n", "progress: must increase"),
        ("progress,grad_sqr,grad_var\n1,0,1\n2,1,1\n3,1,1\n", "grad_sqr: must be > 0"),
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
