"""Derive lyra_gym/data/builtin_profiles.json from published single-node figures.

Run: python tools/derive_builtin_profiles.py

Each model gets, per GPU type, the compute time of one step at a stated local
batch and the all-reduce time of one step inside a server and across servers.
The scaling model these feed is documented in lyra_gym/model/profiles.py.

Sources (numbers, not text):
- NVIDIA DeepLearningExamples READMEs, mixed precision, samples/s on 1 and 8
  GPUs of one server (V100, A100), as collected in shared/data/PROVENANCE.md.
- Gavel (stanford-futuredata/gavel, scheduler/simulation_throughputs.json,
  commit c4fa4009, MIT): ResNet-18 (CIFAR-10, FP32) batch 128 on one V100 =
  17.99 steps/s.
- Pollux artifact (petuum/adaptdl de25dcc9, Apache-2.0), simulator/traces/
  {cifar10,imagenet}/placements.csv via traces/pollux-t4-profile.json: the
  absolute single-T4 figures of resnet18 and resnet50 (T4_MEASURED).
Every GPU entry carries a ``figure`` record: the 1-GPU samples/s it rests on,
its local batch and precision, and whether it is a measurement or an
assumption (tests/model/test_builtin_profile_sources.py holds each measured one to
the repository's figure within 15 %).
This is the small built-in profile; the measured profiles of the CUDA
collector replace it.
"""
from __future__ import annotations

import json
from pathlib import Path

DLE = "NVIDIA DeepLearningExamples README (AMP), via shared/data/PROVENANCE.md"
RING_8 = 2 * 7 / 8  # ring all-reduce factor 2(n-1)/n at n = 8

# model -> (local batch, {gpu: (samples/s on 1 GPU, samples/s on 8 GPUs of one server)}, source, note)
PUBLISHED = {
    "resnet50": (256, {"v100": (1200, 8322), "a100": (2470, 16621)}, DLE + ": ResNet-50 v1.5", ""),
    "bert": (64, {"v100": (224, 1746), "a100": (580, 4591)}, DLE + ": BERT-large pretrain seq128", ""),
    "transformer": (5120, {"v100": (32942, 214656), "a100": (82059, 551599)},
                    DLE + ": Transformer-big, tokens/s", "samples are tokens"),
    "ncf": (131072, {"v100": (21.8e6, 96.0e6), "a100": (34.1e6, 142.9e6)}, DLE + ": NCF", ""),
    "yolov3": (64, {"v100": (297, 2154), "a100": (663, 5253)},
               DLE + ": SSD300", "assumption: SSD300 stands in for YOLOv3 (both single-stage detectors)"),
    "deepspeech2": (8192, {"v100": (76438, 447832), "a100": (140909, 822024)},
                    DLE + ": GNMT, tokens/s", "assumption: GNMT (LSTM) stands in for DeepSpeech2 (RNN)"),
}
# ResNet-18: Gavel's single-V100 figure; 8-GPU efficiency and the A100/V100 ratio
# are assumed equal to ResNet-50's (Gavel's multi-GPU ResNet-18 entries are super-linear).
RESNET18_V100 = 17.994906225052176 * 128

# T4 entries (issue 39 item 1): the absolute single-T4 measurement of the same model where the
# repository holds one, else the V100 figure scaled by an assumed speed. The measurement is the
# Pollux artifact's (petuum/adaptdl de25dcc9, Apache-2.0, simulator/traces/<app>/placements.csv,
# copied in shared/data/pollux_t4/), as fitted in traces/pollux-t4-profile.json by
# tools/derive_pollux_t4_profile.py: the measured one-T4 step at the artifact's local batch and the
# least-squares line step = step_fixed_s + slope x local batch through its one-T4 rows. The T4 step
# at this profile's local batch is that line read there (the same batch model the simulator uses,
# lyra_gym/model/profiles.py compute_s). It replaces a T4/V100 ratio (issue 25 item 7) taken from
# Gavel's FP32 V100 ResNet-50 against the artifact's mixed-precision T4 ImageNet and applied to the
# profile's mixed-precision V100 figure: T4 resnet50 = 781 img/s at 256, 3.6x the measurement.
# model -> (artifact application, precision of its T4 run, why it is the same model)
T4_MEASURED = {
    "resnet18": ("cifar10", "FP32",
                 "ResNet-18 on CIFAR-10, FP32 (the artifact's benchmark/models/cifar10/main.py, no AMP), "
                 "the model and precision of Gavel's V100 figure (workloads/pytorch/image_classification/"
                 "cifar10/main.py, no AMP)"),
    "resnet50": ("imagenet", "AMP",
                 "torchvision ResNet-50 on ImageNet, mixed precision (the artifact's benchmark/models/imagenet/"
                 "main.py: apex amp.initialize, default opt_level O1), as DeepLearningExamples' AMP ResNet-50 v1.5"),
}
# Assumption where the repository holds no T4 measurement of the profile's model: the artifact's bert
# is a SQuAD fine-tune at local batch <= 12 (the profile's: BERT-large pretraining, seq 128, 64);
# its ncf is guoyang9's NCF (32 factors, 3 layers, FP32, batch <= 32,768; the profile's: DLE's NCF,
# AMP, 131,072); its yolov3 and deepspeech2 are the named models, but the profile's V100/A100 figures
# are stand-ins (SSD300, GNMT), so an absolute T4 figure would set the speed of one model against
# another's; transformer has no T4 figure at all.
T4_SPEED_VS_V100 = 0.3     # assumption: NVIDIA datasheets, 65 vs 125 FP16 tensor TFLOPS, 320 vs 900 GB/s memory
POLLUX_T4 = Path(__file__).resolve().parents[1] / "traces" / "pollux-t4-profile.json"


