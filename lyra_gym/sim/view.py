"""Read-only views of the engine's state, handed to schedulers.

Views read the live engine state; a scheduler must not keep them across
decision points expecting old values. Nothing here can change the state: the
only way to act is to return a :class:`~lyra_gym.sim.plan.Plan`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Collection, Iterable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from lyra_gym.model.jobs import Job, JobState
from lyra_gym.model.jobspec import JobRequest, JobSpec
from lyra_gym.model.scaling import progress_bin
from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.plan import Plan, current_plan
from lyra_gym.sim.snapshots import JobSnapshot, remaining_works, snapshots
from lyra_gym.sim.topology import FreeMap, Topology

if TYPE_CHECKING:
    from lyra_gym.model.config import OverheadConfig, SimConfig
    from lyra_gym.model.demand import DemandCurve
    from lyra_gym.model.knowledge import Knowledge
    from lyra_gym.model.profiles import ProfileSet
    from lyra_gym.model.scaling import ScalingModel
    from lyra_gym.sim.journal import AllocationJournal, ChangeFeed
    from lyra_gym.sim.plan import PendingAllocations


class EngineState(Protocol):
    """What the views read of the engine's live state (:class:`lyra_gym.sim.engine.Engine` has it all).

    Typing the views against this instead of the engine keeps ``view`` below ``engine``: the
    engine builds the views, the views never import the engine. Times in seconds, GPUs whole.
    """

    @property
    def now(self) -> float: ...
    @property
    def tick_only(self) -> bool: ...
    @property
    def config(self) -> SimConfig: ...
    @property
    def profiles(self) -> ProfileSet: ...
    @property
    def scaling(self) -> ScalingModel: ...
    @property
    def reference_gpu(self) -> str: ...
    @property
    def reference_gpus_per_server(self) -> int: ...
    @property
    def servers(self) -> Sequence[Server]: ...
    @property
    def topology(self) -> Topology: ...
    @property
    def free(self) -> Sequence[int]: ...  # free GPUs per server id
    @property
    def jobs(self) -> Sequence[Job]: ...  # by trace index
    @property
    def queue(self) -> Sequence[int]: ...  # queued job indices, submit order
    @property
    def running(self) -> Collection[int]: ...  # running job indices, start order
    @property
    def finished(self) -> int: ...  # jobs finished so far
    @property
    def demand(self) -> DemandCurve: ...
    @property
    def demand_now(self) -> int: ...  # inference servers needed now

    def num_loanable(self) -> int: ...
    def reclaim_owed(self) -> int: ...
    def reclaim_deadline(self) -> float | None: ...
    def pending_allocations(self) -> PendingAllocations: ...
    @property
    def journal(self) -> AllocationJournal: ...  # every change of the running allocations (change feeds)
    def job_by_id(self, job_id: str) -> Job: ...
    def reference_throughput(self, model: str, workers: int) -> float: ...
    @property
    def knowledge(self) -> Knowledge | None: ...  # what schedulers are told of durations; None: the truth


class JobView:
    """Read-only view of one job. Times in seconds, work in samples."""

    # spec, id, index and request never change: plain slots (read at C speed), set once; the view
    # refuses writes. request: the record without its duration (JobRequest), for the fields that
    # never change (model, GPUs, elasticity, submit time) without a KnownJobView.spec's work
    __slots__ = ("_job", "_engine", "spec", "id", "index", "request")
    _job: Job
    _engine: EngineState
    spec: JobSpec
    id: str
    index: int
    request: JobRequest

    def __init__(self, job: Job, engine: EngineState) -> None:
        for name, value in (("_job", job), ("_engine", engine), ("spec", job.spec), ("id", job.spec.job_id),
                            ("index", job.index), ("request", job.spec.request())):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"JobView is read-only (can't set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"JobView is read-only (can't delete {name!r})")

    def __reduce__(self):  # state set after creation: a job and its view refer to each other
        return (_bare_job_view, (), (self._job, self._engine, self.spec, self.id, self.index, self.request))

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(JobView.__slots__, state):
            object.__setattr__(self, name, value)

    state: JobState = property(lambda self: self._job.state)  # type: ignore[assignment]
    allocation: Mapping[int, int] = property(lambda self: self._job.allocation)  # type: ignore[assignment]
    workers: int = property(lambda self: self._job.workers)  # type: ignore[assignment]
    total_work: float = property(lambda self: self._job.total_work)  # type: ignore[assignment]
    preemptions: int = property(lambda self: self._job.preemptions)  # type: ignore[assignment]
    first_start = property(lambda self: self._job.first_start)
    #: Time (s) the job finished; None before.
    finish_time: float | None = property(lambda self: self._job.finish_time)  # type: ignore[assignment]
    overhead_until: float = property(lambda self: self._job.overhead_until)  # type: ignore[assignment]

    @property
    def remaining_work(self) -> float:
        return self._job.remaining_work(self._engine.now)

    @property
    def progress_part(self) -> int:
        """The part of training progress the job is in (0 .. ``PROGRESS_BINS - 1``, the parts the
        statistical efficiency is held over; :func:`lyra_gym.model.scaling.progress_bin`): visible
        under every knowledge mode (:mod:`lyra_gym.model.knowledge`)."""
        job = self._job
        total = job.total_work
        return progress_bin(total - job.remaining_work(self._engine.now), total)

    def progress_part_at(self, remaining_work: float) -> int:
        """:attr:`progress_part` from this view's ``remaining_work``, already read (no second read)."""
        total = self._job.total_work
        return progress_bin(total - remaining_work, total)

    def snapshot(self) -> JobSnapshot:
        """The job's changing members now in one call (:data:`~lyra_gym.sim.snapshots.JobSnapshot`:
        the same values as those members); many jobs: :meth:`ClusterView.snapshots`."""
        return snapshots(self._engine.jobs, (self.index,), self._engine.now, None)[0]

    @property
    def init_batch(self) -> float:
        """``B0``: the job's global batch at its requested size, samples (:mod:`lyra_gym.model.scaling`)."""
        return self._job.init_batch


    @property
    def completed_duration(self) -> float | None:
        """The job's true duration (s at its requested size, the trace's) once it has finished,
        None before: what a finished job reveals under every knowledge mode."""
        job = self._job
        return job.spec.duration if job.finish_time is not None else None

    @property
    def batch_size(self) -> float:
        """The global batch the job runs with now (or would, at its current workers), samples."""
        job = self._job
        return self._engine.scaling.global_batch(job.spec, job.init_batch, max(job.workers, 1), job.batch)

    @property
    def attained_gpu_s(self) -> float:
        """GPU-seconds held so far (Tiresias's attained service)."""
        job = self._job
        return job.attained_gpu_s + job.workers * max(0.0, self._engine.now - job.last_update)

    @property
    def waiting_s(self) -> float:
        """Seconds since the job last entered the queue (0 while running)."""
        job = self._job
        return self._engine.now - job.queued_since if job.state is JobState.QUEUED else 0.0

    @property
    def rate(self) -> float:
        """Samples/s at the current allocation (0 when not running; 0 progress inside an overhead)."""
        return self._job.rate

    @property
    def statistical_efficiency(self) -> float:
        """Statistical efficiency of the batch the job runs now, the factor the engine charges
        (:meth:`lyra_gym.model.scaling.ScalingModel.statistical_efficiency`; 1 where none is)."""
        return self._job.efficiency

    @property
    def reference_rate(self) -> float:
        """Samples/s at its requested size on the reference GPU at its initial batch: the rate its
        work was counted with (``total_work`` = duration x this)."""
        return self._job.reference_rate

    @property
    def lost_run_s(self) -> float:
        """Run time (s) the job would lose if preempted now: the run time since its last checkpoint
        (:meth:`lyra_gym.sim.overheads.OverheadModel.roll_back`); 0 without checkpoints."""
        job = self._job
        interval = job.checkpoint_s
        if not interval:
            return 0.0
        busy = self._engine.now - max(job.last_update, job.overhead_until)
        run = job.run_s + (busy if busy > 0 and job.workers else 0.0)
        return run - math.floor(run / interval) * interval

    @property
    def expected_finish(self) -> float | None:
        """Time (s) the job finishes if its allocation stays as it is (None when not running)."""
        job = self._job
        return job.completion_time() if job.rate > 0 else None

    def goodput(self, workers: int, gpu_type: str, gpus_per_server: int, batch: float | None = None) -> float:
        """The engine's rate (``B0``-samples/s: what the job's work is counted in) if the job ran on
        ``workers`` GPUs of ``gpu_type`` packed on servers of ``gpus_per_server``, at global batch
        ``batch`` (adaptive rule; None: the rule's batch for that many workers), at its current
        progress. The ground truth every scheduler is judged by (``ClusterView.goodput(job, ...)``)."""
        if workers < 1:
            return 0.0
        job, scaling, spec = self._job, self._engine.scaling, self.spec
        b0, total = job.init_batch, job.total_work
        m = scaling.global_batch(spec, b0, workers, job.batch if batch is None else batch)
        part = progress_bin(total - job.remaining_work(self._engine.now), total)
        return scaling.packed_rate(spec, b0, workers, gpu_type, gpus_per_server, m, part)

    def goodputs(self, low: int, high: int, gpu_type: str, gpus_per_server: int) -> list[float]:
        """``[goodput(w, gpu_type, gpus_per_server) for w in range(low, high)]`` (``low`` >= 1): the
        same doubles, the job's batch and progress part read once (``ClusterView.goodputs(job, ...)``)."""
        if low < 1:
            raise ValueError(f"goodputs: low must be >= 1 worker, got {low}")
        job = self._job
        return self._engine.scaling.packed_rates(self.spec, job.init_batch, low, high, gpu_type, gpus_per_server,
                                                 job.batch, self.progress_part)

    def remaining_time_at(self, workers: int) -> float:
        """Estimated seconds to finish if run on ``workers`` reference GPUs packed (no overhead), at
        the rate the engine charges (goodput: the run's ``scaling`` rule and batch, the statistical
        efficiency at the job's current progress; samples/s under ``scaling: throughput``)."""
        if workers < 1:
            return float("inf")
        engine, job = self._engine, self._job
        scaling, spec, b0, total = engine.scaling, job.spec, job.init_batch, job.total_work
        remaining = job.remaining_work(engine.now)
        batch = scaling.global_batch(spec, b0, workers, job.batch)
        part = progress_bin(total - remaining, total)
        rate = scaling.packed_rate(spec, b0, workers, engine.reference_gpu, engine.reference_gpus_per_server,
                                   batch, part)
        return remaining / rate

    def __repr__(self) -> str:
        job = self._job
        return f"JobView({job.spec.job_id!r}, {job.state.value}, workers={job.workers})"


