"""Full control of one decision point: a short sequence of masked sub-actions that builds a Plan.

:class:`AllocDecision` is the state machine of ``LyraGym/Alloc-v0``
(``lyra_gym/envs/alloc_env.py``) and of a trained Alloc agent run as a
scheduler. One decision point goes through these phases, each one sub-action
of one ``Discrete(n)`` space (:class:`AllocLayout`; the masks say which values
mean something in the current phase):

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

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from lyra_gym.envs.observation import GPU_NORM, ObservationBuilder, _constants, job_slots, server_slots
from lyra_gym.placement import best_fit, capacities, groups_by_type, place_in_groups
from lyra_gym.plan import Plan, touched_job_ids
from lyra_gym.scheduler import Guidance, Scheduler
from lyra_gym.trace import JobSpec
from lyra_gym.view import ClusterView, JobView

PHASES = ("borrow", "return", "job", "place")
BORROW, RETURN, JOB, PLACE = range(len(PHASES))
POOLS = ("training", "loaned")
#: Worker options per pool in the ``place`` phase (L).
WORKER_LEVELS = 10
WAIT, PROPOSAL = 0, 1

#: Per-job features the Alloc observation appends to each job row.
ALLOC_JOB_FEATURES = (
    "picked",             # 1 once decided at this decision point
    "selected",           # 1 for the job being placed now
    "must_decide",        # 1 if it holds GPUs on a server being returned
    "plan_workers",       # workers in the working plan / 64
    "plan_on_loaned",     # share of those on loaned servers
    "proposal_workers",   # the heuristic's proposal / 64
    "proposal_on_loaned", # share of the proposal on loaned servers
)
#: Cluster features the Alloc observation appends to the cluster block.
ALLOC_CLUSTER_FEATURES = (
    "phase_borrow", "phase_return", "phase_job", "phase_place",
    "plan_free_training",  # free training GPUs in the working plan / training GPUs
    "plan_free_loaned",    # free loaned GPUs in the working plan / inference GPUs
    "borrowed_now",        # servers borrowed at this decision point / inference servers
    "returns_left",        # servers still to return / inference servers
    "proposal_changes",    # log1p(jobs the proposal changes that are not yet picked) / 6
)


def worker_options(spec: JobSpec, levels: int = WORKER_LEVELS) -> tuple[int, ...]:
    """Up to ``levels`` worker counts a job may run on, ascending: its minimum, requested size
    and maximum, the powers of two between, and (when that is too many) the named sizes plus
    an evenly spread pick of the others (each the centre of an equal share)."""
    lo, hi = spec.min_gpus, spec.max_gpus
    named = {lo, spec.num_gpus, hi}
    powers = {1 << e for e in range(hi.bit_length() + 1) if lo <= 1 << e <= hi}
    candidates = sorted(named | powers)
    if len(candidates) <= levels:
        return tuple(candidates)
    others = [c for c in candidates if c not in named]
    keep = levels - len(named)
    picks = [others[round((i + 0.5) * len(others) / keep - 0.5)] for i in range(max(keep, 0))]
    return tuple(sorted(named | set(picks)))


@dataclass(frozen=True)
class AllocLayout:
    """The sub-action space: K job slots, M loaned-server slots, B borrow levels, L worker options."""

    k: int
    m: int
    b: int
    levels: int = WORKER_LEVELS

    @property
    def n(self) -> int:
        """Size of the ``Discrete`` space: the widest phase."""
        return max(self.k + 2, self.b + 1, self.m + 1, 2 + len(POOLS) * self.levels)

    @property
    def stop(self) -> int:
        return self.k

    @property
    def auto(self) -> int:
        return self.k + 1

    def place_index(self, pool: int, level: int) -> int:
        return 2 + pool * self.levels + level


def _same(a: Mapping[int, int] | None, b: Mapping[int, int] | None) -> bool:
    return (a or {}) == (b or {})


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

    The engine's state must not change while a decision is open (sub-actions only build the
    working plan), so the job slots found at the start serve every phase, and the observation
    extras (:meth:`job_extras`) are kept between sub-actions, only the rows a sub-action touched
    recomputed.
    """

    def __init__(self, view: ClusterView, heuristic: Scheduler, layout: AllocLayout, ask_loaning: bool = True,
                 borrow_fraction: float | None = None, proposal: Plan | None = None) -> None:
        self.view, self.heuristic, self.layout = view, heuristic, layout
        self.server_ids = server_slots(view, layout.m)
        self.owed = view.reclaim_pending
        self.returns: list[int] = []
        self.borrow_fraction = borrow_fraction
        self.borrow_level: int | None = None
        self._initial_slots: list[JobView] = job_slots(view, layout.k)
        self.slots: list[JobView] = self._initial_slots
        self.selected: int | None = None
        self.plan: Plan | None = None
        self.proposal: Plan | None = None
        self.options: list[Mapping[int, int] | None] = []
        self._extras: np.ndarray | None = None  # job_extras() of self.slots, rows in _dirty stale
        self._dirty: set[int] = set()
        if ask_loaning and view.num_loanable > 0:
            self.phase = BORROW
        elif ask_loaning and self.owed and self.server_ids:
            self.phase = RETURN
        else:
            self._propose(proposal)

    # ------------------------------------------------------------------ proposal and working plan
    def _guidance(self) -> Guidance:
        """What the heuristic is asked for its proposal: the loaning chosen so far."""
        return Guidance(borrow_fraction=self.borrow_fraction, return_levels={sid: 2 for sid in self.returns})

    def _propose(self, proposal: Plan | None = None) -> None:
        view = self.view
        if proposal is None:
            proposal = self.heuristic.decide_guided(view, self._guidance())
        self.proposal = proposal
        allocations = proposal.allocations
        current = view.current_plan().allocations
        candidates = touched_job_ids(allocations, current)
        # in trace order: the heuristic's write order may follow a set's (hash-seeded) order
        changed = [j for j in candidates if not _same(allocations.get(j), current.get(j))]
        self.changed = sorted(changed, key=lambda j: view.job(j).index)
        self._changed_set = frozenset(self.changed)
        self._changed_left = len(self.changed)  # changed jobs not picked yet
        self.work: dict[str, Mapping[int, int]] = dict(current)
        self.current = current
        cap = capacities(view)
        self.capacity = cap
        free = view.free_gpus()
        returned = set(proposal.give_back)
        usable = [False] * len(cap)
        for sid in view.training_server_ids:
            usable[sid] = True
        loaned = [sid for sid in view.loaned_servers() if sid not in returned]
        for sid in loaned:
            usable[sid] = True
        for sid in proposal.borrow:
            usable[sid] = True
            free[sid] = cap[sid]
        for sid in returned:
            free[sid] = 0
        self.free, self.usable = free, usable
        self._free_sums: tuple[int, int] | None = None  # free GPUs per pool; None after a change
        pools = (list(view.training_server_ids), sorted(loaned + list(proposal.borrow)))
        self.pool_sets = tuple(frozenset(p) for p in pools)
        self.pool_groups = tuple(groups_by_type(view, p) for p in pools)
        self.returned = returned
        must = [j for j, alloc in current.items() if any(sid in returned for sid in alloc)] if returned else []
        self.must = set(must)
        if must:
            first = [view.job(j) for j in sorted(must, key=lambda j: view.job(j).index)]
            # the slots found at the start: the engine has not changed since (job_slots(view, k) again)
            rest = [j for j in self._initial_slots if j.id not in self.must]
            self.slots = (first + rest)[: self.layout.k]
        else:
            self.slots = self._initial_slots
        self._slot_ids = [j.id for j in self.slots]
        self._extras = None
        self.picked: set[str] = set()
        self.phase = JOB

    def _release(self, alloc: Mapping[int, int] | None) -> None:
        self._free_sums = None
        for sid, gpus in (alloc or {}).items():
            if self.usable[sid]:
                self.free[sid] += gpus

    def _take(self, alloc: Mapping[int, int] | None) -> None:
        self._free_sums = None
        for sid, gpus in (alloc or {}).items():
            self.free[sid] -= gpus

    def _fits(self, alloc: Mapping[int, int] | None, own: Mapping[int, int] | None) -> bool:
        """Whether ``alloc`` fits the working plan once the job releases ``own``."""
        own = own or {}
        for sid, gpus in (alloc or {}).items():
            if not self.usable[sid] or self.free[sid] + own.get(sid, 0) < gpus:
                return False
        return True

    def _pool_placement(self, job: JobView, pool: int, workers: int) -> Mapping[int, int] | None:
        """``workers`` GPUs for ``job`` in ``pool`` under the working plan, or None."""
        own = self.work.get(job.id) or {}
        members = self.pool_sets[pool]
        held = sum(own.values())
        if own and all(sid in members for sid in own):
            if workers == held:
                return own
            if workers < held:  # shrink in place: leave the servers holding the fewest first
                left, out = held - workers, dict(own)
                for sid in sorted(out, key=lambda s: (out[s], -s)):
                    cut = min(left, out[sid])
                    out[sid] -= cut
                    left -= cut
                    if not out[sid]:
                        del out[sid]
                    if not left:
                        return out
            same_type = [sid for sid in members if self.view.servers[sid].gpu_type
                         == self.view.servers[next(iter(own))].gpu_type]
            extra = best_fit(self.free, workers - held, same_type)
            if extra is not None:  # grow in place
                out = dict(own)
                for sid, gpus in extra.items():
                    out[sid] = out.get(sid, 0) + gpus
                return out
        free = self.free
        for sid, gpus in own.items():
            if self.usable[sid]:
                free[sid] += gpus
        try:
            return place_in_groups(self.view.placement, free, self.capacity, workers, self.pool_groups[pool])
        finally:
            for sid, gpus in own.items():
                if self.usable[sid]:
                    free[sid] -= gpus

    def fits_if_freed(self, job: JobView, pool: int, workers: int, freed: JobView | None = None) -> bool:
        """Whether ``job`` could run on ``workers`` GPUs of ``pool`` in the working plan if ``freed``
        (another job) first gave up its GPUs; nothing changes (for scripted policies and probes)."""
        own = self.work.get(freed.id) if freed is not None else None
        self._release(own)
        try:
            return self._pool_placement(job, pool, workers) is not None
        finally:
            self._take(own)

    def _place_options(self, job: JobView) -> list[Mapping[int, int] | None | bool]:
        """Per place value: the allocation it gives (None: wait), or False when infeasible."""
        layout = self.layout
        options: list[Mapping[int, int] | None | bool] = [False] * layout.n
        options[WAIT] = None
        own = self.work.get(job.id)
        target = self.proposal.allocations.get(job.id) if self.proposal is not None else None
        options[PROPOSAL] = (target or None) if self._fits(target, own) else False
        for level, workers in enumerate(worker_options(job.spec, layout.levels)):
            for pool in range(len(POOLS)):
                alloc = self._pool_placement(job, pool, workers)
                if alloc is not None:
                    options[layout.place_index(pool, level)] = alloc
        return options

    # ------------------------------------------------------------------ sub-actions
    def masks(self) -> np.ndarray:
        """Valid values of the current phase (length ``layout.n``)."""
        layout, mask = self.layout, np.zeros(self.layout.n, dtype=bool)
        if self.phase == BORROW:
            mask[: layout.b + 1] = True
        elif self.phase == RETURN:
            mask[0] = True
            for j, sid in enumerate(self.server_ids):
                mask[1 + j] = sid not in self.returns
        elif self.phase == JOB:
            picked = self.picked
            if picked:
                mask[:len(self._slot_ids)] = [jid not in picked for jid in self._slot_ids]
            else:
                mask[:len(self._slot_ids)] = True
            mask[layout.stop] = not (self.must - picked)
            mask[layout.auto] = True
        else:
            mask[:len(self.options)] = [option is not False for option in self.options]
        return mask

    def neutral(self) -> int:
        """The value an invalid sub-action is replaced by: the heuristic's choice for this phase
        (borrow all, the heuristic's returns, ``auto``, the proposal or else wait)."""
        if self.phase == BORROW:
            return self.layout.b
        if self.phase == RETURN:
            return 0
        if self.phase == JOB:
            return self.layout.auto
        return PROPOSAL if self.options[PROPOSAL] is not False else WAIT

    def expert(self) -> int:
        """The heuristic's own decision, one sub-action at a time."""
        if self.phase != JOB:
            return self.neutral()
        proposal = self.proposal.allocations
        for i, job in enumerate(self.slots):
            jid = job.id
            if jid in self.picked or _same(proposal.get(jid), self.work.get(jid)):
                continue
            if self._fits(proposal.get(jid), self.work.get(jid)):
                return i
        if any(j not in self.picked and not _same(proposal.get(j), self.work.get(j)) for j in self.changed):
            return self.layout.auto
        return self.layout.stop

    def step(self, value: int) -> bool:
        """Apply one valid sub-action; True when the decision point is committed (``self.plan``)."""
        if self.phase == BORROW:
            self.borrow_level = value
            self.borrow_fraction = None if value == self.layout.b else value / self.layout.b
            if self.owed and self.server_ids:
                self.phase = RETURN
            else:
                self._propose()
        elif self.phase == RETURN:
            if value:
                self.returns.append(self.server_ids[value - 1])
            if not value or len(self.returns) >= min(self.owed, len(self.server_ids)):
                self._propose()
        elif self.phase == JOB:
            if value in (self.layout.stop, self.layout.auto):
                self._commit(auto=value == self.layout.auto)
                return True
            self.selected = value
            self._dirty.add(value)
            self.options = self._place_options(self.slots[value])
            self.phase = PLACE
        else:
            self._dirty.add(self.selected)
            job = self.slots[self.selected]
            new = self.options[value]
            self._release(self.work.get(job.id))
            if new:
                self.work[job.id] = new
                self._take(new)
            else:
                self.work.pop(job.id, None)
            if job.id in self._changed_set and job.id not in self.picked:
                self._changed_left -= 1
            self.picked.add(job.id)
            self.selected, self.options = None, []
            self.phase = JOB
        return False

    def _commit(self, auto: bool) -> None:
        self._extras = None
        proposal, work = self.proposal, self.work
        targets = proposal.allocations
        if auto:
            settle = [j for j in self.changed if j not in self.picked]
            old = {j: work.get(j) for j in settle}
            for j in settle:
                self._release(work.pop(j, None))
            fallback = []
            for j in settle:
                target = targets.get(j)
                if target and self._fits(target, None):
                    work[j] = target
                    self._take(target)
                elif target:
                    fallback.append(j)
            for j in fallback:  # the agent took the proposal's GPUs: keep what it had, if it can
                before = old[j]
                if before and self._fits(before, None):
                    work[j] = before
                    self._take(before)
        changed = set(self.changed)
        exact = all(_same(work.get(j), targets.get(j)) for j in self.changed) and \
            all(_same(work.get(j), self.current.get(j)) for j in self.picked if j not in changed)
        if exact:
            self.plan = proposal
        else:
            self.plan = Plan(allocations=work, borrow=tuple(proposal.borrow), give_back=tuple(proposal.give_back))

    # ------------------------------------------------------------------ observation extras
    def job_extras(self) -> np.ndarray:
        """``(len(slots), len(ALLOC_JOB_FEATURES))`` features of the slots (zeros before the proposal)."""
        return self._job_extras().copy()

    def _job_extras(self) -> np.ndarray:
        """:meth:`job_extras`, kept: a sub-action changes the rows of the slot it selects or places
        (picked, selected, working plan); only those are computed again."""
        extras = self._extras
        if self.proposal is None:
            return np.zeros((len(self.slots), len(ALLOC_JOB_FEATURES)), dtype=np.float32)
        if extras is None:
            extras = np.zeros((len(self.slots), len(ALLOC_JOB_FEATURES)), dtype=np.float32)
            for i in range(len(self.slots)):
                extras[i] = self._extras_row(i)
            self._extras = extras
        else:
            for i in self._dirty:
                extras[i] = self._extras_row(i)
        self._dirty.clear()
        return extras

    def _extras_row(self, i: int) -> tuple[float, ...]:
        jid = self._slot_ids[i]
        loaned = self.pool_sets[1]
        plan, target = self.work.get(jid) or {}, self.proposal.allocations.get(jid) or {}
        pw, tw = sum(plan.values()), sum(target.values())
        return (
            float(jid in self.picked), float(i == self.selected), float(jid in self.must), pw / GPU_NORM,
            sum(g for s, g in plan.items() if s in loaned) / pw if pw else 0.0, tw / GPU_NORM,
            sum(g for s, g in target.items() if s in loaned) / tw if tw else 0.0,
        )

    def cluster_extras(self) -> np.ndarray:
        """``len(ALLOC_CLUSTER_FEATURES)`` features of the phase and the working plan."""
        return np.clip(self._cluster_extras(), -1.0, 1.0)

    def _cluster_extras(self) -> np.ndarray:
        """:meth:`cluster_extras` before clipping."""
        view = self.view
        out = np.zeros(len(ALLOC_CLUSTER_FEATURES), dtype=np.float32)
        out[self.phase] = 1.0
        constants = _constants(view)
        n_inf = max(1, len(constants.inference_ids))
        if self.proposal is not None:
            sums = self._free_sums
            if sums is None:
                free = self.free
                sums = self._free_sums = (sum(free[s] for s in self.pool_sets[0]),
                                          sum(free[s] for s in self.pool_sets[1]))
            out[4] = sums[0] / max(1, constants.training_gpus)
            out[5] = sums[1] / constants.inference_gpus  # max(1, inference GPUs)
            out[6] = len(self.proposal.borrow) / n_inf
            out[8] = _log_left(self._changed_left)  # changed jobs not picked yet
        out[7] = max(0, self.owed - len(self.returns)) / n_inf if self.proposal is None else 0.0
        return out


