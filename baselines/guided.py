"""How a heuristic reads an agent's :class:`~lyra_gym.sim.scheduler.Guidance` (``decide_guided``
of ``pollux`` and ``tiresias``; ``lyra`` reads it in its own stages).

- :func:`preempt_jobs`: the ``preempt`` lever, applied first: the running jobs named are dropped
  from the plan and are not candidates in the same decision.
- :class:`Levels`: the job levels as tiers (higher first; level 0 holds a queued job out) and
  as weights ``2 ** (level - neutral)``.
- :class:`Classes`: Tiresias's priority classes, its queues shifted by the levels.

Every reader is built so that neutral guidance (every level neutral, nothing preempted) leaves
the heuristic's own decision bit for bit: ``Levels.active`` and ``Classes.tiered`` are then False.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Collection, Mapping

from lyra_gym.sim.scheduler import JOB_LEVELS, NEUTRAL_JOB_LEVEL

__all__ = ["Classes", "Levels", "preempt_jobs"]


def preempt_jobs(allocations: dict, job_ids: Collection[str]) -> frozenset[str]:
    """Stop the running jobs of ``job_ids``: drop them from ``allocations`` (a current plan's, which
    holds the running jobs); ids of jobs not running are ignored. Returns the ids stopped."""
    stopped = frozenset(job_id for job_id in job_ids if job_id in allocations)
    for job_id in sorted(stopped):  # sorted: a set's order varies with the hash seed
        del allocations[job_id]
    return stopped


class Levels:
    """An agent's job levels and the running jobs it preempted (``stopped``), as a heuristic's
    admission reads them.

    - ``tiered``: some level is not neutral; ``active``: tiered, or some job was stopped. When
      ``active`` is False the heuristic runs as without guidance.
    """

    def __init__(self, job_levels: Mapping[str, int], stopped: Collection[str] = ()) -> None:
        self.levels = job_levels
        self.stopped = stopped
        self.tiered = any(level != NEUTRAL_JOB_LEVEL for level in job_levels.values())
        self.active = self.tiered or bool(stopped)

    def level(self, job_id: str) -> int:
        """The job's level (neutral when the agent gave none)."""
        return self.levels.get(job_id, NEUTRAL_JOB_LEVEL)

    def admissible(self, job_id: str) -> bool:
        """May the job be (re)started in this decision? Not if held (level 0) or just preempted."""
        return job_id not in self.stopped and self.level(job_id) != 0

    def weight(self, job_id: str) -> float:
        """The job's weight for extra GPUs: ``2 ** (level - neutral)`` (0.5, 1, 2, 4 for levels 1-4)."""
        return 2.0 ** (self.level(job_id) - NEUTRAL_JOB_LEVEL)


NEUTRAL = Levels({})  # no guidance


class Classes:
    """Tiresias's priority classes in one decision (0 = served first): the job's queue, and with
    ``levels.tiered`` its level tier before it: ``class = (JOB_LEVELS - 1 - level) * queues + queue``,
    so a higher level is served (and preempts) before any lower one, queues in order within a
    level. Without levels the class is the queue.

    :param keys: job id -> ``(queue, when it entered it, trace index)`` (``TiresiasScheduler._keys``).
    :param queues: the number of queues.
    """

    def __init__(self, keys: Mapping[str, tuple], queues: int, levels: Levels) -> None:
        self.keys, self.queues, self.levels = keys, queues, levels
        self.tiered = levels.tiered
        self.count = queues * JOB_LEVELS if self.tiered else queues  # classes in all
        # the orders, as plain functions where there are no levels (the heuristic's own, fast)
        self.order: Callable[[Any], Any] = self._tiered_order if self.tiered else itemgetter(0)
        self.running_order: Callable[[str], Any] = self._tiered_running if self.tiered else keys.__getitem__

    def of(self, job_id: str) -> int:
        """The job's class (its key must be known)."""
        queue = self.keys[job_id][0]
        if not self.tiered:
            return queue
        return (JOB_LEVELS - 1 - self.levels.level(job_id)) * self.queues + queue

    def _tiered_order(self, item: tuple) -> tuple:
        """Sort key of a ``(key, job)`` waiting entry: class, then the key."""
        key, job = item
        return self.of(job.id), key

    def _tiered_running(self, job_id: str) -> tuple:
        """Sort key of a running job id: class, then the key."""
        return self.of(job_id), self.keys[job_id]
