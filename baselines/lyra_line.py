"""The move-back candidates' places in Lyra's admission line, found lazily.

A job on loaned GPUs holds its place in the shortest-first line by its line key: seconds left at
its requested size on the reference GPU (``LyraRates.running_line``: remaining work over the
reference goodput of its progress part). The walk over the line (``lyra_admission.admit``)
usually ends after a few jobs, yet thousands of jobs may sit on loaned GPUs; so instead of
every key and a sort, each candidate gets a lower bound on its key from what was found when its
key was last computed, and its key is computed only when that bound could put it before the
next job of the line. The walk meets the same jobs in the same order as the sorted line.

The bound: while a job keeps its allocation and its engine rate ``r``, and stays in the same
progress part, its remaining work falls by at most ``r`` per second (the engine's rate changes
only with the allocation, a new batch, which needs ``scaling: adaptive``, or a new progress
part), and its key is remaining work over that part's reference rate. The bound subtracts a
margin (``MARGIN`` of the total work, far above the floating-point error of the engine's sums)
and holds only while it also proves the job is still in the part it was in.

Across decisions the candidates rest in one heap (``MovingLine.resting``) ordered by a bound
with no time in it: a level of remaining work ``W`` (at least the part's least remaining work,
and half the work the time-dependent bound leaves) over the part's reference rate. It holds
until the time the time-dependent bound would reach ``W`` (less one more margin): the expiry
heap wakes the job then. A job the engine's change feed names (started, stopped, resized), one
the last or this plan edited, and one without a kept state is visited at the next decision;
the walk wakes a resting job only when its bound could put it before the next job of the line,
so a decision costs O(changes + woken jobs), not O(jobs on loaned GPUs).
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from typing import Iterable, Mapping

from lyra_gym.model.scaling import PROGRESS_BINS
from lyra_gym.sim.journal import ChangeFeed
from lyra_gym.sim.view import ClusterView, JobView

MARGIN = 1e-9  # of a job's total work (samples): the bound's allowance for rounding in the engine's sums
Item = tuple[float, int, JobView]  # (line key or a lower bound on it, job index, job)
# job id -> (allocation, engine rate, time s, remaining work, reference rate, least remaining work
# that is surely in the same part, margin, the job's view) as found when its key was last computed
Known = tuple[Mapping[int, int], float, float, float, float, float, float, JobView]
# (bound on the key with no time in it, job index, job, time s the bound is proven until)
Resting = tuple[float, int, JobView, float]


class MovingLine:
    """What the line keeps across decisions (part of ``LyraMemory``): each move-back
    candidate's state when its key was last computed, and reference rates per progress part."""

    def __init__(self) -> None:
        self.known: dict[str, Known] = {}
        self.reference: tuple[str, int] | None = None  # the reference GPU type and GPUs per server
        self._rates: dict[tuple[str, int], float] = {}  # (job id, progress part) -> reference goodput
        self.resting: list[Resting] = []  # heap of resting candidates (stale items: not in resting_of)
        self.resting_of: dict[str, Resting] = {}  # job id -> its item in ``resting``
        self.expiry: list[tuple[float, int, Resting]] = []  # heap: (proven until s, index, item)
        self.working: list[JobView] = []  # the last decision's candidates taken out of rest (or never put there)
        self.visit: dict[str, None] = {}  # jobs to visit at the next decision (an ordered set)
        self.edited: Iterable[str] = ()  # the jobs the last plan edited (its allocations' ``touched``)
        self.feed: ChangeFeed | None = None  # the engine's changes since the last decision
        self.view: ClusterView | None = None  # the view whose engine the feed follows

    @staticmethod
    def usable(view: ClusterView, value_rate: str) -> bool:
        """The keys are remaining work over a reference goodput (``value_rate="goodput"``) fixed
        per progress part: not under the adaptive rule, whose batch moves as a job runs."""
        return value_rate == "goodput" and view.scaling != "adaptive"

    def keys(self, view: ClusterView, jobs: list[JobView]) -> list[Item]:
        """(key, index, job) of each of ``jobs``: ``LyraRates.running_line``'s values (the same
        division of the same numbers); each job's state is kept for its next bound."""
        reference = self.reference
        if reference is None:
            reference = self.reference = view.reference_server()
        rates, known, now, line = self._rates, self.known, view.now, []
        for job in jobs:
            workers = job.spec.num_gpus
            if workers < 1:
                line.append((job.remaining_time_at(workers), job.index, job))
                continue
            remaining, total = job.remaining_work, job.total_work
            part = job.progress_part_at(remaining)  # the rate's part: the engine's, in every mode
            key = (job.id, part)
            rate = rates.get(key)
            if rate is None:
                if len(rates) > 200_000:
                    rates.clear()  # parts of jobs long gone
                rate = rates[key] = view.goodput(job, workers, *reference)
            line.append((remaining / rate, job.index, job))
            if type(job) is JobView:  # the true remaining work (a knowledge mode's belief may jump)
                margin = total * MARGIN
                # least remaining work in this part is above total - total * (part + 1) / PROGRESS_BINS
                floor = 0.0 if part >= PROGRESS_BINS - 1 else total - total * (part + 1) / PROGRESS_BINS + margin
                known[job.id] = (job.allocation, job.rate, now, remaining, rate, floor, margin, job)
        return line

    def forget(self, job_id: str) -> None:
        """The job left the loaned servers (or stopped)."""
        self.known.pop(job_id, None)
        self.resting_of.pop(job_id, None)

    def drop(self) -> None:
        """Forget the resting candidates (the next :meth:`start` visits every job): after a
        decision that did not keep them (another walk, or no walk with candidates)."""
        self.view = self.feed = None

    def start(self, view: ClusterView, touched: Mapping[str, None] | None, on_loaned: Mapping[str, object]
              ) -> list[str]:
        """The jobs of ``on_loaned`` to visit at this decision (``touched``: the plan's edits so
        far, None when its allocations are not a current plan's); the others rest. Puts the last
        decision's candidates to rest (those not visited now). Every job, with the resting heap
        cleared, at the first decision, after :meth:`drop` or a lost feed, or without ``touched``."""
        feed = self.feed if self.view is view else None
        changes = feed.changed() if feed is not None and touched is not None else None
        if changes is None or touched is None:
            self.resting, self.expiry, self.resting_of, self.working, self.visit = [], [], {}, [], {}
            self.view, self.feed = (view, feed or view.change_feed()) if touched is not None else (None, None)
            self.edited = touched if touched is not None else ()
            return list(on_loaned)
        visit, resting_of, expiry, now = self.visit, self.resting_of, self.expiry, view.now
        self.visit = {}
        visit.update(dict.fromkeys(changes))
        visit.update(dict.fromkeys(self.edited))
        visit.update(touched)
        self.edited = touched
        while expiry and expiry[0][0] <= now:  # bounds no longer proven
            item = heappop(expiry)[2]
            if resting_of.get(item[2].id) is item:
                visit[item[2].id] = None
        for job in self.working:
            if job.id not in visit and job.id in on_loaned and not self._rest(job, now):
                visit[job.id] = None
        self.working = []
        for job_id in visit:
            resting_of.pop(job_id, None)
        if len(self.resting) > 2 * len(resting_of) + 1000:  # mostly stale items: rebuilt
            self.resting = list(resting_of.values())
            heapify(self.resting)
            self.expiry = [(item[3], item[1], item) for item in resting_of.values()]
            heapify(self.expiry)
        return [job_id for job_id in visit if job_id in on_loaned]

    def _rest(self, job: JobView, now: float) -> bool:
        """Put a candidate to rest with a bound with no time in it (lyra_line's docstring), proven
        until its expiry; False (not put) when its kept state proves none."""
        entry = self.known.get(job.id)
        if entry is None or job.rate != entry[1] or entry[0] is not job.allocation:
            return False
        margin = entry[6]
        work = entry[3] - entry[1] * (now - entry[2]) - margin  # the time-dependent bound's work now
        level = max(entry[5], 0.5 * work)
        if not work > level:
            return False
        # until then remaining work stays above level + margin: the time-dependent bound proves the part
        until = entry[2] + (entry[3] - 2.0 * margin - level) / entry[1]
        item = (level / entry[4], job.index, job, until)
        self.resting_of[job.id] = item
        heappush(self.resting, item)
        heappush(self.expiry, (until, job.index, item))
        return True


