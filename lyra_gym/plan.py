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
    - ``suspend``: ids of jobs this Plan stops that are suspended in memory
      (Gandiva-style time slicing) rather than checkpointed: their next start
      costs ``overheads.resume_s`` on the same servers, ``overheads.migrate_s``
      (a migration) on any others, instead of the restart overhead.
    - ``batch_sizes``: job id -> global batch (samples per step, a number >= 1)
      for jobs in the system, under ``scaling: adaptive`` only
      (:mod:`lyra_gym.scaling`; Pollux's batch-size adaptation). A job keeps
      its batch until a Plan changes it; changing it costs no overhead.
    """

    allocations: dict[str, Mapping[int, int]] = field(default_factory=dict)
    borrow: tuple[int, ...] = ()
    give_back: tuple[int, ...] = ()
    suspend: tuple[str, ...] = ()
    batch_sizes: dict[str, float] = field(default_factory=dict)


class FrozenAllocation(dict):
    """An allocation {server id: GPUs} that cannot be changed in place (the engine's own
    allocations; schedulers replace them in a Plan, never mutate them). Pickles."""

    __slots__ = ()

    def _immutable(self, *args, **kwargs):
        raise TypeError("an engine allocation is read-only: put a new dict in the Plan instead")

    __setitem__ = __delitem__ = pop = popitem = clear = update = setdefault = __ior__ = _immutable

    def __reduce__(self):
        return (FrozenAllocation, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))


class PlanError(ValueError):
    """An invalid Plan; ``rule`` names the first violated rule. Nothing was applied."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"invalid plan [{rule}]: {message}")
        self.rule = rule


class TrackedAllocations(dict):
    """The ``allocations`` of ``ClusterView.current_plan()``: a dict that records every job id
    written or removed, so the engine validates only those (the rest are known unchanged).

    ``token`` ties it to the engine state it was copied from; a stale or copied
    dict loses the shortcut and is checked in full.
    """

    __slots__ = ("touched", "token")

    def __init__(self, base: Mapping[str, Mapping[int, int]], token: object) -> None:
        super().__init__(base)
        self.touched: dict[str, None] = {}  # insertion-ordered set
        self.token = token

    def __setitem__(self, key, value) -> None:
        self.touched[key] = None
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        self.touched[key] = None
        super().__delitem__(key)

    def pop(self, key, *default):
        self.touched[key] = None
        return super().pop(key, *default)

    def popitem(self):
        key, value = super().popitem()
        self.touched[key] = None
        return key, value

    def clear(self) -> None:
        self.touched.update(dict.fromkeys(self))
        super().clear()

    def update(self, *args, **kwargs) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def __ior__(self, other):
        self.update(other)
        return self

    def __reduce__(self):  # a copy elsewhere (pickle, another process) is checked in full
        return (dict, (dict(self),))

    def __copy__(self) -> dict:
        return dict(self)
