"""Seeded, normalised vector envs for training, and a bare env for evaluation.

- Seeded vector envs: ``n_envs`` copies of the env, each in a ``Monitor``,
  reset seeds ``seed .. seed + n_envs - 1``; ``DummyVecEnv`` or
  ``SubprocVecEnv`` (``vec_env: auto`` takes subprocesses for 4 or more envs
  on a machine with 2 or more cores: on 2 cores 8 subprocess envs measured
  ~450 steps/s against ~340 in one process, rollouts being dominated by the
  env and by the masked distributions).
- A generalist (``scenarios``): env ``i`` takes scenario ``scenarios[i % len]`` of ``suite``: its
  trace, cluster config (knowledge included), window and warm start, on its train windows; every
  other keyword from the config, so every env has the same spaces.
- ``bc_expert`` other than ``heuristic``: each env in :class:`~lyra_agents.experts.ExpertRule`,
  whose ``expert_action()`` the imitation warm start calls.
- ``VecNormalize`` around them: observation statistics (saved by
  :mod:`lyra_agents.normalizer_stats`), return scaling for training only. With
  ``tie_slot_stats`` the statistics of every job slot (and every loaned-server
  slot) are pooled per feature (:class:`TiedRunningMeanStd`).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable, cast

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize

import lyra_gym  # noqa: F401  (registers the LyraGym/ ids)
from lyra_agents.config import TrainConfig
from lyra_agents.experts import ExpertRule
from lyra_agents.model_files import untrusted_error
from lyra_agents.normalizer_stats import restore_normalizer_stats
from lyra_agents.spaces import observation_widths
from lyra_agents.suite import get_suite
from lyra_gym.envs.learner_extras import LearnerExtrasObservation
from lyra_gym.envs.observation import observation_layout


def make_env(env_id: str, env_kwargs: dict[str, Any], extras: bool = False, expert: str = "heuristic",
             rule: str | None = None) -> gym.Env:
    """One env in a ``Monitor`` (episode returns and lengths for SB3's rollout/ scalars); with
    ``extras``, its observation extended by :class:`LearnerExtrasObservation`; with an ``expert``
    rule (``rule``: the ``bc_rule`` file of ``expert="rule"``), in :class:`~lyra_agents.experts.ExpertRule`."""
    env: gym.Env = gym.make(env_id, **env_kwargs)
    if extras:
        env = LearnerExtrasObservation(env)
    if expert != "heuristic":
        env = ExpertRule(env, expert, rule)
    return Monitor(env)


def env_kwargs_of(cfg: TrainConfig) -> list[dict[str, Any]]:
    """``gymnasium.make`` keywords of each of the ``n_envs`` training envs (module docstring)."""
    base = cfg.env_kwargs()
    if not cfg.scenarios:
        return [base] * cfg.n_envs
    suite = get_suite(cfg.suite)
    scenario_kwargs = []
    for name in cfg.scenarios:
        kwargs = suite.get(name).env_kwargs()
        assert kwargs is not None  # TrainConfig.validate refuses scenarios an env cannot express
        scenario_kwargs.append({**base, **kwargs, "trace_seed": cfg.trace_seed})
    return [scenario_kwargs[i % len(scenario_kwargs)] for i in range(cfg.n_envs)]


def make_eval_env(cfg: TrainConfig) -> gym.Env:
    """A bare env for test-window evaluation (unwrapped: ``options`` and ``expert_action`` reach it);
    with ``observation_extras``, the bare env in :class:`LearnerExtrasObservation` (the rollouts
    step the wrapper, :func:`lyra_agents.evaluate.rollout`)."""
    env = gym.make(cfg.env_id, **cfg.env_kwargs()).unwrapped
    return LearnerExtrasObservation(env) if cfg.observation_extras else env


def choose_vec_env(cfg: TrainConfig) -> type[DummyVecEnv] | type[SubprocVecEnv]:
    if cfg.vec_env == "subproc" or (cfg.vec_env == "auto" and cfg.n_envs >= 4 and (os.cpu_count() or 1) >= 2):
        return SubprocVecEnv
    return DummyVecEnv


def make_vec_env(cfg: TrainConfig) -> VecEnv:
    """``n_envs`` seeded copies (reset seeds ``seed + i``), not yet normalised."""
    extras, expert, rule = cfg.observation_extras, cfg.bc_expert, cfg.bc_rule
    thunks: list[Callable[[], gym.Env]] = [functools.partial(make_env, cfg.env_id, kwargs, extras, expert, rule)
                                           for kwargs in env_kwargs_of(cfg)]
    venv = choose_vec_env(cfg)(thunks)
    venv.seed(cfg.seed)
    return venv


class TiedRunningMeanStd(RunningMeanStd):
    """Running mean/variance with the entries of each slot group pooled per feature.

    ``groups``: ``(start, slots, width)`` blocks of the flat observation. After
    every update, each feature's mean and variance become those of all the
    slots' values together (all slots have the same count, so this is exact).
    """

    def __init__(self, shape: tuple[int, ...], groups: list[tuple[int, int, int]], epsilon: float = 1e-4) -> None:
        super().__init__(epsilon=epsilon, shape=shape)
        self.groups = [g for g in groups if g[1] > 1]

    def update_from_moments(self, batch_mean: np.ndarray, batch_var: np.ndarray, batch_count: float) -> None:
        super().update_from_moments(batch_mean, batch_var, batch_count)
        for start, slots, width in self.groups:
            end = start + slots * width
            mean = self.mean[start:end].reshape(slots, width)
            second = (self.var[start:end].reshape(slots, width) + mean ** 2).mean(axis=0)
            pooled = mean.mean(axis=0)
            self.mean[start:end] = np.tile(pooled, slots)
            self.var[start:end] = np.tile(np.maximum(second - pooled ** 2, 0.0), slots)


def normalize(venv: VecEnv, cfg: TrainConfig) -> VecNormalize:
    """Wrap in ``VecNormalize`` (always, so every run saves ``vecnormalize.pkl``)."""
    vecnorm = VecNormalize(venv, norm_obs=cfg.normalize_obs, norm_reward=cfg.normalize_reward,
                           clip_obs=cfg.clip_obs, gamma=cfg.gamma)
    if cfg.tie_slot_stats:
        layout = observation_layout(cfg.num_job_slots, cfg.num_server_slots, *observation_widths(cfg))
        shape = cast(gym.spaces.Box, venv.observation_space).shape
        # ignore: SB3 infers obs_rms as the dict of its Dict-space case; these envs' is one statistic
        vecnorm.obs_rms = TiedRunningMeanStd(shape, [layout["jobs"], layout["servers"]])  # type: ignore[assignment]
    return vecnorm


def build_training_envs(cfg: TrainConfig, vecnormalize_path: str | os.PathLike | None = None,
                        trust: bool = False) -> VecNormalize:
    """Seeded, normalised training envs; statistics restored from ``vecnormalize_path`` if given
    (a ``.npz``; a ``.pkl`` only with ``trust=True``, through ``VecNormalize.load``)."""
    venv = make_vec_env(cfg)
    if vecnormalize_path is None:
        return normalize(venv, cfg)
    if Path(vecnormalize_path).suffix == ".npz":
        vecnorm = restore_normalizer_stats(normalize(venv, cfg), vecnormalize_path)
    elif trust:
        vecnorm = VecNormalize.load(str(vecnormalize_path), venv)
    else:
        venv.close()
        raise untrusted_error(Path(vecnormalize_path), "observation statistics")
    vecnorm.training = True
    return vecnorm
