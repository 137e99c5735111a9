"""The pools of the Pollux baseline: sets of servers sized and placed together during one decision
(see :mod:`lyra_baselines.pollux`, "Pools"), and how the servers are split into them."""

from __future__ import annotations

from dataclasses import dataclass, field

from lyra_gym.sim.plan import Plan
from lyra_gym.sim.view import ClusterView, JobView


@dataclass
class Pool:
    """One set of servers sized and placed together (training, or loaned), during one decision."""

    servers: list[int]
    groups: list[list[int]]  # candidate server lists for placement (one per GPU type if types may not mix)
    gpu_type: str            # throughput of this pool's jobs is taken on this type ...
    gpus_per_server: int     # ... packed onto servers of this many GPUs
    spare: int               # GPUs beyond the minimums of the jobs admitted here
    elastic: list[tuple[JobView, int, int | None]] = field(default_factory=list)  # (job, GPUs now, penalised count)
    started: list[JobView] = field(default_factory=list)  # inelastic jobs admitted now
    fixed: list[JobView] = field(default_factory=list)    # inelastic jobs running here already

    def fair_share(self) -> int:
        """GPUs per job if the pool's GPUs were split evenly among its jobs, rounded up (Pollux's
        ``a_f``: ``pollux.py`` ``Problem``, ceil(GPUs / jobs))."""
        jobs = len(self.elastic) + len(self.started) + len(self.fixed)
        return -(-len(self.servers) * self.gpus_per_server // max(1, jobs))


def loaned_after(view: ClusterView, plan: Plan) -> list[int]:
    """Server ids on loan once ``plan`` is applied: those loaned now and not given back, then those
    the plan borrows."""
    returned = set(plan.give_back)
    return [sid for sid in view.loaned_servers() if sid not in returned] + list(plan.borrow)


def build_pools(view: ClusterView, plan: Plan, free: list[int]) -> list[Pool]:
    """Training servers, then the loaned ones (if any); each sized and placed separately, one
    pool per GPU type unless the config lets a job mix types. ``free``: free GPUs per server."""
    pools = []
    for servers in server_sets(view, list(view.training_server_ids), loaned_after(view, plan)):
        first = view.servers[servers[0]]
        pools.append(Pool(servers, [servers], first.gpu_type, first.num_gpus, sum(free[s] for s in servers)))
    return pools


def server_sets(view: ClusterView, training: list[int], loaned: list[int]) -> list[list[int]]:
    """The pools' server ids: training, then loaned; each split by GPU type (first-seen order)
    unless ``allow_mixed_gpu_types``. A pool of several types would count GPUs no one job could
    use together: a job sized to them would never be placed."""
    sets = []
    for servers in (training, loaned):
        if not servers:
            continue
        if view.allow_mixed_gpu_types:
            sets.append(servers)
            continue
        by_type: dict[str, list[int]] = {}
        for sid in servers:
            by_type.setdefault(view.servers[sid].gpu_type, []).append(sid)
        sets.extend(by_type.values())
    return sets


def job_limit(view: ClusterView, loan: bool) -> int:
    """The most GPUs one job can ever get: the largest pool with every inference server on loan
    (if ``loan``), or training and inference servers together where types may mix."""
    loaned = list(view.inference_server_ids) if loan else []
    sets = server_sets(view, list(view.training_server_ids), loaned)
    if view.allow_mixed_gpu_types and loaned:
        sets.append([*view.training_server_ids, *loaned])
    return max((sum(view.servers[s].num_gpus for s in ids) for ids in sets), default=0)
