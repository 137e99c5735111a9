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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lyra_gym.engine import Engine

JOB_COLUMNS = (
    "job_id", "model", "num_gpus", "elastic", "submit_time", "first_start", "finish_time",
    "jct_s", "queue_s", "queue_total_s", "attained_gpu_s", "preemptions", "scale_ins", "scale_outs",
    "migrations", "finished",
)


def _stats(values: list[float], prefix: str) -> dict[str, float | None]:
    if not values:
        return {f"{prefix}_mean_s": None, f"{prefix}_p50_s": None, f"{prefix}_p95_s": None, f"{prefix}_p99_s": None}
    arr = np.asarray(values, dtype=np.float64)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {f"{prefix}_mean_s": float(arr.mean()), f"{prefix}_p50_s": float(p50),
            f"{prefix}_p95_s": float(p95), f"{prefix}_p99_s": float(p99)}


def summarize(engine: "Engine") -> dict[str, Any]:
    """The metrics dict written to ``metrics.json`` (keys are stable)."""
    jobs = engine.jobs
    finished = [j for j in jobs if j.finish_time is not None]
    jct = [j.finish_time - j.spec.submit_time for j in finished]
    queue = [j.first_start - j.spec.submit_time for j in finished]
    queue_total = [j.queued_total for j in finished]
    end = engine.now
    span = end - engine.start_time
    cluster = engine.config.cluster
    training_gpus = cluster.training_gpus
    inference_gpus = cluster.inference.count * cluster.inference.gpus_per_server
    allocated = engine.gpu_s_training + engine.gpu_s_loaned

    def ratio(num: float, den: float) -> float | None:
        return num / den if den > 0 else None

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
        "preemptions": counts["preemptions"],
        "preempted_job_share": ratio(sum(1 for j in jobs if j.preemptions), len(jobs)),
        "suspensions": counts["suspensions"],
        "scale_ins": counts["scale_ins"],
        "scale_outs": counts["scale_outs"],
        "scale_events": counts["scale_ins"] + counts["scale_outs"],
        "migrations": counts["migrations"],
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
            "jct_s": j.finish_time - s.submit_time if done else None,
            "queue_s": j.first_start - s.submit_time if j.first_start is not None else None,
            "queue_total_s": j.queued_total, "attained_gpu_s": j.attained_gpu_s,
            "preemptions": j.preemptions, "scale_ins": j.scale_ins, "scale_outs": j.scale_outs,
            "migrations": j.migrations, "finished": int(done),
        })
    return rows
