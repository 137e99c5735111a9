"""The learner extras' fast path equals its plain reference float for float.

Along seeded episodes of random valid actions (knowledge modes, a warm start, a contended trace
where many jobs finish and wait), the wrapper's appended block is
:func:`~lyra_gym.envs.learner_extras.reference_extras` of the same view and slots at every step,
``np.array_equal`` on float32. A fast path that skips a completion fails the check.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_gym.envs import learner_extras
from lyra_gym.envs.learner_extras import LearnerExtrasObservation, reference_extras

SCENARIOS = {
    "oracle": ({}, 0.0),
    "estimate-warm": ({"knowledge": {"mode": "estimate"}}, 3600.0),
    "history-warm": ({"knowledge": {"mode": "history"}}, 7200.0),
}
STEPS = 60


def _random_valid_action(env, rng: np.random.Generator) -> np.ndarray:
    masks = env.unwrapped.action_masks()
    nvec = env.action_space.nvec
    return np.array([rng.choice(np.flatnonzero(p)) for p in np.split(masks, np.cumsum(nvec)[:-1])])


def _rollout(env_id: str, config: dict, warmup_s: float, seed: int) -> int:
    """Compare at every step of one episode; how many steps had a completion in the history."""
    env = LearnerExtrasObservation(gym.make(env_id, config=config, window_s=8 * 3600.0, warmup_s=warmup_s,
                                            num_job_slots=12, num_server_slots=4).unwrapped)
    inner = env.unwrapped
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    with_history = 0
    for _ in range(STEPS):
        if inner.episode.done:
            break
        view = inner.episode.engine.view
        expected = reference_extras(view, inner.slots, inner.k)
        got = obs[-env.extras.size:]
        assert got.dtype == expected.dtype == np.float32
        if not np.array_equal(got, expected):
            bad = np.flatnonzero(got != expected)
            raise AssertionError(f"step {inner.steps}: entries {bad[:5].tolist()} differ: "
                                 f"{got[bad[:5]].tolist()} != {expected[bad[:5]].tolist()}")
        with_history += view.num_finished > 0
        obs, _, terminated, truncated, _ = env.step(_random_valid_action(env, rng))
        if terminated or truncated:
            break
    env.close()
    return with_history


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("env_id", ["LyraGym/Cluster-v1", "LyraGym/Cluster-v2"])
def test_fast_extras_equal_the_reference_at_every_step(env_id, scenario):
    config, warmup_s = SCENARIOS[scenario]
    assert sum(_rollout(env_id, config, warmup_s, seed) for seed in (0, 5)) >= 20


def test_a_skipped_completion_fails_the_check(monkeypatch):
    """A fast path that never reads a completion (its count always up to date) is caught."""
    monkeypatch.setattr(learner_extras.LearnerExtras, "_catch_up", lambda self, view, now: None)
    with pytest.raises(AssertionError, match="differ"):
        _rollout("LyraGym/Cluster-v1", {}, 7200.0, 0)
