"""Smallest queued job first, greedy: a plan-level scheduler in a package of its own.

At every decision point the running jobs keep their GPUs; the queued jobs are started in order
of requested GPUs (fewest first; ties: submit order) wherever they fit on one GPU type of the
training servers, packed onto the servers with the fewest free GPUs that hold them (best fit).
Jobs run at their requested size; nothing is borrowed and nothing preempted. It reads nothing
of durations (``reads``), so it behaves the same under every knowledge mode.

Installed, it is the scheduler ``smallest-first`` (the entry point of ``pyproject.toml``); without
installing, ``my_scheduler:SmallestFirstScheduler`` names it from this folder (on ``sys.path``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lyra_gym import ClusterView, Plan, Scheduler

__all__ = ["SmallestFirstScheduler", "best_fit"]


@dataclass
class SmallestFirstScheduler(Scheduler):
    """:param max_starts: start at most this many jobs per decision point (0: no limit)."""

    max_starts: int = 0
    name = "smallest-first"
    reads = frozenset()  # nothing of durations: sizes and submit order only

    def decide(self, view: ClusterView) -> Plan:
        plan = view.current_plan()
        free = view.free_gpus()  # per server id; 0 where training may not run now
        servers = [view.servers[i] for i in view.training_server_ids]
        started = 0
        for job in sorted(view.queued_jobs(), key=lambda j: j.spec.num_gpus):  # stable: submit order in ties
            if self.max_starts and started >= self.max_starts:
                break
            allocation = best_fit(job.spec.num_gpus, servers, free)
            if allocation:
                for server_id, gpus in allocation.items():
                    free[server_id] -= gpus
                plan.assign(job.id, allocation)
                started += 1
        return plan


def best_fit(gpus: int, servers: list, free: list[int]) -> dict[int, int]:
    """``{server id: GPUs}`` for ``gpus`` GPUs on one GPU type, fullest servers first; ``{}`` if none fits."""
    for gpu_type in sorted({s.gpu_type for s in servers}):
        candidates = sorted((free[s.id], s.id) for s in servers if s.gpu_type == gpu_type and free[s.id] > 0)
        single = next((sid for left, sid in candidates if left >= gpus), None)
        if single is not None:
            return {single: gpus}
        if sum(left for left, _ in candidates) >= gpus:
            allocation, need = {}, gpus
            for left, sid in reversed(candidates):  # spread over the emptiest servers: fewest of them
                take = min(left, need)
                allocation[sid], need = take, need - take
                if not need:
                    return allocation
    return {}
