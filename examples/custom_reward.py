"""A custom reward term: GPU-weighted slowdown, mixed with the built-in JCT term, on Elastic-v1.

A job's slowdown is its completion time over its ideal run time (its trace duration); weighting it
by the job's requested GPUs makes a large job that waits cost more than a small one. Per step the
term is -(elapsed seconds x sum over the jobs in the system of GPUs / ideal run time), so with
gamma = 1 an episode's return is -(sum over jobs of GPUs x slowdown).

    python examples/custom_reward.py [--steps N]
"""

from __future__ import annotations

import argparse

import gymnasium as gym

from lyra_gym import StepOutcome, register_reward_term, reward_terms  # importing lyra_gym registers the ids


def gpu_weighted_slowdown(outcome: StepOutcome) -> float:
    """-(elapsed_s x sum of num_gpus / duration over the jobs in the system); no unit."""
    assert outcome.jobs is not None  # registered with needs_jobs=True (the default)
    return -outcome.elapsed_s * sum(job.num_gpus / job.duration for job in outcome.jobs)


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="steps to run (default 20)")
    args = parser.parse_args(argv)

    if "gpu_slowdown" not in reward_terms():  # registered once per process
        register_reward_term("gpu_slowdown", gpu_weighted_slowdown)
    env = gym.make("LyraGym/Elastic-v1", window_s=3 * 3600.0, reward="jct+0.01*gpu_slowdown")
    print("reward terms:", env.unwrapped.reward_weights)
    obs, info = env.reset(seed=0)
    total = 0.0
    for step in range(args.steps):
        action = env.unwrapped.expert_action()  # the guided heuristic's own choice
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        print(f"step {step:3d}  t={info['time_s']:9.0f} s  in system={info['jobs_queued'] + info['jobs_running']:3d}"
              f"  reward={reward:9.4f}")
        if terminated or truncated:
            print("final JCT mean, s:", info["final_metrics"]["jct_mean_s"])
            break
    print(f"return over {step + 1} steps: {total:.4f}")
    env.close()
    return total


if __name__ == "__main__":
    main()
