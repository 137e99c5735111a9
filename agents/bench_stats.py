"""The benchmark's estimators: interquartile mean and two percentile bootstraps of it.

* :func:`stratified_bootstrap_ci` (suite v0): rliable's ``StratifiedBootstrap`` with
  ``task_bootstrap=False``: rows redrawn independently within every scenario column.
* :func:`unit_bootstrap_ci` (suite v1): the independent units are (trace seed, window) pairs; a
  sample redraws units with replacement and keeps each drawn unit's scores in *every* scenario
  together (scenarios built on the same trace and windows share jobs, so their windows are not
  independent), and, crossed with it, redraws the runs (training seeds) with replacement.

Both are seeded (``numpy.random.default_rng(seed)``): same input, same interval.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

#: An interval resting on fewer (trace seed, window) units than this is flagged by the benchmark.
MIN_UNITS = 5


def iqm(scores: ArrayLike) -> float:
    """Interquartile mean of all entries: drop ``int(0.25 * n)`` from each end of the sorted
    values and average the rest (``scipy.stats.trim_mean(x, 0.25, axis=None)``, rliable's
    ``aggregate_iqm``). E.g. 1..8 -> mean(3, 4, 5, 6) = 4.5."""
    values = np.sort(np.asarray(scores, dtype=float).ravel())
    if values.size == 0:
        return math.nan
    cut = int(0.25 * values.size)
    return float(values[cut:values.size - cut].mean())


def _iqm_rows(samples: np.ndarray) -> np.ndarray:
    """:func:`iqm` of each row of a 2-D array."""
    values = np.sort(samples, axis=1)
    cut = int(0.25 * values.shape[1])
    return values[:, cut:values.shape[1] - cut].mean(axis=1)


def _percentiles(stats: np.ndarray, size: float) -> tuple[float, float]:
    tail = 100 * (1 - size) / 2
    low, high = np.percentile(stats, [tail, 100 - tail])
    return float(low), float(high)


def stratified_bootstrap_ci(scores: np.ndarray, reps: int = 10_000, size: float = 0.95,
                            seed: int = 0) -> tuple[float, float]:
    """Percentile CI of the IQM of ``scores`` (runs x tasks): each of ``reps`` samples redraws,
    in every task column independently, as many runs with replacement (rliable's
    ``StratifiedBootstrap``, ``task_bootstrap=False``); the bounds are the
    ``(1 - size) / 2`` and ``(1 + size) / 2`` percentiles (``np.percentile``, linear) of the
    samples' IQMs."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.size == 0:
        raise ValueError(f"scores: a non-empty runs x tasks matrix expected, got shape {scores.shape}")
    runs, tasks = scores.shape
    rng = np.random.default_rng(seed)
    stats = np.empty(reps)
    chunk = max(1, 2_000_000 // scores.size)
    for start in range(0, reps, chunk):
        n = min(chunk, reps - start)
        rows = rng.integers(0, runs, size=(n, runs, tasks))
        stats[start:start + n] = _iqm_rows(scores[rows, np.arange(tasks)].reshape(n, -1))
    return _percentiles(stats, size)


def unit_bootstrap_ci(scores: np.ndarray, reps: int = 10_000, size: float = 0.95,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile CI of the IQM of ``scores`` (units x runs x scenarios): each of ``reps`` samples
    draws ``units`` unit indices and ``runs`` run indices with replacement (two independent
    draws) and takes the IQM of ``scores[units][:, runs]`` over every scenario. A unit's
    scenarios stay together. E.g. units ``(0, 1)`` and ``(1, 0)`` over two scenarios: every
    sample's IQM is 0.5, so the interval is ``(0.5, 0.5)``."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 3 or scores.size == 0:
        raise ValueError(f"scores: a non-empty units x runs x scenarios array expected, got shape {scores.shape}")
    units, runs, _ = scores.shape
    rng = np.random.default_rng(seed)
    stats = np.empty(reps)
    chunk = max(1, 2_000_000 // scores.size)
    for start in range(0, reps, chunk):
        n = min(chunk, reps - start)
        picked_units = rng.integers(0, units, size=(n, units))
        picked_runs = rng.integers(0, runs, size=(n, runs))
        sample = scores[picked_units[:, :, None], picked_runs[:, None, :]]  # n x units x runs x scenarios
        stats[start:start + n] = _iqm_rows(sample.reshape(n, -1))
    return _percentiles(stats, size)


def iqm_ci(scores: np.ndarray, reps: int, seed: int, units: bool = False) -> tuple[float, float, float]:
    """(IQM, CI low, CI high) of ``scores``: runs x tasks (:func:`stratified_bootstrap_ci`) or, with
    ``units``, units x runs x scenarios (:func:`unit_bootstrap_ci`); NaN if any score is not finite."""
    scores = np.asarray(scores, dtype=float)
    if not np.isfinite(scores).all():
        return math.nan, math.nan, math.nan
    ci = unit_bootstrap_ci if units else stratified_bootstrap_ci
    return (iqm(scores), *ci(scores, reps, seed=seed))


def vs_lyra(jct: float, lyra: float) -> float:
    """JCT / JCT(lyra) (lower is better; lyra = 1); NaN when lyra's is not positive."""
    return jct / lyra if lyra > 0 else math.nan


def headroom_closed(jct: float, ref: float, bound: float) -> float:
    """The share of the headroom between a reference's mean JCT ``ref`` (s; the scenario's best
    heuristic) and the isolated-job bound ``bound`` (s) that ``jct`` (s) closes:
    ``(ref - jct) / (ref - bound)``. 1 at the bound, 0 at the reference, negative when worse than
    it; never above 1 (no schedule beats the bound) and falling as ``jct`` grows, whatever random
    or lyra do. NaN when a value is not finite or ``ref <= bound`` (no headroom to close).
    E.g. ref 10,000 s, bound 5,000 s: 8,000 s -> 0.4; 11,000 s -> -0.2."""
    gap = ref - bound
    if not (math.isfinite(jct) and math.isfinite(gap)) or gap <= 0:
        return math.nan
    return (ref - jct) / gap