_LOG_LEFT: dict[int, np.float64] = {}


def _log_left(left: int) -> np.float64:
    """``np.log1p(left) / 6.0`` (memoised)."""
    value = _LOG_LEFT.get(left)
    if value is None:
        value = _LOG_LEFT[left] = np.log1p(left) / 6.0
    return value


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
        built = self._built_for
        if built is None or built[0] is not decision or built[1] is not decision.slots:
            self._base = self.builder.build(view, decision.slots, decision.server_ids)
            self._built_for = (decision, decision.slots)
        obs = self._base.copy()
        width, extra = self.builder.job_width, len(ALLOC_JOB_FEATURES)
        rows = decision._job_extras()
        n = len(rows)
        if n:
            obs[:n * width].reshape(n, width)[:, width - extra:] = rows
        end = self.k * width + self.builder.cluster_width
        obs[end - len(ALLOC_CLUSTER_FEATURES):end] = decision._cluster_extras()  # clipped with the rest
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
    return all(_same(allocations.get(j), current.get(j)) for j in touched_job_ids(allocations, current))


__all__ = ["ALLOC_CLUSTER_FEATURES", "ALLOC_JOB_FEATURES", "AllocDecision", "AllocLayout", "PHASES", "POOLS",
           "WORKER_LEVELS", "AllocObserver", "SkippedTick", "is_noop", "open_decision", "worker_options"]
