"""FIFO: start queued jobs in submit order at their requested size.

The simplest reference: one plain loop, nothing kept between decisions (the name ``fifo`` runs
``baselines/fifo_fast.py``, equal to this loop plan for plan). Non-preemptive, no loaning
(training servers only), requested GPUs only (elastic jobs run at their requested size), placed by
the run's ``placement`` rule on one GPU type (``baselines/placement.py``). With
``backfill=False`` (default) the queue head blocks the jobs behind it; with ``backfill=True``
later jobs that fit may start first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from lyra_baselines.placement import capacities, groups_by_type, placer
from lyra_gym.sim.params import check_fields, param
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.sim.view import ClusterView, JobView


@dataclass
class FifoScheduler(Scheduler):
    """:param backfill: let jobs behind a blocked head start if they fit (default False)."""

    backfill: bool = param(False, "let jobs behind a blocked queue head start if they fit")
    name = "fifo"
    reads = frozenset()  # nothing of durations: submit order and sizes only

    def __post_init__(self) -> None:
        check_fields(self)

    def order(self, view: ClusterView) -> Iterable[JobView]:
        """Queued jobs in the order this policy starts them."""
        return view.queued_jobs()

    def decide(self, view: ClusterView) -> Plan:
        """Keep every running job; start queued jobs in :meth:`order` while they fit (without
        ``backfill``, stop at the first that does not)."""
        plan = view.current_plan()
        if not view.num_queued:
            return plan
        place = placer(view.placement, capacities(view), groups_by_type(view, view.training_server_ids))
        free = view.free_map()  # the engine's free-capacity index: a placement costs O(GPUs per server)
        for job in self.order(view):
            placed = place(free, job.spec.num_gpus)  # type: ignore[arg-type]  # (placer's indexed path takes a FreeMap)
            if placed is not None:
                plan.assign(job.id, placed)
                free.take(placed)
            elif not self.backfill:
                break
        return plan
