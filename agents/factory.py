"""Build what a training run needs from a :class:`~agents.config.TrainConfig`.

- Seeded vector envs: ``n_envs`` copies of the env, each in a ``Monitor``,
  reset seeds ``seed .. seed + n_envs - 1``; ``DummyVecEnv`` or
  ``SubprocVecEnv`` (``vec_env: auto`` takes subprocesses for 4 or more envs
  on a machine with 2 or more cores: on 2 cores 8 subprocess envs measured
  ~450 steps/s against ~340 in one process, rollouts being dominated by the
  env and by the masked distributions).
- ``VecNormalize`` around them: observation statistics (saved as
  ``vecnormalize.pkl`` beside ``model.zip``, applied again by
  :class:`agents.policy_scheduler.PolicyScheduler`), return scaling for
  training only. With ``tie_slot_stats`` the statistics of every job slot (and
  every loaned-server slot) are pooled per feature (:class:`TiedRunningMeanStd`).
- The model: sb3-contrib ``MaskablePPO`` (default) or SB3 ``PPO``, with an MLP
  or the DeepSets extractor (:mod:`agents.extractors`).
- Artefact paths of a run directory or a checkpoint (:func:`find_artifacts`).
"""

from __future__ import annotations

import functools
import inspect
import os
import pickle
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecNormalize
from torch import nn

import lyra_gym  # noqa: F401  (registers the LyraGym/ ids)
from agents.config import TrainConfig
from agents.extractors import JobSetExtractor, observation_layout

MODEL_FILE = "model.zip"
VECNORM_FILE = "vecnormalize.pkl"
CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_PREFIX = "model"


