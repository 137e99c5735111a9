"""Engine speed: `fifo` over a 15-day, 50,000-job trace on about 1,000 training GPUs.

Run: python benchmarks/bench_engine.py [--policy fifo] [--seed 0] [--repeat 1]

Prints jobs/s and events/s (simulated jobs and engine events per wall-clock
second of the simulation itself; trace generation is timed separately).
"""

from __future__ import annotations

import argparse
import time

from lyra_gym.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.simulate import simulate
from lyra_gym.tracegen import generate_trace

# 128 x 8 V100 = 1,024 training GPUs; 32 x 8 T4 inference servers (assumption).
BENCH_CLUSTER = ClusterConfig(training=(ServerGroup(128, "v100", 8),), inference=ServerGroup(32, "t4", 8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policy", default="fifo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    t0 = time.perf_counter()
    jobs = generate_trace("bench-15d", args.seed)
    print(f"trace: {len(jobs)} jobs generated in {time.perf_counter() - t0:.2f} s")
    config = SimConfig(cluster=BENCH_CLUSTER)
    for _ in range(args.repeat):
        result = simulate(jobs, args.policy, config, seed=args.seed)
        m = result.metrics
        wall = m["sim_wall_s"]
        print(
            f"{args.policy}: {m['jobs_finished']}/{m['jobs_total']} jobs, {m['events']} events, "
            f"{m['decisions']} decisions in {wall:.2f} s -> {m['jobs_total'] / wall:,.0f} jobs/s, "
            f"{m['events'] / wall:,.0f} events/s (mean JCT {m['jct_mean_s']:.0f} s, "
            f"mean queue {m['queue_mean_s']:.0f} s, training usage {m['gpu_usage_training']:.3f})"
        )


if __name__ == "__main__":
    main()