def _bare_job_view() -> JobView:
    return object.__new__(JobView)


class KnownJobView(JobView):
    """A :class:`JobView` that answers duration questions with the run's
    :class:`~lyra_gym.model.knowledge.Knowledge` (``estimate`` and ``history`` modes), never the
    truth: ``spec.duration``, ``total_work``, ``remaining_work``, ``expected_finish`` and
    ``remaining_time_at`` are the believed ones; the work done, rate, service and progress part the engine's."""

    __slots__ = ("_know", "_shown", "_shown_key")  # _shown answers at _shown_key: (work done, knowledge version)
    _know: Knowledge
    _shown: JobSpec | None
    _shown_key: tuple[float, int] | None

    def __init__(self, job: Job, engine: EngineState, knowledge: Knowledge) -> None:
        for name, value in (("_job", job), ("_engine", engine), ("id", job.spec.job_id), ("index", job.index),
                            ("_know", knowledge), ("_shown", None), ("_shown_key", None),
                            ("request", job.spec.request())):
            object.__setattr__(self, name, value)

    def __reduce__(self):  # state set after creation: a job and its view refer to each other
        return (_bare_known_view, (), (self._job, self._engine, self.id, self.index, self._know, self.request))

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(("_job", "_engine", "id", "index", "_know", "request"), state):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_shown", None)
        object.__setattr__(self, "_shown_key", None)

    def _done(self) -> float:
        return self._job.work_done_at(self._engine.now)

    @property
    def spec(self) -> JobSpec:  # type: ignore[override]
        """The job's record with the believed ``duration`` (s at the requested size); the last one
        while the work done and the knowledge's ``version`` are unchanged (the same float)."""
        job, know, done, shown = self._job, self._know, self._done(), self._shown
        if shown is not None and self._shown_key == (done, know.version):
            return shown
        duration = know.duration(job, done)
        if shown is None or shown.duration != duration:
            shown = replace(job.spec, duration=duration)
            object.__setattr__(self, "_shown", shown)
        object.__setattr__(self, "_shown_key", (done, know.version))
        return shown

    @property
    def total_work(self) -> float:  # type: ignore[override]
        return self._know.total_work(self._job, self._done())

    @property
    def remaining_work(self) -> float:
        return self._know.remaining_work(self._job, self._engine.now)

    def progress_part_at(self, remaining_work: float) -> int:
        """:attr:`progress_part`: a believed remaining work says nothing of the engine's part."""
        return self.progress_part

    def snapshot(self) -> JobSnapshot:
        """:meth:`JobView.snapshot` with the believed remaining work (the true progress part)."""
        return snapshots(self._engine.jobs, (self.index,), self._engine.now, self._know)[0]

    @property
    def expected_finish(self) -> float | None:
        """Time (s) the job would finish at its current rate if its believed total were right."""
        job = self._job
        if job.rate <= 0:
            return None
        believed = self._know.total_work(job, self._done())
        return max(job.last_update, job.overhead_until) + (believed - job.work_done) / job.rate

    def remaining_time_at(self, workers: int) -> float:
        """:meth:`JobView.remaining_time_at` of the believed remaining work (the rate at the job's
        true progress part, which stays visible)."""
        if workers < 1:
            return float("inf")
        engine, job = self._engine, self._job
        scaling, spec, b0 = engine.scaling, job.spec, job.init_batch
        batch = scaling.global_batch(spec, b0, workers, job.batch)
        rate = scaling.packed_rate(spec, b0, workers, engine.reference_gpu, engine.reference_gpus_per_server,
                                   batch, self.progress_part)
        done = job.work_done_at(engine.now)
        return (self._know.total_work(job, done) - done) / rate


