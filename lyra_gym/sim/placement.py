"""Placement of whole GPUs onto servers: best fit (``spread``) and ``consolidated``.

The rule is the run's ``placement`` config key (``lyra_gym/model/config.py``); :func:`place`
dispatches on it, so every heuristic that honours it, and the allocation env
(:mod:`lyra_gym.envs.alloc`), calls one function. :mod:`lyra_baselines.placement` re-exports
these rules beside the policies' own helpers (``spanning_group``, ``warn_unrunnable``).

Cost: given a :class:`~lyra_gym.sim.topology.FreeMap` (``view.free_map()``,
``lyra_baselines.loaning.free_map_after``) and a :class:`~lyra_gym.sim.topology.ServerSet`
(``groups_by_type``, ``view.topology``), a placement is answered from the engine's
free-capacity index in O(GPUs per server + servers placed on), whatever the size of
the cluster; given plain lists, by walking the candidates (O(candidates)). Both give
the same placement (``tests/sim/test_topology.py``).
"""

from __future__ import annotations

from typing import Callable, Sequence

from lyra_gym.sim.cluster import Pool
from lyra_gym.sim.topology import FreeMap, ServerSet

#: Free GPUs per server id: a plain list, or the engine's indexed copy (``view.free_map()``).
FreeGPUs = list[int] | FreeMap

__all__ = ["best_fit", "best_fit_in_groups", "capacities", "consolidated_fit", "groups_by_type", "place",
           "place_in_groups", "placer", "take"]


def best_fit(free: FreeGPUs, need: int, candidates: Sequence[int]) -> dict[int, int] | None:
    """Place ``need`` GPUs on ``candidates`` (server ids) given ``free`` GPUs per server id.

    One server if any can hold them all: the one left with the fewest free GPUs
    (best fit; ties: lowest id). Otherwise spread over as few servers as
    possible: fullest-free servers first, the last piece best-fitted. Returns
    {server id: GPUs}, or None if the candidates cannot hold ``need``. Does not
    modify ``free``.
    """
    if type(candidates) is ServerSet and type(free) is FreeMap and candidates.cells is not None and need > 0:
        return _best_fit_indexed(free, need, candidates.cells)
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


def _best_fit_indexed(free: FreeMap, need: int, cells: Sequence[int]) -> dict[int, int] | None:
    """:func:`best_fit` from the index (the same choices: ``tests/sim/test_topology.py``)."""
    if free.total(cells) < need:
        return None  # (then no one server holds them either)
    best = free.smallest_fit(need, cells)
    if best is not None:
        return {best: need}
    placement: dict[int, int] = {}
    left = need
    for sid, f in free.descending(cells):
        if f >= left:
            # best-fit the remainder among the servers not yet used: those with fewer free GPUs than
            # this one (all unused), else this one (the lowest id left with as many)
            last = free.smallest_fit(left, cells, below=f)
            placement[sid if last is None else last] = left
            return placement
        placement[sid] = f
        left -= f
    return None  # unreachable: total >= need


def best_fit_in_groups(free: FreeGPUs, need: int, groups: Sequence[Sequence[int]]) -> dict[int, int] | None:
    """:func:`best_fit` in the first server group (a list of ids) that can hold ``need`` GPUs."""
    for candidates in groups:
        placement = best_fit(free, need, candidates)
        if placement is not None:
            return placement
    return None


def take(free: FreeGPUs, placement: dict[int, int]) -> None:
    """Subtract a placement from ``free`` in place."""
    if type(free) is FreeMap:
        free.take(placement)
        return
    for sid, gpus in placement.items():
        free[sid] -= gpus


def consolidated_fit(free: FreeGPUs, capacity: Sequence[int], need: int,
                     candidates: Sequence[int]) -> dict[int, int] | None:
    """Consolidated placement (as in production-trace simulators, e.g. Helios).

    A job of at most one candidate server's GPUs goes on one server: the one left
    with the fewest free GPUs (ties: lowest id), or nowhere if none has room. A
    larger job takes wholly free servers (``free == capacity``), lowest ids first,
    all GPUs of each but the last, which gets the remainder (its other GPUs stay
    free for other jobs). Returns {server id: GPUs} or None; ``free`` is not modified.
    """
    if type(candidates) is ServerSet and type(free) is FreeMap and candidates.cells is not None and need > 0:
        return _consolidated_indexed(free, need, candidates.cells)
    if any(capacity[sid] >= need for sid in candidates):
        best, best_free = -1, None
        for sid in candidates:
            f = free[sid]
            if f >= need and (best_free is None or (f, sid) < (best_free, best)):
                best, best_free = sid, f
        return None if best_free is None else {best: need}
    placement: dict[int, int] = {}
    left = need
    for sid in sorted(candidates):
        if free[sid] == capacity[sid] > 0:
            placement[sid] = min(left, free[sid])
            left -= placement[sid]
            if not left:
                return placement
    return None


