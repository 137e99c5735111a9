"""The small-first rule as a scheduler: benchmark policy ``small-first`` (not learned).

``LyraGym/Cluster-v1``'s job levels set by :func:`lyra_agents.experts.small_first_action` at every
decision point (queued job slots: 4 for the quartile of fewest requested GPUs .. 1 for the most;
every other dimension neutral), decoded into guidance for lyra underneath as the env decodes an
agent's action: the default :class:`~lyra_agents.config.TrainConfig` (K, M, B, heuristic ``lyra``),
as the ``random`` benchmark policy. Found by the fixed-policy ablations of ``docs/benchmark.md``
(suite v1 ``history``: JCT / lyra IQM 0.808).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from lyra_agents.config import TrainConfig
from lyra_agents.experts import SMALL_FIRST, small_first_action
from lyra_agents.policy_scheduler import GuidedAgentScheduler
from lyra_gym.sim.view import ClusterView, JobView


class SmallFirstScheduler(GuidedAgentScheduler):
    """:func:`~lyra_agents.experts.small_first_action` on the job slots of the current decision point."""

    name = SMALL_FIRST

    def __init__(self) -> None:
        super().__init__(TrainConfig(), name=SMALL_FIRST)
        self._slots: list[JobView] = []

    def observe(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray, list[JobView], list[int]]:
        """As the env builds them; the job slots are kept for :meth:`act`."""
        obs, masks, slots, server_ids = super().observe(view)
        self._slots = slots
        return obs, masks, slots, server_ids

    def act(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """The rule's levels for the slots of the last :meth:`observe` (``obs`` and ``masks`` unused)."""
        return small_first_action(SimpleNamespace(codec=self.codec, slots=self._slots))


__all__ = ["SMALL_FIRST", "SmallFirstScheduler"]
