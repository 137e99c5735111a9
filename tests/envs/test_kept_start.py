"""A reset on the window of its source's last, unplayed start copies that start
(:meth:`lyra_gym.envs.episode.EpisodeSource.start`): the same episode, bit for bit, as simulating
the warm start again; a played one is never copied. Forks share their source, so a group of
forks reset on one seed simulates its warm start once (``lyra_agents.members.make_group``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_gym.envs import episode as episode_module

KWARGS = dict(window_s=6 * 3600.0, warmup_s=3 * 3600.0, num_job_slots=10, num_server_slots=4,
              config={"knowledge": {"mode": "history"}})


def _play(env, seed: int, steps: int = 25) -> list:
    """(obs, reward, flags, time) of a reset on ``seed`` and ``steps`` random valid steps."""
    obs, info = env.reset(seed=seed)
    seen = [(obs.copy(), info["time_s"])]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        masks, nvec = env.action_masks(), env.action_space.nvec
        action = np.array([rng.choice(np.flatnonzero(p)) for p in np.split(masks, np.cumsum(nvec)[:-1])])
        obs, reward, terminated, truncated, info = env.step(action)
        seen.append((obs.copy(), reward, terminated, truncated, info["time_s"]))
        if terminated or truncated:
            break
    return seen


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        all(np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y for x, y in zip(p, q)) for p, q in zip(a, b))


@pytest.mark.parametrize("env_id", ["LyraGym/Cluster-v1", "LyraGym/Cluster-v2"])
def test_a_kept_start_plays_as_a_fresh_one(env_id, monkeypatch):
    built = []  # the engines built: one per warm start simulated
    build = episode_module.build_engine
    monkeypatch.setattr(episode_module, "build_engine", lambda *a, **k: built.append(1) or build(*a, **k))
    fresh = _play(gym.make(env_id, **KWARGS).unwrapped, 3)
    env = gym.make(env_id, **KWARGS).unwrapped
    env.reset(seed=3)  # unplayed: the next reset on seed 3 copies it
    assert len(built) == 2
    assert _same(_play(env, 3), fresh) and len(built) == 2
    twin = env.fork()  # shares the source: env played a copy, the kept start is still unplayed
    assert _same(_play(twin, 3), fresh) and len(built) == 2
    group = [gym.make(env_id, **KWARGS).unwrapped]
    group += [group[0].fork() for _ in range(3)]
    starts = [member.reset(seed=3)[0] for member in group]  # one warm start simulated, three copies
    assert len(built) == 3 and all(np.array_equal(s, fresh[0][0]) for s in starts)
    assert all(_same(_play(member, 3), fresh) for member in group)


def test_a_played_start_is_never_copied(monkeypatch):
    """Were the played episode copied (its mark not looked at), the second reset would start
    where the first episode stopped: caught."""
    fresh = _play(gym.make("LyraGym/Cluster-v1", **KWARGS).unwrapped, 4)
    env = gym.make("LyraGym/Cluster-v1", **KWARGS).unwrapped
    _play(env, 4)  # its first start, built and played: never copied
    assert _same(_play(env, 4), fresh)
    monkeypatch.setattr(episode_module.Episode, "mark", lambda self: 0)
    _play(env, 4)
    assert not _same(_play(env, 4), fresh)
