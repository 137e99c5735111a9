"""Fixed-size, normalised observations: K job slots, cluster features, M loaned-server slots.

Layout (:func:`observation_layout`)::

    [ K job rows x job_width | cluster_width | M server rows x len(SERVER_FEATURES) ]

``job_width`` is ``len(JOB_FEATURES)`` plus an environment's own per-job features, appended
at the end of each row; ``cluster_width`` likewise (the full-control environment appends its
decision state, :mod:`lyra_gym.envs.alloc`). The builder leaves appended entries at 0.

Every entry lies in [-1, 1] (clipped). Times enter as log1p(seconds / 60) / 10,
so one minute is 0.07, one hour 0.41 and ten days 0.96.
"""

from __future__ import annotations

import math

import numpy as np

from lyra_gym.cluster import Pool
from lyra_gym.jobs import JobState
from lyra_gym.view import ClusterView, JobView

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


FREE_BINS = (0, 1, 2, 2, 3, 3, 3, 3)  # free GPUs (0..7) -> histogram bin; 8 or more -> bin 4


def observation_layout(num_job_slots: int, num_server_slots: int, job_width: int = len(JOB_FEATURES),
                       cluster_width: int = len(CLUSTER_FEATURES)) -> dict[str, tuple[int, int, int]]:
    """``{"jobs": (start, slots, width), "cluster": (start, 1, width), "servers": (start, slots, width)}``."""
    cluster = num_job_slots * job_width
    return {
        "jobs": (0, num_job_slots, job_width),
        "cluster": (cluster, 1, cluster_width),
        "servers": (cluster + cluster_width, num_server_slots, len(SERVER_FEATURES)),
    }


def log_time(seconds: float) -> float:
    return math.log1p(max(seconds, 0.0) / 60.0) / 10.0


def job_slots(view: ClusterView, k: int) -> list[JobView]:
    """The K jobs an agent sees: queued ones in Lyra's admission order (shortest estimated
    remaining time first), then running elastic jobs, then running inelastic ones."""
    queued = sorted(view.queued_jobs(), key=lambda j: (j.remaining_time_at(j.spec.num_gpus), j.index))
    if len(queued) >= k:
        return queued[:k]
    running = list(view.running_jobs())
    slots = queued + [j for j in running if j.spec.elastic] + [j for j in running if not j.spec.elastic]
    return slots[:k]


def server_slots(view: ClusterView, m: int) -> list[int]:
    """The first M loaned servers by id."""
    return list(view.loaned_servers()[:m])


