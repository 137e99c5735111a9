"""A job's mutable state inside the engine (the engine alone writes it)."""

from __future__ import annotations

import enum
import math
from typing import Any

from lyra_gym.model.jobspec import JobSpec


class FrozenAllocation(dict):
    """An allocation {server id: GPUs} that cannot be changed in place (the engine's own
    allocations; schedulers replace them in a Plan, never mutate them). Pickles."""

    __slots__ = ()

    def _immutable(self, *args, **kwargs):
        raise TypeError("an engine allocation is read-only: put a new dict in the Plan instead")

    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = __ior__ = _immutable

    def __reduce__(self):
        return (FrozenAllocation, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))


EMPTY_ALLOCATION = FrozenAllocation()


class JobState(enum.Enum):
    PENDING = "pending"      # not yet submitted
    QUEUED = "queued"        # submitted, holds no GPUs
    RUNNING = "running"      # holds GPUs (possibly inside an overhead)
    FINISHED = "finished"


class Job:
    """Runtime record of one job. Work is in samples; times in seconds.

    Progress is integrated lazily: ``work_done`` is exact at ``last_update``;
    between updates the job advances at ``rate`` samples/s once ``overhead_until``
    has passed. Usage is integrated the same way: ``attained_gpu_s`` (GPU-s held),
    ``busy_gpu_s`` (GPU-s held outside overheads) and ``effective_gpu_s`` (busy
    GPU-s weighted by ``speed``, reference-GPU-s; see :mod:`lyra_gym.run.metrics`) and
    ``goodput_gpu_s`` (effective GPU-s also weighted by the statistical ``efficiency`` of the
    batch run, :meth:`lyra_gym.model.scaling.ScalingModel.statistical_efficiency`).
    """

    __slots__ = (
        "index", "spec", "total_work", "state", "allocation", "workers", "servers_used",
        "rate", "overhead_until", "work_done", "last_update", "attained_gpu_s",
        "first_start", "finish_time", "queued_since", "queued_total", "preemptions",
        "scale_ins", "scale_outs", "migrations", "suspended", "version", "view",
        "busy_gpu_s", "effective_gpu_s", "speed", "reclaim_disruptions",
        "init_batch", "batch", "progress_bin", "milestone_work", "start_seq", "efficiency",
        "goodput_gpu_s", "reference_rate", "checkpoint_s", "run_s", "checkpoint_work", "lost_work", "lost_run_s",
        "lost_gpu_s",
    )

    def __init__(self, index: int, spec: JobSpec, total_work: float, reference_rate: float | None = None) -> None:
        self.index = index
        self.spec = spec
        self.total_work = total_work
        #: samples/s at the requested size on reference servers at ``B0`` (what ``total_work =
        #: spec.duration x`` this was computed with; ``lyra_gym.sim.trace_jobs.build_jobs`` passes it).
        #: A function of the model, size and batch alone, never of the duration: what a knowledge
        #: model converts believed seconds and samples with. None (hand-built records): work per second
        #: of the trace's duration.
        self.reference_rate = (reference_rate if reference_rate is not None
                               else total_work / spec.duration if spec.duration > 0 else 1.0)
        self.state = JobState.PENDING
        self.allocation: FrozenAllocation = EMPTY_ALLOCATION
        self.workers = 0
        self.servers_used = 0
        self.rate = 0.0
        self.overhead_until = 0.0
        self.work_done = 0.0
        self.last_update = spec.submit_time
        self.attained_gpu_s = 0.0
        self.first_start: float | None = None
        self.finish_time: float | None = None
        self.queued_since = spec.submit_time
        self.queued_total = 0.0
        self.preemptions = 0
        self.scale_ins = 0
        self.scale_outs = 0
        self.migrations = 0
        self.suspended = False  # stopped by Plan.suspend: next start costs the resume overhead
        self.version = 0  # bumped on every allocation change; stale completion events are skipped
        self.view: Any = None  # the JobView handed to schedulers, created once (Any: model does not import sim)
        self.busy_gpu_s = 0.0       # GPU-s held outside overheads
        self.effective_gpu_s = 0.0  # busy GPU-s x speed (reference-GPU-s)
        self.speed = 0.0            # reference-GPU-s per GPU-s of the current allocation outside overheads
        self.reclaim_disruptions = 0  # applied plans in which a server returned to inference took its workers
        self.init_batch = 0.0         # B0: global batch at num_gpus, samples (lyra_gym.model.scaling)
        self.batch = 0.0              # the global batch the scheduler chose (adaptive rule), samples
        self.progress_bin = 0         # the part of training progress the rate was computed for
        self.milestone_work = total_work  # work at which the rate changes next (progress part ends)
        self.start_seq = 0            # the engine's count of starts when this job last started
        self.efficiency = 1.0         # statistical efficiency of the batch run now (lyra_gym.model.scaling)
        self.goodput_gpu_s = 0.0      # effective GPU-s x efficiency (reference-GPU-s of useful work)
        # periodic checkpoints (lyra_gym.sim.overheads): every checkpoint_s s of run time (0 = none needed:
        # free preemption); run_s = s of progress since the checkpoint clock last restarted (a start,
        # rescale or migration), checkpoint_work = work_done at the last checkpoint
        self.checkpoint_s = 0.0
        self.run_s = 0.0
        self.checkpoint_work = 0.0
        self.lost_work = 0.0   # samples lost at preemptions (rolled back to the last checkpoint)
        self.lost_run_s = 0.0  # s of run time whose progress was lost
        self.lost_gpu_s = 0.0  # GPU-s of run time whose progress was lost

    def advance(self, now: float) -> None:
        """Integrate progress and attained service up to ``now``."""
        dt = now - self.last_update
        if dt <= 0:
            return
        if self.workers:
            self.attained_gpu_s += self.workers * dt
            busy = now - max(self.last_update, self.overhead_until)
            if busy > 0:
                done = self.work_done
                self.work_done = min(self.total_work, done + self.rate * busy)
                interval = self.checkpoint_s
                if interval:  # the checkpoints of this stretch: the last one is at run time `last`
                    run = self.run_s
                    self.run_s = after = run + busy
                    last = math.floor(after / interval) * interval
                    if last > run:
                        self.checkpoint_work = min(self.total_work, done + self.rate * (last - run))
                busy_gpu_s = self.workers * busy
                self.busy_gpu_s += busy_gpu_s
                self.effective_gpu_s += self.speed * busy_gpu_s
                self.goodput_gpu_s += self.speed * self.efficiency * busy_gpu_s
        self.last_update = now

    def usage_until(self, now: float) -> tuple[float, float, float]:
        """``(held, busy, effective)`` GPU-s integrated up to ``now`` (>= ``last_update``),
        without mutating the record: what :meth:`advance` would leave in ``attained_gpu_s``,
        ``busy_gpu_s`` and ``effective_gpu_s``."""
        held, busy_gpu_s, effective = self.attained_gpu_s, self.busy_gpu_s, self.effective_gpu_s
        dt = now - self.last_update
        if self.workers and dt > 0:
            held += self.workers * dt
            busy = now - max(self.last_update, self.overhead_until)
            if busy > 0:
                busy_gpu_s_tail = self.workers * busy
                busy_gpu_s += busy_gpu_s_tail
                effective += self.speed * busy_gpu_s_tail
        return held, busy_gpu_s, effective

    def goodput_until(self, now: float) -> float:
        """``goodput_gpu_s`` integrated up to ``now`` (>= ``last_update``), without mutating."""
        goodput = self.goodput_gpu_s
        if self.workers and now > self.last_update:
            busy = now - max(self.last_update, self.overhead_until)
            if busy > 0:
                goodput += self.speed * self.efficiency * self.workers * busy
        return goodput

    def work_done_at(self, now: float) -> float:
        """Samples done at ``now`` (without mutating the record): the work done at ``last_update``
        plus the rate times the time since, outside overheads. Never computed through
        ``total_work`` (what a knowledge model may show of the work done: :mod:`lyra_gym.model.knowledge`)."""
        if not self.workers:
            return self.work_done
        last, begin = self.last_update, self.overhead_until
        busy = now - (begin if begin > last else last)  # max(last_update, overhead_until), to the bit
        return self.work_done + self.rate * busy if busy > 0 else self.work_done

    def remaining_work(self, now: float) -> float:
        """Samples left at ``now`` (without mutating the record)."""
        if not self.workers:
            return self.total_work - self.work_done
        last, begin = self.last_update, self.overhead_until
        busy = now - (begin if begin > last else last)
        done = self.work_done + self.rate * busy if busy > 0 else self.work_done
        left = self.total_work - done
        return left if left > 0.0 else 0.0  # max(0.0, left), to the bit

    def completion_time(self) -> float:
        """When the job finishes at its current rate (call right after ``advance``)."""
        start = max(self.last_update, self.overhead_until)
        return start + (self.total_work - self.work_done) / self.rate

    def next_event_time(self) -> float:
        """When the job finishes or its rate changes with progress, whichever is first (call right
        after ``advance``)."""
        start = max(self.last_update, self.overhead_until)
        return start + max(0.0, self.milestone_work - self.work_done) / self.rate
