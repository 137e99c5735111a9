"""Every figure of the built-in profile rests on a measurement in the repository, or says it is an assumption.

Issue 39 item 1: the built-in T4 resnet50 entry was 781 img/s at local batch 256 (770 at 200), from a
T4/V100 ratio of Gavel's FP32 V100 against the Pollux artifact's mixed-precision T4, applied to an AMP
V100 figure, while the artifact measured 216.6 img/s on one T4 at 200. Here each (model, GPU type) entry
of ``lyra_gym/data/builtin_profiles.json``, read through the simulator's own batch model
(``ModelProfile.throughput`` at the measurement's local batch), must be within 15 % of a measured
single-GPU figure of the same GPU type, model, batch and precision, unless its ``figure`` record marks
it an assumption.

The measured figures are read from the repository, not from the profile:
- V100 / A100: the published figures ``tools/derive_builtin_profiles.py`` cites (NVIDIA
  DeepLearningExamples, AMP: ``PUBLISHED``, less the stand-ins whose note is an assumption; Gavel's
  FP32 ResNet-18: ``RESNET18_V100``).
- T4: the measured row of ``traces/pollux-t4-profile.json`` (the Pollux artifact's placements.csv,
  one T4) for the applications that are the profile's model: cifar10 is ResNet-18 in FP32
  (petuum/adaptdl benchmark/models/cifar10/main.py, no AMP), imagenet is torchvision ResNet-50 with
  apex AMP (benchmark/models/imagenet/main.py, ``amp.initialize``, default opt_level O1).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from lyra_gym.model.profiles import builtin_profiles

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ROOT / "lyra_gym" / "data" / "builtin_profiles.json"
POLLUX_T4 = ROOT / "traces" / "pollux-t4-profile.json"
TOLERANCE = 0.15

# Profile model -> (artifact application, precision of its T4 run): the same model, see the docstring.
T4_COUNTERPARTS = {"resnet18": ("cifar10", "FP32"), "resnet50": ("imagenet", "AMP")}


def _tool():
    path = ROOT / "tools" / "derive_builtin_profiles.py"
    spec = importlib.util.spec_from_file_location("derive_builtin_profiles_t", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measured_figures() -> list[dict]:
    """(gpu, model, batch, samples/s, precision, where) of every single-GPU measurement in the repository."""
    tool = _tool()
    out = []
    for model, (batch, gpus, source, note) in tool.PUBLISHED.items():
        if note.startswith("assumption"):  # a stand-in model's figure is not this model's
            continue
        for gpu, (sps1, _) in gpus.items():
            out.append({"gpu": gpu, "model": model, "batch": batch, "sps": sps1, "precision": "AMP", "where": source})
    out.append({"gpu": "v100", "model": "resnet18", "batch": 128, "sps": tool.RESNET18_V100, "precision": "FP32",
                "where": "Gavel simulation_throughputs.json"})
    t4 = json.loads(POLLUX_T4.read_text(encoding="utf-8"))["models"]
    for model, (app, precision) in T4_COUNTERPARTS.items():
        entry = t4[model]
        assert entry["pollux_application"] == app
        row = entry["measured_row"]
        out.append({"gpu": "t4", "model": model, "batch": row["local_bsz"], "sps": row["local_bsz"] / row["step_time"],
                    "precision": precision, "where": f"{POLLUX_T4.name} {row['file']}"})
    return out


def _entries() -> list[tuple[str, str]]:
    models = json.loads(BUILTIN.read_text(encoding="utf-8"))["models"]
    return [(model, gpu) for model, m in sorted(models.items()) for gpu in sorted(m["gpus"])]


@pytest.mark.parametrize("model, gpu", _entries())
def test_builtin_figure_is_measured_within_15_percent_or_an_assumption(model, gpu):
    entry = json.loads(BUILTIN.read_text(encoding="utf-8"))["models"][model]["gpus"][gpu]
    figure = entry.get("figure", {})
    if figure.get("basis") == "assumption":
        assert figure["source"].startswith("assumption"), figure
        return
    profile = builtin_profiles().model(model)
    candidates = [f for f in measured_figures() if (f["gpu"], f["model"]) == (gpu, model)
                  and f["precision"] == figure.get("precision", f["precision"])]
    assert candidates, f"{model} on {gpu}: no measured figure in the repository and not marked an assumption"
    errors = {f["where"]: profile.throughput(1, 1, [gpu], f["batch"]) / f["sps"] - 1 for f in candidates}
    assert min(abs(e) for e in errors.values()) <= TOLERANCE, (model, gpu, errors)


def test_t4_is_measured_wherever_the_repository_measured_the_model():
    models = json.loads(BUILTIN.read_text(encoding="utf-8"))["models"]
    for model in T4_COUNTERPARTS:
        assert models[model]["gpus"]["t4"]["figure"]["basis"] == "measured"
    tool = _tool()
    for model, m in models.items():
        basis = m["gpus"]["t4"]["figure"]["basis"]
        assert (basis == "measured") == (model in tool.T4_MEASURED), model


def test_t4_resnet50_is_the_artifact_line_at_the_profile_batch():
    # Hand-computed from traces/pollux-t4-profile.json (imagenet, 1 T4): step 0.923530888557434 s at
    # local batch 200 (the measured row), fixed part 0.06101514915959716 s, so at the profile's 256:
    # 0.0610151 + (0.9235309 - 0.0610151) x 256 / 200 = 1.16505 s -> 219.7 img/s (was 781.5),
    # 216.56 img/s at 200 as measured; T4 / V100 = (256 / 1200) / 1.16505 = 0.183 (was 0.651).
    m = builtin_profiles().model("resnet50")
    step = 0.06101514915959716 + (0.923530888557434 - 0.06101514915959716) * 256 / 200
    assert m.gpu("t4").step_compute_s == pytest.approx(step, rel=1e-12)
    assert m.throughput(1, 1, ["t4"]) == pytest.approx(219.73, abs=0.01)
    assert m.throughput(1, 1, ["t4"], 200) == pytest.approx(200 / 0.923530888557434, rel=1e-9)
    assert m.gpu("v100").step_compute_s / m.gpu("t4").step_compute_s == pytest.approx(0.1831, abs=1e-4)


def test_every_figure_states_precision_batch_and_source():
    models = json.loads(BUILTIN.read_text(encoding="utf-8"))["models"]
    for model, m in models.items():
        for gpu, entry in m["gpus"].items():
            figure = entry["figure"]
            assert figure["basis"] in ("measured", "assumption"), (model, gpu)
            assert figure["precision"] in ("AMP", "FP32"), (model, gpu)
            assert figure["batch"] > 0 and figure["samples_per_s"] > 0 and figure["source"], (model, gpu)
