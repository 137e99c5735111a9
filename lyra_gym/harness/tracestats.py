"""Summary statistics of a trace: what `lyra-gym trace stats FILE` prints.

Offered load = sum(num_gpus x duration) / (capacity GPUs x span), with
durations at the requested size on the reference GPU; per hour it is the
GPU-hours submitted in that hour over the GPU-hours the cluster has in an hour.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lyra_gym.model.jobspec import JobSpec


def trace_stats(jobs: Sequence[JobSpec], capacity_gpus: int) -> dict[str, Any]:
    """Counts, span (s), arrivals per hour, size and duration distributions, elastic share, load."""
    if not jobs:
        raise ValueError("trace: no jobs")
    submit = np.array([j.submit_time for j in jobs])
    gpus = np.array([j.num_gpus for j in jobs])
    duration = np.array([j.duration for j in jobs])
    span = float(submit.max() - submit.min()) or 1.0
    hours = max(1, int(np.ceil(span / 3600.0)))
    per_hour = np.bincount(((submit - submit.min()) // 3600).astype(int), minlength=hours)
    gpu_hours = np.bincount(((submit - submit.min()) // 3600).astype(int), weights=gpus * duration / 3600.0,
                            minlength=hours)
    sizes, counts = np.unique(gpus, return_counts=True)
    return {
        "jobs": len(jobs),
        "span_s": span,
        "arrivals_per_hour_mean": float(per_hour.mean()),
        "arrivals_per_hour_max": int(per_hour.max()),
        "gpu_size_share": {int(s): float(c) / len(jobs) for s, c in zip(sizes, counts)},
        "duration_s": {q: float(v) for q, v in zip(("p10", "p50", "p90", "p99", "max"),
                                                    np.percentile(duration, [10, 50, 90, 99, 100]))},
        "duration_mean_s": float(duration.mean()),
        "elastic_share": float(np.mean([j.elastic for j in jobs])),
        "models": {m: int(c) for m, c in zip(*np.unique([j.model for j in jobs], return_counts=True))},
        "capacity_gpus": capacity_gpus,
        "offered_load": float((gpus * duration).sum() / (capacity_gpus * span)),
        "offered_gpu_hours_per_hour_mean": float(gpu_hours.mean()),
        "offered_gpu_hours_per_hour_p95": float(np.percentile(gpu_hours, 95)),
    }


def format_stats(stats: dict[str, Any]) -> str:
    lines = [
        f"jobs                 {stats['jobs']}",
        f"span                 {stats['span_s'] / 86400:.2f} days",
        f"arrivals per hour    mean {stats['arrivals_per_hour_mean']:.1f}, max {stats['arrivals_per_hour_max']}",
        "GPU sizes            " + ", ".join(f"{s}: {p:.1%}" for s, p in stats["gpu_size_share"].items()),
        "duration (s)         " + ", ".join(f"{q} {v:.0f}" for q, v in stats["duration_s"].items())
        + f", mean {stats['duration_mean_s']:.0f}",
        f"elastic share        {stats['elastic_share']:.1%}",
        "models               " + ", ".join(f"{m} {c}" for m, c in stats["models"].items()),
        f"offered load         {stats['offered_load']:.3f} of {stats['capacity_gpus']} training GPUs "
        f"({stats['offered_gpu_hours_per_hour_mean']:.0f} GPU-h/h submitted on average, "
        f"p95 {stats['offered_gpu_hours_per_hour_p95']:.0f}, capacity {stats['capacity_gpus']} GPU-h/h)",
    ]
    return "\n".join(lines)
