"""A scheduler's decision: the desired allocation of every job, and loaning."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping


@dataclass
class Plan:
    """What a scheduler wants at one decision point.

    - ``allocations``: job id -> {server id: GPUs on that server}. A job in the
      system but absent here does not run (a running one is preempted).
      ``ClusterView.current_plan()`` starts from the current state.
    - ``borrow``: inference server ids to take on loan now; they may be used in
      ``allocations`` of the same Plan.
    - ``give_back``: loaned server ids to return now (answers reclaim requests);
      no job may keep GPUs on them.
    """

    allocations: dict[str, Mapping[int, int]] = field(default_factory=dict)
    borrow: tuple[int, ...] = ()
    give_back: tuple[int, ...] = ()


class PlanError(ValueError):
    """An invalid Plan; ``rule`` names the first violated rule. Nothing was applied."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"invalid plan [{rule}]: {message}")
        self.rule = rule
