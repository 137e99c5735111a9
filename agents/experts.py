"""Whose actions behaviour cloning imitates (``bc_expert``; :mod:`lyra_agents.imitation`).

- ``heuristic`` (default): the env's own ``expert_action()``, the guided heuristic's choice
  (the env's ``heuristic``: ``lyra``, ``lyra-backfill``, ``pollux``, ``pollux+loan``,
  ``tiresias`` or ``tiresias+loan``), which reproduces that heuristic exactly.
- ``small_first`` (envs with job levels: ``LyraGym/Cluster-v1``, ``LyraGym/Elastic-v1``): queued
  jobs get levels 4..1 by quartile of requested GPUs among the queued job slots, fewest GPUs
  first; every other dimension neutral (the heuristic's own). Found by fixed-policy ablations on
  suite v1's ``history`` scenario, where it alone gives JCT/lyra IQM 0.81 (``docs/benchmark.md``):
  under duration predictions lyra's shortest-first line lets large jobs pass small ones.

:class:`ExpertRule` is a wrapper whose ``expert_action()`` is the named rule: SB3's
``env_method("expert_action")`` finds it before the env's own, in a subprocess too.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from lyra_gym.model.jobs import JobState

GPU_SCALE = 64  # requested GPUs are compared as num_gpus / 64, the observation's scale (float32)


def small_first_action(env: Any) -> np.ndarray:
    """Neutral levels, except queued job slots: 4 (fewest requested GPUs quartile) .. 1 (most).

    ``env``: an unwrapped LyraGym env with job levels (its ``codec`` and current ``slots``)."""
    action = env.codec.neutral(env.slots)
    queued = [i for i, job in enumerate(env.slots) if job.state is JobState.QUEUED]
    if queued:
        gpus = np.array([env.slots[i].spec.num_gpus / GPU_SCALE for i in queued], dtype=np.float32)
        cuts = np.quantile(gpus, [0.25, 0.5, 0.75])
        for i, g in zip(queued, gpus):
            action[i] = 4 - int(np.searchsorted(cuts, g, side="right"))
    return action


def random_masked_action(rng: np.random.Generator, nvec: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """One value per dimension, uniform over that dimension's valid values in ``masks``."""
    action = np.empty(len(nvec), dtype=np.int64)
    start = 0
    for d, n in enumerate(np.asarray(nvec, dtype=int)):
        valid = np.flatnonzero(masks[start:start + n])
        action[d] = valid[rng.integers(len(valid))] if len(valid) else 0
        start += n
    return action


#: Rule name -> action of an unwrapped env (``heuristic`` is the env's own method, not listed).
RULES: dict[str, Callable[[Any], np.ndarray]] = {"small_first": small_first_action}
#: The small-first rule's policy name in ``python -m lyra_agents.benchmark`` (:mod:`lyra_agents.small_first`).
SMALL_FIRST = "small-first"
#: Every ``bc_expert`` value.
EXPERTS = ("heuristic", *RULES)
#: Rules that set job levels: only for envs whose actions have them.
NEEDS_JOB_LEVELS = frozenset({"small_first"})


class ExpertRule(gym.Wrapper):
    """``env`` with ``expert_action()`` given by the rule ``name`` of :data:`RULES`."""

    def __init__(self, env: gym.Env, name: str) -> None:
        super().__init__(env)
        if name not in RULES:
            raise ValueError(f"bc_expert: must be one of {', '.join(EXPERTS)}, got {name!r}")
        if name in NEEDS_JOB_LEVELS and not getattr(env.unwrapped, "controls_jobs", False):
            raise ValueError(f"bc_expert: {name!r} sets job levels; {env.spec.id if env.spec else env} has none "
                             "(use LyraGym/Cluster-v1 or LyraGym/Elastic-v1)")
        self.rule = name

    def expert_action(self) -> np.ndarray:
        return RULES[self.rule](self.env.unwrapped)


__all__ = ["EXPERTS", "SMALL_FIRST", "ExpertRule", "NEEDS_JOB_LEVELS", "RULES", "random_masked_action",
           "small_first_action"]
