"""``validate_plan``: a Plan checked completely against a cluster state, without changing it.

Each rule is a small function that raises :class:`~lyra_gym.sim.plan.PlanError` naming the rule
and the field (``borrow``, ``give_back``, ``allocations[job id]``, ``suspend``,
``batch_sizes[job id]``) it found broken; the first broken rule in this order wins:
``unknown-server``/``not-loanable`` (borrow), ``not-on-loan`` (give_back), ``unknown-job``,
``unknown-server``/``bad-gpu-count``/``server-unavailable``/``worker-range``/``mixed-gpu-types``
(each changed allocation), ``server-overfull``, ``server-unavailable`` (a returned server still
used), ``bad-suspend``. Batch sizes are checked by :func:`validate_batches`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from lyra_gym.model.jobs import Job, JobState
from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.plan import PendingAllocations, Plan, PlanError, TrackedAllocations

Change = tuple[Job, "Mapping[int, int] | None"]  # a job and its new allocation (None: stop it)

_RUNNING, _QUEUED = JobState.RUNNING, JobState.QUEUED
_TRAINING, _INFERENCE = Pool.TRAINING, Pool.INFERENCE
_NO_SERVERS: frozenset[int] = frozenset()


def validate_plan(
    plan: Plan,
    pending: PendingAllocations | None,
    servers: Sequence[Server],
    jobs_by_id: Mapping[str, Job],
    running_allocations: Mapping[str, Mapping[int, int]],
    token: object,
    loanable: int,
    allow_mixed_gpu_types: bool,
) -> list[Change]:
    """The job changes of ``plan`` (new allocations with plain int keys and values), or PlanError.

    :param pending: the plan's allocations when it is a current plan of this state not read
        since (changed by ``Plan.assign`` only), else None.
    :param servers: every server by id (their ``used``, ``loaned`` and ``jobs`` now).
    :param jobs_by_id: every job of the run by id (their ``state`` and ``allocation`` now).
    :param running_allocations: job id -> allocation of every running job, in start order.
    :param token: the state's token: a TrackedAllocations with it lists every entry it changed.
    :param loanable: idle inference servers not on loan now.
    :param allow_mixed_gpu_types: may one job span GPU types?
    """
    borrow = check_borrow(plan.borrow, servers, loanable) if plan.borrow else _NO_SERVERS
    give_back = check_give_back(plan.give_back, servers) if plan.give_back else _NO_SERVERS
    changes = job_changes(plan, pending, jobs_by_id, running_allocations, token)
    if not changes and not give_back and not plan.suspend:
        return changes
    delta: dict[int, int] = {}  # server id -> change of GPUs used
    for k, (job, new) in enumerate(changes):
        for sid, gpus in job.allocation.items():
            delta[sid] = delta.get(sid, 0) - gpus
        if new is not None:
            checked = check_allocation(job, new, servers, borrow, give_back, allow_mixed_gpu_types, delta)
            if checked is not new:
                changes[k] = (job, checked)
    check_capacity(servers, delta)
    check_returned_empty(servers, give_back, delta)
    if plan.suspend:
        check_suspend(plan.suspend, changes)
    return changes


def validate_starts(writes: Mapping[str, Mapping[int, int]], servers: Sequence[Server], jobs_by_id: Mapping[str, Job],
                    allow_mixed_gpu_types: bool) -> list[Change] | None:
    """:func:`validate_plan` of a current plan of this state changed by ``Plan.assign`` only, with no
    loans, suspends or batches, when every write (``writes``) starts a queued job: the same changes,
    or the same PlanError. None when some write is anything else (then call :func:`validate_plan`)."""
    jobs = []
    for job_id, new in writes.items():
        job = jobs_by_id.get(job_id)
        if job is None or job.state is not _QUEUED or not new:
            return None
        jobs.append(job)
    delta: dict[int, int] = {}  # a queued job holds nothing: only the new GPUs count
    changes: list[Change] = [(job, check_allocation(job, new, servers, _NO_SERVERS, _NO_SERVERS,
                                                    allow_mixed_gpu_types, delta))
                             for job, new in zip(jobs, writes.values())]
    check_capacity(servers, delta)
    return changes


def server_of(servers: Sequence[Server], sid: object, where: str) -> Server:
    """The server with id ``sid`` (an int, numpy integers too); PlanError ``unknown-server``."""
    if not isinstance(sid, (int, np.integer)) or isinstance(sid, bool) or not 0 <= sid < len(servers):
        raise PlanError("unknown-server", f"{where}: no server with id {sid!r}")
    return servers[int(sid)]


def check_borrow(borrow: Sequence[int], servers: Sequence[Server], loanable: int) -> set[int]:
    """The servers to borrow: idle inference servers off loan, each once, at most ``loanable``."""
    out: set[int] = set()
    for sid in borrow:
        s = server_of(servers, sid, "borrow")
        if s.pool is not _INFERENCE or s.loaned or sid in out:
            raise PlanError("not-loanable", f"borrow: server {sid} is not an idle inference server off loan")
        out.add(int(sid))
    if len(out) > loanable:
        raise PlanError("not-loanable", f"borrow: {len(out)} servers asked, {loanable} loanable")
    return out


def check_give_back(give_back: Sequence[int], servers: Sequence[Server]) -> set[int]:
    """The servers to return: servers on loan, each once."""
    out: set[int] = set()
    for sid in give_back:
        s = server_of(servers, sid, "give_back")
        if not s.loaned or sid in out:
            raise PlanError("not-on-loan", f"give_back: server {sid} is not on loan")
        out.add(int(sid))
    return out


def _candidates(plan: Plan, pending: PendingAllocations | None, running_allocations: Mapping[str, object],
                token: object) -> tuple[Mapping[str, Mapping[int, int]], list[str]]:
    """The plan's allocations and the job ids whose allocation it may change, in a fixed order."""
    if pending is not None:
        allocations = pending.writes or {}  # a current plan changed by Plan.assign only
        return allocations, list(allocations)
    allocations = plan.allocations
    if type(allocations) is TrackedAllocations and allocations.token == token:
        return allocations, list(allocations.touched)  # every other entry is the current allocation
    # plan order, then running jobs the plan leaves out (ordered: runs are reproducible)
    return allocations, [*allocations, *(k for k in running_allocations if k not in allocations)]


