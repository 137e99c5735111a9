"""The working plan of an Alloc decision point's ``job`` and ``place`` phases.

Made once the loaning is chosen: the heuristic's proposal for that loaning, and the plan the
agent's sub-actions build from the current allocations (free GPUs per server, the servers each
pool may use, the jobs picked so far), with the observation rows those sub-actions change.
"""

from __future__ import annotations

from typing import Mapping, Sequence, cast

import numpy as np

from lyra_gym.envs.alloc_layout import (
    ALLOC_JOB_FEATURES,
    POOLS,
    PROPOSAL,
    WAIT,
    AllocLayout,
    same_allocation,
    worker_options,
)
from lyra_gym.envs.observation import GPU_NORM
from lyra_gym.envs.observation_state import EngineConstants
from lyra_gym.sim.placement import best_fit, capacities, groups_by_type, place_in_groups
from lyra_gym.sim.plan import Plan, touched_job_ids
from lyra_gym.sim.view import ClusterView, JobView

#: A place value's outcome: the allocation it gives, None (the job waits) or False (infeasible).
PlaceOption = Mapping[int, int] | None | bool


class WorkingPlan:
    """The proposal and the working plan of one decision point (see the module docstring).

    :param view: the engine's view at the decision point (it does not change while it is open).
    :param k: job slots.
    :param initial_slots: the job slots found at the start (``job_slots(view, k)``).
    :param proposal: the heuristic's proposal for the loaning chosen.

    Job slots: jobs holding GPUs on servers the proposal returns (``must``, they must be decided)
    first, then ``initial_slots``. The observation rows (:meth:`job_extras`) are kept between
    sub-actions; only the rows a sub-action touched are computed again.
    """

    def __init__(self, view: ClusterView, k: int, initial_slots: list[JobView], proposal: Plan) -> None:
        self.view, self.proposal = view, proposal
        allocations = proposal.allocations
        current = view.current_plan().allocations
        # in trace order: the heuristic's write order may follow a set's (hash-seeded) order
        changed = [j for j in touched_job_ids(allocations, current)
                   if not same_allocation(allocations.get(j), current.get(j))]
        self.changed = sorted(changed, key=lambda j: view.job(j).index)
        self._changed_set = frozenset(self.changed)
        self.changed_left = len(self.changed)  # changed jobs not picked yet
        self.work: dict[str, Mapping[int, int]] = dict(current)
        self.current = current
        self._init_servers(view, proposal)
        must = [j for j, alloc in current.items() if any(sid in self.returned for sid in alloc)] \
            if self.returned else []
        self.must = set(must)
        if must:
            first = [view.job(j) for j in sorted(must, key=lambda j: view.job(j).index)]
            rest = [j for j in initial_slots if j.id not in self.must]
            self.slots = (first + rest)[:k]
        else:
            self.slots = initial_slots
        self.slot_ids = [j.id for j in self.slots]
        self.picked: set[str] = set()
        self._extras: np.ndarray | None = None  # job_extras() of the slots, rows in _dirty stale
        self._dirty: set[int] = set()

    def _init_servers(self, view: ClusterView, proposal: Plan) -> None:
        """Free GPUs per server once the proposal's loaning is applied, and the usable servers."""
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

    # ------------------------------------------------------------------ free GPUs
    def _release(self, alloc: Mapping[int, int] | None) -> None:
        self._free_sums = None
        for sid, gpus in (alloc or {}).items():
            if self.usable[sid]:
                self.free[sid] += gpus

    def _take(self, alloc: Mapping[int, int] | None) -> None:
        self._free_sums = None
        for sid, gpus in (alloc or {}).items():
            self.free[sid] -= gpus

    def fits(self, alloc: Mapping[int, int] | None, own: Mapping[int, int] | None) -> bool:
        """Whether ``alloc`` fits the working plan once the job releases ``own``."""
        own = own or {}
        for sid, gpus in (alloc or {}).items():
            if not self.usable[sid] or self.free[sid] + own.get(sid, 0) < gpus:
                return False
        return True

    def free_sums(self) -> tuple[int, int]:
        """Free GPUs of the training and the loaned pool in the working plan."""
        sums = self._free_sums
        if sums is None:
            free = self.free
            sums = self._free_sums = (sum(free[s] for s in self.pool_sets[0]),
                                      sum(free[s] for s in self.pool_sets[1]))
        return sums

    # ------------------------------------------------------------------ placement
    def _in_place(self, own: Mapping[int, int], held: int, pool: int, workers: int) -> dict[int, int] | None:
        """``workers`` GPUs for a job holding ``own`` (``held`` GPUs, all in ``pool``) on its own
        servers: shrunk (leaving the servers holding the fewest first) or grown by best fit on
        servers of its GPU type; None when it cannot grow."""
        if workers < held:
            left, out = held - workers, dict(own)
            for sid in sorted(out, key=lambda s: (out[s], -s)):
                cut = min(left, out[sid])
                out[sid] -= cut
                left -= cut
                if not out[sid]:
                    del out[sid]
                if not left:
                    return out
        servers = self.view.servers
        gpu_type = servers[next(iter(own))].gpu_type
        same_type = [sid for sid in self.pool_sets[pool] if servers[sid].gpu_type == gpu_type]
        extra = best_fit(self.free, workers - held, same_type)
        if extra is None:
            return None
        out = dict(own)
        for sid, gpus in extra.items():
            out[sid] = out.get(sid, 0) + gpus
        return out

    def pool_placement(self, job: JobView, pool: int, workers: int) -> Mapping[int, int] | None:
        """``workers`` GPUs for ``job`` in ``pool`` under the working plan, or None. A job that
        stays in its pool keeps its servers and grows or shrinks in place when it can."""
        own = self.work.get(job.id) or {}
        held = sum(own.values())
        if own and all(sid in self.pool_sets[pool] for sid in own):
            if workers == held:
                return own
            kept = self._in_place(own, held, pool, workers)
            if kept is not None:
                return kept
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
            return self.pool_placement(job, pool, workers) is not None
        finally:
            self._take(own)

    def place_options(self, layout: AllocLayout, job: JobView) -> list[PlaceOption]:
        """Per place value: the allocation it gives (None: wait), or False when infeasible."""
        options: list[PlaceOption] = [False] * layout.n
        options[WAIT] = None
        target = self.proposal.allocations.get(job.id)
        options[PROPOSAL] = (target or None) if self.fits(target, self.work.get(job.id)) else False
        for level, workers in enumerate(worker_options(job.spec, layout.levels)):
            for pool in range(len(POOLS)):
                alloc = self.pool_placement(job, pool, workers)
                if alloc is not None:
                    options[layout.place_index(pool, level)] = alloc
        return options

    # ------------------------------------------------------------------ sub-actions
    def select(self, slot: int) -> None:
        """Job slot ``slot`` is picked for the ``place`` phase (its row changes)."""
        self._dirty.add(slot)

    def place(self, slot: int, new: PlaceOption) -> None:
        """Give the job of ``slot`` the allocation ``new`` (None or False: it waits); it is picked."""
        self._dirty.add(slot)
        job_id = self.slot_ids[slot]
        self._release(self.work.get(job_id))
        if new:  # an allocation (an option is never True)
            alloc = cast(Mapping[int, int], new)
            self.work[job_id] = alloc
            self._take(alloc)
        else:
            self.work.pop(job_id, None)
        if job_id in self._changed_set and job_id not in self.picked:
            self.changed_left -= 1
        self.picked.add(job_id)

    def commit(self, auto: bool) -> Plan:
        """The decision point's plan: the working plan, where ``auto`` first gives every changed
        job not picked the proposal where it still fits (else what it had, if that fits); the
        proposal itself when the result equals it."""
        self._extras = None
        proposal, work = self.proposal, self.work
        targets = proposal.allocations
        if auto:
            self._settle([j for j in self.changed if j not in self.picked], targets)
        changed = set(self.changed)
        exact = all(same_allocation(work.get(j), targets.get(j)) for j in self.changed) and \
            all(same_allocation(work.get(j), self.current.get(j)) for j in self.picked if j not in changed)
        if exact:
            return proposal
        return Plan(allocations=work, borrow=tuple(proposal.borrow), give_back=tuple(proposal.give_back))

    def _settle(self, settle: Sequence[str], targets: Mapping[str, Mapping[int, int]]) -> None:
        """``auto``: give the jobs ``settle`` the proposal where it fits, else keep what they had."""
        work = self.work
        old = {j: work.get(j) for j in settle}
        for j in settle:
            self._release(work.pop(j, None))
        fallback = []
        for j in settle:
            target = targets.get(j)
            if target and self.fits(target, None):
                work[j] = target
                self._take(target)
            elif target:
                fallback.append(j)
        for j in fallback:  # the agent took the proposal's GPUs: keep what it had, if it can
            before = old[j]
            if before and self.fits(before, None):
                work[j] = before
                self._take(before)

    def expert(self, layout: AllocLayout) -> int:
        """The heuristic's own next ``job`` sub-action: the first slot whose job the proposal
        changes and whose proposal fits, else ``auto`` while a changed job is left, else ``stop``."""
        proposal, picked, work = self.proposal.allocations, self.picked, self.work
        for i, job in enumerate(self.slots):
            jid = job.id
            if jid in picked or same_allocation(proposal.get(jid), work.get(jid)):
                continue
            if self.fits(proposal.get(jid), work.get(jid)):
                return i
        if any(j not in picked and not same_allocation(proposal.get(j), work.get(j)) for j in self.changed):
            return layout.auto
        return layout.stop

    # ------------------------------------------------------------------ observation
    def job_extras(self, selected: int | None) -> np.ndarray:
        """``(len(slots), len(ALLOC_JOB_FEATURES))`` features of the slots (``selected``: the slot
        being placed), kept: only the rows a sub-action touched since are computed again."""
        extras = self._extras
        if extras is None:
            extras = np.zeros((len(self.slots), len(ALLOC_JOB_FEATURES)), dtype=np.float32)
            for i in range(len(self.slots)):
                extras[i] = self._extras_row(i, selected)
            self._extras = extras
        else:
            for i in self._dirty:
                extras[i] = self._extras_row(i, selected)
        self._dirty.clear()
        return extras

    def _extras_row(self, i: int, selected: int | None) -> tuple[float, ...]:
        jid = self.slot_ids[i]
        loaned = self.pool_sets[1]
        plan, target = self.work.get(jid) or {}, self.proposal.allocations.get(jid) or {}
        pw, tw = sum(plan.values()), sum(target.values())
        return (
            float(jid in self.picked), float(i == selected), float(jid in self.must), pw / GPU_NORM,
            sum(g for s, g in plan.items() if s in loaned) / pw if pw else 0.0, tw / GPU_NORM,
            sum(g for s, g in target.items() if s in loaned) / tw if tw else 0.0,
        )

    def cluster_extras(self, out: np.ndarray, constants: EngineConstants, n_inf: int) -> None:
        """Write the working plan's cluster features into ``out`` (``ALLOC_CLUSTER_FEATURES``)."""
        sums = self.free_sums()
        out[4] = sums[0] / max(1, constants.training_gpus)
        out[5] = sums[1] / constants.inference_gpus  # max(1, inference GPUs)
        out[6] = len(self.proposal.borrow) / n_inf
        out[8] = _log_left(self.changed_left)  # changed jobs not picked yet


_LOG_LEFT: dict[int, np.float64] = {}


def _log_left(left: int) -> np.float64:
    """``np.log1p(left) / 6.0`` (memoised)."""
    value = _LOG_LEFT.get(left)
    if value is None:
        value = _LOG_LEFT[left] = np.log1p(left) / 6.0
    return value


__all__ = ["PlaceOption", "WorkingPlan"]
