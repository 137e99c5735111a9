"""``info["final_metrics"]`` whichever way an episode ends, Gymnasium's ``TimeLimit`` included.

The environments put ``final_metrics`` (the keys of ``metrics.json``) in the info of the step
that ends an episode by their own rules (termination, or ``max_steps``). A ``TimeLimit`` wrapper
(``gymnasium.make(..., max_episode_steps=N)``) truncates outside the environment, so the
environment cannot know; :class:`FinalMetricsOnTruncation` adds them there. The ids' registration
applies it after ``TimeLimit`` when ``make`` adds one (:func:`after_time_limit`), and leaves the
stack as it was otherwise. The metrics cover the episode's jobs so far: partial when the step
says ``truncated`` (``jobs_unfinished`` then counts the window's jobs not finished, those not
yet submitted included).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.error import ResetNeeded as GymResetNeeded
from gymnasium.wrappers import TimeLimit


class ResetNeeded(GymResetNeeded, RuntimeError):
    """A call that needs an episode in progress: before the first ``reset()``, or a ``step()`` after
    the episode terminated or was truncated. Gymnasium's ``ResetNeeded``, and a ``RuntimeError``
    (what these calls raised before)."""


class FinalMetricsMixin:
    """Gives an environment with an ``episode`` the public :meth:`final_metrics`."""

    episode: Any

    def final_metrics(self) -> dict[str, Any]:
        """The current episode's metrics so far, in the keys of ``metrics.json`` (those of
        ``info["final_metrics"]``); computed now, the episode unchanged. ``RuntimeError`` before
        the first ``reset``."""
        if self.episode is None:
            raise ResetNeeded("final_metrics(): call reset() first")
        metrics: dict[str, Any] = self.episode.final_metrics()
        return metrics


class FinalMetricsOnTruncation(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds ``info["final_metrics"]`` (``env.unwrapped.final_metrics()``) to the step that ends an
    episode when the environment did not (a truncation by an inner wrapper, e.g. ``TimeLimit``);
    a ``step()`` after that end, before ``reset()``, raises :class:`ResetNeeded`."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._ended = False

    def reset(self, **kwargs: Any) -> Any:
        self._ended = False
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        if self._ended:
            raise ResetNeeded("step(): the episode is over (it terminated or was truncated); call reset()")
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self._ended = True
            if "final_metrics" not in info:
                info["final_metrics"] = self.env.unwrapped.final_metrics()  # type: ignore[attr-defined]
        return obs, reward, terminated, truncated, info


def has_time_limit(env: gym.Env) -> bool:
    """Whether ``env``'s wrapper stack holds a ``TimeLimit``."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, TimeLimit):
            return True
        env = env.env
    return False


def after_time_limit(env: gym.Env) -> gym.Env:
    """The registration's extra wrapper: :class:`FinalMetricsOnTruncation` around ``env`` when
    ``gymnasium.make`` put a ``TimeLimit`` on it, else ``env`` itself (no extra step cost)."""
    return FinalMetricsOnTruncation(env) if has_time_limit(env) else env


__all__ = ["FinalMetricsMixin", "FinalMetricsOnTruncation", "ResetNeeded", "after_time_limit",
           "has_time_limit"]