def t4_compute(name: str, local_batch: float, v100_compute: float, v100_precision: str) -> tuple[float, dict]:
    """(T4 step compute time at ``local_batch``, the figure record it comes from) for a model."""
    measured = T4_MEASURED.get(name)
    if measured is None:
        compute = v100_compute / T4_SPEED_VS_V100
        return compute, {
            "basis": "assumption", "samples_per_s": local_batch / compute, "batch": local_batch,
            "precision": v100_precision,
            "source": f"assumption: V100 speed x{T4_SPEED_VS_V100} (NVIDIA datasheets; no T4 measurement of "
                      "this model in the repository, see tools/derive_builtin_profiles.py)"}
    app, precision, same = measured
    ref = json.loads(POLLUX_T4.read_text(encoding="utf-8"))["models"][name]
    if ref["pollux_application"] != app:
        raise ValueError(f"{POLLUX_T4.name}: {name} is {ref['pollux_application']!r}, expected {app!r}")
    g = ref["gpus"]["t4"]
    row = ref["measured_row"]
    fixed, measured_batch = g["step_fixed_s"], ref["local_batch"]
    compute = fixed + (g["step_compute_s"] - fixed) * local_batch / measured_batch
    beyond = local_batch > ref["max_local_batch"]
    return compute, {
        "basis": "measured", "samples_per_s": row["local_bsz"] / row["step_time"], "batch": row["local_bsz"],
        "precision": precision,
        "source": (f"Pollux artifact (petuum/adaptdl de25dcc9, Apache-2.0) {row['file']}, 1 T4 at local_bsz "
                   f"{row['local_bsz']}: step {row['step_time']:.4f} s; {same}; at this profile's local batch "
                   f"{local_batch:g} the T4 line of traces/pollux-t4-profile.json"
                   + (f" (assumption: extended past its largest measured batch {ref['max_local_batch']:g})"
                      if beyond else ""))}


T4_INTRA_VS_V100 = 2.0     # T4 servers use PCIe, not NVLink: in-server all-reduce twice V100's
T4_INTER_VS_V100 = 4.0     # T4 inference servers on 25-50 Gbps Ethernet (Pollux artifact's g4dn cluster)
INTER_VS_INTRA = 2.0       # V100/A100 training servers on an InfiniBand-class fabric: across-server all-reduce twice in-server

# Part of a step that does not shrink with the local batch (step_fixed_s, lyra_gym/model/profiles.py).
# No batch sweep is published for V100/A100 here, so each model takes the fixed fraction that the
# Pollux artifact's T4 measurements give at its local batch (traces/pollux-t4-profile.json, fitted
# by tools/derive_pollux_t4_profile.py: step = step_fixed_s + slope x local batch). Assumptions:
# the fraction carries over from T4 to V100/A100; the T4 line is read at this profile's local batch
# where both count the same samples (images, sequences, user-item pairs); deepspeech2's stand-in
# counts tokens and the artifact utterances, so it takes the T4 fraction at the T4's own batch;
# transformer has no counterpart and takes bert's fraction.
SAME_UNITS = {"resnet18", "resnet50", "bert", "ncf", "yolov3"}
FIXED_LIKE = {"transformer": "bert"}


def fixed_fractions(models: dict) -> dict[str, float]:
    """Model -> step_fixed_s / step_compute_s at the model's local batch (assumptions above)."""
    t4 = json.loads(POLLUX_T4.read_text(encoding="utf-8"))["models"]
    out = {}
    for name in sorted(models):
        key = FIXED_LIKE.get(name, name)
        ref = t4[key]
        g = ref["gpus"]["t4"]
        fixed, compute, lb = g["step_fixed_s"], g["step_compute_s"], ref["local_batch"]
        if key in SAME_UNITS:
            m = models[key]["local_batch"]
            out[name] = fixed / (fixed + (compute - fixed) * m / lb)
        else:
            out[name] = fixed / compute
    return out


