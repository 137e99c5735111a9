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

``lyra-15d`` (:mod:`lyra_gym.presets_calibrated`)
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType

import numpy as np

from lyra_gym.trace import JobSpec

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

_DAY_S = 86_400.0
_GRID_S = 60.0  # resolution of the arrival-rate profile used for sampling

# Default model mix (assumption: no public trace gives a per-model split that
# maps onto these keys; vision models are weighted a little higher, as in
# the Pollux and Sia workloads).
_DEFAULT_MODEL_MIX = {
    "resnet18": 0.20,
    "resnet50": 0.20,
    "bert": 0.15,
    "transformer": 0.15,
    "deepspeech2": 0.10,
    "ncf": 0.10,
    "yolov3": 0.10,
}


def _freeze_probs(name: str, probs: Mapping, key_ok, key_desc: str) -> Mapping:
    if not probs:
        raise ValueError(f"TracePreset.{name}: must not be empty")
    items = dict(probs)
    for key, p in items.items():
        if not key_ok(key):
            raise ValueError(f"TracePreset.{name}: key {key!r} is not {key_desc}")
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not math.isfinite(p) or p < 0:
            raise ValueError(f"TracePreset.{name}: probability for {key!r} must be a finite number >= 0, got {p!r}")
    total = sum(items.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"TracePreset.{name}: probabilities must sum to 1, got {total!r}")
    return MappingProxyType(items)


@dataclass(frozen=True)
class TracePreset:
    """Parameters of a synthetic trace. Defaults are those of ``small-1d``.

    Each field says its unit, its default, and where the number comes from
    (*fact* with its source, or *assumption*).

    Attributes:
        name: preset name, used in logs and on the command line. Required.
        days: trace horizon in days; submit times lie in ``[0, days * 86400]``
            seconds. Default 1.0 (assumption: one simulated day).
        num_jobs: exact number of jobs. Default 400 (assumption, chosen with
            the size and duration parameters to give the offered load in
            ``load_band`` on ``reference_gpus`` GPUs).
        diurnal_amplitude: relative day/night swing of the arrival rate,
            ``rate(h) ~ 1 + a * cos(2 pi (h - peak_hour) / 24)``; 0 = flat,
            must be in [0, 1]. Default 0.5, i.e. peak/trough = 3x (assumption:
            job submissions follow working hours; the size of the swing is not
            taken from a published trace).
        weekend_factor: arrival-rate multiplier on Saturdays and Sundays,
            > 0. Default 0.6 (assumption).
        size_probs: requested GPUs -> probability (sums to 1). Default
            {1: .50, 2: .15, 4: .15, 8: .12, 16: .08} (assumption; mean 3.64
            GPUs; far fewer single-GPU jobs than Philly's 93 %, to exercise
            multi-GPU placement and elastic scaling).
        duration_median_s: median of the lognormal duration (before the
            ``target_load`` calibration), seconds. Default 2400 (assumption,
            same order as Philly's median of 1,144 s; chosen so the expected
            offered load matches ``target_load``).
        duration_sigma: standard deviation of log(duration), dimensionless;
            larger = heavier tail. Default 1.5 (assumption; the lognormal
            mean is then 3.1x the median).
        duration_max_s: durations are clipped to at most this, seconds.
            Default 43200 = 12 h (assumption).
        elastic_share: fraction of jobs that are elastic, in [0, 1]. Default
            0.3 (assumption: the Lyra paper does not publish its share).
        model_mix: model key -> probability (sums to 1). Default
            resnet18 .20, resnet50 .20, bert .15, transformer .15,
            deepspeech2 .10, ncf .10, yolov3 .10 (assumption).
        duration_min_s: durations are clipped to at least this, seconds.
            Default 60 (assumption: shorter jobs are noise for a scheduler).
        peak_hour: hour of day (0-24, trace time) at which arrivals peak.
            Default 14.0 (assumption: early afternoon).
        start_weekday: weekday of trace day 0, 0 = Monday ... 6 = Sunday.
            Default 0 (assumption).
        reference_gpus: training-cluster size the preset is sized for, GPUs.
            Default 128 = 16 servers x 8 V100 (the default cluster). Only used
            to document and test the offered load.
        load_band: (low, high) band that the offered load on
            ``reference_gpus`` over the horizon is expected to fall in (see
            :func:`offered_load`). Default (0.7, 0.9).
        target_load: if set, every generated trace has exactly this offered
            load on ``reference_gpus`` over the horizon: all durations are
            multiplied by one common factor (found numerically; the clip to
            ``[duration_min_s, duration_max_s]`` is applied after scaling)
            before rounding. The duration parameters are chosen so the
            expected factor is close to 1; the calibration only removes the
            seed-to-seed noise of a heavy-tailed sum, so that every seed of a
            preset offers the same load. ``None`` = no calibration (the load
            then varies with the seed around :meth:`expected_offered_load`).
            Default 0.8 (assumption: a busy but not overloaded cluster).
        description: one line for humans. Default "".
    """

    name: str
    days: float = 1.0
    num_jobs: int = 400
    diurnal_amplitude: float = 0.5
    weekend_factor: float = 0.6
    size_probs: Mapping[int, float] = field(
        default_factory=lambda: {1: 0.50, 2: 0.15, 4: 0.15, 8: 0.12, 16: 0.08}
    )
    duration_median_s: float = 2400.0
    duration_sigma: float = 1.5
    duration_max_s: float = 43_200.0
    elastic_share: float = 0.3
    model_mix: Mapping[str, float] = field(default_factory=lambda: dict(_DEFAULT_MODEL_MIX))
    duration_min_s: float = 60.0
    peak_hour: float = 14.0
    start_weekday: int = 0
    reference_gpus: int = 128
    load_band: tuple[float, float] = (0.7, 0.9)
    target_load: float | None = 0.8
    description: str = ""

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"TracePreset.{name}: {why}, got {getattr(self, name)!r}")

        if not isinstance(self.name, str) or not self.name:
            raise bad("name", "must be a non-empty string")
        if not math.isfinite(self.days) or self.days <= 0:
            raise bad("days", "must be a finite number > 0")
        if not isinstance(self.num_jobs, int) or self.num_jobs < 1:
            raise bad("num_jobs", "must be an integer >= 1")
        if not 0.0 <= self.diurnal_amplitude <= 1.0:
            raise bad("diurnal_amplitude", "must be in [0, 1]")
        if not math.isfinite(self.weekend_factor) or self.weekend_factor <= 0:
            raise bad("weekend_factor", "must be a finite number > 0")
        if not math.isfinite(self.duration_median_s) or self.duration_median_s <= 0:
            raise bad("duration_median_s", "must be a finite number > 0")
        if not math.isfinite(self.duration_sigma) or self.duration_sigma < 0:
            raise bad("duration_sigma", "must be a finite number >= 0")
        if not math.isfinite(self.duration_min_s) or self.duration_min_s <= 0:
            raise bad("duration_min_s", "must be a finite number > 0")
        if not math.isfinite(self.duration_max_s) or self.duration_max_s < self.duration_min_s:
            raise bad("duration_max_s", "must be a finite number >= duration_min_s")
        if not 0.0 <= self.elastic_share <= 1.0:
            raise bad("elastic_share", "must be in [0, 1]")
        if not 0.0 <= self.peak_hour <= 24.0:
            raise bad("peak_hour", "must be in [0, 24]")
        if self.start_weekday not in range(7):
            raise bad("start_weekday", "must be an integer 0 (Monday) .. 6 (Sunday)")
        if not isinstance(self.reference_gpus, int) or self.reference_gpus < 1:
            raise bad("reference_gpus", "must be an integer >= 1")
        lo, hi = self.load_band
        if not 0 <= lo <= hi:
            raise bad("load_band", "must be (low, high) with 0 <= low <= high")
        if self.target_load is not None and (not math.isfinite(self.target_load) or self.target_load <= 0):
            raise bad("target_load", "must be None or a finite number > 0")
        object.__setattr__(
            self,
            "size_probs",
            _freeze_probs(
                "size_probs", self.size_probs,
                lambda k: isinstance(k, int) and not isinstance(k, bool) and k >= 1, "an integer >= 1",
            ),
        )
        object.__setattr__(
            self,
            "model_mix",
            _freeze_probs(
                "model_mix", self.model_mix,
                lambda k: isinstance(k, str) and bool(k) and k == k.strip(), "a non-empty model key",
            ),
        )

    def __hash__(self) -> int:
        # The mappings are read-only views, hashed by their items.
        return hash(
            tuple(
                tuple(sorted(v.items(), key=repr)) if isinstance(v, Mapping) else v
                for v in (getattr(self, f.name) for f in fields(self))
            )
        )

    @property
    def horizon_s(self) -> float:
        """Trace horizon in seconds (``days * 86400``)."""
        return self.days * _DAY_S

    def expected_offered_load(self, num_gpus: int | None = None) -> float:
        """Offered load expected over seeds (analytic, clipping included).

        ``E[num_gpus] * E[clipped duration] * num_jobs / (num_gpus * horizon)``,
        with ``num_gpus`` defaulting to ``reference_gpus``. Size and duration
        are independent, so the expectation factorises.
        """
        gpus = self.reference_gpus if num_gpus is None else num_gpus
        mean_size = sum(k * p for k, p in self.size_probs.items())
        mean_dur = _clipped_lognormal_mean(
            self.duration_median_s, self.duration_sigma, self.duration_min_s, self.duration_max_s
        )
        return self.num_jobs * mean_size * mean_dur / (gpus * self.horizon_s)


