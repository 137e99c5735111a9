"""Issue 40 item 10: the Gym API before ``reset()`` and after an episode's end, for every env id.

``action_masks()`` and ``expert_action()`` before the first ``reset()`` raised ``AttributeError``
(no ``_masks`` yet; that kills a ``SubprocVecEnv`` worker without saying why); ``step()`` after a
truncation at ``max_steps`` went on stepping. Now each raises Gymnasium's ``ResetNeeded`` naming
the call, as ``step()`` after termination does (still a ``RuntimeError`` as before).
"""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.error import ResetNeeded

import lyra_gym  # noqa: F401  (registers the ids)
from lyra_gym.env_ids import ENV_ENTRY_POINTS

ENV_IDS = sorted(ENV_ENTRY_POINTS)
# 12 two-GPU jobs, one every 10 minutes, 5 minutes each: an hour's window ends in 11 expert steps
# of the guided envs (25 sub-actions of Alloc-v1)
TRACE = "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus\n" + "".join(
    f"j{i},{i * 600.0},2,300,resnet50,0,,\n" for i in range(12))


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(TRACE)
    return str(path)


def _make(env_id: str, trace: str, **kwargs):
    return gym.make(env_id, trace=trace, window_s=3600.0, **kwargs)


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("method", ["action_masks", "expert_action"])
def test_masks_and_expert_before_reset_raise_reset_needed_naming_the_call(env_id, method, trace):
    env = _make(env_id, trace)
    with pytest.raises(ResetNeeded, match=rf"^call reset\(\) before {method}\(\)$"):
        getattr(env.unwrapped, method)()
    with pytest.raises(ResetNeeded):  # as sb3-contrib reaches it through the wrappers
        env.get_wrapper_attr(method)()
    env.reset(seed=0)
    getattr(env.unwrapped, method)()  # fine once reset


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_of_the_bare_env_before_reset_raises_reset_needed(env_id, trace):
    env = _make(env_id, trace).unwrapped
    with pytest.raises(ResetNeeded, match=r"^call reset\(\) before step\(\)$"):
        env.step(0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_after_termination_raises_reset_needed_until_reset(env_id, trace):
    env = _make(env_id, trace).unwrapped
    env.reset(seed=0)
    terminated = truncated = False
    for _ in range(100):
        _, _, terminated, truncated, _ = env.step(env.expert_action())
        if terminated or truncated:
            break
    assert terminated and not truncated
    with pytest.raises(ResetNeeded, match=r"the episode is over"):
        env.step(env.expert_action())
    with pytest.raises(RuntimeError):  # what it raised before: still caught by the same handlers
        env.step(env.expert_action())
    env.reset(seed=0)
    env.step(env.expert_action())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_after_truncation_at_max_steps_raises_reset_needed(env_id, trace):
    env = _make(env_id, trace, max_steps=2).unwrapped
    env.reset(seed=0)
    assert env.step(env.expert_action())[3] is False
    _, _, terminated, truncated, info = env.step(env.expert_action())
    if env_id == "LyraGym/Loaning-v2" and terminated:
        # auto-commit: the second shown step ran the rest of the window (no later decision had a
        # choice), so the episode ended on its own before max_steps could truncate it
        assert not truncated and "final_metrics" in info
    else:
        assert (terminated, truncated) == (False, True) and "final_metrics" in info
    with pytest.raises(ResetNeeded, match=r"the episode is over"):  # it stepped on before
        env.step(env.expert_action())
    env.reset(seed=1)
    env.step(env.expert_action())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_after_a_time_limit_truncation_raises_reset_needed(env_id, trace):
    env = _make(env_id, trace, max_episode_steps=1)  # gymnasium's TimeLimit, outside the env
    env.reset(seed=0)
    _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
    assert (terminated, truncated) == (False, True) and "final_metrics" in info
    with pytest.raises(ResetNeeded, match=r"the episode is over"):
        env.step(env.unwrapped.expert_action())
    env.reset(seed=0)
    assert env.step(env.unwrapped.expert_action())[3] is True


def test_final_metrics_before_reset_is_reset_needed(trace):
    env = _make("LyraGym/Cluster-v1", trace).unwrapped
    with pytest.raises(ResetNeeded, match=r"final_metrics\(\): call reset\(\) first"):
        env.final_metrics()
