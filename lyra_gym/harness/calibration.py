"""Measure a policy's queuing on the calibrated ``lyra-15d`` preset (how its load was calibrated).

``python -m lyra_gym.harness.calibration --seeds 0,1,2,3 [--paper] [--policy P] [--target-load X]``
prints, per seed (seed = trace seed = simulation seed), the queuing figures that
:mod:`lyra_gym.workloads.presets_calibrated` documents and the inference demand's busy fractions,
then the means over the seeds. The preset itself is data; this module runs its simulations.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Sequence

import numpy as np

from lyra_gym.model.config import SimConfig
from lyra_gym.run.simulate import build_demand, simulate
from lyra_gym.workloads.presets_calibrated import LYRA_15D, lyra_15d_config
from lyra_gym.workloads.tracegen import generate_trace
from lyra_gym.workloads.tracepreset import TracePreset

__all__ = ["measure"]


def measure(seed: int, policy: str = "baseline", preset: TracePreset = LYRA_15D,
            config: SimConfig | None = None) -> dict[str, float]:
    """Generate the preset at ``seed`` and simulate ``policy`` on it with the same seed.

    :returns: queue mean/p95 (s), JCT mean (s), training usage, wall seconds, and the inference
        demand's minimum and 10th-percentile busy fraction over the horizon.
    """
    config = config or lyra_15d_config()
    jobs = generate_trace(preset, seed)
    result = simulate(jobs, policy, config, seed=seed)
    m = result.metrics
    demand_seq, _ = np.random.SeedSequence(seed).spawn(2)  # as simulate.build_engine draws it
    curve = build_demand(config, jobs, np.random.default_rng(demand_seq))
    servers = config.cluster.inference.count
    horizon = preset.horizon_s
    grid = np.arange(0.0, horizon, 300.0)
    busy = np.array([curve.at(t) for t in grid]) / max(servers, 1)
    return {"seed": seed, "queue_mean_s": m["queue_mean_s"], "queue_p95_s": m["queue_p95_s"],
            "jct_mean_s": m["jct_mean_s"], "gpu_usage_training": m["gpu_usage_training"],
            "jobs_finished": m["jobs_finished"], "sim_wall_s": m["sim_wall_s"],
            "inference_busy_min": float(busy.min()), "inference_busy_p10": float(np.quantile(busy, 0.1)),
            "inference_busy_share_under_40pct": float(np.mean(busy < 0.4))}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Measure `baseline` queuing on the lyra-15d preset.")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    parser.add_argument("--policy", default="baseline")
    parser.add_argument("--target-load", type=float, default=None, help="override the preset's target_load")
    parser.add_argument("--paper", action="store_true", help="the paper scenario's cluster (LYRA_15D_PAPER_CLUSTER)")
    args = parser.parse_args(argv)
    preset = LYRA_15D if args.target_load is None else replace(LYRA_15D, target_load=args.target_load)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",") if s.strip()):
        row = measure(seed, args.policy, preset, lyra_15d_config(paper=args.paper))
        rows.append(row)
        print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    if len(rows) > 1:
        for key in ("queue_mean_s", "queue_p95_s"):
            print(f"mean over seeds: {key}={np.mean([r[key] for r in rows]):.0f}")


if __name__ == "__main__":
    main()