def _bare_known_view() -> KnownJobView:
    return object.__new__(KnownJobView)


def attach_views(jobs: Sequence[Job], engine: EngineState, knowledge: Knowledge | None) -> None:
    """Give every job record its view: the plain :class:`JobView` under ``oracle`` (``knowledge``
    None), else a :class:`KnownJobView` answering through ``knowledge``."""
    if knowledge is None:
        for job in jobs:
            job.view = JobView(job, engine)
    else:
        for job in jobs:
            job.view = KnownJobView(job, engine, knowledge)


class ServerView:
    """Read-only view of one server."""

    __slots__ = ("_server",)

    def __init__(self, server: Server) -> None:
        self._server = server

    id: int = property(lambda self: self._server.id)  # type: ignore[assignment]
    pool: Pool = property(lambda self: self._server.pool)  # type: ignore[assignment]
    gpu_type: str = property(lambda self: self._server.gpu_type)  # type: ignore[assignment]
    num_gpus: int = property(lambda self: self._server.num_gpus)  # type: ignore[assignment]
    used_gpus: int = property(lambda self: self._server.used)  # type: ignore[assignment]
    free_gpus: int = property(lambda self: self._server.free)  # type: ignore[assignment]
    loaned: bool = property(lambda self: self._server.loaned)  # type: ignore[assignment]
    usable: bool = property(lambda self: self._server.usable)  # type: ignore[assignment]

    @property
    def jobs(self) -> Mapping[int, int]:
        """Job index -> GPUs held here (a copy)."""
        return dict(self._server.jobs)

    def __repr__(self) -> str:
        s = self._server
        return f"ServerView({s.id}, {s.pool.value}, {s.gpu_type}, used={s.used}/{s.num_gpus}, loaned={s.loaned})"


