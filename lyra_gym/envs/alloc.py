"""Full control of one decision point: a short sequence of masked sub-actions that builds a Plan.

:class:`AllocDecision` is one decision point of ``LyraGym/Alloc-v1``
(``lyra_gym/envs/alloc_env.py``) and of a trained Alloc agent run as a
scheduler. It goes through these phases, one small class each
(:mod:`lyra_gym.envs.alloc_phases`), each one sub-action of one ``Discrete(n)``
space (:class:`AllocLayout`, :mod:`lyra_gym.envs.alloc_layout`; the masks say
which values mean something in the current phase):

1. ``borrow`` (when inference servers are loanable): value ``b`` borrows
   ``b / B`` of them (``B`` = the heuristic's own choice, all of them).
2. ``return`` (while inference reclaims servers): value ``1 + j`` returns
   loaned-server slot ``j``; ``0`` returns the rest as the heuristic would.
3. The guided heuristic's proposal is computed once for the loaning chosen
   (``decide_guided``); it is advice, shown in the observation, not a default.
4. ``job``: value ``i < K`` picks job slot ``i`` (each job at most once per
   decision point); ``K`` (stop) commits, every job not picked keeping what it
   has; ``K + 1`` (auto) commits, every job not picked getting the heuristic's
   proposal where it still fits (else what it has, else it waits).
5. ``place`` for the picked job: ``0`` wait (a running job is preempted), ``1``
   the heuristic's proposal for it, ``2 + p * L + l`` run it on worker option
   ``l`` (:func:`worker_options`) in pool ``p`` (0 training GPUs, 1 loaned
   GPUs), placed by best fit (a job that stays in its pool keeps its servers
   and grows or shrinks in place; moving pools is a migration).

Every value left unmasked is executable: the masks come from the working plan
(free GPUs per server after the sub-actions so far), so the committed Plan
always passes the engine's validator. A running job on a server being
returned must be picked before ``stop`` (or ``auto`` settles it).
:meth:`AllocDecision.expert` spells out the heuristic's own decision (pick each
visible job the proposal changes, give it the proposal; ``auto`` for the rest),
and a commit whose plan equals the proposal submits the proposal itself, so an
expert episode reproduces the heuristic bit for bit.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from lyra_gym.envs.alloc_layout import (
    ALLOC_CLUSTER_FEATURES,
    ALLOC_JOB_FEATURES,
    BORROW,
    JOB,
    PHASES,
    PLACE,
    POOLS,
    PROPOSAL,
    RETURN,
    WAIT,
    WORKER_LEVELS,
    AllocLayout,
    same_allocation,
    worker_options,
)
from lyra_gym.envs.alloc_phases import BorrowPhase, JobPhase, Phase, PlacePhase, ReturnPhase
from lyra_gym.envs.alloc_plan import PlaceOption, WorkingPlan
from lyra_gym.envs.observation import ObservationBuilder, job_slots, server_slots
from lyra_gym.envs.observation_state import engine_constants
from lyra_gym.sim.plan import Plan, touched_job_ids
from lyra_gym.sim.scheduler import Guidance, Scheduler
from lyra_gym.sim.view import ClusterView, JobView


class AllocDecision:
    """One decision point under full control (see the module docstring).

    :param view: the engine's view at the decision point.
    :param heuristic: the guided scheduler whose proposal is offered (``decide_guided``).
    :param layout: the sub-action layout.
    :param ask_loaning: offer the borrow and return phases (False at a heuristic's own tick,
        where ``borrow_fraction`` applies as given).
    :param borrow_fraction: the loaning guidance when the borrow phase is not asked.
    :param proposal: with ``ask_loaning`` False, the heuristic's proposal for ``borrow_fraction``
        when the caller already asked for it (:func:`open_decision` at a tick); None asks here.

    ``stage`` is the current phase (an :mod:`~lyra_gym.envs.alloc_phases` object), ``phase``
    its index in :data:`PHASES`; ``working`` the :class:`WorkingPlan` once the loaning is chosen
    (None before), ``plan`` the committed Plan (None before). The engine's state must not change
    while a decision is open (sub-actions only build the working plan), so the job slots found at
    the start serve every phase.
    """

    def __init__(self, view: ClusterView, heuristic: Scheduler, layout: AllocLayout, ask_loaning: bool = True,
                 borrow_fraction: float | None = None, proposal: Plan | None = None) -> None:
        self.view, self.heuristic, self.layout = view, heuristic, layout
        self.server_ids = server_slots(view, layout.m)
        self.owed = view.reclaim_pending
        self.borrow_fraction = borrow_fraction
        self.borrow_level: int | None = None
        self.initial_slots: list[JobView] = job_slots(view, layout.k)
        self.working: WorkingPlan | None = None
        self.plan: Plan | None = None
        self.stage: Phase
        if ask_loaning and view.num_loanable > 0:
            self.stage = BorrowPhase()
        elif ask_loaning and self.owed and self.server_ids:
            self.stage = ReturnPhase()
        else:
            self.stage = self.propose((), proposal)

    def propose(self, returns: Sequence[int], proposal: Plan | None = None) -> JobPhase:
        """Ask the heuristic for its proposal (unless given) for the loaning chosen (the borrow
        fraction, ``returns``), make the working plan; the ``job`` phase."""
        if proposal is None:
            guidance = Guidance(borrow_fraction=self.borrow_fraction, return_levels={sid: 2 for sid in returns})
            proposal = self.heuristic.decide_guided(self.view, guidance)
        self.working = WorkingPlan(self.view, self.layout.k, self.initial_slots, proposal)
        return JobPhase(self.working)

    # ------------------------------------------------------------------ what the phases hold
    @property
    def phase(self) -> int:
        """The current phase's index in :data:`PHASES` (``BORROW``, ``RETURN``, ``JOB``, ``PLACE``)."""
        return self.stage.index

    @property
    def proposal(self) -> Plan | None:
        """The heuristic's proposal for the loaning chosen (None before it is chosen)."""
        return self.working.proposal if self.working is not None else None

    @property
    def slots(self) -> list[JobView]:
        """The job slots: those found at the start, reordered by the proposal (``must`` first)."""
        return self.working.slots if self.working is not None else self.initial_slots

    @property
    def changed(self) -> list[str]:
        """Ids of the jobs the proposal changes, in trace order."""
        return self._working().changed

    @property
    def must(self) -> set[str]:
        """Ids of the jobs holding GPUs on a server being returned (to decide before ``stop``)."""
        return self._working().must

    @property
    def picked(self) -> set[str]:
        """Ids of the jobs decided so far at this decision point."""
        return self._working().picked

    @property
    def selected(self) -> int | None:
        """The job slot being placed (``place`` phase), else None."""
        stage = self.stage
        return stage.selected if type(stage) is PlacePhase else None

    @property
    def options(self) -> list[PlaceOption]:
        """Per place value, what it gives the selected job (``place`` phase), else empty."""
        stage = self.stage
        return stage.options if type(stage) is PlacePhase else []

    def _working(self) -> WorkingPlan:
        if self.working is None:
            raise AttributeError("no proposal yet: the loaning is still being chosen")
        return self.working

    def fits_if_freed(self, job: JobView, pool: int, workers: int, freed: JobView | None = None) -> bool:
        """Whether ``job`` could run on ``workers`` GPUs of ``pool`` in the working plan if ``freed``
        (another job) first gave up its GPUs; nothing changes (for scripted policies and probes)."""
        return self._working().fits_if_freed(job, pool, workers, freed)

    # ------------------------------------------------------------------ sub-actions
    def masks(self) -> np.ndarray:
        """Valid values of the current phase (length ``layout.n``)."""
        return self.stage.masks(self)

    def neutral(self) -> int:
        """The value an invalid sub-action is replaced by: the heuristic's choice for this phase
        (borrow all, the heuristic's returns, ``auto``, the proposal or else wait)."""
        return self.stage.neutral(self)

    def expert(self) -> int:
        """The heuristic's own decision, one sub-action at a time."""
        return self.stage.expert(self)

    def step(self, value: int) -> bool:
        """Apply one valid sub-action; True when the decision point is committed (``self.plan``)."""
        stage = self.stage.step(self, value)
        if stage is None:  # committed; the job phase stays the current one
            return True
        self.stage = stage
        return False

    # ------------------------------------------------------------------ observation extras
    def job_extras(self, copy: bool = True) -> np.ndarray:
        """``(len(slots), len(ALLOC_JOB_FEATURES))`` features of the slots (zeros before the proposal);
        ``copy=False``: the array kept between sub-actions (:meth:`WorkingPlan.job_extras`), read only."""
        working = self.working
        if working is None:
            return np.zeros((len(self.slots), len(ALLOC_JOB_FEATURES)), dtype=np.float32)
        rows = working.job_extras(self.selected)
        return rows.copy() if copy else rows

    def cluster_extras(self, clip: bool = True) -> np.ndarray:
        """``len(ALLOC_CLUSTER_FEATURES)`` features of the phase and the working plan, clipped to
        [-1, 1] (``clip=False``: unclipped, for a caller that clips a whole observation)."""
        out = np.zeros(len(ALLOC_CLUSTER_FEATURES), dtype=np.float32)
        stage = self.stage
        out[stage.index] = 1.0
        constants = engine_constants(self.view)
        n_inf = max(1, len(constants.inference_ids))
        if self.working is not None:
            self.working.cluster_extras(out, constants, n_inf)
        else:  # borrow or return: servers still to return
            out[7] = max(0, self.owed - stage.returns_chosen) / n_inf  # type: ignore[union-attr]
        return np.clip(out, -1.0, 1.0) if clip else out


