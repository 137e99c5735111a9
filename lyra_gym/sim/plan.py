"""A scheduler's decision: the desired allocation of every job, and loaning."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from lyra_gym.model.jobs import FrozenAllocation as FrozenAllocation  # re-exported: plans hold the engine's allocations


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
      (:mod:`lyra_gym.model.scaling`; Pollux's batch-size adaptation). A job keeps
      its batch until a Plan changes it; changing it costs no overhead.

    Cost: the ``allocations`` of ``ClusterView.current_plan()`` are copied from the
    engine the first time they are read (O(running jobs)); a scheduler that only
    adds jobs to such a plan calls :meth:`assign`, which does not copy them, and a
    plan returned unread or changed only by :meth:`assign` is applied in O(its changes).
    """

    allocations: dict[str, Mapping[int, int]] = field(default_factory=dict)
    borrow: tuple[int, ...] = ()
    give_back: tuple[int, ...] = ()
    suspend: tuple[str, ...] = ()
    batch_sizes: dict[str, float] = field(default_factory=dict)
    if TYPE_CHECKING:  # the instance's own storage behind ``allocations`` (see ``current_plan``)
        _allocations: dict[str, Mapping[int, int]] | None = field(init=False, repr=False)
        _pending: PendingAllocations | None = field(init=False, repr=False)

    def assign(self, job_id: str, allocation: Mapping[int, int]) -> None:
        """``self.allocations[job_id] = allocation``, without copying the allocations of a
        current plan that were not read yet."""
        pending = self.__dict__.get("_pending")
        if pending is None:
            self.allocations[job_id] = allocation
        elif pending.writes is None:
            pending.writes = {job_id: allocation}
        else:
            pending.writes[job_id] = allocation

    def _unread(self) -> "PendingAllocations | None":
        """The pending allocations of a current plan whose ``allocations`` were never read."""
        return self.__dict__.get("_pending")

    def __getstate__(self) -> dict:  # pickle and copy: the allocations themselves
        self.allocations  # reads them: a pending plan becomes an ordinary one
        return dict(self.__dict__)


def _get_allocations(self: Plan) -> dict[str, Mapping[int, int]]:
    state = self.__dict__
    pending = state.get("_pending")
    if pending is not None:
        del state["_pending"]
        state["_allocations"] = pending.materialize()
    return state["_allocations"]


def _set_allocations(self: Plan, value: dict[str, Mapping[int, int]]) -> None:
    self.__dict__.pop("_pending", None)
    self.__dict__["_allocations"] = value


# the dataclass field ``allocations`` is stored as ``_allocations``; a current plan's are copied on first read
Plan.allocations = property(  # type: ignore[assignment]
    _get_allocations, _set_allocations, doc="job id -> {server id: GPUs} (see Plan)")


class PendingAllocations:
    """The allocations of a ``current_plan()`` not read yet: the engine's running allocations as
    they were at ``token`` and the ``writes`` made by :meth:`Plan.assign` since.

    ``snapshot(self)`` gives those allocations (job id -> allocation, start order) whatever the
    engine changed since (it keeps a journal of its changes from ``mark`` on, or sets ``base``
    to a copy). :meth:`materialize` makes the TrackedAllocations the plan then holds.
    """

    __slots__ = ("snapshot", "token", "writes", "mark", "base", "__weakref__")

    def __init__(self, snapshot: Callable[["PendingAllocations"], Mapping[str, Mapping[int, int]]],
                 token: object, mark: int = 0) -> None:
        self.snapshot = snapshot
        self.token = token
        self.writes: dict[str, Mapping[int, int]] | None = None  # made by the first Plan.assign
        self.mark = mark
        self.base: Mapping[str, Mapping[int, int]] | None = None

    def materialize(self) -> "TrackedAllocations":
        allocations = TrackedAllocations(self.snapshot(self) if self.base is None else self.base, self.token)
        if self.writes:
            for job_id, allocation in self.writes.items():
                allocations[job_id] = allocation
        return allocations


def unread_pending(plan: Plan) -> PendingAllocations | None:
    """The pending allocations of a current plan (or a Plan subclass) never read (``Plan.assign``
    only), else None."""
    unread = getattr(plan, "_unread", None)
    return unread() if unread is not None else None


def unchanged_current(plan: Plan, token: object) -> bool:
    """Is ``plan`` a ``current_plan()`` of state ``token`` that changes nothing: its allocations
    unread and unassigned, or read and never written (a :class:`TrackedAllocations` of ``token``
    with nothing ``touched``), and no loans, suspends or batches?"""
    state = plan.__dict__
    pending = state.get("_pending")
    if pending is None:
        allocations = state.get("_allocations")
        if type(allocations) is not TrackedAllocations or allocations.touched or allocations.token != token:
            return False
    elif pending.writes or pending.token != token:
        return False
    return not (plan.borrow or plan.give_back or plan.suspend or plan.batch_sizes)


def current_plan(pending: PendingAllocations) -> Plan:
    """A Plan whose allocations are ``pending`` (``ClusterView.current_plan()``)."""
    plan = _new_object(Plan)
    # plain attribute writes (no __init__, no dict of keywords): made at every decision point;
    # a Plan's own fields, set in its module
    plan._allocations = None  # noqa: SLF001
    plan._pending = pending  # noqa: SLF001
    plan.borrow = plan.give_back = plan.suspend = ()
    plan.batch_sizes = {}
    return plan


_new_object = object.__new__


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

    # ignore: mypy checks any __ior__ of a dict subclass against typeshed's widening dict.__or__
    def __ior__(self, other: Any) -> TrackedAllocations:  # type: ignore[misc]
        self.update(other)
        return self

    def __reduce__(self):  # a copy elsewhere (pickle, another process) is checked in full
        return (dict, (dict(self),))

    def __copy__(self) -> dict:
        return dict(self)


def touched_job_ids(allocations: Mapping[str, Mapping[int, int]],
                    current: Mapping[str, Mapping[int, int]]) -> list[str]:
    """The job ids whose allocation in ``allocations`` may differ from ``current`` (the
    allocations of the ``current_plan()`` they were made from): the ids written or removed
    when ``allocations`` is the :class:`TrackedAllocations` of such a plan, else every id of
    either, first seen first. A superset of the changed ids; compare them to find those."""
    if type(allocations) is TrackedAllocations:
        return list(allocations.touched)
    return list(dict.fromkeys([*allocations, *current]))
