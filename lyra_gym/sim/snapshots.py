"""The changing members of many jobs in one pass: what :meth:`~lyra_gym.sim.view.JobView.snapshot`
and :meth:`~lyra_gym.sim.view.ClusterView.snapshots` answer, for readers of many jobs per step
such as the observation builder. Times in seconds, work in samples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from lyra_gym.model.jobs import Job, JobState
from lyra_gym.model.scaling import PROGRESS_BINS

if TYPE_CHECKING:
    from lyra_gym.model.knowledge import Knowledge

#: One job now: state, allocation, workers, rate, overhead_until, remaining_work, attained_gpu_s, part
#: (the job view's members of those names; part: ``progress_part``)
JobSnapshot = tuple[JobState, Mapping[int, int], int, float, float, float, float, int]

_LAST_BIN = PROGRESS_BINS - 1


def snapshots(records: Sequence[Job], indices: Iterable[int], now: float,
              knowledge: Knowledge | None) -> list[JobSnapshot]:
    """The :data:`JobSnapshot` of ``records[i]`` at ``now`` for each ``i`` of ``indices``, in order.

    ``remaining_work`` is :meth:`Job.remaining_work` (the truth) when ``knowledge`` is None, else
    ``knowledge.remaining_work`` (the believed one, as :class:`~lyra_gym.sim.view.KnownJobView`
    answers); the progress part is the true one's in every mode. The same floats as the members."""
    out: list[JobSnapshot] = []
    for i in indices:
        job = records[i]
        workers, last, total = job.workers, job.last_update, job.total_work
        since = now - last
        # Job.remaining_work and the view's attained_gpu_s without max(): (x if x > 0.0 else 0.0), to the bit
        attained = job.attained_gpu_s + workers * (since if since > 0.0 else 0.0)
        if workers:
            begin = job.overhead_until
            busy = now - (begin if begin > last else last)
            left = total - (job.work_done + job.rate * busy if busy > 0 else job.work_done)
            remaining = left if left > 0.0 else 0.0
        else:
            remaining = total - job.work_done
        # progress_bin(total - remaining, total), inline
        part = _LAST_BIN if total <= 0 else int((total - remaining) / total * PROGRESS_BINS)
        if part > _LAST_BIN:
            part = _LAST_BIN
        if knowledge is not None:
            remaining = knowledge.remaining_work(job, now)
        out.append((job.state, job.allocation, workers, job.rate, job.overhead_until, remaining, attained, part))
    return out


def remaining_works(records: Sequence[Job], indices: Iterable[int], now: float,
                    knowledge: Knowledge | None) -> list[float]:
    """The remaining work (samples) of ``records[i]`` at ``now`` for each ``i`` of ``indices``, in
    order: :data:`JobSnapshot`'s ``remaining_work`` alone (the believed one when ``knowledge`` is given)."""
    if knowledge is None:
        return [records[i].remaining_work(now) for i in indices]
    return [knowledge.remaining_work(records[i], now) for i in indices]


__all__ = ["JobSnapshot", "remaining_works", "snapshots"]
