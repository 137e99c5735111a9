"""Build what a training run needs from a :class:`~agents.config.TrainConfig`.

- Seeded vector envs: ``n_envs`` copies of the env, each in a ``Monitor``,
  reset seeds ``seed .. seed + n_envs - 1``; ``DummyVecEnv`` or
  ``SubprocVecEnv`` (``vec_env: auto`` takes subprocesses for 4 or more envs
  on a machine with 2 or more cores: on 2 cores 8 subprocess envs measured
  ~450 steps/s against ~340 in one process, rollouts being dominated by the
  env and by the masked distributions).
- ``VecNormalize`` around them: observation statistics (saved as
  ``vecnormalize.npz`` beside ``model.zip``, plain arrays, and as SB3's
  ``vecnormalize.pkl``; applied again by
  :class:`agents.policy_scheduler.PolicyScheduler`), return scaling for
  training only. With ``tie_slot_stats`` the statistics of every job slot (and
  every loaned-server slot) are pooled per feature (:class:`TiedRunningMeanStd`).
- The model: sb3-contrib ``MaskablePPO`` (default) or SB3 ``PPO``, with an MLP
  or the DeepSets extractor (:mod:`agents.extractors`).
- Artefact paths of a run directory or a checkpoint (:func:`find_artifacts`).

Loading saved files (see ``docs/trust.md``). By default nothing is unpickled:
:func:`load_model` builds a fresh model from the run's ``config.yaml`` (YAML,
``safe_load``) and reads only ``policy.pth`` (and ``policy.optimizer.pth`` when
resuming) out of ``model.zip`` with ``torch.load(..., weights_only=True)``, plus
the plain integer counters of its ``data`` JSON (``num_timesteps``, ...); the
cloudpickled fields of ``data`` (spaces, policy class, schedules, ...) are never
decoded. Observation statistics come from the ``.npz`` (``allow_pickle=False``).
SB3's own pickle path (``VecNormalize.load``, ``pickle.load``, ``Algorithm.load``)
runs only with ``trust=True``: ``--trust-model-files``, ``model:PATH?trust=1`` or
``LYRA_GYM_TRUST_MODEL_FILES=1`` (:func:`trust_requested`), with a one-line warning.
``python -m agents.factory convert PATH`` writes the ``.npz`` of an old run that
only has the pickle (it unpickles it: run it only on files you trust).

Every file is data from anywhere: before a member of ``model.zip`` or of a ``.npz`` is
inflated, its declared size is held against :data:`MAX_DATA_BYTES` / :data:`MAX_ARCHIVE_BYTES`
(and read through a bounded reader), and ``data``'s nesting against :data:`MAX_JSON_DEPTH`
before it is parsed. Every problem is a one-line :class:`ModelFileError` naming the file.
"""

from __future__ import annotations

import functools
import inspect
import os
import json
import pickle
import re
import sys
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

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
from agents.config import TrainConfig, load_train_config
from agents.extractors import JobSetExtractor
from agents.spaces import model_spaces, observation_widths
from lyra_gym.envs.observation import observation_layout

MODEL_FILE = "model.zip"
VECNORM_FILE = "vecnormalize.pkl"          # SB3's pickle (written for compatibility; loaded only when trusted)
VECNORM_STATS_FILE = "vecnormalize.npz"    # the same statistics as plain arrays (what is loaded by default)
TRUST_ENV = "LYRA_GYM_TRUST_MODEL_FILES"   # =1: unpickle model files as before (only for files you trust)
CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_PREFIX = "model"

# Limits on what a saved file may make a load inflate or parse, checked before it is (a hostile
# archive is refused, not inflated). Each is far above any file this gym writes; raise one only for
# files you trust. A 4.6 MB zip whose ``data`` inflated to 1 GiB took 61 s and 2.3 GB before them.
MAX_DATA_BYTES = 16 * 2**20      # model.zip's ``data`` JSON: SB3 writes ~200 KB (the shipped agent: 176 KB)
MAX_ARCHIVE_BYTES = 512 * 2**20  # all members of a model.zip or .npz, inflated (the shipped agent: 4 MB)
MAX_JSON_DEPTH = 64              # nesting of ``data`` (SB3 writes 3 levels); json recurses once per level
MAX_CONFIG_BYTES = 2**20         # config.yaml (a run's is ~1 KB); PyYAML recurses once per nesting level


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
        layout = observation_layout(cfg.num_job_slots, cfg.num_server_slots, *observation_widths(cfg))
        vecnorm.obs_rms = TiedRunningMeanStd(venv.observation_space.shape, [layout["jobs"], layout["servers"]])
    return vecnorm


