"""FIFO, fast: the plans of ``baselines/fifo.py`` (read that first), with two shortcuts.

``fifo`` runs this class; :class:`~lyra_baselines.fifo.FifoScheduler` is the plain loop it equals
plan for plan (``tests/baselines/test_fifo_fast.py`` checks it at every decision on hypothesis workloads).
The shortcuts, each keyed by the run's view so that nothing carries over to another run:

* **blocked head:** without ``backfill``, a decision that sees the same queue head as the last
  blocked one on the same free GPUs (the topology's ``version`` changes with every change of free
  GPUs) keeps the current plan without trying the head again;
* **placer:** the placement rule over the training servers by GPU type, built once per run.

Both are dropped when the scheduler is pickled or copied (:meth:`__getstate__`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from lyra_baselines.fifo import FifoScheduler
from lyra_baselines.placement import capacities, groups_by_type, placer
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.view import ClusterView

__all__ = ["FastFifoScheduler"]


@dataclass
class FastFifoScheduler(FifoScheduler):
    """:param backfill: let jobs behind a blocked head start if they fit (default False)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._placer: tuple[ClusterView, Callable[..., Any]] | None = None  # (view, placer) of the run
        self._blocked: tuple[ClusterView, int, str] | None = None  # (view, topology version, head id)

    def decide(self, view: ClusterView) -> Plan:
        """:meth:`FifoScheduler.decide`, skipping a head still blocked on unchanged free GPUs."""
        if not view.num_queued:
            return view.current_plan()
        version = view.topology.version
        jobs = iter(self.order(view))
        head = next(jobs)
        blocked = self._blocked
        if not self.backfill and blocked is not None and blocked[0] is view and blocked[1:] == (version, head.id):
            return view.current_plan()
        if self._placer is None or self._placer[0] is not view:
            groups = groups_by_type(view, view.training_server_ids)
            self._placer = (view, placer(view.placement, capacities(view), groups))
        place = self._placer[1]
        plan = view.current_plan()
        free = view.free_map()
        job = head
        while True:
            placed = place(free, job.spec.num_gpus)
            if placed is not None:
                plan.assign(job.id, placed)
                free.take(placed)
            elif not self.backfill:
                if job is head:
                    self._blocked = (view, version, head.id)
                return plan
            next_job = next(jobs, None)
            if next_job is None:
                return plan
            job = next_job

    def __getstate__(self) -> dict[str, Any]:
        """The parameters alone: the shortcuts hold the run's view, no part of the scheduler."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_placer", "_blocked")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _placer=None, _blocked=None)