class ObservationBuilder:
    """Builds the flat float32 observation; ``size`` is its length.

    :param extra_job_features: names of features appended to each job row (left 0 here).
    :param extra_cluster_features: names of features appended to the cluster block (left 0 here).
    """

    def __init__(self, num_job_slots: int, num_server_slots: int, extra_job_features: tuple[str, ...] = (),
                 extra_cluster_features: tuple[str, ...] = ()) -> None:
        self.k = num_job_slots
        self.m = num_server_slots
        self.job_width = len(JOB_FEATURES) + len(extra_job_features)
        self.cluster_width = len(CLUSTER_FEATURES) + len(extra_cluster_features)
        self.layout = observation_layout(self.k, self.m, self.job_width, self.cluster_width)
        start, slots, width = self.layout["servers"]
        self.size = start + slots * width
        self._efficiency: dict[tuple[str, int, int], float] = {}

    def _scaling_efficiency(self, view: ClusterView, job: JobView) -> float:
        spec = job.spec
        key = (spec.model, spec.min_gpus, spec.max_gpus)
        eff = self._efficiency.get(key)
        if eff is None:
            engine_rate = view.reference_throughput
            eff = engine_rate(spec.model, spec.max_gpus) / (spec.max_gpus / spec.min_gpus * engine_rate(spec.model, spec.min_gpus))
            self._efficiency[key] = eff
        return eff

    def _job_row(self, view: ClusterView, job: JobView, loaned_type: tuple[str, int] | None) -> tuple[float, ...]:
        spec = job.spec
        now = view.now
        queued = job.state is JobState.QUEUED
        remaining_est = job.remaining_time_at(spec.num_gpus)
        on_loaned = rate_ratio = flexible = 0.0
        remaining_now = remaining_est
        if not queued and job.workers:
            servers = view.servers
            on_loaned = sum(n for s, n in job.allocation.items() if servers[s].pool is Pool.INFERENCE) / job.workers
            rate_ratio = job.rate / view.reference_throughput(spec.model, job.workers)
            flexible = (job.workers - spec.min_gpus) / GPU_NORM if spec.elastic else 0.0
            remaining_now = job.remaining_work / job.rate if job.rate > 0 else remaining_est
        remaining_loaned = 0.0
        if loaned_type is not None:
            rate = view.goodput(job, spec.num_gpus, *loaned_type)
            remaining_loaned = log_time(job.remaining_work / rate) if rate > 0 else 1.0
        return (
            1.0, float(queued), float(spec.elastic), spec.num_gpus / GPU_NORM, spec.min_gpus / GPU_NORM,
            spec.max_gpus / GPU_NORM, job.workers / GPU_NORM, log_time(job.waiting_s),
            math.log1p(job.attained_gpu_s / 3600.0) / 10.0, log_time(remaining_est),
            self._scaling_efficiency(view, job), float(job.overhead_until > now and not queued),
            on_loaned, rate_ratio, flexible, log_time(remaining_now), remaining_loaned,
        )

    def build(self, view: ClusterView, jobs: list[JobView], servers: list[int]) -> np.ndarray:
        obs = np.zeros(self.size, dtype=np.float32)
        width, nj = self.job_width, len(JOB_FEATURES)
        servers_all = view.servers
        inference_ids = view.inference_server_ids
        loaned_type = None
        if inference_ids:
            first = servers_all[inference_ids[0]]
            loaned_type = (first.gpu_type, first.num_gpus)
        for i, job in enumerate(jobs):
            obs[i * width:i * width + nj] = self._job_row(view, job, loaned_type)
        base = self.k * width
        now = view.now
        n_inf = max(1, len(inference_ids))
        free = view.free_gpus()
        training_ids = view.training_server_ids
        training_gpus = sum(servers_all[s].num_gpus for s in training_ids)
        inference_gpus = sum(servers_all[s].num_gpus for s in inference_ids) or 1
        loaned = view.loaned_servers()
        histogram = [0.0] * 5
        usable = 0
        for s in training_ids:
            if servers_all[s].usable:
                usable += 1
                histogram[FREE_BINS[free[s]] if free[s] < 8 else 4] += 1.0
        shown = {job.index for job in jobs}
        queued = list(view.queued_jobs())
        head_wait = max((j.waiting_s for j in queued), default=0.0)
        tail_gpus = sum(j.spec.num_gpus for j in queued if j.index not in shown)
        running_unseen = sum(1 for j in view.running_jobs() if j.index not in shown)
        day = now / 86400.0
        cluster = (
            sum(free[s] for s in training_ids) / max(1, training_gpus),
            sum(free[s] for s in loaned) / inference_gpus,
            len(loaned) / n_inf,
            view.num_loanable / n_inf,
            view.inference_demand / n_inf,
            view.inference_demand_at(now + 3600) / n_inf,
            view.inference_demand_at(now + 3 * 3600) / n_inf,
            view.inference_demand_at(now + 6 * 3600) / n_inf,
            view.reclaim_pending / n_inf,
            math.sin(2 * math.pi * day),
            math.cos(2 * math.pi * day),
            float(int(day) % 7 >= 5),
            math.log1p(view.num_queued) / 6.0,
            math.log1p(view.num_running) / 6.0,
            *(h / max(1, usable) for h in histogram),
            log_time(head_wait),
            tail_gpus / max(1, training_gpus),
            math.log1p(running_unseen) / 6.0,
        )
        obs[base:base + len(cluster)] = cluster
        base += self.cluster_width
        ns = len(SERVER_FEATURES)
        for i, sid in enumerate(servers):
            server = servers_all[sid]
            on = server.jobs
            inelastic = sum(1 for idx in on if not view.job_at(idx).spec.elastic)
            obs[base + i * ns: base + (i + 1) * ns] = (1.0, server.used_gpus / server.num_gpus, len(on) / 8.0, inelastic / 8.0)
        np.clip(obs, -1.0, 1.0, out=obs)
        return obs
