"""Fixed-size, normalised observations: K job slots, cluster features, M loaned-server slots.

Layout (:func:`observation_layout`)::

    [ K job rows x job_width | cluster_width | M server rows x len(SERVER_FEATURES) ]

``job_width`` is ``len(JOB_FEATURES)`` plus an environment's own per-job features, appended
at the end of each row; ``cluster_width`` likewise (the full-control environment appends its
decision state, :mod:`lyra_gym.envs.alloc`). The builder leaves appended entries at 0.
Version 2 (``ObservationBuilder(..., version=2)``, :mod:`lyra_gym.envs.observation_v2`) puts its
own features after version 1's in each job row and in the cluster block, before an env's own.

Every entry lies in [-1, 1] (clipped). Times enter as log1p(seconds / 60) / 10,
so one minute is 0.07, one hour 0.41 and ten days 0.96.

Cost: what cannot change during an engine's run is computed once per engine
(:class:`~lyra_gym.envs.observation_state.EngineConstants`: server totals, reference
throughputs, each job's spec features, its rate on the loaned GPU type per progress part, in
one list per model, size and B0 shared across an env's episodes), and what changes seldom is
kept while it holds (the row of a queued job, which only its wait changes until it runs again;
the allocation-derived part of a running job's row; the cluster features read off the free
GPUs, while ``topology.version`` stays; the running jobs' part of the slots, while the running
jobs stay), with the same calls and the same arithmetic, so observations are identical bit for
bit (``tests/envs/test_env_equivalence.py``, ``tests/envs/test_env_step_kept_state.py``,
``tests/envs/test_observe_counts.py``). The float64 values become float32 by struct's native ``f``
(the C cast NumPy's ``astype`` uses), then are clipped by ``ndarray.clip``.

The builder reads only the public view (:class:`~lyra_gym.sim.view.ClusterView`,
:class:`~lyra_gym.sim.view.JobView`; ruff's ``SLF`` rule holds it to that), so duration features
(``remaining_est``, ``remaining_now``, ``remaining_loaned``) and the slot order read what the job
views answer under the run's knowledge model (:mod:`lyra_gym.model.knowledge`): under
``estimate`` or ``history`` the believed remaining work, as the schedulers see it; the progress
part behind the loaned-type rate (``JobView.progress_part``) stays the true one (visible in every
mode).
"""

from __future__ import annotations

import copy
import math
import struct

import numpy as np

from lyra_gym.envs.observation_state import EngineConstants, engine_constants  # kept per engine
from lyra_gym.envs.observation_v2 import (
    V2_CLUSTER_FEATURES,
    V2_JOB_FEATURES,
    WindowLike,
    cluster_features,
    splice_job_rows,
)
from lyra_gym.model.jobs import JobState
from lyra_gym.sim.cluster import Pool
from lyra_gym.sim.snapshots import JobSnapshot
from lyra_gym.sim.view import ClusterView, JobView

GPU_NORM = 64.0  # GPU counts are divided by this (the largest job size of the shipped presets)

