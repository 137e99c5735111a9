"""Who gets GPUs under the Pollux baseline (see :mod:`lyra_baselines.pollux`, "Who gets GPUs" and
"Spanning"): the admission steps of one decision, each on the decision's pools and plan.

Order of one decision: :func:`admit_running` (running jobs stay in their pools), then
:func:`admit` (queued jobs, and with ``preempt`` the most jobs that fit), then sizing and
placement (in :mod:`lyra_baselines.pollux`), then :func:`place_spanning` (jobs spanning pools).
An agent's guidance enters as :class:`Levels` (the jobs it preempted are stopped first,
:func:`lyra_baselines.guided.preempt_jobs`).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from lyra_baselines.guided import NEUTRAL, Levels
from lyra_baselines.placement import best_fit, spanning_group, take
from lyra_baselines.pollux_optimizer import most_jobs
from lyra_baselines.pollux_pools import Pool, loaned_after
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.view import ClusterView, JobView

#: Spanning jobs admitted in one decision, each with the GPUs reserved for it per pool.
Spanning = list[tuple[JobView, list[tuple[Pool, int]]]]


def minimum(job: JobView) -> int:
    """GPUs a job needs to run: ``min_gpus`` if elastic, else ``num_gpus``."""
    request = job.request
    return request.min_gpus if request.elastic else request.num_gpus


def admission_order(view: ClusterView, dropped: Sequence[JobView], levels: Levels = NEUTRAL) -> list[JobView]:
    """Never-started queued jobs in submit order, then started ones by least attained GPU-time;
    with active ``levels``, only admissible jobs, higher levels first (that order within a level)."""
    first: list[JobView] = []
    resumed = list(dropped)
    for job in view.queued_jobs():
        if job.first_start is None:
            first.append(job)
        else:
            resumed.append(job)
    resumed.sort(key=lambda j: (j.attained_gpu_s, j.index))
    order = first + resumed
    if levels.active:
        order = sorted((job for job in order if levels.admissible(job.id)), key=lambda j: -levels.level(j.id))
    return order


def admit_running(view: ClusterView, allocations: Mapping[str, Mapping[int, int]],
                  pools: list[Pool]) -> list[JobView]:
    """Step 1: running jobs stay admitted, in the pool they run in; elastic ones may shrink to their
    minimum (their GPUs beyond it count as the pool's ``spare``). Returns the running jobs a reclaim
    stopped (no allocation in the plan): candidates again."""
    pool_of = {sid: pool for pool in pools for sid in pool.servers}
    dropped: list[JobView] = []
    for job in view.running_jobs():
        alloc = allocations.get(job.id)
        if alloc is None:
            dropped.append(job)
            continue
        pool = pool_of[next(iter(alloc))]
        if any(pool_of[sid] is not pool for sid in alloc):
            continue  # spans pools (a spanning job, or not made by this policy): left as it is
        request = job.request
        if not request.elastic:
            pool.fixed.append(job)
        else:
            untouched = alloc is job.allocation
            count = job.workers if untouched else sum(alloc.values())
            pool.spare += count - request.min_gpus
            pool.elastic.append((job, count, count if untouched else None))
    return dropped


def admit(view: ClusterView, plan: Plan, pools: list[Pool], free: list[int], dropped: Sequence[JobView],
          preempt: bool, backfill: bool, levels: Levels = NEUTRAL) -> Spanning:
    """Step 2: queued jobs in Pollux's order, each at its minimum, while minimums fit (training
    first); with ``preempt``, running jobs are candidates too and the most jobs that fit are
    admitted; a job too large for every pool spans pools where the config lets it. ``levels``:
    an agent's tiers (held jobs left out, higher levels first). Returns the admitted spanning
    jobs, their GPUs reserved per pool."""
    spans = spanning_candidates(view, plan, pools, dropped, levels)
    spanning: Spanning = []
    if preempt:
        admit_most(view, pools, plan.allocations, free, dropped, spans, levels)
        for job in admission_order(view, dropped, levels) if spans else ():
            if job.id in spans:
                reserve(job, spans[job.id], pools, spanning)
    elif any(pool.spare for pool in pools):
        admit_in_order(view, pools, dropped, spans, spanning, backfill, levels)
    return spanning


def admit_in_order(view: ClusterView, pools: list[Pool], dropped: Sequence[JobView],
                   spans: Mapping[str, Sequence[int]], spanning: Spanning, backfill: bool,
                   levels: Levels = NEUTRAL) -> None:
    """Admission without ``preempt``: queued jobs in Pollux's order while their minimum fits in a
    pool (``backfill`` skips one that does not fit, else it blocks those behind it); a job in
    ``spans`` is reserved across pools (:func:`reserve`)."""
    for job in admission_order(view, dropped, levels):
        need = minimum(job)
        if job.id in spans:
            if not reserve(job, spans[job.id], pools, spanning) and not backfill:
                break
            continue
        pool = next((pool for pool in pools if need <= pool.spare), None)
        if pool is None:
            if not backfill:
                break
            continue
        pool.spare -= need
        if job.request.elastic:
            pool.elastic.append((job, 0, None))
        else:
            pool.started.append(job)
        if not any(pool.spare for pool in pools):
            break


def spanning_candidates(view: ClusterView, plan: Plan, pools: list[Pool], dropped: Sequence[JobView],
                        levels: Levels = NEUTRAL) -> dict[str, list[int]]:
    """Queued jobs whose minimum no pool can ever hold but the servers a job may span can
    (``allow_mixed_gpu_types`` only; :func:`lyra_baselines.placement.spanning_group`, as ``lyra``):
    job id -> those servers."""
    if not view.allow_mixed_gpu_types or len(pools) < 2:
        return {}
    gpus = [s.num_gpus for s in view.servers]
    largest = max(sum(gpus[sid] for sid in pool.servers) for pool in pools)
    loaned = loaned_after(view, plan)
    spans = {}
    for job in (*view.queued_jobs(), *dropped):
        need = minimum(job)
        if need > largest and levels.admissible(job.id):
            servers = spanning_group(view, loaned, need)
            if servers is not None:
                spans[job.id] = servers
    return spans


def reserve(job: JobView, servers: Sequence[int], pools: list[Pool], spanning: Spanning) -> bool:
    """Admit a spanning ``job`` at its minimum if the pools within ``servers`` have that many
    spare GPUs: reserve them, pools in order (training first), and note it in ``spanning``."""
    within = set(servers)
    usable = [pool for pool in pools if within.issuperset(pool.servers) and pool.spare]
    left = minimum(job)
    if sum(pool.spare for pool in usable) < left:
        return False
    reserved = []
    for pool in usable:
        gpus = min(pool.spare, left)
        pool.spare -= gpus
        left -= gpus
        reserved.append((pool, gpus))
        if not left:
            break
    spanning.append((job, reserved))
    return True


def admit_most(view: ClusterView, pools: list[Pool], allocations: dict, free: list[int],
               dropped: Sequence[JobView], spans: Mapping[str, object], levels: Levels = NEUTRAL) -> None:
    """Pollux's admission when any job may get zero GPUs: per pool (training first), the largest
    number of jobs whose minimums fit in the pool (an unallocated job costs 1/1e-3 in Pollux's
    p = -1 objective, about 1,000 allocated ones); among those, the most of the jobs running
    there; then the smallest minimums, ties in Pollux's order. A running job left out is
    preempted (its GPUs are freed); queued jobs not admitted in one pool may join the next.
    With active ``levels``, that rule runs once per level, highest first, on what the higher
    levels left (a held queued job is not a candidate; a running one at level 0 gives way first)."""
    queued = [job for job in admission_order(view, dropped, levels) if job.id not in spans]
    for pool in pools:
        running = [job for job, _, _ in pool.elastic] + pool.fixed
        need = {job.id: minimum(job) for job in running}
        capacity = pool.spare + sum(need.values())  # spare counts GPUs beyond the elastic minimums
        for job in queued:
            need[job.id] = minimum(job)
        preempted: list[JobView] = []
        admitted: set[str] = set()
        for tier_running, tier_queued in _tiers(running, queued, levels):
            by_need = sorted(tier_running, key=lambda j: (need[j.id], j.attained_gpu_s, j.index))
            waiting = sorted(tier_queued, key=lambda j: need[j.id])  # stable: ties keep Pollux's order
            keep, start = most_jobs([need[j.id] for j in by_need], [need[j.id] for j in waiting], capacity)
            capacity -= sum(need[j.id] for j in (*by_need[:keep], *waiting[:start]))
            preempted += by_need[keep:]
            admitted.update(j.id for j in waiting[:start])
        for job in preempted:  # preempted: all its GPUs return to the pool
            for sid, gpus in allocations.pop(job.id).items():
                free[sid] += gpus
            pool.spare += need[job.id]
        if preempted:
            gone = {job.id for job in preempted}
            pool.elastic = [e for e in pool.elastic if e[0].id not in gone]
            pool.fixed = [job for job in pool.fixed if job.id not in gone]
        for job in [j for j in queued if j.id in admitted]:  # in Pollux's order
            pool.spare -= need[job.id]
            if job.request.elastic:
                pool.elastic.append((job, 0, None))
            else:
                pool.started.append(job)
        queued = [j for j in queued if j.id not in admitted]


def _tiers(running: list[JobView], queued: list[JobView],
           levels: Levels) -> list[tuple[list[JobView], list[JobView]]]:
    """(running, queued) candidates per level, highest level first; one tier without ``levels``."""
    if not levels.active:
        return [(running, queued)]
    tiers: dict[int, tuple[list[JobView], list[JobView]]] = {}
    for side, jobs in enumerate((running, queued)):
        for job in jobs:  # each job's level read once; a tier keeps the jobs' order
            tiers.setdefault(levels.level(job.id), ([], []))[side].append(job)
    return [tiers[t] for t in sorted(tiers, reverse=True)]


def place_spanning(allocations: dict[str, Mapping[int, int]], free: list[int], spanning: Spanning) -> None:
    """Place the admitted spanning jobs, after every pool is placed (each has kept its reserved
    GPUs free): best-fit each pool's reserved part; a job whose parts do not all fit waits."""
    for job, reserved in spanning:
        fits = [best_fit(free, gpus, pool.servers) for pool, gpus in reserved]
        parts = [part for part in fits if part is not None]
        if len(parts) < len(fits):  # not expected: the job waits
            continue
        placement: dict[int, int] = {}
        for part in parts:
            take(free, part)
            placement.update(part)
        allocations[job.id] = placement
