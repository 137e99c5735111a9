"""Turn collector measurements into a ``lyra-gym-profiles/1`` file, or merge them into one.

A **measured profile** (:func:`build_profile`) has one GPU type, the one
measured, which is also its ``reference_gpu``. Per model:

* ``local_batch`` = the largest batch that ran, in the model's sample unit
  (``sample_unit`` is written beside it);
* ``step_compute_s`` = the median measured single-device training step at
  that batch (forward + backward + optimizer);
* ``allreduce_intra_s`` / ``allreduce_inter_s`` = the all-reduce *unit*
  (seconds per unit of the ring factor ``2(n-1)/n``), measured with NCCL when
  several GPUs were visible, else gradient bytes / an assumed bus bandwidth;
  ``source`` and the file's ``metadata.allreduce`` say which;
* ``step_fixed_s`` = the part of that step that does not shrink with the batch:
  ``step_compute_s - b x local_batch``, ``b`` the slope of a least-squares line
  ``step = a + b x samples`` (weights ``1 / step^2``, relative error) through every
  batch that ran, clamped to ``[0, step_compute_s]``; left out (compute taken as
  proportional to the batch) with fewer than two batches or a slope that is not
  positive (:func:`fixed_step_part`);
* ``max_local_batch`` = the largest batch that ran, written only when a larger
  one ran out of memory (the sweep reached the memory limit, which lies between
  the two); if every batch ran, the limit is unknown and no cap is written
  (``batch_source`` says which); ``min_local_batch`` = the smallest batch that ran;
* ``restart_overhead_s`` = the Sia simulator's per-model checkpoint + restore
  seconds (:data:`RESTART_OVERHEAD_S`; not measured: a real restart also pays
  process start and framework init);
* ``measurements`` = every batch size measured (step and inference times),
  so the file can be merged into another one later.

**Merging** (:func:`merge_profile`) adds the measured GPU type to an existing
profile (e.g. the shipped built-in one), keeping every other GPU type and the
file's own ``local_batch``, ``restart_overhead_s``, ``max_local_batch`` and
``reference_gpu`` (a model has one memory cap, the file's own GPU's). The
measured ``step_fixed_s`` is kept (it does not depend on the batch), at most the
re-expressed step. The measured step time is re-expressed at the file's ``local_batch``:

* exactly, if that batch was measured;
* by linear interpolation between the two measured batches around it
  (step time is close to affine in the batch: a fixed part plus a per-sample
  part);
* otherwise by extrapolating the least-squares line through all measured
  points (or, with a single point or a non-increasing line, by assuming
  constant samples/s), and the entry's ``source`` says "extrapolated".

Units must agree: the file's ``sample_unit`` for the model (if written) must
equal the collector's; a file without one (the built-in profile) is assumed
to use the collector's units, which were chosen to match the built-in
profile's (see :mod:`lyra_gym.collector.models`), and the entry's ``source``
states that assumption. The all-reduce units do not depend on the batch and
are copied as measured.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from lyra_gym.collector.benchmark import ModelMeasurement
from lyra_gym.model.profiles import PROFILE_FORMAT, ProfileError, parse_profiles

__all__ = [
    "ASSUMED_INTRA_GBPS",
    "ASSUMED_INTER_GBPS",
    "INTER_VS_INTRA",
    "RESTART_OVERHEAD_S",
    "AllreduceEstimate",
    "assumed_allreduce",
    "build_profile",
    "fixed_step_part",
    "gpu_key_from_name",
    "load_profile_document",
    "merge_profile",
    "step_at_batch",
    "write_profile",
]

#: Assumed bus bandwidth of an all-reduce inside one server, GB/s (1e9 bytes/s), used when it
#: cannot be measured (one visible GPU, or CPU). Assumption: an NVLink-class training server.
ASSUMED_INTRA_GBPS = 100.0
#: Assumed bus bandwidth across servers, GB/s. Assumption: half the in-server figure, the same
#: 2x ratio the built-in profile assumes for InfiniBand-class training fabrics
#: (tools/derive_builtin_profiles.py, INTER_VS_INTRA).
ASSUMED_INTER_GBPS = 50.0
#: Across-server / in-server all-reduce time when only the in-server one is measured
#: (one machine cannot measure across servers). Same assumption as above.
INTER_VS_INTRA = 2.0

#: Checkpoint + restore seconds per model, from the Sia simulator as collected in the project's
#: shared/data/PROVENANCE.md: NCF 15, DeepSpeech2 25, CIFAR-10 30-50 (ResNet-18: midpoint 40),
#: YOLOv3 45-80 (midpoint 60, rounded), BERT 120, ImageNet 250. Transformer: assumed equal to BERT.
RESTART_OVERHEAD_S = {"ncf": 15.0, "deepspeech2": 25.0, "resnet18": 40.0, "yolov3": 60.0, "bert": 120.0,
                      "transformer": 120.0, "resnet50": 250.0}
RESTART_SOURCE = ("Sia simulator checkpoint+restore per model (shared/data/PROVENANCE.md); resnet18 = CIFAR-10 "
                  "midpoint of 30-50 s, yolov3 = midpoint of 45-80 s; transformer assumed equal to BERT")


def gpu_key_from_name(name: str) -> str:
    """A profile GPU key from a device name: ``"NVIDIA H200"`` -> ``"h200"``,
    ``"Tesla V100-SXM2-16GB"`` -> ``"v100"``; otherwise a lower-case slug."""
    tokens = [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t and t not in ("nvidia", "tesla")]
    for token in tokens:
        if re.fullmatch(r"[a-z]{1,3}\d{1,4}[a-z]?", token) and not re.fullmatch(r"(sxm|pcie|nvl|hbm)\d*[a-z]?", token):
            return token
    return "-".join(tokens) or "gpu"


class AllreduceEstimate:
    """All-reduce units of one model (seconds per unit of the ring factor) and how they were got."""

    def __init__(self, intra_s: float, inter_s: float, method: str, detail: str,
                 times_by_world: Mapping[int, float] | None = None) -> None:
        self.intra_s, self.inter_s, self.method, self.detail = intra_s, inter_s, method, detail
        self.times_by_world = dict(times_by_world or {})


def assumed_allreduce(grad_bytes: int, intra_gbps: float = ASSUMED_INTRA_GBPS,
                      inter_gbps: float = ASSUMED_INTER_GBPS) -> AllreduceEstimate:
    """Units from gradient bytes and assumed bus bandwidths: ``unit = bytes / bandwidth``
    (a ring all-reduce moves ``2(n-1)/n`` x the buffer through each GPU's links)."""
    if intra_gbps <= 0 or inter_gbps <= 0:
        raise ProfileError(f"assumed all-reduce bandwidths must be > 0 GB/s, got {intra_gbps}, {inter_gbps}")
    return AllreduceEstimate(
        grad_bytes / (intra_gbps * 1e9), grad_bytes / (inter_gbps * 1e9), "assumed",
        f"assumed: {grad_bytes:,} gradient bytes at {intra_gbps:g} GB/s in a server, {inter_gbps:g} GB/s across "
        "servers (not measured)",
    )


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def fixed_step_part(points: Sequence[tuple[float, float | None]], batch: float, step: float) -> float | None:
    """``step_fixed_s`` from measured ``(samples, step_s)`` points (module docstring): ``step - b x
    batch`` clamped to ``[0, step]``, ``b`` the weighted least-squares slope; None with fewer than
    two distinct batches or a slope that is not positive."""
    pts = [(float(x), float(y)) for x, y in points if y and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    w = [1.0 / (y * y) for _, y in pts]
    sw = sum(w)
    mx = sum(wi * x for wi, (x, _) in zip(w, pts)) / sw
    my = sum(wi * y for wi, (_, y) in zip(w, pts)) / sw
    sxx = sum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, pts))
    slope = sum(wi * (x - mx) * (y - my) for wi, (x, y) in zip(w, pts)) / sxx
    if not slope > 0:
        return None
    return min(max(step - slope * batch, 0.0), step)


