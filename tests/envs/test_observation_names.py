"""``env.unwrapped.observation_names`` (issue 27 item 5): one name per observation entry, in
order, for every registered environment, naming what the builder put there; and the checked-in
``docs/observations.md`` is what ``python -m lyra_gym.envs.observation_docs`` writes."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from lyra_gym.envs import ALL_ENV_IDS, ENV_IDS
from lyra_gym.envs.cluster_env import LyraClusterEnv
from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, SERVER_FEATURES, observation_names
from lyra_gym.envs.observation_docs import markdown

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(window_s=2 * 3600.0, num_job_slots=5, num_server_slots=3)


@pytest.mark.parametrize("env_id", ALL_ENV_IDS)
@pytest.mark.parametrize("kwargs", [{}, SMALL])
def test_one_name_per_entry_for_every_env(env_id, kwargs):
    env = gym.make(env_id, **kwargs)
    names = env.unwrapped.observation_names
    assert len(names) == env.observation_space.shape[0]
    assert len(set(names)) == len(names)
    k, m = env.unwrapped.k, env.unwrapped.m
    assert names[0] == "job[0].present" and names[-1] == f"server[{m - 1}].inelastic_jobs"
    assert sum(name.startswith(f"job[{k - 1}].") for name in names) == env.unwrapped.builder.job_width
    assert not any(name.startswith(f"job[{k}].") for name in names)


def test_the_guided_layout_hand_counted():
    names = observation_names(2, 1)
    assert len(names) == 2 * 17 + 22 + 4
    assert names[17] == "job[1].present" and names[33] == "job[1].remaining_loaned"
    assert names[34] == "cluster.free_training" and names[55] == "cluster.running_unseen"
    assert names[56:] == ("server[0].present", "server[0].used", "server[0].jobs", "server[0].inelastic_jobs")


def _check_named_values(env, obs) -> None:
    """Entries read by name against the engine, computed here the plain way."""
    engine = env.engine
    value = dict(zip(env.observation_names, obs.tolist()))
    assert value["cluster.queued_jobs"] == np.float32(math.log1p(len(engine.queue)) / 6.0)
    assert value["cluster.running_jobs"] == np.float32(math.log1p(len(engine.running)) / 6.0)
    loaned = engine.view.loaned_servers()
    for j in range(env.m):
        assert value[f"server[{j}].present"] == (1.0 if j < len(loaned) else 0.0)
    for i in range(env.k):
        job = env.slots[i] if i < len(env.slots) else None
        assert value[f"job[{i}].present"] == (0.0 if job is None else 1.0)
        if job is not None:
            assert value[f"job[{i}].queued"] == (1.0 if job.state.name == "QUEUED" else 0.0)
            assert value[f"job[{i}].requested_gpus"] == np.float32(job.spec.num_gpus / 64)
            assert value[f"job[{i}].workers"] == np.float32(job.workers / 64)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_names_say_what_the_builder_put_there(env_id):
    env = gym.make(env_id, **SMALL)
    obs, _ = env.reset(seed=2)
    rng = np.random.default_rng(2)
    nvec = env.action_space.nvec
    for _ in range(40):
        _check_named_values(env.unwrapped, obs)
        masks = env.unwrapped.action_masks()
        action = np.array([rng.choice(np.flatnonzero(p)) for p in np.split(masks, np.cumsum(nvec)[:-1])])
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break


def test_docs_file_is_the_generators_output():
    assert (ROOT / "docs" / "observations.md").read_text(encoding="utf-8") == markdown(), \
        "docs/observations.md is stale: python -m lyra_gym.envs.observation_docs > docs/observations.md"


def test_generator_runs_as_a_module():
    run = subprocess.run([sys.executable, "-m", "lyra_gym.envs.observation_docs"], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert run.stdout == markdown()


def test_the_env_docstring_lists_the_features_in_order():
    doc = " ".join((LyraClusterEnv.__doc__ or "").split())
    blocks = (("job[i].", JOB_FEATURES), ("cluster.", CLUSTER_FEATURES), ("server[j].", SERVER_FEATURES))
    for prefix, features in blocks:
        assert f"``{prefix}``: {', '.join(features)} |" in doc, prefix
