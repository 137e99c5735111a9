"""Derive lyra_gym/data/builtin_profiles.json from published single-node figures.

Run: python tools/derive_builtin_profiles.py

Each model gets, per GPU type, the compute time of one step at a stated local
batch and the all-reduce time of one step inside a server and across servers.
The scaling model these feed is documented in lyra_gym/model/profiles.py.

Sources (numbers, not text):
- NVIDIA DeepLearningExamples READMEs, mixed precision, samples/s on 1 and 8
  GPUs of one server (V100, A100), as collected in shared/data/PROVENANCE.md.
- Gavel (stanford-futuredata/gavel, scheduler/simulation_throughputs.json,
  commit c4fa4009, MIT): ResNet-18 batch 128 on one V100 = 17.99 steps/s;
  ResNet-50 batch 128 = 2.50 steps/s (T4/V100 ratio only).
- Pollux artifact (petuum/adaptdl de25dcc9, Apache-2.0), simulator/traces/
  {cifar10,imagenet}/placements.csv: single-T4 step times, for the measured
  T4/V100 speed of resnet18 and resnet50 (MEASURED_T4_VS_V100).
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

# T4 vs V100 per-GPU training speed (samples/s on one T4 / on one V100 at the same local batch),
# measured where both exist in shared/data (issue 25 item 7): Gavel's single-V100 steps/s
# (simulation_throughputs.json, key "v100", scale 1, "null" = alone; stanford-futuredata/gavel
# c4fa4009, MIT) against the Pollux artifact's single-T4 step time (simulator/traces/<app>/
# placements.csv, rows placement=1, linear between the two measured local batches around B, as the
# artifact's get_throughput interpolates; petuum/adaptdl de25dcc9, Apache-2.0), at the largest
# batch both measured up to the profile's local batch. Assumptions: Gavel's ResNet-18 (CIFAR-10)
# and ResNet-50 (ImageNet) are the artifact's cifar10 and imagenet; both sets were timed in FP32 on
# different machines, and the ratio is carried over to the profile's mixed-precision V100 figure
# (and, for resnet50, from batch 128 to the profile's 256).
# model -> (B, Gavel V100 steps/s at B, Pollux T4 (batch, step_time s) below and above B, source)
MEASURED_T4_VS_V100 = {
    "resnet18": (128, 17.994906225052176, (91, 0.07591350078582763), (129, 0.10385050773620605),
                 "Gavel v100 ResNet-18 bs128 (17.99 steps/s) vs Pollux artifact cifar10 placements.csv, "
                 "1 T4 at local_bsz 128 (between 91 and 129)"),
    "resnet50": (128, 2.4967655780898292, (115, 0.5602007150650025), (163, 0.7624222040176392),
                 "Gavel v100 ResNet-50 bs128 (2.50 steps/s; its largest batch) vs Pollux artifact imagenet "
                 "placements.csv, 1 T4 at local_bsz 128 (between 115 and 163)"),
}
# Assumption where no pair exists (bert, deepspeech2, ncf, transformer, yolov3: no V100 figure for the
# artifact's models in shared/data, and no T4 one for transformer; Gavel's "Recommendation" is an
# autoencoder whose samples/s is 6-31x below the artifact's NCF on a slower GPU: not a counterpart).
T4_SPEED_VS_V100 = 0.3     # NVIDIA datasheets: 65 vs 125 FP16 tensor TFLOPS, 320 vs 900 GB/s memory


def t4_speed(name: str) -> tuple[float, str]:
    """(T4 / V100 per-GPU speed, its source) for a model: measured pair, else the 0.3 assumption."""
    pair = MEASURED_T4_VS_V100.get(name)
    if pair is None:
        return T4_SPEED_VS_V100, "assumption: speed x0.3 (no measured T4/V100 pair in shared/data)"
    b, v100_steps, (b_lo, t_lo), (b_hi, t_hi), source = pair
    t4_step = t_lo + (b - b_lo) / (b_hi - b_lo) * (t_hi - t_lo)
    ratio = (b / t4_step) / (v100_steps * b)
    return ratio, f"measured speed x{ratio:.3f}: {source}"


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
POLLUX_T4 = Path(__file__).resolve().parents[1] / "traces" / "pollux-t4-profile.json"
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
        entries = {g: gpu_entry(batch, s1, s8, f"{source}: {g} {s1:g} -> {s8:g} samples/s on 1 -> 8 GPUs")
                   for g, (s1, s8) in gpus.items()}
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
    for name, m in models.items():
        v = m["gpus"]["v100"]
        speed, speed_source = t4_speed(name)
        m["gpus"]["t4"] = {
            "step_compute_s": v["step_compute_s"] / speed,
            "allreduce_intra_s": v["allreduce_intra_s"] * T4_INTRA_VS_V100,
            "allreduce_inter_s": v["allreduce_intra_s"] * T4_INTER_VS_V100,
            "source": f"V100 figures scaled: {speed_source}; assumption: in-server all-reduce x2, across x4; "
                      "see tools/derive_builtin_profiles.py",
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