# ---------------------------------------------------------------------- trust
class UntrustedModelFileError(FileNotFoundError):
    """A saved file exists only in a format that can run code when loaded (a pickle), and loading
    it was not explicitly trusted. (A ``FileNotFoundError``: the safe file is missing.)"""


def trust_requested(trust: bool | None = None) -> bool:
    """``trust`` when given, else the environment variable ``LYRA_GYM_TRUST_MODEL_FILES`` (1/true/yes)."""
    if trust is not None:
        return bool(trust)
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def warn_trusted(path: str | os.PathLike) -> None:
    """The one-line warning printed whenever model files are unpickled."""
    print(f"warning: trusting model files at {path}: unpickling them can run arbitrary code", file=sys.stderr)


class ModelFileError(ValueError):
    """A saved model file that cannot be loaded: the one-line message names the file and the problem."""


def _brief(err: BaseException, limit: int = 300) -> str:
    """``err``'s message on one line, at most ``limit`` characters."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_archive(path: str | os.PathLike, archive: zipfile.ZipFile, json_member: str | None = None) -> None:
    """Refuse ``archive`` when a member, or all together, would inflate past :data:`MAX_ARCHIVE_BYTES`
    (``json_member``: :data:`MAX_DATA_BYTES`), from the sizes its directory declares (nothing inflated)."""
    total = 0
    for info in archive.infolist():
        cap, limit = ((MAX_DATA_BYTES, "MAX_DATA_BYTES") if info.filename == json_member
                      else (MAX_ARCHIVE_BYTES, "MAX_ARCHIVE_BYTES"))
        if info.file_size > cap:
            raise ModelFileError(f"{path}: member {info.filename!r} inflates to {info.file_size} bytes, over the "
                                 f"limit of {cap} (agents.factory.{limit}): refused without inflating it")
        total += info.file_size
    if total > MAX_ARCHIVE_BYTES:
        raise ModelFileError(f"{path}: its members inflate to {total} bytes, over the limit of {MAX_ARCHIVE_BYTES} "
                             f"(agents.factory.MAX_ARCHIVE_BYTES): refused without inflating them")


def read_member(path: str | os.PathLike, archive: zipfile.ZipFile, name: str, cap: int) -> bytes:
    """Member ``name``, inflating at most ``cap`` + 1 bytes (a header that understates the size
    fails its CRC check or the cap, never inflates further)."""
    try:
        with archive.open(name) as fh:
            raw = fh.read(cap + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as err:
        raise ModelFileError(f"{path}: member {name!r}: unreadable ({_brief(err)})") from None
    if len(raw) > cap:
        raise ModelFileError(f"{path}: member {name!r} inflates past the limit of {cap} bytes")
    return raw


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def json_depth(raw: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text, strings skipped, counted without parsing."""
    skeleton = np.frombuffer(_JSON_STRING.sub(b"", raw), dtype=np.uint8)
    step = np.isin(skeleton, (ord("["), ord("{"))).astype(np.int64) - np.isin(skeleton, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))