class SkippedTick:
    """What :func:`open_decision` returns at a heuristic's own tick where its proposal changes
    nothing: only that proposal (to submit), no decision to make."""

    __slots__ = ("proposal",)

    def __init__(self, proposal: Plan) -> None:
        self.proposal = proposal


class AllocObserver:
    """The Alloc observation: the common layout (:class:`ObservationBuilder`) with the Alloc
    features appended to each job row and to the cluster block. The common part is built once
    per decision point (and again if the proposal reorders the slots); sub-actions only rewrite
    the appended features."""

    def __init__(self, k: int, m: int) -> None:
        self.builder = ObservationBuilder(k, m, extra_job_features=ALLOC_JOB_FEATURES,
                                          extra_cluster_features=ALLOC_CLUSTER_FEATURES)
        self.k = k
        self.size = self.builder.size
        self._base: np.ndarray | None = None
        # the decision and slot list the base was built for, held (not their ids: a freed
        # decision's id is reused by the next one, which would then see a stale base)
        self._built_for: tuple[AllocDecision, list] | None = None

    def observe(self, view: ClusterView, decision: AllocDecision) -> np.ndarray:
        built, slots = self._built_for, decision.slots
        if built is None or built[0] is not decision or built[1] is not slots:
            self._base = self.builder.build(view, slots, decision.server_ids)
            self._built_for = (decision, slots)
        obs = self._base.copy()  # type: ignore[union-attr]
        width, extra = self.builder.job_width, len(ALLOC_JOB_FEATURES)
        rows = decision.job_extras(copy=False)
        n = len(rows)
        if n:
            obs[:n * width].reshape(n, width)[:, width - extra:] = rows
        end = self.k * width + self.builder.cluster_width
        obs[end - len(ALLOC_CLUSTER_FEATURES):end] = decision.cluster_extras(clip=False)  # clipped with the rest
        np.clip(obs, -1.0, 1.0, out=obs)
        return obs


