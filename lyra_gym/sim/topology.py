"""The engine's index of its servers: static facts, and free GPUs by pool, GPU type and count.

DESIGN.md "Cost": a decision reads indexes the engine keeps up to date, so its
cost does not grow with the number of servers. :class:`Topology` is that
index. The engine owns it and updates it on every change of a server's free
GPUs or loan state (starts, scale-ins and -outs, preemptions, completions,
borrowing and returning); schedulers read it through
:attr:`lyra_gym.sim.view.ClusterView.topology` and work on :class:`FreeMap`, an
O(1) working copy they may change while they build a Plan.

Cells
    A *cell* is the servers of one pool, GPU type and size (GPUs per server):
    interchangeable except by id. Cells are numbered in order of their first
    server id. Within a cell, the servers with ``f > 0`` free GPUs sit in
    bucket ``f``, a list of ids in ascending order, so:

    - the best-fitting server for ``n`` GPUs (fewest free GPUs left, ties: the
      lowest id) is the head of the first non-empty bucket ``f >= n``:
      O(GPUs per server);
    - free GPUs per cell are a running total: O(1);
    - servers in (most free, lowest id) order are the buckets from the top;
    - moving a server between buckets is a binary search and a list insert.

    A server training may not use (an inference server not on loan) has 0
    free GPUs, as in ``ClusterView.free_gpus()``, so it is in no bucket.

Server sets
    :class:`ServerSet` is a tuple of server ids (ascending) that also names
    the cells they belong to; the placement helpers (``baselines/placement.py``)
    answer a query on a :class:`FreeMap` and a :class:`ServerSet` from the
    buckets of its cells instead of walking the ids. That is exact when every
    server of those cells outside the set has no free GPU in the map (true of
    a pool's servers by type, and of the loaned servers of one type in a map
    made by ``lyra_baselines.loaning.free_map_after``).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from typing import Iterable, Iterator, Sequence

from lyra_gym.sim.cluster import Pool, Server

__all__ = ["Cell", "FreeMap", "ServerSet", "Topology"]


class Cell:
    """The servers of one pool, GPU type and size. ``ids``: ascending."""

    __slots__ = ("index", "pool", "gpu_type", "gpus", "ids")

    def __init__(self, index: int, pool: Pool, gpu_type: str, gpus: int, ids: tuple[int, ...]) -> None:
        self.index = index
        self.pool = pool
        self.gpu_type = gpu_type
        self.gpus = gpus
        self.ids = ids

    def __repr__(self) -> str:
        return f"Cell({self.index}, {self.pool.value}, {self.gpu_type}, {self.gpus} GPUs, {len(self.ids)} servers)"


class ServerSet(tuple):
    """Server ids in ascending order that may also name their cells (``cells``: indices into
    ``Topology.cells``, or None). Behaves as a tuple.

    With ``cells`` set, a placement on a :class:`FreeMap` reads the buckets of those cells
    instead of the ids: exact because every server of those cells outside the set has no free
    GPU there (the set is whole cells, or :meth:`Topology.server_set` checked it against the
    map it was given). Without, the placement walks the ids.
    """

    cells: tuple[int, ...] | None

    def __new__(cls, ids: Iterable[int], cells: Iterable[int] | None) -> "ServerSet":
        self = super().__new__(cls, ids)
        self.cells = None if cells is None else tuple(cells)
        return self

    def __reduce__(self):
        return (ServerSet, (tuple(self), self.cells))


class Topology:
    """Static facts of the servers and the index of their free GPUs (module docstring).

    Read-only for schedulers; the engine alone calls the methods that start with ``_``.

    :param servers: the engine's servers (ids are list indices; training servers first).
    """

    def __init__(self, servers: Sequence[Server]) -> None:
        n = len(servers)
        self.num_servers = n
        #: GPUs per server id.
        self.capacity: tuple[int, ...] = tuple(s.num_gpus for s in servers)
        #: GPU type per server id.
        self.gpu_types: tuple[str, ...] = tuple(s.gpu_type for s in servers)
        #: pool per server id.
        self.pools: tuple[Pool, ...] = tuple(s.pool for s in servers)
        self.training_ids: tuple[int, ...] = tuple(s.id for s in servers if s.pool is Pool.TRAINING)
        self.inference_ids: tuple[int, ...] = tuple(s.id for s in servers if s.pool is Pool.INFERENCE)
        keys: dict[tuple[Pool, str, int], list[int]] = {}
        for s in servers:
            keys.setdefault((s.pool, s.gpu_type, s.num_gpus), []).append(s.id)
        self.cells: tuple[Cell, ...] = tuple(Cell(i, pool, typ, gpus, tuple(ids))
                                             for i, ((pool, typ, gpus), ids) in enumerate(keys.items()))
        cell_of = [0] * n
        for cell in self.cells:
            for sid in cell.ids:
                cell_of[sid] = cell.index
        #: cell index per server id.
        self.cell_of: tuple[int, ...] = tuple(cell_of)
        self._type_sets: dict[Pool, list[ServerSet]] = {}
        self._all_sets: dict[Pool, ServerSet] = {}
        for pool in Pool:
            by_type: dict[str, list[Cell]] = {}
            for cell in self.cells:
                if cell.pool is pool:
                    by_type.setdefault(cell.gpu_type, []).append(cell)
            self._type_sets[pool] = [self._set_of(cells) for cells in by_type.values()]
            self._all_sets[pool] = self._set_of([c for c in self.cells if c.pool is pool])

        # the index (the engine's state): free GPUs per server id, buckets and totals per cell
        #: Free GPUs per server id (0 where training may not go): the engine's own list; read only.
        self.free: list[int] = [0] * n
        self._buckets: list[list[list[int]]] = [[[] for _ in range(c.gpus + 1)] for c in self.cells]
        self._totals: list[int] = [0] * len(self.cells)
        self._usable: list[int] = [0] * len(self.cells)  # servers training may use, per cell
        self._loaned: list[int] = []                      # loaned inference server ids, ascending
        self._idle: list[int] = list(self.inference_ids)  # inference server ids not on loan, ascending
        #: Bumped by every change of the index; a :class:`FreeMap` refuses to work on a later one.
        self.version = 0
        #: Bumped by every loan and return (a change of :meth:`loaned`).
        self.loan_version = 0
        self._loaned_cache: tuple | None = None  # (loan_version, named set, bare set, whole cells, ids, cells)
        for s in servers:
            if s.pool is Pool.TRAINING or s.loaned:
                self._usable[cell_of[s.id]] += 1
                self._set(s.id, s.num_gpus - s.used)
        if any(s.loaned for s in servers):
            self._loaned = [s.id for s in servers if s.loaned]
            self._idle = [s for s in self.inference_ids if not servers[s].loaned]

    def _set_of(self, cells: Sequence[Cell]) -> ServerSet:
        return ServerSet(sorted(sid for c in cells for sid in c.ids), [c.index for c in cells])

    # ------------------------------------------------------------------ static queries
    def type_sets(self, pool: Pool) -> list[ServerSet]:
        """The servers of ``pool``, one :class:`ServerSet` per GPU type (first-seen order)."""
        return list(self._type_sets[pool])

    def pool_set(self, pool: Pool) -> ServerSet:
        """Every server of ``pool`` as one :class:`ServerSet`. Cached."""
        return self._all_sets[pool]

    def server_set(self, ids: Iterable[int], free: "FreeMap | None" = None) -> ServerSet:
        """``ids`` (no repeats) as a :class:`ServerSet`, ascending. It names its cells when it
        holds every server of them, or when every other server of them has no free GPU in
        ``free`` (checked); the set is then valid for placements on that map only.
        O(len(ids)), mostly at C speed."""
        ids = sorted(ids)
        cell_of = self.cell_of
        cells = sorted(set(map(cell_of.__getitem__, ids)))
        if len(ids) == sum(len(self.cells[c].ids) for c in cells):  # whole cells
            return ServerSet(ids, cells)
        if free is not None and free.topology is self:
            if len(cells) == 1:
                parts = {cells[0]: ids}
            else:
                parts = {c: [] for c in cells}
                for sid in ids:
                    parts[cell_of[sid]].append(sid)
            if all(free.count_with_free(part) == free.servers_with_free(c) for c, part in parts.items()):
                return ServerSet(ids, cells)
        return ServerSet(ids, None)

    def sets_by_type(self, ids: Sequence[int], free: "FreeMap | None" = None) -> list[ServerSet]:
        """``ids`` grouped by GPU type in first-seen order, each a :class:`ServerSet` (as
        :meth:`server_set`; a group not in ascending order as given, without cells)."""
        groups: dict[str, list[int]] = {}
        types = self.gpu_types
        for sid in ids:
            groups.setdefault(types[sid], []).append(sid)
        return [self.server_set(g, free) if _ascending(g) else ServerSet(g, None) for g in groups.values()]

    # ------------------------------------------------------------------ dynamic queries
    def loaned(self) -> list[int]:
        """Loaned inference server ids, ascending (the engine's list: do not change it)."""
        return self._loaned

    def loaned_set(self, free: "FreeMap | None" = None) -> ServerSet:
        """``server_set(self.loaned(), free)``, the same answer without the walk over the loaned
        servers: their set is kept while the loans stay the same (``loan_version``), and the
        check against ``free`` reads only the servers ``free`` changed (the others outside the
        set are inference servers not on loan: no free GPU in the index)."""
        entry = self._loaned_cache
        if entry is None or entry[0] != self.loan_version:
            ids = self._loaned
            cells = sorted(set(map(self.cell_of.__getitem__, ids)))
            whole = len(ids) == sum(len(self.cells[c].ids) for c in cells)
            entry = self._loaned_cache = (self.loan_version, ServerSet(ids, cells), ServerSet(ids, None), whole,
                                          frozenset(ids), frozenset(cells))
        _, named, bare, whole, members, cells = entry
        if whole:
            return named
        if free is None or free.topology is not self:
            return bare
        cell_of = self.cell_of
        for sid, value in free.changed():
            if value and sid not in members and cell_of[sid] in cells:
                return bare
        return named

    def loaned_members(self) -> frozenset[int]:
        """The loaned inference server ids as a frozenset (kept while the loans stay the same)."""
        self.loaned_set()
        return self._loaned_cache[4]  # type: ignore[index]

    def not_loaned(self) -> list[int]:
        """Inference server ids not on loan, ascending (the engine's list: do not change it)."""
        return self._idle

    def free_total(self, cells: Iterable[int]) -> int:
        """Free GPUs in ``cells``."""
        totals = self._totals
        return sum(totals[c] for c in cells)

    def free_histogram(self, pool: Pool) -> list[int]:
        """Servers of ``pool`` that training may use, by free GPUs: entry ``f`` counts those with
        ``f`` free (length: the pool's largest server + 1). O(cells x GPUs per server)."""
        size = max((c.gpus for c in self.cells if c.pool is pool), default=0)
        out = [0] * (size + 1)
        for c in self.cells:
            if c.pool is pool:
                buckets = self._buckets[c.index]
                busy = self._usable[c.index]
                for f in range(1, c.gpus + 1):
                    k = len(buckets[f])
                    out[f] += k
                    busy -= k
                out[0] += busy
        return out

    def free_map(self) -> "FreeMap":
        """An O(1) working copy of the free GPUs per server id (see :class:`FreeMap`)."""
        return FreeMap(self)

    # ------------------------------------------------------------------ engine updates
    def _set(self, sid: int, value: int) -> None:
        """Server ``sid`` has ``value`` free GPUs now."""
        free = self.free
        old = free[sid]
        if old == value:
            return
        c = self.cell_of[sid]
        buckets = self._buckets[c]
        if old:
            b = buckets[old]
            del b[bisect_left(b, sid)]
        if value:
            insort(buckets[value], sid)
        self._totals[c] += value - old
        free[sid] = value
        self.version += 1

    def free_index(self) -> tuple[list[list[list[int]]], list[int]]:
        """(per cell: server ids by free GPUs, ascending; per cell: free GPUs in total), the
        topology's own lists that a :class:`FreeMap` starts from: read only."""
        return self._buckets, self._totals

    def add_free(self, allocation: dict[int, int], sign: int) -> None:
        """Servers of ``allocation`` ({server id: GPUs}) gain (``sign`` 1) or lose (-1) its GPUs.
        The engine's bookkeeping (:mod:`lyra_gym.sim.occupancy`) alone: a scheduler reads the
        topology and plans on a :class:`FreeMap`."""
        free, cell_of, all_buckets, totals = self.free, self.cell_of, self._buckets, self._totals
        for sid, gpus in allocation.items():
            old = free[sid]
            value = old + sign * gpus
            c = cell_of[sid]
            buckets = all_buckets[c]
            if old:
                b = buckets[old]
                del b[bisect_left(b, sid)]
            if value:
                insort(buckets[value], sid)
            totals[c] += value - old
            free[sid] = value
        self.version += 1

    def mark_loaned(self, sid: int) -> None:
        """Inference server ``sid`` goes on loan (all its GPUs free). The engine's alone, as :meth:`add_free`."""
        del self._idle[bisect_left(self._idle, sid)]
        insort(self._loaned, sid)
        self._usable[self.cell_of[sid]] += 1
        self._set(sid, self.capacity[sid])
        self.version += 1
        self.loan_version += 1

    def mark_returned(self, sid: int) -> None:
        """Inference server ``sid`` goes back to inference (holds no job). The engine's alone, as :meth:`add_free`."""
        del self._loaned[bisect_left(self._loaned, sid)]
        insort(self._idle, sid)
        self._usable[self.cell_of[sid]] -= 1
        self._set(sid, 0)
        self.version += 1
        self.loan_version += 1

    def _check(self, servers: Sequence[Server]) -> None:
        """Raise AssertionError unless the index equals a recomputation from ``servers`` (tests)."""
        fresh = Topology(servers)
        assert self.free == fresh.free, "free GPUs per server"
        assert self._buckets == fresh._buckets, "buckets"
        assert self._totals == fresh._totals, "totals"
        assert self._usable == fresh._usable, "usable servers per cell"
        assert self._loaned == fresh._loaned and self._idle == fresh._idle, "loaned servers"


def _ascending(ids: Sequence[int]) -> bool:
    return all(a < b for a, b in zip(ids, ids[1:]))


class FreeMap:
    """Free GPUs per server id, indexed as :class:`Topology`: a scheduler's working copy.

    Made in O(1) from the engine's index (``ClusterView.free_map()``); reads and
    writes by server id as a list (``free[sid]``, ``free[sid] -= 2``), and each
    write keeps the buckets of its cell in order (copied from the engine's on
    first write). Valid during the decision it was made in: once the engine
    changes, using it raises RuntimeError. ``len`` and iteration give every
    server id's value, O(servers); ``list(free_map)`` is a plain copy.
    """

    __slots__ = ("_topo", "_version", "_base", "_over", "_buckets", "_owned", "_totals")

    def __init__(self, topology: Topology) -> None:
        self._topo = topology
        self._version = topology.version
        self._base = topology.free
        self._over: dict[int, int] = {}  # server id -> free GPUs, where changed
        # the engine's own lists until the first write (then: per cell, shared until written)
        self._buckets: list[list[list[int]]]
        self._buckets, self._totals = topology.free_index()
        self._owned: list[int] | None = None  # per cell: bit f set = bucket f is our own copy

    @property
    def topology(self) -> Topology:
        return self._topo

    def _fresh(self) -> None:
        if self._topo.version != self._version:
            raise RuntimeError("FreeMap used after the engine's state changed: make a new one at each decision")

    # ------------------------------------------------------------------ as a list
    def __getitem__(self, sid: int) -> int:
        v = self._over.get(sid)
        return self._base[sid] if v is None else v

    def __setitem__(self, sid: int, value: int) -> None:
        self._fresh()
        over = self._over
        old = over.get(sid)
        if old is None:
            old = self._base[sid]
        if old == value:
            return
        if value < 0:
            raise ValueError(f"server {sid}: {value} free GPUs")
        self._move(((sid, old, value),))

    def take(self, placement: dict[int, int]) -> None:
        """Subtract a placement ({server id: GPUs}) from the free GPUs (all of it, or nothing:
        ValueError if a server has too few)."""
        if self._topo.version != self._version:
            self._fresh()
        over, base = self._over, self._base
        moves = []
        for sid, gpus in placement.items():
            old = over.get(sid)
            if old is None:
                old = base[sid]
            value = old - gpus
            if value < 0:
                raise ValueError(f"server {sid}: {value} free GPUs")
            if gpus:
                moves.append((sid, old, value))
        self._move(moves)

    def _move(self, moves: Iterable[tuple[int, int, int]]) -> None:
        """For each ``(sid, old, value)``, move server ``sid`` from bucket ``old`` to bucket
        ``value`` (free GPUs), copying the lists of cells and totals at the first write, and a
        cell's bucket list and each bucket at its first write (copy on write)."""
        if self._owned is None:  # the cells' buckets stay shared until written
            self._buckets = list(self._buckets)
            self._totals = list(self._totals)
            self._owned = [0] * len(self._totals)
        cell_of, all_buckets, all_owned = self._topo.cell_of, self._buckets, self._owned
        totals, over = self._totals, self._over
        for sid, old, value in moves:
            c = cell_of[sid]
            buckets = all_buckets[c]
            owned = all_owned[c]
            if not owned:
                buckets = all_buckets[c] = list(buckets)
            if old:
                if not owned >> old & 1:
                    buckets[old] = list(buckets[old])
                    owned |= 1 << old
                b = buckets[old]
                del b[bisect_left(b, sid)]
            if value:
                if value >= len(buckets):
                    raise ValueError(f"server {sid}: {value} free GPUs, it has {len(buckets) - 1}")
                if not owned >> value & 1:
                    buckets[value] = list(buckets[value])
                    owned |= 1 << value
                insort(buckets[value], sid)
            all_owned[c] = owned | 1  # bit 0: the per-cell bucket list itself is ours
            totals[c] += value - old
            over[sid] = value

    def __len__(self) -> int:
        return len(self._base)

    def __iter__(self) -> Iterator[int]:
        over = self._over
        if not over:
            return iter(list(self._base))
        return iter(self.tolist())

    def changed(self) -> Iterable[tuple[int, int]]:
        """(server id, free GPUs) where this map was written (it may equal the topology's value
        again); O(1) to make."""
        return self._over.items()

    def tolist(self) -> list[int]:
        """Free GPUs per server id, a plain list. O(servers)."""
        out = list(self._base)
        for sid, v in self._over.items():
            out[sid] = v
        return out

    def copy(self) -> "FreeMap":
        """An independent copy (both share buckets until either writes). O(cells)."""
        other = FreeMap.__new__(FreeMap)
        # a FreeMap's own fields, set on the new one in its class (no __init__: it reads the topology)
        other._topo, other._version, other._base = self._topo, self._version, self._base  # noqa: SLF001
        other._over = dict(self._over)  # noqa: SLF001
        # every list is now shared by both maps: each copies again before its next write
        other._buckets, other._totals, other._owned = self._buckets, self._totals, None  # noqa: SLF001
        self._owned = None
        return other

    # ------------------------------------------------------------------ queries over cells
    def totals(self) -> list[int]:
        """Free GPUs per cell (a copy)."""
        return list(self._totals)

    def total(self, cells: Sequence[int]) -> int:
        """Free GPUs in ``cells``."""
        totals = self._totals
        if len(cells) == 1:
            return totals[cells[0]]
        return sum(totals[c] for c in cells)

    def count_with_free(self, ids: Sequence[int]) -> int:
        """How many of ``ids`` (no repeats) have a free GPU. O(len(ids)) at C speed."""
        base, over = self._base, self._over
        n = sum(map(bool, map(base.__getitem__, ids)))
        if over:
            members = set(ids)
            for sid, value in over.items():
                if sid in members:
                    n += bool(value) - bool(base[sid])
        return n

    def servers_with_free(self, cell: int) -> int:
        """Servers of ``cell`` with at least one free GPU."""
        return sum(len(b) for b in self._buckets[cell])

    def smallest_fit(self, need: int, cells: Sequence[int], below: int | None = None) -> int | None:
        """The server with the fewest free GPUs ``f`` with ``need <= f`` (``< below`` if given) in
        ``cells``, ties: the lowest id; None if none. O(cells x GPUs per server)."""
        if self._topo.version != self._version:
            self._fresh()
        best_f, best = None, -1
        for c in cells:
            buckets = self._buckets[c]
            top = len(buckets) if below is None else min(below, len(buckets))
            for f in range(max(need, 1), top):
                b = buckets[f]
                if b:
                    if best_f is None or f < best_f or (f == best_f and b[0] < best):
                        best_f, best = f, b[0]
                    break
        return None if best_f is None else best

    def descending(self, cells: Sequence[int]) -> Iterator[tuple[int, int]]:
        """``(server id, free GPUs)`` of the servers of ``cells`` with free GPUs, most free first,
        ties: the lowest id. Lazy: O(cells x GPUs per server) plus the servers read."""
        self._fresh()
        if len(cells) == 1:
            buckets = self._buckets[cells[0]]
            for f in range(len(buckets) - 1, 0, -1):
                for sid in buckets[f]:
                    yield sid, f
            return
        top = max(len(self._buckets[c]) for c in cells) - 1
        for f in range(top, 0, -1):
            lists = [self._buckets[c][f] for c in cells if f < len(self._buckets[c]) and self._buckets[c][f]]
            for sid in (lists[0] if len(lists) == 1 else heapq.merge(*lists)):
                yield sid, f

    def wholly_free(self, cells: Sequence[int]) -> Iterator[int]:
        """Ids of the servers of ``cells`` with every GPU free, ascending. Lazy."""
        self._fresh()
        lists = [self._buckets[c][-1] for c in cells if self._buckets[c][-1]]
        if not lists:
            return iter(())
        return iter(lists[0]) if len(lists) == 1 else heapq.merge(*lists)

    def wholly_free_gpus(self, cells: Sequence[int]) -> int:
        """GPUs on the servers of ``cells`` with every GPU free."""
        topo = self._topo
        return sum(len(self._buckets[c][-1]) * topo.cells[c].gpus for c in cells)

    def __repr__(self) -> str:
        return f"FreeMap({self.tolist()})"
