"""Throughput profiles: the scaling model by hand, the shipped file, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lyra_gym.model.profiles import ProfileError, builtin_profiles, parse_profiles

ROOT = Path(__file__).resolve().parents[2]


def doc(**gpus):
    return {"format": "lyra-gym-profiles/1", "metadata": {"reference_gpu": "v100"},
            "models": {"m": {"local_batch": 32, "restart_overhead_s": 20, "gpus": gpus}}}


TIMINGS = {"v100": {"step_compute_s": 0.1, "allreduce_intra_s": 0.02, "allreduce_inter_s": 0.05},
           "t4": {"step_compute_s": 0.3, "allreduce_intra_s": 0.04, "allreduce_inter_s": 0.2}}


def test_scaling_model_matches_hand_computation():
    m = parse_profiles(doc(**TIMINGS)).model("m")
    assert m.throughput(1, 1, ["v100"]) == pytest.approx(32 / 0.1)
    # 4 workers in one server: ring factor 2*3/4 = 1.5 -> step 0.1 + 1.5*0.02 = 0.13
    assert m.throughput(4, 1, ["v100"]) == pytest.approx(4 * 32 / 0.13)
    # 8 workers over 2 servers: 2*7/8 = 1.75 -> 0.1 + 1.75*0.05 = 0.1875
    assert m.throughput(8, 2, ["v100"]) == pytest.approx(8 * 32 / 0.1875)
    # mixed: slowest compute (t4) and slowest all-reduce (t4 inter): 0.3 + 1.5*0.2
    assert m.throughput(4, 2, ["v100", "t4"]) == pytest.approx(4 * 32 / 0.6)
    assert m.restart_overhead_s == 20


def test_shipped_profile_is_what_the_derivation_script_writes(tmp_path):
    code = (
        "import json,sys; sys.path.insert(0, 'tools'); import derive_builtin_profiles as d;"
        "print(json.dumps(d.derive()))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    shipped = json.loads((ROOT / "lyra_gym" / "data" / "builtin_profiles.json").read_text())
    assert json.loads(out.stdout) == shipped


def test_builtin_profile_covers_trace_models_on_all_gpu_types():
    from lyra_gym.workloads.tracegen import MODEL_KEYS

    profiles = builtin_profiles()
    for key in MODEL_KEYS:
        for gpu in ("t4", "v100", "a100"):
            assert profiles.model(key).throughput(1, 1, [gpu]) > 0
        # more workers never lower throughput within one server in the shipped numbers
        rates = [profiles.model(key).throughput(n, 1, ["v100"]) for n in range(1, 9)]
        assert rates == sorted(rates)


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.update(format="x"), "format"),
        (lambda d: d["metadata"].pop("reference_gpu"), "reference_gpu"),
        (lambda d: d["models"]["m"]["gpus"]["v100"].update(step_compute_s="fast"), "models.m.gpus.v100.step_compute_s"),
        (lambda d: d["models"]["m"]["gpus"]["v100"].update(allreduce_inter_s=-1), "models.m.gpus.v100.allreduce_inter_s"),
        (lambda d: d["models"]["m"]["gpus"].pop("v100"), "reference GPU"),
        (lambda d: d["models"]["m"].update(local_batch=0), "models.m.local_batch"),
    ],
)
def test_bad_profile_names_the_field(mutate, field):
    data = doc(**json.loads(json.dumps(TIMINGS)))
    mutate(data)
    with pytest.raises(ProfileError, match=field):
        parse_profiles(data)


def test_unknown_model_key_lists_the_known_ones():
    with pytest.raises(ProfileError, match="unknown model key 'gpt9'.*resnet50"):
        builtin_profiles().model("gpt9")


def test_builtin_profile_reproduces_its_published_sources():
    # Every (model, GPU) with a published 1-GPU and 8-GPU figure (NVIDIA DeepLearningExamples,
    # via shared/data/PROVENANCE.md) comes back exactly: the derivation is a fit with zero error.
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import derive_builtin_profiles as derive
    finally:
        sys.path.pop(0)
    profiles = builtin_profiles()
    checked = 0
    for model, (_, gpus, _, _) in derive.PUBLISHED.items():
        for gpu, (sps1, sps8) in gpus.items():
            m = profiles.model(model)
            assert m.throughput(1, 1, [gpu]) == pytest.approx(sps1, rel=1e-9)
            assert m.throughput(8, 1, [gpu]) == pytest.approx(sps8, rel=1e-9)
            checked += 1
    assert checked == 12
    # Gavel's single-V100 ResNet-18 figure: 17.99 steps/s at batch 128
    assert profiles.model("resnet18").throughput(1, 1, ["v100"]) == pytest.approx(17.994906225052176 * 128)


# --- batch-dependent compute (step_fixed_s, max_local_batch) ------------------------------------
def _one(gpu: dict, **model) -> "ProfileSet":
    from lyra_gym.model.profiles import parse_profiles

    return parse_profiles({"format": "lyra-gym-profiles/1", "metadata": {"reference_gpu": "v100"},
                           "models": {"m": {"local_batch": 8, "gpus": {"v100": gpu}, **model}}}, source="p.json")


def test_compute_follows_the_local_batch_around_a_fixed_part():
    p = _one({"step_compute_s": 1.0, "step_fixed_s": 0.25, "allreduce_intra_s": 0.1, "allreduce_inter_s": 0.2})
    m = p.model("m")
    assert m.step_time(1, 1, ["v100"]) == 1.0 == m.step_time(1, 1, ["v100"], 8)
    assert m.step_time(1, 1, ["v100"], 4) == pytest.approx(0.25 + 0.75 / 2)
    assert m.step_time(2, 1, ["v100"], 4) == pytest.approx(0.625 + 0.1)  # + 2(2-1)/2 x 0.1
    assert p.throughput("m", 2, 1, frozenset({"v100"}), 4) == pytest.approx(2 * 4 / 0.725)
    assert p.packed_throughput("m", 2, "v100", 8, 4) == pytest.approx(2 * 4 / 0.725)


def test_a_profile_without_the_new_fields_gives_the_same_numbers():
    old = _one({"step_compute_s": 1.0, "allreduce_intra_s": 0.1, "allreduce_inter_s": 0.2})
    assert old.model("m").max_local_batch is None
    assert old.model("m").gpu("v100").step_fixed_s == 0.0
    assert old.throughput("m", 3, 2, frozenset({"v100"})) == 3 * 8 / (1.0 + 2 * 2 / 3 * 0.2)
    assert old.model("m").step_time(1, 1, ["v100"], 2) == pytest.approx(0.25)  # proportional without a fixed part


@pytest.mark.parametrize("gpu, model, field", [
    ({"step_fixed_s": 2.0}, {}, "models.m.gpus.v100.step_fixed_s"),
    ({"step_fixed_s": -1.0}, {}, "models.m.gpus.v100.step_fixed_s"),
    ({}, {"max_local_batch": 0.5}, "models.m.max_local_batch"),
    ({}, {"max_local_batch": "big"}, "models.m.max_local_batch"),
])
def test_bad_batch_fields_name_the_file_and_field(gpu, model, field):
    from lyra_gym.model.profiles import ProfileError

    with pytest.raises(ProfileError, match=f"p.json: {field}"):
        _one({"step_compute_s": 1.0, "allreduce_intra_s": 0.1, "allreduce_inter_s": 0.2, **gpu}, **model)


def test_a_fully_fixed_step_and_the_smallest_cap_are_accepted():
    # step_fixed_s == step_compute_s: compute does not depend on the batch; max_local_batch 1 is the floor
    p = _one({"step_compute_s": 0.5, "step_fixed_s": 0.5, "allreduce_intra_s": 0.0, "allreduce_inter_s": 0.0},
             max_local_batch=1)
    m = p.model("m")
    assert m.max_local_batch == 1.0
    assert m.step_time(1, 1, ["v100"], 1) == 0.5 == m.step_time(1, 1, ["v100"], 16)
    assert m.throughput(1, 1, ["v100"], 16) == 16 / 0.5  # samples/s grow with the batch


def test_mixed_gpu_types_at_another_local_batch_take_the_slowest_compute():
    # v100: 0.2 + 0.8 x 4/8 = 0.6 s; t4: 1.0 + 2.0 x 4/8 = 2.0 s (fixed 1.0 of 3.0) -> 2.0 + 2(2-1)/2 x 0.3
    data = {"format": "lyra-gym-profiles/1", "metadata": {"reference_gpu": "v100"},
            "models": {"m": {"local_batch": 8, "gpus": {
                "v100": {"step_compute_s": 1.0, "step_fixed_s": 0.2, "allreduce_intra_s": 0.1, "allreduce_inter_s": 0.2},
                "t4": {"step_compute_s": 3.0, "step_fixed_s": 1.0, "allreduce_intra_s": 0.2, "allreduce_inter_s": 0.3}}}}}
    p = parse_profiles(data)
    assert p.model("m").step_time(2, 2, ["v100", "t4"], 4) == pytest.approx(2.0 + 0.3)
    assert p.throughput("m", 2, 2, frozenset({"v100", "t4"}), 4) == pytest.approx(2 * 4 / 2.3)
    # the cached look-up with and without the local batch: the profile's batch gives today's number
    assert p.throughput("m", 2, 2, frozenset({"v100", "t4"})) == 2 * 8 / (3.0 + 0.3)
    assert p.throughput("m", 2, 2, frozenset({"v100", "t4"}), 8) == 2 * 8 / (3.0 + 0.3)


@pytest.mark.parametrize("batch", [0, -2.0, float("nan"), float("inf")])
def test_a_local_batch_that_is_not_positive_is_refused(batch):
    m = _one({"step_compute_s": 1.0, "allreduce_intra_s": 0.1, "allreduce_inter_s": 0.2}).model("m")
    with pytest.raises(ProfileError, match="model 'm': local_batch"):
        m.step_time(1, 1, ["v100"], batch)


def test_builtin_numbers_at_the_profiles_local_batch_do_not_move():
    # step_fixed_s changes nothing at the profile's own local batch, bit for bit
    profiles = builtin_profiles()
    for key, model in profiles.models.items():
        for gpu in model.gpus:
            for n, k in ((1, 1), (4, 1), (8, 2)):
                assert model.step_time(n, k, [gpu], model.local_batch) == model.step_time(n, k, [gpu])
                assert (profiles.throughput(key, n, k, frozenset({gpu}), model.local_batch)
                        == profiles.throughput(key, n, k, frozenset({gpu})))


def test_builtin_t4_speed_is_measured_where_a_measurement_exists():
    """Issue 39 item 1: the T4 step of resnet18 and resnet50 is the Pollux artifact's own one-T4 line
    (traces/pollux-t4-profile.json) read at the profile's local batch, not a T4/V100 ratio; 0.3 of the
    V100 (assumption) for the others. resnet18: 128 / (0.0200205 + (0.1038505 - 0.0200205) x 128 / 129)
    = 1,240.3 img/s, 0.538 of Gavel's 2,303.3; resnet50: 219.7 img/s at 256, 0.183 of DLE's 1,200."""
    from lyra_gym.model.profiles import builtin_profiles

    models = builtin_profiles().models
    ratio = {name: m.gpu("v100").step_compute_s / m.gpu("t4").step_compute_s for name, m in models.items()}
    t4_18 = 0.020020488499510658 + (0.10385050773620605 - 0.020020488499510658) * 128 / 129
    assert models["resnet18"].gpu("t4").step_compute_s == pytest.approx(t4_18, rel=1e-12)
    assert ratio["resnet18"] == pytest.approx(0.5385, abs=5e-4)
    assert ratio["resnet50"] == pytest.approx(0.1831, abs=5e-4)
    shipped = json.loads((ROOT / "lyra_gym" / "data" / "builtin_profiles.json").read_text())["models"]
    for name in ("bert", "deepspeech2", "ncf", "transformer", "yolov3"):
        assert ratio[name] == pytest.approx(0.3)
        assert shipped[name]["gpus"]["t4"]["source"].startswith("assumption: V100 speed x0.3")
        assert shipped[name]["gpus"]["t4"]["figure"]["basis"] == "assumption"
    for name in ("resnet18", "resnet50"):
        assert shipped[name]["gpus"]["t4"]["source"].startswith("Pollux artifact")
