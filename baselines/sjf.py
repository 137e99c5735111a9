"""SJF: shortest job first by the trace's duration at the requested size.

Same as FIFO (non-preemptive, no loaning, requested GPUs, best-fit) but the
queue is ordered by ``duration`` (ties: submit order). Durations are known
from the trace: an oracle assumption, as in the Lyra paper's SJF phase.
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

    def order(self, view: ClusterView) -> Iterable[JobView]:
        return sorted(view.queued_jobs(), key=lambda j: (j.spec.duration, j.index))
