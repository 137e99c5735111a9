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
    """``{"observations": obs, "action_mask": env.action_masks()}`` (mask as float32 0/1): one entry
    per choice of a ``MultiDiscrete`` action (the guided envs) or of a ``Discrete`` one (Alloc-v1)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        action_space = env.action_space
        if isinstance(action_space, spaces.Discrete):
            size = int(action_space.n)
        elif isinstance(action_space, spaces.MultiDiscrete):
            size = int(np.sum(action_space.nvec))
        else:
            raise TypeError(f"ActionMaskObservation: a Discrete or MultiDiscrete action space expected, "
                            f"got {type(action_space).__name__}")
        self.observation_space = spaces.Dict({
            "observations": env.observation_space,
            "action_mask": spaces.Box(0.0, 1.0, (size,), dtype=np.float32),
        })

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        mask = cast(MaskedEnv, self.env.unwrapped).action_masks().astype(np.float32)
        return {"observations": observation, "action_mask": mask}
