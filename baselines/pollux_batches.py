"""The batch sizes Pollux's batch-size adaptation searches over (see :mod:`lyra_baselines.pollux`).

Two rules, chosen by the scheduler's ``batch_range``: :func:`application_batches` (the Pollux
artifact's range, from the application's initial batch to its largest measured one) and
:func:`batch_candidates` (the old rule, from the workload's batch up). Batches are global
(samples per step, all workers together).
"""

from __future__ import annotations

import math

#: Batch-size search of the adaptive rule: ``B0 x 2^(k/4)``, k = 0, 1, ..., up to this multiple of ``B0``.
MAX_BATCH_GROWTH = 64.0
#: Batches the application range is sampled at (``np.geomspace``'s default in the artifact).
BATCH_POINTS = 50


def batch_candidates(b0: float, workers: int, max_local_batch: float | None) -> list[float]:
    """Global batches of ``batch_range="workload"`` (the old rule) on ``workers`` GPUs: ``B0 x
    2^(k/4)`` (whole samples) from ``B0`` up to ``MAX_BATCH_GROWTH x B0`` and to ``workers x
    max_local_batch`` (GPU memory). Never below ``B0``."""
    top = b0 * MAX_BATCH_GROWTH
    if max_local_batch is not None:
        top = min(top, workers * max_local_batch)
    out, k = [float(b0)], 1
    while True:
        m = float(round(b0 * 2.0 ** (k / 4)))
        if m > top:
            break
        if m > out[-1]:
            out.append(m)
        k += 1
    return out


def application_batches(lo: float, hi: float, workers: int, min_local: float | None,
                        max_local: float | None) -> list[float]:
    """Global batches of ``batch_range="application"`` on ``workers`` GPUs, as the Pollux artifact's
    ``GoodputFunction.optimize`` (``accumulation=True``): :data:`BATCH_POINTS` batches spaced
    geometrically from ``max(lo, workers x min_local)`` to ``hi`` (the application's initial and
    largest measured batch), less those whose micro-batch (the artifact's split with gradient
    accumulation: ``local = ceil(M / n)``, ``accum = ceil(local / max_local) - 1``, at least 1
    on one GPU above ``lo``, ``atomic = ceil(local / (accum + 1))``) falls below ``min_local``.
    The engine splits the chosen batch the same way (:meth:`lyra_gym.model.scaling.ScalingModel.split`)."""
    start = max(lo, workers * (min_local or 1.0))
    if start >= hi:
        return [float(start)]
    ratio = (hi / start) ** (1.0 / (BATCH_POINTS - 1))
    out = []
    for k in range(BATCH_POINTS):
        m = hi if k == BATCH_POINTS - 1 else start * ratio ** k
        local = math.ceil(m / workers - 1e-8)
        accum = 0 if max_local is None else math.ceil(local / max_local - 1e-8) - 1
        if workers == 1 and m > lo + 1e-8:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        if min_local is None or atomic >= min_local:
            out.append(float(m))
    return out or [float(start)]
