"""A trained model as a :class:`~lyra_gym.sim.scheduler.Scheduler`: ``model:PATH`` in any policy list.

At every decision point :class:`PolicyScheduler` does what the environment does
around an agent, in the same order, with the same public pieces:

1. job slots and loaned-server slots (``job_slots``, ``server_slots``), and the
   observation (``ObservationBuilder``);
2. the action masks of the env the model was trained on;
3. the saved ``VecNormalize`` observation statistics (``vecnormalize.npz``);
4. ``model.predict`` (with the masks when the model takes them, deterministic by default);
5. decoding into a :class:`~lyra_gym.sim.scheduler.Guidance` (a masked value becomes the
   neutral one), and the guided heuristic's plan ``decide_guided(view, guidance)``.

So ``simulate(window_jobs, PolicyScheduler(...), env.sim_config, seed=window.seed)``
reproduces the env's episode on that window step for step (tested in
``tests/agents/test_policy_building_blocks.py``), and a trained agent enters ``lyra-gym compare`` beside the
heuristics, measured by the same engine.

Steps 2 and 5 use the env's own codec: :class:`~lyra_gym.envs.actions.ActionCodec`, or for a ``-v2``
id :class:`~lyra_gym.envs.levers.LeverCodec` (its slots, masks and auto-commit: ``lever_point``).

Inference cost. A decision asks the network about one observation (batch of 1), where
torch's intra-op threads only add synchronisation: on a loaded 2-core machine two threads
made each ``Linear`` take milliseconds instead of microseconds (50x slower whole runs).
So every decision runs under :func:`inference_threads` (one thread, and the run's own
``torch_validate_args``; the caller's settings restored after), and an SB3 model is asked
through :class:`_SB3Predictor`, which does what ``model.predict`` does (the same tensors, the
same ``policy._predict``, so the same actions) without re-setting the training mode of every
submodule on every call.

Loading (:func:`load_policy_scheduler`) unpickles nothing unless trusted
(``model:PATH?trust=1`` or ``LYRA_GYM_TRUST_MODEL_FILES=1``); see ``docs/trust.md``.
Its ``check`` (:func:`check_policy_argument`) is what the comparison harness runs for every
``model:`` policy before the first simulation.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import replace
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from gymnasium import spaces

from lyra_gym.sim import scheduler as registry
from lyra_gym.envs import ALLOC_ENV_ID
from lyra_gym.envs.levers import LeverCodec, lever_point
from lyra_gym.envs.alloc import AllocLayout, AllocObserver, SkippedTick, open_decision
from lyra_gym.envs.learner_extras import LearnerExtras, extras_size
from lyra_gym.envs.observation import ObservationBuilder, job_slots, server_slots
from lyra_gym.envs.windows import Window
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Guidance, Scheduler
from lyra_gym.sim.view import ClusterView, JobView

from lyra_agents.config import TrainConfig
from lyra_agents.artifacts import find_artifacts
from lyra_agents.model_build import supports_action_masks
from lyra_agents.model_files import ModelFileError, load_run_config, trust_requested, warn_trusted
from lyra_agents.model_loading import load_model
from lyra_agents.normalizer_stats import load_normalizer
from lyra_agents.spaces import action_codec, obs_version


#: torch intra-op threads while an agent decides (a batch of one observation).
INFERENCE_THREADS = 1


@contextlib.contextmanager
def inference_threads(threads: int = INFERENCE_THREADS, validate_args: bool | None = None) -> Iterator[None]:
    """Run the block with torch's intra-op threads set to ``threads`` and, unless None, torch
    distributions' argument checks set to ``validate_args`` (a run's ``torch_validate_args``, as
    :func:`lyra_agents.model_build.configure_torch` sets them for training); the caller's settings are
    restored afterwards. Neither changes a result: the checks only raise on invalid parameters."""
    before = torch.get_num_threads()
    checks = torch.distributions.Distribution._validate_args  # noqa: SLF001 -- torch has a setter, no getter
    if before != threads:
        torch.set_num_threads(threads)
    if validate_args is not None:
        torch.distributions.Distribution.set_default_validate_args(validate_args)
    try:
        yield
    finally:
        if before != threads:
            torch.set_num_threads(before)
        torch.distributions.Distribution.set_default_validate_args(checks)


def _own_predict(model: Any) -> bool:
    """Whether ``model.predict`` is SB3's own (model and policy, neither patched on the instance)
    for a ``Box`` observation and a discrete action, so :class:`_SB3Predictor` may stand in for
    it; any other ``predict`` is called as it is."""
    try:
        from stable_baselines3.common.base_class import BaseAlgorithm
        from stable_baselines3.common.policies import BasePolicy
    except ImportError:  # pragma: no cover - SB3 is a dependency of the agents
        return False
    policy = getattr(model, "policy", None)
    if not isinstance(model, BaseAlgorithm) or not isinstance(policy, BasePolicy):
        return False
    if any(name in vars(obj) for obj in (model, policy) for name in ("predict", "_predict")):
        return False
    if not isinstance(model.observation_space, spaces.Box) or isinstance(model.action_space, spaces.Box):
        return False
    owners = {_defining_class(type(obj), "predict").__module__.split(".")[0] for obj in (model, policy)}
    return owners <= {"stable_baselines3", "sb3_contrib"}


def _defining_class(cls: type, name: str) -> type:
    return next(klass for klass in cls.__mro__ if name in vars(klass))


class _SB3Predictor:
    """``model.predict(obs, deterministic=..., action_masks=...)[0]`` for one observation of an SB3
    model with a ``Box`` observation space and a discrete action space, as SB3 computes it
    (``np.array`` of the observation reshaped to a batch of one, ``torch.as_tensor`` on the
    policy's device, ``policy._predict`` under ``no_grad``), minus the per-call
    ``set_training_mode(False)`` walk over every submodule (done here only when the policy is
    in training mode) and the API-misuse checks."""

    def __init__(self, model: Any) -> None:
        self.model, self.policy = model, model.policy
        self.obs_shape = tuple(model.observation_space.shape)
        self.action_shape = tuple(model.action_space.shape)

    def __call__(self, obs: np.ndarray, deterministic: bool, **kwargs: Any) -> np.ndarray:
        policy = self.policy
        if policy.training:
            policy.set_training_mode(False)
        tensor = torch.as_tensor(np.array(obs).reshape((-1, *self.obs_shape)), device=policy.device)
        with torch.no_grad():
            # SB3's tensor-level predict (the public predict() converts from NumPy and back)
            actions = policy._predict(tensor, deterministic=deterministic, **kwargs)  # noqa: SLF001
        return actions.cpu().numpy().reshape((-1, *self.action_shape)).squeeze(axis=0)


class _Predicting:
    """The model's action for one observation (:meth:`_action`), through :class:`_SB3Predictor`
    when ``model.predict`` is SB3's own, else through ``model.predict`` itself (re-checked when
    ``model`` is replaced)."""

    model: Any
    deterministic: bool
    use_masks: bool
    _predictor: tuple[Any, _SB3Predictor | None] | None = None

    def _action(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        model = self.model
        kwargs = {"action_masks": masks} if self.use_masks else {}
        cached = self._predictor
        if cached is None or cached[0] is not model:
            cached = self._predictor = (model, _SB3Predictor(model) if _own_predict(model) else None)
        if cached[1] is None:
            return model.predict(obs, deterministic=self.deterministic, **kwargs)[0]
        return cached[1](obs, self.deterministic, **kwargs)


class AgentScheduler(Scheduler):
    """An agent run as a scheduler. ``handover_s``: before it (a warm-started window's start,
    :meth:`start_window`) the agent's own heuristic decides alone, as in the env's warm-up."""

    handover_s: float = -math.inf
    window: Window | None = None  # the episode's window (read by observation version 2), None: a whole trace
    heuristic: Scheduler
    config: TrainConfig

    @property
    def tick_interval(self) -> float | None:  # type: ignore[override]
        return self.heuristic.tick_interval

    def reset(self, rng: np.random.Generator) -> None:
        """A fresh guided heuristic on the run's generator (as the env does on reset)."""
        self.heuristic = registry.make(self.config.heuristic)
        self.heuristic.reset(rng)
        self.invalid_actions = 0

    def start_window(self, window: Window) -> None:
        """Hand over at ``window.start_s`` when the window is warm-started (else from the start)."""
        self.handover_s = window.start_s if window.warmup_s > 0 else -math.inf
        self.window = window

    def warming_up(self, view: ClusterView) -> bool:
        return view.now < self.handover_s