def _clipped_lognormal_mean(median: float, sigma: float, lo: float, hi: float) -> float:
    """E[clip(X, lo, hi)] for X lognormal with the given median and log-sd."""
    if sigma == 0:
        return min(max(median, lo), hi)
    mu = math.log(median)

    def cdf(z: float) -> float:
        return 0.5 * math.erfc(-z / math.sqrt(2.0))

    a = (math.log(lo) - mu) / sigma
    b = (math.log(hi) - mu) / sigma
    # E[X; lo < X < hi] = exp(mu + sigma^2/2) * (Phi(b - sigma) - Phi(a - sigma))
    middle = math.exp(mu + sigma * sigma / 2) * (cdf(b - sigma) - cdf(a - sigma))
    return lo * cdf(a) + middle + hi * (1.0 - cdf(b))


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
    hour = (mid % _DAY_S) / 3600.0
    rate = 1.0 + p.diurnal_amplitude * np.cos(2.0 * np.pi * (hour - p.peak_hour) / 24.0)
    weekday = (p.start_weekday + (mid // _DAY_S).astype(np.int64)) % 7
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
    scale = 1.0 if p.target_load is None else _load_scale(p, raw, sizes)
    durations = np.round(np.clip(raw * scale, p.duration_min_s, p.duration_max_s), 3)

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


from lyra_gym.presets_calibrated import LYRA_15D  # noqa: E402  (last: that module imports TracePreset from here)

PRESETS[LYRA_15D.name] = LYRA_15D
PRESETS["lyra-15d-x10"] = replace(
    scaled_preset(LYRA_15D, 10),
    description="production-scale speed benchmark: lyra-15d x10, 15 days, 500,000 jobs of 1-64 GPUs on "
                "10,240 training GPUs (presets_calibrated.lyra_15d_config(paper=True, scale=10)); not re-calibrated",
)
