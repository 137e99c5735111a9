"""Env ids are versioned (CHANGELOG.md): the present behaviour is -v1 (and -v2 for the guided envs
with the heuristics' levers, issue 38); the -v0 names of earlier
releases make the same environment for one release, with Gymnasium's out-of-date warning, and a
training config saved under a -v0 id is read as its -v1 id."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym
from lyra_agents.config import TrainConfig
from lyra_gym.envs import ALL_ENV_IDS

OLD = ("LyraGym/Cluster-v0", "LyraGym/Loaning-v0", "LyraGym/Elastic-v0", "LyraGym/Alloc-v0")


V1 = ("LyraGym/Cluster-v1", "LyraGym/Loaning-v1", "LyraGym/Elastic-v1", "LyraGym/Alloc-v1")
V2 = ("LyraGym/Cluster-v2", "LyraGym/Loaning-v2", "LyraGym/Elastic-v2")


def test_the_present_ids_are_v1_and_v2_and_every_old_one_maps_to_its_own():
    assert ALL_ENV_IDS == (*V1, *V2)
    assert lyra_gym.DEPRECATED_ENV_IDS == dict(zip(OLD, V1))  # (-v2 has no old name)
    assert set(lyra_gym.ENV_ENTRY_POINTS) == set(ALL_ENV_IDS)
    assert lyra_gym.current_env_id("LyraGym/Cluster-v2") == "LyraGym/Cluster-v2"


@pytest.mark.parametrize("old", ["LyraGym/Elastic-v0", "LyraGym/Alloc-v0"])
def test_an_old_id_warns_and_makes_the_same_env(old):
    new = lyra_gym.DEPRECATED_ENV_IDS[old]
    with pytest.warns(DeprecationWarning, match="out of date"):
        legacy = gym.make(old, window_s=3 * 3600.0)
    present = gym.make(new, window_s=3 * 3600.0)
    assert type(legacy.unwrapped) is type(present.unwrapped)
    a, _ = legacy.reset(seed=3)
    b, _ = present.reset(seed=3)
    assert np.array_equal(a, b)


def test_the_changelog_says_what_each_id_means():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "CHANGELOG.md").read_text(encoding="utf-8")
    for env_id in (*ALL_ENV_IDS, *OLD):
        assert env_id in text, env_id


def test_a_config_saved_under_v0_is_read_as_v1():
    with pytest.warns(DeprecationWarning, match="read as LyraGym/Alloc-v1"):
        cfg = TrainConfig(env_id="LyraGym/Alloc-v0")
    assert cfg.env_id == "LyraGym/Alloc-v1"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TrainConfig(env_id="LyraGym/Elastic-v1").env_id == "LyraGym/Elastic-v1"
