"""The spaces of an env a model is built for, read from its :class:`~lyra_agents.config.TrainConfig`
or its registered class, without building the env or a trace.

Shared by :mod:`lyra_agents.model_build` (building and loading a model) and
:mod:`lyra_agents.policy_scheduler` (decoding its actions), so neither imports the other for it.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

from lyra_agents.config import TrainConfig
from lyra_gym.envs import ALLOC_ENV_ID
from lyra_gym.envs.observation import observation_layout


def env_controls(env_id: str) -> tuple[bool, bool]:
    """``(controls_jobs, controls_loaning)`` of a LyraGym id, read from its class (no env built)."""
    entry = gym.spec(env_id).entry_point
    cls: Any = load_env_creator(entry) if isinstance(entry, str) else entry  # an env class (LyraGym ids)
    return bool(cls.controls_jobs), bool(cls.controls_loaning)


def _env_class(env_id: str) -> Any:
    entry = gym.spec(env_id).entry_point
    return load_env_creator(entry) if isinstance(entry, str) else entry


def action_version(env_id: str) -> int:
    """The action layout of a LyraGym guided id (1: ``ActionCodec``; 2: the ``-v2`` levers,
    ``lyra_gym.envs.levers.LeverCodec``), read from its class (no env built)."""
    return int(getattr(_env_class(env_id), "action_version", 1))


def obs_version(env_id: str) -> int:
    """The observation version of a LyraGym id (``ObservationBuilder(..., version=)``), read from its class."""
    return int(getattr(_env_class(env_id), "obs_version", 1))


def action_codec(cfg: TrainConfig) -> Any:
    """The action codec of ``cfg``'s guided env (``ActionCodec``, or ``LeverCodec`` for ``-v2``)."""
    from lyra_gym.envs.actions import ActionCodec
    from lyra_gym.envs.levers import LeverCodec

    codec = LeverCodec if action_version(cfg.env_id) == 2 else ActionCodec
    return codec(cfg.num_job_slots, cfg.num_server_slots, cfg.borrow_levels, *env_controls(cfg.env_id))


def observation_widths(cfg: TrainConfig) -> tuple[int, int]:
    """(job row width, cluster block width) of ``cfg``'s env observation (:mod:`lyra_gym.envs.observation`)."""
    from lyra_gym.envs.alloc import ALLOC_CLUSTER_FEATURES, ALLOC_JOB_FEATURES
    from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, builder_features

    if cfg.env_id == ALLOC_ENV_ID:
        return len(JOB_FEATURES) + len(ALLOC_JOB_FEATURES), len(CLUSTER_FEATURES) + len(ALLOC_CLUSTER_FEATURES)
    job, cluster = builder_features(obs_version(cfg.env_id))
    return len(job), len(cluster)


def model_spaces(cfg: TrainConfig) -> tuple[gym.spaces.Box, gym.spaces.Space]:
    """The (observation, action) spaces of ``cfg``'s env, built as the env builds them (no env, no trace)."""
    from lyra_gym.envs.alloc import AllocLayout

    layout = observation_layout(cfg.num_job_slots, cfg.num_server_slots, *observation_widths(cfg))
    start, slots, width = layout["servers"]
    size = start + slots * width
    if cfg.observation_extras:
        from lyra_gym.envs.learner_extras import extras_size
        size += extras_size(cfg.num_job_slots)
    obs_space = gym.spaces.Box(-1.0, 1.0, (size,), dtype=np.float32)
    if cfg.env_id == ALLOC_ENV_ID:
        alloc = AllocLayout(cfg.num_job_slots, cfg.num_server_slots, cfg.borrow_levels, cfg.worker_levels)
        return obs_space, gym.spaces.Discrete(alloc.n)
    return obs_space, gym.spaces.MultiDiscrete(action_codec(cfg).nvec)