def job_changes(plan: Plan, pending: PendingAllocations | None, jobs_by_id: Mapping[str, Job],
                running_allocations: Mapping[str, Mapping[int, int]], token: object) -> list[Change]:
    """The jobs whose allocation ``plan`` changes (PlanError ``unknown-job`` for an id of no
    queued or running job), with their new allocation (None: stop), not yet checked."""
    allocations, candidates = _candidates(plan, pending, running_allocations, token)
    changes: list[Change] = []
    running, queued = _RUNNING, _QUEUED
    for job_id in candidates:
        job = jobs_by_id.get(job_id)
        if job is None or (job.state is not running and job.state is not queued):
            if job_id in allocations:
                raise PlanError("unknown-job", f"allocations: no job {job_id!r} in the system")
            continue
        new = allocations.get(job_id)
        if job.state is running:
            if new is job.allocation:
                continue
            if not new:
                changes.append((job, None))
            elif new != job.allocation:
                changes.append((job, new))
        elif new:
            changes.append((job, new))
    return changes


def _odd_entry(servers: Sequence[Server], sid: object, gpus: object, where: str) -> tuple[Server, int]:
    """An allocation entry that is not (plain int id of a server, plain int >= 1): its server and
    GPU count as an int, or PlanError ``unknown-server`` / ``bad-gpu-count``."""
    s = server_of(servers, sid, where)
    if not isinstance(gpus, (int, np.integer)) or isinstance(gpus, bool) or gpus < 1:
        raise PlanError("bad-gpu-count", f"{where}: server {sid} given {gpus!r} GPUs (need an int >= 1)")
    return s, int(gpus)


