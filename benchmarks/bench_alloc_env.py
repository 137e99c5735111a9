"""Speed of the full-control env ``LyraGym/Alloc-v0``: sub-actions/s and decision points/s.

Run: python benchmarks/bench_alloc_env.py [--episodes 3] [--slots 32] [--window-h 12]

Whole episodes on train windows (reset seeds 0..episodes-1), under the expert
(the heuristic's own sub-actions; it runs ``lyra``'s decision and reproduces it)
and under random masked sub-actions. Only ``env.step`` is timed; a sub-action is
one ``env.step``; a decision point is one Plan submitted to the engine (the
heuristic's no-op ticks, which the env submits without asking, included).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import lyra_gym  # noqa: F401  (registers the ids)
from lyra_gym.envs import ALLOC_ENV_ID


def episode(env, seed: int, policy: str) -> tuple[int, int, float]:
    """(sub-actions, decision points, seconds in env.step) of one episode."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    steps, elapsed = 0, 0.0
    while True:
        if policy == "expert":
            action = env.expert_action()
        else:
            action = np.int64(rng.choice(np.flatnonzero(env.action_masks())))
        start = time.perf_counter()
        _, _, term, trunc, info = env.step(action)
        elapsed += time.perf_counter() - start
        steps += 1
        if term or trunc:
            return steps, info["decisions"], elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--window-h", type=float, default=12.0)
    args = parser.parse_args()
    env = gym.make(ALLOC_ENV_ID, num_job_slots=args.slots, window_s=args.window_h * 3600.0).unwrapped
    for policy in ("expert", "random"):
        steps = decisions = 0
        elapsed = 0.0
        for seed in range(args.episodes):
            s, d, e = episode(env, seed, policy)
            steps, decisions, elapsed = steps + s, decisions + d, elapsed + e
        print(f"{ALLOC_ENV_ID} K={args.slots} {policy:6s}: {steps / elapsed:7.0f} sub-actions/s, "
              f"{decisions / elapsed:7.0f} decision points/s ({steps} sub-actions, {decisions} decision points, "
              f"{args.episodes} x {args.window_h:g} h episodes)")


if __name__ == "__main__":
    main()