class LazyLine:
    """One decision's move-back candidates in line order, keys computed on demand.

    :param exact: candidates whose keys are known now (``MovingLine.keys``).
    :param bounds: (lower bound on the key, index, job) of the others visited now; the resting
        ones (``kept.resting``) are woken when due. Every candidate taken is in ``kept.working``.
    """

    def __init__(self, kept: MovingLine, view: ClusterView, exact: list[Item], bounds: list[Item]) -> None:
        heapify(exact)
        heapify(bounds)
        self.kept, self.view, self.exact, self.bounds = kept, view, exact, bounds

    def __bool__(self) -> bool:
        return bool(self.exact or self.bounds or self.kept.resting)

    def pop_before(self, limit: Item | None) -> Item | None:
        """The first candidate in line when it comes before ``limit`` (a queued job's (key, index,
        job); None: the end of the line), taken out; else None. Indices are unique: tuples
        compare by (key, index), never by the views."""
        exact, bounds, resting = self.exact, self.bounds, self.kept.resting
        while True:
            best = exact[0] if exact else None
            cap = best if best is not None and (limit is None or best < limit) else limit
            if resting and (cap is None or resting[0][0] <= cap[0]):
                self._wake(cap)
                continue
            if bounds and (cap is None or bounds[0][0] <= cap[0]):  # may come before cap: its key now
                due = []
                while bounds and (cap is None or bounds[0][0] <= cap[0]):
                    due.append(heappop(bounds)[2])
                for item in self.kept.keys(self.view, due):
                    heappush(exact, item)
                continue
            return heappop(exact) if best is not None and cap is best else None

    def _wake(self, cap: Item | None) -> None:
        """Take the resting candidates whose bound could put them before ``cap`` into this
        decision's line: with the time-dependent bound where their kept state proves one."""
        kept, bounds, now = self.kept, self.bounds, self.view.now
        resting, resting_of, known, working = kept.resting, kept.resting_of, kept.known, kept.working
        due = []
        while resting and (cap is None or resting[0][0] <= cap[0]):
            item = heappop(resting)
            job = item[2]
            if resting_of.get(job.id) is not item:
                continue  # stale
            del resting_of[job.id]
            working.append(job)
            entry = known[job.id]
            if job.rate == entry[1]:
                work = entry[3] - entry[1] * (now - entry[2]) - entry[6]
                if work >= entry[5]:
                    heappush(bounds, (work / entry[4], job.index, job))
                    continue
            due.append(job)
        for found in kept.keys(self.view, due):
            heappush(self.exact, found)


__all__ = ["MARGIN", "LazyLine", "MovingLine"]