def _consolidated_indexed(free: FreeMap, need: int, cells: Sequence[int]) -> dict[int, int] | None:
    """:func:`consolidated_fit` from the index (the same choices: ``tests/sim/test_topology.py``)."""
    topo_cells = free.topology.cells
    if any(topo_cells[c].gpus >= need for c in cells):
        best = free.smallest_fit(need, cells)
        return None if best is None else {best: need}
    if free.wholly_free_gpus(cells) < need:
        return None
    placement: dict[int, int] = {}
    left = need
    capacity = free.topology.capacity
    for sid in free.wholly_free(cells):
        placement[sid] = min(left, capacity[sid])
        left -= placement[sid]
        if not left:
            return placement
    return None  # unreachable: enough wholly free GPUs


def place(rule: str, free: FreeGPUs, capacity: Sequence[int], need: int,
          candidates: Sequence[int]) -> dict[int, int] | None:
    """``need`` GPUs on ``candidates`` by ``rule`` (``"spread"``: :func:`best_fit`;
    ``"consolidated"``: :func:`consolidated_fit`)."""
    if rule == "consolidated":
        return consolidated_fit(free, capacity, need, candidates)
    return best_fit(free, need, candidates)


def place_in_groups(rule: str, free: FreeGPUs, capacity: Sequence[int], need: int,
                    groups: Sequence[Sequence[int]]) -> dict[int, int] | None:
    """:func:`place` in the first server group (a list of ids) that can hold ``need`` GPUs."""
    indexed = type(free) is FreeMap and need > 0
    consolidated = rule == "consolidated"
    for candidates in groups:
        if indexed and type(candidates) is ServerSet and candidates.cells is not None:
            cells = candidates.cells
            # free is a FreeMap here (``indexed``), a narrowing mypy cannot follow through a variable
            placement = (_consolidated_indexed(free, need, cells) if consolidated  # type: ignore[arg-type]
                         else _best_fit_indexed(free, need, cells))  # type: ignore[arg-type]
        else:
            placement = place(rule, free, capacity, need, candidates)
        if placement is not None:
            return placement
    return None


def placer(rule: str, capacity: Sequence[int], groups: Sequence[Sequence[int]]
           ) -> Callable[[list[int], int], dict[int, int] | None]:
    """``place(free, need)``: :func:`place_in_groups` ``(rule, free, capacity, need, groups)``, for
    a scheduler that places many jobs on the same groups (the rule and a lone indexed group are
    looked at once, here)."""
    if len(groups) == 1 and type(groups[0]) is ServerSet and groups[0].cells is not None:
        cells = groups[0].cells
        fit = _consolidated_indexed if rule == "consolidated" else _best_fit_indexed

        def place_on_cells(free: list[int], need: int) -> dict[int, int] | None:
            if need > 0 and type(free) is FreeMap:
                return fit(free, need, cells)
            return place_in_groups(rule, free, capacity, need, groups)
        return place_on_cells

    def place_any(free: list[int], need: int) -> dict[int, int] | None:
        return place_in_groups(rule, free, capacity, need, groups)
    return place_any


def capacities(view) -> Sequence[int]:
    """GPUs per server id of a :class:`~lyra_gym.sim.view.ClusterView` (a tuple, from the topology)."""
    return view.topology.capacity


def groups_by_type(view, server_ids: Sequence[int]) -> list[Sequence[int]]:
    """``server_ids`` (ascending) grouped by GPU type (first-seen order); with
    ``allow_mixed_gpu_types`` a last group of all of them, for a job no one type can hold.

    Each group is a :class:`~lyra_gym.sim.topology.ServerSet` (a tuple of ids that names its cells,
    so placements on a ``FreeMap`` use the index). The training pool's groups are precomputed
    (O(1)); other id lists cost O(len(server_ids)).
    """
    topo = view.topology
    if server_ids is view.training_server_ids or (
            len(server_ids) == len(topo.training_ids) and tuple(server_ids) == topo.training_ids):
        out = list(topo.type_sets(Pool.TRAINING))
        if view.allow_mixed_gpu_types and len(out) > 1:
            out.append(topo.pool_set(Pool.TRAINING))
        return out
    out = topo.sets_by_type(server_ids)
    if view.allow_mixed_gpu_types and len(out) > 1:
        ids = list(server_ids)
        out.append(topo.server_set(ids) if _ascending(ids) else ServerSet(ids, None))
    return out


def _ascending(ids: Sequence[int]) -> bool:
    return all(a < b for a, b in zip(ids, ids[1:]))
