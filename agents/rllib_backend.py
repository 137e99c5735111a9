"""RLlib PPO (new API stack) on the LyraGym environments, and its checkpoints as schedulers.

    python train.py --backend rllib --quick
    python train.py --backend rllib --env LyraGym/Elastic-v1 --set num_env_runners=2 iterations=50

Pieces, mirroring the SB3 side (``agents/vec_envs.py``, ``agents/model_build.py``, ``agents/callbacks.py``,
``agents/policy_scheduler.py``):

- :func:`register_lyra_env`: an RLlib env (``ray.tune.registry.register_env``) that
  builds ``gymnasium.make(env_id, **env_kwargs)`` wrapped in
  :class:`~lyra_gym.envs.ActionMaskObservation` (Dict obs with the 0/1 action mask).
- :class:`MaskedMultiDiscreteModule`: a ``TorchRLModule`` with a policy MLP on
  ``obs["observations"]`` whose concatenated per-dimension logits get
  ``clamp(log(mask), min=-1e9)`` added (RLlib's ``TorchMultiCategorical`` splits them
  by ``nvec``), and a value MLP (``ValueFunctionAPI.compute_values``).
- :class:`ClusterMetricsRLlibCallback`: ``on_episode_end`` logs
  ``info["final_metrics"]`` as ``custom/*`` (the keys of ``lyra_agents.callbacks.CUSTOM_KEYS``)
  through the metrics logger; :func:`train_rllib` writes them, and RLlib's own
  scalars, to TensorBoard.
- :class:`RllibPolicyScheduler` / :func:`load_rllib_scheduler`: ``rllib:PATH`` in any
  policy list (``lyra-gym compare --policies lyra,rllib:runs/<run>``), the module run
  through the engine as :class:`lyra_agents.policy_scheduler.PolicyScheduler` runs an SB3 model.

TrainConfig mapping: ``n_envs`` -> env runners (capped at cores - 1), ``n_steps * n_envs``
-> ``train_batch_size``, ``batch_size`` -> ``minibatch_size``, ``n_epochs`` ->
``num_epochs``, ``total_timesteps / train_batch_size`` -> iterations; ``net_arch`` and
``activation`` -> the module's MLPs. RLlib-only keys given with ``--set``:
``num_env_runners``, ``iterations``, ``train_batch_size``, ``minibatch_size``,
``num_envs_per_env_runner``. No observation normalisation (the observations are in [-1, 1]).

A run writes ``runs/<env>__<name>__<seed>__<time>/``: ``config.yaml``, TensorBoard
events, ``checkpoint/`` (``Algorithm.save_to_path``; the module lives under
``checkpoint/learner_group/learner/rl_module/default_policy``), the module's weights
as plain arrays in ``checkpoint/module_weights.npz``, and ``compare.json``.

Loading (``rllib:PATH``, :func:`load_rllib_scheduler`) unpickles nothing by default: the
module is rebuilt from ``config.yaml`` (``net_arch``, ``activation``, the env's spaces)
and its weights read from ``module_weights.npz`` (``allow_pickle=False``), strictly
(every key and shape must match). RLlib's own checkpoint files (``state.pkl``,
``class_and_ctor_args.pkl``, ...) are read only when trusted (``rllib:PATH?trust=1``
or ``LYRA_GYM_TRUST_MODEL_FILES=1``): then ``RLModule.from_checkpoint`` unpickles them.
``python -m lyra_agents.rllib_backend convert RUN`` writes the ``.npz`` of an older (trusted) run.
``load_rllib_scheduler.check`` is what the comparison harness runs for every ``rllib:`` policy
before the first simulation; errors name the file (``lyra_agents.model_files.ModelFileError``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchMultiCategorical
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule

import lyra_gym  # registers the LyraGym/ ids
from lyra_gym.sim import scheduler as registry
from lyra_gym.envs import ActionMaskObservation
from lyra_gym.errors import shown
from lyra_gym.outputs import TMP_MARK, atomic_path, atomic_write_text

from lyra_agents.callbacks import CUSTOM_KEYS
from lyra_agents.config import TrainConfig, TrainConfigError, resolve_config
from lyra_agents.artifacts import CONFIG_FILE, new_run_dir
from lyra_agents.model_files import (
    ModelFileError, UntrustedModelFileError, load_run_config, read_npz, trust_requested, warn_trusted,
)
from lyra_agents.spaces import model_spaces
from lyra_agents.policy_scheduler import GuidedAgentScheduler, split_trust_option

RLLIB_ENV = "LyraGymMasked"          # the RLlib env name; env_config picks the LyraGym/ id
CHECKPOINT_DIR = "checkpoint"        # inside a run directory
MODULE_SUBPATH = Path("learner_group") / "learner" / "rl_module" / "default_policy"
WEIGHTS_FILE = "module_weights.npz"  # inside checkpoint/: the module's state dict as plain arrays
MODULE_ID = "default_policy"
MASK_MIN = -1e9                      # log(0) clamped: masked values get probability exp(-1e9) = 0
RLLIB_KEYS = {"num_env_runners": int, "iterations": int, "train_batch_size": int, "minibatch_size": int,
              "num_envs_per_env_runner": int}


# ---------------------------------------------------------------------- env
def make_masked_env(env_config: Mapping[str, Any]) -> gym.Env:
    """``ActionMaskObservation(gym.make(env_config["env_id"], **env_config["env_kwargs"]))``."""
    import lyra_gym  # noqa: F811 (env runner processes: register the ids there too)

    return ActionMaskObservation(gym.make(env_config["env_id"], **dict(env_config.get("env_kwargs", {}))))


def register_lyra_env(name: str = RLLIB_ENV) -> str:
    """Register :func:`make_masked_env` with Tune's registry (idempotent); returns the name."""
    from ray.tune.registry import register_env

    register_env(name, make_masked_env)
    return name