def build_profile(measurements: Sequence[ModelMeasurement], gpu_key: str, allreduce: Mapping[str, AllreduceEstimate],
                  metadata: Mapping[str, Any]) -> dict:
    """The profile document of one measured GPU type (module docstring).

    :param measurements: one per model, from :func:`lyra_gym.collector.benchmark.benchmark_models`.
    :param gpu_key: the GPU type's key in the profile (``"h200"``).
    :param allreduce: model key -> its all-reduce estimate.
    :param metadata: written under ``metadata`` (GPU name, versions, settings...); ``reference_gpu``,
        ``format`` fields and the date are added here.
    A model none of whose batch sizes ran (all out of memory) is left out and listed in
    ``metadata.skipped_models``, so one oversized model does not cost the other measurements.

    :raises ProfileError: no model ran at all, or a bad ``gpu_key``.
    """
    if not gpu_key or gpu_key != gpu_key.strip():
        raise ProfileError(f"GPU key must be a non-empty name without surrounding spaces, got {gpu_key!r}")
    models: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for m in measurements:
        ok = m.ok()
        if not ok:
            skipped[m.key] = f"no batch size ran (tried {[b.batch for b in m.batches]}: out of memory)"
            continue
        chosen = ok[-1]
        ar = allreduce[m.key]
        assert chosen.step_s is not None  # a batch that ran has its step time
        fixed = fixed_step_part([(b.samples, b.step_s) for b in ok], chosen.samples, chosen.step_s)
        oom = sorted(b.samples for b in m.batches if b.status != "ok" and b.samples > chosen.samples)
        batch_source = (
            "measured by lyra_gym.collector: step_fixed_s "
            + (f"from a least-squares line (weights 1/step^2) through the {len(ok)} batches that ran"
               if fixed is not None else "left out (fewer than two batches ran, or the step did not grow with "
                                         "the batch): compute taken as proportional to the batch")
            + "; max_local_batch "
            + (f"= the largest batch that ran ({chosen.samples:g}); {oom[0]:g} ran out of memory" if oom else
               "not written: every batch ran, so the memory limit was not reached")
            + f"; min_local_batch = the smallest batch that ran ({ok[0].samples:g})")
        models[m.key] = {
            "local_batch": chosen.samples,
            **({"max_local_batch": chosen.samples} if oom else {}),
            "min_local_batch": ok[0].samples,
            "batch_source": batch_source,
            "sample_unit": m.sample_unit,
            "restart_overhead_s": RESTART_OVERHEAD_S.get(m.key, 60.0),
            "restart_source": RESTART_SOURCE if m.key in RESTART_OVERHEAD_S else "assumption: 60 s",
            "gpus": {gpu_key: {
                "step_compute_s": chosen.step_s,
                **({"step_fixed_s": fixed} if fixed is not None else {}),
                "allreduce_intra_s": ar.intra_s,
                "allreduce_inter_s": ar.inter_s,
                "source": (f"measured by lyra_gym.collector on {metadata.get('gpu_name', gpu_key)} "
                           f"({metadata.get('precision', '?')}, {metadata.get('date', _now())}): median step at "
                           f"batch {chosen.batch} = {chosen.samples:g} {m.sample_unit}; all-reduce {ar.detail}"),
                "allreduce_method": ar.method,
                "allreduce_times_by_world_s": {str(k): v for k, v in sorted(ar.times_by_world.items())},
                "grad_bytes": m.grad_bytes,
                "parameters": m.parameters,
                "checkpoint_roundtrip_s": m.checkpoint_roundtrip_s,
                "measurements": [vars(b) for b in m.batches],
            }},
        }
    meta = {"name": f"measured-{gpu_key}", "reference_gpu": gpu_key, "collected_by": "lyra_gym.collector",
            "date": _now(), **dict(metadata)}
    meta["reference_gpu"] = gpu_key
    if skipped:
        meta["skipped_models"] = skipped
    if not models:
        raise ProfileError(f"no model ran on {gpu_key}: {skipped}")
    doc = {"format": PROFILE_FORMAT, "metadata": meta, "models": models}
    parse_profiles(doc, source=f"measured profile ({gpu_key})")  # fail here, not in the simulator
    return doc