JOB_FEATURES = (
    "present",            # 1 if the slot holds a job
    "queued",             # 1 queued, 0 running
    "elastic",            # 1 if the job may scale
    "requested_gpus",     # num_gpus / 64
    "min_gpus",           # min_gpus / 64
    "max_gpus",           # max_gpus / 64
    "workers",            # GPUs held now / 64
    "waiting",            # log-time since it last entered the queue
    "attained",           # log1p(attained GPU-hours) / 10
    "remaining_est",      # log-time to finish at its requested size on the reference GPU
    "scaling_efficiency", # throughput(max) / (max/min x throughput(min)), reference GPU packed
    "in_overhead",        # 1 while (re)starting or rescaling
    "on_loaned",          # share of its GPUs on loaned (inference) servers
    "rate_ratio",         # current rate / rate of as many reference GPUs packed (GPU type, spread; 0 queued)
    "flexible_workers",   # workers beyond min_gpus / 64 (0 queued or inelastic): what a reclaim may take
    "remaining_now",      # log-time to finish at the current rate (queued: = remaining_est)
    "remaining_loaned",   # log-time to finish at its requested size on the loaned GPU type (0: no pool)
)
CLUSTER_FEATURES = (
    "free_training",      # free training GPUs / training GPUs
    "free_loaned",        # free GPUs on loaned servers / inference GPUs
    "loaned",             # loaned servers / inference servers
    "loanable",           # loanable servers / inference servers
    "demand_now",         # inference demand / inference servers
    "demand_1h",          # ... one hour ahead
    "demand_3h",          # ... three hours ahead
    "demand_6h",          # ... six hours ahead
    "reclaim_pending",    # servers owed to inference / inference servers
    "time_of_day_sin",
    "time_of_day_cos",
    "weekend",            # 1 on Saturday and Sunday (t = 0 is a Monday)
    "queued_jobs",        # log1p(queued jobs) / 6
    "running_jobs",       # log1p(running jobs) / 6
    "servers_free_0",     # share of usable training servers with 0 free GPUs (fragmentation histogram)
    "servers_free_1",     # ... with 1 free GPU
    "servers_free_2_3",   # ... with 2-3
    "servers_free_4_7",   # ... with 4-7
    "servers_free_8",     # ... with 8 or more
    "queue_head_wait",    # log-time the longest-waiting queued job has waited
    "queue_tail_gpus",    # requested GPUs of queued jobs outside the K slots / training GPUs
    "running_unseen",     # log1p(running jobs outside the K slots) / 6
)
SERVER_FEATURES = (
    "present",            # 1 if the slot holds a loaned server
    "used",               # GPUs in use / GPUs
    "jobs",               # jobs on it / 8
    "inelastic_jobs",     # inelastic jobs on it (preempted if it is returned) / 8
)


#: The observation versions :class:`ObservationBuilder` builds.
OBSERVATION_VERSIONS = (1, 2)


