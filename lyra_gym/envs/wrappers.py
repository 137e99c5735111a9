"""Dict observations with the action mask, as RLlib's masking modules expect."""

from __future__ import annotations

from typing import Protocol, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class MaskedEnv(Protocol):
    """An environment that says which actions are valid (the LyraGym envs, sb3-contrib's protocol)."""

    def action_masks(self) -> np.ndarray: ...


class ActionMaskObservation(gym.ObservationWrapper):
    """``{"observations": obs, "action_mask": env.action_masks()}`` (mask as float32 0/1)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        size = int(np.sum(cast(spaces.MultiDiscrete, env.action_space).nvec))  # a MultiDiscrete env's
        self.observation_space = spaces.Dict({
            "observations": env.observation_space,
            "action_mask": spaces.Box(0.0, 1.0, (size,), dtype=np.float32),
        })

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        mask = cast(MaskedEnv, self.env.unwrapped).action_masks().astype(np.float32)
        return {"observations": observation, "action_mask": mask}
