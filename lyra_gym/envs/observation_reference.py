"""The observation, feature by feature, as plain functions of the public view: read this first.

Each feature is a named function of the public :class:`~lyra_gym.sim.view.ClusterView` and
:class:`~lyra_gym.sim.view.JobView` (and, for version 2's cluster features, the episode's
window): no caches, nothing kept between calls, nothing read past the view. Its docstring says
what it means (first paragraph) and its unit or scale (the ``Scale:`` line):
``docs/observations.md`` is generated from them (:mod:`lyra_gym.envs.observation_docs`).

:func:`reference_observation` lays them out in the documented order (K job rows, the cluster
block, M loaned-server rows). The fast :class:`~lyra_gym.envs.observation.ObservationBuilder`
equals it float for float at every step of every guided environment
(``tests/envs/test_observation_reference.py``); where the fast builder computes a value in a
particular order, the function here does the same, and says so.

Signatures: a job feature ``f(view, job)``, a cluster feature ``f(view, slots, window)`` (``slots``:
the job slots shown; ``window``: the episode's window, None over a whole trace), a server
feature ``f(view, server_id)``. Values are float64, unclipped; the observation casts them to
float32 and clips each into [-1, 1].
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from lyra_gym.envs.observation_v2 import ATTAINED_SCALE_S, PREEMPTIONS_CAP, WindowLike
from lyra_gym.model.jobs import JobState
from lyra_gym.sim.cluster import Pool
from lyra_gym.sim.view import ClusterView, JobView

GPU_NORM = 64.0  # GPU counts are divided by this (the largest job size of the shipped presets)
COUNT_NORM = 6.0  # job counts enter as log1p(count) / 6
SERVER_JOBS_NORM = 8.0  # jobs on a server are divided by this

JobFeature = Callable[[ClusterView, JobView], float]
ClusterFeature = Callable[[ClusterView, Sequence[JobView], "WindowLike | None"], float]
ServerFeature = Callable[[ClusterView, int], float]


def log_time(seconds: float) -> float:
    """``log1p(max(seconds, 0) / 60) / 10``: one minute 0.07, one hour 0.41, ten days 0.96."""
    return math.log1p(max(seconds, 0.0) / 60.0) / 10.0


# --- what several features read ------------------------------------------------------------------
def loaned_type(view: ClusterView) -> tuple[str, int] | None:
    """(GPU type, GPUs per server) of the inference pool's first server; None with no inference pool."""
    ids = view.inference_server_ids
    if not ids:
        return None
    first = view.servers[ids[0]]
    return first.gpu_type, first.num_gpus


def is_queued(job: JobView) -> bool:
    return job.state is JobState.QUEUED


def holds_gpus(job: JobView) -> bool:
    """Not queued and holding workers: the rows whose allocation features are read."""
    return not is_queued(job) and job.workers > 0


def reference_time(view: ClusterView, job: JobView) -> float:
    """Seconds to finish the (believed) remaining work at the reference throughput of its requested
    size: ``remaining_work / reference_throughput(model, num_gpus)``."""
    spec = job.spec
    return job.remaining_work / view.reference_throughput(spec.model, spec.num_gpus)


def training_gpus(view: ClusterView) -> int:
    return sum(view.servers[s].num_gpus for s in view.training_server_ids)


def inference_servers(view: ClusterView) -> int:
    """Inference servers, at least 1 (the divisor of the loaning features)."""
    return max(1, len(view.inference_server_ids))


def training_free(view: ClusterView) -> list[int]:
    """Free GPUs of each training server."""
    free = view.free_gpus()
    return [free[s] for s in view.training_server_ids]


# --- job features, version 1 --------------------------------------------------------------------
def job_present(view: ClusterView, job: JobView) -> float:
    """the slot holds a job

    Scale: 0 or 1"""
    return 1.0


def job_queued(view: ClusterView, job: JobView) -> float:
    """the job is queued (0: running)

    Scale: 0 or 1"""
    return 1.0 if is_queued(job) else 0.0


def job_elastic(view: ClusterView, job: JobView) -> float:
    """the job may scale between its minimum and maximum size

    Scale: 0 or 1"""
    return float(job.spec.elastic)


def job_requested_gpus(view: ClusterView, job: JobView) -> float:
    """GPUs the job requests

    Scale: GPUs / 64"""
    return job.spec.num_gpus / GPU_NORM


def job_min_gpus(view: ClusterView, job: JobView) -> float:
    """its minimum GPUs

    Scale: GPUs / 64"""
    return job.spec.min_gpus / GPU_NORM


