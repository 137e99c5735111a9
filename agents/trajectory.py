"""One episode of a training env as :mod:`lyra_agents.masked_ppo` and :mod:`lyra_agents.vine`
record it, and the two env calls both make (the env's expert action, its masks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

RESET_SEED_STRIDE = 1000  # reset seed of slot i at update u: seed + 1000 * u + i


def expert_action(env: gym.Env) -> np.ndarray:
    return np.asarray(env.get_wrapper_attr("expert_action")())


def action_masks(env: gym.Env) -> np.ndarray:
    return np.asarray(env.unwrapped.action_masks(), dtype=bool)  # type: ignore[attr-defined]


@dataclass
class Trajectory:
    """One member's episode: per step the normalised observation, masks, action, its
    log-probability, the decision time (s) and the reward; ``end_s`` the time after the last step."""

    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    experts: list[np.ndarray] = field(default_factory=list)  # the expert's action per step (vine, expert_coef > 0)
    end_s: float = 0.0
    metrics: dict[str, Any] | None = None

    def returns_to_go(self) -> np.ndarray:
        """Undiscounted (gamma = 1) sums of the rewards from each step to the end."""
        return np.cumsum(np.asarray(self.rewards, dtype=np.float64)[::-1])[::-1]