def check_allocation(job: Job, new: Mapping[int, int], servers: Sequence[Server], borrow: set[int] | frozenset[int],
                     give_back: set[int] | frozenset[int], allow_mixed_gpu_types: bool,
                     delta: dict[int, int]) -> Mapping[int, int]:
    """``new`` for ``job`` checked (servers usable by training after the plan's loans, a worker
    count in the job's range, one GPU type unless mixing is allowed), its GPUs added to ``delta``.
    Returns ``new`` itself, or a copy with plain ints where it held others (e.g. numpy integers)."""
    n_servers = len(servers)
    total = 0
    gpu_type = None
    mixed = False
    plain = True  # every server id and GPU count a plain int?
    for sid, gpus in new.items():
        if type(sid) is int and 0 <= sid < n_servers and type(gpus) is int and gpus >= 1:
            s = servers[sid]
        else:
            s, gpus = _odd_entry(servers, sid, gpus, f"allocations[{job.spec.job_id!r}]")
            plain = False
        if not (s.pool is _TRAINING or (s.loaned and s.id not in give_back) or s.id in borrow):
            raise PlanError("server-unavailable", f"allocations[{job.spec.job_id!r}]: server {sid} is an "
                                                  "inference server not on loan")
        total += gpus
        if gpu_type is None:
            gpu_type = s.gpu_type
        elif s.gpu_type != gpu_type:
            mixed = True
        delta[s.id] = delta.get(s.id, 0) + gpus
    spec = job.spec
    if not spec.min_gpus <= total <= spec.max_gpus:
        raise PlanError("worker-range", f"allocations[{spec.job_id!r}]: {total} GPUs outside [{spec.min_gpus}, "
                                        f"{spec.max_gpus}]")
    if mixed and not allow_mixed_gpu_types:
        gpu_types = sorted({servers[int(sid)].gpu_type for sid in new})
        raise PlanError("mixed-gpu-types", f"allocations[{spec.job_id!r}]: spans GPU types {gpu_types}")
    return new if plain else {int(sid): int(g) for sid, g in new.items()}


def check_capacity(servers: Sequence[Server], delta: Mapping[int, int]) -> None:
    """No server holds more GPUs after the plan than it has (``server-overfull``)."""
    for sid, d in delta.items():
        s = servers[sid]
        if s.used + d > s.num_gpus:
            raise PlanError("server-overfull", f"server {sid}: {s.used + d} GPUs planned, {s.num_gpus} present")


def check_returned_empty(servers: Sequence[Server], give_back: set[int] | frozenset[int],
                         delta: Mapping[int, int]) -> None:
    """No job keeps GPUs on a server given back (``server-unavailable``)."""
    for sid in give_back:
        if servers[sid].used + delta.get(sid, 0) > 0:
            raise PlanError("server-unavailable", f"give_back: server {sid} still holds jobs in the plan")


def check_suspend(suspend: Sequence[str], changes: Sequence[Change]) -> None:
    """Every job suspended is one the plan stops (``bad-suspend``)."""
    stopped = {job.spec.job_id for job, new in changes if new is None}
    for job_id in suspend:
        if job_id not in stopped:
            raise PlanError("bad-suspend", f"suspend: job {job_id!r} is not stopped by this plan")


def validate_batches(plan: Plan, rule: str, jobs_by_id: Mapping[str, Job]) -> list[tuple[Job, float]]:
    """The batch changes of ``plan`` (each a number >= 1 for a queued or running job), allowed
    under the ``adaptive`` scaling ``rule`` only (``bad-batch``, ``unknown-job``)."""
    if not plan.batch_sizes:
        return []
    if rule != "adaptive":
        raise PlanError("bad-batch", f"batch_sizes: the scheduler chooses batches only under scaling: adaptive "
                                     f"(this run: {rule})")
    out = []
    for job_id, batch in plan.batch_sizes.items():
        job = jobs_by_id.get(job_id)
        if job is None or job.state in (JobState.PENDING, JobState.FINISHED):
            raise PlanError("unknown-job", f"batch_sizes: no job {job_id!r} in the system")
        if isinstance(batch, bool) or not isinstance(batch, (int, float, np.integer, np.floating)) \
                or not np.isfinite(batch) or batch < 1:
            raise PlanError("bad-batch", f"batch_sizes[{job_id!r}]: {batch!r} is not a number >= 1")
        if float(batch) != job.batch:
            out.append((job, float(batch)))
    return out
