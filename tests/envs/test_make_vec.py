"""``gymnasium.make_vec(id)`` works unchanged (issue 27 item 1): each sub-environment is the env
``gymnasium.make`` gives, seeded seed, seed + 1, ...; the async mode runs the ids in worker
processes (slow)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the ids)

KW = {"window_s": 3 * 3600.0}


def _single(env_id: str, seed: int, actions: list) -> list:
    env = gym.make(env_id, **KW)
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    for action in actions:
        obs, *_ = env.step(action)
        seen.append(obs)
    return seen


@pytest.mark.parametrize("env_id", ["LyraGym/Elastic-v1", "LyraGym/Alloc-v1"])
def test_sync_make_vec_steps_each_sub_env_as_a_single_env(env_id):
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", **KW)
    obs, _ = vec.reset(seed=5)
    space = vec.single_action_space
    space.seed(0)
    one = space.sample()  # an invalid choice is a counted no-op, the same in both runs
    batched = np.stack([one, one])
    seen = [obs]
    for _ in range(3):
        obs, *_ = vec.step(batched)
        seen.append(obs)
    for index, seed in enumerate((5, 6)):
        expected = _single(env_id, seed, [batched[index]] * 3)
        for got, want in zip(seen, expected):
            assert np.array_equal(got[index], want)
    vec.close()


@pytest.mark.slow
def test_async_make_vec_runs_in_worker_processes():
    vec = gym.make_vec("LyraGym/Alloc-v1", num_envs=2, vectorization_mode="async", **KW)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (2, gym.make("LyraGym/Alloc-v1", **KW).observation_space.shape[0])
    _, reward, *_ = vec.step(np.array([0, 0]))
    assert reward.shape == (2,)
    vec.close()
