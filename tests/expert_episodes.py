"""Shared helper of the rule-expert tests: an episode played by an env's ``expert_action()``,
checked step by step against a plain reading of the observation."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from lyra_agents.trajectory import expert_action
from lyra_gym.envs.levers import PREEMPT


def assert_expert_is_plain(env: Any, plain: Callable[[Any], int | None]) -> None:
    """Play one episode of ``env`` (an :class:`~lyra_agents.experts.ExpertRule`, reset already) by its
    expert; at every step its action must be the guide's neutral one with PREEMPT on the slot
    ``plain(env)`` names (None: no preemption). The expert must preempt at some steps, not all."""
    preempted = steps = 0
    while True:
        action = expert_action(env)
        expected = env.unwrapped.codec.neutral(env.unwrapped.slots)
        slot = plain(env)
        if slot is not None:
            expected[slot] = PREEMPT
        np.testing.assert_array_equal(action, expected)
        preempted += slot is not None
        steps += 1
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    assert 0 < preempted < steps  # it preempts on this overloaded window, and not at every step
