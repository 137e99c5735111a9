"""The fast observation builder equals the readable reference float for float.

At every step of seeded episodes with random valid actions, on every guided env id (``-v1`` and
``-v2``) and ``Alloc-v1`` (its builder lays out the same features, then its own, which are not
compared here), under several scenarios (knowledge modes, adaptive batch, checkpoints, no
inference pool, a warm start): the env's observation is
:func:`~lyra_gym.envs.observation_reference.reference_observation` of the same view, slots and
window, ``np.array_equal`` on float32; the ``-v1`` slots are the reference's slots. A deliberately
broken fast feature fails the check.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_gym.envs import ALLOC_ENV_ID, ENV_IDS, ENV_IDS_V2
from lyra_gym.envs import observation as fast
from lyra_gym.envs.alloc_layout import ALLOC_CLUSTER_FEATURES, ALLOC_JOB_FEATURES
from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, SERVER_FEATURES, builder_features
from lyra_gym.envs.observation_reference import (
    CLUSTER_FEATURE_FUNCTIONS,
    JOB_FEATURE_FUNCTIONS,
    SERVER_FEATURE_FUNCTIONS,
    V2_CLUSTER_FEATURE_FUNCTIONS,
    V2_JOB_FEATURE_FUNCTIONS,
    reference_job_slots,
    reference_observation,
    reference_server_slots,
)
from lyra_gym.envs.observation_v2 import V2_CLUSTER_FEATURES, V2_JOB_FEATURES

NO_INFERENCE = {"training": [{"count": 11, "gpu_type": "v100", "gpus_per_server": 8}],
                "inference": {"count": 0, "gpu_type": "t4", "gpus_per_server": 8}}
SCENARIOS = {
    "oracle": ({}, 0.0),
    "estimate-warm": ({"knowledge": {"mode": "estimate"}}, 3600.0),
    "history": ({"knowledge": {"mode": "history"}}, 0.0),
    "adaptive-checkpoints": ({"scaling": "adaptive", "overheads": {"checkpoint_interval_s": 600.0}}, 1800.0),
    "no-inference-warm": ({"cluster": NO_INFERENCE}, 3600.0),
}
STEPS = 40


def _compare(env, version: int) -> None:
    """The env's observation against the reference's, at its current decision point."""
    view = env.engine.view
    if env.spec_id == ALLOC_ENV_ID:
        decision = env.decision
        if decision is None:
            return
        slots, servers = decision.slots, decision.server_ids
        extra_job, extra_cluster = len(ALLOC_JOB_FEATURES), len(ALLOC_CLUSTER_FEATURES)
    else:
        slots, servers, extra_job, extra_cluster = env.slots, env.server_ids, 0, 0
        if version == 1:  # -v1 slots are the reference's (the -v2 ones: lever_point's order)
            assert [j.index for j in slots] == [j.index for j in reference_job_slots(view, env.k)]
            assert list(servers) == reference_server_slots(view, env.m)
    window = env.window if version == 2 else None
    expected = reference_observation(view, slots, servers, env.k, env.m, version, window, extra_job, extra_cluster)
    got = env.obs.copy()
    if extra_job or extra_cluster:  # Alloc-v1's own features: not the reference's
        own = np.array([name.split(".")[-1] in ALLOC_JOB_FEATURES + ALLOC_CLUSTER_FEATURES
                        for name in env.observation_names])
        got[own] = 0.0
    assert got.dtype == expected.dtype == np.float32
    if not np.array_equal(got, expected):
        bad = np.flatnonzero(got != expected)
        names = [env.observation_names[i] for i in bad[:5]]
        raise AssertionError(f"step {env.steps}: {len(bad)} entries differ, first {names}: "
                             f"{got[bad[:5]].tolist()} != {expected[bad[:5]].tolist()}")


def _random_valid_action(env, rng: np.random.Generator) -> np.ndarray | int:
    masks = env.unwrapped.action_masks()
    space = env.action_space
    if isinstance(space, gym.spaces.Discrete):
        return int(rng.choice(np.flatnonzero(masks)))
    nvec = space.nvec
    return np.array([rng.choice(np.flatnonzero(p)) for p in np.split(masks, np.cumsum(nvec)[:-1])])


def _rollout(env_id: str, config: dict, warmup_s: float, seed: int) -> int:
    """Compare at every step of one episode of random valid actions; how many steps compared."""
    env = gym.make(env_id, config=config, window_s=6 * 3600.0, warmup_s=warmup_s, num_job_slots=10,
                   num_server_slots=4)
    inner = env.unwrapped
    inner.spec_id = env_id
    version = inner.obs_version if env_id != ALLOC_ENV_ID else 1
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    compared = 0
    for _ in range(STEPS):
        _compare(inner, version)
        if inner.episode.done:  # (a window with no decision to make ends at its reset)
            break
        compared += 1
        _, _, terminated, truncated, _ = env.step(_random_valid_action(env, rng))
        if terminated or truncated:
            break
    _compare(inner, version)
    env.close()
    return compared


def test_the_reference_names_every_feature_in_the_builders_order():
    assert tuple(JOB_FEATURE_FUNCTIONS) == JOB_FEATURES
    assert tuple(CLUSTER_FEATURE_FUNCTIONS) == CLUSTER_FEATURES
    assert tuple(SERVER_FEATURE_FUNCTIONS) == SERVER_FEATURES
    assert tuple(V2_JOB_FEATURE_FUNCTIONS) == V2_JOB_FEATURES
    assert tuple(V2_CLUSTER_FEATURE_FUNCTIONS) == V2_CLUSTER_FEATURES
    assert builder_features(2) == (JOB_FEATURES + V2_JOB_FEATURES, CLUSTER_FEATURES + V2_CLUSTER_FEATURES)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("env_id", ENV_IDS + ENV_IDS_V2 + (ALLOC_ENV_ID,))
@pytest.mark.sample(6)
def test_fast_observation_equals_the_reference_at_every_step(env_id, scenario):
    if env_id == "LyraGym/Loaning-v2" and scenario == "no-inference-warm":
        pytest.skip("Loaning-v2 with no inference pool shows no decision (each one has a single action)")
    config, warmup_s = SCENARIOS[scenario]
    seeds = (0, 7) if scenario == "oracle" else (3, 4)
    assert sum(_rollout(env_id, config, warmup_s, seed) for seed in seeds) >= 20


@pytest.mark.parametrize("env_id", ["LyraGym/Cluster-v1", "LyraGym/Elastic-v2"])
def test_a_broken_fast_feature_fails_the_check(env_id, monkeypatch):
    """A builder whose ``queue_head_wait`` is off (its log-time replaced) is caught."""
    monkeypatch.setattr(fast, "log_time", lambda seconds: 0.5)  # queue_head_wait, always 0.5
    with pytest.raises(AssertionError, match="queue_head_wait"):
        for seed in (0, 1, 2):
            _rollout(env_id, {}, 3600.0, seed)


def test_the_docs_table_is_read_from_the_reference_docstrings(monkeypatch):
    """``docs/observations.md`` takes each feature's meaning and scale from its reference function:
    a changed docstring changes the generated page; one without a ``Scale:`` line is refused."""
    import importlib

    from lyra_gym.envs import observation_docs, observation_reference

    assert observation_docs.JOB_DOCS["waiting"] == ("time since it last entered the queue (0 while not queued)",
                                                    "log-time")
    monkeypatch.setattr(observation_reference.job_waiting, "__doc__", "time queued\n\n    Scale: minutes")
    changed = importlib.reload(observation_docs)
    try:
        assert changed.JOB_DOCS["waiting"] == ("time queued", "minutes")
        assert "| `job[i].waiting` | time queued | minutes |" in changed.markdown()
        monkeypatch.setattr(observation_reference.job_waiting, "__doc__", "time queued")
        with pytest.raises(ValueError, match="job_waiting: its docstring needs"):
            changed.feature_doc(observation_reference.job_waiting)
    finally:
        monkeypatch.undo()
        importlib.reload(observation_docs)