def builder_features(version: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(job features, cluster features) of observation ``version``, before an env's own."""
    if version == 2:
        return JOB_FEATURES + V2_JOB_FEATURES, CLUSTER_FEATURES + V2_CLUSTER_FEATURES
    return JOB_FEATURES, CLUSTER_FEATURES


def observation_layout(num_job_slots: int, num_server_slots: int, job_width: int = len(JOB_FEATURES),
                       cluster_width: int = len(CLUSTER_FEATURES)) -> dict[str, tuple[int, int, int]]:
    """``{"jobs": (start, slots, width), "cluster": (start, 1, width), "servers": (start, slots, width)}``."""
    cluster = num_job_slots * job_width
    return {
        "jobs": (0, num_job_slots, job_width),
        "cluster": (cluster, 1, cluster_width),
        "servers": (cluster + cluster_width, num_server_slots, len(SERVER_FEATURES)),
    }


def observation_names(num_job_slots: int, num_server_slots: int, job_features: tuple[str, ...] = JOB_FEATURES,
                      cluster_features: tuple[str, ...] = CLUSTER_FEATURES) -> tuple[str, ...]:
    """One name per observation entry, in order (:func:`observation_layout`'s blocks):
    ``job[i].<feature>``, ``cluster.<feature>``, ``server[j].<feature>``."""
    layout = observation_layout(num_job_slots, num_server_slots, len(job_features), len(cluster_features))
    names: list[str] = []
    for block, prefix, features in (("jobs", "job", job_features), ("cluster", "cluster", cluster_features),
                                    ("servers", "server", SERVER_FEATURES)):
        start, slots, width = layout[block]
        assert start == len(names) and width == len(features), block  # the layout's own offsets
        for slot in range(slots):
            head = prefix if block == "cluster" else f"{prefix}[{slot}]"
            names += [f"{head}.{feature}" for feature in features]
    return tuple(names)


def log_time(seconds: float) -> float:
    return math.log1p(max(seconds, 0.0) / 60.0) / 10.0


def job_slots(view: ClusterView, k: int) -> list[JobView]:
    """The K jobs an agent sees: queued ones in Lyra's admission order (shortest estimated
    remaining time first), then running elastic jobs, then running inelastic ones."""
    return job_slots_counted(view, k)[0]


def job_slots_counted(view: ClusterView, k: int) -> tuple[list[JobView], int]:
    """(:func:`job_slots`, how many of them are running inelastic jobs: the last ones). The
    running jobs' part (elastic ones, then inelastic ones, in start order) is kept while the
    engine's running jobs stay the same ones in the same order
    (``EngineConstants.running_slots``)."""
    constants = engine_constants(view)
    statics, reference, models, sizes = constants.jobs, constants.reference, constants.models, constants.sizes
    keyed = []
    for job, remaining in zip(*view.queued_remaining_work()):
        index = job.index
        static = statics.get(index)
        # j.remaining_time_at(spec.num_gpus), with the reference throughput looked up once per engine
        ref = static[9] if static is not None else reference(models[index], sizes[index])
        keyed.append((remaining / ref, index, job))
    keyed.sort(key=_first_two)
    if len(keyed) >= k:
        return [entry[2] for entry in keyed[:k]], 0
    slots = [entry[2] for entry in keyed]
    running = list(view.running_jobs())
    kept = constants.running_slots
    if kept is None or kept[0] != running:
        flags = constants.inelastic  # per job index: 1 if not spec.elastic
        elastic = [job for job in running if not flags[job.index]]
        kept = constants.running_slots = (running, elastic + [job for job in running if flags[job.index]],
                                          len(elastic))
    slots += kept[1]
    del slots[k:]
    return slots, max(0, len(slots) - len(keyed) - kept[2])


def _first_two(entry: tuple) -> tuple:
    return entry[0], entry[1]


def server_slots(view: ClusterView, m: int) -> list[int]:
    """The first M loaned servers by id."""
    return view.topology.loaned()[:m]  # list(view.loaned_servers()[:m]), one copy


#: ObservationBuilder's caches of pure functions, shared by a fork (ObservationBuilder.__deepcopy__)
_SHARED_ON_FORK = frozenset({"_efficiency", "_shared_goodput", "_shared_parts"})


class ObservationBuilder:
    """Builds the flat float32 observation (a new array per call); ``size`` is its length.

    It reads the public view only; what it keeps between steps (:mod:`~lyra_gym.envs.observation_state`)
    makes the same numbers with fewer calls per step.

    :param extra_job_features: names of features appended to each job row (left 0 here).
    :param extra_cluster_features: names of features appended to the cluster block (left 0 here).
    :param version: 1 (``JOB_FEATURES``, ``CLUSTER_FEATURES``) or 2 (each block followed by
        version 2's features, :mod:`lyra_gym.envs.observation_v2`; version 1's values unchanged).
    """

    def __init__(self, num_job_slots: int, num_server_slots: int, extra_job_features: tuple[str, ...] = (),
                 extra_cluster_features: tuple[str, ...] = (), version: int = 1) -> None:
        if isinstance(version, bool) or version not in OBSERVATION_VERSIONS:
            raise ValueError(f"version: must be one of {OBSERVATION_VERSIONS}, got {version!r}")
        self.k = num_job_slots
        self.m = num_server_slots
        self.version = version
        job_features, cluster_features = builder_features(version)
        self.job_width = len(job_features) + len(extra_job_features)
        self.cluster_width = len(cluster_features) + len(extra_cluster_features)
        self.layout = observation_layout(self.k, self.m, self.job_width, self.cluster_width)
        #: one name per entry of the observations :meth:`build` makes, in order
        self.names = observation_names(self.k, self.m, job_features + tuple(extra_job_features),
                                       cluster_features + tuple(extra_cluster_features))
        self.size = len(self.names)
        self._efficiency: dict[tuple[str, int, int], float] = {}
        # (profiles, config) -> {(model, GPUs, B0, progress part, batch): rate on the loaned type}, and
        # -> {(model, GPUs, B0): those rates by part, batch None}: the engines this builder sees one
        # after another (an env's episodes) share what they computed
        self._shared_goodput: dict[tuple, dict] = {}
        self._shared_parts: dict[tuple, dict] = {}
        self._format = f"{self.size}f"  # the values as float32 bytes (struct.pack, native), in one call
        # version 2 builds version 1's rows unpadded, then splices its features and the padding in
        self._v2_pad = (0.0,) * len(extra_job_features) if version == 2 else None
        self._job_pad = () if version == 2 else (0.0,) * (self.job_width - len(JOB_FEATURES))
        self._cluster_pad = (0.0,) * len(extra_cluster_features)
        self._empty_server = (0.0,) * len(SERVER_FEATURES)

    def __deepcopy__(self, memo: dict) -> ObservationBuilder:
        """A copy (an env's fork) that shares what the builder keeps of pure functions across
        engines (scaling efficiencies, loaned-type rates by run context: entries only filled in,
        each with its one value), so a fork does not copy them; the rest is copied."""
        clone = object.__new__(type(self))
        memo[id(self)] = clone
        for name, value in self.__dict__.items():
            clone.__dict__[name] = value if name in _SHARED_ON_FORK else copy.deepcopy(value, memo)
        return clone

    def _scaling_efficiency(self, view: ClusterView, job: JobView) -> float:
        spec = job.spec
        key = (spec.model, spec.min_gpus, spec.max_gpus)
        eff = self._efficiency.get(key)
        if eff is None:
            engine_rate = view.reference_throughput
            eff = engine_rate(spec.model, spec.max_gpus) / (spec.max_gpus / spec.min_gpus * engine_rate(spec.model, spec.min_gpus))
            self._efficiency[key] = eff
        return eff

    def _static(self, view: ClusterView, job: JobView, constants: EngineConstants) -> tuple:
        """A job's spec-derived part (fixed for the engine): model, sizes, its features 2-5 and 10,
        and the reference throughput at its requested size."""
        index = job.index
        static = constants.jobs.get(index)
        if static is None:
            spec = job.spec
            static = constants.jobs[index] = (
                spec.model, spec.num_gpus, spec.min_gpus, spec.elastic,
                float(spec.elastic), spec.num_gpus / GPU_NORM, spec.min_gpus / GPU_NORM, spec.max_gpus / GPU_NORM,
                self._scaling_efficiency(view, job), constants.reference(spec.model, spec.num_gpus),
            )
        return static

    def _constants(self, view: ClusterView) -> EngineConstants:
        """:func:`engine_constants`, with this builder's shared loaned-type rates attached."""
        constants = engine_constants(view)
        if constants.shared_goodput is None:
            context = (view.profiles, view.config)  # what the engine's scaling model is made of
            shared = self._shared_goodput.get(context)
            if shared is None:
                shared = self._shared_goodput[context] = {}
            constants.shared_goodput = shared
            parts = self._shared_parts.get(context)
            if parts is None:
                parts = self._shared_parts[context] = {}
            constants.shared_parts = parts
        return constants

    def _job_rows(self, view: ClusterView, jobs: list[JobView], snapshots: list[JobSnapshot],
                  constants: EngineConstants, loaned_type: tuple[str, int] | None, any_loaned: bool,
                  out: list) -> tuple[int, int]:
        """Append the job slots' features (``JOB_FEATURES``, then this builder's zero padding) to
        ``out``, row after row; ``snapshots``: ``view.snapshots(jobs)``. ``any_loaned``: False when no server is on loan (no job then has
        GPUs on one). Returns (GPUs the queued ones among them request, how many of them run).

        The common rows are built here: a running job whose allocation is that of its kept row
        (``EngineConstants.running_rows``), with only its time-dependent features computed (and
        its rate ratio when its rate changed); every other row (a queued job's too, from its kept
        row while that holds) by :meth:`_row` (the same numbers either way)."""
        now = view.now
        log1p = math.log1p
        running_state, queued_state = JobState.RUNNING, JobState.QUEUED
        adaptive, running_rows = constants.adaptive, constants.running_rows
        pad = self._job_pad
        shown_queued_gpus = shown_running = 0
        # (0.0 if x < 0.0 else x) is max(x, 0.0) and (x if x > 0.0 else 0.0) is max(0.0, x), to the
        # bit (-0.0 and NaN included), without the call
        # the remaining work in a snapshot is the believed one under a knowledge mode, the part the true one
        for job, snapshot in zip(jobs, snapshots):
            index = job.index
            state = snapshot[0]
            if state is queued_state:
                queued_gpus = self._kept_queued_row(job, snapshot, constants, loaned_type, out)
                if queued_gpus is not None:  # its kept row held
                    shown_queued_gpus += queued_gpus
                    continue
            else:
                held = running_rows.get(index)
                if held is not None:
                    held_allocation, held_rate, workers, held_loaned, head, eff, ref, on_loaned, rate_ratio, flexible, \
                        base, rates = held
                    _, allocation, workers_now, rate, begin, remaining, attained, part = snapshot
                    if state is running_state and held_allocation is allocation and workers_now == workers \
                            and held_loaned is any_loaned and workers:
                        shown_running += 1
                        if rate != held_rate:  # a new rate on the same GPUs (a progress part's): rate_ratio follows
                            rate_ratio = rate / base
                            running_rows[index] = (held_allocation, rate, workers, held_loaned, head, eff, ref,
                                                   on_loaned, rate_ratio, flexible, base, rates)
                        remaining_est = remaining / ref  # job.remaining_time_at(spec.num_gpus)
                        remaining_now = remaining / rate if rate > 0 else remaining_est
                        if loaned_type is None:
                            remaining_loaned = 0.0
                        else:
                            # view.goodput(job, num_gpus, *loaned_type), cached (EngineConstants.loaned_rate_at,
                            # its first look-up inline)
                            loaned_rate = rates[part] if rates is not None and part >= 0 else None
                            if loaned_rate is None:
                                loaned_rate = constants.loaned_rate_at(job, index, part, job.batch_size if adaptive
                                                                       else None, rates)
                            if loaned_rate > 0:
                                left = remaining / loaned_rate
                                remaining_loaned = log1p((0.0 if left < 0.0 else left) / 60.0) / 10.0
                            else:
                                remaining_loaned = 1.0
                        out += head
                        out += (
                            log1p(attained / 3600.0) / 10.0,
                            log1p((0.0 if remaining_est < 0.0 else remaining_est) / 60.0) / 10.0,
                            eff, 1.0 if begin > now else 0.0,
                            on_loaned, rate_ratio, flexible,
                            log1p((0.0 if remaining_now < 0.0 else remaining_now) / 60.0) / 10.0,
                            remaining_loaned,
                        )
                        if pad:
                            out += pad
                        continue
            queued_gpus, running = self._row(view, job, snapshot, constants, loaned_type, any_loaned, out)
            shown_queued_gpus += queued_gpus
            shown_running += running
        return shown_queued_gpus, shown_running

    def _kept_queued_row(self, job: JobView, snapshot: JobSnapshot, constants: EngineConstants,
                         loaned_type: tuple[str, int] | None, out: list) -> int | None:
        """Append a queued job's kept row with its wait now (:meth:`_row`'s kept queued row, with
        less around it) and return the GPUs it requests; None, appending nothing, unless it holds."""
        index = job.index
        kept_row = constants.queued_rows.get(index)
        if kept_row is None:
            return None
        batch = job.batch_size if constants.adaptive and loaned_type is not None else None
        if kept_row[0] != (snapshot[5], snapshot[2], snapshot[6], batch):  # remaining work, workers, attained
            return None
        waiting = job.waiting_s
        out += kept_row[1]
        out.append(math.log1p((0.0 if waiting < 0.0 else waiting) / 60.0) / 10.0)
        out += kept_row[2]
        out += self._job_pad
        return constants.jobs[index][1]  # _row's static[1]: spec.num_gpus

    def _row(self, view: ClusterView, job: JobView, snapshot: JobSnapshot, constants: EngineConstants,
             loaned_type: tuple[str, int] | None, any_loaned: bool, out: list) -> tuple[int, int]:
        """Append one job row (as :meth:`_job_rows`) and keep what the next steps can reuse;
        (GPUs it requests if queued else 0, 1 if it runs else 0)."""
        now = view.now
        log1p = math.log1p
        index = job.index
        static = constants.jobs.get(index)
        if static is None:
            static = self._static(view, job, constants)
        state, allocation, workers, rate, overhead_until, remaining, attained, part = snapshot
        queued = state is JobState.QUEUED
        batch = job.batch_size if constants.adaptive and loaned_type is not None else None
        pad = self._job_pad
        if queued:
            waiting = job.waiting_s
            waiting = log1p((0.0 if waiting < 0.0 else waiting) / 60.0) / 10.0
            # a queued job's row changes with its wait only, until it runs again: kept
            key = (remaining, workers, attained, batch)
            kept = constants.queued_rows.get(index)
            if kept is not None and kept[0] == key:
                out += kept[1]
                out.append(waiting)
                out += kept[2]
                if pad:
                    out += pad
                return static[1], 0
        model, num_gpus, min_gpus, elastic, f_elastic, f_req, f_min, f_max, eff, ref = static
        # the job's loaned-type rates by part where the batch plays no part (else None)
        rates = constants.part_rates(job) if batch is None and loaned_type is not None else None
        remaining_est = remaining / ref  # job.remaining_time_at(spec.num_gpus)
        if not queued and workers:
            # the allocation is replaced, never changed in place, by the engine
            inference_set = constants.inference_set
            on_loaned = sum([n for s, n in allocation.items() if s in inference_set]) / workers \
                if any_loaned else 0 / workers
            base = constants.ref.get((model, workers))
            if base is None:
                base = constants.reference(model, workers)
            rate_ratio = rate / base
            flexible = (workers - min_gpus) / GPU_NORM if elastic else 0.0
            first: tuple[float, ...] = (1.0, 0.0, f_elastic, f_req, f_min, f_max, workers / GPU_NORM, 0.0)
            constants.running_rows[index] = (allocation, rate, workers, any_loaned, first, eff, ref, on_loaned,
                                             rate_ratio, flexible, base, rates)
            remaining_now = remaining / rate if rate > 0 else remaining_est
        else:
            on_loaned = rate_ratio = flexible = 0.0
            remaining_now = remaining_est
        if loaned_type is not None:
            # view.goodput(job, num_gpus, *loaned_type), cached (EngineConstants.loaned_rate)
            loaned_rate = constants.loaned_rate_at(job, index, part, batch, rates)
            if loaned_rate > 0:
                left = remaining / loaned_rate
                remaining_loaned = log1p((0.0 if left < 0.0 else left) / 60.0) / 10.0
            else:
                remaining_loaned = 1.0
        else:
            remaining_loaned = 0.0
        est = log1p((0.0 if remaining_est < 0.0 else remaining_est) / 60.0) / 10.0
        now_left = log1p((0.0 if remaining_now < 0.0 else remaining_now) / 60.0) / 10.0
        tail = (
            log1p(attained / 3600.0) / 10.0, est,
            eff, 0.0 if queued else float(overhead_until > now),  # in overhead: never while queued
            on_loaned, rate_ratio, flexible, now_left, remaining_loaned,
        )
        if queued:
            head = (1.0, 1.0, f_elastic, f_req, f_min, f_max, workers / GPU_NORM)
            constants.queued_rows[index] = (key, head, tail)
            out += head
            out.append(waiting)
        else:
            out += (1.0, 0.0, f_elastic, f_req, f_min, f_max, workers / GPU_NORM,
                    0.0)  # waiting: job.waiting_s is 0 while not queued
        out += tail
        if pad:
            out += pad
        return (static[1], 0) if queued else (0, 1 if state is JobState.RUNNING else 0)

    @staticmethod
    def _occupancy(view: ClusterView, constants: EngineConstants, loaned: list[int], n_inf: int) -> tuple:
        """The cluster features read off the free GPUs alone (kept while ``topology.version``
        stays): (free_training, free_loaned, loaned, the five ``servers_free_*`` shares)."""
        # every training server is usable (Server.usable): the free-GPU histogram and total of the
        # training servers, read off the topology's index (counts as ints: h / usable is the same
        # float as the per-server float sum over usable)
        topology = view.topology
        by_free = topology.free_histogram(Pool.TRAINING)
        usable = max(1, len(constants.training_ids))
        free = topology.free  # per server id: each loaned server's free_gpus
        return (topology.free_total(constants.training_cells) / max(1, constants.training_gpus),
                sum([free[s] for s in loaned]) / constants.inference_gpus,
                len(loaned) / n_inf,
                (by_free[0] / usable, sum(by_free[1:2]) / usable, sum(by_free[2:4]) / usable,
                 sum(by_free[4:8]) / usable, sum(by_free[8:]) / usable))

    @staticmethod
    def _server_rows(view: ClusterView, constants: EngineConstants, servers: list[int]) -> list[float]:
        """The loaned-server slots' features (``SERVER_FEATURES``), row after row; kept while
        ``topology.version`` and the slots stay (the engine changes a server's jobs and used GPUs
        only with its free GPUs, which counts a version: ``lyra_gym.sim.occupancy``)."""
        version = view.topology.version
        kept = constants.server_rows
        if kept is not None and kept[0] == version and kept[1] == servers:
            return kept[2]
        servers_all = view.servers
        inelastic = constants.inelastic.__getitem__
        rows: list[float] = []
        for sid in servers:
            server = servers_all[sid]
            on = server.jobs  # job index -> GPUs
            rows += (1.0, server.used_gpus / server.num_gpus, len(on) / 8.0, sum(map(inelastic, on)) / 8.0)
        constants.server_rows = (version, list(servers), rows)
        return rows

    def build(self, view: ClusterView, jobs: list[JobView], servers: list[int],
              window: WindowLike | None = None) -> np.ndarray:
        """The observation of ``view`` with job slots ``jobs`` and loaned-server slots ``servers``;
        ``window``: the episode's window (its ``start_s`` and ``length_s``), read by version 2 only
        (None: a run over a whole trace, no window)."""
        constants = self._constants(view)
        topology = view.topology
        loaned = topology.loaned()  # view.loaned_servers()
        values: list[float] = []
        snapshots = view.snapshots(jobs)
        shown_queued_gpus, shown_running = self._job_rows(view, jobs, snapshots, constants, constants.loaned_type,
                                                          bool(loaned), values)
        v2_pad = self._v2_pad
        if v2_pad is not None:
            values = splice_job_rows(values, view, jobs, snapshots, constants.models, len(JOB_FEATURES), v2_pad)
        values += (0.0,) * ((self.k - len(jobs)) * self.job_width)
        now = view.now
        n_inf = max(1, len(constants.inference_ids))
        training_gpus = constants.training_gpus
        occupancy = constants.occupancy
        if occupancy is None or occupancy[0] != topology.version:
            occupancy = constants.occupancy = (topology.version, self._occupancy(view, constants, loaned, n_inf))
        free_training, free_loaned, loaned_share, shares = occupancy[1]
        num_queued, num_running = view.num_queued, view.num_running
        head_wait = view.longest_wait_s()
        tail_gpus = view.queued_gpus() - shown_queued_gpus if num_queued else 0
        running_unseen = num_running - shown_running
        day = now / 86400.0
        ahead = constants.demand_ahead
        values += (
            free_training, free_loaned, loaned_share,
            view.num_loanable / n_inf,
            view.inference_demand / n_inf,
            ahead[0].at(now + 3600) / n_inf,
            ahead[1].at(now + 3 * 3600) / n_inf,
            ahead[2].at(now + 6 * 3600) / n_inf,
            view.reclaim_pending / n_inf,
            math.sin(2 * math.pi * day),
            math.cos(2 * math.pi * day),
            float(int(day) % 7 >= 5),
            math.log1p(num_queued) / 6.0,
            math.log1p(num_running) / 6.0,
        )
        values += shares
        values += (
            log_time(head_wait),
            tail_gpus / max(1, training_gpus),
            math.log1p(running_unseen) / 6.0,
        )
        if v2_pad is not None:
            values += cluster_features(constants.submit_times(), now, window)
        values += self._cluster_pad
        values += self._server_rows(view, constants, servers)
        values += self._empty_server * (self.m - len(servers))
        # float64 values -> float32 by struct's native "f" (the C cast, as assigning them into a float32
        # array does: the same bits, inf beyond its range, NaN kept), then clipped into a new array
        return np.frombuffer(struct.pack(self._format, *values), dtype=np.float32).clip(-1.0, 1.0)
