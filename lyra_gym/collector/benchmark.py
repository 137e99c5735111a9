"""Time training steps, inference batches and all-reduces of the benchmark models.

What is timed (one process, one device):

* **Training step** = ``zero_grad`` + forward + loss + backward + optimizer
  step (with ``GradScaler`` scaling/unscaling when mixed precision is on), on
  one synthetic batch that sits on the device before timing starts: data
  loading is *not* part of the step (the scheduler's profiles describe GPU
  work; input pipelines are assumed to keep up). ``warmup`` steps run first
  and are discarded (cuDNN autotuning, allocator growth, lazy init); then
  ``steps`` steps are timed one by one. On CUDA each step is bracketed by
  CUDA events and read after one final synchronisation, so timing does not
  serialise the host; on CPU ``time.perf_counter`` is used. The reported
  step time is the median (robust to the odd hiccup); p10/p90 are kept too.
* **Inference batch** (optional) = forward only, ``model.eval()`` under
  ``torch.inference_mode`` (and autocast when ``amp``), same batch, same
  timing rule.
* **Checkpoint round trip** = ``torch.save`` of model + optimizer state to
  memory and ``torch.load`` back. Recorded for information; the profile's
  ``restart_overhead_s`` keeps the published per-model figures (a real restart
  also pays process start, framework init and data-loader warm-up).
* **All-reduce** (:func:`measure_allreduce`): with several visible GPUs, one
  process per GPU joins a ``torch.distributed`` group (NCCL) and times
  ``all_reduce`` of one float32 tensor with as many elements as the model has
  parameters (its gradient), for each world size 2..N; the ring model
  ``t(n) = 2(n-1)/n * unit`` is fitted by least squares through the origin.
  This is the time of an *unoverlapped* all-reduce, which is what the
  scaling model in :mod:`lyra_gym.model.profiles` assumes; frameworks that overlap
  communication with the backward pass lose less than this.

Mixed precision (``amp=True``): CUDA uses ``torch.autocast(float16)`` plus
``torch.amp.GradScaler``; CPU uses ``torch.autocast(bfloat16)`` without a
scaler (bfloat16 needs none). Parameters and gradients stay float32.
"""

from __future__ import annotations

import io
import json
import math
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, Sequence

import torch

from lyra_gym.collector.models import MODEL_SPECS, BenchModel, resolve_models

__all__ = [
    "BenchSettings",
    "BatchMeasurement",
    "ModelMeasurement",
    "benchmark_model",
    "benchmark_models",
    "measure_allreduce",
    "fit_ring_unit",
    "environment_info",
]


@dataclass(frozen=True)
class BenchSettings:
    """How to run the benchmark.

    :param device: ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.
    :param amp: mixed precision (see the module docstring). Default False.
    :param steps: timed training steps per batch size, >= 1. Default 20.
    :param warmup: untimed steps before them, >= 0. Default 5.
    :param tiny: build the tiny model sizes (CPU tests). Default False.
    :param inference: also time forward-only inference batches. Default True.
    :param seed: seeds the weights (``torch.manual_seed``) and the synthetic data.
    """

    device: str = "cuda"
    amp: bool = False
    steps: int = 20
    warmup: int = 5
    tiny: bool = False
    inference: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"BenchSettings.steps: must be an integer >= 1, got {self.steps!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"BenchSettings.warmup: must be an integer >= 0, got {self.warmup!r}")

    @property
    def precision(self) -> str:
        """``"fp32"``, ``"amp-fp16"`` (CUDA) or ``"amp-bf16"`` (CPU)."""
        if not self.amp:
            return "fp32"
        return "amp-fp16" if torch.device(self.device).type == "cuda" else "amp-bf16"


@dataclass
class BatchMeasurement:
    """One model at one batch size. Times in seconds, rates in sample units per second.

    ``status`` is ``"ok"`` or ``"oom"`` (the batch did not fit; times are None).
    """

    batch: int
    samples: float
    status: str = "ok"
    step_s: float | None = None
    step_p10_s: float | None = None
    step_p90_s: float | None = None
    samples_per_s: float | None = None
    inference_step_s: float | None = None
    inference_samples_per_s: float | None = None
    peak_memory_bytes: int | None = None