def step_at_batch(points: Sequence[tuple[float, float]], batch: float) -> tuple[float, str]:
    """Step seconds at ``batch`` (sample units) from measured ``(samples, step_s)`` points.

    :returns: ``(seconds, how)``; ``how`` is ``"measured"``, ``"interpolated"`` or starts with
        ``"extrapolated"`` (see the module docstring).
    """
    pts = sorted((float(x), float(y)) for x, y in points)
    if not pts:
        raise ValueError("step_at_batch: no measured points")
    for x, y in pts:
        if math.isclose(x, batch, rel_tol=1e-9):
            return y, "measured"
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 < batch < x1:
            return y0 + (y1 - y0) * (batch - x0) / (x1 - x0), "interpolated"
    if len(pts) >= 2:
        n = len(pts)
        mx = sum(x for x, _ in pts) / n
        my = sum(y for _, y in pts) / n
        sxx = sum((x - mx) ** 2 for x, _ in pts)
        slope = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx > 0 else 0.0
        value = my + slope * (batch - mx)
        if slope > 0 and value > 0:
            return value, f"extrapolated (least-squares line through {n} measured batches)"
    x, y = min(pts, key=lambda p: abs(math.log(p[0] / batch)))
    return y * batch / x, f"extrapolated (constant samples/s from batch {x:g})"


