"""Metrics of a finished simulation: one definition, used by every policy and tool.

- JCT = finish - submit; queuing (``queue_*``) = first start - submit;
  ``queue_total_*`` = all the time a job spent queued: before its first start
  and again after each preemption or suspension until it runs again (a policy
  that starts every job at once and preempts has ``queue_*`` near 0 and
  ``queue_total_*`` not). JCT and queuing statistics (mean, p50, p95, p99) are
  over finished jobs (``jobs_unfinished`` says how many are left out).
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
  in the shipped ``builtin_profiles.json`` a T4 is 0.54 (resnet18) and 0.18
  (resnet50) of a V100 as measured, 0.3 for the other models (assumption), an
  A100 1.6-2.6: see ``tools/derive_builtin_profiles.py`` and ``docs/profiles.md``
  for the sources). A job whose workers span several types runs at the slowest one's
  pace, so each of its GPUs counts the slowest type's speed. Per GPU: the
  loss of sub-linear scaling (all-reduce time) is not deducted.
- best(m) = the largest speed(m, T) over the GPU types T of the cluster (its
  training pools, and the inference servers' type when there are any) that m has
  a profile for: m's pace on the cluster's fastest GPUs for it.
- ``gpu_usage_effective``: sum over jobs of GPU-s held outside overheads x
  speed(m, types held) / best(m), divided by the GPU-s of
  ``gpu_usage_with_loaned``'s denominator (training capacity + capacity while on
  loan). Each GPU-second of a job counts the share of its best pace it runs at
  (1 on the cluster's fastest type for its model, 0.54 for resnet18 on a T4 of a
  T4 + V100 cluster, 1 on a T4-only cluster), so the share is at most
  ``gpu_usage_with_loaned`` and never above 1: it is the capacity the jobs used,
  less stalls and less the pace lost on slower GPU types than the cluster has.
- ``gpu_usage_goodput``: the numerator of ``gpu_usage_effective`` with each
  GPU-s also weighted by the statistical efficiency E of the batch its job
  runs (:meth:`lyra_gym.model.scaling.ScalingModel.statistical_efficiency`; 1 under ``scaling:
  throughput`` or ``fixed-global`` and for models without a measured noise
  scale), same denominator: the share of capacity that did useful work in
  samples worth the reference batch's (the job's ``B0``, or the application's
  ``M0`` under ``noise_scale: absolute``). A job running below its reference
  batch (fewer workers than requested under ``fixed-local``) has E > 1, so this
  one key is not capped at ``gpu_usage_effective`` (nor, in principle, at 1: it
  is a goodput, not a share of GPU time); overheads count nothing.
- ``gpu_usage_effective_overall``: numerator of ``gpu_usage_effective`` plus
  inference-busy GPU-s (an inference server serving runs at its own pace: 1),
  over all GPUs of both clusters x span (``gpu_usage_overall``'s denominator),
  so it is at most ``gpu_usage_overall``.
- ``overhead_gpu_share``: GPU-s held by jobs inside overheads (start/restart,
  rescale, migration, resume) / all GPU-s held by jobs.
- ``work_lost_gpu_s``: GPU-s of run time whose progress was lost at preemptions (the work since
  each preempted job's last checkpoint, ``overheads.checkpoint_interval_s``; 0 with free
  preemption); per job, ``work_lost_s`` in ``jobs.csv`` is the run time (s) it lost. The lost
  GPU-s stay in the usage keys above: they were held and busy, only their progress was undone.
- ``reclaim_disruptions``: per applied plan, the jobs that lost workers on a
  server returned to inference (scaled in, moved or preempted); also per job
  in ``jobs.csv``.
- ``invalid_actions``: actions of an agent or observation policy (``model:``,
  ``policy:``) that the env's rules replaced by the neutral one (out of range or
  masked: a no-op); 0 for every other scheduler.

The ``gpu_usage_*`` shares but goodput are at most 1 in exact arithmetic; a
value above 1 by float rounding alone (at most :data:`ROUNDING`) is given as 1.0.

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


#: How far above 1 a share may come out by float rounding alone (then given as 1.0).
ROUNDING = 1e-9


def _stats(values: list[float], prefix: str) -> dict[str, float | None]:
    if not values:
        return {f"{prefix}_mean_s": None, f"{prefix}_p50_s": None, f"{prefix}_p95_s": None, f"{prefix}_p99_s": None}
    arr = np.asarray(values, dtype=np.float64)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {f"{prefix}_mean_s": float(arr.mean()), f"{prefix}_p50_s": float(p50),
            f"{prefix}_p95_s": float(p95), f"{prefix}_p99_s": float(p99)}


def best_speeds(engine: "Engine") -> dict[str, float]:
    """best(m) of every model of the engine's jobs (reference-GPU-s per GPU-s): the largest
    speed(m, T) over the cluster's GPU types T (training pools, and the inference type when the
    cluster has inference servers) that m has a profile for; 0 when none has."""
    cluster = engine.config.cluster
    types = {g.gpu_type for g in cluster.training if g.count}
    if cluster.inference.count:
        types.add(cluster.inference.gpu_type)
    best = {}
    for model in sorted({j.spec.model for j in engine.jobs}):
        gpus = engine.profiles.model(model).gpus.keys()
        best[model] = max((engine.speed(model, frozenset((t,))) for t in sorted(types)
                           if {t, engine.reference_gpu} <= gpus), default=0.0)
    return best


def _warning(metrics: Mapping[str, Any], key: str, text: str) -> str | None:
    """``warning: [policy: ]N <text>`` when ``metrics[key]`` is nonzero, else None; ``{mean}`` in
    ``text`` says "(mean over seeds)" for a comparison's summary row of several seeds."""
    count = metrics.get(key) or 0
    if not count:
        return None
    who = f"{metrics['policy']}: " if metrics.get("policy") else ""
    mean = " (mean over seeds)" if (metrics.get("seeds") or 1) > 1 else ""
    return f"warning: {who}{count:g} " + text.format(mean=mean, total=metrics.get("jobs_total", 0))


