"""FIFO: start queued jobs in submit order at their requested size.

The simplest reference. Non-preemptive, no loaning (training servers only),
requested GPUs only (elastic jobs run at their requested size), placed by
the run's ``placement`` rule on one GPU type (``baselines/placement.py``). With ``backfill=False`` (default) the queue head blocks the jobs
behind it; with ``backfill=True`` later jobs that fit may start first.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Iterable, Sequence

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
        version = view.topology.version  # changes with every change of free GPUs
        jobs = iter(self.order(view))
        head = next(jobs)
        blocked = self.__dict__.get("_blocked")
        if not self.backfill and blocked == (view, version, head.id):
            return plan  # the same first job on the same free GPUs: still blocked
        # the engine's free-capacity index: each placement costs O(GPUs per server), not O(servers)
        free = view.free_map()
        groups, capacity = self._groups(view)
        rule = view.placement
        for job in chain((head,), jobs):
            placement = place_in_groups(rule, free, capacity, job.spec.num_gpus, groups)
            if placement is None:
                if self.backfill:
                    continue
                if job is head:
                    self.__dict__["_blocked"] = (view, version, head.id)
                break
            take(free, placement)
            plan.assign(job.id, placement)
        return plan

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_cached", None)  # the last run's view: not part of the scheduler
        state.pop("_blocked", None)
        return state

    def _groups(self, view: ClusterView) -> tuple[list[Sequence[int]], Sequence[int]]:
        """Training server groups by GPU type and GPUs per server id (fixed during a run: cached per view)."""
        cached = self.__dict__.get("_cached")
        if cached is None or cached[0] is not view:
            cached = self.__dict__["_cached"] = (view, groups_by_type(view, view.training_server_ids),
                                                 capacities(view))
        return cached[1], cached[2]
