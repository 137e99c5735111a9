"""Knapsack fallback quality and speed: convex-hull greedy vs exact DP.

Run: python benchmarks/bench_knapsack.py [--instances 50] [--seed 0]

Instances look like Lyra's phase 2: each group is a job's remaining-time
reduction t0 - R/thr(min + k) under the shipped profile (concave), minus a
30 s rescale penalty everywhere except at the job's current extra workers
(which makes groups non-concave). Reports the greedy's value as a fraction of
the exact optimum, and the time of each solver.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from lyra_baselines.knapsack import solve_exact, solve_greedy, total_value
from lyra_gym.model.profiles import builtin_profiles


def instance(rng: np.random.Generator, groups: int, capacity: int) -> list[np.ndarray]:
    profiles = builtin_profiles()
    models = sorted(profiles.models)
    values = []
    for _ in range(groups):
        model = models[rng.integers(len(models))]
        lo = int(rng.choice([1, 2, 4, 8]))
        extra = int(rng.integers(1, 3 * lo + 1))
        remaining = float(rng.lognormal(8, 1.5)) * profiles.packed_throughput(model, lo, "v100", 8)
        rates = np.array([profiles.packed_throughput(model, lo + k, "v100", 8) for k in range(extra + 1)])
        row = remaining / rates[0] - remaining / rates
        current = int(rng.integers(extra + 1))
        penalty = np.full(extra + 1, 30.0)
        penalty[current] = 0.0
        values.append(row - penalty)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    for groups, capacity in [(10, 32), (50, 128), (200, 512)]:
        ratios, t_exact, t_greedy = [], 0.0, 0.0
        for _ in range(args.instances):
            values = instance(rng, groups, capacity)
            t0 = time.perf_counter()
            exact = total_value(values, solve_exact(values, capacity))
            t1 = time.perf_counter()
            greedy = total_value(values, solve_greedy(values, capacity))
            t2 = time.perf_counter()
            t_exact += t1 - t0
            t_greedy += t2 - t1
            ratios.append(greedy / exact if exact > 0 else 1.0)
        r = np.array(ratios)
        print(f"{groups:4d} jobs, {capacity:4d} GPUs: greedy/exact value mean {r.mean():.4f}, "
              f"min {r.min():.4f}; exact {1e3 * t_exact / args.instances:.2f} ms, "
              f"greedy {1e3 * t_greedy / args.instances:.2f} ms per instance")


if __name__ == "__main__":
    main()
