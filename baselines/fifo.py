"""FIFO: start queued jobs in submit order at their requested size.

The simplest reference. Non-preemptive, no loaning (training servers only),
requested GPUs only (elastic jobs run at their requested size), placed by
the run's ``placement`` rule on one GPU type (``baselines/placement.py``). With ``backfill=False`` (default) the queue head blocks the jobs
behind it; with ``backfill=True`` later jobs that fit may start first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from baselines.placement import capacities, groups_by_type, place_in_groups, take
from lyra_gym.plan import Plan
from lyra_gym.scheduler import Scheduler
from lyra_gym.view import ClusterView, JobView


@dataclass
class FifoScheduler(Scheduler):
    """:param backfill: let jobs behind a blocked head start if they fit (default False)."""

    backfill: bool = False
    name = "fifo"

    def order(self, view: ClusterView) -> Iterable[JobView]:
        """Queued jobs in the order this policy starts them."""
        return view.queued_jobs()

    def decide(self, view: ClusterView) -> Plan:
        plan = view.current_plan()
        if not view.num_queued:
            return plan
        free, capacity = view.free_gpus(), capacities(view)
        groups, rule = groups_by_type(view, view.training_server_ids), view.placement
        for job in self.order(view):
            placement = place_in_groups(rule, free, capacity, job.spec.num_gpus, groups)
            if placement is None:
                if self.backfill:
                    continue
                break
            take(free, placement)
            plan.allocations[job.id] = placement
        return plan
