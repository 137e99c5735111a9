"""The running allocations of the current plans handed out, read only if and when a scheduler does.

``ClusterView.current_plan()`` gets a :class:`~lyra_gym.sim.plan.PendingAllocations` instead of a
copy of the engine's running allocations. Every later change of those allocations is journalled
(job id, its allocation before, its start sequence), so a pending plan read after the engine
moved on still gets the allocations of its own instant (:meth:`AllocationJournal.snapshot`).

The same journal is a change feed (:class:`ChangeFeed`, ``ClusterView.change_feed()``): which jobs
started, stopped, finished or changed allocation since the feed was last read, so a scheduler can
keep its own state of the running jobs in O(changes) per decision instead of O(running jobs).
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


Change = tuple["Mapping[int, int] | None", int]  # allocation now (None: not running), start seq now


class ChangeFeed:
    """The jobs whose running allocation changed since this feed was last read (made by
    :meth:`AllocationJournal.follow`; the journal keeps its entries until the feed read them, at
    most ``MAX_AGE`` of them: a feed that falls further behind is ``lost``)."""

    __slots__ = ("journal", "mark", "lost", "__weakref__")

    def __init__(self, journal: "AllocationJournal") -> None:
        self.journal = journal
        self.mark = journal.start + len(journal.entries)  # the first change not read yet
        self.lost = False

    def changed(self) -> dict[str, Change] | None:
        """Job id -> (its allocation now, None when not running; its start sequence now: the order
        of the running allocations) for every job started, stopped, finished or given another
        allocation since the last call, first changed first (a job changed back is in it too).
        None when changes were dropped unread (``lost``): then rebuild from the running
        allocations. Marks everything read."""
        journal = self.journal
        entries = journal.entries
        end = journal.start + len(entries)
        if self.lost:
            self.lost, self.mark = False, end
            return None
        first = self.mark - journal.start
        self.mark = end
        if first >= len(entries):
            return {}
        running, by_id = journal.running, journal.jobs_by_id
        return {key: (running.get(key), by_id[key].start_seq)
                for key in dict.fromkeys([entry[0] for entry in entries[first:]])}

    def running(self) -> dict[str, Change]:
        """Job id -> (allocation, start sequence) of every running job now, in start order (to
        build a state from; O(running jobs)). Marks every change so far read."""
        journal = self.journal
        self.lost, self.mark = False, journal.start + len(journal.entries)
        by_id = journal.jobs_by_id
        return {key: (alloc, by_id[key].start_seq) for key, alloc in journal.running.items()}


class AllocationJournal:
    """The changes of ``running`` (job id -> allocation, start order; the engine's own dict,
    changed in place) since the oldest live pending plan; entry i is change ``start + i``."""

    def __init__(self, running: Mapping[str, Mapping[int, int]], jobs_by_id: Mapping[str, Job]) -> None:
        self.running = running
        self.jobs_by_id = jobs_by_id
        self.entries: list[Entry] = []  # the engine appends to this list directly
        self.start = 0
        self.pending: list[weakref.ref] = []  # current plans handed out (live ones: not read yet)
        self.feeds: list[weakref.ref] = []  # change feeds (live ones: see ChangeFeed)
        self.trim_at = TRIM_ENTRIES  # entries above which to trim (more when feeds keep them)

    def __getstate__(self) -> dict:  # pickling (an env mid-episode): the live pending plans by value
        state = dict(self.__dict__)
        state["pending"] = [p for p in (ref() for ref in self.pending) if p is not None]
        state["feeds"] = [f for f in (ref() for ref in self.feeds) if f is not None]
        return state

    def __setstate__(self, state: dict) -> None:
        state["pending"] = [weakref.ref(p) for p in state["pending"]]
        state["feeds"] = [weakref.ref(f) for f in state.get("feeds", ())]
        state.setdefault("trim_at", TRIM_ENTRIES)
        self.__dict__.update(state)

    def follow(self) -> ChangeFeed:
        """A new :class:`ChangeFeed` of the changes from now on."""
        feed = ChangeFeed(self)
        self.feeds.append(weakref.ref(feed))
        return feed

    def pending_allocations(self, token: object) -> PendingAllocations:
        """The running allocations now (state ``token``), to be copied only if read."""
        if len(self.entries) > self.trim_at or len(self.pending) > TRIM_PENDING:
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
        """Drop the entries no live pending plan or change feed needs; a pending plan kept alive
        for long gets a copy of its allocations instead, a feed that far behind is ``lost`` (so the
        journal stays short)."""
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
        feeds = [f for f in (ref() for ref in self.feeds) if f is not None]
        for feed in feeds:
            if end - feed.mark > MAX_AGE:
                feed.lost, feed.mark = True, end
        self.feeds = [weakref.ref(f) for f in feeds]
        keep = min([*(p.mark for p in alive if p.base is None), *(f.mark for f in feeds)], default=end)
        if keep > self.start:
            del self.entries[:keep - self.start]
            self.start = keep
        self.trim_at = max(TRIM_ENTRIES, 2 * len(self.entries))  # feeds may keep many: trim again later
