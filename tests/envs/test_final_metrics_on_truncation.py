"""``info["final_metrics"]`` whichever way an episode ends (lyra_gym/envs/truncation.py): the env's
own end, Gymnasium's ``TimeLimit`` through ``gymnasium.make(..., max_episode_steps=N)`` (added by
the registration, after the TimeLimit), a hand-made ``TimeLimit``; ``env.unwrapped.final_metrics()``
computes them on demand without changing the episode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TimeLimit

import lyra_gym
from lyra_gym.envs import ALL_ENV_IDS, FinalMetricsOnTruncation
from lyra_gym.run.metrics import summarize

SHORT = dict(window_s=3 * 3600.0)
WALL_CLOCK = "sim_wall_s"


def expert(env) -> np.ndarray:
    return env.unwrapped.expert_action()


def without_wall_clock(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k != WALL_CLOCK}


def run(env, steps: int, seed: int = 0):
    env.reset(seed=seed)
    for i in range(steps):
        out = env.step(expert(env))
        if out[2] or out[3]:
            return i + 1, out
    return steps, out


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
def test_time_limit_truncation_gives_final_metrics(env_id):
    env = gym.make(env_id, max_episode_steps=5, **SHORT)
    assert isinstance(env, FinalMetricsOnTruncation) and isinstance(env.env, TimeLimit)
    steps, (_, _, terminated, truncated, info) = run(env, 10)
    assert (steps, terminated, truncated) == (5, False, True)
    metrics = info["final_metrics"]
    inner = env.unwrapped
    # the metrics of the jobs so far: what summarize says of the engine now, the info's counts
    assert without_wall_clock(metrics) == without_wall_clock(summarize(inner.engine))
    assert without_wall_clock(metrics) == without_wall_clock(inner.final_metrics())
    assert metrics["jobs_finished"] == info["jobs_finished"] and metrics["preemptions"] == info["preemptions"]
    assert metrics["jobs_total"] == info["jobs_total"] == len(inner.engine.jobs)
    assert metrics["jobs_unfinished"] == metrics["jobs_total"] - metrics["jobs_finished"] > 0  # partial


def test_the_env_own_truncation_and_a_time_limit_give_the_same_metrics():
    own = gym.make("LyraGym/Elastic-v1", max_steps=5, **SHORT)
    limited = gym.make("LyraGym/Elastic-v1", max_episode_steps=5, **SHORT)
    (n1, out1), (n2, out2) = run(own, 10), run(limited, 10)
    assert n1 == n2 == 5 and out1[3] and out2[3]
    assert without_wall_clock(out1[4]["final_metrics"]) == without_wall_clock(out2[4]["final_metrics"])
    assert {k: v for k, v in out1[4].items() if k != "final_metrics"} == \
        {k: v for k, v in out2[4].items() if k != "final_metrics"}


def test_steps_before_the_limit_have_no_final_metrics_and_the_spec_round_trips():
    env = gym.make("LyraGym/Cluster-v1", max_episode_steps=3, **SHORT)
    env.reset(seed=1)
    for _ in range(2):
        assert "final_metrics" not in env.step(expert(env))[4]
    assert "final_metrics" in env.step(expert(env))[4]
    again = gym.make(env.spec)  # the spec records the wrapper: the same stack
    assert isinstance(again, FinalMetricsOnTruncation) and again.spec.max_episode_steps == 3
    assert "final_metrics" in run(again, 5)[1][4]


def test_without_a_time_limit_the_stack_is_unchanged():
    env = gym.make("LyraGym/Elastic-v1", **SHORT)
    stack = []
    while isinstance(env, gym.Wrapper):
        stack.append(type(env).__name__)
        env = env.env
    assert stack == ["OrderEnforcing", "PassiveEnvChecker"]
    assert gym.spec("LyraGym/Elastic-v1").additional_wrappers == lyra_gym.ENV_ADDITIONAL_WRAPPERS
    import lyra_gym.envs as envs

    assert envs._ADDITIONAL_WRAPPERS == lyra_gym.ENV_ADDITIONAL_WRAPPERS


def test_a_hand_made_time_limit_with_the_wrapper():
    env = FinalMetricsOnTruncation(TimeLimit(gym.make("LyraGym/Alloc-v1", **SHORT).unwrapped, 4))
    steps, (_, _, _, truncated, info) = run(env, 10)
    assert steps == 4 and truncated and info["final_metrics"]["jobs_total"] == info["jobs_total"]


def test_termination_keeps_the_env_own_final_metrics():
    env = gym.make("LyraGym/Elastic-v1", max_episode_steps=100_000, window_s=1800.0)
    env.reset(seed=0)
    while True:
        _, _, terminated, truncated, info = env.step(np.zeros(env.action_space.shape, dtype=np.int64))
        if terminated or truncated:
            break
    assert terminated and not truncated
    assert without_wall_clock(info["final_metrics"]) == without_wall_clock(env.unwrapped.final_metrics())


def test_final_metrics_on_demand_leave_the_episode_as_it_was():
    a = gym.make("LyraGym/Alloc-v1", **SHORT).unwrapped
    b = gym.make("LyraGym/Alloc-v1", **SHORT).unwrapped
    with pytest.raises(RuntimeError, match=r"final_metrics\(\): call reset\(\) first"):
        a.final_metrics()
    for env in (a, b):
        env.reset(seed=4)
    for i in range(30):
        if i % 3 == 0:
            a.final_metrics()
        action = a.expert_action()
        out_a, out_b = a.step(action), b.step(action)
        assert out_a[0].tobytes() == out_b[0].tobytes() and repr(out_a[1:4]) == repr(out_b[1:4])
