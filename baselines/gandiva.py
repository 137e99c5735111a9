"""Gandiva: time slicing, migration and grow-shrink, with whole GPUs.

After Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep
Learning" (OSDI 2018). Gandiva uses the fact that a training job is a loop of
mini-batches: at a mini-batch boundary a job can be suspended cheaply, moved or
resized. This file keeps the three mechanisms that fit whole-GPU allocation:

1. **Time slicing** (suspend/resume). While jobs wait, the cluster is
   oversubscribed and jobs take turns. Round-robin order: queued jobs by the
   time they entered the queue (arrival or last suspension), oldest first,
   served strictly: no job overtakes one that has waited longer, which
   guarantees every job a slot (the price: GPUs may sit idle for up to a
   quantum while the head of the queue waits for room). Every ``quantum_s``
   a waiting job may displace running jobs that have held their GPUs for a
   full quantum and are not in a start or resize overhead, the one running
   longest first, except that a suspended job swaps back in with the jobs
   now on the servers it left (so jobs sharing a set of GPUs time-slice it, as
   in Gandiva). A displaced job is suspended in memory (``Plan.suspend``):
   the engine charges its next start ``overheads.resume_s`` on the servers it
   left, ``overheads.migrate_s`` (a migration) anywhere else; it resumes on
   its own servers whenever they have room.
   Between quanta, queued jobs start only in free GPUs, or in room made by
   shrinking (3). A job larger than every GPU type's usable servers now is
   passed over, not waited for. Room is counted over all usable GPUs; a job
   admitted on that count that then finds no room of one type stays queued.
   Under ``placement: consolidated`` a job that finds the counted room too
   scattered for the rule displaces further quantum-expired jobs at a quantum
   (the longest running first, keeping those the fit does not need), so time
   slicing still gives it a turn.
2. **Migration**. At each quantum, a running job spread over several servers
   moves onto one server that now has room for it (best fit, training servers
   first), if that does not lower its profiled throughput and it still has at
   least ``migrate_min_remaining_s`` to run. The engine charges
   ``overheads.migrate_s`` (same worker count, new placement).
3. **Grow-shrink**. At a quantum where no job waits (under-subscribed), elastic
   jobs grow onto idle GPUs of their type (their own servers first, then
   training, then loaned ones) up to ``spec.max_gpus``, if the profile predicts
   it saves at least ``grow_min_gain_s`` of their remaining time. As soon as a
   waiting job needs room (at any decision point) grown jobs shrink back to
   their requested size, before any job is suspended; not below it: beyond
   that, time slicing shares the GPUs. The engine charges
   ``overheads.rescale_s`` for both.

Placement. A job starts at its requested size on **one GPU type** whenever
one type's usable servers can hold it: this baseline's own rule, kept whatever
``allow_mixed_gpu_types`` says (a synchronous job on V100s and T4s would run at
the T4s' pace). Server groups:
one per type, the training servers' type first, then loaned types; largest
admitted job first. Within a group the run's ``placement`` rule decides
(``lyra_baselines.placement.place``): ``spread`` = best fit, one server if one can
hold the job, else as few as possible; ``consolidated`` = one server for a job
up to a server's GPUs, else wholly free servers only. Grown workers (3) are
extra, like Lyra's flexible ones: they go on any idle GPU of the job's type.
With ``allow_mixed_gpu_types: false`` (default) the trace loader refuses a job
no one type can hold. With ``true`` such a job spans types as ``lyra`` lets
it (``placement.spanning_group``): all training servers if they can hold it,
else training and loaned servers together; while neither can (servers on loan
come and go) it is passed over (blocking no one). A job larger than the
cluster could ever give it (every inference server on loan, with ``loan``)
never starts: the first decision that sees it queued warns, naming it
(``UnrunnableJobWarning``), and it is reported unfinished at the end.

Matches the original: round-robin time slicing with suspend/resume at a
mini-batch boundary (state kept in host memory, so resuming in place is cheap
and resuming elsewhere is a migration), migration to consolidate a spread job,
grow-shrink onto idle GPUs when under-subscribed.
Differs: the time slice is cluster-wide (a new job may take any
quantum-expired job's GPUs; a suspended job resumes elsewhere, paying a
migration, when its own servers stay busy and others have room) where Gandiva
time-slices only the jobs sharing a set of GPUs; placement is the run's rule, not
Gandiva's affinity (grouping jobs of one size on the same servers), so that
every policy is compared on the same placement; the introspective loop
(Gandiva measures a job after a move or a grow and undoes it if it did not
help) is replaced by the throughput profile's prediction; no consolidating of
a job larger than one server onto fewer servers, and no migration purely to
defragment for other jobs.

Deliberately left out: **GPU sharing** (packing two jobs onto one GPU at once,
each slowed by their interference, kept only if the pair's combined
throughput is higher). The engine allocates whole GPUs to one job, so a GPU
held by two jobs, and the pair's slowdown, cannot be expressed without
changing its model. A future model would take its interference factors from
measured pair throughputs: Gavel's (stanford-futuredata/gavel,
scheduler/simulation_throughputs.json, MIT; copy in shared/data/gavel/) give
each job's throughput alone and beside each other job type, per GPU type.

Loaning is orthogonal (``lyra_baselines.loaning``): with ``loan=True`` every
loanable inference server is borrowed, and reclaims are answered by
``reclaim_rule`` at the start of every decision.

Parameters (dataclass fields):

- ``quantum_s`` = 60.0: time slice and ``tick_interval`` (the project's default,
  DESIGN.md; an assumption for this whole-GPU model).
- ``grow_min_gain_s`` = 120.0: least predicted saving of a job's remaining time
  for a grow (assumption: covers the rescale of the grow and of a later shrink,
  30 s each by default).
- ``migrate_min_remaining_s`` = 300.0: a job closer than this to its end is not
  moved (assumption: a move costs 45 s by default).
- ``loan`` = False, ``reclaim_rule`` = ``"cost"``: see ``lyra_baselines.loaning``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, TypeVar

import numpy as np

from lyra_baselines.loaning import Loaning, free_after, loan_param, reclaim_rule_param
from lyra_baselines.placement import capacities, place_in_groups, spanning_group, take, warn_unrunnable
from lyra_gym.sim.params import MAX_S, MIN_TICK_S, check_fields, param
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.sim.view import ClusterView, JobView

T = TypeVar("T")

EPS = 1e-6  # s: tolerance when comparing times with quantum boundaries


@dataclass
class GandivaScheduler(Scheduler):
    """Gandiva-style time slicing, migration and grow-shrink (parameters: module docstring)."""

    reads = frozenset({"remaining_work", "remaining_time_at"})  # migration and grow-shrink by time left

    quantum_s: float = param(60.0, "time-slice quantum, also the tick", lo=MIN_TICK_S, hi=MAX_S, unit="s")
    grow_min_gain_s: float = param(120.0, "least predicted saving of remaining time for a grow", lo=0, hi=MAX_S,
                                   unit="s")
    migrate_min_remaining_s: float = param(300.0, "a job closer than this to its end is not moved", lo=0,
                                           hi=MAX_S, unit="s")
    loan: bool = loan_param(False)
    reclaim_rule: str = reclaim_rule_param()
    name = "gandiva"

    def __post_init__(self) -> None:
        check_fields(self)
        self.loaning = Loaning(enabled=self.loan, reclaim_rule=self.reclaim_rule)
        self.reset(None)  # the engine calls reset() with the run's generator before any decision

    @property
    def tick_interval(self) -> float:  # type: ignore[override]
        return self.quantum_s

    def reset(self, rng: np.random.Generator | None) -> None:
        self.rng = rng
        self._slot_start: dict[str, float] = {}  # job id -> when it last started (running jobs)
        self._left: dict[str, dict[int, int]] = {}  # suspended job id -> the allocation it left
        self._grown: set[str] = set()            # jobs this policy grew above their requested size
        self._next_quantum: float | None = None
        self._types: list[str] = []              # GPU type per server id (static; filled at first decide)
        self._limit = 0                          # the most GPUs one job can ever get (filled at first decide)
        self._checked: set[str] = set()          # jobs checked for being never runnable

    # ------------------------------------------------------------------ decision
    def decide(self, view: ClusterView) -> Plan:
        plan = view.current_plan()
        assert self.rng is not None  # the engine calls reset(rng) before any decision
        self.loaning.prepare(view, plan, self.rng)
        now = view.now
        if self._next_quantum is None:  # the engine's ticks run from the first decision point
            self._next_quantum = now + self.quantum_s
        at_quantum = now >= self._next_quantum - EPS
        if at_quantum:
            self._next_quantum = now + self.quantum_s
        if not self._types:  # the cluster's servers never change during a run (and there is one)
            self._types = [s.gpu_type for s in view.servers]
            self._size = capacities(view)
            self._training = list(view.training_server_ids)
            self._training_ids = frozenset(self._training)
            self._limit = self._job_limit(view)
        if view.num_queued:
            warn_unrunnable(view, self.name, self._limit, _requested, self._checked)
        free = free_after(view, plan)
        if not at_quantum and (not view.num_queued or (not any(free) and not self._grown)):
            return plan  # between quanta only free or shrinkable GPUs can start a job
        groups, capacity = self._groups(view, plan)
        waiting = self._admit(view, plan, free, groups, capacity, at_quantum) if view.num_queued else False
        if at_quantum:
            self._consolidate(view, plan, free, groups)
            if not waiting:
                self._grow(view, plan, free, groups)
        return plan

    def _groups(self, view: ClusterView, plan: Plan) -> tuple[list[list[int]], int]:
        """Server-id lists to place on, one per GPU type (the training servers' types first),
        and the GPUs of the largest. One type per job that one type can hold, whatever
        ``allow_mixed_gpu_types`` says, so no group of all types (unlike
        ``placement.groups_by_type``); see :meth:`_candidates` for a larger job."""
        back = set(plan.give_back)
        loaned = [s for s in view.loaned_servers() if s not in back] + list(plan.borrow)
        self._loaned = set(loaned)
        self._loaned_ids = loaned
        groups = self._by_type(loaned)
        return groups, max(sum(self._size[s] for s in g) for g in groups)

    def _by_type(self, loaned: list[int]) -> list[list[int]]:
        """Training and ``loaned`` server ids, one list per GPU type (training types first)."""
        by_type: dict[str, list[int]] = {}
        for sid in self._training + loaned:
            by_type.setdefault(self._types[sid], []).append(sid)
        return list(by_type.values())

    def _candidates(self, view: ClusterView, need: int, groups: list[list[int]],
                    capacity: int) -> list[list[int]] | None:
        """Groups a job of ``need`` GPUs may be placed on: ``groups`` if one type can hold it; else,
        where ``allow_mixed_gpu_types`` lets it, all training servers or training and loaned ones
        together (as ``lyra``; ``placement.spanning_group``); else None (it cannot run now)."""
        if need <= capacity:
            return groups
        span = spanning_group(view, self._loaned_ids, need)
        return [span] if span else None

    def _job_limit(self, view: ClusterView) -> int:
        """The most GPUs one job can ever get: the largest group with every inference server on
        loan (if ``loan``), or all those servers together where types may mix."""
        loaned = list(view.inference_server_ids) if self.loan else []
        sizes = [sum(self._size[s] for s in g) for g in self._by_type(loaned)]
        if view.allow_mixed_gpu_types:
            sizes.append(sum(self._size[s] for s in (*self._training, *loaned)))
        return max(sizes)

    def _rate(self, view: ClusterView, model: str, alloc: Mapping[int, int]) -> float:
        types = frozenset(self._types[s] for s in alloc)
        return view.profiles.throughput(model, sum(alloc.values()), len(alloc), types)

    # ------------------------------------------------------------------ 1. time slicing
    def _admit(self, view: ClusterView, plan: Plan, free: list[int], groups: list[list[int]],
               capacity: int, at_quantum: bool) -> bool:
        """Start queued jobs in round-robin order; True if one that could run is left waiting."""
        allocs = plan.allocations
        grown = self._shrinkable(view, allocs)
        turn = _Admission(view, allocs, free, groups, capacity, at_quantum, room=sum(free), grown=grown,
                          grown_room=sum(excess for _, excess in grown))
        for job in sorted(view.queued_jobs(), key=lambda j: (-j.waiting_s, j.index)):
            # pass 1: who runs, by counting GPUs; make room as needed
            own = self._own_servers(job.id)
            if own is not None:  # suspended: resumes where its state waits, or on idle GPUs
                self._resume(turn, job, own)
                continue
            need = job.spec.num_gpus
            if need > capacity:
                where = self._candidates(view, need, groups, capacity)
                if where is None:
                    continue  # cannot run on the servers usable now: does not block the others
                turn.spans[job.id] = where
            if not self._make_room(turn, need):
                turn.waiting = True
                break
            turn.admitted.append(job)
        self._place_admitted(turn)
        plan.suspend = (*plan.suspend, *turn.suspended)
        return turn.waiting

    def _resume(self, turn: "_Admission", job: JobView, own: Mapping[int, int]) -> None:
        """A suspended job resumes on its own servers if they have room; else it migrates to idle
        GPUs of its type; else (at a quantum) it swaps in with the jobs now on its servers; else
        it waits (taking no growth onto GPUs it waits for, blocking no one)."""
        view, allocs, free, groups, capacity = turn.view, turn.allocs, turn.free, turn.groups, turn.capacity
        need = job.spec.num_gpus
        where = [g for g in groups if next(iter(own)) in g] if need <= capacity else \
            self._candidates(view, need, groups, capacity) or []
        placement = None if self._resume_in_place(view, allocs, free, own, False, turn.suspended) else \
            place_in_groups(view.placement, free, self._size, need, where)  # a migration
        if placement is None and self._resume_in_place(view, allocs, free, own, turn.at_quantum, turn.suspended):
            placement = dict(own)  # swapped in with the jobs on its servers
            turn.victims, turn.victim_room = None, 0  # recounted: the swap suspended some
        if placement is None:
            turn.waiting = True
            return
        take(free, placement)
        allocs[job.id] = placement
        del self._left[job.id]
        self._slot_start[job.id] = view.now
        turn.room = sum(free)

    def _make_room(self, turn: "_Admission", need: int) -> bool:
        """Count ``need`` GPUs off the room: free GPUs, then grown jobs shrunk back to their
        requested size, then (at a quantum) quantum-expired jobs suspended, the one running longest
        first. False (nothing changed) when all of those together are too few."""
        allocs, free = turn.allocs, turn.free
        if turn.room + turn.grown_room < need and turn.at_quantum and turn.victims is None:
            turn.victims = self._victims(turn.view, allocs, {j.id for j, _ in turn.grown})
            turn.victim_room = sum(sum(allocs[v.id].values()) for v in turn.victims)
        if turn.room + turn.grown_room + turn.victim_room < need:
            return False
        while turn.room < need and turn.grown:  # 3. shrink grown jobs back to their requested size
            g, excess = turn.grown.pop()
            new = self._shrunk(allocs[g.id], g.spec.num_gpus, self._loaned)
            for sid, gpus in allocs[g.id].items():
                free[sid] += gpus - new.get(sid, 0)
            allocs[g.id] = new
            self._grown.discard(g.id)
            turn.room += excess
            turn.grown_room -= excess
        while turn.room < need and turn.victims:  # suspend the job running longest
            v = turn.victims.pop()
            self._left[v.id] = allocs[v.id]
            for sid, gpus in allocs.pop(v.id).items():
                free[sid] += gpus
                turn.room += gpus
                turn.victim_room -= gpus
            turn.suspended.append(v.id)
            self._slot_start.pop(v.id, None)
        turn.room -= need
        return True

    def _place_admitted(self, turn: "_Admission") -> None:
        """Pass 2: place the admitted jobs by the run's rule, largest first (under "spread":
        best-fit decreasing). The counts of pass 1 are over all types and all servers: a job that
        finds no room of one type stays queued. Under "consolidated", where counted room may be
        too scattered for the rule, a job that finds none at a quantum displaces more jobs
        (:meth:`_displace`)."""
        view, allocs, free = turn.view, turn.allocs, turn.free
        consolidated = view.placement == "consolidated"
        for job in sorted(turn.admitted, key=lambda j: -j.spec.num_gpus):
            where = turn.spans.get(job.id, turn.groups)
            placement = place_in_groups(view.placement, free, self._size, job.spec.num_gpus, where)
            if placement is None and consolidated and turn.at_quantum:
                if turn.victims is None:
                    turn.victims = [v for v in self._victims(view, allocs, self._grown) if allocs[v.id] is v.allocation]
                placement = self._displace(view, allocs, free, job.spec.num_gpus, where, turn.victims, turn.suspended)
            if placement is None:
                turn.waiting = True
                continue
            take(free, placement)
            allocs[job.id] = placement
            self._left.pop(job.id, None)  # its servers had gone back to inference: a migration
            self._slot_start[job.id] = view.now

    def _own_servers(self, job_id: str) -> dict[int, int] | None:
        """The allocation a suspended job left, if every one of those servers is still usable."""
        old = self._left.get(job_id)
        if old is None or not all(sid in self._training_ids or sid in self._loaned for sid in old):
            return None
        return old

    def _resume_in_place(self, view: ClusterView, allocs: dict, free: list[int], own: Mapping[int, int],
                         at_quantum: bool, suspended: list[str]) -> bool:
        """Make room for a suspended job on exactly its own servers: free GPUs there, else (at a
        quantum) by suspending quantum-expired jobs on them, the longest running first, keeping
        those not needed. Returns whether it fits now (``free`` then includes the room made)."""
        def fits(gpus: list[int]) -> Mapping[int, int] | None:
            return own if all(gpus[sid] >= g for sid, g in own.items()) else None

        if fits(free) is not None:
            return True
        if not at_quantum:
            return False
        on_own = [v for v in self._victims(view, allocs, self._grown)
                  if allocs[v.id] is v.allocation and any(sid in own for sid in allocs[v.id])]
        return self._suspend_until(allocs, free, on_own, fits, suspended) is not None

    def _displace(self, view: ClusterView, allocs: dict, free: list[int], need: int, groups: list[list[int]],
                  victims: list[JobView], suspended: list[str]) -> dict[int, int] | None:
        """Suspend ``victims`` (the longest running first, popped from the end) until ``need``
        GPUs fit by the placement rule; keep running those the fit turns out not to need.
        Returns the placement, or None (then nothing is suspended and ``victims`` is unchanged)."""
        rule, size = view.placement, self._size
        return self._suspend_until(allocs, free, victims,
                                   lambda gpus: place_in_groups(rule, gpus, size, need, groups), suspended)

    def _suspend_until(self, allocs: dict, free: list[int], victims: list[JobView],
                       fits: Callable[[list[int]], T | None], suspended: list[str]) -> T | None:
        """Suspend ``victims`` (popped from the end) until ``fits(free GPUs)`` gives a result, then
        keep running those the result turns out not to need (the last one chosen is needed).
        Returns the result with ``free`` updated and the suspensions recorded, or None (nothing
        suspended, ``victims`` unchanged)."""
        trial, chosen, result = list(free), [], None
        while result is None and victims:
            v = victims.pop()
            chosen.append(v)
            for sid, gpus in allocs[v.id].items():
                trial[sid] += gpus
            result = fits(trial)
        if result is None:
            victims.extend(reversed(chosen))
            return None
        for v in reversed(chosen[:-1]):
            back = list(trial)
            for sid, gpus in allocs[v.id].items():
                back[sid] -= gpus
            fit = fits(back)
            if fit is not None:
                trial, result = back, fit
                chosen.remove(v)
        for v in chosen:
            self._left[v.id] = allocs.pop(v.id)
            suspended.append(v.id)
            self._slot_start.pop(v.id, None)
        free[:] = trial
        return result

    def _victims(self, view: ClusterView, allocs: Mapping, exclude: set[str]) -> list[JobView]:
        """Running jobs whose quantum is over, outside any overhead; the longest running last."""
        now, start = view.now, self._slot_start
        out = [j for j in view.running_jobs()
               if j.id in allocs and j.id not in exclude and j.overhead_until <= now
               and now - start.get(j.id, -np.inf) >= self.quantum_s - EPS]
        out.sort(key=lambda j: (start.get(j.id, -np.inf), j.index), reverse=True)
        return out

    def _shrinkable(self, view: ClusterView, allocs: Mapping) -> list[tuple[JobView, int]]:
        """Grown jobs still running above their requested size, the largest excess last."""
        out = []
        for job_id in sorted(self._grown):
            job, alloc = view.job(job_id), allocs.get(job_id)
            excess = sum(alloc.values()) - job.spec.num_gpus if alloc else 0
            if excess > 0:
                out.append((job, excess))
            else:
                self._grown.discard(job_id)
        out.sort(key=lambda p: (p[1], -p[0].index))
        return out

    @staticmethod
    def _shrunk(alloc: Mapping[int, int], keep: int, loaned: set[int]) -> dict[int, int]:
        """``alloc`` cut to ``keep`` GPUs: loaned servers first, then where it holds fewest."""
        new = dict(alloc)
        drop = sum(alloc.values()) - keep
        for sid in sorted(alloc, key=lambda s: (s not in loaned, alloc[s], -s)):
            cut = min(drop, new[sid])
            new[sid] -= cut
            drop -= cut
            if not new[sid]:
                del new[sid]
        return new

    # ------------------------------------------------------------------ 2. migration
    def _consolidate(self, view: ClusterView, plan: Plan, free: list[int], groups: list[list[int]]) -> None:
        """Move spread jobs onto one server with room, if that does not slow them down."""
        allocs, now = plan.allocations, view.now
        most_free = max(free)
        if not most_free:
            return  # a spread job needs a free GPU on its target server
        for job in view.running_jobs():
            alloc = allocs.get(job.id)
            if alloc is not job.allocation or len(alloc) < 2 or job.overhead_until > now:
                continue
            workers = job.workers
            if most_free + max(alloc.values()) < workers:
                continue
            rate = self._rate(view, job.spec.model, alloc)
            if job.remaining_work / rate < self.migrate_min_remaining_s:
                continue
            target = None
            for group in groups:  # training first; best fit within a group
                fits = [(free[s] + alloc.get(s, 0), s) for s in group if free[s] + alloc.get(s, 0) >= workers]
                if fits:
                    target = min(fits)[1]
                    break
            if target is None or self._rate(view, job.spec.model, {target: workers}) < rate:
                continue
            for sid, gpus in alloc.items():
                free[sid] += gpus
            free[target] -= workers
            allocs[job.id] = {target: workers}
            most_free = max(free)

    # ------------------------------------------------------------------ 3. grow
    def _grow(self, view: ClusterView, plan: Plan, free: list[int], groups: list[list[int]]) -> None:
        """Grow elastic jobs onto idle GPUs where the profile predicts enough gain."""
        allocs, now = plan.allocations, view.now
        if not any(free):
            return
        usable = {s for g in groups for s in g}
        jobs = [j for j in view.running_jobs()
                if j.spec.elastic and j.workers < j.spec.max_gpus
                and allocs.get(j.id) is j.allocation and j.overhead_until <= now]
        jobs.sort(key=lambda j: (-j.remaining_time_at(j.workers), j.index))  # longest remaining first
        for job in jobs:
            alloc, model = job.allocation, job.spec.model
            own_type = self._types[next(iter(alloc))]
            servers = sorted((s for s in usable if free[s] > 0 and self._types[s] == own_type),
                             key=lambda s: (s not in alloc, s in self._loaned, -free[s], s))
            remaining = job.remaining_work
            before = remaining / self._rate(view, model, alloc)
            new, left = dict(alloc), job.spec.max_gpus - job.workers
            best, best_gain = None, 0.0
            for sid in servers:  # each prefix of the preferred servers is a candidate
                if not left:
                    break
                add = min(left, free[sid])
                new[sid] = new.get(sid, 0) + add
                left -= add
                gain = before - remaining / self._rate(view, model, new)
                if gain >= self.grow_min_gain_s and (best is None or gain > best_gain):
                    best, best_gain = dict(new), gain
            if best is None:
                continue
            for sid, gpus in best.items():
                free[sid] -= gpus - alloc.get(sid, 0)
            allocs[job.id] = best
            if sum(best.values()) > job.spec.num_gpus:
                self._grown.add(job.id)


@dataclass
class _Admission:
    """One decision's admission (:meth:`GandivaScheduler._admit`): the room counted in pass 1
    (free GPUs, grown jobs' excess, quantum-expired jobs that may be suspended) and its outcome."""

    view: ClusterView
    allocs: dict
    free: list[int]
    groups: list[list[int]]
    capacity: int  # GPUs of the largest group
    at_quantum: bool
    room: int  # free GPUs not yet counted for an admitted job
    grown: list[tuple[JobView, int]]  # grown jobs and their excess, the largest excess last
    grown_room: int
    victims: list[JobView] | None = None  # quantum-expired jobs, the longest running last (None: not listed yet)
    victim_room: int = 0
    suspended: list[str] = field(default_factory=list)
    admitted: list[JobView] = field(default_factory=list)
    spans: dict[str, list[list[int]]] = field(default_factory=dict)  # job id -> its spanning group
    waiting: bool = False  # a job that could run is left waiting


def _requested(job: JobView) -> int:
    """GPUs a job starts on under Gandiva: its requested size."""
    return job.spec.num_gpus


@dataclass
class GandivaLoanScheduler(GandivaScheduler):
    """Gandiva with capacity loaning: borrows every loanable inference server."""

    loan: bool = True
    name = "gandiva+loan"
