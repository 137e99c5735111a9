"""Metrics of a finished simulation: one definition, used by every policy and tool.

- JCT = finish - submit; queuing = first start - submit; ``queue_total`` also
  counts time queued after preemptions. JCT and queuing statistics are over
  finished jobs (``jobs_unfinished`` says how many are left out).
- ``gpu_usage_training``: GPU-s allocated on training servers / GPU-s of
  training capacity. ``gpu_usage_with_loaned``: GPU-s allocated on training and
  loaned servers / (training capacity + capacity while on loan).
  ``gpu_usage_overall``: (inference busy + training allocated) GPU-s / all GPUs
  of both clusters. All over [first submit, end of simulation].
- ``makespan_s``: last completion (or end of simulation) - first submit.

The usage keys above count every GPU-second alike: a T4's like a V100's, and
one held by a job stalled in a restart, rescale or migration like a useful
one. The honest counterparts:

- speed(m, T) = single-GPU throughput of model m on GPU type T / on the
  reference GPU type (the profile's ``step_compute_s`` ratio, reference = 1.0;
  in the shipped ``builtin_profiles.json`` a T4 is 0.54 (resnet18) and 0.65
  (resnet50) of a V100 as measured, 0.3 for the other models (assumption), an
  A100 1.6-2.6: see ``tools/derive_builtin_profiles.py`` and ``docs/profiles.md``
  for the sources). A job whose workers span several types runs at the slowest one's
  pace, so each of its GPUs counts the slowest type's speed. Per GPU: the
  loss of sub-linear scaling (all-reduce time) is not deducted.
- speed(T), the capacity of one GPU-second of type T, = mean of speed(m, T)
  over the distinct models of the run's jobs (models without a profile for T
  are left out; 0 if none has one). We use the trace's models, not all of the
  profile's, because they are the work the cluster is offered: a profile file
  may list models no job uses. Unweighted by job count or size, so a policy
  that steers T4 time to the models fastest on T4 can, in principle, push the
  ratios a little above what an "average" job mix would give (even above 1);
  on a reference-type training cluster alone they are at most 1.
- ``gpu_usage_effective``: sum over jobs of GPU-s held outside overheads x
  speed(m, types held) / (training capacity + loaned capacity, each GPU-s x
  speed(T)); both in reference-GPU-seconds, over the same span.
- ``gpu_usage_goodput``: the numerator of ``gpu_usage_effective`` with each
  GPU-s also weighted by the statistical efficiency E of the batch its job
  runs (:meth:`lyra_gym.model.scaling.ScalingModel.statistical_efficiency`; 1 under ``scaling:
  throughput`` or ``fixed-global`` and for models without a measured noise
  scale), same denominator: the share of capacity that did useful work in
  samples worth the reference batch's (the job's ``B0``, or the application's
  ``M0`` under ``noise_scale: absolute``). A job running below its reference
  batch (fewer workers than requested under ``fixed-local``) has E > 1, so the
  share is not capped at ``gpu_usage_effective``; overheads count nothing.
- ``gpu_usage_effective_overall``: numerator plus inference-busy GPU-s x
  speed(inference type); denominator all GPUs of both clusters x speed(T) x span.
- ``overhead_gpu_share``: GPU-s held by jobs inside overheads (start/restart,
  rescale, migration, resume) / all GPU-s held by jobs.
- ``work_lost_gpu_s``: GPU-s of run time whose progress was lost at preemptions (the work since
  each preempted job's last checkpoint, ``overheads.checkpoint_interval_s``; 0 with free
  preemption); per job, ``work_lost_s`` in ``jobs.csv`` is the run time (s) it lost. The lost
  GPU-s stay in the usage keys above: they were held and busy, only their progress was undone.
- ``reclaim_disruptions``: per applied plan, the jobs that lost workers on a
  server returned to inference (scaled in, moved or preempted); also per job
  in ``jobs.csv``.

Jobs still running at the end are integrated up to the end without being
changed (:meth:`lyra_gym.model.jobs.Job.usage_until`), so ``summarize`` may be
called on an engine mid-run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

if TYPE_CHECKING:
    from lyra_gym.model.jobs import Job
    from lyra_gym.sim.engine import Engine

JOB_COLUMNS = (
    "job_id", "model", "num_gpus", "elastic", "submit_time", "first_start", "finish_time",
    "jct_s", "queue_s", "queue_total_s", "attained_gpu_s", "preemptions", "scale_ins", "scale_outs",
    "migrations", "reclaim_disruptions", "work_lost_s", "finished",
)


def _stats(values: list[float], prefix: str) -> dict[str, float | None]:
    if not values:
        return {f"{prefix}_mean_s": None, f"{prefix}_p50_s": None, f"{prefix}_p95_s": None, f"{prefix}_p99_s": None}
    arr = np.asarray(values, dtype=np.float64)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {f"{prefix}_mean_s": float(arr.mean()), f"{prefix}_p50_s": float(p50),
            f"{prefix}_p95_s": float(p95), f"{prefix}_p99_s": float(p99)}


def capacity_speeds(engine: "Engine") -> dict[str, float]:
    """speed(T) of every GPU type in the cluster (reference-GPU-s per GPU-s): the mean
    of speed(m, T) over the distinct models of the engine's jobs (all of the profile's
    models when there are no jobs); models without a profile for T are left out."""
    models = sorted({j.spec.model for j in engine.jobs}) or sorted(engine.profiles.models)
    cluster = engine.config.cluster
    speeds = {}
    for gpu_type in sorted({g.gpu_type for g in cluster.training} | {cluster.inference.gpu_type}):
        values = [engine.speed(m, frozenset((gpu_type,))) for m in models
                  if {gpu_type, engine.reference_gpu} <= engine.profiles.model(m).gpus.keys()]
        speeds[gpu_type] = float(np.mean(values)) if values else 0.0
    return speeds


def unfinished_warning(metrics: Mapping[str, Any]) -> str | None:
    """A one-line warning when a run left jobs unfinished, else None. Takes a run's metrics
    or a comparison's summary row (``policy``, ``seeds``, means over seeds)."""
    left = metrics.get("jobs_unfinished") or 0
    if not left:
        return None
    who = f"{metrics['policy']}: " if metrics.get("policy") else ""
    mean = " (mean over seeds)" if (metrics.get("seeds") or 1) > 1 else ""
    return (f"warning: {who}{left:g} of {metrics.get('jobs_total', 0):g} jobs unfinished at the end of the "
            f"run{mean}; JCT and queuing statistics cover finished jobs only")


