"""The headroom probe (benchmarks/alloc_headroom.py) plays only valid Alloc-v1 sub-actions and preempts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401
from lyra_agents.scenarios import SUITE
from lyra_gym.envs import ALLOC_ENV_ID

PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "alloc_headroom.py"


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_fits_if_freed_predicts_the_mask_after_the_preemption_is_played():
    """``AllocDecision.fits_if_freed`` against the real thing, on a copy of the env: preempt the
    running job, pick the queued one, read the mask of its base demand on training GPUs."""
    import copy

    from lyra_gym.envs.alloc import JOB, WAIT, worker_options
    from lyra_gym.model.jobs import JobState

    env = gym.make(ALLOC_ENV_ID, num_job_slots=64, **SUITE["contended"].env_kwargs()).unwrapped
    env.reset(options={"split": "test", "window": 0})
    outcomes = []
    for step in range(3000):
        d = env.decision
        if d is not None and d.phase == JOB and step % 7 == 0:
            queued = [(i, j) for i, j in enumerate(d.slots) if j.state is JobState.QUEUED]
            running = [(i, j) for i, j in enumerate(d.slots) if j.state is JobState.RUNNING and j.id not in d.must]
            if queued and running:
                (qi, q), (ri, r) = queued[0], running[-1]
                need = q.spec.min_gpus if q.spec.elastic else q.spec.num_gpus
                predicted = d.fits_if_freed(q, 0, need, freed=r)
                played = copy.deepcopy(env)
                for value in (ri, WAIT, qi):
                    played.step(np.int64(value))
                level = worker_options(q.spec, played.layout.levels).index(need)
                assert predicted == bool(played.action_masks()[played.layout.place_index(0, level)]), step
                outcomes.append(predicted)
        _, _, terminated, truncated, _ = env.step(env.expert_action())
        if terminated or truncated or len(outcomes) >= 30:
            break
    assert len(outcomes) >= 10 and True in outcomes and False in outcomes
