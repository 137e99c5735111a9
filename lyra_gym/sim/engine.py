"""The event-driven co-simulator of a training cluster and an inference cluster.

One engine serves every policy. Events: job arrival, job completion (exact time from the current
rate), inference-demand change, reclaim deadline and the scheduler's own tick. All events at one
instant are processed together and then form one decision point: the scheduler gets a read-only
:class:`~lyra_gym.sim.view.ClusterView` and returns a :class:`~lyra_gym.sim.plan.Plan`, which the
engine validates completely before applying any of it. What the views tell of durations is the
run's knowledge model (:mod:`lyra_gym.model.knowledge`); the engine keeps the truth.

Modelling choices (DESIGN.md "Model contract"): overheads, suspend/resume and preemption in
:mod:`lyra_gym.sim.overheads`; reclaiming in :mod:`lyra_gym.sim.reclaim`; the rest in :mod:`lyra_gym.sim`.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left, insort
from heapq import heappop, heappush
from typing import Mapping, Sequence

import numpy as np

from lyra_gym.model.config import SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.efficiency import EfficiencyTable
from lyra_gym.model.feasibility import check_gpu_types
from lyra_gym.model.jobs import EMPTY_ALLOCATION, Job, JobState
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.knowledge import build_knowledge
from lyra_gym.model.profiles import ProfileSet
from lyra_gym.model.scaling import PROGRESS_BINS, ScalingModel, bin_end_work, progress_bin
from lyra_gym.sim.accounting import Accounting, accounted
from lyra_gym.sim.cluster import Pool, Server, build_servers
from lyra_gym.sim.events import COMPLETION, DEADLINE, TICK, Entry, EventQueue
from lyra_gym.sim.inputs import ProgressBar, ProgressFactory, efficiency_of, tqdm_bar
from lyra_gym.sim.journal import AllocationJournal
from lyra_gym.sim.occupancy import hold, lend, release, take_back
from lyra_gym.sim.overheads import OverheadModel
from lyra_gym.sim.params import checked_tick
from lyra_gym.sim.plan import FrozenAllocation, PendingAllocations, Plan, unchanged_current, unread_pending
from lyra_gym.sim.rates import RateTables
from lyra_gym.sim.reclaim import ReclaimLedger, free_victims, loanable, owed, reclaim_victims
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.sim.topology import Topology
from lyra_gym.sim.trace_jobs import ELASTIC_CAP_GPUS, as_elastic, build_jobs
from lyra_gym.sim.validate import validate_batches, validate_plan, validate_starts
from lyra_gym.sim.view import ClusterView, attach_views

__all__ = ["ELASTIC_CAP_GPUS", "Engine", "as_elastic"]

_COMPLETION, _DEADLINE, _TICK = COMPLETION, DEADLINE, TICK  # the names tests and older code import
_RUNNING, _QUEUED, _FINISHED = JobState.RUNNING, JobState.QUEUED, JobState.FINISHED


class Engine:
    """Simulates ``jobs`` under ``scheduler``; call :meth:`run` once.

    :param jobs: the trace (any order; sorted by submit time here).
    :param scheduler: the policy.
    :param config: cluster, overheads, loaning settings.
    :param profiles: throughput profiles (every job's model must be in them).
    :param demand: inference demand curve (servers needed over time).
    :param rng: the run's generator (passed on to the scheduler's ``reset``).
    :param progress: show a progress bar on long runs: True for tqdm on stderr
        (:func:`lyra_gym.sim.inputs.tqdm_bar`), or a factory ``total jobs -> bar``.
    :param efficiency: the statistical-efficiency table; default: the one ``config.efficiency``
        names, else the built-in one (:func:`lyra_gym.sim.inputs.efficiency_of`).
    :param knowledge_seed: the duration estimates' stream (``config.knowledge``; ``estimate`` only).
    """

    used_training = accounted("used_training", "GPUs allocated on training servers now.")
    used_loaned = accounted("used_loaned", "GPUs allocated on loaned servers now.")
    gpu_s_training = accounted("gpu_s_training", "GPU-s allocated on training servers so far.")
    gpu_s_loaned = accounted("gpu_s_loaned", "GPU-s allocated on loaned servers so far.")
    gpu_s_loaned_capacity = accounted("gpu_s_loaned_capacity", "GPU-s of servers on loan so far.")
    gpu_s_inference_busy = accounted("gpu_s_inference_busy", "GPU-s of inference servers serving so far.")
    start_time = accounted("start_time", "Simulated time of the run's start (s).")
    sim_wall_s = accounted("sim_wall_s", "Wall-clock seconds the run took.")

    def __init__(
        self,
        jobs: Sequence[JobSpec],
        scheduler: Scheduler,
        config: SimConfig,
        profiles: ProfileSet,
        demand: DemandCurve,
        rng: np.random.Generator,
        progress: bool | ProgressFactory = False,
        efficiency: EfficiencyTable | None = None,
        knowledge_seed: np.random.SeedSequence | None = None,
    ) -> None:
        self.config = config
        self.profiles = profiles
        self.demand = demand
        self.scheduler = scheduler
        self.rng = rng
        self.progress = progress
        check_gpu_types(config, profiles)
        self.servers: list[Server] = build_servers(config.cluster)
        self.inference_servers = [s for s in self.servers if s.pool is Pool.INFERENCE]
        # free GPUs by pool, GPU type and count (DESIGN.md "Cost"), updated on every change
        self.topology = Topology(self.servers)
        self._server_types = [frozenset((s.gpu_type,)) for s in self.servers]  # a job on one server
        self.free = self.topology.free  # free GPUs per server id (0 where training may not go)
        self.reference_gpu = config.reference_gpu or profiles.reference_gpu
        ref_groups = [g for g in config.cluster.training if g.gpu_type == self.reference_gpu]
        self.reference_gpus_per_server = (ref_groups or list(config.cluster.training))[0].gpus_per_server
        self.scaling = ScalingModel(profiles, efficiency if efficiency is not None else efficiency_of(config),
                                    config.scaling, config.noise_scale, config.batch_limit)
        self.jobs: list[Job] = build_jobs(jobs, profiles, self.scaling, self.reference_gpu,
                                          self.reference_gpus_per_server, config.all_jobs_elastic)
        self._by_id: dict[str, Job] = {job.spec.job_id: job for job in self.jobs}
        self._job_types: list[frozenset[str] | None] = [None] * len(self.jobs)  # GPU types by job (_assign)
        self.knowledge = build_knowledge(config.knowledge, self.jobs, knowledge_seed)  # None: oracle
        attach_views(self.jobs, self, self.knowledge)  # what schedulers see of each job

        self.now = self.jobs[0].spec.submit_time if self.jobs else 0.0
        self.queue: list[int] = []          # queued job indices, ascending = submit order
        self.running: dict[int, None] = {}  # running job indices in start order
        self.running_allocations: dict[str, Mapping[int, int]] = {}  # job id -> allocation, start order
        self.state_version = 0  # bumped by every applied change; dates TrackedAllocations
        self._starts = 0  # start sequence: running_allocations is in ascending Job.start_seq
        self.journal = AllocationJournal(self.running_allocations, self._by_id)
        self._journal = self.journal.entries  # every change of running_allocations is appended here
        self.identity = object()  # names this engine in TrackedAllocations (an id() is reused once freed)
        self.finished = 0
        self._next_arrival = 0
        self.events = EventQueue(self.jobs)
        self._heap = self.events.heap
        self.demand_now = demand.at(self.now)
        self._demand_ptr = int(np.searchsorted(demand.times_s, self.now, side="right"))
        # the hot loop reads plain Python numbers (the same values as the arrays')
        self._demand_times: list[float] = [float(t) for t in demand.times_s]
        self._demand_values: list[int] = [int(v) for v in demand.servers]
        self._arrival_times: list[float] = [job.spec.submit_time for job in self.jobs]
        self._inference_n = len(self.inference_servers)
        self.reclaims = ReclaimLedger(config.reclaim_grace_s)
        self._requests = self.reclaims.requests  # [servers owed, deadline], oldest first
        self.loaned_count = 0
        self.view = ClusterView(self)

        # counters for metrics (GPU-seconds are integrated at every clock advance)
        self.accounting = Accounting(self.now, config.cluster.inference.gpus_per_server, self._inference_n)
        self.counts = self.accounting.counts
        self.overheads = OverheadModel(config.overheads, profiles, self.counts)
        self.overheads.set_checkpoints(self.jobs)
        self.rates = RateTables(profiles, self.reference_gpu, self.reference_gpus_per_server)
        self._speeds = self.rates.speeds  # read inline by _assign
        self._redecide = False  # a forced reclaim asks for a second decision at the same instant
        self._progress_only = False  # were the last events only jobs' rate changes with progress?
        self.tick_only = False  # this decision point has no event but the scheduler's own tick
        self._changed = True    # did the decisions since the last events change anything?
        self._had_tick = False  # did the last events include a tick?
        self._over = False
        self._last_retry = -1.0  # time of the last extra decision granted at the end of a run
        self._bar: ProgressBar | None = None
        self._wall = time.perf_counter()

    # ------------------------------------------------------------------ helpers
    def reference_throughput(self, model: str, workers: int) -> float:
        """Samples/s of ``workers`` reference GPUs packed onto reference servers."""
        return self.rates.reference_throughput(model, workers)

    def speed(self, model: str, gpu_types: frozenset[str]) -> float:
        """Reference-GPU-s of useful work per GPU-s of ``model`` on ``gpu_types`` (:class:`RateTables`)."""
        return self.rates.speed(model, gpu_types)

    def job_by_id(self, job_id: str) -> Job:
        try:
            return self._by_id[job_id]
        except KeyError:
            raise KeyError(f"unknown job id {job_id!r}") from None

    def num_loanable(self) -> int:
        """Idle inference servers not on loan."""
        return loanable(self._inference_n, self.loaned_count, self.demand_now)

    def reclaim_owed(self) -> int:
        """Loaned servers inference needs back now."""
        return owed(self._inference_n, self.loaned_count, self.demand_now)

    def reclaim_deadline(self) -> float | None:
        return self.reclaims.deadline()

    def pending_allocations(self) -> PendingAllocations:
        """The running allocations now, to be copied only if read (``ClusterView.current_plan``;
        :class:`lyra_gym.sim.journal.AllocationJournal`)."""
        return self.journal.pending_allocations((self.identity, self.state_version))

    # the event queue and the journal under the names tests and older code read
    @property
    def _seq(self) -> int:
        return self.events.seq

    @property
    def _pending(self) -> list:
        return self.journal.pending

    def _push(self, t: float, kind: int, index: int = -1, version: int = 0) -> None:
        self.events.push(t, kind, index, version)

    def _live_top(self) -> Entry | None:
        return self.events.live_top()

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
        self._wall = time.perf_counter()
        self.scheduler.reset(self.rng)
        tick = checked_tick(self.scheduler)
        if tick is not None:
            origin = getattr(self.scheduler, "tick_origin", None)
            if origin is None:
                self._push(self.now + tick, _TICK)
            else:  # the first grid point after now: origin + k * tick
                self._push(origin + (math.floor((self.now - origin) / tick) + 1) * tick, _TICK)
        factory = tqdm_bar if self.progress is True else self.progress or None
        self._bar = factory(len(self.jobs)) if factory is not None else None

    def _stuck(self) -> bool | None:
        """With nothing left to happen (no running job, arrival or demand change): True to end
        the run, False to grant one more decision at this instant, None to go on."""
        if self._changed and self.queue and self._last_retry != self.now:
            # the last decision changed the cluster (e.g. returned servers): one more look, same instant
            self._last_retry, self._changed = self.now, False
            self.tick_only = False
            return False
        rounds = getattr(self.scheduler, "tick_origin", None) is not None
        if self.scheduler.tick_interval is None or (not self._changed and (not rounds or self._had_tick)):
            # on a round grid (tick_origin) stop only after a decision at a round changed nothing
            self._over = True  # nothing can change any more: the queued jobs stay unfinished
            return True
        return None

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
        if not self.running and self._next_arrival >= jobs_n and self._demand_ptr >= demand_n \
                and self.counts["decisions"]:
            stuck = self._stuck()
            if stuck is not None:
                return not stuck
        arrivals, live_top, demand = self._arrival_times, self.events.live_top, self.demand
        horizon, integrate = self.config.horizon_s, self.accounting.integrate
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
            dt = t - self.now  # self._advance_clock(t), inline
            if dt > 0:
                integrate(dt, self.loaned_count, self.demand_now)
                self.now = t
            if self._bar is None:
                self.tick_only = self._process_events(t, demand.times_s, demand.servers)
            else:
                done_before = self.finished
                self.tick_only = self._process_events(t, demand.times_s, demand.servers)
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
        if type(plan) is Plan and unchanged_current(plan, (self.identity, self.state_version)):
            changed = False  # apply's first shortcut, without the call
        else:
            changed = self.apply(plan)
        if self._requests and self._enforce_reclaims():
            self._redecide = changed = True
        self._changed = self._changed or changed
        return changed

    def finish(self) -> None:
        """Close the run (progress bar, wall time)."""
        if self._bar is not None:
            self._bar.close()
        self.accounting.sim_wall_s = time.perf_counter() - self._wall

    def _decide(self) -> bool:
        """One decision point by the engine's own scheduler; returns whether the plan changed anything."""
        return self.submit(self.scheduler.decide(self.view))

    def _advance_clock(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            self.accounting.integrate(dt, self.loaned_count, self.demand_now)
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
        heap, now = self._heap, self.now
        while heap:  # the entries due by t (EventQueue.live_top, inline; entries after t wait, stale or not)
            top = heap[0]
            if top[0] > t:
                break
            heappop(heap)
            kind = top[2]
            if kind == _COMPLETION:
                job = jobs[top[3]]
                if job.version != top[4] or job.state is not _RUNNING:
                    continue  # stale: the job changed or stopped since
                if job.milestone_work >= job.total_work:
                    self._finish(job)
                else:  # a change of rate inside a job, into its next progress part: not an event
                    job.advance(now)
                    job.work_done = job.milestone_work  # exact at the event, as a completion sets total_work
                    job.progress_bin += 1
                    self._set_rate(job, self._job_types[job.index])
                    progress += 1
                    continue
            events += 1
            if kind == _TICK:
                ticks += 1
                if self.finished < jobs_n:  # the next tick (tick_interval is set: a tick came); _push, inline
                    self.events.seq = seq = self.events.seq + 1
                    heappush(heap, (t + self.scheduler.tick_interval, seq, _TICK, -1, 0))  # type: ignore[operator]
        demand_times = self._demand_times
        i = self._demand_ptr
        if i < len(demand_times) and demand_times[i] <= t:
            while i < len(demand_times) and demand_times[i] <= t:
                self.demand_now = self._demand_values[i]
                i += 1
                events += 1
            self._demand_ptr = i
            self._sync_requests()
        if events:
            self.counts["events"] += events
            self._progress_only = False
        else:
            self._progress_only = progress > 0
        self._had_tick = ticks > 0
        return ticks > 0 and events == ticks

    def _finish(self, job: Job) -> None:
        now = self.now
        job.advance(now)
        job.work_done = job.total_work
        release(self.servers, self.topology, self.accounting, job.index, job.allocation)
        job.allocation, job.workers, job.servers_used, job.rate = EMPTY_ALLOCATION, 0, 0, 0.0
        job.state = _FINISHED
        job.finish_time = now
        job.version += 1
        job_id = job.spec.job_id
        self._journal.append((job_id, self.running_allocations.pop(job_id), job.start_seq))
        del self.running[job.index]
        self.state_version += 1
        self.finished += 1
        if self.knowledge is not None:  # a history predictor learns of each completion as it happens
            self.knowledge.finished(job)

    # ------------------------------------------------------------------ reclaiming
    def _sync_requests(self) -> None:
        """Keep the open reclaim requests summing to what inference is owed."""
        deadline = self.reclaims.sync(self.reclaim_owed(), self.now)
        if deadline is not None and deadline > self.now:
            self._push(deadline, _DEADLINE)

    def _enforce_reclaims(self) -> bool:
        """Return servers of overdue requests by the default rule; True if any."""
        if not self._requests:
            return False
        due = self.reclaims.due(self.now)
        if due <= 0:
            return False
        victims = reclaim_victims(self.inference_servers, due)
        plan = self.view.current_plan()
        free_victims(plan.allocations, victims, self.jobs)
        plan.give_back = tuple(s.id for s in victims)
        self.apply(plan)
        self.counts["inference_violations"] += len(victims)
        return True

    # ------------------------------------------------------------------ decisions
    def apply(self, plan: Plan) -> bool:
        """Validate ``plan`` completely (:func:`lyra_gym.sim.validate.validate_plan`), then apply
        it; raises PlanError and changes nothing if invalid. Returns whether anything changed."""
        pending = plan.__dict__.get("_pending") if type(plan) is Plan else unread_pending(plan)
        token = (self.identity, self.state_version)
        if type(plan) is Plan and unchanged_current(plan, token):
            return False  # a current plan of this state, unchanged: nothing to check or do
        if pending is not None:
            if pending.token != token:
                pending = None  # a current plan of an earlier state: checked in full
            elif not (plan.borrow or plan.give_back or plan.suspend or plan.batch_sizes):
                if not pending.writes:
                    return False  # a Plan subclass's current plan, unchanged
                applied = self._apply_starts(pending.writes)
                if applied is not None:
                    return applied
        changes = validate_plan(plan, pending, self.servers, self._by_id, self.running_allocations, token,
                                self.num_loanable() if plan.borrow else 0, self.config.allow_mixed_gpu_types)
        batches = validate_batches(plan, self.scaling.rule, self._by_id) if plan.batch_sizes else []
        if not changes and not plan.borrow and not plan.give_back and not batches:
            return False
        self._apply_changes(plan, changes, batches)
        return True

    def _apply_changes(self, plan: Plan, changes: Sequence[tuple[Job, Mapping[int, int] | None]],
                       batches: Sequence[tuple[Job, float]]) -> None:
        """Apply the validated ``changes`` and ``batches`` of ``plan`` and its loans."""
        now = self.now
        self.state_version += 1
        if plan.give_back:  # every job on a returned server is in ``changes`` (validated above)
            self._count_disruptions(plan.give_back)
        if plan.borrow:
            self.loaned_count += lend(self.servers, self.topology, self.counts, plan.borrow)
        for job, _ in changes:  # release everything first so moves between jobs are consistent
            if job.allocation:  # (a queued job: _assign sets its clock)
                job.advance(now)
                release(self.servers, self.topology, self.accounting, job.index, job.allocation)
        for job, batch in batches:
            job.batch = batch
        if plan.suspend:
            suspend = set(plan.suspend)
            for job, new in changes:
                self._assign(job, new, job.spec.job_id in suspend)
        else:
            for job, new in changes:
                self._assign(job, new)
        if batches:
            self._rebatched(batches, changes)
        if plan.give_back:
            self.loaned_count -= take_back(self.servers, self.topology, self.counts, plan.give_back)
        if plan.borrow or plan.give_back:
            self._sync_requests()

    def _apply_starts(self, writes: Mapping[str, Mapping[int, int]]) -> bool | None:
        """:meth:`apply` of a current plan of this state changed by ``Plan.assign`` only (``writes``)
        and nothing else: True once applied when every write starts a queued job (what the general
        path does then), None otherwise (to be applied in full)."""
        starts = validate_starts(writes, self.servers, self._by_id, self.config.allow_mixed_gpu_types)
        if starts is None:
            return None
        self.state_version += 1
        for job, new in starts:
            self._assign(job, new)
        return True

    def _count_disruptions(self, give_back: Sequence[int]) -> None:
        """One reclaim disruption for each job with workers on a server given back."""
        disrupted = {index for sid in give_back for index in self.servers[sid].jobs}
        for index in disrupted:
            self.jobs[index].reclaim_disruptions += 1
        self.counts["reclaim_disruptions"] += len(disrupted)

    def _rebatched(self, batches: Sequence[tuple[Job, float]], changes: Sequence[tuple[Job, object]]) -> None:
        """A running job with only a new batch: new rate, no overhead."""
        now = self.now
        reassigned = {job.index for job, _ in changes}
        for job, _ in batches:
            if job.state is JobState.RUNNING and job.index not in reassigned:
                job.advance(now)
                job.version += 1
                job.progress_bin = progress_bin(job.work_done, job.total_work)
                self._set_rate(job)

    def _stop(self, job: Job, suspend: bool) -> None:
        """Preempt ``job`` (or suspend it in host memory); its allocation is already released."""
        old_allocation = job.allocation
        if not suspend and job.checkpoint_s:
            self.overheads.roll_back(job)  # the work since the last checkpoint is lost
        job.allocation, job.workers, job.servers_used, job.rate = EMPTY_ALLOCATION, 0, 0, 0.0
        job.state = _QUEUED
        job.queued_since = self.now
        job.suspended = suspend
        if suspend:
            self.overheads.suspend(job, old_allocation)
            self.counts["suspensions"] += 1
        else:
            job.preemptions += 1
            self.counts["preemptions"] += 1
        self._journal.append((job.spec.job_id, old_allocation, job.start_seq))
        del self.running[job.index]
        del self.running_allocations[job.spec.job_id]
        insort(self.queue, job.index)

    def _assign(self, job: Job, new: Mapping[int, int] | None, suspend: bool = False) -> None:
        """Give ``job`` allocation ``new`` (None = preempt, or suspend); its old allocation is already released."""
        now = self.now
        was_running = job.state is _RUNNING
        old_workers, old_allocation = job.workers, job.allocation
        job.version += 1
        if not new:
            self._stop(job, suspend)
            return
        allocation = FrozenAllocation(new)  # plain ints (validate_plan converted any others)
        workers = hold(self.servers, self.topology, self.accounting, job.index, allocation)
        if was_running:
            overhead = self.overheads.rescale(job, workers, old_workers)
        else:
            overhead = self.overheads.start(job, allocation)
            index, queue = job.index, self.queue
            del queue[bisect_left(queue, index)]
            self.running[index] = None
            self._starts += 1
            job.start_seq = self._starts
            job.state = _RUNNING
            job.queued_total += now - job.queued_since
            if job.first_start is None:
                job.first_start = now
            self.counts["starts"] += 1
        job.allocation = allocation
        if job.checkpoint_s:  # a (re)start, resume, rescale or move checkpoints (lyra_gym.sim.overheads)
            self.overheads.restart_clock(job)
        spec = job.spec
        self._journal.append((spec.job_id, old_allocation if was_running else None, job.start_seq))
        self.running_allocations[spec.job_id] = allocation
        job.workers = workers
        job.servers_used = servers_used = len(allocation)
        if servers_used == 1:
            for sid in allocation:
                gpu_types = self._server_types[sid]
        else:
            gpu_types = frozenset(map(self.topology.gpu_types.__getitem__, allocation))
        self._job_types[job.index] = gpu_types
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
        # job.next_event_time(), inline; the push of EventQueue.push, inline (the hot path)
        at = max(job.last_update, job.overhead_until) + max(0.0, milestone - job.work_done) / rate
        events = self.events
        events.seq += 1
        heappush(events.heap, (at, events.seq, _COMPLETION, job.index, job.version))