class ClusterView:
    """What a scheduler sees at a decision point."""

    def __init__(self, engine: EngineState) -> None:
        self._engine = engine
        self.servers: Sequence[ServerView] = tuple(ServerView(s) for s in engine.servers)
        topology = engine.topology
        self.training_server_ids: tuple[int, ...] = topology.training_ids
        self.inference_server_ids: tuple[int, ...] = topology.inference_ids
        #: The engine's index of its servers: static facts and free GPUs by pool, GPU type and
        #: count (:class:`~lyra_gym.sim.topology.Topology`; read it, never call its ``_`` methods).
        self.topology: Topology = topology

    @property
    def now(self) -> float:
        return self._engine.now

    @property
    def tick_only(self) -> bool:
        """True when nothing but the scheduler's own ``tick_interval`` brought this decision point
        (no arrival, completion, demand change or reclaim)."""
        return self._engine.tick_only

    @property
    def profiles(self) -> "ProfileSet":
        return self._engine.profiles

    @property
    def config(self) -> "SimConfig":
        """The run's configuration (frozen dataclasses)."""
        return self._engine.config

    @property
    def overheads(self) -> "OverheadConfig":
        return self._engine.config.overheads

    @property
    def allow_mixed_gpu_types(self) -> bool:
        return self._engine.config.allow_mixed_gpu_types

    @property
    def placement(self) -> str:
        """The placement rule of the run's config: ``"spread"`` or ``"consolidated"``."""
        return self._engine.config.placement

    def queued_jobs(self) -> Iterator[JobView]:
        """Queued jobs in submit order (ties: trace order)."""
        jobs = self._engine.jobs
        return (jobs[i].view for i in self._engine.queue)

    def snapshots(self, jobs: Iterable[JobView]) -> list[JobSnapshot]:
        """``[job.snapshot() for job in jobs]`` in one call (the same values): the changing members
        of many jobs, for readers of many per step such as the observation builder."""
        engine = self._engine
        return snapshots(engine.jobs, [job.index for job in jobs], engine.now, engine.knowledge)

    def queued_remaining_work(self) -> tuple[list[JobView], list[float]]:
        """(``list(queued_jobs())``, their ``remaining_work``: samples, the believed ones under a
        knowledge mode) in one call, the same values: what an admission order reads of the queue."""
        engine = self._engine
        jobs, queue = engine.jobs, engine.queue
        return [jobs[i].view for i in queue], remaining_works(jobs, queue, engine.now, engine.knowledge)

    def running_jobs(self) -> Iterator[JobView]:
        """Running jobs in start order."""
        jobs = self._engine.jobs
        return (jobs[i].view for i in self._engine.running)

    def all_jobs(self) -> Iterator[JobView]:
        """Every job of the run (submitted or not, finished too), by trace index."""
        return (job.view for job in self._engine.jobs)

    num_queued: int = property(lambda self: len(self._engine.queue))  # type: ignore[assignment]
    num_running: int = property(lambda self: len(self._engine.running))  # type: ignore[assignment]
    #: Jobs finished so far (each at or before ``now``).
    num_finished: int = property(lambda self: self._engine.finished)  # type: ignore[assignment]

    def longest_wait_s(self) -> float:
        """Seconds the longest-waiting queued job has waited (the queue's largest ``waiting_s``; 0: none)."""
        engine = self._engine
        jobs, queue = engine.jobs, engine.queue
        return engine.now - min([jobs[i].queued_since for i in queue]) if queue else 0.0

    def queued_gpus(self) -> int:
        """GPUs the queued jobs request (``spec.num_gpus``), in total."""
        jobs = self._engine.jobs
        return sum([jobs[i].spec.num_gpus for i in self._engine.queue])

    def free_gpus(self) -> list[int]:
        """Free GPUs per server id (0 on servers training may not use now). A copy: O(servers)."""
        return list(self._engine.free)

    def free_map(self) -> FreeMap:
        """Free GPUs per server id as an indexed working copy (O(1) to make; valid during this
        decision): placements on it by ``baselines/placement.py`` read the index."""
        return FreeMap(self._engine.topology)

    def usable_server_ids(self) -> list[int]:
        """Training servers plus loaned inference servers."""
        topology = self._engine.topology
        return [*topology.training_ids, *topology.loaned()]

    # --- loaning -------------------------------------------------------------------
    @property
    def inference_demand(self) -> int:
        """Inference servers needed now."""
        return self._engine.demand_now

    #: The run's inference demand (servers over time, known ahead; read only): ``inference_demand_at(t)``.
    demand_curve: DemandCurve = property(lambda self: self._engine.demand)  # type: ignore[assignment]

    def inference_demand_at(self, t: float) -> int:
        """Inference servers needed at time ``t`` (the curve is known ahead)."""
        return self._engine.demand.at(t)

    def next_demand_above(self, servers: int) -> float:
        """First time (s), now or later, at which inference needs more than ``servers`` servers
        (inf if never; the curve is known ahead)."""
        engine = self._engine
        if engine.demand_now > servers:
            return engine.now
        times, values = engine.demand.times_s, engine.demand.servers
        start = int(np.searchsorted(times, engine.now, side="right"))
        above = np.flatnonzero(values[start:] > servers)
        return float(times[start + above[0]]) if len(above) else float("inf")

    @property
    def num_loanable(self) -> int:
        """Idle inference servers not on loan: how many may be borrowed now."""
        return self._engine.num_loanable()

    def loanable_servers(self) -> tuple[int, ...]:
        """Ids that may be borrowed now: the first ``num_loanable`` non-loaned inference servers."""
        engine = self._engine
        return tuple(engine.topology.not_loaned()[: engine.num_loanable()])

    def loaned_servers(self) -> tuple[int, ...]:
        """Loaned inference server ids, ascending."""
        return tuple(self._engine.topology.loaned())

    @property
    def reclaim_pending(self) -> int:
        """Loaned servers inference wants back (answer with ``Plan.give_back``)."""
        return self._engine.reclaim_owed()

    @property
    def reclaim_deadline(self) -> float | None:
        """Deadline (s) of the oldest open reclaim request, or None."""
        return self._engine.reclaim_deadline()

    # --- helpers for building plans -------------------------------------------------
    def current_plan(self) -> Plan:
        """A Plan that keeps every running job where it is and changes nothing else. O(1): its
        ``allocations`` are copied when first read (``Plan.assign`` adds a job without that)."""
        return current_plan(self._engine.pending_allocations())

    def change_feed(self) -> "ChangeFeed":
        """A feed of the jobs that start, stop, finish or change allocation from now on
        (:class:`lyra_gym.sim.journal.ChangeFeed`): a scheduler keeps its own state of the running
        jobs up to date in O(changes) per decision. Keep it for the run; each one pins the
        engine's journal until read (up to a bound, past which it reports itself lost)."""
        return self._engine.journal.follow()

    def job(self, job_id: str) -> JobView:
        return self._engine.job_by_id(job_id).view

    def job_at(self, index: int) -> JobView:
        """The job with trace index ``index`` (as in ``ServerView.jobs``)."""
        return self._engine.jobs[index].view

    def reference_throughput(self, model: str, workers: int) -> float:
        """Samples/s of ``workers`` reference GPUs packed on reference servers."""
        return self._engine.reference_throughput(model, workers)

    @property
    def scaling(self) -> str:
        """The run's scaling rule (``SimConfig.scaling``; :mod:`lyra_gym.model.scaling`)."""
        return self._engine.scaling.rule

    @property
    def believed(self) -> bool:
        """Whether job views answer with believed work (a ``knowledge`` mode other than ``oracle``:
        :class:`KnownJobView`), so their remaining work and expected finish move with the belief."""
        return self._engine.knowledge is not None

    @property
    def rate_settings(self) -> tuple | None:
        """What :meth:`goodput` and ``profiles`` answer by besides their arguments and a job's model,
        initial batch, requested size and progress part: ``(profiles, scaling settings)``, the
        profile set itself (compare it with ``is``) and a hashable key. None under a ``knowledge``
        mode (job views answer with believed work beside the engine's progress part: a scheduler
        keeps what it derives per run) or where the adaptive rule's batch (a job's own state)
        enters the rate."""
        engine = self._engine
        scaling = engine.scaling
        if self.believed or scaling.rule == "adaptive":
            return None
        return engine.profiles, scaling.memo_key

    def batch_range(self, job: JobView) -> tuple[float, float] | None:
        """The range of global batches the job's application was measured over, in its units
        (:meth:`lyra_gym.model.scaling.ScalingModel.batch_range`); None when there is none."""
        return self._engine.scaling.batch_range(job.spec, job.init_batch)

    #: ``goodput(job, workers, gpu_type, gpus_per_server, batch=None)``: :meth:`JobView.goodput` of ``job``
    goodput = staticmethod(JobView.goodput)
    #: ``goodputs(job, low, high, gpu_type, gpus_per_server)``: :meth:`JobView.goodputs` of ``job``
    goodputs = staticmethod(JobView.goodputs)

    def reference_server(self) -> tuple[str, int]:
        """The reference GPU type and its GPUs per server: what ``JobView.remaining_time_at`` packs
        workers on (``remaining_time_at(w)`` is the remaining work over ``goodput(job, w, *this)``)."""
        return self._engine.reference_gpu, self._engine.reference_gpus_per_server
