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
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush
from typing import Mapping

from lyra_gym.model.scaling import PROGRESS_BINS, progress_bin
from lyra_gym.sim.view import ClusterView, JobView

MARGIN = 1e-9  # of a job's total work (samples): the bound's allowance for rounding in the engine's sums
Item = tuple[float, int, JobView]  # (line key or a lower bound on it, job index, job)
# job id -> (allocation, engine rate, time s, remaining work, reference rate, least remaining work
# that is surely in the same part, margin, the job's view) as found when its key was last computed
Known = tuple[Mapping[int, int], float, float, float, float, float, float, JobView]


class MovingLine:
    """What the line keeps across decisions (part of ``LyraMemory``): each move-back
    candidate's state when its key was last computed, and reference rates per progress part."""

    def __init__(self) -> None:
        self.known: dict[str, Known] = {}
        self.reference: tuple[str, int] | None = None  # the reference GPU type and GPUs per server
        self._rates: dict[tuple[str, int], float] = {}  # (job id, progress part) -> reference goodput

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
            part = progress_bin(total - remaining, total)
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


class LazyLine:
    """One decision's move-back candidates in line order, keys computed on demand.

    :param exact: candidates whose keys are known now (``MovingLine.keys``).
    :param bounds: (lower bound on the key, index, job) of the others.
    """

    def __init__(self, kept: MovingLine, view: ClusterView, exact: list[Item], bounds: list[Item]) -> None:
        heapify(exact)
        heapify(bounds)
        self.kept, self.view, self.exact, self.bounds = kept, view, exact, bounds

    def __bool__(self) -> bool:
        return bool(self.exact or self.bounds)

    def pop_before(self, limit: Item | None) -> Item | None:
        """The first candidate in line when it comes before ``limit`` (a queued job's (key, index,
        job); None: the end of the line), taken out; else None. Indices are unique: tuples
        compare by (key, index), never by the views."""
        exact, bounds = self.exact, self.bounds
        while True:
            best = exact[0] if exact else None
            cap = best if best is not None and (limit is None or best < limit) else limit
            if bounds and (cap is None or bounds[0][0] <= cap[0]):  # may come before cap: its key now
                due = []
                while bounds and (cap is None or bounds[0][0] <= cap[0]):
                    due.append(heappop(bounds)[2])
                for item in self.kept.keys(self.view, due):
                    heappush(exact, item)
                continue
            return heappop(exact) if best is not None and cap is best else None


__all__ = ["MARGIN", "LazyLine", "MovingLine"]