def _since_submit(job: Job, t: float | None) -> float:
    """Seconds from ``job``'s submission to ``t`` (a time the job has reached: not None)."""
    assert t is not None
    return t - job.spec.submit_time


def summarize(engine: "Engine") -> dict[str, Any]:
    """The metrics dict written to ``metrics.json`` (keys are stable)."""
    jobs = engine.jobs
    finished = [j for j in jobs if j.finish_time is not None]
    jct = [_since_submit(j, j.finish_time) for j in finished]
    queue = [_since_submit(j, j.first_start) for j in finished]  # a finished job has started
    queue_total = [j.queued_total for j in finished]
    end = engine.now
    span = end - engine.start_time
    cluster = engine.config.cluster
    training_gpus = cluster.training_gpus
    inference_gpus = cluster.inference.count * cluster.inference.gpus_per_server
    allocated = engine.gpu_s_training + engine.gpu_s_loaned

    def ratio(num: float, den: float) -> float | None:
        return num / den if den > 0 else None

    held = busy = effective = goodput = 0.0
    for j in jobs:
        h, b, e = j.usage_until(end)
        held += h
        busy += b
        effective += e
        goodput += j.goodput_until(end)
    speeds = capacity_speeds(engine)
    inference_speed = speeds[cluster.inference.gpu_type]
    training_capacity = sum(g.count * g.gpus_per_server * speeds[g.gpu_type] for g in cluster.training) * span
    loaned_capacity = engine.gpu_s_loaned_capacity * inference_speed

    counts = engine.counts
    metrics: dict[str, Any] = {
        "jobs_total": len(jobs),
        "jobs_finished": len(finished),
        "jobs_unfinished": len(jobs) - len(finished),
        **_stats(jct, "jct"),
        **_stats(queue, "queue"),
        "queue_total_mean_s": float(np.mean(queue_total)) if queue_total else None,
        "gpu_usage_training": ratio(engine.gpu_s_training, training_gpus * span),
        "gpu_usage_with_loaned": ratio(allocated, training_gpus * span + engine.gpu_s_loaned_capacity),
        "gpu_usage_overall": ratio(allocated + engine.gpu_s_inference_busy, (training_gpus + inference_gpus) * span),
        "gpu_usage_effective": ratio(effective, training_capacity + loaned_capacity),
        "gpu_usage_goodput": ratio(goodput, training_capacity + loaned_capacity),
        "gpu_usage_effective_overall": ratio(
            effective + engine.gpu_s_inference_busy * inference_speed,
            training_capacity + inference_gpus * inference_speed * span),
        "overhead_gpu_share": ratio(held - busy, held),
        "preemptions": counts["preemptions"],
        "preempted_job_share": ratio(sum(1 for j in jobs if j.preemptions), len(jobs)),
        "suspensions": counts["suspensions"],
        "scale_ins": counts["scale_ins"],
        "scale_outs": counts["scale_outs"],
        "scale_events": counts["scale_ins"] + counts["scale_outs"],
        "migrations": counts["migrations"],
        "reclaim_disruptions": counts["reclaim_disruptions"],
        "work_lost_gpu_s": sum(j.lost_gpu_s for j in jobs),
        "servers_borrowed": counts["servers_borrowed"],
        "servers_returned": counts["servers_returned"],
        "inference_violations": counts["inference_violations"],
        "makespan_s": span,
        "events": counts["events"],
        "decisions": counts["decisions"],
        "sim_wall_s": engine.sim_wall_s,
    }
    return metrics


def job_rows(engine: "Engine") -> list[dict[str, Any]]:
    """One row per job (columns ``JOB_COLUMNS``) for the per-job CSV."""
    rows = []
    for j in engine.jobs:
        s = j.spec
        done = j.finish_time is not None
        rows.append({
            "job_id": s.job_id, "model": s.model, "num_gpus": s.num_gpus, "elastic": int(s.elastic),
            "submit_time": s.submit_time, "first_start": j.first_start, "finish_time": j.finish_time,
            "jct_s": j.finish_time - s.submit_time if j.finish_time is not None else None,
            "queue_s": j.first_start - s.submit_time if j.first_start is not None else None,
            "queue_total_s": j.queued_total, "attained_gpu_s": j.attained_gpu_s,
            "preemptions": j.preemptions, "scale_ins": j.scale_ins, "scale_outs": j.scale_outs,
            "migrations": j.migrations, "reclaim_disruptions": j.reclaim_disruptions,
            "work_lost_s": j.lost_run_s, "finished": int(done),
        })
    return rows