# ---------------------------------------------------------------------- RL module
def _mlp(in_dim: int, hidden: Sequence[int], out_dim: int, activation: str) -> nn.Sequential:
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, int(width)), act()]
        in_dim = int(width)
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class MaskedMultiDiscreteModule(TorchRLModule, ValueFunctionAPI):
    """Masked MultiDiscrete policy + value MLPs on ``obs["observations"]``.

    ``model_config``: ``hidden`` (list of widths, default [256, 256]), ``activation``
    (``tanh`` | ``relu``). The action distribution is ``TorchMultiCategorical`` split by
    the action space's ``nvec``; masked values get ``MASK_MIN`` added to their logits.
    """

    def setup(self) -> None:
        space = self.observation_space
        obs_space = cast(gym.spaces.Box, space["observations"] if isinstance(space, gym.spaces.Dict) else space)
        config = dict(cast("dict[str, Any] | None", self.model_config) or {})  # build_module gives a dict
        hidden = list(config.get("hidden", [256, 256]))
        activation = config.get("activation", "tanh")
        nvec = cast(gym.spaces.MultiDiscrete, self.action_space).nvec
        self.nvec = [int(n) for n in np.asarray(nvec).reshape(-1)]
        in_dim = int(np.prod(obs_space.shape))
        self.pi = _mlp(in_dim, hidden, sum(self.nvec), activation)
        self.vf = _mlp(in_dim, hidden, 1, activation)

    # action distributions: one categorical per dimension, logits split by nvec
    def get_inference_action_dist_cls(self):
        return TorchMultiCategorical.get_partial_dist_cls(input_lens=self.nvec)

    def get_exploration_action_dist_cls(self):
        return self.get_inference_action_dist_cls()

    def get_train_action_dist_cls(self):
        return self.get_inference_action_dist_cls()

    @staticmethod
    def _split_obs(batch: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        obs = batch[Columns.OBS]
        return obs["observations"].float(), obs["action_mask"].float()

    def masked_logits(self, batch: Mapping[str, Any]) -> torch.Tensor:
        x, mask = self._split_obs(batch)
        return self.pi(x) + torch.clamp(torch.log(mask), min=MASK_MIN)

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.masked_logits(batch)}

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.masked_logits(batch)}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        x, _ = self._split_obs(batch)
        return self.vf(x).squeeze(-1)


# ---------------------------------------------------------------------- metrics
class ClusterMetricsRLlibCallback(RLlibCallback):
    """Every finished episode's ``info["final_metrics"]`` -> ``custom/*`` (mean per iteration)."""

    def on_episode_end(self, *, episode, metrics_logger=None, **kwargs) -> None:
        if metrics_logger is None:
            return
        try:
            info = episode.get_infos(-1)
        except (IndexError, AttributeError):
            return
        metrics = (info or {}).get("final_metrics")
        if not metrics:
            return
        for key, source in CUSTOM_KEYS.items():
            if metrics.get(source) is not None:
                metrics_logger.log_value(key, float(metrics[source]), reduce="mean")
        metrics_logger.log_value("custom/jobs_unfinished", float(metrics.get("jobs_unfinished", 0)), reduce="mean")


