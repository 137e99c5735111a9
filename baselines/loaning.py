"""Capacity loaning, orthogonal to job scheduling: borrow idle inference servers, answer reclaims.

Any scheduler can hold a :class:`Loaning` and call :meth:`Loaning.prepare` at the
start of ``decide``; it fills ``plan.borrow`` and ``plan.give_back`` and edits
``plan.allocations`` for the jobs a reclaim touches. The scheduler then
allocates the capacity :func:`free_after` reports.

Reclaim rules (``reclaim_rule``):

- ``"cost"`` — Lyra's server preemption cost (EuroSys 2023, section on
  reclaiming), reduced greedily. The paper does not publish the formula; ours
  is an assumption::

      cost(server) = preempt_weight  * #jobs that would lose base-demand workers (preempted)
                   + scale_in_weight * #elastic jobs that only lose workers above
                                        their minimum (scaled in)

  Jobs already preempted by an earlier pick cost nothing again. Pick the
  cheapest loaned server (ties: fewer GPUs in use, then higher id), apply its
  consequences to the plan, recompute, repeat k times.
- ``"random"`` — k loaned servers uniformly at random (from the scheduler's
  generator): the reference that isolates the value of the cost rule.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from lyra_gym.sim.params import param
from lyra_gym.sim.plan import Plan, TrackedAllocations
from lyra_gym.sim.topology import FreeMap
from lyra_gym.sim.scheduler import NEUTRAL_RETURN_LEVEL
from lyra_gym.sim.view import ClusterView

RECLAIM_RULES = ("cost", "random")


def loan_param(default: bool) -> Any:
    """The ``loan`` parameter of a scheduler that can borrow (declared once, here)."""
    return param(default, "borrow idle inference servers")


def reclaim_rule_param() -> Any:
    """The ``reclaim_rule`` parameter of a scheduler that can borrow (declared once, here)."""
    return param("cost", "which loaned servers go back on a reclaim: least preemption cost, or at random",
                 choices=RECLAIM_RULES)


@dataclass
class Loaning:
    """Loaning parameters.

    :param enabled: borrow loanable inference servers at all (default False).
    :param reserve_servers: loanable servers to leave unborrowed (default 0: borrow all,
        as Lyra does).
    :param reclaim_rule: ``"cost"`` (default) or ``"random"``.
    :param preempt_weight: cost of a preempted job (default 1.0, assumption).
    :param scale_in_weight: cost of a scaled-in job (default 0.05, assumption: a scale-in
        costs one rescale, far less than a preemption's restart and requeue).
    """

    enabled: bool = False
    reserve_servers: int = 0
    reclaim_rule: str = "cost"
    preempt_weight: float = 1.0
    scale_in_weight: float = 0.05

    def __post_init__(self) -> None:
        if self.reclaim_rule not in RECLAIM_RULES:
            raise ValueError(f"reclaim_rule: must be one of {RECLAIM_RULES}, got {self.reclaim_rule!r}")
        if self.reserve_servers < 0:
            raise ValueError(f"reserve_servers: must be >= 0, got {self.reserve_servers}")

    def prepare(self, view: ClusterView, plan: Plan, rng: np.random.Generator,
                borrow_fraction: float | None = None, return_levels: Mapping[int, int] | None = None) -> None:
        """Answer the pending reclaim (always, even when borrowing is off) and borrow servers.

        ``borrow_fraction`` (0-1 of the loanable servers) and ``return_levels``
        (server id -> level, higher returned first) let an agent override the rule.
        """
        owed = view.reclaim_pending
        if owed:
            returns = choose_returns(view, plan, owed, self, rng, return_levels)
            plan.give_back = (*plan.give_back, *returns)
        if self.enabled:
            loanable = view.loanable_servers()
            if borrow_fraction is None:
                count = max(0, len(loanable) - self.reserve_servers)
            else:
                count = int(round(borrow_fraction * len(loanable)))
            plan.borrow = loanable[:count]


def _jobs_on_loaned(view: ClusterView, allocations: Mapping[str, Mapping[int, int]]) -> dict[int, dict[str, int]]:
    """Loaned server id -> {job id: GPUs there} under ``allocations``."""
    loaned = set(view.loaned_servers())
    on: dict[int, dict[str, int]] = {sid: {} for sid in loaned}
    for job_id, alloc in allocations.items():
        for sid, gpus in alloc.items():
            if sid in loaned:
                on[sid][job_id] = gpus
    return on


def server_cost(jobs_here: Mapping[str, int], allocations: Mapping[str, Mapping[int, int]],
                view: ClusterView, loaning: Loaning) -> float:
    """Preemption cost of returning one server holding ``jobs_here`` (job id -> GPUs)."""
    cost = 0.0
    for job_id, gpus in jobs_here.items():
        if job_id not in allocations:
            continue  # already preempted by an earlier pick: costs nothing again
        spec = view.job(job_id).spec
        left = sum(allocations[job_id].values()) - gpus
        if spec.elastic and left >= spec.min_gpus:
            cost += loaning.scale_in_weight
        else:
            cost += loaning.preempt_weight
    return cost


def choose_returns(view: ClusterView, plan: Plan, k: int, loaning: Loaning, rng: np.random.Generator,
                   levels: Mapping[int, int] | None = None) -> list[int]:
    """Pick ``k`` loaned servers to give back and remove their jobs' workers from ``plan``.

    ``levels`` (server id -> level) ranks servers before the rule: a higher level is
    returned first; servers absent from it count as neutral.
    """
    levels = levels or {}
    allocations = plan.allocations
    on = _jobs_on_loaned(view, allocations)
    for sid in plan.give_back:
        on.pop(sid, None)
    picks = min(k, len(on))
    if loaning.reclaim_rule == "random":
        return _return_random(view, allocations, on, picks, rng)

    def key(s: int) -> tuple:
        return (-levels.get(s, NEUTRAL_RETURN_LEVEL), server_cost(on[s], allocations, view, loaning),
                sum(on[s].values()), -s)

    return _return_cheapest(view, allocations, on, picks, key)


def _return_random(view: ClusterView, allocations: dict, on: dict[int, dict[str, int]], picks: int,
                   rng: np.random.Generator) -> list[int]:
    """``picks`` servers of ``on`` drawn uniformly one by one (in server-id order), their jobs released."""
    chosen: list[int] = []
    for _ in range(picks):
        candidates = sorted(on)
        sid = candidates[int(rng.integers(len(candidates)))]
        for job_id in on.pop(sid):
            release_server(view, allocations, job_id, sid)
        chosen.append(sid)
    return chosen


def _return_cheapest(view: ClusterView, allocations: dict, on: dict[int, dict[str, int]], picks: int,
                     key: Callable[[int], tuple]) -> list[int]:
    """The server of ``on`` with the smallest ``key``, ``picks`` times, its jobs released each time."""
    if picks == 1:
        sid = min(on, key=key)
        for job_id in on.pop(sid):
            release_server(view, allocations, job_id, sid)
        return [sid]
    # a heap of every server's key, where a pick changes only the keys of the servers holding the
    # picked server's jobs (the same picks as a scan each time: keys are unique by server id)
    chosen: list[int] = []
    current = {s: key(s) for s in on}
    heap = [(kk, s) for s, kk in current.items()]
    heapq.heapify(heap)
    holders: dict[str, list[int]] = {}
    for s, jobs_here in on.items():
        for job_id in jobs_here:
            holders.setdefault(job_id, []).append(s)
    for _ in range(picks):
        while True:
            kk, sid = heapq.heappop(heap)
            if sid in on and current[sid] == kk:
                break
        jobs_here = on.pop(sid)
        for job_id in jobs_here:
            release_server(view, allocations, job_id, sid)
        for s in {s for job_id in jobs_here for s in holders[job_id] if s in on}:
            kk = key(s)
            if kk != current[s]:
                current[s] = kk
                heapq.heappush(heap, (kk, s))
        chosen.append(sid)
    return chosen


def release_server(view: ClusterView, allocations: dict, job_id: str, sid: int) -> None:
    """Take ``job_id``'s workers off server ``sid`` in ``allocations``: scale in if it stays at
    or above its minimum (elastic), otherwise drop it (preempt)."""
    alloc = allocations.get(job_id)
    if alloc is None or sid not in alloc:
        return
    spec = view.job(job_id).spec
    left = {s: g for s, g in alloc.items() if s != sid}
    if spec.elastic and sum(left.values()) >= spec.min_gpus:
        allocations[job_id] = left
    else:
        del allocations[job_id]


def free_map_after(view: ClusterView, plan: Plan) -> FreeMap:
    """:func:`free_after` as a :class:`~lyra_gym.sim.topology.FreeMap`: O(1) to make, then O(the
    servers the plan changes); placements on it read the engine's index."""
    free = view.free_map()
    capacity = view.topology.capacity
    delta: dict[int, int] = {}  # GPUs the plan frees (+) or takes (-) per server
    pending = plan._unread()
    if pending is not None:  # a current plan only added to (Plan.assign): its writes are the changes
        changed: Iterable[tuple[str, Mapping[int, int] | None]] | None = (pending.writes or {}).items()
    else:
        allocations = plan.allocations
        if isinstance(allocations, TrackedAllocations):  # only the touched jobs differ from now
            changed = ((job_id, allocations.get(job_id)) for job_id in allocations.touched)
        else:
            changed = None
    if changed is not None:
        for job_id, alloc in changed:
            for sid, gpus in view.job(job_id).allocation.items():
                delta[sid] = delta.get(sid, 0) + gpus
            for sid, gpus in (alloc or {}).items():
                delta[sid] = delta.get(sid, 0) - gpus
    else:
        for job in view.running_jobs():
            for sid, gpus in job.allocation.items():
                delta[sid] = delta.get(sid, 0) + gpus
        for alloc in allocations.values():
            for sid, gpus in alloc.items():
                delta[sid] = delta.get(sid, 0) - gpus
    borrow = set(plan.borrow)
    for sid in borrow:
        free[sid] = capacity[sid] + delta.pop(sid, 0)
    for sid, d in delta.items():
        if d:
            free[sid] += d
    for sid in plan.give_back:
        free[sid] = 0
    return free


def free_after(view: ClusterView, plan: Plan) -> list[int]:
    """Free GPUs per server id once ``plan`` (borrow, give_back, allocations) is applied."""
    free = view.free_gpus()
    for sid in plan.borrow:
        free[sid] = view.servers[sid].num_gpus
    allocations = plan.allocations
    if isinstance(allocations, TrackedAllocations):
        touched = allocations.touched  # only these differ from the current state
        for job_id in touched:
            view_job = view.job(job_id)
            for sid, gpus in view_job.allocation.items():
                free[sid] += gpus
            for sid, gpus in allocations.get(job_id, {}).items():
                free[sid] -= gpus
    else:
        for job in view.running_jobs():
            for sid, gpus in job.allocation.items():
                free[sid] += gpus
        for alloc in allocations.values():
            for sid, gpus in alloc.items():
                free[sid] -= gpus
    for sid in plan.give_back:
        free[sid] = 0
    return free