# ---------------------------------------------------------------------- compute
def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``; anything else unchanged."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def configure_torch(cfg: TrainConfig) -> int:
    """Set torch's intra-op threads (0 = half the cores, 1 to 4: on 2 cores one thread,
    since a second one fights the envs) and distribution argument checks. Returns the threads."""
    threads = cfg.torch_threads or max(1, min(4, (os.cpu_count() or 1) // 2))
    torch.set_num_threads(threads)
    torch.distributions.Distribution.set_default_validate_args(cfg.torch_validate_args)
    return threads


def algo_class(cfg: TrainConfig) -> type[BaseAlgorithm]:
    if cfg.algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO
        return MaskablePPO
    return PPO


def supports_action_masks(model: BaseAlgorithm) -> bool:
    """Does ``model.predict`` take ``action_masks`` (MaskablePPO)?"""
    return "action_masks" in inspect.signature(model.predict).parameters


# ---------------------------------------------------------------------- envs
def make_env(env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """One env in a ``Monitor`` (episode returns and lengths for SB3's rollout/ scalars)."""
    return Monitor(gym.make(env_id, **env_kwargs))


def make_eval_env(cfg: TrainConfig) -> gym.Env:
    """A bare env for test-window evaluation (unwrapped: ``options`` and ``expert_action`` reach it)."""
    return gym.make(cfg.env_id, **cfg.env_kwargs()).unwrapped


def choose_vec_env(cfg: TrainConfig) -> type[VecEnv]:
    if cfg.vec_env == "subproc" or (cfg.vec_env == "auto" and cfg.n_envs >= 4 and (os.cpu_count() or 1) >= 2):
        return SubprocVecEnv
    return DummyVecEnv


def make_vec_env(cfg: TrainConfig) -> VecEnv:
    """``n_envs`` seeded copies (reset seeds ``seed + i``), not yet normalised."""
    thunk = functools.partial(make_env, cfg.env_id, cfg.env_kwargs())
    venv = choose_vec_env(cfg)([thunk] * cfg.n_envs)
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
        layout = observation_layout(cfg.num_job_slots, cfg.num_server_slots)
        vecnorm.obs_rms = TiedRunningMeanStd(venv.observation_space.shape, [layout["jobs"], layout["servers"]])
    return vecnorm


def load_normalizer(path: str | os.PathLike) -> VecNormalize:
    """Saved ``VecNormalize`` statistics without an env: enough for ``normalize_obs``."""
    with open(path, "rb") as fh:
        vecnorm = pickle.load(fh)
    vecnorm.training = False
    return vecnorm


def build_training_envs(cfg: TrainConfig, vecnormalize_path: str | os.PathLike | None = None) -> VecNormalize:
    """Seeded, normalised training envs; statistics restored from ``vecnormalize_path`` if given."""
    venv = make_vec_env(cfg)
    if vecnormalize_path is None:
        return normalize(venv, cfg)
    vecnorm = VecNormalize.load(str(vecnormalize_path), venv)
    vecnorm.training = True
    return vecnorm


# ---------------------------------------------------------------------- model
def policy_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "net_arch": {"pi": list(cfg.net_arch), "vf": list(cfg.net_arch)},
        "activation_fn": {"tanh": nn.Tanh, "relu": nn.ReLU}[cfg.activation],
    }
    if cfg.extractor == "deepsets":
        kwargs["features_extractor_class"] = JobSetExtractor
        kwargs["features_extractor_kwargs"] = {
            "num_job_slots": cfg.num_job_slots, "num_server_slots": cfg.num_server_slots,
            "hidden": cfg.deepsets_hidden, "slot_dim": cfg.deepsets_slot_dim,
        }
    return kwargs


def make_model(cfg: TrainConfig, venv: VecEnv) -> BaseAlgorithm:
    """A fresh model on ``venv``, seeded with ``cfg.seed`` (SB3 seeds torch and the action space)."""
    lr = cfg.learning_rate if cfg.lr_schedule == "constant" else LinearSchedule(cfg.learning_rate, 0.0, 1.0)
    return algo_class(cfg)(
        "MlpPolicy", venv, learning_rate=lr, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
        n_epochs=cfg.n_epochs, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, clip_range=cfg.clip_range,
        ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm, target_kl=cfg.target_kl,
        policy_kwargs=policy_kwargs(cfg), seed=cfg.seed, device=resolve_device(cfg.device), verbose=cfg.verbose,
    )


def load_model(cfg: TrainConfig, path: str | os.PathLike, venv: VecEnv | None = None,
               device: str | None = None) -> BaseAlgorithm:
    """Load ``path`` with the run's algorithm. With ``venv`` (resuming) training continues on it;
    without, the model is for inference only (schedules are replaced by constants)."""
    cls = algo_class(cfg)
    device = resolve_device(device or cfg.device)
    if venv is not None:
        return cls.load(str(path), env=venv, device=device)
    inference_only = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    return cls.load(str(path), device=device, custom_objects=inference_only)


# ---------------------------------------------------------------------- artefacts
@dataclass(frozen=True)
class Artifacts:
    """Files of a saved model: the model, its observation statistics, the run config."""

    model: Path
    vecnormalize: Path | None
    config: Path


def new_run_dir(cfg: TrainConfig) -> Path:
    """``<runs_dir>/<env>__<name>__<seed>__<unix time>/`` (CleanRL's naming), created empty."""
    stem = f"{cfg.env_id.replace('/', '-')}__{cfg.name}__{cfg.seed}__{int(time.time())}"
    path = Path(cfg.runs_dir) / stem
    suffix = 1
    while path.exists():  # two runs started in the same second
        path = Path(cfg.runs_dir) / f"{stem}-{suffix}"
        suffix += 1
    path.mkdir(parents=True)
    return path


_CHECKPOINT = re.compile(r"^(?P<prefix>.+)_(?P<steps>\d+)_steps\.zip$")


def find_artifacts(path: str | os.PathLike) -> Artifacts:
    """Resolve a run directory, its ``model.zip``, or a checkpoint ``.../checkpoints/model_N_steps.zip``.

    A checkpoint's statistics are ``model_vecnormalize_N_steps.pkl`` beside it and its
    config the run directory's ``config.yaml``. Raises ``FileNotFoundError`` naming what is missing.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such model file (give a run directory, its model.zip, or a checkpoint)")
    match = _CHECKPOINT.match(path.name)
    if match:
        vecnorm = path.with_name(f"{match['prefix']}_vecnormalize_{match['steps']}_steps.pkl")
    else:
        vecnorm = path.with_name(VECNORM_FILE)
    for folder in (path.parent, path.parent.parent):
        if (folder / CONFIG_FILE).is_file():
            config = folder / CONFIG_FILE
            break
    else:
        raise FileNotFoundError(f"{path}: no {CONFIG_FILE} beside it or in its parent (the run's resolved config)")
    return Artifacts(path, vecnorm if vecnorm.is_file() else None, config)
