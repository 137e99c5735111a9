"""The four phases of an Alloc decision point, one small class each (see :mod:`lyra_gym.envs.alloc`).

A phase holds only its own state, says which values are valid (``masks``), which value an
invalid one becomes (``neutral``) and the heuristic's own choice (``expert``), and ``step``
applies a valid value and returns the next phase (None once the decision point is committed).
What the phases share (the layout, the loaning chosen, the proposal) is the decision's
(:class:`Decision`); the ``job`` and ``place`` phases share a :class:`WorkingPlan`.
"""

from __future__ import annotations

from typing import Protocol, Sequence, Union

import numpy as np

from lyra_gym.envs.alloc_layout import BORROW, JOB, PLACE, PROPOSAL, RETURN, WAIT, AllocLayout
from lyra_gym.envs.alloc_plan import PlaceOption, WorkingPlan
from lyra_gym.sim.plan import Plan


class Decision(Protocol):
    """What the phases read and set of the decision point they belong to."""

    layout: AllocLayout
    server_ids: list[int]  # the loaned-server slots
    owed: int  # servers the inference cluster reclaims now
    borrow_level: int | None
    borrow_fraction: float | None
    plan: Plan | None

    def propose(self, returns: Sequence[int]) -> JobPhase:
        """Ask the heuristic for its proposal with ``returns`` chosen; the ``job`` phase."""
        ...


class BorrowPhase:
    """``borrow``: value ``b`` borrows ``b / B`` of the loanable servers (``B``: all, the
    heuristic's own choice)."""

    __slots__ = ()
    index = BORROW
    returns_chosen = 0

    def masks(self, decision: Decision) -> np.ndarray:
        layout = decision.layout
        mask = np.zeros(layout.n, dtype=bool)
        mask[: layout.b + 1] = True
        return mask

    def neutral(self, decision: Decision) -> int:
        return decision.layout.b

    expert = neutral

    def step(self, decision: Decision, value: int) -> Phase:
        b = decision.layout.b
        decision.borrow_level = value
        decision.borrow_fraction = None if value == b else value / b
        if decision.owed and decision.server_ids:
            return ReturnPhase()
        return decision.propose(())


class ReturnPhase:
    """``return`` (while inference reclaims servers): value ``1 + j`` returns loaned-server slot
    ``j``; ``0`` returns the rest as the heuristic would."""

    __slots__ = ("returns",)
    index = RETURN

    def __init__(self) -> None:
        self.returns: list[int] = []  # server ids chosen so far, in order

    @property
    def returns_chosen(self) -> int:
        return len(self.returns)

    def masks(self, decision: Decision) -> np.ndarray:
        mask = np.zeros(decision.layout.n, dtype=bool)
        mask[0] = True
        returns = self.returns
        for j, sid in enumerate(decision.server_ids):
            mask[1 + j] = sid not in returns
        return mask

    def neutral(self, decision: Decision) -> int:
        return 0

    expert = neutral

    def step(self, decision: Decision, value: int) -> Phase:
        server_ids = decision.server_ids
        if value:
            self.returns.append(server_ids[value - 1])
        if not value or len(self.returns) >= min(decision.owed, len(server_ids)):
            return decision.propose(self.returns)
        return self


class JobPhase:
    """``job``: value ``i < K`` picks job slot ``i`` (each job at most once per decision point);
    ``K`` (stop) commits, every job not picked keeping what it has; ``K + 1`` (auto) commits,
    every job not picked getting the proposal where it still fits."""

    __slots__ = ("working",)
    index = JOB

    def __init__(self, working: WorkingPlan) -> None:
        self.working = working

    def masks(self, decision: Decision) -> np.ndarray:
        layout, working = decision.layout, self.working
        mask = np.zeros(layout.n, dtype=bool)
        picked, slot_ids = working.picked, working.slot_ids
        if picked:
            mask[:len(slot_ids)] = [jid not in picked for jid in slot_ids]
        else:
            mask[:len(slot_ids)] = True
        mask[layout.stop] = not (working.must - picked)
        mask[layout.auto] = True
        return mask

    def neutral(self, decision: Decision) -> int:
        return decision.layout.auto

    def expert(self, decision: Decision) -> int:
        return self.working.expert(decision.layout)

    def step(self, decision: Decision, value: int) -> Phase | None:
        layout, working = decision.layout, self.working
        if value == layout.stop or value == layout.auto:
            decision.plan = working.commit(auto=value == layout.auto)
            return None
        working.select(value)
        return PlacePhase(self, value, working.place_options(layout, working.slots[value]))


class PlacePhase:
    """``place`` for the job of slot ``selected``: ``0`` wait, ``1`` the proposal for it,
    ``2 + p * L + l`` worker option ``l`` in pool ``p``; ``options`` holds what each gives."""

    __slots__ = ("job_phase", "selected", "options")
    index = PLACE

    def __init__(self, job_phase: JobPhase, selected: int, options: list[PlaceOption]) -> None:
        self.job_phase, self.selected, self.options = job_phase, selected, options

    def masks(self, decision: Decision) -> np.ndarray:
        mask = np.zeros(decision.layout.n, dtype=bool)
        mask[:len(self.options)] = [option is not False for option in self.options]
        return mask

    def neutral(self, decision: Decision) -> int:
        return PROPOSAL if self.options[PROPOSAL] is not False else WAIT

    expert = neutral

    def step(self, decision: Decision, value: int) -> Phase:
        self.job_phase.working.place(self.selected, self.options[value])
        return self.job_phase


Phase = Union[BorrowPhase, ReturnPhase, JobPhase, PlacePhase]

__all__ = ["BorrowPhase", "Decision", "JobPhase", "Phase", "PlacePhase", "ReturnPhase"]
