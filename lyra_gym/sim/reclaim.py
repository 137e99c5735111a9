"""Reclaiming loaned servers: the ledger of what inference is owed, and the default rule.

Modelling choices (DESIGN.md "Model contract"):

- Reclaiming: when inference demand exceeds the non-loaned inference servers, a request for the
  shortfall opens with deadline ``now + reclaim_grace_s``. Servers given back pay off the oldest
  request first; so does a drop in demand. A request still open at its deadline (after the
  decision at that instant) is enforced by the default rule (:func:`reclaim_victims`,
  :func:`free_victims`): give back the loaned server with the fewest GPUs in use (ties: the
  highest id); its jobs are scaled in when elastic and still at or above their minimum,
  preempted otherwise. Each server returned this way counts one inference violation, and the
  scheduler gets a second decision at the same instant.
- Reclaim disruptions: a job that held workers on a server given back in an applied plan (the
  scheduler's ``give_back`` or the default rule) counts one disruption for that plan, whether it
  was scaled in, moved elsewhere (also a migration when its worker count is unchanged) or
  preempted.
- Returning is immediate: a server given back is serving inference at that instant (DESIGN.md's
  "returning" state has zero length here; a grace period is modelled by ``reclaim_grace_s``
  instead).
"""

from __future__ import annotations

from collections import deque
from typing import Mapping, Sequence

from lyra_gym.model.jobs import Job
from lyra_gym.sim.cluster import Server


def loanable(inference_servers: int, loaned: int, demand: int) -> int:
    """Idle inference servers not on loan (``demand``: inference servers needed now)."""
    return max(0, inference_servers - loaned - demand)


def owed(inference_servers: int, loaned: int, demand: int) -> int:
    """Loaned servers inference needs back now."""
    return min(loaned, max(0, demand - (inference_servers - loaned)))


class ReclaimLedger:
    """The open reclaim requests ``[servers owed, deadline s]``, oldest first."""

    __slots__ = ("requests", "grace_s")

    def __init__(self, grace_s: float) -> None:
        self.requests: deque[list[float]] = deque()
        self.grace_s = grace_s

    def sync(self, owed_now: int, now: float) -> float | None:
        """Make the open requests sum to ``owed_now``: open one for a shortfall (its deadline is
        returned, for the engine's event queue), or pay off the oldest ones for an excess."""
        requests = self.requests
        total = sum(r[0] for r in requests)
        if owed_now > total:
            deadline = now + self.grace_s
            requests.append([owed_now - total, deadline])
            return deadline
        excess = total - owed_now
        while excess > 0 and requests:
            paid = min(excess, requests[0][0])
            requests[0][0] -= paid
            excess -= paid
            if requests[0][0] <= 0:
                requests.popleft()
        return None

    def due(self, now: float) -> int:
        """Servers owed by the requests whose deadline has passed at ``now``."""
        return sum(int(n) for n, deadline in self.requests if deadline <= now)

    def deadline(self) -> float | None:
        """The deadline of the oldest open request (s), or None."""
        return self.requests[0][1] if self.requests else None

    def __bool__(self) -> bool:
        return bool(self.requests)


def reclaim_victims(inference_servers: Sequence[Server], due: int) -> list[Server]:
    """The ``due`` loaned servers the default rule returns: fewest GPUs in use, ties the highest id."""
    loaned = [s for s in inference_servers if s.loaned]
    loaned.sort(key=lambda s: (s.used, -s.id))
    return loaned[:due]


def free_victims(allocations: dict[str, Mapping[int, int]], victims: Sequence[Server],
                 jobs: Sequence[Job]) -> None:
    """Edit ``allocations`` (a current plan's) so that no job keeps GPUs on ``victims``: an
    elastic job left at or above its minimum is scaled in, any other is preempted (removed)."""
    for server in victims:
        for index in list(server.jobs):
            job = jobs[index]
            job_id = job.spec.job_id
            if job_id not in allocations:
                continue  # already preempted by an earlier victim
            remaining = {sid: g for sid, g in allocations[job_id].items() if sid != server.id}
            if job.spec.elastic and sum(remaining.values()) >= job.spec.min_gpus:
                allocations[job_id] = remaining
            else:
                del allocations[job_id]
