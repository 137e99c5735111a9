"""The engine's event queue: a heap of timed entries, completions versioned by their job.

An entry is ``(time s, seq, kind, job index, job version)``; ``seq`` (one counter per queue)
orders entries of one instant by push order. A completion carries the version its job had
when it was pushed: once the job changed (``Job.version`` bumped) or stopped running, the
entry is stale and dropped wherever the queue is read (:meth:`EventQueue.live_top`).
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Sequence

from lyra_gym.model.jobs import Job, JobState

#: Entry kinds: a job's completion (or progress milestone), a reclaim deadline, the scheduler's tick.
COMPLETION, DEADLINE, TICK = 0, 1, 2

Entry = tuple[float, int, int, int, int]
_RUNNING = JobState.RUNNING


class EventQueue:
    """Timed events of one run; ``jobs`` (by index) tells which completions are still live.

    ``heap`` and ``seq`` are plain attributes: the engine's hot loop reads and pushes them inline.
    """

    __slots__ = ("heap", "seq", "jobs")

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.heap: list[Entry] = []
        self.seq = 0  # the seq of the last entry pushed
        self.jobs = jobs

    def push(self, t: float, kind: int, index: int = -1, version: int = 0) -> None:
        """Add an entry at time ``t`` s (``index``, ``version``: the job of a completion)."""
        self.seq += 1
        heappush(self.heap, (t, self.seq, kind, index, version))

    def live_top(self) -> Entry | None:
        """The earliest entry still due, or None; stale completions (of a job changed or
        stopped since) are dropped on the way."""
        heap, jobs = self.heap, self.jobs
        while heap:
            top = heap[0]
            if top[2] == COMPLETION:
                job = jobs[top[3]]
                if job.version != top[4] or job.state is not _RUNNING:
                    heappop(heap)
                    continue
            return top
        return None

    def pop(self) -> Entry:
        """Remove and return the earliest entry (live or not: call :meth:`live_top` first)."""
        return heappop(self.heap)

    def __len__(self) -> int:
        return len(self.heap)