@dataclass
class ModelMeasurement:
    """Everything measured for one model on one device."""

    key: str
    description: str
    sample_unit: str
    units_per_item: int
    parameters: int
    grad_bytes: int
    optimizer: str
    batches: list[BatchMeasurement] = field(default_factory=list)
    checkpoint_roundtrip_s: float | None = None

    def ok(self) -> list[BatchMeasurement]:
        """The batch sizes that ran, smallest first."""
        return sorted((b for b in self.batches if b.status == "ok"), key=lambda b: b.samples)

    def to_dict(self) -> dict:
        return asdict(self)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_calls(fn: Callable[[], object], steps: int, warmup: int, device: torch.device) -> list[float]:
    """Seconds of each of ``steps`` calls of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    _sync(device)
    if device.type == "cuda":
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(steps)]
        for start, end in events:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(device)
        return [start.elapsed_time(end) / 1000.0 for start, end in events]
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _optimizer(kind: str, params) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)


def _is_oom(err: BaseException) -> bool:
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(err, oom)) or "out of memory" in str(err).lower()


def _autocast(device: torch.device, amp: bool):
    dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype, enabled=amp)


def _measure_batch(model: BenchModel, opt: torch.optim.Optimizer, scaler, batch: int, settings: BenchSettings,
                   device: torch.device, generator: torch.Generator) -> BatchMeasurement:
    result = BatchMeasurement(batch=batch, samples=float(batch * model.units_per_item))
    data = model.synthetic_batch(batch, device, generator)

    def train_step() -> None:
        opt.zero_grad(set_to_none=True)
        with _autocast(device, settings.amp):
            loss = model.loss(data)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model.train()
    times = _time_calls(train_step, settings.steps, settings.warmup, device)
    result.step_s = statistics.median(times)
    result.step_p10_s, result.step_p90_s = _quantile(times, 0.1), _quantile(times, 0.9)
    result.samples_per_s = result.samples / result.step_s
    if device.type == "cuda":
        result.peak_memory_bytes = int(torch.cuda.max_memory_allocated(device))
    if settings.inference:
        model.eval()

        def infer() -> None:
            with torch.inference_mode(), _autocast(device, settings.amp):
                model.infer(data)

        times = _time_calls(infer, settings.steps, settings.warmup, device)
        result.inference_step_s = statistics.median(times)
        result.inference_samples_per_s = result.samples / result.inference_step_s
        model.train()
    return result


def _checkpoint_roundtrip(model: BenchModel, opt: torch.optim.Optimizer, device: torch.device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location=device, weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    _sync(device)
    return time.perf_counter() - t0


def benchmark_model(key: str, batches: Sequence[int] | None, settings: BenchSettings,
                    log: Callable[[str], None] | None = None) -> ModelMeasurement:
    """Measure one model at each batch size (items per step; default: the model's own list).

    A batch that runs out of device memory is recorded with ``status="oom"``
    and the larger ones are skipped.

    :raises KeyError: unknown model key (the message names it).
    :raises ValueError: a batch size < 1.
    """
    key = resolve_models([key])[0]
    spec = MODEL_SPECS[key]
    sizes = list(batches) if batches else list(spec.tiny_batches if settings.tiny else spec.batches)
    for b in sizes:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"batch sizes must be integers >= 1, got {b!r}")
    device = torch.device(settings.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest kernels (warm-up absorbs it)
    torch.manual_seed(settings.seed)
    model = spec.build(settings.tiny).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    numel = sum(p.numel() for p in params)
    opt = _optimizer(spec.optimizer, params)
    scaler = torch.amp.GradScaler("cuda") if (settings.amp and device.type == "cuda") else None
    generator = torch.Generator().manual_seed(settings.seed)
    out = ModelMeasurement(key=key, description=spec.description, sample_unit=model.sample_unit,
                           units_per_item=model.units_per_item, parameters=numel,
                           grad_bytes=sum(p.numel() * p.element_size() for p in params), optimizer=spec.optimizer)
    for b in sorted(set(sizes)):
        try:
            m = _measure_batch(model, opt, scaler, b, settings, device, generator)
        except (RuntimeError, MemoryError) as err:
            if not _is_oom(err):
                raise
            out.batches.append(BatchMeasurement(batch=b, samples=float(b * model.units_per_item), status="oom"))
            if device.type == "cuda":
                torch.cuda.empty_cache()
            if log:
                log(f"{key}: batch {b} ran out of memory; larger batches skipped")
            break
        out.batches.append(m)
        if log:
            assert m.step_s is not None  # a batch that ran has its step time
            inf = f", inference {m.inference_samples_per_s:,.1f}/s" if m.inference_samples_per_s else ""
            log(f"{key}: batch {b} -> step {m.step_s * 1000:.2f} ms, {m.samples_per_s:,.1f} {model.sample_unit}/s{inf}")
    out.checkpoint_roundtrip_s = _checkpoint_roundtrip(model, opt, device)
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def benchmark_models(keys: Sequence[str], batches: Sequence[int] | None, settings: BenchSettings,
                     log: Callable[[str], None] | None = None) -> list[ModelMeasurement]:
    """:func:`benchmark_model` for each key, in order."""
    return [benchmark_model(k, batches, settings, log) for k in keys]


# --------------------------------------------------------------------------- all-reduce


def fit_ring_unit(times_by_world: Mapping[int, float]) -> float:
    """Least-squares ``unit`` of ``t(n) = 2(n-1)/n * unit`` through the origin (seconds)."""
    pairs = [(2.0 * (n - 1) / n, t) for n, t in times_by_world.items() if n >= 2]
    if not pairs:
        raise ValueError("fit_ring_unit: needs at least one world size >= 2")
    return sum(r * t for r, t in pairs) / sum(r * r for r, _ in pairs)


def _allreduce_worker(rank: int, world: int, init_file: str, out_file: str, numels: dict[str, int],
                      backend: str, iters: int, warmup: int) -> None:  # pragma: no cover - runs in a child process
    import torch.distributed as dist

    use_cuda = backend == "nccl"
    if use_cuda:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if use_cuda else torch.device("cpu")
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        results = {}
        for key, numel in numels.items():
            tensor = torch.ones(numel, dtype=torch.float32, device=device)
            times = _time_calls(lambda: dist.all_reduce(tensor), iters, warmup, device)
            # Every rank must agree on the time: take the slowest rank's median.
            t = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            results[key] = float(t.item())
            del tensor
        if rank == 0:
            with open(out_file, "w") as fh:
                json.dump(results, fh)
    finally:
        dist.destroy_process_group()


def measure_allreduce(numels: Mapping[str, int], world_sizes: Sequence[int], backend: str = "nccl",
                      iters: int = 10, warmup: int = 3) -> dict[str, dict[int, float]]:
    """Median seconds of one ``all_reduce`` of a float32 tensor of ``numels[key]`` elements, per world size.

    :param numels: model key -> gradient elements.
    :param world_sizes: process counts to try, each >= 2 (with NCCL: <= visible GPUs;
        process ``r`` uses GPU ``r``).
    :param backend: ``"nccl"`` (GPUs) or ``"gloo"`` (CPU; for tests of this code path).
    :returns: ``{key: {world_size: seconds}}``.
    """
    import torch.multiprocessing as mp

    out: dict[str, dict[int, float]] = {k: {} for k in numels}
    for world in world_sizes:
        if world < 2:
            raise ValueError(f"measure_allreduce: world sizes must be >= 2, got {world}")
        with tempfile.TemporaryDirectory() as tmp:
            init_file, out_file = os.path.join(tmp, "init"), os.path.join(tmp, "out.json")
            mp.spawn(_allreduce_worker, args=(world, init_file, out_file, dict(numels), backend, iters, warmup),
                     nprocs=world, join=True)
            with open(out_file) as fh:
                for key, seconds in json.load(fh).items():
                    out[key][world] = seconds
    return out


def environment_info(device: str) -> dict:
    """Versions and device name for the profile's metadata."""
    import platform

    dev = torch.device(device)
    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(),
        "host": platform.machine(),
        "device": dev.type,
    }
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        info.update(gpu_name=props.name, gpu_memory_bytes=int(props.total_memory),
                    gpu_count=torch.cuda.device_count(), compute_capability=f"{props.major}.{props.minor}")
    else:
        info.update(gpu_name=platform.processor() or platform.machine(), gpu_count=0,
                    cpu_threads=torch.get_num_threads())
    return info