def _scalars(tree: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Flatten a result dict to ``a/b/c -> float`` (numbers only)."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_scalars(value, name + "/"))
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            if math.isfinite(float(value)):
                out[name] = float(value)
    return out


def custom_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """The ``custom/*`` means of one ``Algorithm.train()`` result (from the env runners)."""
    runners = result.get("env_runners", {}) or {}
    return {k: float(v) for k, v in _scalars(runners).items() if k.startswith("custom/")}


# ---------------------------------------------------------------------- training
def split_overrides(overrides: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    """``--set`` items -> (TrainConfig overrides, RLlib-only settings)."""
    rest, rllib = [], {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key.strip() in RLLIB_KEYS:
            try:
                rllib[key.strip()] = RLLIB_KEYS[key.strip()](value)
            except ValueError:
                raise TrainConfigError(f"{key.strip()}: expected an integer, got {shown(value)}") from None
        else:
            rest.append(item)
    return rest, rllib


def build_ppo_config(cfg: TrainConfig, num_env_runners: int | None = None, train_batch_size: int | None = None,
                     minibatch_size: int | None = None, num_envs_per_env_runner: int = 1):
    """The ``PPOConfig`` (new API stack) of a :class:`TrainConfig`."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    if num_env_runners is None:
        num_env_runners = max(1, min(cfg.n_envs, (os.cpu_count() or 2) - 1))
    train_batch_size = train_batch_size or cfg.n_steps * cfg.n_envs
    minibatch_size = min(minibatch_size or cfg.batch_size, train_batch_size)
    env_config = {"env_id": cfg.env_id, "env_kwargs": cfg.env_kwargs()}
    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .environment(register_lyra_env(), env_config=env_config)
        .framework("torch")
        .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=num_envs_per_env_runner,
                     rollout_fragment_length="auto")
        .training(
            lr=cfg.learning_rate, gamma=cfg.gamma, lambda_=cfg.gae_lambda, clip_param=cfg.clip_range,
            entropy_coeff=cfg.ent_coef, vf_loss_coeff=cfg.vf_coef, grad_clip=cfg.max_grad_norm,
            train_batch_size_per_learner=train_batch_size, minibatch_size=minibatch_size,
            num_epochs=cfg.n_epochs, vf_clip_param=1e6,  # unnormalised returns: do not clip the value loss
        )
        .rl_module(rl_module_spec=RLModuleSpec(
            module_class=MaskedMultiDiscreteModule,
            model_config={"hidden": list(cfg.net_arch), "activation": cfg.activation},
        ))
        .callbacks(ClusterMetricsRLlibCallback)
        .debugging(seed=cfg.seed)
    )


def train_rllib(args: argparse.Namespace, ray_init: bool = True) -> int:
    """``train.py --backend rllib``: resolve the config as the SB3 path does, train, checkpoint, compare.

    :param args: train.py's parsed arguments (``env``, ``config``, ``quick``, ``overrides``, ``seed``,
        ``no_compare``); ``--resume`` is not supported here.
    :param ray_init: start a local Ray (``ray.init``) when none is running.
    """
    import ray
    from torch.utils.tensorboard import SummaryWriter

    start = time.perf_counter()
    if getattr(args, "resume", None):
        print("train.py: error: --resume is not supported with --backend rllib", file=sys.stderr)
        return 2
    try:
        overrides, rllib = split_overrides(args.overrides or [])
        cfg = resolve_config(args.env, args.config, args.quick, overrides, args.seed)
    except (TrainConfigError, FileNotFoundError) as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 2
    run_dir = new_run_dir(cfg)
    atomic_write_text(run_dir / CONFIG_FILE, cfg.to_yaml())
    if ray_init and not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=bool(cfg.verbose), configure_logging=False)
    ppo = build_ppo_config(cfg, rllib.get("num_env_runners"), rllib.get("train_batch_size"),
                           rllib.get("minibatch_size"), rllib.get("num_envs_per_env_runner", 1))
    iterations = rllib.get("iterations") or max(1, math.ceil(cfg.total_timesteps / ppo.train_batch_size_per_learner))
    atomic_write_text(run_dir / "rllib.json", json.dumps({
        "num_env_runners": ppo.num_env_runners, "num_envs_per_env_runner": ppo.num_envs_per_env_runner,
        "train_batch_size": ppo.train_batch_size_per_learner, "minibatch_size": ppo.minibatch_size,
        "iterations": iterations}, indent=2) + "\n")
    print(f"run {run_dir}  env {cfg.env_id}  algo rllib-ppo  {ppo.num_env_runners} env runners  "
          f"batch {ppo.train_batch_size_per_learner}  iterations {iterations}")

    writer = SummaryWriter(str(run_dir))
    writer.add_text("config/yaml", "```yaml\n" + cfg.to_yaml() + "```", 0)
    writer.add_text("config/rllib", "```json\n" + (run_dir / "rllib.json").read_text() + "```", 0)
    algo = ppo.build_algo()
    try:
        for i in range(iterations):
            result = algo.train()
            step = int(result.get("num_env_steps_sampled_lifetime", 0)
                       or result.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0) or i + 1)
            for key, value in _scalars(result).items():
                if "/" in key and not key.startswith(("config", "perf", "timers/")):
                    writer.add_scalar(f"rllib/{key}", value, step)
            custom = custom_metrics(result)
            for key, value in custom.items():
                writer.add_scalar(key, value, step)
            writer.flush()
            ret = result.get("env_runners", {}).get("episode_return_mean")
            print(f"iter {i + 1}/{iterations}  steps {step}  return {ret if ret is not None else float('nan'):.2f}  "
                  f"jct {custom.get('custom/jct_mean_s', float('nan')):.0f} s")
        checkpoint = _save_checkpoint(algo, run_dir / CHECKPOINT_DIR)
    finally:
        algo.stop()
        writer.close()
    train_s = time.perf_counter() - start
    print(f"trained {iterations} iterations in {train_s:.0f} s; checkpoint {checkpoint}")

    if not args.no_compare:
        compare_checkpoint(run_dir, cfg)
    print(f"\nsaved {run_dir / CHECKPOINT_DIR}; total {time.perf_counter() - start:.0f} s")
    print(f"lyra-gym compare --policies lyra,rllib:{run_dir}")
    print(f"tensorboard --logdir {cfg.runs_dir}")
    return 0


# ---------------------------------------------------------------------- scheduler
def compare_checkpoint(run_dir: Path, cfg: TrainConfig) -> dict[str, list[dict[str, Any]]]:
    """Run the checkpoint in ``run_dir`` (as a scheduler) and lyra on ``cfg.final_windows`` held-out
    test windows, print the table and write ``compare.json``: the rows of :func:`lyra_agents.evaluate.
    recorded`, each with the env id and the lyra_gym version and commit, as train.py's SB3 runs."""
    from lyra_agents.evaluate import comparison_table, evaluate_scheduler, held_out_windows, recorded
    from lyra_agents.vec_envs import make_eval_env

    scheduler = load_rllib_scheduler(run_dir, name="policy")
    env = make_eval_env(cfg)
    windows = held_out_windows(env, cfg.final_windows)
    results = {"policy": evaluate_scheduler(scheduler, env, windows, label="policy"),
               "lyra": evaluate_scheduler("lyra", env, windows, label="lyra")}
    print(f"\nmean JCT (s) on {len(windows)} held-out test windows, same seeds "
          f"(policy = the RLlib module through the engine as a scheduler):")
    print(comparison_table(results))
    rows = recorded(results, cfg.env_id)
    atomic_write_text(run_dir / "compare.json", json.dumps(rows, indent=2) + "\n")
    return rows


def _save_checkpoint(algo: Any, folder: Path) -> str:
    """RLlib's checkpoint and the module's plain weights written into a hidden sibling folder, renamed
    to ``folder`` once both are complete (an interrupted or failed save leaves no checkpoint, never
    half of one); returns the checkpoint's path."""
    stage = folder.parent / f".{folder.name}{TMP_MARK}{os.getpid()}"
    try:
        algo.save_to_path(str(stage.resolve()))
        save_module_weights(algo.learner_group.get_weights([MODULE_ID])[MODULE_ID], stage / WEIGHTS_FILE)
        os.rename(stage, folder)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return str(folder.resolve())


def find_rllib_checkpoint(path: str | os.PathLike) -> tuple[Path, Path]:
    """(module directory, config.yaml) of a run directory, its ``checkpoint/``, or the module directory."""
    path = Path(path).resolve()
    candidates = [path / CHECKPOINT_DIR / MODULE_SUBPATH, path / MODULE_SUBPATH, path]
    module_dir = next((c for c in candidates if (c / "module_state").exists()
                       or any(c.glob("module_state*"))), None)
    if module_dir is None:
        raise FileNotFoundError(f"{path}: no RLlib module checkpoint (give a run directory, its "
                                f"{CHECKPOINT_DIR}/, or {CHECKPOINT_DIR}/{MODULE_SUBPATH})")
    for folder in (module_dir, *module_dir.parents):
        if (folder / CONFIG_FILE).is_file():
            return module_dir, folder / CONFIG_FILE
        if folder == path.parent:
            break
    raise FileNotFoundError(f"{path}: no {CONFIG_FILE} in the run directory (the run's resolved config)")


class RllibPolicyScheduler(GuidedAgentScheduler):
    """An RLlib :class:`MaskedMultiDiscreteModule` run through the engine as a scheduler: the
    steps of :class:`lyra_agents.policy_scheduler.GuidedAgentScheduler`, with the module's masked
    logits, argmax per dimension (deterministic) or a sample from ``seed``'s generator."""

    name = "rllib"

    def __init__(self, module: Any, config: TrainConfig, deterministic: bool = True, name: str | None = None,
                 seed: int = 0) -> None:
        super().__init__(config, deterministic, name)
        self.module = module
        self.module.eval()
        self._check_action_space(module.action_space, "module")
        self.splits = [int(n) for n in self.codec.nvec]
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        batch = {Columns.OBS: {
            "observations": torch.as_tensor(np.asarray(obs, dtype=np.float32)[None]),
            "action_mask": torch.as_tensor(np.asarray(masks, dtype=np.float32)[None]),
        }}
        with torch.no_grad():
            logits = self.module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS][0]
        action = []
        for part in torch.split(logits, self.splits):
            if self.deterministic:
                action.append(int(torch.argmax(part)))
            else:
                p = torch.softmax(part.double(), 0).numpy()
                action.append(int(self.rng.choice(len(p), p=p / p.sum())))
        return np.asarray(action, dtype=np.int64)


def save_module_weights(state: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """A module state dict (tensors or arrays) as a plain ``.npz`` (no objects)."""
    path = Path(path)
    arrays = {key: (value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value))
              for key, value in state.items()}
    bad = [key for key, value in arrays.items() if value.dtype == object]
    if bad:
        raise ValueError(f"module state entries {bad} are not plain arrays")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        # ignore: numpy's stub types savez's **kwds as if one could be its allow_pickle flag
        np.savez(fh, **arrays)  # type: ignore[arg-type]
    return path


def build_module(config: TrainConfig) -> MaskedMultiDiscreteModule:
    """A fresh :class:`MaskedMultiDiscreteModule` on ``config``'s env spaces (as
    :class:`~lyra_gym.envs.ActionMaskObservation` presents them) and network settings."""
    obs_space, space = model_spaces(config)
    act_space = cast(gym.spaces.MultiDiscrete, space)  # RLlib trains the MultiDiscrete envs only
    mask = gym.spaces.Box(0.0, 1.0, (int(np.sum(act_space.nvec)),), dtype=np.float32)
    return MaskedMultiDiscreteModule(
        observation_space=gym.spaces.Dict({"observations": obs_space, "action_mask": mask}),
        action_space=act_space, model_config={"hidden": list(config.net_arch), "activation": config.activation},
    )


def load_module_weights(config: TrainConfig, path: str | os.PathLike) -> MaskedMultiDiscreteModule:
    """:func:`build_module` with the weights of a ``module_weights.npz`` (:func:`lyra_agents.model_files.read_npz`:
    ``allow_pickle=False``, sizes limited; strict). Errors name the file (:class:`ModelFileError`)."""
    module = build_module(config)
    try:
        state = {key: torch.as_tensor(value) for key, value in read_npz(path).items()}
        module.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError) as err:
        raise ModelFileError(f"{path}: does not fit the module of the run's config "
                             f"({' '.join(str(err).split())[:300]})") from None
    return module


