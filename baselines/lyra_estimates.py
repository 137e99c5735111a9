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
