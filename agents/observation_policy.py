"""A hand-written observation -> action policy as a scheduler: ``policy:MODULE:FACTORY`` in any policy list.

``policy:my_pkg.policies:make`` imports ``my_pkg.policies`` (or ``policy:path/to/file.py:make``
runs that file, :mod:`lyra_gym.sim.import_spec`), calls ``make(**params)`` with the policy's
parameters (``--policy-param policy:my_pkg.policies:make.KEY=VALUE``) and runs what it returns
as a trained model is run (:mod:`lyra_agents.policy_scheduler`): the env's observation and
action masks at every decision point, the policy's action decoded by the env's own rules. What
the factory returns is one of

- a callable ``policy(obs)`` -> action, or ``policy(obs, action_masks)`` (masks passed when it
  has a parameter ``action_masks``);
- an object with ``predict(obs, ...)`` -> ``(action, state)``, as SB3 models answer; it is given
  ``action_masks=`` and ``deterministic=True`` when its signature names them.

The env the policy acts in is the returned object's ``env_id`` attribute (default
``LyraGym/Alloc-v1``), with the layout keywords of ``gymnasium.make`` in an optional ``env_kwargs``
mapping (:data:`LAYOUT_KEYS`; defaults: the env's). Observations are the env's raw ones (no
normalisation). The factory is called once per simulation, so a policy may keep state for a run.
See ``docs/writing-a-policy.md``.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import numpy as np
from gymnasium import spaces

from lyra_agents.config import TrainConfig
from lyra_agents.policy_scheduler import AgentScheduler, scheduler_class
from lyra_agents.spaces import model_spaces
from lyra_gym.envs import ALLOC_ENV_ID
from lyra_gym.errors import LyraGymError
from lyra_gym.sim.import_spec import SchedulerSpecError, load_object
from lyra_gym.sim.scheduler import Scheduler

PREFIX = "policy"
DEFAULT_ENV_ID = ALLOC_ENV_ID
#: ``env_kwargs`` keys a policy may set: the ones that shape observations and actions.
LAYOUT_KEYS = ("num_job_slots", "num_server_slots", "borrow_levels", "worker_levels", "heuristic")


class ObservationPolicy:
    """A researcher's policy in the shape :class:`~lyra_agents.policy_scheduler.PolicyScheduler`
    asks of a model: ``observation_space``, ``action_space`` (those of ``config``'s env) and
    ``predict(obs, deterministic, action_masks) -> (action, None)``, the action checked against
    the action space (:class:`SchedulerSpecError` naming ``spec`` when it does not fit)."""

    def __init__(self, policy: Any, config: TrainConfig, spec: str) -> None:
        self.policy, self.spec = policy, spec
        self.observation_space, self.action_space = model_spaces(config)
        predict = getattr(policy, "predict", None)
        self._returns_state = callable(predict)
        self._call: Callable[..., Any] = predict if callable(predict) else policy
        accepted = _keywords(self._call)
        self._masks = "action_masks" in accepted
        self._deterministic = "deterministic" in accepted

    def predict(self, observation: np.ndarray, deterministic: bool = True,
                action_masks: np.ndarray | None = None) -> tuple[np.ndarray, None]:
        kwargs: dict[str, Any] = {}
        if self._masks:
            kwargs["action_masks"] = action_masks
        if self._deterministic:
            kwargs["deterministic"] = deterministic
        answer = self._call(observation, **kwargs)
        if self._returns_state:
            if not isinstance(answer, tuple) or len(answer) != 2:
                raise SchedulerSpecError(f"{self.spec!r}: predict returned {_shown(answer)}; expected "
                                         f"(action, state), as SB3's predict does")
            answer = answer[0]
        return self._checked(answer), None

    def _checked(self, action: Any) -> np.ndarray:
        value = np.asarray(action)
        shape = self.action_space.shape
        fits = value.dtype.kind in "iu" and (value.shape == shape or (shape == () and value.shape == (1,)))
        if not fits:
            want = ("an integer" if isinstance(self.action_space, spaces.Discrete)
                    else f"integers of shape {shape}")
            raise SchedulerSpecError(f"{self.spec!r}: the policy returned {_shown(action)}; the action space "
                                     f"{self.action_space} wants {want}")
        return value


def _keywords(function: Callable[..., Any]) -> set[str]:
    """Names ``function`` takes by keyword (every name when it takes ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the observation alone
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return {"action_masks", "deterministic"}
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _shown(value: Any) -> str:
    """``value`` in an error: its repr when short, else its type (``a Guidance``)."""
    text = repr(value)
    return text if len(text) <= 40 and "\n" not in text else f"a {type(value).__name__}"


def policy_config(policy: Any, spec: str) -> TrainConfig:
    """The env ``policy`` acts in, as a :class:`TrainConfig` (``env_id``, ``env_kwargs`` attributes)."""
    env_id = getattr(policy, "env_id", DEFAULT_ENV_ID)
    layout = getattr(policy, "env_kwargs", None) or {}
    if not isinstance(env_id, str) or not isinstance(layout, Mapping):
        raise SchedulerSpecError(f"{spec!r}: env_id must be a string and env_kwargs a mapping, got "
                                 f"{_shown(env_id)} and {_shown(layout)}")
    unknown = sorted(set(layout) - set(LAYOUT_KEYS))
    if unknown:
        raise SchedulerSpecError(f"{spec!r}: env_kwargs {', '.join(map(repr, unknown))} not allowed "
                                 f"(a policy sets only {', '.join(LAYOUT_KEYS)})")
    try:
        return TrainConfig().updated({"env_id": env_id, **layout}, source=f"{spec!r}")
    except LyraGymError as err:
        raise SchedulerSpecError(str(err)) from None


def load_observation_policy(argument: str, **params: Any) -> AgentScheduler:
    """The ``policy:MODULE:FACTORY`` loader (entry-point group ``lyra_gym.scheduler_loaders``):
    ``FACTORY(**params)`` run as a scheduler in its env (see the module docstring). One-line
    :class:`SchedulerSpecError` naming the spec for a module that does not import, a missing
    attribute, or a factory that returns no policy; a ``TypeError`` for a parameter it refuses."""
    spec = f"{PREFIX}:{argument}"
    factory = load_object(argument, shown=spec)
    if not callable(factory):
        raise SchedulerSpecError(f"{spec!r}: {type(factory).__name__} object is not callable (name a factory "
                                 f"that returns the policy)")
    policy = factory(**params)
    if isinstance(policy, Scheduler):
        raise SchedulerSpecError(f"{spec!r}: returned a Scheduler (plan level); name it {argument!r}, "
                                 f"without the {PREFIX}: prefix")
    if not callable(policy) and not callable(getattr(policy, "predict", None)):
        raise SchedulerSpecError(f"{spec!r}: returned {_shown(policy)}; expected a callable obs -> action or "
                                 f"an object with predict(obs, ...) -> (action, state)")
    config = policy_config(policy, spec)
    model = ObservationPolicy(policy, config, spec)
    return scheduler_class(config)(model, config, None, True, name=spec)


def check_observation_policy(argument: str, **params: Any) -> None:
    """``load_observation_policy.check``: what the comparison harness runs before the first
    simulation (the import, the factory and its result checked, as the run will build them)."""
    load_observation_policy(argument, **params)


load_observation_policy.check = check_observation_policy  # type: ignore[attr-defined]
