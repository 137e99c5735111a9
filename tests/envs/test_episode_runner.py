"""The episode runner the environments compose (``lyra_gym/envs/episode.py``).

An :class:`Episode` run by the heuristic itself against ``simulate`` on the same jobs and seed
(metrics to the bit, the reward summing to -(total JCT) / scale), its step accounting by hand,
and the composition: the guided and the Alloc environments share the runner, not each other.
"""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the ids)
from lyra_gym.envs import ALL_ENV_IDS, AllocEnv, LyraClusterEnv
from lyra_gym.envs.episode import Episode, EpisodeSource
from lyra_gym.envs.episode_env import EpisodeEnv
from lyra_gym.run.simulate import simulate
from lyra_gym.sim import scheduler as registry

WALL = "sim_wall_s"


def source(**changes) -> EpisodeSource:
    args = dict(trace="env-14d", trace_seed=0, config=None, profiles=None, window_s=6 * 3600.0, test_fraction=0.2,
                reward="jct", reward_scale_s=3600.0, heuristic="lyra", max_steps=5000, warmup_s=0.0)
    args.update(changes)
    return EpisodeSource(**args)


def play_heuristic(episode: Episode) -> float:
    """Run the episode's heuristic itself to the end; the summed reward."""
    total = 0.0
    while not episode.done:
        total += episode.run(episode.heuristic.decide(episode.engine.view))
    return total


@pytest.mark.parametrize("warmup_s", [0.0, 2 * 3600.0])
def test_an_episode_run_by_the_heuristic_is_simulate_on_the_window(warmup_s):
    src = source(warmup_s=warmup_s)
    episode = src.start(np.random.default_rng(3), "test", 1)
    total = play_heuristic(episode)
    metrics = episode.final_metrics()
    jobs = episode.window.jobs(src.trace)
    expected = simulate(jobs, registry.make("lyra"), src.sim_config, seed=episode.window.seed,
                        profiles=src.profiles).metrics
    assert {k: v for k, v in metrics.items() if k != WALL} == {k: v for k, v in expected.items() if k != WALL}
    if warmup_s == 0.0:  # every job of the window is in the system from submission to completion
        jct = sum(j.finish_time - j.spec.submit_time for j in episode.engine.jobs)
        assert total == pytest.approx(-jct / 3600.0, rel=1e-9)


def test_steps_truncation_and_the_charge_for_jobs_left_are_counted_by_hand():
    src = source(max_steps=2)
    episode = src.start(np.random.default_rng(0), "test", 0)
    assert episode.steps == 0 and not episode.done
    r, truncated = episode.end_step(-1.5, invalid=2)
    assert (r, truncated, episode.steps, episode.invalid_actions_total) == (-1.5, False, 1, 2)
    r, truncated = episode.end_step(0.0, invalid=0)
    assert truncated and episode.steps == 2  # max_steps reached, the episode not over
    episode.done = True  # as if nothing more could happen: each job left costs one more window
    left = len(episode.engine.jobs) - episode.engine.finished
    r, truncated = episode.end_step(0.0, invalid=0)
    assert not truncated and r == pytest.approx(-left * src.windows.length_s / 3600.0)
    assert episode.info(1)["invalid_actions"] == 1 and episode.info(0)["invalid_actions_total"] == 2


def test_run_counts_the_plans_it_submits_and_the_first_decision_follows_the_warm_up():
    episode = source(warmup_s=3 * 3600.0).start(np.random.default_rng(0), "test", 0)
    assert episode.engine.now >= episode.window.start_s and episode.plans == 0  # warm-up plans are not counted
    for n in (1, 2, 3):
        episode.run(episode.heuristic.decide(episode.engine.view))
        assert episode.plans == n


def test_the_environments_compose_the_runner_and_alloc_is_not_a_guided_env():
    assert issubclass(AllocEnv, EpisodeEnv) and not issubclass(AllocEnv, LyraClusterEnv)
    for env_id in ALL_ENV_IDS:
        env = gym.make(env_id, window_s=6 * 3600.0).unwrapped
        assert env.engine is None and env.window is None and env.invalid_actions_total == 0
        env.reset(seed=0)
        assert env.engine is env.episode.engine and env.window is env.episode.window
        assert env.done is env.episode.done and env.heuristic is env.episode.heuristic
        assert env.trace is env.source.trace and env.max_steps == env.source.max_steps
        assert hasattr(env, "codec") == (env_id != "LyraGym/Alloc-v1")  # Alloc has no codec to discard


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda env: pickle.loads(pickle.dumps(env))])
@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
@pytest.mark.sample(3)
def test_a_copy_mid_episode_keeps_its_runner_and_continues_identically(env_id, clone):
    env = gym.make(env_id, window_s=6 * 3600.0).unwrapped
    env.reset(seed=2)
    rng = np.random.default_rng(1)

    def action(e):
        masks = e.action_masks()
        if env_id == "LyraGym/Alloc-v1":
            return np.int64(rng.choice(np.flatnonzero(masks)))
        parts = np.split(masks, np.cumsum(e.action_space.nvec)[:-1])
        return np.array([rng.choice(np.flatnonzero(p)) for p in parts])

    for _ in range(30):
        env.step(action(env))
    twin = clone(env)
    assert twin.episode is not env.episode and twin.engine is twin.episode.engine
    for _ in range(60):
        a = action(env)
        o1, r1, t1, u1, i1 = env.step(a)
        o2, r2, t2, u2, i2 = twin.step(a)
        assert o1.tobytes() == o2.tobytes() and repr(r1) == repr(r2) and (t1, u1) == (t2, u2)
        assert i1.keys() == i2.keys() and np.array_equal(env.action_masks(), twin.action_masks())
        if t1 or u1:
            break