def parse_json_member(path: str | os.PathLike, name: str, raw: bytes) -> Any:
    """A member's JSON: UTF-8 and :data:`MAX_JSON_DEPTH` checked before parsing (no RecursionError)."""
    where = f"{path}: member {name!r}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelFileError(f"{where}: not UTF-8 (byte {raw[err.start]:#04x} at offset {err.start})") from None
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise ModelFileError(f"{where}: JSON nested {depth} levels deep, over the limit of {MAX_JSON_DEPTH} "
                             f"(agents.factory.MAX_JSON_DEPTH)")
    try:
        return json.loads(text)
    except ValueError as err:
        raise ModelFileError(f"{where}: not JSON ({_brief(err)})") from None


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of a ``.npz`` (``allow_pickle=False``), sizes checked before inflating
    (:func:`check_archive`); any problem is a :class:`ModelFileError` naming the file."""
    try:
        with zipfile.ZipFile(path) as archive:
            check_archive(path, archive)
    except zipfile.BadZipFile:
        raise ModelFileError(f"{path}: not a .npz file (a zip of arrays was expected)") from None
    except OSError as err:
        raise ModelFileError(f"{path}: unreadable ({err.strerror or _brief(err)})") from None
    arrays = {}
    with np.load(path, allow_pickle=False) as data:
        for key in data.files:
            try:
                arrays[key] = data[key]
            except (ValueError, OSError, EOFError, MemoryError, zipfile.BadZipFile, zlib.error) as err:
                raise ModelFileError(f"{path}: array {key!r}: {_brief(err)}") from None
    return arrays


def load_run_config(path: str | os.PathLike) -> TrainConfig:
    """A saved run's ``config.yaml`` (:func:`agents.config.load_train_config`); too large, not UTF-8
    or nested too deeply is a :class:`ModelFileError` naming it."""
    size = Path(path).stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ModelFileError(f"{path}: {size} bytes, over the limit of {MAX_CONFIG_BYTES} for a run config")
    try:
        return load_train_config(path)
    except UnicodeDecodeError:
        raise ModelFileError(f"{path}: not UTF-8 text") from None
    except RecursionError:
        raise ModelFileError(f"{path}: nested too deeply to be a run config") from None


def _untrusted(path: Path, what: str) -> UntrustedModelFileError:
    return UntrustedModelFileError(
        f"{path}: {what} only as a pickle, which is not loaded by default (a crafted file can run code); "
        f"if you trust it, convert it once with `python -m agents.factory convert {path}` "
        f"or load it with --trust-model-files / model:PATH?trust=1 / {TRUST_ENV}=1")


# ---------------------------------------------------------------------- observation statistics
def save_normalizer_stats(vecnorm: VecNormalize, path: str | os.PathLike) -> Path:
    """``vecnorm``'s statistics and settings as a plain ``.npz`` (no objects: loads with allow_pickle=False)."""
    path = Path(path)
    groups = np.asarray(getattr(vecnorm.obs_rms, "groups", []), dtype=np.int64).reshape(-1, 3)
    with open(path, "wb") as fh:  # np.savez on a path would append .npz to other suffixes
        np.savez(
            fh, format_version=np.int64(1),
            obs_mean=np.asarray(vecnorm.obs_rms.mean, dtype=np.float64),
            obs_var=np.asarray(vecnorm.obs_rms.var, dtype=np.float64),
            obs_count=np.float64(vecnorm.obs_rms.count), obs_groups=groups,
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
    if s["obs_mean"].shape != np.shape(vecnorm.obs_rms.mean):
        raise ModelFileError(f"{path}: observation statistics of shape {s['obs_mean'].shape}, "
                         f"the env's observations are {np.shape(vecnorm.obs_rms.mean)}")
    vecnorm.obs_rms.mean, vecnorm.obs_rms.var = s["obs_mean"].copy(), s["obs_var"].copy()
    vecnorm.obs_rms.count = float(s["obs_count"])
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
        raise _untrusted(path, "observation statistics")
    with open(path, "rb") as fh:
        vecnorm = pickle.load(fh)
    vecnorm.training = False
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
        raise _untrusted(Path(vecnormalize_path), "observation statistics")
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
            "job_width": (widths := observation_widths(cfg))[0], "cluster_width": widths[1],
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


# plain counters of model.zip's ``data`` JSON that a safe load restores (everything else comes from the config)
_DATA_COUNTERS = {"num_timesteps": int, "_total_timesteps": int, "_num_timesteps_at_start": int,
                  "_n_updates": int, "_episode_num": int, "_current_progress_remaining": float}
POLICY_MEMBER, OPTIMIZER_MEMBER, DATA_MEMBER = "policy.pth", "policy.optimizer.pth", "data"


def read_model_zip(path: str | os.PathLike, members: tuple[str, ...] = (POLICY_MEMBER,),
                   device: str = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    """(plain counters of ``data``, ``{member stem: state dict}``) of an SB3 ``model.zip``, unpickling nothing:
    ``data`` is read as JSON and only :data:`_DATA_COUNTERS` of plain type kept (its ``:serialized:``
    cloudpickle fields are never decoded); each ``.pth`` member goes through ``torch.load(weights_only=True)``.
    Sizes and nesting are checked first (module docstring); every problem is a :class:`ModelFileError`."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ModelFileError(f"{path}: not a zip file (an SB3 model.zip was expected)") from None
    except OSError as err:
        raise ModelFileError(f"{path}: unreadable ({err.strerror or _brief(err)})") from None
    with archive:
        check_archive(path, archive, DATA_MEMBER)
        names = set(archive.namelist())
        missing = [m for m in members if m not in names]
        if missing:
            raise ModelFileError(f"{path}: not an SB3 model file (no {', '.join(missing)} inside)")
        counters: dict[str, Any] = {}
        if DATA_MEMBER in names:
            data = parse_json_member(path, DATA_MEMBER, read_member(path, archive, DATA_MEMBER, MAX_DATA_BYTES))
            for key, kind in _DATA_COUNTERS.items():
                value = data.get(key) if isinstance(data, dict) else None
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    counters[key] = kind(value)
        states = {}
        for member in members:
            try:  # the stream inflates at most the declared size, checked above
                with archive.open(member) as fh:
                    if zipfile.is_zipfile(fh):  # torch's format is itself a zip: its records are limited too
                        with zipfile.ZipFile(fh) as inner:
                            check_archive(f"{path}: member {member!r}", inner)
                    fh.seek(0)
                    state = torch.load(fh, map_location=device, weights_only=True)
            except ModelFileError:
                raise
            except pickle.UnpicklingError:  # torch's long advice on weights_only does not apply here
                raise ModelFileError(f"{path}: member {member!r}: not a PyTorch weights file of tensors only "
                                     f"(torch.load(weights_only=True) refused it)") from None
            except Exception as err:  # noqa: BLE001 - whatever else the weights reader raises: the file is bad
                raise ModelFileError(f"{path}: member {member!r}: not a PyTorch weights file "
                                     f"({type(err).__name__}: {_brief(err, 200)})") from None
            if not isinstance(state, Mapping):
                raise ModelFileError(f"{path}: member {member!r}: a {type(state).__name__}, a state dict was expected")
            states[member[:-len(".pth")]] = state
    return counters, states


def _inference_model(cfg: TrainConfig, device: str) -> BaseAlgorithm:
    """A fresh, untrained model of ``cfg``'s algorithm and policy on ``cfg``'s spaces, without an env."""
    obs_space, act_space = model_spaces(cfg)
    model = algo_class(cfg)(
        "MlpPolicy", None, learning_rate=0.0, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
        n_epochs=cfg.n_epochs, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, clip_range=0.0,
        ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm, target_kl=cfg.target_kl,
        policy_kwargs=policy_kwargs(cfg), seed=cfg.seed, device=device, _init_setup_model=False,
    )
    model.observation_space, model.action_space, model.n_envs = obs_space, act_space, 1
    model._setup_model()
    return model


def _has_member(path: str | os.PathLike, member: str) -> bool:
    """Whether the zip at ``path`` holds ``member`` (False for an unreadable file: the loader
    that follows names the problem)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return member in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def load_model(cfg: TrainConfig, path: str | os.PathLike, venv: VecEnv | None = None,
               device: str | None = None, trust: bool = False) -> BaseAlgorithm:
    """Load ``path`` with the run's algorithm. With ``venv`` (resuming) training continues on it;
    without, the model is for inference only (schedules are replaced by constants).

    Default (safe): a fresh model built from ``cfg`` (policy class, network, spaces), then the weights
    of ``policy.pth`` (and, resuming, the optimizer state of ``policy.optimizer.pth``) loaded with
    ``torch.load(weights_only=True)`` and strict key/shape checks, and the step counters of ``data``
    (:func:`read_model_zip`). ``trust=True``: SB3's ``Algorithm.load``, which unpickles ``data``'s fields;
    except for an exported model (no optimizer state, which SB3's loader insists on) loaded for
    inference: its weights are all there is to trust, read the safe way.
    """
    cls = algo_class(cfg)
    device = resolve_device(device or cfg.device)
    if trust and (venv is not None or _has_member(path, OPTIMIZER_MEMBER)):
        read_model_zip(path, (), device)  # the limits (sizes, nesting) hold for trusted files too
        custom = {} if venv is not None else {
            "learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}  # inference only
        try:
            return cls.load(str(path), env=venv, device=device, custom_objects=custom)
        except Exception as err:  # noqa: BLE001 - SB3's loader on a bad file: any error
            raise ModelFileError(f"{path}: cannot be loaded ({type(err).__name__}: {_brief(err)})") from None
    members = (POLICY_MEMBER,) if venv is None else (POLICY_MEMBER, OPTIMIZER_MEMBER)
    counters, states = read_model_zip(path, members, device)
    model = _inference_model(cfg, device) if venv is None else make_model(cfg, venv)
    try:
        if venv is None:
            model.policy.load_state_dict(states["policy"], strict=True)
        else:
            model.set_parameters(states, exact_match=True, device=device)
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise ModelFileError(f"{path}: the weights ({', '.join(members)}) do not fit the network of the run's "
                             f"config ({_brief(err)})") from None
    model.policy.set_training_mode(False)
    for key, value in counters.items():
        setattr(model, key, value)
    return model


# ---------------------------------------------------------------------- artefacts
@dataclass(frozen=True)
class Artifacts:
    """Files of a saved model: the model, its observation statistics (``.npz``; SB3's ``.pkl``), the run config."""

    model: Path
    vecnormalize: Path | None
    config: Path
    vecnormalize_pickle: Path | None = None

    def normalizer_file(self, trust: bool = False) -> Path | None:
        """The statistics file to load: the ``.npz``; with ``trust``, SB3's pickle when there is one
        (the old behaviour). Only a pickle and no ``trust``: :class:`UntrustedModelFileError`."""
        if trust and self.vecnormalize_pickle is not None:
            return self.vecnormalize_pickle
        if self.vecnormalize is None and self.vecnormalize_pickle is not None:
            raise _untrusted(self.vecnormalize_pickle, "observation statistics")
        return self.vecnormalize


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

    A checkpoint's statistics are ``model_vecnormalize_N_steps.npz`` (and ``.pkl``) beside it and its
    config the run directory's ``config.yaml``. Raises ``FileNotFoundError`` naming what is missing.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such model file (give a run directory, its model.zip, or a checkpoint)")
    stats = stats_path(path)
    pickled = stats.with_suffix(".pkl")
    for folder in (path.parent, path.parent.parent):
        if (folder / CONFIG_FILE).is_file():
            config = folder / CONFIG_FILE
            break
    else:
        raise FileNotFoundError(f"{path}: no {CONFIG_FILE} beside it or in its parent (the run's resolved config)")
    return Artifacts(path, stats if stats.is_file() else None, config, pickled if pickled.is_file() else None)


def stats_path(model_path: str | os.PathLike) -> Path:
    """The ``.npz`` statistics of a model file: ``vecnormalize.npz`` beside ``model.zip``,
    ``model_vecnormalize_N_steps.npz`` beside checkpoint ``model_N_steps.zip``."""
    model_path = Path(model_path)
    match = _CHECKPOINT.match(model_path.name)
    if match:
        return model_path.with_name(f"{match['prefix']}_vecnormalize_{match['steps']}_steps.npz")
    return model_path.with_name(VECNORM_STATS_FILE)


def convert_pickled_statistics(path: str | os.PathLike) -> Path:
    """Write the ``.npz`` of a run (or checkpoint) that has only SB3's ``vecnormalize`` pickle.
    This unpickles it: only for files you trust. Returns the ``.npz`` path."""
    files = find_artifacts(path)
    if files.vecnormalize_pickle is None:
        raise FileNotFoundError(f"{files.model}: no vecnormalize .pkl beside it to convert")
    warn_trusted(files.vecnormalize_pickle)
    return save_normalizer_stats(load_normalizer(files.vecnormalize_pickle, trust=True), stats_path(files.model))


def convert_main(prog: str, convert_help: str, path_help: str, convert: Callable[[str], Path],
                 argv: Sequence[str] | None = None) -> int:
    """A ``prog convert PATH`` command line around ``convert`` (returns the exit code)."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("convert", help=convert_help).add_argument("path", help=path_help)
    args = parser.parse_args(argv)
    try:
        out = convert(args.path)
    except (FileNotFoundError, ValueError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m agents.factory convert PATH``: see :func:`convert_pickled_statistics`."""
    return convert_main("python -m agents.factory",
                        "write vecnormalize .npz from a trusted vecnormalize .pkl (unpickles it: only for files you trust)",
                        "run directory, its model.zip, or a checkpoint zip", convert_pickled_statistics, argv)


if __name__ == "__main__":
    sys.exit(main())
