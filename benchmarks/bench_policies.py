"""Wall time of every scheduler over the 15-day, 50,000-job benchmark trace.

Run: python benchmarks/bench_policies.py [--policies fifo,lyra,...] [--seed 0]

One simulation per policy on the benchmark cluster (benchmarks/bench_cluster.yaml);
prints simulated jobs per wall-clock second and the main metrics.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lyra_gym.model.config import load_config
from lyra_gym.run.simulate import simulate
from lyra_gym.sim import scheduler as registry
from lyra_gym.workloads.tracegen import generate_trace

CLUSTER = Path(__file__).with_name("bench_cluster.yaml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policies", default=",".join(p for p in registry.available()))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    jobs = generate_trace("bench-15d", args.seed)
    config = load_config(CLUSTER)
    print(f"{'policy':16s} {'wall s':>8s} {'jobs/s':>8s} {'JCT mean s':>11s} {'queue mean s':>13s} {'finished':>9s}")
    for policy in args.policies.split(","):
        m = simulate(jobs, policy, config, seed=args.seed).metrics
        print(f"{policy:16s} {m['sim_wall_s']:8.1f} {m['jobs_total'] / m['sim_wall_s']:8.0f} "
              f"{m['jct_mean_s']:11.0f} {m['queue_mean_s']:13.0f} {m['jobs_finished']:9d}", flush=True)


if __name__ == "__main__":
    main()
