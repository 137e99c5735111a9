"""SJF: shortest job first by the trace's duration at the requested size.

Same as FIFO (non-preemptive, no loaning, requested GPUs, best-fit) but the
queue is ordered by ``spec.duration`` (ties: submit order): the trace's duration under
``knowledge: oracle`` (the Lyra paper's SJF phase assumes it known), the believed one under
``estimate`` or ``history`` (:mod:`lyra_gym.model.knowledge`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from lyra_baselines.fifo import FifoScheduler
from lyra_gym.sim.view import ClusterView, JobView


@dataclass
class SjfScheduler(FifoScheduler):
    """:param backfill: let shorter-queued jobs behind a blocked one start if they fit (default False)."""

    name = "sjf"
    reads = frozenset({"spec.duration"})  # at the requested size

    def order(self, view: ClusterView) -> Iterable[JobView]:
        return sorted(view.queued_jobs(), key=lambda j: (j.spec.duration, j.index))
