"""Environment speed: steps/s of each LyraGym id with random masked actions.

Run: python benchmarks/bench_envs.py [--steps 3000] [--slots 32] [--vec 4]

Single process (one env), then a synchronous vector env of ``--vec`` copies
(gymnasium SyncVectorEnv: steps counted per env, so the figure is comparable).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import lyra_gym


def masked_action(env, rng: np.random.Generator) -> np.ndarray:
    """Uniform over each dimension's valid values (vectorised draw, then redraw the invalid few)."""
    nvec, masks = env.action_space.nvec, env.action_masks()
    offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
    action = rng.integers(nvec)
    for d in np.flatnonzero(~masks[offsets + action]):
        action[d] = rng.choice(np.flatnonzero(masks[offsets[d]:offsets[d] + nvec[d]]))
    return action


def single(env_id: str, steps: int, slots: int) -> float:
    env = gym.make(env_id, num_job_slots=slots).unwrapped
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(masked_action(env, rng))
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - start)


def vectorised(env_id: str, steps: int, slots: int, copies: int) -> float:
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id, num_job_slots=slots) for _ in range(copies)])
    rng = np.random.default_rng(0)
    envs.reset(seed=list(range(copies)))
    start = time.perf_counter()
    for _ in range(steps // copies):
        actions = np.stack([masked_action(e.unwrapped, rng) for e in envs.envs])
        envs.step(actions)
    return (steps // copies) * copies / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--vec", type=int, default=4)
    args = parser.parse_args()
    for env_id in lyra_gym.ENV_IDS:
        one = single(env_id, args.steps, args.slots)
        vec = vectorised(env_id, args.steps, args.slots, args.vec)
        print(f"{env_id:22s} K={args.slots}: {one:7.0f} steps/s single env, {vec:7.0f} steps/s in a "
              f"{args.vec}-env SyncVectorEnv (one process)")


if __name__ == "__main__":
    main()