def job_max_gpus(view: ClusterView, job: JobView) -> float:
    """its maximum GPUs

    Scale: GPUs / 64"""
    return job.spec.max_gpus / GPU_NORM


def job_workers(view: ClusterView, job: JobView) -> float:
    """GPUs it holds now

    Scale: GPUs / 64"""
    return job.workers / GPU_NORM


def job_waiting(view: ClusterView, job: JobView) -> float:
    """time since it last entered the queue (0 while not queued)

    Scale: log-time"""
    return log_time(job.waiting_s)


def job_attained(view: ClusterView, job: JobView) -> float:
    """GPU-hours it has held so far

    Scale: log1p(GPU-h) / 10"""
    return math.log1p(job.attained_gpu_s / 3600.0) / 10.0


def job_remaining_est(view: ClusterView, job: JobView) -> float:
    """time to finish at its requested size on the reference GPU (the remaining work the run's
    knowledge model shows)

    Scale: log-time"""
    return log_time(reference_time(view, job))


def job_scaling_efficiency(view: ClusterView, job: JobView) -> float:
    """throughput at its maximum / (max / min x throughput at its minimum), reference GPU, packed

    Scale: ratio"""
    spec, rate = job.spec, view.reference_throughput
    # (max / min) first, then times the rate at min: the fast builder's order
    return rate(spec.model, spec.max_gpus) / (spec.max_gpus / spec.min_gpus * rate(spec.model, spec.min_gpus))


def job_in_overhead(view: ClusterView, job: JobView) -> float:
    """it is (re)starting or rescaling

    Scale: 0 or 1"""
    return 0.0 if is_queued(job) else float(job.overhead_until > view.now)


def job_on_loaned(view: ClusterView, job: JobView) -> float:
    """share of its GPUs on loaned inference servers

    Scale: share, 0-1"""
    if not holds_gpus(job):
        return 0.0
    servers = view.servers
    # a sum of ints (exact in any order), then one division
    return sum(n for s, n in job.allocation.items() if servers[s].pool is Pool.INFERENCE) / job.workers


def job_rate_ratio(view: ClusterView, job: JobView) -> float:
    """current rate / rate of as many reference GPUs packed (0 while queued)

    Scale: ratio"""
    if not holds_gpus(job):
        return 0.0
    return job.rate / view.reference_throughput(job.spec.model, job.workers)


def job_flexible_workers(view: ClusterView, job: JobView) -> float:
    """workers beyond its minimum, what a reclaim may take (0 queued or inelastic)

    Scale: GPUs / 64"""
    if not holds_gpus(job) or not job.spec.elastic:
        return 0.0
    return (job.workers - job.spec.min_gpus) / GPU_NORM


def job_remaining_now(view: ClusterView, job: JobView) -> float:
    """time to finish at its current rate (queued: remaining_est)

    Scale: log-time"""
    if holds_gpus(job) and job.rate > 0:
        return log_time(job.remaining_work / job.rate)
    return log_time(reference_time(view, job))


def job_remaining_loaned(view: ClusterView, job: JobView) -> float:
    """time to finish at its requested size on the loaned GPU type (1 if that rate is 0; 0 with no
    inference servers)

    Scale: log-time"""
    loaned = loaned_type(view)
    if loaned is None:
        return 0.0
    rate = view.goodput(job, job.spec.num_gpus, *loaned)
    return log_time(job.remaining_work / rate) if rate > 0 else 1.0


# --- job features, version 2 --------------------------------------------------------------------
def job_attained_service(view: ClusterView, job: JobView) -> float:
    """GPU-seconds it has held so far (Tiresias' key; linear where its thresholds sit)

    Scale: GPU-s / 36,000, clipped at 1"""
    return job.attained_gpu_s / ATTAINED_SCALE_S


def runs(job: JobView) -> bool:
    """Running and holding workers: the rows version 2's run features are read for."""
    return job.state is JobState.RUNNING and job.workers > 0


def job_statistical_efficiency(view: ClusterView, job: JobView) -> float:
    """statistical efficiency of the batch it runs now, as the engine charges it (Pollux's E; 1
    while queued or where none is charged)

    Scale: ratio, clipped at 1"""
    return job.statistical_efficiency if runs(job) else 1.0


def job_speedup(view: ClusterView, job: JobView) -> float:
    """its rate now / its rate at its requested size on the reference GPU at its initial batch
    (Pollux's speed-up; placement, GPU type and E included; 0 while queued)

    Scale: log2(1 + ratio) / 4: 1x 0.25, 3x 0.5, 15x 1"""
    return math.log2(1.0 + job.rate / job.reference_rate) / 4.0 if runs(job) else 0.0