def weights_file(module_dir: Path) -> Path:
    """``checkpoint/module_weights.npz`` of a module directory ``checkpoint/learner_group/.../default_policy``."""
    return module_dir.parents[len(MODULE_SUBPATH.parts) - 1] / WEIGHTS_FILE


def load_rllib_scheduler(path: str | os.PathLike, deterministic: bool = True,
                         trust_model_files: bool | None = None, **params: Any) -> RllibPolicyScheduler:
    """The ``rllib:PATH`` loader (entry-point group ``lyra_gym.scheduler_loaders``).

    :param path: a run directory, its ``checkpoint/`` or the module directory under it;
        the run's ``config.yaml`` is found in the run directory. ``PATH?trust=1`` trusts the files.
    :param deterministic: argmax per dimension (default True).
    :param trust_model_files: load with ``RLModule.from_checkpoint`` (unpickles RLlib's checkpoint
        files: only for files you trust). Default: ``?trust=`` in the path, else
        ``LYRA_GYM_TRUST_MODEL_FILES``, else False: the module is rebuilt from ``config.yaml`` and
        ``checkpoint/module_weights.npz`` is loaded (nothing unpickled).
    :param params: ``name=`` for the results (default ``rllib:PATH``).
    """
    unknown = set(params) - {"name"}
    if unknown:
        raise TypeError(f"load_rllib_scheduler: unknown parameter(s) {', '.join(sorted(unknown))}")
    name = params.get("name", f"rllib:{path}")
    path, in_path = split_trust_option(path)
    trust = trust_requested(trust_model_files if trust_model_files is not None else in_path)
    module_dir, config_file = find_rllib_checkpoint(path)
    config = load_run_config(config_file)
    weights = weights_file(module_dir)
    if trust:
        from ray.rllib.core.rl_module.rl_module import RLModule

        warn_trusted(module_dir)
        try:
            module = cast(TorchRLModule, RLModule.from_checkpoint(str(module_dir)))  # saved by a torch run
        except Exception as err:  # RLlib's loader on a bad checkpoint: any error
            raise ModelFileError(f"{module_dir}: cannot be loaded ({type(err).__name__}: "
                                 f"{' '.join(str(err).split())[:300]})") from None
    elif weights.is_file():
        module = load_module_weights(config, weights)
    else:
        raise UntrustedModelFileError(
            f"{module_dir}: the module's weights exist only in RLlib's pickled checkpoint, which is not loaded "
            f"by default (a crafted file can run code); if you trust it, convert it once with "
            f"`python -m lyra_agents.rllib_backend convert {path}` or load it with rllib:PATH?trust=1 / "
            f"LYRA_GYM_TRUST_MODEL_FILES=1")
    try:
        return RllibPolicyScheduler(module, config, deterministic, name=name)
    except ValueError as err:  # an action space that does not match the config (a trusted module)
        raise ModelFileError(f"{module_dir}: {err}") from None


