"""The torch settings and the model of a run: device, threads, algorithm class, policy network.

The model: sb3-contrib ``MaskablePPO`` (default) or SB3 ``PPO``, with an MLP or the DeepSets
extractor (:mod:`lyra_agents.extractors`); :func:`make_model` for training on an env,
:func:`inference_model` for a model without an env (what a safe load fills with weights).
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING, Any

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecEnv
from torch import nn

from lyra_agents.config import TrainConfig
from lyra_agents.extractors import JobSetExtractor
from lyra_agents.spaces import model_spaces, observation_widths

if TYPE_CHECKING:
    from sb3_contrib import MaskablePPO


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


def algo_class(cfg: TrainConfig) -> type[PPO] | type[MaskablePPO]:
    if cfg.algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO
        return MaskablePPO
    return PPO


def supports_action_masks(model: BaseAlgorithm) -> bool:
    """Does ``model.predict`` take ``action_masks`` (MaskablePPO)?"""
    return "action_masks" in inspect.signature(model.predict).parameters


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
            "job_width": (widths := observation_widths(cfg))[0], "cluster_width": widths[1],
        }
        if cfg.observation_extras:
            from lyra_gym.envs.learner_extras import CLUSTER_EXTRAS, SLOT_FEATURES
            kwargs["features_extractor_kwargs"].update(slot_extras=len(SLOT_FEATURES),
                                                       cluster_extras=len(CLUSTER_EXTRAS))
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


def inference_model(cfg: TrainConfig, device: str) -> BaseAlgorithm:
    """A fresh, untrained model of ``cfg``'s algorithm and policy on ``cfg``'s spaces, without an env."""
    obs_space, act_space = model_spaces(cfg)
    # ignore: PPO's annotation wants an env, but SB3 (BaseAlgorithm) takes None without _init_setup_model
    model = algo_class(cfg)(
        "MlpPolicy", None, learning_rate=0.0, n_steps=cfg.n_steps, batch_size=cfg.batch_size,  # type: ignore[arg-type]
        n_epochs=cfg.n_epochs, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, clip_range=0.0,
        ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm, target_kl=cfg.target_kl,
        policy_kwargs=policy_kwargs(cfg), seed=cfg.seed, device=device, _init_setup_model=False,
    )
    model.observation_space, model.action_space, model.n_envs = obs_space, act_space, 1
    model._setup_model()
    return model