def job_preemptions(view: ClusterView, job: JobView) -> float:
    """times it was preempted so far

    Scale: count / 8, clipped at 1"""
    return min(job.preemptions, PREEMPTIONS_CAP) / PREEMPTIONS_CAP


def restart_overhead_s(view: ClusterView, model: str) -> float:
    """Seconds of restart overhead a job of ``model`` pays when started again after a preemption:
    ``overheads.restart_s``, else its model's profile ``restart_overhead_s``."""
    restart = view.overheads.restart_s
    return restart if restart is not None else view.profiles.model(model).restart_overhead_s


def job_preempt_cost(view: ClusterView, job: JobView) -> float:
    """what preempting it now would cost it: its restart overhead plus the run time since its last
    checkpoint (0 while queued)

    Scale: log-time"""
    if not runs(job):
        return 0.0
    return log_time(restart_overhead_s(view, job.spec.model) + job.lost_run_s)


# --- cluster features, version 1 ----------------------------------------------------------------
def cluster_free_training(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """free training GPUs

    Scale: GPUs / training GPUs"""
    return sum(training_free(view)) / max(1, training_gpus(view))


def cluster_free_loaned(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """free GPUs on loaned servers

    Scale: GPUs / inference GPUs"""
    free = view.free_gpus()
    inference_gpus = sum(view.servers[s].num_gpus for s in view.inference_server_ids) or 1
    return sum(free[s] for s in view.loaned_servers()) / inference_gpus


def cluster_loaned(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """inference servers on loan to training

    Scale: servers / inference servers"""
    return len(view.loaned_servers()) / inference_servers(view)


def cluster_loanable(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """inference servers that may be borrowed now

    Scale: servers / inference servers"""
    return view.num_loanable / inference_servers(view)


def cluster_demand_now(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """inference demand now

    Scale: servers / inference servers"""
    return view.inference_demand / inference_servers(view)


def cluster_demand_1h(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """inference demand one hour ahead

    Scale: servers / inference servers"""
    return view.inference_demand_at(view.now + 3600) / inference_servers(view)


def cluster_demand_3h(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """inference demand three hours ahead

    Scale: servers / inference servers"""
    return view.inference_demand_at(view.now + 3 * 3600) / inference_servers(view)


def cluster_demand_6h(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """inference demand six hours ahead

    Scale: servers / inference servers"""
    return view.inference_demand_at(view.now + 6 * 3600) / inference_servers(view)


def cluster_reclaim_pending(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """loaned servers owed back to inference

    Scale: servers / inference servers"""
    return view.reclaim_pending / inference_servers(view)


def cluster_time_of_day_sin(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """sine of the time of day

    Scale: sin(2 pi t / 86400 s), -1 to 1"""
    return math.sin(2 * math.pi * (view.now / 86400.0))  # (2 pi) x days: the fast builder's order


def cluster_time_of_day_cos(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """cosine of the time of day

    Scale: cos(2 pi t / 86400 s), -1 to 1"""
    return math.cos(2 * math.pi * (view.now / 86400.0))


def cluster_weekend(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """Saturday or Sunday (t = 0 is a Monday)

    Scale: 0 or 1"""
    return float(int(view.now / 86400.0) % 7 >= 5)


def cluster_queued_jobs(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """queued jobs

    Scale: log1p(jobs) / 6"""
    return math.log1p(view.num_queued) / COUNT_NORM


def cluster_running_jobs(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """running jobs

    Scale: log1p(jobs) / 6"""
    return math.log1p(view.num_running) / COUNT_NORM


def _training_servers_free(view: ClusterView, low: int, high: float) -> float:
    """Share of the training servers with ``low`` to ``high`` free GPUs (a count, then one division)."""
    return sum(1 for f in training_free(view) if low <= f <= high) / max(1, len(view.training_server_ids))


def cluster_servers_free_0(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """training servers with no free GPU (fragmentation histogram)

    Scale: share of training servers"""
    return _training_servers_free(view, 0, 0)


def cluster_servers_free_1(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """training servers with 1 free GPU

    Scale: share of training servers"""
    return _training_servers_free(view, 1, 1)


def cluster_servers_free_2_3(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """training servers with 2-3 free GPUs

    Scale: share of training servers"""
    return _training_servers_free(view, 2, 3)


def cluster_servers_free_4_7(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """training servers with 4-7 free GPUs

    Scale: share of training servers"""
    return _training_servers_free(view, 4, 7)


def cluster_servers_free_8(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """training servers with 8 or more free GPUs

    Scale: share of training servers"""
    return _training_servers_free(view, 8, math.inf)


def cluster_queue_head_wait(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """time the longest-waiting queued job has waited

    Scale: log-time"""
    # the longest of now - queued_since; the fast builder takes now - the earliest queued_since,
    # the same float (a rounded subtraction is monotone in what it subtracts)
    return log_time(max((job.waiting_s for job in view.queued_jobs()), default=0.0))


def cluster_queue_tail_gpus(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """GPUs requested by the queued jobs outside the K slots

    Scale: GPUs / training GPUs"""
    shown = {job.index for job in slots if is_queued(job)}
    tail = sum(job.spec.num_gpus for job in view.queued_jobs() if job.index not in shown)  # ints: exact
    return tail / max(1, training_gpus(view))


def cluster_running_unseen(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """running jobs outside the K slots

    Scale: log1p(jobs) / 6"""
    shown = sum(1 for job in slots if job.state is JobState.RUNNING)
    return math.log1p(view.num_running - shown) / COUNT_NORM


# --- cluster features, version 2 ----------------------------------------------------------------
def _submit_times(view: ClusterView) -> list[float]:
    return [job.spec.submit_time for job in view.all_jobs()]


def _arrivals_left(view: ClusterView) -> int:
    """The run's jobs submitted after now (a job arriving now is in the queue already)."""
    now = view.now
    return sum(1 for t in _submit_times(view) if t > now)


def cluster_window_elapsed(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """time since the episode window's start / its length (arrivals stop at 1; 0 with no window)

    Scale: share, 0-1, clipped"""
    if window is None:
        return 0.0
    return min(1.0, max(0.0, (view.now - window.start_s) / window.length_s))


def cluster_arrivals_left(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """jobs not yet submitted

    Scale: log1p(jobs) / 6"""
    return math.log1p(_arrivals_left(view)) / COUNT_NORM


def cluster_arrivals_left_share(view: ClusterView, slots: Sequence[JobView], window: WindowLike | None) -> float:
    """jobs not yet submitted / the window's jobs (warm-up jobs not counted; no window: the run's jobs)

    Scale: share, 0-1"""
    submits = _submit_times(view)
    if window is None:
        jobs = len(submits)
    else:
        jobs = sum(1 for t in submits if t >= window.start_s)
    return _arrivals_left(view) / jobs if jobs else 0.0


# --- loaned-server features ---------------------------------------------------------------------
def server_present(view: ClusterView, server_id: int) -> float:
    """the slot holds a loaned server (the first M by id)

    Scale: 0 or 1"""
    return 1.0


def server_used(view: ClusterView, server_id: int) -> float:
    """GPUs in use on it

    Scale: GPUs / its GPUs"""
    server = view.servers[server_id]
    return server.used_gpus / server.num_gpus


def server_jobs(view: ClusterView, server_id: int) -> float:
    """training jobs on it

    Scale: jobs / 8"""
    return len(view.servers[server_id].jobs) / SERVER_JOBS_NORM


def server_inelastic_jobs(view: ClusterView, server_id: int) -> float:
    """inelastic jobs on it (preempted if it is returned)

    Scale: jobs / 8"""
    on = view.servers[server_id].jobs
    return sum(1 for i in on if not view.job_at(i).spec.elastic) / SERVER_JOBS_NORM


# --- the features in order ----------------------------------------------------------------------
JOB_FEATURE_FUNCTIONS: dict[str, JobFeature] = {
    "present": job_present, "queued": job_queued, "elastic": job_elastic,
    "requested_gpus": job_requested_gpus, "min_gpus": job_min_gpus, "max_gpus": job_max_gpus,
    "workers": job_workers, "waiting": job_waiting, "attained": job_attained,
    "remaining_est": job_remaining_est, "scaling_efficiency": job_scaling_efficiency,
    "in_overhead": job_in_overhead, "on_loaned": job_on_loaned, "rate_ratio": job_rate_ratio,
    "flexible_workers": job_flexible_workers, "remaining_now": job_remaining_now,
    "remaining_loaned": job_remaining_loaned,
}
V2_JOB_FEATURE_FUNCTIONS: dict[str, JobFeature] = {
    "attained_service": job_attained_service, "statistical_efficiency": job_statistical_efficiency,
    "speedup": job_speedup, "preemptions": job_preemptions, "preempt_cost": job_preempt_cost,
}
CLUSTER_FEATURE_FUNCTIONS: dict[str, ClusterFeature] = {
    "free_training": cluster_free_training, "free_loaned": cluster_free_loaned, "loaned": cluster_loaned,
    "loanable": cluster_loanable, "demand_now": cluster_demand_now, "demand_1h": cluster_demand_1h,
    "demand_3h": cluster_demand_3h, "demand_6h": cluster_demand_6h, "reclaim_pending": cluster_reclaim_pending,
    "time_of_day_sin": cluster_time_of_day_sin, "time_of_day_cos": cluster_time_of_day_cos,
    "weekend": cluster_weekend, "queued_jobs": cluster_queued_jobs, "running_jobs": cluster_running_jobs,
    "servers_free_0": cluster_servers_free_0, "servers_free_1": cluster_servers_free_1,
    "servers_free_2_3": cluster_servers_free_2_3, "servers_free_4_7": cluster_servers_free_4_7,
    "servers_free_8": cluster_servers_free_8, "queue_head_wait": cluster_queue_head_wait,
    "queue_tail_gpus": cluster_queue_tail_gpus, "running_unseen": cluster_running_unseen,
}
V2_CLUSTER_FEATURE_FUNCTIONS: dict[str, ClusterFeature] = {
    "window_elapsed": cluster_window_elapsed, "arrivals_left": cluster_arrivals_left,
    "arrivals_left_share": cluster_arrivals_left_share,
}
SERVER_FEATURE_FUNCTIONS: dict[str, ServerFeature] = {
    "present": server_present, "used": server_used, "jobs": server_jobs, "inelastic_jobs": server_inelastic_jobs,
}


def feature_functions(version: int) -> tuple[dict[str, JobFeature], dict[str, ClusterFeature]]:
    """(job features, cluster features) of observation ``version`` (1 or 2), in order."""
    if version == 2:
        return ({**JOB_FEATURE_FUNCTIONS, **V2_JOB_FEATURE_FUNCTIONS},
                {**CLUSTER_FEATURE_FUNCTIONS, **V2_CLUSTER_FEATURE_FUNCTIONS})
    return JOB_FEATURE_FUNCTIONS, CLUSTER_FEATURE_FUNCTIONS


# --- slots ----------------------------------------------------------------------------------------
def reference_job_slots(view: ClusterView, k: int) -> list[JobView]:
    """The K jobs shown: queued ones shortest (believed) reference time first (ties: trace index),
    then running elastic jobs, then running inelastic ones (each in start order)."""
    queued = sorted(view.queued_jobs(), key=lambda job: (reference_time(view, job), job.index))
    running = list(view.running_jobs())
    elastic = [job for job in running if job.spec.elastic]
    inelastic = [job for job in running if not job.spec.elastic]
    return (queued + elastic + inelastic)[:k]


def reference_server_slots(view: ClusterView, m: int) -> list[int]:
    """The first M loaned servers by id."""
    return list(view.loaned_servers()[:m])


def reference_observation(view: ClusterView, slots: Sequence[JobView], servers: Sequence[int], k: int, m: int,
                          version: int = 1, window: WindowLike | None = None, extra_job: int = 0,
                          extra_cluster: int = 0) -> np.ndarray:
    """The observation (float32, every entry clipped to [-1, 1]) of ``view`` with job slots ``slots``
    (at most ``k``) and loaned-server slots ``servers`` (at most ``m``): each job row's features,
    then ``extra_job`` zeros (an env's own features); empty job rows all 0; the cluster features,
    then ``extra_cluster`` zeros; each server row; empty server rows all 0."""
    jobs, cluster = feature_functions(version)
    width = len(jobs) + extra_job
    values: list[float] = []
    for job in slots:
        values += [feature(view, job) for feature in jobs.values()]
        values += [0.0] * extra_job
    values += [0.0] * ((k - len(slots)) * width)
    values += [feature(view, slots, window) for feature in cluster.values()]
    values += [0.0] * extra_cluster
    for server_id in servers:
        values += [feature(view, server_id) for feature in SERVER_FEATURE_FUNCTIONS.values()]
    values += [0.0] * ((m - len(servers)) * len(SERVER_FEATURE_FUNCTIONS))
    # float64 -> float32 by the C cast (round to nearest), then clipped
    return np.clip(np.asarray(values, dtype=np.float64).astype(np.float32), -1.0, 1.0)
