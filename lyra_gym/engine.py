"""The event-driven co-simulator of a training cluster and an inference cluster.

One engine serves every policy. Events: job arrival, job completion (exact
time from the current rate), inference-demand change, reclaim deadline and the
scheduler's own tick. All events at one instant are processed together and
then form one decision point: the scheduler gets a read-only
:class:`~lyra_gym.view.ClusterView` and returns a :class:`~lyra_gym.plan.Plan`,
which the engine validates completely before applying any of it.

Modelling choices (DESIGN.md "Model contract"):
- An overhead (start/restart, rescale) is time in which the job holds its GPUs
  and makes no progress; its end is folded into the completion time rather
  than being a decision point. A running job changed while inside an overhead
  (e.g. rescaled during its restart) stays stalled until max(old end, now +
  new overhead): a later change never shortens an overhead already paid for.
  A job stopped and started again pays a fresh start overhead.
- Suspend/resume (``Plan.suspend``): a suspended job's state waits in the host
  memory of the servers it ran on. Started again on exactly those servers (the
  same set of server ids) it pays ``overheads.resume_s``; on any other set its
  state must be copied over first, so it pays ``overheads.migrate_s`` and
  counts one migration. A job stopped without ``suspend`` (preempted) pays the
  restart overhead wherever it starts again.
- Preemption checkpoints: no work is lost.
- Reclaiming: when inference demand exceeds the non-loaned inference servers,
  a request for the shortfall opens with deadline ``now + reclaim_grace_s``.
  Servers given back pay off the oldest request first; so does a drop in
  demand. A request still open at its deadline (after the decision at that
  instant) is enforced by the default rule: give back the loaned server with
  the fewest GPUs in use (ties: the highest id); its jobs are scaled in when
  elastic and still at or above their minimum, preempted otherwise. Each server
  returned this way counts one inference violation, and the scheduler gets a
  second decision at the same instant.
- Reclaim disruptions: a job that held workers on a server given back in an
  applied plan (the scheduler's ``give_back`` or the default rule) counts one
  disruption for that plan, whether it was scaled in, moved elsewhere (also a
  migration when its worker count is unchanged) or preempted.
- Returning is immediate: a server given back is serving inference at that
  instant (DESIGN.md's "returning" state has zero length here; a grace period
  is modelled by ``reclaim_grace_s`` instead).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
import weakref
from bisect import bisect_left, insort
from collections import deque
from heapq import heappop, heappush
from typing import Mapping, Sequence

import numpy as np

from lyra_gym.cluster import Pool, Server, build_servers
from lyra_gym.model.config import SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.efficiency import builtin_efficiency, load_efficiency
from lyra_gym.model.jobs import EMPTY_ALLOCATION, Job, JobState
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import ProfileError, ProfileSet
from lyra_gym.model.scaling import PROGRESS_BINS, ScalingModel, bin_end_work, progress_bin
from lyra_gym.plan import FrozenAllocation, PendingAllocations, Plan, PlanError, TrackedAllocations
from lyra_gym.scheduler import Scheduler
from lyra_gym.topology import Topology
from lyra_gym.view import ClusterView, JobView

_COMPLETION, _DEADLINE, _TICK = 0, 1, 2
_RUNNING, _QUEUED, _FINISHED = JobState.RUNNING, JobState.QUEUED, JobState.FINISHED
_NO_SERVERS: frozenset[int] = frozenset()


#: Most GPUs an inelastic job made elastic by ``all_jobs_elastic`` may grow to (adaptdl simulator).
ELASTIC_CAP_GPUS = 64


def _unread(plan: Plan) -> PendingAllocations | None:
    """The pending allocations of a current plan never read (``Plan.assign`` only), else None."""
    unread = getattr(plan, "_unread", None)
    return unread() if unread is not None else None


def as_elastic(spec: JobSpec) -> JobSpec:
    """``spec`` as an elastic job (``SimConfig.all_jobs_elastic``): an inelastic one may run on
    1 to ``max(num_gpus, min(ELASTIC_CAP_GPUS, 2 x num_gpus))`` GPUs; an elastic one is unchanged."""
    if spec.elastic:
        return spec
    top = max(spec.num_gpus, min(ELASTIC_CAP_GPUS, 2 * spec.num_gpus))
    return dataclasses.replace(spec, elastic=True, min_gpus=1, max_gpus=top)


class Engine:
    """Simulates ``jobs`` under ``scheduler``; call :meth:`run` once.

    :param jobs: the trace (any order; sorted by submit time here).
    :param scheduler: the policy.
    :param config: cluster, overheads, loaning settings.
    :param profiles: throughput profiles (every job's model must be in them).
    :param demand: inference demand curve (servers needed over time).
    :param rng: the run's generator (passed on to the scheduler's ``reset``).
    :param progress: show a progress bar on long runs.
    """

    def __init__(
        self,
        jobs: Sequence[JobSpec],
        scheduler: Scheduler,
        config: SimConfig,
        profiles: ProfileSet,
        demand: DemandCurve,
        rng: np.random.Generator,
        progress: bool = False,
    ) -> None:
        self.config = config
        self.profiles = profiles
        self.demand = demand
        self.scheduler = scheduler
        self.rng = rng
        self.progress = progress
        self.servers: list[Server] = build_servers(config.cluster)
        self.inference_servers = [s for s in self.servers if s.pool is Pool.INFERENCE]
        # free GPUs by pool, GPU type and count (DESIGN.md "Cost"), updated on every change
        self.topology = Topology(self.servers)
        self._server_types = [frozenset((s.gpu_type,)) for s in self.servers]  # a job on one server
        self.free = self.topology.free  # free GPUs per server id (0 where training may not go)
        self.reference_gpu = config.reference_gpu or profiles.reference_gpu
        ref_groups = [g for g in config.cluster.training if g.gpu_type == self.reference_gpu]
        self.reference_gpus_per_server = (ref_groups or list(config.cluster.training))[0].gpus_per_server

        efficiency = load_efficiency(config.efficiency) if config.efficiency else builtin_efficiency()
        self.scaling = scaling = ScalingModel(profiles, efficiency, config.scaling, config.noise_scale,
                                              config.batch_limit)
        specs = sorted(jobs, key=lambda j: j.submit_time)  # stable: ties keep trace order
        if config.all_jobs_elastic:
            specs = [as_elastic(spec) for spec in specs]
        self.jobs: list[Job] = []
        self._by_id: dict[str, Job] = {}
        for index, spec in enumerate(specs):
            if spec.model not in profiles:
                raise ProfileError(
                    f"job {spec.job_id!r}: unknown model key {spec.model!r} (known: {', '.join(sorted(profiles.models))})"
                )
            if spec.job_id in self._by_id:
                raise ValueError(f"job_id {spec.job_id!r}: duplicate job id")
            b0 = scaling.initial_batch(spec)
            work = spec.duration * scaling.reference_rate(spec, b0, self.reference_gpu, self.reference_gpus_per_server)
            job = Job(index, spec, work)
            job.init_batch = job.batch = b0
            job.view = JobView(job, self)
            self.jobs.append(job)
            self._by_id[spec.job_id] = job

        self.now = specs[0].submit_time if specs else 0.0
        self.queue: list[int] = []          # queued job indices, ascending = submit order
        self.running: dict[int, None] = {}  # running job indices in start order
        self.running_allocations: dict[str, Mapping[int, int]] = {}  # job id -> allocation, start order
        self.state_version = 0  # bumped by every applied change; dates TrackedAllocations
        self._starts = 0  # start sequence: running_allocations is in ascending Job.start_seq
        self._pending: list[weakref.ref] = []  # current plans handed out (live ones: not read yet)
        # (job id, allocation before, start sequence) of every change of running_allocations since
        # the oldest live pending plan, which _snapshot reads; entry i is change _journal_start + i
        self._journal: list[tuple[str, Mapping[int, int] | None, int]] = []
        self._journal_start = 0
        self.identity = object()  # names this engine in TrackedAllocations (an id() is reused once freed)
        self.finished = 0
        self._next_arrival = 0
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.demand_now = demand.at(self.now)
        self._demand_ptr = int(np.searchsorted(demand.times_s, self.now, side="right"))
        # the hot loop reads plain Python numbers (the same values as the arrays')
        self._demand_times: list[float] = [float(t) for t in demand.times_s]
        self._demand_values: list[int] = [int(v) for v in demand.servers]
        self._arrival_times: list[float] = [job.spec.submit_time for job in self.jobs]
        self._gpus_inf = config.cluster.inference.gpus_per_server
        self._inference_n = len(self.inference_servers)
        self._requests: deque[list[float]] = deque()  # [servers owed, deadline], oldest first
        self.loaned_count = 0
        self._suspended_on: dict[int, frozenset[int]] = {}  # suspended job index -> the server ids it left
        self.view = ClusterView(self)

        # counters for metrics (GPU-seconds are integrated at every clock advance)
        self.start_time = self.now
        self.used_training = 0       # GPUs allocated on training servers
        self.used_loaned = 0         # GPUs allocated on loaned servers
        self.gpu_s_training = 0.0
        self.gpu_s_loaned = 0.0
        self.gpu_s_loaned_capacity = 0.0
        self.gpu_s_inference_busy = 0.0
        self.counts = dict(
            preemptions=0, suspensions=0, scale_ins=0, scale_outs=0, migrations=0, starts=0,
            servers_borrowed=0, servers_returned=0, inference_violations=0, reclaim_disruptions=0,
            events=0, decisions=0,
        )
        self._speeds: dict[tuple[str, frozenset[str]], float] = {}  # (model, GPU types) -> speed
        self._reference_rates: dict[tuple[str, int], float] = {}  # (model, workers) -> reference_throughput
        self._restart_s: dict[str, float] = {}  # model -> its profile's restart overhead
        self.sim_wall_s = 0.0
        self._redecide = False  # a forced reclaim asks for a second decision at the same instant
        self._progress_only = False  # were the last events only jobs' rate changes with progress?
        self.tick_only = False  # this decision point has no event but the scheduler's own tick
        self._changed = True    # did the decisions since the last events change anything?
        self._had_tick = False  # did the last events include a tick?
        self._over = False
        self._last_retry = -1.0  # time of the last extra decision granted at the end of a run
        self._bar = None
        self._wall = time.perf_counter()

    # ------------------------------------------------------------------ helpers
    def reference_throughput(self, model: str, workers: int) -> float:
        """Samples/s of ``workers`` reference GPUs packed onto reference servers."""
        key = (model, workers)
        rate = self._reference_rates.get(key)
        if rate is None:
            rate = self._reference_rates[key] = self.profiles.packed_throughput(
                model, workers, self.reference_gpu, self.reference_gpus_per_server)
        return rate

    def speed(self, model: str, gpu_types: frozenset[str]) -> float:
        """Reference-GPU-s of useful work per GPU-s of ``model`` on workers of ``gpu_types``:
        single-GPU throughput on the slowest of the types / on the reference type
        (synchronous data parallel: the slowest type sets every worker's pace)."""
        key = (model, gpu_types)
        speed = self._speeds.get(key)
        if speed is None:
            ref = self.profiles.throughput(model, 1, 1, frozenset((self.reference_gpu,)))
            speed = min(self.profiles.throughput(model, 1, 1, frozenset((g,))) for g in sorted(gpu_types)) / ref
            self._speeds[key] = speed
        return speed

    def job_by_id(self, job_id: str) -> Job:
        try:
            return self._by_id[job_id]
        except KeyError:
            raise KeyError(f"unknown job id {job_id!r}") from None

    def num_loanable(self) -> int:
        """Idle inference servers not on loan."""
        return max(0, len(self.inference_servers) - self.loaned_count - self.demand_now)

    def reclaim_owed(self) -> int:
        """Loaned servers inference needs back now."""
        return min(self.loaned_count, max(0, self.demand_now - (len(self.inference_servers) - self.loaned_count)))

    def reclaim_deadline(self) -> float | None:
        return self._requests[0][1] if self._requests else None

    def __getstate__(self) -> dict:  # pickling (an env mid-episode): the live pending plans by value
        state = dict(self.__dict__)
        state["_pending"] = [p for p in (ref() for ref in self._pending) if p is not None]
        return state

    def __setstate__(self, state: dict) -> None:
        state["_pending"] = [weakref.ref(p) for p in state["_pending"]]
        self.__dict__.update(state)

    # ------------------------------------------------------------------ current plans
    def pending_allocations(self) -> PendingAllocations:
        """The running allocations now, to be copied only if read (``ClusterView.current_plan``).

        Every later change of ``running_allocations`` is journalled (job id, its allocation before,
        its start sequence), so a pending plan read after the engine moved on still gets the
        allocations of its own instant (``_snapshot``)."""
        if len(self._journal) > 64 or len(self._pending) > 32:
            self._trim_journal()
        pending = PendingAllocations(self._snapshot, (self.identity, self.state_version),
                                     self._journal_start + len(self._journal))
        self._pending.append(weakref.ref(pending))
        return pending

    def _snapshot(self, pending: PendingAllocations) -> Mapping[str, Mapping[int, int]]:
        """The running allocations as they were at ``pending.token``, in start order."""
        current = self.running_allocations
        journal = self._journal
        start = pending.mark - self._journal_start
        if start >= len(journal):
            return current
        before: dict[str, tuple[Mapping[int, int] | None, int]] = {}
        for i in range(start, len(journal)):
            key, old, seq = journal[i]
            if key not in before:
                before[key] = (old, seq)
        by_id = self._by_id
        kept = [(by_id[k].start_seq, k, a) for k, a in current.items() if k not in before]
        gone = sorted((seq, k, a) for k, (a, seq) in before.items() if a is not None)
        return {k: a for _, k, a in heapq.merge(kept, gone)}

    def _trim_journal(self) -> None:
        """Drop the journal entries no live pending plan needs; a pending plan kept alive for
        long gets a copy of its allocations instead (so the journal stays short)."""
        end = self._journal_start + len(self._journal)
        alive = []
        for ref in self._pending:
            pending = ref()
            if pending is not None and pending.base is None:
                alive.append(pending)
        # at most 16 live ones, none older than 4096 changes: the others get their copy now
        for i, pending in enumerate(alive):
            if end - pending.mark > 4096 or i < len(alive) - 16:
                pending.base = dict(self._snapshot(pending))
        self._pending = [weakref.ref(p) for p in alive if p.base is None]
        keep = min((p.mark for p in alive if p.base is None), default=end)
        if keep > self._journal_start:
            del self._journal[:keep - self._journal_start]
            self._journal_start = keep

    def _push(self, t: float, kind: int, index: int = -1, version: int = 0) -> None:
        self._seq += 1
        heappush(self._heap, (t, self._seq, kind, index, version))

    def _live_top(self) -> tuple[float, int, int, int, int] | None:
        """The earliest heap entry ``(time s, seq, kind, job index, job version)`` still due, or
        None: stale completions (of a job changed or stopped since) are dropped on the way."""
        heap, jobs = self._heap, self.jobs
        while heap:
            top = heap[0]
            if top[2] == _COMPLETION:
                job = jobs[top[3]]
                if job.version != top[4] or job.state is not _RUNNING:
                    heappop(heap)
                    continue
            return top
        return None

    # ------------------------------------------------------------------ main loop
    def run(self) -> "Engine":
        """Simulate until every job finished, nothing can change, or the horizon."""
        self.begin()
        next_decision, submit, decide, view = self.next_decision, self.submit, self.scheduler.decide, self.view
        while next_decision():
            submit(decide(view))
        self.finish()
        return self

    def begin(self) -> None:
        """Prepare a run (scheduler reset, first tick). Then alternate :meth:`next_decision`
        and :meth:`submit`, and call :meth:`finish` at the end (this is what :meth:`run` does;
        the Gymnasium environments drive the same loop one decision at a time)."""
        from tqdm import tqdm

        self._wall = time.perf_counter()
        self.scheduler.reset(self.rng)
        tick = self.scheduler.tick_interval
        if tick is not None:
            if tick <= 0:
                raise ValueError(f"{type(self.scheduler).__name__}.tick_interval: must be > 0, got {tick}")
            origin = getattr(self.scheduler, "tick_origin", None)
            if origin is None:
                self._push(self.now + tick, _TICK)
            else:  # the first grid point after now: origin + k * tick
                self._push(origin + (math.floor((self.now - origin) / tick) + 1) * tick, _TICK)
        self._bar = tqdm(total=len(self.jobs), delay=2.0, unit="job", leave=False) if self.progress else None

    def next_decision(self) -> bool:
        """Process events up to the next decision point; False when the simulation is over."""
        if self._over:
            return False
        if self._redecide:
            self._redecide = self.tick_only = False
            return True
        jobs_n = len(self.jobs)
        demand_times = self._demand_times
        demand_n = len(demand_times)
        if (
            not self.running
            and self._next_arrival >= jobs_n
            and self._demand_ptr >= demand_n
            and self.counts["decisions"]
        ):
            if self._changed and self.queue and self._last_retry != self.now:
                # the last decision changed the cluster (e.g. returned servers): let the scheduler
                # look once more at the same instant before declaring the queued jobs stuck
                self._last_retry, self._changed = self.now, False
                self.tick_only = False
                return True
            rounds = getattr(self.scheduler, "tick_origin", None) is not None
            if self.scheduler.tick_interval is None or (not self._changed and (not rounds or self._had_tick)):
                # a scheduler on a round grid (tick_origin) may wait for its next round: stop
                # only after a decision at a round changed nothing
                self._over = True  # nothing can change any more: the queued jobs stay unfinished
                return False
        arrivals, live_top = self._arrival_times, self._live_top
        times, values = self.demand.times_s, self.demand.servers
        horizon = self.config.horizon_s
        while self.finished < jobs_n:
            # the next event: the earliest of the next arrival, demand change and live heap entry
            i = self._next_arrival
            t = arrivals[i] if i < jobs_n else None
            i = self._demand_ptr
            if i < demand_n:
                d = demand_times[i]
                if t is None or d < t:
                    t = d
            top = live_top()
            if top is not None and (t is None or top[0] < t):
                t = top[0]
            if t is None:
                break
            if horizon is not None and t > horizon:
                self._advance_clock(horizon)
                break
            self._advance_clock(t)
            if self._bar is None:
                self.tick_only = self._process_events(t, times, values)
            else:
                done_before = self.finished
                self.tick_only = self._process_events(t, times, values)
                self._bar.update(self.finished - done_before)
            if self.finished == jobs_n:
                break
            if self._progress_only:
                continue  # only rates changed inside jobs: no decision point
            self._changed = False
            return True
        self._over = True
        return False

    def submit(self, plan: Plan) -> bool:
        """Apply the scheduler's Plan for the current decision point, then enforce overdue
        reclaims (which asks for another decision at the same instant). Returns whether
        anything changed."""
        self.counts["decisions"] += 1
        changed = self.apply(plan)
        if self._requests and self._enforce_reclaims():
            self._redecide = changed = True
        self._changed = self._changed or changed
        return changed

    def finish(self) -> None:
        """Close the run (progress bar, wall time)."""
        if self._bar is not None:
            self._bar.close()
        self.sim_wall_s = time.perf_counter() - self._wall

    def _decide(self) -> bool:
        """One decision point by the engine's own scheduler; returns whether the plan changed anything."""
        return self.submit(self.scheduler.decide(self.view))

    def _advance_clock(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            gpus_inf = self._gpus_inf
            loaned = self.loaned_count
            self.gpu_s_training += self.used_training * dt
            if loaned:  # (else both terms are 0.0: adding them changes nothing)
                self.gpu_s_loaned += self.used_loaned * dt
                self.gpu_s_loaned_capacity += loaned * gpus_inf * dt
            serving = self._inference_n - loaned
            if self.demand_now < serving:
                serving = self.demand_now
            self.gpu_s_inference_busy += serving * gpus_inf * dt
            self.now = t

    def _process_events(self, t: float, times: np.ndarray, values: np.ndarray) -> bool:
        """Apply every event at ``t``; True when the only ones were the scheduler's ticks."""
        jobs = self.jobs
        jobs_n = len(jobs)
        events = ticks = progress = 0
        arrivals = self._arrival_times
        i = self._next_arrival
        if i < jobs_n and arrivals[i] <= t:
            queue = self.queue
            while i < jobs_n and arrivals[i] <= t:
                job = jobs[i]
                job.state = _QUEUED
                job.queued_since = job.last_update = arrivals[i]
                queue.append(i)  # arrivals come in index order, after any re-queued job
                i += 1
                events += 1
            self._next_arrival = i
        heap = self._heap
        while heap and heap[0][0] <= t:  # (entries after t wait, stale or not)
            top = self._live_top()
            if top is None or top[0] > t:
                break
            heappop(heap)
            kind = top[2]
            if kind == _COMPLETION:
                job = jobs[top[3]]
                if job.milestone_work >= job.total_work:
                    self._finish(job)
                else:
                    self._progress_event(job)  # a change of rate inside a job: not an event
                    progress += 1
                    continue
            events += 1
            if kind == _TICK:
                ticks += 1
                if self.finished < jobs_n:
                    self._push(t + self.scheduler.tick_interval, _TICK)
        demand_times = self._demand_times
        i = self._demand_ptr
        if i < len(demand_times) and demand_times[i] <= t:
            while i < len(demand_times) and demand_times[i] <= t:
                self.demand_now = self._demand_values[i]
                i += 1
                events += 1
            self._demand_ptr = i
            self._sync_requests()
        self.counts["events"] += events
        self._progress_only = progress > 0 and events == 0
        self._had_tick = ticks > 0
        return ticks > 0 and events == ticks

    def _finish(self, job: Job) -> None:
        now = self.now
        job.advance(now)
        job.work_done = job.total_work
        self._release(job)
        job.allocation, job.workers, job.servers_used, job.rate = EMPTY_ALLOCATION, 0, 0, 0.0
        job.state = _FINISHED
        job.finish_time = now
        job.version += 1
        job_id = job.spec.job_id
        self._journal.append((job_id, self.running_allocations.pop(job_id), job.start_seq))
        del self.running[job.index]
        self.state_version += 1
        self.finished += 1

    # ------------------------------------------------------------------ reclaiming
    def _sync_requests(self) -> None:
        """Keep the open reclaim requests summing to what inference is owed."""
        owed = self.reclaim_owed()
        total = sum(r[0] for r in self._requests)
        if owed > total:
            deadline = self.now + self.config.reclaim_grace_s
            self._requests.append([owed - total, deadline])
            if deadline > self.now:
                self._push(deadline, _DEADLINE)
        excess = total - owed
        while excess > 0 and self._requests:
            paid = min(excess, self._requests[0][0])
            self._requests[0][0] -= paid
            excess -= paid
            if self._requests[0][0] <= 0:
                self._requests.popleft()

    def _enforce_reclaims(self) -> bool:
        """Return servers of overdue requests by the default rule; True if any."""
        if not self._requests:
            return False
        due = sum(int(n) for n, deadline in self._requests if deadline <= self.now)
        if due <= 0:
            return False
        loaned = [s for s in self.inference_servers if s.loaned]
        loaned.sort(key=lambda s: (s.used, -s.id))
        victims = loaned[:due]
        plan = self.view.current_plan()
        for server in victims:
            for index in list(server.jobs):
                job = self.jobs[index]
                if job.spec.job_id not in plan.allocations:
                    continue  # already preempted by an earlier victim
                remaining = {sid: g for sid, g in plan.allocations[job.spec.job_id].items() if sid != server.id}
                if job.spec.elastic and sum(remaining.values()) >= job.spec.min_gpus:
                    plan.allocations[job.spec.job_id] = remaining
                else:
                    del plan.allocations[job.spec.job_id]
        plan.give_back = tuple(s.id for s in victims)
        self.apply(plan)
        self.counts["inference_violations"] += len(victims)
        return True

    # ------------------------------------------------------------------ decisions
    def apply(self, plan: Plan) -> bool:
        """Validate ``plan`` completely, then apply it; raises PlanError and changes nothing if invalid."""
        pending = plan.__dict__.get("_pending") if type(plan) is Plan else _unread(plan)
        if pending is not None and pending.token != (self.identity, self.state_version):
            pending = None  # a current plan of an earlier state: checked in full
        if (pending is not None and not pending.writes
                and not plan.borrow and not plan.give_back and not plan.suspend and not plan.batch_sizes):
            return False  # the current plan, unchanged: nothing to check or do
        changes = self._validate(plan, pending)
        batches = self._validate_batches(plan) if plan.batch_sizes else []
        if not changes and not plan.borrow and not plan.give_back and not batches:
            return False
        now = self.now
        self.state_version += 1
        if plan.give_back:  # every job on a returned server is in ``changes`` (validated above)
            disrupted = {index for sid in plan.give_back for index in self.servers[sid].jobs}
            for index in disrupted:
                self.jobs[index].reclaim_disruptions += 1
            self.counts["reclaim_disruptions"] += len(disrupted)
        topology = self.topology
        for sid in plan.borrow:
            self.servers[sid].loaned = True
            topology._loan(sid)
            self.loaned_count += 1
            self.counts["servers_borrowed"] += 1
        for job, _ in changes:  # release everything first so moves between jobs are consistent
            if job.allocation:  # (a queued job: _assign sets its clock)
                job.advance(now)
                self._release(job)
        for job, batch in batches:
            job.batch = batch
        suspend = plan.suspend
        if suspend:
            suspend = set(suspend)
            for job, new in changes:
                self._assign(job, new, job.spec.job_id in suspend)
        else:
            for job, new in changes:
                self._assign(job, new)
        if batches:
            reassigned = {job.index for job, _ in changes}
            for job, _ in batches:  # a running job with only a new batch: new rate, no overhead
                if job.state is JobState.RUNNING and job.index not in reassigned:
                    job.advance(now)
                    job.version += 1
                    job.progress_bin = progress_bin(job.work_done, job.total_work)
                    self._set_rate(job)
        for sid in plan.give_back:
            self.servers[sid].loaned = False
            topology._unloan(sid)
            self.loaned_count -= 1
            self.counts["servers_returned"] += 1
        if plan.borrow or plan.give_back:
            self._sync_requests()
        return True

    def _validate(self, plan: Plan, pending: PendingAllocations | None) -> list[tuple[Job, Mapping[int, int] | None]]:
        """The job changes of ``plan``, checked completely (raises PlanError); ``pending``: its
        allocations when it is a current plan of this state not read since (only ``Plan.assign``)."""
        servers = self.servers
        n_servers = len(servers)
        server_of = self._server_of
        borrow: set[int] | frozenset[int] = _NO_SERVERS
        give_back: set[int] | frozenset[int] = _NO_SERVERS
        if plan.borrow:
            borrow = set()
            for sid in plan.borrow:
                s = server_of(sid, "borrow")
                if s.pool is not Pool.INFERENCE or s.loaned or sid in borrow:
                    raise PlanError("not-loanable", f"borrow: server {sid} is not an idle inference server off loan")
                borrow.add(int(sid))
            if len(borrow) > self.num_loanable():
                raise PlanError("not-loanable", f"borrow: {len(borrow)} servers asked, {self.num_loanable()} loanable")
        if plan.give_back:
            give_back = set()
            for sid in plan.give_back:
                s = server_of(sid, "give_back")
                if not s.loaned or sid in give_back:
                    raise PlanError("not-on-loan", f"give_back: server {sid} is not on loan")
                give_back.add(int(sid))

        changes: list[tuple[Job, Mapping[int, int] | None]] = []
        if pending is not None:
            allocations = pending.writes or {}  # a current plan changed by Plan.assign only
            candidates = list(allocations)
        else:
            allocations = plan.allocations
            if type(allocations) is TrackedAllocations and allocations.token == (self.identity, self.state_version):
                candidates = list(allocations.touched)  # every other entry is the current allocation
            else:  # plan order, then running jobs the plan leaves out (ordered: runs are reproducible)
                candidates = [*allocations, *(k for k in self.running_allocations if k not in allocations)]
        by_id = self._by_id
        running, queued = _RUNNING, _QUEUED
        for job_id in candidates:
            job = by_id.get(job_id)
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
        if not changes and not give_back and not plan.suspend:
            return changes

        delta: dict[int, int] = {}
        mixed_ok = self.config.allow_mixed_gpu_types
        training = Pool.TRAINING
        for k, (job, new) in enumerate(changes):
            for sid, gpus in job.allocation.items():
                delta[sid] = delta.get(sid, 0) - gpus
            if new is None:
                continue
            total = 0
            gpu_type = None
            mixed = False
            plain = True  # every server id and GPU count a plain int?
            for sid, gpus in new.items():
                if type(sid) is int and 0 <= sid < n_servers:
                    s = servers[sid]
                else:
                    s = server_of(sid, f"allocations[{job.spec.job_id!r}]")
                    plain = False
                if type(gpus) is not int or gpus < 1:
                    if not isinstance(gpus, (int, np.integer)) or isinstance(gpus, bool) or gpus < 1:
                        raise PlanError("bad-gpu-count", f"allocations[{job.spec.job_id!r}]: server {sid} given "
                                                         f"{gpus!r} GPUs (need an int >= 1)")
                    gpus = int(gpus)
                    plain = False
                if not (s.pool is training or (s.loaned and s.id not in give_back) or s.id in borrow):
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
                raise PlanError(
                    "worker-range", f"allocations[{job.spec.job_id!r}]: {total} GPUs outside [{spec.min_gpus}, "
                                    f"{spec.max_gpus}]"
                )
            if not mixed_ok and mixed:
                gpu_types = sorted({servers[int(sid)].gpu_type for sid in new})
                raise PlanError("mixed-gpu-types", f"allocations[{job.spec.job_id!r}]: spans GPU types {gpu_types}")
            if not plain:  # the engine keeps plain ints (e.g. not numpy integers)
                changes[k] = (job, {int(sid): int(g) for sid, g in new.items()})
        for sid, d in delta.items():
            s = servers[sid]
            if s.used + d > s.num_gpus:
                raise PlanError("server-overfull", f"server {sid}: {s.used + d} GPUs planned, {s.num_gpus} present")
        for sid in give_back:
            if servers[sid].used + delta.get(sid, 0) > 0:
                raise PlanError("server-unavailable", f"give_back: server {sid} still holds jobs in the plan")
        if plan.suspend:
            stopped = {job.spec.job_id for job, new in changes if new is None}
            for job_id in plan.suspend:
                if job_id not in stopped:
                    raise PlanError("bad-suspend", f"suspend: job {job_id!r} is not stopped by this plan")
        return changes

    def _server_of(self, sid: object, where: str) -> Server:
        """The server with id ``sid`` (an int, numpy integers too); PlanError if there is none."""
        if not isinstance(sid, (int, np.integer)) or isinstance(sid, bool) or not 0 <= sid < len(self.servers):
            raise PlanError("unknown-server", f"{where}: no server with id {sid!r}")
        return self.servers[int(sid)]

    def _validate_batches(self, plan: Plan) -> list[tuple[Job, float]]:
        """The batch changes of ``plan`` (adaptive scaling only), validated."""
        if not plan.batch_sizes:
            return []
        if self.scaling.rule != "adaptive":
            raise PlanError("bad-batch", f"batch_sizes: the scheduler chooses batches only under scaling: adaptive "
                                         f"(this run: {self.scaling.rule})")
        out = []
        for job_id, batch in plan.batch_sizes.items():
            job = self._by_id.get(job_id)
            if job is None or job.state in (JobState.PENDING, JobState.FINISHED):
                raise PlanError("unknown-job", f"batch_sizes: no job {job_id!r} in the system")
            if isinstance(batch, bool) or not isinstance(batch, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(batch) or batch < 1:
                raise PlanError("bad-batch", f"batch_sizes[{job_id!r}]: {batch!r} is not a number >= 1")
            if float(batch) != job.batch:
                out.append((job, float(batch)))
        return out

    def _release(self, job: Job) -> None:
        servers, index = self.servers, job.index
        training = Pool.TRAINING
        allocation = job.allocation
        total = on_training = 0
        for sid, gpus in allocation.items():
            s = servers[sid]
            s.used -= gpus
            del s.jobs[index]
            total += gpus
            if s.pool is training:
                on_training += gpus
        self.used_training -= on_training
        if total != on_training:
            self.used_loaned -= total - on_training
        self.topology._add(allocation, 1)

    def _assign(self, job: Job, new: Mapping[int, int] | None, suspend: bool = False) -> None:
        """Give ``job`` allocation ``new`` (None = preempt, or suspend); its old allocation is already released."""
        now, counts = self.now, self.counts
        was_running = job.state is _RUNNING
        old_workers, old_allocation = job.workers, job.allocation
        job.version += 1
        if not new:
            job.allocation, job.workers, job.servers_used, job.rate = EMPTY_ALLOCATION, 0, 0, 0.0
            job.state = _QUEUED
            job.queued_since = now
            job.suspended = suspend
            if suspend:
                self._suspended_on[job.index] = frozenset(old_allocation)
                counts["suspensions"] += 1
            else:
                job.preemptions += 1
                counts["preemptions"] += 1
            self._journal.append((job.spec.job_id, old_allocation, job.start_seq))
            del self.running[job.index]
            del self.running_allocations[job.spec.job_id]
            insort(self.queue, job.index)
            return
        allocation = FrozenAllocation(new)  # plain ints (_validate converted any others)
        servers, index = self.servers, job.index
        training = Pool.TRAINING
        workers = on_training = 0
        for sid, gpus in allocation.items():
            workers += gpus
            s = servers[sid]
            s.used += gpus
            s.jobs[index] = gpus
            if s.pool is training:
                on_training += gpus
        self.used_training += on_training
        if workers != on_training:
            self.used_loaned += workers - on_training
        self.topology._add(allocation, -1)
        overheads = self.config.overheads
        if was_running:
            overhead = overheads.rescale_s
            if workers > old_workers:
                job.scale_outs += 1
                counts["scale_outs"] += 1
            elif workers < old_workers:
                job.scale_ins += 1
                counts["scale_ins"] += 1
            else:
                overhead = overheads.migrate_s
                job.migrations += 1
                counts["migrations"] += 1
        else:
            if job.suspended:  # resumed from host memory: cheap only where the state is
                if self._suspended_on.pop(index) == frozenset(allocation):
                    overhead = overheads.resume_s
                else:
                    overhead = overheads.migrate_s
                    job.migrations += 1
                    counts["migrations"] += 1
                job.suspended = False
            elif overheads.restart_s is not None:
                overhead = overheads.restart_s
            else:
                overhead = self._restart_s.get(job.spec.model)
                if overhead is None:
                    overhead = self._restart_s[job.spec.model] = self.profiles.model(job.spec.model).restart_overhead_s
            queue = self.queue
            del queue[bisect_left(queue, index)]
            self.running[index] = None
            self._starts += 1
            job.start_seq = self._starts
            job.state = _RUNNING
            job.queued_total += now - job.queued_since
            if job.first_start is None:
                job.first_start = now
            counts["starts"] += 1
        job.allocation = allocation
        spec = job.spec
        self._journal.append((spec.job_id, old_allocation if was_running else None, job.start_seq))
        self.running_allocations[spec.job_id] = allocation
        job.workers = workers
        job.servers_used = servers_used = len(allocation)
        if servers_used == 1:
            for sid in allocation:
                gpu_types = self._server_types[sid]
        else:
            gpu_types = frozenset(servers[sid].gpu_type for sid in allocation)
        speed = self._speeds.get((spec.model, gpu_types))
        job.speed = speed if speed is not None else self.speed(spec.model, gpu_types)
        job.last_update = now
        # a running job changed inside an overhead stays stalled at least until the old end
        job.overhead_until = max(job.overhead_until, now + overhead) if was_running else now + overhead
        total = job.total_work  # progress_bin(job.work_done, total), inline
        job.progress_bin = PROGRESS_BINS - 1 if total <= 0 else min(PROGRESS_BINS - 1,
                                                                     int(job.work_done / total * PROGRESS_BINS))
        self._set_rate(job, gpu_types)

    def _set_rate(self, job: Job, gpu_types: frozenset[str] | None = None) -> None:
        """The job's rate for its allocation (on ``gpu_types``), batch and progress part; its next
        completion or progress event (``job.advance`` done, ``job.progress_bin`` set)."""
        allocation = job.allocation
        if gpu_types is None:
            gpu_types = frozenset(self.servers[sid].gpu_type for sid in allocation)
        rate, job.efficiency, needs_bins = self.scaling.rate_for(
            job.spec, job.init_batch, job.workers, len(allocation), gpu_types, job.batch, job.progress_bin)
        job.rate = rate
        if needs_bins:
            job.milestone_work = milestone = bin_end_work(job.progress_bin, job.total_work)
        else:
            job.milestone_work = milestone = job.total_work
        self._seq += 1
        # job.next_event_time(), inline
        at = max(job.last_update, job.overhead_until) + max(0.0, milestone - job.work_done) / rate
        heappush(self._heap, (at, self._seq, _COMPLETION, job.index, job.version))

    def _progress_event(self, job: Job) -> bool:
        """A job's completion-or-progress event: finish it, or move it into the next part of its
        progress (new rate, no decision point). Returns whether it finished."""
        if job.milestone_work >= job.total_work:
            self._finish(job)
            return True
        job.advance(self.now)
        job.work_done = job.milestone_work  # exact at the event, as a completion sets total_work
        job.progress_bin += 1
        self._set_rate(job)
        return False
