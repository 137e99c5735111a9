"""Production scale: the ``lyra-15d`` shape at N x (default 10: 10,240 V100 training GPUs,
12,800 T4 inference GPUs, 500,000 jobs over 15 days), one policy at a time.

Run: python benchmarks/production_scale.py --policy fifo[,lyra,...] [--scale 10] [--days 15] [--seed 0]

For each policy: generate the trace (``generate_trace('lyra-15d', seed, scale=N, days=D)``: N times
the jobs at the same per-job distributions and arrival shape; ``--days`` makes it D days long with
the mean jobs per day), run it on lyra-15d's "paper" cluster N times over
(``lyra_15d_config(paper=True, scale=N)``: 128 N x 8 V100 training, 160 N x 8 T4 inference), and
print one JSON line: trace generation and simulation wall time, jobs/s and events/s of the
simulation, peak resident memory of the process (``resource.getrusage``, so each policy of a list
runs in its own child process), and the main metrics. asv cannot time a run of many minutes
well; this is the tool for the whole-size figure (``benchmarks/asv_bench/engine.py`` tracks the
2-day cut across commits).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, MiB (``ru_maxrss`` is KiB on Linux)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / (1024 * 1024) if sys.platform == "darwin" else kib / 1024  # bytes on macOS


def run_one(policy: str, scale: int, days: float | None, seed: int, progress: bool) -> dict:
    from lyra_gym.run.simulate import simulate
    from lyra_gym.workloads.presets_calibrated import lyra_15d_config
    from lyra_gym.workloads.tracegen import generate_trace

    start = time.perf_counter()
    jobs = generate_trace("lyra-15d", seed, scale=scale, days=days)
    gen_s = time.perf_counter() - start
    rss_trace = peak_rss_mb()
    config = lyra_15d_config(paper=True, scale=scale)
    m = simulate(jobs, policy, config, seed=seed, progress=progress).metrics
    wall = m["sim_wall_s"]
    inference = config.cluster.inference
    return {
        "policy": policy, "scale": scale, "days": days if days is not None else 15.0, "seed": seed,
        "jobs": len(jobs), "training_gpus": config.cluster.training_gpus,
        "inference_gpus": inference.count * inference.gpus_per_server,
        "trace_gen_s": round(gen_s, 2), "sim_wall_s": round(wall, 2),
        "total_wall_s": round(time.perf_counter() - start, 2),
        "jobs_per_s": round(len(jobs) / wall, 1), "us_per_job": round(1e6 * wall / len(jobs), 1),
        "events_per_s": round(m["events"] / wall, 1), "events": m["events"], "decisions": m["decisions"],
        "peak_rss_mb": round(peak_rss_mb(), 1), "peak_rss_after_trace_mb": round(rss_trace, 1),
        "jobs_finished": m["jobs_finished"], "jct_mean_s": m["jct_mean_s"], "queue_mean_s": m["queue_mean_s"],
        "gpu_usage_training": m["gpu_usage_training"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", required=True, help="a policy name, or several comma-separated")
    parser.add_argument("--scale", type=int, default=10, help="cluster and jobs x N (default 10)")
    parser.add_argument("--days", type=float, default=None,
                        help="D days long, jobs prorated (default: the whole 15 days)")
    parser.add_argument("--seed", type=int, default=0, help="trace seed = simulation seed (default 0)")
    parser.add_argument("--progress", action="store_true", help="a progress bar on stderr")
    args = parser.parse_args(argv)
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    if not policies:
        parser.error("--policy: give at least one policy")
    if args.scale < 1:
        parser.error("--scale: must be an integer >= 1")
    days = None if args.days is None or args.days == 15.0 else args.days
    if len(policies) == 1:
        print(json.dumps(run_one(policies[0], args.scale, days, args.seed, args.progress)), flush=True)
        return 0
    status = 0
    for policy in policies:  # a child each: the peak memory is that policy's alone
        cmd = [sys.executable, __file__, "--policy", policy, "--scale", str(args.scale), "--seed", str(args.seed)]
        cmd += ["--days", str(days)] if days is not None else []
        cmd += ["--progress"] if args.progress else []
        status = subprocess.run(cmd).returncode or status
    return status


if __name__ == "__main__":
    sys.exit(main())
