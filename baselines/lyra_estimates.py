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
  of its workers packed onto that type's servers (``LyraScheduler._time_on``).
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field

@dataclass
class ReleaseTimeline:
    """Expected releases of training GPUs of one type: sorted finish times and GPUs freed then."""

    now: float
    times: list[float] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    cumulative: list[int] = field(default_factory=list)

    @classmethod
    def build(cls, now: float, releases: list[tuple[float, int]]) -> "ReleaseTimeline":
        """``releases``: (expected finish time s, GPUs freed) per running job."""
        releases.sort()
        timeline = cls(now, [t for t, _ in releases], [g for _, g in releases])
        timeline.cumulative = list(itertools.accumulate(timeline.gpus))
        return timeline

    def add(self, time: float, gpus: int) -> None:
        """One more release (a job placed in this decision)."""
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

    def add(self, gpu_type: str, time: float, gpus: int) -> None:
        times = self._times.setdefault(gpu_type, [])
        i = bisect.bisect_right(times, time)
        times.insert(i, time)
        self._gpus.setdefault(gpu_type, []).insert(i, gpus)

    def remove(self, gpu_type: str, time: float, gpus: int) -> None:
        times, counts = self._times[gpu_type], self._gpus[gpu_type]
        i = bisect.bisect_left(times, time)
        while counts[i] != gpus:  # among equal times, the entry with these GPUs
            i += 1
        del times[i], counts[i]

    def timeline(self, now: float, gpu_type: str, placed: list[tuple[float, int]]) -> ReleaseTimeline:
        """The timeline of ``gpu_type`` now, with ``placed`` (finish, GPUs) releases added."""
        timeline = ReleaseTimeline(now, list(self._times.get(gpu_type, ())), list(self._gpus.get(gpu_type, ())))
        for time, gpus in placed:
            i = bisect.bisect_right(timeline.times, time)
            timeline.times.insert(i, time)
            timeline.gpus.insert(i, gpus)
        timeline.cumulative = list(itertools.accumulate(timeline.gpus))
        return timeline
