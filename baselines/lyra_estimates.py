"""Time estimates behind Lyra's speed-aware decisions: when training GPUs free up, and how
long a job takes on each GPU type.

Our reading of the paper (EuroSys 2023, section on capacity loaning): loaned
inference GPUs are slower (T4 against V100), so a job goes there only when it
is expected to *finish sooner* than by waiting for training GPUs. "Waiting"
is estimated from what the cluster shows, not predicted:

- :class:`ReleaseTimeline` lists, per training GPU type, when running jobs are
  expected to finish (their current rate, the rest of any overhead) and how many
  GPUs each then frees. The wait for ``n`` GPUs is the time until the GPUs
  free now plus the GPUs released reach ``n`` plus the base demands of the jobs
  ahead in the queue that wait for the same type. Assumptions: no further
  arrivals jump ahead; server fragmentation is ignored; an elastic job's
  flexible workers count as free (phase 1 may displace them).
- A job's time on a type is its remaining work over the profile's throughput
  of its workers packed onto that type's servers (``LyraRates.time_on``).
- :class:`ReleaseTracker` keeps a :class:`ReleaseBook` in step with the running jobs'
  allocations, one entry per job, changed only when its allocation object changes.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import is_not, itemgetter
from typing import Callable, Iterable, Mapping

from lyra_gym.sim.journal import ChangeFeed
from lyra_gym.sim.plan import TrackedAllocations
from lyra_gym.sim.view import ClusterView, JobView

_NOT_COUNTED = repeat((None,))  # counted.get's default for a job without an entry
_first = itemgetter(0)


@dataclass
class ReleaseTimeline:
    """Expected releases of training GPUs of one type: sorted finish times and GPUs freed then."""

    now: float
    times: list[float] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    cumulative: list[int] = field(default_factory=list)
    shared: bool = False  # the lists are a ReleaseBook's, shared with other timelines: copied before a change

    @classmethod
    def build(cls, now: float, releases: list[tuple[float, int]]) -> "ReleaseTimeline":
        """``releases``: (expected finish time s, GPUs freed) per running job."""
        releases.sort()
        timeline = cls(now, [t for t, _ in releases], [g for _, g in releases])
        timeline.cumulative = list(itertools.accumulate(timeline.gpus))
        return timeline

    def add(self, time: float, gpus: int) -> None:
        """One more release (a job placed in this decision)."""
        if self.shared:
            self.times, self.gpus, self.cumulative, self.shared = list(self.times), list(self.gpus), list(
                self.cumulative), False
        i = bisect.bisect_right(self.times, time)
        self.times.insert(i, time)
        self.gpus.insert(i, gpus)
        self.cumulative[i:] = list(itertools.accumulate(self.gpus[i:], initial=self.cumulative[i - 1] if i else 0))[1:]

    def wait_for(self, deficit: int) -> float:
        """Seconds until ``deficit`` more GPUs than are available now have been released (0 if none
        are missing; inf if the running jobs never release that many)."""
        if deficit <= 0:
            return 0.0
        i = bisect.bisect_left(self.cumulative, deficit)
        if i >= len(self.times):
            return math.inf
        return max(0.0, self.times[i] - self.now)


class ReleaseBook:
    """The running jobs' expected releases per training GPU type, kept across decisions: each
    job's (finish time s, GPUs) is added once and removed when it stops counting, so a decision's
    :class:`ReleaseTimeline` is a copy of a sorted list, not a sort of every running job.
    Entries are ordered by finish time; the order of equal times does not change any
    :meth:`ReleaseTimeline.wait_for` answer (cumulative sums at the ends of a run of equal
    times, and the time inside it, are the same for every order)."""

    def __init__(self) -> None:
        self._times: dict[str, list[float]] = {}
        self._gpus: dict[str, list[int]] = {}
        self._changes: dict[str, int] = {}  # GPU type -> entries added or removed so far
        # GPU type -> (changes then, times, GPUs, cumulative GPUs): the lists of the last timeline
        # without placements, shared by the next ones while no entry is added or removed
        self._shared: dict[str, tuple[int, list[float], list[int], list[int]]] = {}

    def add(self, gpu_type: str, time: float, gpus: int) -> None:
        self._changes[gpu_type] = self._changes.get(gpu_type, 0) + 1
        times = self._times.setdefault(gpu_type, [])
        i = bisect.bisect_right(times, time)
        times.insert(i, time)
        self._gpus.setdefault(gpu_type, []).insert(i, gpus)

    def remove(self, gpu_type: str, time: float, gpus: int) -> None:
        self._changes[gpu_type] += 1
        times, counts = self._times[gpu_type], self._gpus[gpu_type]
        i = bisect.bisect_left(times, time)
        while counts[i] != gpus:  # among equal times, the entry with these GPUs
            i += 1
        del times[i], counts[i]

    def timeline(self, now: float, gpu_type: str, placed: list[tuple[float, int]]) -> ReleaseTimeline:
        """The timeline of ``gpu_type`` now, with ``placed`` (finish, GPUs) releases added. Without
        ``placed``, the lists are shared with the last such timeline when no entry was added or
        removed since (the timeline copies them before its first change)."""
        if not placed:
            changes = self._changes.get(gpu_type, 0)
            shared = self._shared.get(gpu_type)
            if shared is None or shared[0] != changes:
                counts = list(self._gpus.get(gpu_type, ()))
                shared = self._shared[gpu_type] = (changes, list(self._times.get(gpu_type, ())), counts,
                                                   list(itertools.accumulate(counts)))
            return ReleaseTimeline(now, shared[1], shared[2], shared[3], True)
        timeline = ReleaseTimeline(now, list(self._times.get(gpu_type, ())), list(self._gpus.get(gpu_type, ())))
        for time, gpus in placed:
            i = bisect.bisect_right(timeline.times, time)
            timeline.times.insert(i, time)
            timeline.gpus.insert(i, gpus)
        timeline.cumulative = list(itertools.accumulate(timeline.gpus))
        return timeline


class ReleaseTracker:
    """The running jobs' expected releases of training GPUs, kept in a :class:`ReleaseBook` across
    decisions.

    :param views: job id -> its view (shared with the scheduler's memory; views not there are
        asked of the decision's view).
    :param cap: the base GPUs of a job whose flexible workers count as available already
        (an elastic job under Lyra's scaling), or None when no job has flexible workers.

    ``gpu_types`` (per server id) and ``training_ids`` are set before the first timeline.

    The book follows the allocations a timeline is asked with: each job's entry is its allocation's
    (under oracle cached per allocation object, see below), none for a job without one. Given a
    current plan's allocations (a ``TrackedAllocations``), only the jobs that may have changed since
    the last timeline are visited: those the engine's change feed (``ClusterView.change_feed``)
    names, those the last and this plan edited, and those without an entry; any other allocations,
    a new view or a lost feed visit every job (:meth:`_sync_all`).
    The equivalence harness (``tests/baselines/test_reference_equivalence.py``, against ``lyra-reference``)
    checks the plans it leads to at every decision.

    Under ``oracle`` an entry is the finish at the job's rate when its allocation was set; the
    engine changes that rate again only at a progress-part boundary (or, under the adaptive rule,
    a batch change), and the entry is not redone then (an approximation the golden results pin).
    Under a knowledge mode the believed finish moves with the belief, so every entry is computed
    afresh at each timeline (:meth:`_sync_believed`; the harness's ``estimate`` and ``history`` cases).
    """

    def __init__(self, views: dict[str, JobView], cap: Callable[[JobView], int] | None) -> None:
        self.views, self.cap = views, cap
        self.gpu_types: list[str] = []
        self.training_ids: frozenset[int] = frozenset()
        self._releases: dict[str, tuple[Mapping[int, int], str, float, int]] = {}  # see _entry
        self._counted: dict[str, tuple[Mapping[int, int], str, float, int]] = {}  # entries in _book now
        self._book = ReleaseBook()
        self._feed: ChangeFeed | None = None  # the engine's changes since the last timeline
        self._view: ClusterView | None = None  # the view whose engine the feed follows
        self._uncounted: set[str] = set()  # jobs of the last allocations without an entry
        self._edited: tuple[str, ...] = ()  # jobs the last plan edited (its allocations were synced)

    def timeline(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]], gpu_type: str,
                 placed: list[tuple[float, int, str]]) -> ReleaseTimeline:
        """When training GPUs of ``gpu_type`` are expected to free up: every running job's expected
        finish and the base GPUs it then frees there (under oracle cached per allocation object), plus the jobs
        placed in this decision (``placed``: finish, GPUs, type). A job placed or changed by this
        plan is left out."""
        self._sync(view, allocations)
        return self._book.timeline(view.now, gpu_type, [(t, g) for t, g, typ in placed if typ == gpu_type])

    def _sync(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]]) -> None:
        """Bring the book in step with ``allocations``."""
        if view.believed:
            self._sync_believed(view, allocations)
            return
        edits = allocations.touched if type(allocations) is TrackedAllocations else None
        feed = self._feed if self._view is view else None
        changes = feed.changed() if feed is not None and edits is not None else None
        if changes is None or edits is None:
            self._sync_all(view, allocations)
            self._view, self._feed = (view, feed or view.change_feed()) if edits is not None else (None, None)
            self._edited = tuple(edits or ())
            return
        dirty = dict.fromkeys(changes)
        dirty.update(dict.fromkeys(self._edited))
        dirty.update(dict.fromkeys(self._uncounted))
        dirty.update(edits)
        self._edited = tuple(edits)
        self._visit(view, allocations, dirty)

    def _sync_believed(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]]) -> None:
        """:meth:`_sync` under a knowledge mode: a job's expected finish moves while its allocation
        stays (its believed total changes: a history mean moves, an estimate the job outran grows),
        so every running job's entry is computed afresh, not kept per allocation object. (An entry
        of the same allocation keeps its GPU type and GPUs, functions of the allocation and the job's
        spec: only its finish is asked again.)"""
        counted, views = self._counted, self.views
        self._visit(view, allocations, set(counted).difference(allocations))  # stopped or finished
        for job_id, alloc in allocations.items():
            old = counted.get(job_id)
            if old is not None and old[0] is alloc:
                job = views.get(job_id) or view.job(job_id)
                finish = job.expected_finish
                if finish is not None and alloc is job.allocation:
                    if finish != old[2]:
                        self._recount(job_id, old, (alloc, old[1], finish, old[3]))
                    continue
            self._recount(job_id, old, self._compute(view, job_id, alloc))  # a new allocation, or none to count

    def _sync_all(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]]) -> None:
        """:meth:`_sync` visiting every job: those counted and not in ``allocations`` (stopped or
        finished), then those whose counted allocation is not theirs (new, changed, or without an
        entry), in start order, found by C-level maps over the running jobs."""
        counted = self._counted
        self._visit(view, allocations, set(counted).difference(allocations))
        keys, allocs = list(allocations), list(allocations.values())
        stale = list(map(is_not, map(_first, map(counted.get, keys, _NOT_COUNTED)), allocs))
        self._visit(view, allocations, compress(keys, stale))
        self._uncounted = set(allocations).difference(counted)

    def _visit(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]], job_ids: Iterable[str]) -> None:
        """Make the entry of each of ``job_ids`` that of its allocation in ``allocations`` (none
        when it has none, or when it is placed or changed by this plan)."""
        counted, uncounted = self._counted, self._uncounted
        for job_id in job_ids:
            alloc = allocations.get(job_id)
            old = counted.get(job_id)
            if old is not None and old[0] is alloc:
                continue
            entry = self._entry(view, job_id, alloc) if alloc is not None else None
            self._recount(job_id, old, entry)
            if entry is None and alloc is not None:
                uncounted.add(job_id)
            else:
                uncounted.discard(job_id)

    def _recount(self, job_id: str, old: tuple | None, entry: tuple | None) -> None:
        """Replace ``job_id``'s counted entry ``old`` with ``entry`` (None: none) in the book."""
        book, counted = self._book, self._counted
        if old is not None:
            del counted[job_id]
            if old[3]:
                book.remove(old[1], old[2], old[3])
        if entry is not None:
            counted[job_id] = entry
            if entry[3]:
                book.add(entry[1], entry[2], entry[3])

    def _entry(self, view: ClusterView, job_id: str, alloc: Mapping[int, int]
               ) -> tuple[Mapping[int, int], str, float, int] | None:
        """(allocation, GPU type, expected finish s, base training GPUs it frees) of a running job,
        cached per allocation object (the oracle path); None for a job placed or changed by this plan."""
        entry = self._releases.get(job_id)
        if entry is None or entry[0] is not alloc:
            entry = self._compute(view, job_id, alloc)
            if entry is None:
                return None
            self._releases[job_id] = entry
        return entry

    def _compute(self, view: ClusterView, job_id: str, alloc: Mapping[int, int]
                 ) -> tuple[Mapping[int, int], str, float, int] | None:
        """:meth:`_entry` now, uncached."""
        job = self.views.get(job_id) or view.job(job_id)
        finish = job.expected_finish
        if finish is None or alloc is not job.allocation:
            return None
        types, training = self.gpu_types, self.training_ids
        typ = types[next(iter(alloc))]
        held = sum(g for s, g in alloc.items() if s in training and types[s] == typ)
        if job.spec.elastic and self.cap is not None:
            held = min(held, self.cap(job))  # flexible workers count as available already
        return (alloc, typ, finish, held)
