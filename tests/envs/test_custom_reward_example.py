"""examples/custom_reward.py runs, and its return is the JCT return plus 0.01 x its term's return,
each computed apart (the term given as a callable)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import pytest

from lyra_gym.envs import reward_terms, unregister_reward_term

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_reward.py"


def _load():
    spec = importlib.util.spec_from_file_location("custom_reward_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _return(reward, steps: int) -> float:
    env = gym.make("LyraGym/Elastic-v1", window_s=3 * 3600.0, reward=reward)
    env.reset(seed=0)
    total = 0.0
    for _ in range(steps):
        _, r, terminated, truncated, _ = env.step(env.unwrapped.expert_action())
        total += r
        if terminated or truncated:
            break
    return total


def test_the_example_runs_and_mixes_its_term_by_weight(capsys):
    example = _load()
    try:
        total = example.main(["--steps", "6"])
        assert "gpu_slowdown" in reward_terms()
    finally:
        if "gpu_slowdown" in reward_terms():
            unregister_reward_term("gpu_slowdown")
    out = capsys.readouterr().out
    assert "reward terms: {'jct': 1.0, 'gpu_slowdown': 0.01}" in out and "return over 6 steps" in out
    jct, term = _return("jct", 6), _return(example.gpu_weighted_slowdown, 6)
    assert term < 0 and total == pytest.approx(jct + 0.01 * term, rel=1e-12)