RESTART_S = {  # checkpoint + restore per model, Sia simulator (shared/data/PROVENANCE.md)
    "ncf": 15, "deepspeech2": 25, "resnet18": 40, "yolov3": 60, "bert": 120, "resnet50": 250, "transformer": 120,
}
RESTART_SRC = "Sia simulator checkpoint+restore (PROVENANCE.md); resnet18 = CIFAR-10 midpoint of 30-50 s, yolov3 midpoint of 45-80 s; transformer assumed equal to BERT"


def gpu_entry(batch: float, sps1: float, sps8: float, source: str) -> dict:
    compute = batch / sps1
    sync8 = 8 * batch / sps8 - compute
    unit = sync8 / RING_8  # all-reduce time per unit of ring factor
    return {"step_compute_s": compute, "allreduce_intra_s": unit, "allreduce_inter_s": INTER_VS_INTRA * unit,
            "source": source}


def derive() -> dict:
    models = {}
    for name, (batch, gpus, source, note) in PUBLISHED.items():
        entries = {}
        for g, (s1, s8) in gpus.items():
            entries[g] = gpu_entry(batch, s1, s8, f"{source}: {g} {s1:g} -> {s8:g} samples/s on 1 -> 8 GPUs")
            stand_in = note.startswith("assumption")
            entries[g]["figure"] = {
                "basis": "assumption" if stand_in else "measured", "samples_per_s": s1, "batch": batch,
                "precision": "AMP", "source": (f"{note}; " if stand_in else "") + f"{source}: {s1:g} samples/s on 1 {g}"}
        models[name] = {"local_batch": batch, "gpus": entries, "note": note}
    r50 = PUBLISHED["resnet50"][1]
    eff8 = r50["v100"][1] / (8 * r50["v100"][0])
    v100 = RESNET18_V100
    a100 = v100 * r50["a100"][0] / r50["v100"][0]
    src = "Gavel simulation_throughputs.json v100 ResNet-18 bs128 (17.99 steps/s); scaling and A100 ratio assumed as ResNet-50"
    models["resnet18"] = {"local_batch": 128, "note": "", "gpus": {
        "v100": gpu_entry(128, v100, 8 * v100 * eff8, src),
        "a100": gpu_entry(128, a100, 8 * a100 * r50["a100"][1] / (8 * r50["a100"][0]), src),
    }}
    models["resnet18"]["gpus"]["v100"]["figure"] = {
        "basis": "measured", "samples_per_s": v100, "batch": 128, "precision": "FP32",
        "source": "Gavel (stanford-futuredata/gavel c4fa4009, MIT) simulation_throughputs.json v100 "
                  "ResNet-18 (batch size 128): 17.99 steps/s on 1 V100"}
    models["resnet18"]["gpus"]["a100"]["figure"] = {
        "basis": "assumption", "samples_per_s": a100, "batch": 128, "precision": "FP32",
        "source": "assumption: Gavel's V100 ResNet-18 x the A100/V100 ratio of DLE's AMP ResNet-50 (2470 / 1200)"}
    for name, m in models.items():
        v = m["gpus"]["v100"]
        compute, figure = t4_compute(name, m["local_batch"], v["step_compute_s"], v["figure"]["precision"])
        m["gpus"]["t4"] = {
            "step_compute_s": compute,
            "allreduce_intra_s": v["allreduce_intra_s"] * T4_INTRA_VS_V100,
            "allreduce_inter_s": v["allreduce_intra_s"] * T4_INTER_VS_V100,
            "source": f"{figure['source']}; assumption: all-reduce as V100's, in-server x2, across x4; "
                      "see tools/derive_builtin_profiles.py",
            "figure": figure,
        }
        m["restart_overhead_s"] = RESTART_S[name]
        m["restart_source"] = RESTART_SRC
    fractions = fixed_fractions(models)
    for name, m in models.items():
        for g in m["gpus"].values():
            g["step_fixed_s"] = fractions[name] * g["step_compute_s"]
        like = FIXED_LIKE.get(name, name)
        m["fixed_source"] = (f"assumption: step_fixed_s = {fractions[name]:.4f} x step_compute_s, the fixed fraction of "
                             f"the Pollux artifact's T4 fit for {like} (traces/pollux-t4-profile.json) "
                             + ("at this local batch" if like in SAME_UNITS else "at its own local batch"))
    return {
        "format": "lyra-gym-profiles/1",
        "metadata": {"name": "builtin", "derived_by": "tools/derive_builtin_profiles.py",
                     "reference_gpu": "v100", "note": "small built-in profile from published figures; replace with measured profiles"},
        "models": dict(sorted(models.items())),
    }


if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "lyra_gym" / "data" / "builtin_profiles.json"
    out.write_text(json.dumps(derive(), indent=1, sort_keys=False) + "\n")
    print(f"wrote {out}")
