"""The pure part of the Pollux baseline: goodput model, restart factor, and an exact optimiser.

Nothing here sees the engine or a view; :mod:`lyra_baselines.pollux` builds the
inputs from a :class:`~lyra_gym.sim.view.ClusterView` and places the result.

Objective (Qiao et al., OSDI 2021, section 4.2)::

    FITNESS_p = ( mean_j  speedup_j(x_j) ** p ) ** (1/p)        (p = 0: geometric mean)

For every ``p`` this is a strictly increasing function of a *separable* sum
``sum_j u(speedup_j(x_j))`` with ``u(s) = -s**p`` (p < 0), ``log s`` (p = 0) or
``s**p`` (p > 0), so maximising it under ``sum_j x_j <= capacity`` is a
multiple-choice knapsack (one group per job, item = its GPU count, weight = the
count). :func:`best_sizes` solves that knapsack exactly by dynamic programming
over the spare GPUs, where Pollux runs a genetic algorithm (NSGA-II, 100
generations of 100) over job x node matrices; the tests check it against
exhaustive search.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from typing import Sequence

import numpy as np

#: Speed-ups below this count as this, so that ``s**p`` stays finite for p <= 0 (Pollux's
#: simulator adds the same 1e-3 to every speed-up before its power mean).
SPEEDUP_FLOOR = 1e-3


def statistical_efficiency(batch: float, initial_batch: float, noise_scale: float) -> float:
    """Pollux's efficiency of total batch ``batch`` relative to ``initial_batch`` (samples):
    ``(noise_scale + initial_batch) / (noise_scale + batch)``, from the gradient noise scale
    (McCandlish et al. 2018). 1 at the initial batch, below 1 above it."""
    return (noise_scale + initial_batch) / (noise_scale + batch)


def most_jobs(running: Sequence[int], waiting: Sequence[int], capacity: int) -> tuple[int, int]:
    """Pollux's admission when any job may get zero GPUs: how many of the ``running`` jobs stay
    and how many ``waiting`` ones start, given each job's minimum GPUs (both lists ascending) and
    the pool's ``capacity`` in GPUs. The most jobs in all (an unallocated job costs
    ``1 / SPEEDUP_FLOOR`` in the p = -1 sum, more than any allocated one), then the most running
    ones; the chosen jobs are the smallest of each list. Returns ``(kept, started)``."""
    total = n_best = 0
    for need in sorted((*running, *waiting)):
        if total + need > capacity:
            break
        total, n_best = total + need, n_best + 1
    kept_gpus = list(itertools.accumulate(running, initial=0))    # GPUs of the k smallest running
    started_gpus = list(itertools.accumulate(waiting, initial=0))  # ... and of the k smallest waiting
    kept = min(len(running), n_best)
    while kept > 0 and (n_best - kept > len(waiting) or kept_gpus[kept] + started_gpus[n_best - kept] > capacity):
        kept -= 1
    return kept, n_best - kept


def restart_factor(age_s: float, reallocations: int, delay_s: float) -> float:
    """Pollux's discount on the speed-up of a job whose allocation would change:
    ``max(age - reallocations * delay, 0) / (age + delay)`` (adaptdl simulator, ``delay`` = 30 s).

    Young jobs and jobs already re-allocated often are discounted most; ``delay_s = 0`` disables it.
    """
    if delay_s <= 0:
        return 1.0
    return max(age_s - reallocations * delay_s, 0.0) / (age_s + delay_s)


def utility(speedups: np.ndarray, p: float) -> np.ndarray:
    """``u(s)``: the per-job term whose sum the power mean of exponent ``p`` increases with."""
    s = np.maximum(np.asarray(speedups, dtype=np.float64), SPEEDUP_FLOOR)
    if p == 0:
        return np.log(s)
    if p < 0:
        return -(s ** p)
    return s ** p


def power_mean(speedups: Sequence[float], p: float) -> float:
    """``(mean s**p) ** (1/p)`` (geometric mean for p = 0), speed-ups floored at :data:`SPEEDUP_FLOOR`."""
    s = np.maximum(np.asarray(speedups, dtype=np.float64), SPEEDUP_FLOOR)
    if s.size == 0:
        return 0.0
    if p == 0:
        return float(math.exp(np.log(s).mean()))
    return float(np.mean(s ** p) ** (1.0 / p))


@lru_cache(maxsize=1024)
def _window(spare: int, k: int) -> np.ndarray:
    """Index of ``padded`` (``k - 1`` leading slots, then ``best``) at row ``c``, column ``i``:
    ``c - i + k - 1``, i.e. ``best[c - i]``, the padding where ``c < i``. Read-only, cached."""
    index = np.arange(spare + 1)[:, None] - np.arange(k)[None, :] + (k - 1)
    index.flags.writeable = False
    return index


def best_sizes(jobs: Sequence[tuple[int, np.ndarray]], capacity: int, p: float,
               weights: Sequence[float] | None = None) -> list[int]:
    """GPU counts that maximise the power mean of the jobs' speed-ups using at most ``capacity`` GPUs.

    :param jobs: per job ``(lo, speedups)``: it may get ``lo, lo + 1, ..., lo + len(speedups) - 1``
        GPUs, with those speed-ups (an inelastic job: ``(num_gpus, [s])``). Every job gets at least ``lo``.
    :param capacity: GPUs available to these jobs.
    :param p: power-mean exponent.
    :param weights: per job, the weight of its term in a weighted power mean
        ``(sum_j w_j s_j**p / sum_j w_j) ** (1/p)`` (default None: all 1, Pollux's mean); an agent's
        job levels (:class:`~lyra_gym.sim.scheduler.Guidance`).
    :returns: the GPU count of each job, in input order. Exact (dynamic programming over the
        ``capacity - sum(lo)`` spare GPUs, O(sum of options x spare)). Ties go to fewer GPUs in
        total, then, job by job from the last, to the smaller count.
    :raises ValueError: if the jobs' minimums exceed ``capacity``.
    """
    sizes = [int(lo) for lo, _ in jobs]
    spare = capacity - sum(sizes)
    if spare < 0:
        raise ValueError(f"minimums need {sum(sizes)} GPUs, capacity is {capacity}")
    if spare == 0 or not jobs:
        return sizes
    best = np.full(spare + 1, -np.inf)  # best[c]: best sum of utilities using exactly c spare GPUs
    best[0] = 0.0
    rows = np.arange(spare + 1)
    picks: list[np.ndarray | None] = []
    for j, (_, speedups) in enumerate(jobs):
        u = utility(np.asarray(speedups)[: spare + 1], p)
        if weights is not None and weights[j] != 1.0:
            u = u * weights[j]
        k = len(u)
        if k == 1:
            best += u[0]
            picks.append(None)
            continue
        padded = np.empty(spare + k)
        padded[: k - 1] = -np.inf
        padded[k - 1:] = best
        totals = padded[_window(spare, k)] + u  # totals[c, i] = best[c - i] + u[i]: this job takes i spare GPUs
        choice = totals.argmax(axis=1)
        best = totals[rows, choice]
        picks.append(choice)
    c = int(best.argmax())
    for j in range(len(jobs) - 1, -1, -1):
        choice = picks[j]
        if choice is not None:
            extra = int(choice[c])
            sizes[j] += extra
            c -= extra
    return sizes
