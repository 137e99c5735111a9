"""FIFO: start queued jobs in submit order at their requested size.

The simplest reference. Non-preemptive, no loaning (training servers only),
requested GPUs only (elastic jobs run at their requested size), placed by
the run's ``placement`` rule on one GPU type (``baselines/placement.py``). With ``backfill=False`` (default) the queue head blocks the jobs
behind it; with ``backfill=True`` later jobs that fit may start first.
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
        if not view.num_queued:
            return view.current_plan()
        version = view.topology.version  # changes with every change of free GPUs
        jobs = iter(self.order(view))
        head = next(jobs)
        if not self.backfill and self.__dict__.get("_blocked") == (view, version, head.id):
            return view.current_plan()  # the same first job on the same free GPUs: still blocked
        plan = view.current_plan()
        cached = self.__dict__.get("_cached")
        if cached is None or cached[0] is not view:
            cached = self._cache(view)
        place = cached[1]
        # the engine's free-capacity index (a FreeMap): each placement costs O(GPUs per server), not O(servers)
        free = view.free_map()
        job: JobView | None = head
        placed = None  # the last placement, taken from ``free`` only if another job is tried after it
        while job is not None:
            if placed is not None:
                free.take(placed)
            placed = place(free, job.spec.num_gpus)
            if placed is not None:
                plan.assign(job.id, placed)
            elif not self.backfill:
                if job is head:
                    self.__dict__["_blocked"] = (view, version, head.id)
                break
            job = next(jobs, None)
        return plan

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_cached", None)  # the last run's view: not part of the scheduler
        state.pop("_blocked", None)
        return state

    def _cache(self, view: ClusterView) -> tuple:
        """(view, placer) of a run: the training servers by GPU type and the placement rule are
        fixed while it lasts."""
        groups, capacity = groups_by_type(view, view.training_server_ids), capacities(view)
        cached = self.__dict__["_cached"] = (view, placer(view.placement, capacity, groups))
        return cached