def load_profile_document(path: str | os.PathLike) -> dict:
    """The decoded JSON of a profile file; ``"builtin"`` names the shipped built-in profile."""
    if os.fspath(path) == "builtin":
        text = resources.files("lyra_gym").joinpath("data/builtin_profiles.json").read_text(encoding="utf-8")
        return json.loads(text)
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as err:
        raise ProfileError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None


def merge_profile(target: Mapping[str, Any], measured: Mapping[str, Any], target_source: str = "target profile",
                  measured_source: str = "measured profile") -> dict:
    """A copy of ``target`` with the measured GPU type of ``measured`` added to each of its models.

    ``measured`` is a document written by :func:`build_profile` (it must hold
    ``measurements``). GPU types already in ``target`` are kept; the measured
    type replaces an entry of the same name.

    :raises ProfileError: a measured model missing from ``target`` (it would
        have no reference-GPU entry), a sample-unit mismatch, or either document
        not being a valid profile; messages name the model and field.
    """
    parse_profiles(target, source=target_source)
    parse_profiles(measured, source=measured_source)
    gpu = measured["metadata"]["reference_gpu"]
    out = copy.deepcopy(dict(target))
    merged_models = []
    for key, entry in measured["models"].items():
        where = f"{measured_source}: models.{key}"
        if key not in out["models"]:
            raise ProfileError(
                f"{where}: model {key!r} is not in {target_source} (known: {', '.join(sorted(out['models']))}); "
                "a merged model needs the target's reference-GPU entry"
            )
        dest = out["models"][key]
        unit = entry.get("sample_unit", "samples")
        dest_unit = dest.get("sample_unit")
        if dest_unit is not None and dest_unit != unit:
            raise ProfileError(f"{target_source}: models.{key}.sample_unit is {dest_unit!r} but the measurement is in "
                               f"{unit!r}; the step time cannot be converted")
        timing = entry["gpus"][gpu]
        points = [(b["samples"], b["step_s"]) for b in timing.get("measurements", []) if b.get("status") == "ok"]
        if not points:
            raise ProfileError(f"{where}.gpus.{gpu}.measurements: no measured batch to convert from")
        batch = float(dest["local_batch"])
        step, how = step_at_batch(points, batch)
        unit_note = "" if dest_unit is not None else f"; assumes {target_source}'s local_batch counts {unit}"
        new = {k: v for k, v in timing.items()}
        new["step_compute_s"] = step
        if "step_fixed_s" in new:
            new["step_fixed_s"] = min(new["step_fixed_s"], step)
        new["source"] = (f"{timing.get('source', 'measured')}; step re-expressed at {target_source}'s local_batch "
                         f"{batch:g}: {how}{unit_note}")
        dest.setdefault("gpus", {})[gpu] = new
        merged_models.append(key)
    meta = out.setdefault("metadata", {})
    history = list(meta.get("merged", []))
    m_meta = measured.get("metadata", {})
    history.append({"gpu": gpu, "models": merged_models, "from": measured_source, "date": _now(),
                    **{k: m_meta.get(k) for k in ("gpu_name", "torch", "cuda", "precision", "date", "allreduce")
                       if k in m_meta}})
    meta["merged"] = history
    parse_profiles(out, source=f"{target_source} + {gpu}")
    return out


def write_profile(doc: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Validate and write ``doc`` as indented JSON (parent folders created)."""
    parse_profiles(doc, source=os.fspath(path))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return out
