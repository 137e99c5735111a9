"""Fixed-size, normalised observations: K job slots, cluster features, M loaned-server slots.

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
)
SERVER_FEATURES = (
    "present",            # 1 if the slot holds a loaned server
    "used",               # GPUs in use / GPUs
    "jobs",               # jobs on it / 8
    "inelastic_jobs",     # inelastic jobs on it (preempted if it is returned) / 8
)


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
    """Builds the flat float32 observation; ``size`` is its length."""

    def __init__(self, num_job_slots: int, num_server_slots: int) -> None:
        self.k = num_job_slots
        self.m = num_server_slots
        self.size = self.k * len(JOB_FEATURES) + len(CLUSTER_FEATURES) + self.m * len(SERVER_FEATURES)
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

    def build(self, view: ClusterView, jobs: list[JobView], servers: list[int]) -> np.ndarray:
        nj = len(JOB_FEATURES)
        obs = np.zeros(self.size, dtype=np.float32)
        now = view.now
        for i, job in enumerate(jobs):
            spec = job.spec
            queued = job.state is JobState.QUEUED
            row = (
                1.0, float(queued), float(spec.elastic), spec.num_gpus / GPU_NORM, spec.min_gpus / GPU_NORM,
                spec.max_gpus / GPU_NORM, job.workers / GPU_NORM, log_time(job.waiting_s),
                math.log1p(job.attained_gpu_s / 3600.0) / 10.0, log_time(job.remaining_time_at(spec.num_gpus)),
                self._scaling_efficiency(view, job), float(job.overhead_until > now and not queued),
            )
            obs[i * nj:(i + 1) * nj] = row
        base = self.k * nj
        servers_all = view.servers
        n_inf = max(1, len(view.inference_server_ids))
        free = view.free_gpus()
        training_gpus = sum(servers_all[s].num_gpus for s in view.training_server_ids)
        inference_gpus = sum(servers_all[s].num_gpus for s in view.inference_server_ids) or 1
        loaned = view.loaned_servers()
        day = now / 86400.0
        cluster = (
            sum(free[s] for s in view.training_server_ids) / max(1, training_gpus),
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
        )
        obs[base:base + len(cluster)] = cluster
        base += len(cluster)
        ns = len(SERVER_FEATURES)
        for i, sid in enumerate(servers):
            server = servers_all[sid]
            on = server.jobs
            inelastic = sum(1 for idx in on if not view.job_at(idx).spec.elastic)
            obs[base + i * ns: base + (i + 1) * ns] = (1.0, server.used_gpus / server.num_gpus, len(on) / 8.0, inelastic / 8.0)
        np.clip(obs, -1.0, 1.0, out=obs)
        return obs