class GuidedAgentScheduler(AgentScheduler):
    """A trained agent as a scheduler: the env's slots, observation and masks, the agent's
    action (:meth:`act`, per framework), decoding into Guidance, and the guided heuristic's plan.

    :param config: the run's :class:`~lyra_agents.config.TrainConfig` (env id, K, M, B, heuristic).
    :param deterministic: take each dimension's most likely level (default True).
    :param name: the name in results.
    """

    def __init__(self, config: TrainConfig, deterministic: bool = True, name: str | None = None) -> None:
        self.config = config
        self.deterministic = deterministic
        if name is not None:
            self.name = name
        self.codec = action_codec(config)  # ActionCodec, or LeverCodec for a -v2 id
        self.levers = isinstance(self.codec, LeverCodec)
        self.builder = ObservationBuilder(config.num_job_slots, config.num_server_slots,
                                          version=obs_version(config.env_id))
        self.extras = LearnerExtras(config.num_job_slots) if config.observation_extras else None
        self.heuristic = registry.make(config.heuristic)
        self.invalid_actions = 0
        self._last: Guidance | None = None

    def _check_action_space(self, space: Any, what: str) -> None:
        nvec = getattr(space, "nvec", None)
        if nvec is None or not np.array_equal(np.asarray(nvec), self.codec.nvec):
            c = self.config
            raise ValueError(f"{what} action space {space} does not match {c.env_id} with "
                             f"K={c.num_job_slots}, M={c.num_server_slots}, B={c.borrow_levels}")

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self.builder = ObservationBuilder(self.config.num_job_slots, self.config.num_server_slots,
                                          version=obs_version(self.config.env_id))
        if self.extras is not None:
            self.extras.reset()
        self._last = None

    def observe(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray, list[JobView], list[int]]:
        """(observation, masks, job slots, server slots) exactly as the env builds them."""
        slots = job_slots(view, self.config.num_job_slots)
        server_ids = server_slots(view, self.config.num_server_slots)
        obs = self.builder.build(view, slots, server_ids, self.window)
        if self.extras is not None:  # learner extras (issue 26 item 4), as LearnerExtrasObservation
            obs = self.extras.extend(obs, view, slots)
        return obs, self.codec.masks(slots, server_ids), slots, server_ids

    def act(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """The agent's action for one raw observation."""
        raise NotImplementedError

    def guidance(self, view: ClusterView) -> Guidance:
        """The agent's guidance; at the heuristic's own ticks its last one stands (as in the env;
        a ``-v2`` preemption is not repeated there)."""
        if view.tick_only and self._last is not None:
            return self._last
        if self.levers:
            return self._lever_guidance(view)
        obs, masks, slots, server_ids = self.observe(view)
        guidance, invalid = self.codec.decode(self.act(obs, masks), masks, slots, server_ids)
        self.invalid_actions += invalid
        self._last = guidance
        return guidance

    def _lever_guidance(self, view: ClusterView) -> Guidance:
        """A ``-v2`` model's guidance as the env gives it: at a decision point with one valid value
        everywhere (auto-commit) the neutral action, the model not asked; else the model's."""
        point = lever_point(view, self.codec)
        slots, server_ids, masks = point.slots, point.server_ids, point.masks
        if point.single:
            action = self.codec.neutral(slots)
        else:
            obs = self.builder.build(view, slots, server_ids, self.window)
            if self.extras is not None:
                obs = self.extras.extend(obs, view, slots)
            action = self.act(obs, masks.copy())
        guidance, invalid = self.codec.decode(action, masks, slots, server_ids)
        self.invalid_actions += invalid
        self._last = replace(guidance, preempt=frozenset()) if guidance.preempt else guidance
        return guidance

    def decide(self, view: ClusterView) -> Plan:
        if self.warming_up(view):
            return self.heuristic.decide(view)
        with inference_threads(validate_args=self.config.torch_validate_args):
            guidance = self.guidance(view)
        return self.heuristic.decide_guided(view, guidance)


class PolicyScheduler(_Predicting, GuidedAgentScheduler):
    """Run a trained SB3 model through the engine as a scheduler.

    :param model: a trained ``MaskablePPO`` or ``PPO`` (any SB3 algorithm with ``predict``).
    :param config: the run's :class:`~lyra_agents.config.TrainConfig` (env id, K, M, B, heuristic).
    :param normalizer: the saved ``VecNormalize`` (its ``normalize_obs``), or None for raw observations.
    :param deterministic: take each dimension's most likely level (default True).
    :param name: the name in results (default ``"model"``).
    """

    name = "model"

    def __init__(self, model: Any, config: TrainConfig, normalizer: Any | None = None,
                 deterministic: bool = True, name: str | None = None) -> None:
        super().__init__(config, deterministic, name)
        self.model = model
        self.normalizer = normalizer
        self._check_action_space(model.action_space, "model")
        size = self.builder.size + (self.extras.size if self.extras is not None else 0)
        if model.observation_space.shape != (size,):
            raise ValueError(f"model observation shape {model.observation_space.shape} does not match "
                             f"K={config.num_job_slots}, M={config.num_server_slots} ({size})")
        self.use_masks = supports_action_masks(model)

    def act(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """The model's action for one raw observation."""
        if self.normalizer is not None:
            obs = self.normalizer.normalize_obs(obs)
        return np.asarray(self._action(obs, masks))


class AllocPolicyScheduler(_Predicting, AgentScheduler):
    """A model trained on ``LyraGym/Alloc-v1`` run as a scheduler: at each decision point the
    env's :class:`~lyra_gym.envs.alloc.AllocDecision` sub-actions are asked of the model until it
    commits, with the env's observation, masks and tick rule, so ``simulate`` reproduces the
    env's episode. Parameters as :class:`PolicyScheduler`."""

    name = "model"

    def __init__(self, model: Any, config: TrainConfig, normalizer: Any | None = None,
                 deterministic: bool = True, name: str | None = None) -> None:
        self.config, self.model, self.normalizer, self.deterministic = config, model, normalizer, deterministic
        if name is not None:
            self.name = name
        self.layout = AllocLayout(config.num_job_slots, config.num_server_slots, config.borrow_levels,
                                  config.worker_levels)
        self.observer = AllocObserver(config.num_job_slots, config.num_server_slots)
        self.extras = LearnerExtras(config.num_job_slots) if config.observation_extras else None
        size = self.observer.size + (extras_size(config.num_job_slots) if config.observation_extras else 0)
        n = getattr(model.action_space, "n", None)
        if n != self.layout.n or model.observation_space.shape != (size,):
            raise ValueError(f"model spaces {model.observation_space.shape} / {model.action_space} do not match "
                             f"{config.env_id} with K={config.num_job_slots}, M={config.num_server_slots}, "
                             f"B={config.borrow_levels}, L={config.worker_levels}")
        self.use_masks = supports_action_masks(model)
        self.heuristic = registry.make(config.heuristic)
        self.invalid_actions = 0
        self._last_borrow: float | None = None

    def reset(self, rng: np.random.Generator) -> None:
        super().reset(rng)
        self._last_borrow = None
        if self.extras is not None:
            self.extras.reset()

    def decide(self, view: ClusterView) -> Plan:
        if self.warming_up(view):
            return self.heuristic.decide(view)
        decision, _ = open_decision(view, self.heuristic, self.layout, self._last_borrow)
        if isinstance(decision, SkippedTick):  # the heuristic's no-op at its own tick
            return decision.proposal
        with inference_threads(validate_args=self.config.torch_validate_args):
            while True:
                obs, masks = self.observer.observe(view, decision), decision.masks()
                if self.extras is not None:  # learner extras (issue 26 item 4), as LearnerExtrasObservation
                    obs = self.extras.extend(obs, view, decision.slots)
                if self.normalizer is not None:
                    obs = self.normalizer.normalize_obs(obs)
                value = int(np.asarray(self._action(obs, masks)).reshape(-1)[0])
                if not 0 <= value < len(masks) or not masks[value]:
                    value = decision.neutral()
                    self.invalid_actions += 1
                if decision.step(value):
                    self._last_borrow = decision.borrow_fraction
                    assert decision.plan is not None  # step() True: the plan is committed
                    return decision.plan


def split_trust_option(path: str | os.PathLike) -> tuple[str, bool | None]:
    """``"PATH?trust=1"`` -> ``("PATH", True)``; a path without the option -> ``(PATH, None)``.
    A path that exists as written is never split (a ``?`` in a real file name). An empty path,
    or an option other than ``trust`` (``&``-separated), is a :class:`ModelFileError`."""
    text = os.fspath(path)
    base, sep, query = text.rpartition("?")
    if not sep or os.path.exists(text):
        base, query = text, ""
    if not base.strip():
        raise ModelFileError(f"{text!r}: empty path (give PATH to a trained run, optionally PATH?trust=1)")
    trust = None
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        if key.strip() != "trust":
            raise ModelFileError(f"{text}: unknown option {key.strip()!r} after '?' (the only one is trust=1)")
        value = value.strip().lower() if eq else "1"
        if value not in ("1", "0", "true", "false", "yes", "no"):
            raise ModelFileError(f"{text}: trust= takes 1 or 0, got {value!r}")
        trust = value in ("1", "true", "yes")
    return base, trust


def scheduler_class(config: TrainConfig) -> type[AllocPolicyScheduler] | type[PolicyScheduler]:
    """The scheduler that runs a model or policy of ``config``'s env: Alloc's sub-actions, or the
    guided envs' levels."""
    return AllocPolicyScheduler if config.env_id == ALLOC_ENV_ID else PolicyScheduler


def load_policy_scheduler(path: str | os.PathLike, deterministic: bool = True, device: str = "cpu",
                          trust_model_files: bool | None = None, **params: Any) -> AgentScheduler:
    """The ``model:PATH`` loader (entry-point group ``lyra_gym.scheduler_loaders``).

    :param path: a run directory, its ``model.zip``, or a checkpoint zip; the statistics
        (``vecnormalize .npz``) and ``config.yaml`` are found beside it
        (:func:`lyra_agents.artifacts.find_artifacts`). ``PATH?trust=1`` trusts the files (below).
    :param deterministic: most likely action per dimension (default True).
    :param device: torch device for inference (default ``cpu``).
    :param trust_model_files: load through SB3's pickle path (``Algorithm.load``, the ``.pkl``
        statistics): only for files you trust. Default: ``?trust=`` in the path, else the
        environment variable ``LYRA_GYM_TRUST_MODEL_FILES``, else False (nothing unpickled,
        see :func:`lyra_agents.model_loading.load_model`).
    :param params: ``name=`` for the results (default ``model:PATH``).
    """
    unknown = set(params) - {"name"}
    if unknown:
        raise TypeError(f"load_policy_scheduler: unknown parameter(s) {', '.join(sorted(unknown))}")
    name = params.get("name", f"model:{path}")
    path, in_path = split_trust_option(path)
    trust = trust_requested(trust_model_files if trust_model_files is not None else in_path)
    files = find_artifacts(path)
    config = load_run_config(files.config)
    if trust:
        warn_trusted(files.model)
    stats = files.normalizer_file(trust)
    if stats is None and config.normalize_obs:
        raise FileNotFoundError(f"{files.model}: the run normalised observations but its statistics "
                                f"(vecnormalize .npz) are missing beside the model")
    normalizer = load_normalizer(stats, trust=trust) if stats else None
    model = load_model(config, files.model, device=device, trust=trust)
    if normalizer is not None and np.shape(normalizer.obs_rms.mean) != model.observation_space.shape:
        raise ModelFileError(f"{stats}: statistics of observations of shape {np.shape(normalizer.obs_rms.mean)}, "
                             f"the model's are {model.observation_space.shape}")
    scheduler = scheduler_class(config)
    try:
        return scheduler(model, config, normalizer, deterministic, name=name)
    except ValueError as err:  # spaces that do not match the config (a trusted model)
        raise ModelFileError(f"{files.model}: {err}") from None


def check_policy_argument(argument: str, **params: Any) -> None:
    """``load_policy_scheduler.check``: open and validate ``model:ARGUMENT`` (with the policy's
    parameters) before any run, exactly as the run will load it; raises a one-line error naming
    the file (:class:`ModelFileError`, ``FileNotFoundError``, ...; ``TypeError`` for a bad parameter)."""
    load_policy_scheduler(argument, **params)


load_policy_scheduler.check = check_policy_argument  # type: ignore[attr-defined]
