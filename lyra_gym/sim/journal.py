"""The running allocations of the current plans handed out, read only if and when a scheduler does.

``ClusterView.current_plan()`` gets a :class:`~lyra_gym.sim.plan.PendingAllocations` instead of a
copy of the engine's running allocations. Every later change of those allocations is journalled
(job id, its allocation before, its start sequence), so a pending plan read after the engine
moved on still gets the allocations of its own instant (:meth:`AllocationJournal.snapshot`).
"""

from __future__ import annotations

import heapq
import weakref
from typing import Mapping

from lyra_gym.model.jobs import Job
from lyra_gym.sim.plan import PendingAllocations

Entry = tuple[str, "Mapping[int, int] | None", int]  # job id, allocation before (None: not running), start seq

#: Trim when more entries or live pending plans than these; keep at most KEEP_ALIVE live ones,
#: none older than MAX_AGE changes (the others get a copy of their allocations).
TRIM_ENTRIES, TRIM_PENDING, KEEP_ALIVE, MAX_AGE = 64, 32, 16, 4096


class AllocationJournal:
    """The changes of ``running`` (job id -> allocation, start order; the engine's own dict,
    changed in place) since the oldest live pending plan; entry i is change ``start + i``."""

    def __init__(self, running: Mapping[str, Mapping[int, int]], jobs_by_id: Mapping[str, Job]) -> None:
        self.running = running
        self.jobs_by_id = jobs_by_id
        self.entries: list[Entry] = []  # the engine appends to this list directly
        self.start = 0
        self.pending: list[weakref.ref] = []  # current plans handed out (live ones: not read yet)

    def __getstate__(self) -> dict:  # pickling (an env mid-episode): the live pending plans by value
        state = dict(self.__dict__)
        state["pending"] = [p for p in (ref() for ref in self.pending) if p is not None]
        return state

    def __setstate__(self, state: dict) -> None:
        state["pending"] = [weakref.ref(p) for p in state["pending"]]
        self.__dict__.update(state)

    def pending_allocations(self, token: object) -> PendingAllocations:
        """The running allocations now (state ``token``), to be copied only if read."""
        if len(self.entries) > TRIM_ENTRIES or len(self.pending) > TRIM_PENDING:
            self.trim()
        pending = PendingAllocations(self.snapshot, token, self.start + len(self.entries))
        self.pending.append(weakref.ref(pending))
        return pending

    def snapshot(self, pending: PendingAllocations) -> Mapping[str, Mapping[int, int]]:
        """The running allocations as they were at ``pending.mark``, in start order."""
        current = self.running
        entries = self.entries
        first = pending.mark - self.start
        if first >= len(entries):
            return current
        before: dict[str, tuple[Mapping[int, int] | None, int]] = {}
        for i in range(first, len(entries)):
            key, old, seq = entries[i]
            if key not in before:
                before[key] = (old, seq)
        by_id = self.jobs_by_id
        kept = [(by_id[k].start_seq, k, a) for k, a in current.items() if k not in before]
        gone = sorted((seq, k, a) for k, (a, seq) in before.items() if a is not None)
        return {k: a for _, k, a in heapq.merge(kept, gone)}

    def trim(self) -> None:
        """Drop the entries no live pending plan needs; a pending plan kept alive for long gets
        a copy of its allocations instead (so the journal stays short)."""
        end = self.start + len(self.entries)
        alive = []
        for ref in self.pending:
            pending = ref()
            if pending is not None and pending.base is None:
                alive.append(pending)
        for i, pending in enumerate(alive):
            if end - pending.mark > MAX_AGE or i < len(alive) - KEEP_ALIVE:
                pending.base = dict(self.snapshot(pending))
        self.pending = [weakref.ref(p) for p in alive if p.base is None]
        keep = min((p.mark for p in alive if p.base is None), default=end)
        if keep > self.start:
            del self.entries[:keep - self.start]
            self.start = keep
