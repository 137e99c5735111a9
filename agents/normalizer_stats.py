"""Observation statistics of a run as plain arrays: save, read, check, apply, restore.

Saved as ``vecnormalize.npz`` beside ``model.zip`` (and as SB3's ``vecnormalize.pkl``, loaded
only when trusted); applied again by :class:`lyra_agents.policy_scheduler.PolicyScheduler` through
:class:`ObsNormalizer`. The ``.npz`` is read with ``allow_pickle=False``
(:func:`lyra_agents.model_files.read_npz`).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any, cast

import numpy as np
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecNormalize

from lyra_agents.model_files import ModelFileError, read_npz, untrusted_error


def _obs_rms(vecnorm: VecNormalize) -> RunningMeanStd:
    """``vecnorm.obs_rms``: one RunningMeanStd for the Box observations of these envs (SB3 types
    the attribute as the dict of its Dict-space case, the first branch of its __init__)."""
    return cast(RunningMeanStd, vecnorm.obs_rms)


def save_normalizer_stats(vecnorm: VecNormalize, path: str | os.PathLike) -> Path:
    """``vecnorm``'s statistics and settings as a plain ``.npz`` (no objects: loads with allow_pickle=False)."""
    path = Path(path)
    obs_rms = _obs_rms(vecnorm)
    groups = np.asarray(getattr(obs_rms, "groups", []), dtype=np.int64).reshape(-1, 3)
    with open(path, "wb") as fh:  # np.savez on a path would append .npz to other suffixes
        np.savez(
            fh, format_version=np.int64(1),
            obs_mean=np.asarray(obs_rms.mean, dtype=np.float64),
            obs_var=np.asarray(obs_rms.var, dtype=np.float64),
            obs_count=np.float64(obs_rms.count), obs_groups=groups,
            ret_mean=np.asarray(vecnorm.ret_rms.mean, dtype=np.float64),
            ret_var=np.asarray(vecnorm.ret_rms.var, dtype=np.float64),
            ret_count=np.float64(vecnorm.ret_rms.count),
            norm_obs=np.bool_(vecnorm.norm_obs), norm_reward=np.bool_(vecnorm.norm_reward),
            clip_obs=np.float64(vecnorm.clip_obs), clip_reward=np.float64(vecnorm.clip_reward),
            gamma=np.float64(vecnorm.gamma), epsilon=np.float64(vecnorm.epsilon),
        )
    return path


_SCALAR_STATS = ("obs_count", "norm_obs", "clip_obs", "epsilon")


def read_normalizer_stats(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of a statistics ``.npz`` (:func:`read_npz`: an object array is an error), checked:
    numbers only, ``obs_mean`` and ``obs_var`` vectors of one shape, the settings single values."""
    stats = read_npz(path)
    missing = {"obs_mean", "obs_var", *_SCALAR_STATS} - set(stats)
    if missing:
        raise ModelFileError(f"{path}: not an observation statistics file (missing {', '.join(sorted(missing))})")
    for key, value in stats.items():
        if value.dtype.kind not in "biuf":
            raise ModelFileError(f"{path}: {key}: {value.dtype} values, numbers were expected")
    for key in _SCALAR_STATS:
        if stats[key].ndim != 0:
            raise ModelFileError(f"{path}: {key}: an array of shape {stats[key].shape}, a single value was expected")
    if stats["obs_mean"].ndim != 1 or stats["obs_var"].shape != stats["obs_mean"].shape:
        raise ModelFileError(f"{path}: obs_mean of shape {stats['obs_mean'].shape} and obs_var of shape "
                             f"{stats['obs_var'].shape}: two vectors of one shape were expected")
    return stats


class ObsNormalizer:
    """Saved observation statistics applied as ``VecNormalize.normalize_obs`` applies them
    (``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)`` in float64, returned as
    float32), without an env."""

    def __init__(self, mean: np.ndarray, var: np.ndarray, count: float, clip_obs: float, epsilon: float,
                 norm_obs: bool = True) -> None:
        self.obs_rms = RunningMeanStd(shape=np.shape(mean))
        self.obs_rms.mean, self.obs_rms.var, self.obs_rms.count = np.asarray(mean), np.asarray(var), float(count)
        self.clip_obs, self.epsilon, self.norm_obs = float(clip_obs), float(epsilon), bool(norm_obs)
        self.training = False

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ObsNormalizer":
        s = read_normalizer_stats(path)
        return cls(s["obs_mean"], s["obs_var"], float(s["obs_count"]), float(s["clip_obs"]), float(s["epsilon"]),
                   bool(s["norm_obs"]))

    def normalize_obs(self, obs: np.ndarray) -> np.ndarray:
        if not self.norm_obs:
            return np.array(obs, copy=True)
        return np.clip((obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon),
                       -self.clip_obs, self.clip_obs).astype(np.float32)


def restore_normalizer_stats(vecnorm: VecNormalize, path: str | os.PathLike) -> VecNormalize:
    """Put the statistics of a ``.npz`` into ``vecnorm`` (shapes checked)."""
    s = read_normalizer_stats(path)
    obs_rms = _obs_rms(vecnorm)
    if s["obs_mean"].shape != np.shape(obs_rms.mean):
        raise ModelFileError(f"{path}: observation statistics of shape {s['obs_mean'].shape}, "
                         f"the env's observations are {np.shape(obs_rms.mean)}")
    obs_rms.mean, obs_rms.var = s["obs_mean"].copy(), s["obs_var"].copy()
    obs_rms.count = float(s["obs_count"])
    if "ret_mean" in s:
        vecnorm.ret_rms.mean, vecnorm.ret_rms.var = s["ret_mean"].copy(), s["ret_var"].copy()
        vecnorm.ret_rms.count = float(s["ret_count"])
    return vecnorm


def load_normalizer(path: str | os.PathLike, trust: bool = False) -> Any:
    """Saved observation statistics without an env: enough for ``normalize_obs``.

    A ``.npz`` -> :class:`ObsNormalizer`. A ``.pkl`` (SB3's ``VecNormalize``) is unpickled only
    with ``trust=True``; otherwise :class:`UntrustedModelFileError`.
    """
    path = Path(path)
    if path.suffix == ".npz":
        return ObsNormalizer.load(path)
    if not trust:
        raise untrusted_error(path, "observation statistics")
    with open(path, "rb") as fh:
        vecnorm = pickle.load(fh)
    vecnorm.training = False
    return vecnorm