def open_decision(view: ClusterView, heuristic: Scheduler, layout: AllocLayout,
                  last_borrow: float | None) -> tuple[AllocDecision | SkippedTick, bool]:
    """``(decision, skip)`` at ``view``: ``skip`` at a heuristic's own tick where its proposal
    changes nothing (submit ``decision.proposal``, a no-op, without asking the agent; the
    decision is then a :class:`SkippedTick`, nothing else of a decision being built).

    At ticks the loaning is not asked: ``last_borrow`` None (the agent's last borrow choice was
    the heuristic's own, all) borrows as the heuristic does, any other value borrows nothing."""
    if view.tick_only:
        borrow = None if last_borrow is None else 0.0
        # the heuristic is asked exactly as AllocDecision(ask_loaning=False) would ask it
        proposal = heuristic.decide_guided(view, Guidance(borrow_fraction=borrow, return_levels={}))
        if is_noop(proposal, view):
            return SkippedTick(proposal), True
        return AllocDecision(view, heuristic, layout, ask_loaning=False, borrow_fraction=borrow,
                             proposal=proposal), False
    return AllocDecision(view, heuristic, layout), False


def is_noop(plan: Plan, view: ClusterView) -> bool:
    """Whether ``plan`` changes nothing (no loaning, every job kept as it is)."""
    if plan.borrow or plan.give_back or plan.batch_sizes or plan.suspend:
        return False
    allocations = plan.allocations
    current = view.current_plan().allocations
    return all(same_allocation(allocations.get(j), current.get(j)) for j in touched_job_ids(allocations, current))


#: the name this module had for :func:`same_allocation`
_same = same_allocation

__all__ = ["ALLOC_CLUSTER_FEATURES", "ALLOC_JOB_FEATURES", "AllocDecision", "AllocLayout", "BORROW", "JOB",
           "PHASES", "PLACE", "POOLS", "PROPOSAL", "RETURN", "WAIT", "WORKER_LEVELS", "AllocObserver",
           "SkippedTick", "WorkingPlan", "is_noop", "open_decision", "worker_options"]
