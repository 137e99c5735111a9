"""The headroom probe (benchmarks/alloc_headroom.py) plays only valid Alloc-v0 sub-actions and preempts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np

import lyra_gym  # noqa: F401
from agents.scenarios import SUITE
from lyra_gym.envs import ALLOC_ENV_ID

PROBE = Path(__file__).resolve().parents[1] / "benchmarks" / "alloc_headroom.py"


def load_probe():
    spec = importlib.util.spec_from_file_location("alloc_headroom", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def play(env, choose, window: int) -> tuple[dict, int, int]:
    """(final metrics, invalid sub-actions, sub-actions) of one test window."""
    obs, _ = env.reset(options={"split": "test", "window": window})
    steps, info, done = 0, {}, env.done
    while not done:
        mask = env.action_masks()
        action = choose(env, obs)
        assert mask[int(action)], f"sub-action {int(action)} is masked in phase {env.decision.phase}"
        obs, _, terminated, truncated, info = env.step(action)
        steps += 1
        done = terminated or truncated
    return info["final_metrics"], info["invalid_actions"], steps


def test_the_probe_preempts_with_valid_sub_actions_and_every_job_finishes():
    probe = load_probe()
    env = gym.make(ALLOC_ENV_ID, num_job_slots=64, **SUITE["contended"].env_kwargs()).unwrapped
    lyra, lyra_invalid, _ = play(env, lambda e, _o: e.expert_action(), 2)
    scripted, invalid, _ = play(env, probe.probe_policy(2.0), 2)
    assert lyra_invalid == invalid == 0
    assert scripted["jobs_finished"] == lyra["jobs_finished"] == scripted["jobs_total"]
    assert scripted["preemptions"] > lyra["preemptions"]
    assert scripted["jct_mean_s"] != lyra["jct_mean_s"]


def test_a_ratio_no_job_can_meet_is_lyra_bit_for_bit():
    probe = load_probe()
    env = gym.make(ALLOC_ENV_ID, **SUITE["contended"].env_kwargs()).unwrapped
    lyra, _, _ = play(env, lambda e, _o: e.expert_action(), 1)
    scripted, _, _ = play(env, probe.probe_policy(np.inf), 1)
    wall = "sim_wall_s"  # the only entry that measures the machine, not the run
    assert {k: v for k, v in scripted.items() if k != wall} == {k: v for k, v in lyra.items() if k != wall}
