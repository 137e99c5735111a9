"""Synthetic training-job traces with named presets.

Public production traces (Philly, Helios, Alibaba PAI) may not be
redistributed, and the Lyra paper's 15-day production traces are not public.
This module generates statistically plausible stand-ins from a handful of
parameters, a :class:`TracePreset`, and a seed:

* **Arrivals** follow a non-homogeneous Poisson process: the arrival rate
  swings over the day (a cosine with its peak at ``peak_hour``) and drops on
  weekends (``weekend_factor``). The number of jobs is fixed
  (``num_jobs``); their submit times are i.i.d. draws from the rate profile
  normalised over the horizon (inverse-CDF sampling on a one-minute grid), then
  sorted. Given the count, this is exactly the distribution of a
  non-homogeneous Poisson process's arrival times.
* **Sizes** (requested GPUs) are drawn from ``size_probs``.
* **Durations** are lognormal (median ``duration_median_s``, log-space
  standard deviation ``duration_sigma``), clipped to
  ``[duration_min_s, duration_max_s]``. They are drawn independently of size
  and arrival time (an assumption).
* **Load calibration** (optional, ``target_load``): all durations are
  multiplied by one common factor so the trace offers exactly the target
  load on the preset's reference cluster, whatever the seed.
* **Models** are drawn from ``model_mix``.
* **Elasticity**: each job is elastic with probability ``elastic_share``. An
  elastic job requesting ``g`` GPUs may run on ``min_gpus = max(1, g // 2)``
  up to ``max_gpus = 2 * g`` GPUs. This range is an **assumption**: the Lyra
  paper does not publish how elastic ranges are set.

Submit times and durations are rounded to 1 ms so the CSV stays compact and
round-trips exactly. Every random draw comes from
``numpy.random.default_rng(seed)``: the same preset and seed always give the
identical list of jobs.

Presets (:data:`PRESETS`; ``traces/README.md`` has the full table):

``small-1d``
    The shipped default trace (``traces/default.csv``): 1 day, 400 jobs of
    1-16 GPUs, calibrated to an offered load of exactly 0.8 on 16 servers x 8
    V100 = 128 training GPUs.
``bench-15d``
    The paper's scale: 15 days, exactly 50,000 jobs of 1-64 GPUs, sized for
    1,024 training GPUs (128 servers x 8), calibrated to an offered load of
    exactly 0.85.
``philly-like``
    Job sizes and durations fitted to the published Philly statistics (93 %
    single-GPU jobs; median duration 1,144 s, mean 13,136 s, p99 254,884 s);
    7 days, 6,000 jobs (about Philly's average daily rate), sized for 192
    GPUs (24 servers x 8) at an expected offered load of about 0.83. No load
    calibration, so the durations keep the fitted distribution and the load
    varies with the seed (sd ~0.07).

``lyra-15d`` (:mod:`lyra_gym.workloads.presets_calibrated`)
    15 days, 50,000 jobs of 1-64 GPUs on 1,024 GPUs, its load calibrated so
    that ``baseline`` queues as the Lyra paper's baseline does.
``lyra-15d-x10``
    ``lyra-15d`` at ten times the size (:func:`scaled_preset`): 500,000 jobs
    over the same 15 days for 10,240 training GPUs; the production-scale speed
    benchmark (``benchmarks/production_scale.py``). Not re-calibrated: the
    queuing that ``lyra-15d`` is tuned for does not carry over to a cluster
    ten times as large.

**Scale** (:func:`scaled_preset`, or ``generate_trace(preset, seed, scale=N)``):
the same preset N times as large -- N times the jobs and N times the reference
cluster over the same horizon, so the arrival shape (diurnal and weekly), every
per-job distribution and the offered load stay those of the preset; only the
arrival rate is N times higher. ``days=D`` shortens the horizon to D days with
``floor(num_jobs * N * D / days)`` jobs, the preset's mean jobs per day, laid out
by the same rate shape from the same weekday (e.g. ``lyra-15d`` at N = 10 over
2 days: 66,666 jobs). That is not the first D days of the whole trace: those,
two weekdays, would hold more than the mean (about 74,600 here). A scaled trace is
deterministic for its seed but is not a superset of the unscaled one (every job
is a fresh draw). Scale 1 without a cut is the preset itself, byte for byte.

To vary a preset otherwise, copy it with :func:`dataclasses.replace`, e.g.
``replace(PRESETS["bench-15d"], num_jobs=20_000, days=6)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.presets_calibrated import LYRA_15D
from lyra_gym.workloads.tracepreset import DAY_S, TracePreset

__all__ = [
    "MODEL_KEYS",
    "PRESETS",
    "TracePreset",
    "generate_trace",
    "offered_load",
    "scaled_preset",
]

#: Model keys the simulator's throughput profiles know.
MODEL_KEYS: tuple[str, ...] = ("resnet18", "resnet50", "bert", "transformer", "deepspeech2", "ncf", "yolov3")

_GRID_S = 60.0  # resolution of the arrival-rate profile used for sampling


PRESETS: dict[str, TracePreset] = {
    p.name: p
    for p in (
        TracePreset(
            name="small-1d",
            description="shipped default: 1 day, 400 jobs of 1-16 GPUs, for 128 GPUs at load ~0.8",
        ),
        TracePreset(
            name="env-14d",
            days=14.0,
            num_jobs=5_600,
            description="the environments' default: small-1d's mix over 14 days (400 jobs/day) for 128 GPUs "
                        "at load ~0.8; train windows in the first 80 %, test windows after",
        ),
        TracePreset(
            name="bench-15d",
            days=15.0,
            num_jobs=50_000,
            diurnal_amplitude=0.5,
            weekend_factor=0.6,
            size_probs={1: 0.60, 2: 0.12, 4: 0.10, 8: 0.10, 16: 0.05, 32: 0.02, 64: 0.01},
            duration_median_s=1920.0,
            duration_sigma=1.5,
            duration_max_s=86_400.0,
            elastic_share=0.3,
            reference_gpus=1024,
            load_band=(0.8, 0.9),
            target_load=0.85,
            description="paper scale: 15 days, 50,000 jobs of 1-64 GPUs, for 1,024 GPUs at load ~0.85",
        ),
        TracePreset(
            name="philly-like",
            days=7.0,
            num_jobs=6_000,
            diurnal_amplitude=0.5,
            weekend_factor=0.6,
            size_probs={1: 0.93, 2: 0.03, 4: 0.02, 8: 0.015, 16: 0.005},
            duration_median_s=1144.0,
            duration_sigma=2.25,
            duration_max_s=1_209_600.0,
            elastic_share=0.3,
            reference_gpus=192,
            load_band=(0.6, 1.1),
            target_load=None,
            description="Philly-like sizes and durations: 93 % 1-GPU, median 1,144 s, heavy tail",
        ),
    )
}


def _resolve(preset: str | TracePreset) -> TracePreset:
    if isinstance(preset, TracePreset):
        return preset
    try:
        return PRESETS[preset]
    except (KeyError, TypeError):
        raise ValueError(f"unknown trace preset {preset!r}; known presets: {', '.join(sorted(PRESETS))}") from None


def _arrival_times(p: TracePreset, rng: np.random.Generator) -> np.ndarray:
    """``p.num_jobs`` sorted arrival times (s), drawn from the rate profile."""
    horizon = p.horizon_s
    edges = np.arange(0.0, horizon, _GRID_S)
    edges = np.append(edges, horizon)
    mid = 0.5 * (edges[:-1] + edges[1:])
    hour = (mid % DAY_S) / 3600.0
    rate = 1.0 + p.diurnal_amplitude * np.cos(2.0 * np.pi * (hour - p.peak_hour) / 24.0)
    weekday = (p.start_weekday + (mid // DAY_S).astype(np.int64)) % 7
    rate = np.where(weekday >= 5, rate * p.weekend_factor, rate)
    # Piecewise-constant rate -> piecewise-linear cumulative; interpolating
    # its inverse is exact. A tiny floor keeps the cumulative strictly
    # increasing where the rate touches 0 (amplitude 1).
    mass = np.maximum(rate, 1e-12) * np.diff(edges)
    cum = np.concatenate(([0.0], np.cumsum(mass)))
    u = np.sort(rng.random(p.num_jobs)) * cum[-1]
    return np.interp(u, cum, edges)


def _load_scale(p: TracePreset, raw: np.ndarray, sizes: np.ndarray) -> float:
    """Common factor s with offered load of clip(s * raw) == p.target_load.

    The load is continuous and non-decreasing in s, so bisection (in log s)
    finds it; 100 halvings of the bracket [1e-6, 1e6] leave a relative error
    far below the 1 ms rounding that follows.
    """
    assert p.target_load is not None  # called only for a preset with a target load
    target = p.target_load * p.reference_gpus * p.horizon_s  # GPU-seconds
    w = sizes.astype(float)

    def demand(s: float) -> float:
        return float(np.dot(w, np.clip(raw * s, p.duration_min_s, p.duration_max_s)))

    lo, hi = 1e-6, 1e6
    if not demand(lo) <= target <= demand(hi):
        raise ValueError(
            f"preset {p.name!r}: target_load {p.target_load} is unreachable with durations clipped to "
            f"[{p.duration_min_s}, {p.duration_max_s}] s; change num_jobs, sizes or the clip bounds"
        )
    log_lo, log_hi = math.log(lo), math.log(hi)
    for _ in range(100):
        mid = 0.5 * (log_lo + log_hi)
        if demand(math.exp(mid)) < target:
            log_lo = mid
        else:
            log_hi = mid
    return math.exp(0.5 * (log_lo + log_hi))


def scaled_preset(preset: str | TracePreset, scale: int = 1, days: float | None = None) -> TracePreset:
    """The preset ``scale`` times as large, optionally over ``days`` days (jobs prorated).

    ``num_jobs`` and ``reference_gpus`` are multiplied by ``scale`` over the same
    horizon: the arrival-rate shape, the size, duration, model and elasticity
    distributions and the (target) offered load per reference GPU are the preset's.
    With ``days``, the horizon becomes ``days`` and the job count
    ``floor(num_jobs * scale * days / preset.days)``: the preset's mean jobs per day,
    laid out by the same rate shape from the same ``start_weekday`` (so not the jobs of
    the whole trace's first ``days`` days, which follow the weekly swing). The name
    gains ``-x{scale}`` and ``-{days}d``.

    Args:
        preset: a preset name (a key of :data:`PRESETS`) or a :class:`TracePreset`.
        scale: integer >= 1. Default 1.
        days: horizon in days, > 0, or None (the preset's). Default None.

    Returns:
        the preset itself when ``scale == 1`` and ``days`` is None, else a copy.

    Raises:
        ValueError: unknown preset, ``scale`` not an integer >= 1, ``days`` not a
            finite number > 0, or a cut that leaves no job.
    """
    p = _resolve(preset)
    if isinstance(scale, bool) or not isinstance(scale, (int, np.integer)) or scale < 1:
        raise ValueError(f"scale: must be an integer >= 1, got {scale!r}")
    scale = int(scale)
    if days is not None and (isinstance(days, bool) or not isinstance(days, (int, float))
                             or not math.isfinite(days) or days <= 0):
        raise ValueError(f"days: must be None or a finite number > 0, got {days!r}")
    if scale == 1 and days is None:
        return p
    horizon = p.days if days is None else float(days)
    num_jobs = p.num_jobs * scale if days is None else math.floor(p.num_jobs * scale * horizon / p.days)
    if num_jobs < 1:
        raise ValueError(f"preset {p.name!r} x{scale} cut to {days!r} days leaves no job")
    name = p.name + (f"-x{scale}" if scale != 1 else "") + ("" if days is None else f"-{horizon:g}d")
    what = f"{p.name} x{scale}" + ("" if days is None else f", first {horizon:g} days")
    return replace(p, name=name, days=horizon, num_jobs=num_jobs, reference_gpus=p.reference_gpus * scale,
                   description=f"{what}: {num_jobs:,} jobs for {p.reference_gpus * scale:,} GPUs "
                               f"(same shape and load per GPU)")


def generate_trace(preset: str | TracePreset, seed: int, scale: int = 1, days: float | None = None) -> list[JobSpec]:
    """Generate a synthetic trace.

    Args:
        preset: a preset name (a key of :data:`PRESETS`) or a :class:`TracePreset`.
        seed: seed for ``numpy.random.default_rng``; same preset and seed give
            the identical list.
        scale: the preset ``scale`` times as large (:func:`scaled_preset`).
            Default 1 (the preset as it is).
        days: the preset over ``days`` days instead, jobs prorated
            (:func:`scaled_preset`). Default None (the preset's horizon).

    Returns:
        ``preset.num_jobs`` jobs (times ``scale``, prorated to ``days``) sorted by
        submit time, with ids ``j00000``,
        ``j00001``, ... in that order (wider ids if there are more than
        100,000 jobs). Submit times and durations are rounded to 1 ms.

    Raises:
        ValueError: unknown preset name, or a bad ``scale`` or ``days``.
    """
    p = scaled_preset(preset, scale, days)
    rng = np.random.default_rng(seed)
    n = p.num_jobs

    submit = np.round(_arrival_times(p, rng), 3)

    sizes_keys = np.array(sorted(p.size_probs), dtype=np.int64)
    sizes_p = np.array([p.size_probs[k] for k in sizes_keys], dtype=float)
    sizes = rng.choice(sizes_keys, size=n, p=sizes_p / sizes_p.sum())

    raw = rng.lognormal(mean=math.log(p.duration_median_s), sigma=p.duration_sigma, size=n)
    load_factor = 1.0 if p.target_load is None else _load_scale(p, raw, sizes)
    durations = np.round(np.clip(raw * load_factor, p.duration_min_s, p.duration_max_s), 3)

    model_keys = list(p.model_mix)
    model_p = np.array([p.model_mix[k] for k in model_keys], dtype=float)
    models = rng.choice(len(model_keys), size=n, p=model_p / model_p.sum())

    elastic = rng.random(n) < p.elastic_share
    min_gpus = np.where(elastic, np.maximum(1, sizes // 2), sizes)
    max_gpus = np.where(elastic, 2 * sizes, sizes)

    width = max(5, len(str(n - 1)))
    return [
        JobSpec(f"j{i:0{width}d}", t, g, d, model_keys[m], e, lo, hi)
        for i, (t, g, d, m, e, lo, hi) in enumerate(
            zip(
                submit.tolist(),
                sizes.tolist(),
                durations.tolist(),
                models.tolist(),
                elastic.tolist(),
                min_gpus.tolist(),
                max_gpus.tolist(),
            )
        )
    ]


def offered_load(jobs: Iterable[JobSpec], num_gpus: int, horizon_s: float) -> float:
    """Offered load of a trace on a cluster: demanded over available GPU-seconds.

    ``sum(job.num_gpus * job.duration) / (num_gpus * horizon_s)`` over all
    jobs given (whether or not they would finish within the horizon). 1.0
    means the jobs, run at their requested sizes, would exactly fill the
    cluster for the horizon; elasticity, loaning and overheads are ignored.

    Args:
        jobs: the trace.
        num_gpus: GPUs in the cluster (> 0).
        horizon_s: length of the period in seconds (> 0), usually the
            trace's horizon (``preset.days * 86400``).
    """
    if num_gpus <= 0:
        raise ValueError(f"num_gpus must be > 0, got {num_gpus!r}")
    if not horizon_s > 0 or not math.isfinite(horizon_s):
        raise ValueError(f"horizon_s must be a finite number > 0, got {horizon_s!r}")
    demand = math.fsum(j.num_gpus * j.duration for j in jobs)
    return demand / (num_gpus * horizon_s)


PRESETS[LYRA_15D.name] = LYRA_15D
PRESETS["lyra-15d-x10"] = replace(
    scaled_preset(LYRA_15D, 10),
    description="production-scale speed benchmark: lyra-15d x10, 15 days, 500,000 jobs of 1-64 GPUs on "
                "10,240 training GPUs (presets_calibrated.lyra_15d_config(paper=True, scale=10)); not re-calibrated",
)