def unfinished_warning(metrics: Mapping[str, Any]) -> str | None:
    """A one-line warning when a run left jobs unfinished, else None. Takes a run's metrics
    or a comparison's summary row (``policy``, ``seeds``, means over seeds)."""
    return _warning(metrics, "jobs_unfinished", "of {total:g} jobs unfinished at the end of the run{mean}; JCT and "
                                                "queuing statistics cover finished jobs only")


def invalid_actions_warning(metrics: Mapping[str, Any]) -> str | None:
    """A one-line warning when a run's agent or observation policy made invalid actions (each
    replaced by the neutral one), else None. Takes a run's metrics or a comparison's summary row."""
    return _warning(metrics, "invalid_actions", "invalid actions{mean} (out of range or masked), each run as the "
                                                "neutral action (a no-op); see invalid_actions in the metrics")


def _since_submit(job: Job, t: float | None) -> float:
    """Seconds from ``job``'s submission to ``t`` (a time the job has reached: not None)."""
    assert t is not None
    return t - job.spec.submit_time


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def _share(num: float, den: float) -> float | None:
    """``num / den`` for a share of a capacity (``num <= den`` in exact arithmetic): 1.0 where
    it comes out above 1 by float rounding alone (at most :data:`ROUNDING`)."""
    value = _ratio(num, den)
    return 1.0 if value is not None and 1.0 < value <= 1.0 + ROUNDING else value


def _invalid_actions(engine: "Engine") -> int:
    """The run's scheduler's ``invalid_actions`` count (agent and observation policies), else 0."""
    count = getattr(engine.scheduler, "invalid_actions", 0)
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def summarize(engine: "Engine", invalid_actions: int | None = None) -> dict[str, Any]:
    """The metrics dict written to ``metrics.json`` (keys are stable). ``invalid_actions``: the
    count to report (an env's episode), else the engine's scheduler's own (0 if it keeps none)."""
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

    best = best_speeds(engine)
    held = busy = effective = goodput = 0.0
    for j in jobs:
        h, b, e = j.usage_until(end)
        held += h
        busy += b
        if e:  # a job that ran: its best(m) > 0
            effective += e / best[j.spec.model]
            goodput += j.goodput_until(end) / best[j.spec.model]
    capacity = training_gpus * span + engine.gpu_s_loaned_capacity  # GPU-s, training + while on loan
    all_gpus = (training_gpus + inference_gpus) * span

    counts = engine.counts
    metrics: dict[str, Any] = {
        "jobs_total": len(jobs),
        "jobs_finished": len(finished),
        "jobs_unfinished": len(jobs) - len(finished),
        **_stats(jct, "jct"),
        **_stats(queue, "queue"),
        **_stats(queue_total, "queue_total"),
        "gpu_usage_training": _share(engine.gpu_s_training, training_gpus * span),
        "gpu_usage_with_loaned": _share(allocated, capacity),
        "gpu_usage_overall": _share(allocated + engine.gpu_s_inference_busy, all_gpus),
        "gpu_usage_effective": _share(effective, capacity),
        "gpu_usage_goodput": _ratio(goodput, capacity),
        "gpu_usage_effective_overall": _share(effective + engine.gpu_s_inference_busy, all_gpus),
        "overhead_gpu_share": _ratio(held - busy, held),
        "preemptions": counts["preemptions"],
        "preempted_job_share": _ratio(sum(1 for j in jobs if j.preemptions), len(jobs)),
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
        "invalid_actions": _invalid_actions(engine) if invalid_actions is None else invalid_actions,
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