def check_rllib_argument(argument: str, **params: Any) -> None:
    """``load_rllib_scheduler.check``: open and validate ``rllib:ARGUMENT`` before any run, exactly as
    the run will load it; raises a one-line error naming the file."""
    load_rllib_scheduler(argument, **params)


load_rllib_scheduler.check = check_rllib_argument  # type: ignore[attr-defined]


def convert_checkpoint(path: str | os.PathLike) -> Path:
    """Write ``checkpoint/module_weights.npz`` of an older run from its RLlib checkpoint (unpickles
    it: only for files you trust). Returns the ``.npz`` path."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    module_dir, _ = find_rllib_checkpoint(path)
    warn_trusted(module_dir)
    module = cast(TorchRLModule, RLModule.from_checkpoint(str(module_dir)))  # saved by a torch run
    return save_module_weights(module.state_dict(), weights_file(module_dir))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lyra_agents.rllib_backend convert RUN``: see :func:`convert_checkpoint`."""
    from lyra_agents.convert_cli import convert_main

    return convert_main("python -m lyra_agents.rllib_backend",
                        "write checkpoint/module_weights.npz from a trusted RLlib checkpoint "
                        "(unpickles it: only for files you trust)",
                        "run directory, its checkpoint/, or the module directory", convert_checkpoint, argv)


if __name__ == "__main__":
    sys.exit(main())
