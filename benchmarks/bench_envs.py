"""Environment speed: steps/s of each LyraGym id with random masked actions.

Run: python benchmarks/bench_envs.py [--steps 3000] [--slots 32] [--vec 4]

Single process (one env; only ``env.step`` is timed), then a synchronous vector
env of ``--vec`` copies (gymnasium SyncVectorEnv, whole loop timed including the
action sampling; steps counted per env).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import lyra_gym


def masked_action(env, rng: np.random.Generator) -> np.ndarray:
    """Uniform over each dimension's valid values (vectorised; a loop only for partial masks)."""
    nvec, masks = env.action_space.nvec, env.action_masks()
    offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
    counts = np.add.reduceat(masks.astype(np.int64), offsets)
    local = np.arange(len(masks)) - np.repeat(offsets, nvec)
    first = np.minimum.reduceat(np.where(masks, local, np.iinfo(np.int64).max), offsets)
    action = np.where(counts == nvec, rng.integers(nvec), first)
    for d in np.flatnonzero((counts > 1) & (counts < nvec)):
        action[d] = rng.choice(np.flatnonzero(masks[offsets[d]:offsets[d] + nvec[d]]))
    return action


def single(env_id: str, steps: int, slots: int) -> float:
    env = gym.make(env_id, num_job_slots=slots).unwrapped
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    elapsed = 0.0  # env.step only: the action sampling is the agent's cost, not the env's
    for _ in range(steps):
        action = masked_action(env, rng)
        start = time.perf_counter()
        _, _, term, trunc, _ = env.step(action)
        elapsed += time.perf_counter() - start
        if term or trunc:
            env.reset()
    return steps / elapsed


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
