"""docs/writing-an-environment.md's example runs as printed and passes the checks the page lists:
Gymnasium's checker, same seed same rollout, one name per observation entry."""
from __future__ import annotations

import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "writing-an-environment.md"


@pytest.fixture(scope="module")
def page():
    """Every python block of the page, run in order in one namespace (its id removed afterwards)."""
    namespace: dict = {"__name__": "writing_an_environment"}
    try:
        for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL):
            exec(compile(block, str(PAGE), "exec"), namespace)  # the page's own example
        yield namespace
    finally:
        gym.registry.pop("MyLab/QueueAwareElastic-v0", None)


def _rollout(env, seed: int, steps: int) -> list:
    obs, _ = env.reset(seed=seed)
    rng, seen = np.random.default_rng(seed), [obs]
    for _ in range(steps):
        masks, nvec = env.action_masks(), env.action_space.nvec
        bounds = np.cumsum([0, *nvec])
        action = [rng.choice(np.flatnonzero(masks[lo:hi])) for lo, hi in zip(bounds[:-1], bounds[1:])]
        obs, reward, terminated, truncated, info = env.step(np.array(action))
        seen.append((obs, reward, info["invalid_actions"]))
        if terminated or truncated:
            break
    return seen


def test_the_example_env_passes_the_checks_the_page_lists(page):
    env = page["env"].unwrapped
    assert isinstance(env, page["QueueAwareElasticEnv"])
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert len(env.observation_names) == env.observation_space.shape[0] == obs.shape[0]
    assert env.observation_names[-1] == "cluster.queued_per_slot"
    assert 0.0 <= obs[-1] <= 1.0


def test_the_example_env_same_seed_same_rollout(page):
    a = _rollout(gym.make("MyLab/QueueAwareElastic-v0", window_s=3 * 3600.0, num_job_slots=8).unwrapped, 3, 30)
    b = _rollout(gym.make("MyLab/QueueAwareElastic-v0", window_s=3 * 3600.0, num_job_slots=8).unwrapped, 3, 30)
    assert len(a) == len(b) > 1
    assert np.array_equal(a[0], b[0])
    for (o1, r1, i1), (o2, r2, i2) in zip(a[1:], b[1:]):
        assert np.array_equal(o1, o2) and r1 == r2 and i1 == i2
