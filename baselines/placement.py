"""Best-fit placement of whole GPUs onto servers."""

from __future__ import annotations

from typing import Sequence


def best_fit(free: list[int], need: int, candidates: Sequence[int]) -> dict[int, int] | None:
    """Place ``need`` GPUs on ``candidates`` (server ids) given ``free`` GPUs per server id.

    One server if any can hold them all: the one left with the fewest free GPUs
    (best fit; ties: lowest id). Otherwise spread over as few servers as
    possible: fullest-free servers first, the last piece best-fitted. Returns
    {server id: GPUs}, or None if the candidates cannot hold ``need``. Does not
    modify ``free``.
    """
    best, best_free = -1, None
    total = 0
    for sid in candidates:
        f = free[sid]
        total += f
        if f >= need and (best_free is None or f < best_free):
            best, best_free = sid, f
    if best_free is not None:
        return {best: need}
    if total < need:
        return None
    by_free = sorted((sid for sid in candidates if free[sid] > 0), key=lambda s: (-free[s], s))
    placement: dict[int, int] = {}
    left = need
    for i, sid in enumerate(by_free):
        if free[sid] >= left:
            # best-fit the remainder among the servers not yet used
            last = min((s for s in by_free[i:] if free[s] >= left), key=lambda s: (free[s], s))
            placement[last] = left
            return placement
        placement[sid] = free[sid]
        left -= free[sid]
    return None  # unreachable: total >= need


def best_fit_in_groups(free: list[int], need: int, groups: Sequence[Sequence[int]]) -> dict[int, int] | None:
    """:func:`best_fit` in the first server group (a list of ids) that can hold ``need`` GPUs."""
    for candidates in groups:
        placement = best_fit(free, need, candidates)
        if placement is not None:
            return placement
    return None


def take(free: list[int], placement: dict[int, int]) -> None:
    """Subtract a placement from ``free`` in place."""
    for sid, gpus in placement.items():
        free[sid] -= gpus
