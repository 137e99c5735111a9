"""Lyra, the reference: the paper's two phases over the public view, to read first.

``lyra-reference`` decides what ``lyra`` (``baselines/lyra.py``) decides, plan for plan
(``tests/baselines/test_reference_equivalence.py``), without the speed work: no caches, no change
feed, one :class:`_Decision` per decision over the public ``ClusterView``/``JobView``.

Each decision (Li et al., EuroSys 2023; DESIGN.md, "The paper being modelled"): capacity loaning
(``baselines/loaning.py``: answer a reclaim, borrow idle inference servers); **phase 1**
(:meth:`_Decision.admit`): queued jobs, shortest remaining time first, get their base demand on training
GPUs, or on loaned GPUs when that finishes sooner; jobs on loaned GPUs move back when it pays; **phase 2**
(:meth:`_Decision.rebalance`): at a round a multiple-choice knapsack gives elastic jobs the extra workers
worth most JCT seconds; between rounds jobs keep theirs and admitted jobs grow. Switches: ``lyra``'s
(``baselines/lyra_switches.py``). Kept across decisions: the round clock, the observed holds of extra
workers and (``oracle``) the expected finishes read (:meth:`_Decision.wait_for`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from lyra_baselines.knapsack import solve
from lyra_baselines.loaning import free_after
from lyra_baselines.lyra_switches import HOLD_EWMA, LyraSwitches
from lyra_baselines.placement import place_in_groups
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL, Guidance
from lyra_gym.sim.view import ClusterView, JobView

__all__ = ["LyraReferenceScheduler"]

Alloc = dict[int, int]  # server id -> GPUs


@dataclass
class LyraReferenceScheduler(LyraSwitches):
    """``lyra``'s switches (``LyraSwitches``' docstring), decided by the plain algorithm."""

    name = "lyra-reference"

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.next_round = -math.inf  # s: the next knapsack round is due at the first decision after it
        self.last_decision = -math.inf  # s: the last decision that was not a skipped tick
        self.granted: dict[str, tuple[float, str]] = {}  # job id -> (when extras were granted, GPU type)
        self.held_s: dict[str, float] = {}  # GPU type -> smoothed observed hold of extra workers (s)
        self.finishes: dict[str, tuple[Mapping[int, int], float]] = {}  # job -> (allocation, finish s)

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Loaning, phase 1, phase 2, under an agent's ``guidance`` (``Guidance``'s docstring)."""
        round_due = self.elastic and view.now >= self.next_round
        if view.tick_only and not guidance.preempt and (not round_due or view.now - self.last_decision < self.round_s):
            return view.current_plan()  # a tick brings only the round of a cluster quiet for a whole round
        self.last_decision = view.now
        plan = view.current_plan()
        self.loaning.prepare(view, plan, self.rng, guidance.borrow_fraction, guidance.return_levels)
        # preempted running jobs (those the reclaim answer stopped included) go back to the queue
        running = list(view.running_jobs())
        preempt = {job.id for job in running if job.id in guidance.preempt}
        for job_id in sorted(preempt):  # in id order, as lyra: the plan records its edits in order
            plan.allocations.pop(job_id, None)
        levels = guidance.job_levels
        hold = self.elastic and any(level == 0 and job_id in plan.allocations and sum(
            plan.allocations[job_id].values()) > view.job(job_id).spec.min_gpus for job_id, level in levels.items())
        free, training = view.free_gpus(), set(view.training_server_ids)  # a job wholly on loaned GPUs may move back
        may_move_back = self.move_back and any(free[s] for s in training) and any(
            training.isdisjoint(job.allocation) for job in running)
        if not (view.num_queued or round_due or plan.give_back or plan.borrow or hold or may_move_back or preempt):
            return plan  # nothing to admit, return, move back or rebalance
        decision = _Decision(self, view, plan, levels, preempt)
        decision.admit()
        decision.rebalance(round_due, hold)
        return plan


class _Decision:
    """One decision. ``avail``: free GPUs plus flexible workers per server (phase 1 may displace
    those); ``base``/``flex``: each elastic job's base and extra workers."""

    def __init__(self, lyra: LyraReferenceScheduler, view: ClusterView, plan: Plan, levels: Mapping[str, int],
                 preempted: set[str]) -> None:
        self.lyra, self.view, self.plan, self.levels, self.preempted = lyra, view, plan, levels, preempted
        self.alloc = plan.allocations
        self.types = [s.gpu_type for s in view.servers]
        self.capacity = [s.num_gpus for s in view.servers]
        self.per_server = {s.gpu_type: s.num_gpus for s in reversed(view.servers)}  # the first of each type
        self.training = frozenset(view.training_server_ids)
        self.training_types = self.by_type(view.training_server_ids)  # GPU type -> ids, first seen first
        self.sizes = {t: len(ids) * self.per_server[t] for t, ids in self.training_types.items()}  # type -> GPUs
        self.spanning = list(view.training_server_ids) if view.allow_mixed_gpu_types and len(self.sizes) > 1 else None
        back = set(plan.give_back)
        self.loaned = sorted({*(s for s in view.loaned_servers() if s not in back), *plan.borrow})
        self.loaned_groups = list(self.by_type(self.loaned).values())
        self.free = free_after(view, plan)
        self.avail = list(self.free)
        self.base: dict[str, Alloc] = {}
        self.flex: dict[str, Alloc] = {}
        self.elastic_jobs: list[JobView] = []  # running elastic jobs in start order, then admitted ones
        for job in view.running_jobs():
            if lyra.elastic and job.spec.elastic and job.id in self.alloc:
                self.base[job.id], self.flex[job.id] = self.split(job, self.alloc[job.id])
                self.elastic_jobs.append(job)
                for sid, g in self.flex[job.id].items():
                    self.avail[sid] += g
        self.admitted: list[JobView] = []
        self.moved = False  # a job moved from loaned to training GPUs
        self.blocked = False  # a job waits for training GPUs and backfill is off
        self.touched: set[int] = set()  # servers a placement took GPUs on
        self.waiting: dict[str, int] = {}  # training GPU type -> base GPUs of the jobs waiting for it
        self.first_need: dict[str, int] = {}  # training GPU type -> base GPUs of the first job waiting
        self.placed: list[tuple[float, int, str]] = []  # (finish s, GPUs, type) of jobs placed on training now

    def by_type(self, ids: list[int] | tuple[int, ...]) -> dict[str, list[int]]:
        groups: dict[str, list[int]] = {}  # GPU type -> ids, first-seen type first
        for sid in ids:
            groups.setdefault(self.types[sid], []).append(sid)
        return groups

    def split(self, job: JobView, alloc: Mapping[int, int]) -> tuple[Alloc, Alloc]:
        """Base and flexible workers of an allocation: the base on training servers first."""
        base_left, base, flex = self.lyra.base_demand(job), {}, {}
        for sid in sorted(alloc, key=lambda s: (s not in self.training, s)):
            base[sid] = min(alloc[sid], base_left)
            flex[sid] = alloc[sid] - base[sid]
            base_left -= base[sid]
        return {s: g for s, g in base.items() if g}, {s: g for s, g in flex.items() if g}

    def rate(self, job: JobView, workers: int, gpu_type: str) -> float:
        """The job's rate (samples/s) on ``workers`` GPUs of ``gpu_type`` packed, by ``value_rate``."""
        if self.lyra.value_rate == "throughput":
            return self.view.profiles.packed_throughput(job.spec.model, workers, gpu_type, self.per_server[gpu_type])
        return self.view.goodput(job, workers, gpu_type, self.per_server[gpu_type])

    def time_on(self, job: JobView, workers: int, gpu_type: str) -> float:
        """Seconds ``job`` needs on ``workers`` packed GPUs of ``gpu_type`` (no overhead)."""
        rate = self.rate(job, workers, gpu_type)
        return job.remaining_work / rate if rate > 0 else math.inf

    def line_key(self, job: JobView) -> float:
        """Seconds left at the requested size on the reference GPU: the shortest-first order."""
        view, workers = self.view, job.spec.num_gpus
        if self.lyra.value_rate == "throughput":
            return job.remaining_work / view.reference_throughput(job.spec.model, workers)
        if view.scaling == "adaptive":
            return job.remaining_time_at(workers)
        return job.remaining_work / view.goodput(job, workers, *view.reference_server())

    def value_row(self, job: JobView, gpu_type: str, top: int, horizon: float) -> list[float]:
        """JCT seconds saved by k = 0..top extra workers: held h = min(horizon, T(k)) they save
        h * (r_k / r_0 - 1); taken back before the job ends (h < T(k)) they cost a rescale."""
        rates = np.array([self.rate(job, job.spec.min_gpus + k, gpu_type) for k in range(top + 1)])
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = rates / rates[0] - 1.0
            times = job.remaining_work / rates
        if math.isinf(horizon):
            return list((times[0] - times).tolist())
        held = np.minimum(horizon, times)
        row = held * gain
        row[1:] -= np.where(held[1:] < times[1:], self.view.overheads.rescale_s, 0.0)
        return list(row.tolist())

    def available(self, gpu_type: str) -> int:  # free or flexible GPUs on training servers of the type
        return sum(self.avail[s] for s in self.training_types[gpu_type])

    def wait_for(self, gpu_type: str, deficit: int) -> float:
        """Seconds until ``deficit`` more training GPUs of ``gpu_type`` free up: the base GPUs of jobs
        unchanged by this plan or placed now, at their expected finish (under ``oracle``, as first
        read for the allocation: ``lyra``'s approximation, pinned by the golden results)."""
        if deficit <= 0:
            return 0.0
        view, finishes = self.view, {}
        releases = [(t, g) for t, g, typ in self.placed if typ == gpu_type]
        for job in view.running_jobs():
            alloc = self.alloc.get(job.id)
            if alloc is not job.allocation:
                continue  # placed or changed by this plan
            kept = self.lyra.finishes.get(job.id)
            finish = kept[1] if kept is not None and kept[0] is alloc and not view.believed else job.expected_finish
            if finish is None:
                continue
            finishes[job.id] = (alloc, finish)
            typ = self.types[next(iter(alloc))]
            held = sum(g for s, g in alloc.items() if s in self.training and self.types[s] == typ)
            if job.spec.elastic and self.lyra.elastic:
                held = min(held, self.lyra.base_demand(job))  # its flexible workers count as available now
            if typ == gpu_type and held:
                releases.append((finish, held))
        self.lyra.finishes = finishes
        freed = 0
        for finish, gpus in sorted(releases):  # the order of equal times changes no wait
            freed += gpus
            if freed >= deficit:
                return max(0.0, finish - view.now)
        return math.inf

    def fit(self, need: int, groups: list[list[int]]) -> Alloc | None:
        """The placement rule on free GPUs of the first group that holds ``need``; else on ``avail``."""
        rule = self.view.placement
        placement = place_in_groups(rule, self.free, self.capacity, need, groups)
        return placement if placement is not None else place_in_groups(rule, self.avail, self.capacity, need, groups)

    def fit_training(self, need: int) -> Alloc | None:
        """:meth:`fit` on one training GPU type; across types only when none can hold the job."""
        placement = self.fit(need, list(self.training_types.values()))
        if placement is None and self.spanning and need > max(self.sizes.values()):
            placement = self.fit(need, [self.spanning])
        return placement

    def place(self, job: JobView, placement: Alloc) -> None:
        """Occupy ``placement`` (free GPUs first, then flexible workers); note a training release."""
        for sid, g in placement.items():
            self.free[sid] -= min(g, self.free[sid])
            self.avail[sid] -= g
        self.touched.update(placement)
        self.alloc[job.id] = placement
        if not set(self.loaned) & set(placement):
            gpu_type, need = self.types[next(iter(placement))], sum(placement.values())
            self.placed.append((self.view.now + self.time_on(job, need, gpu_type), need, gpu_type))

    def admit(self) -> None:
        """Phase 1, shortest first (an agent's levels first): queued jobs, those our reclaim answer just
        stopped, and jobs wholly on loaned GPUs keeping their place for training GPUs (``move_back``)."""
        view, levels, alloc = self.view, self.levels, self.alloc
        line = list(view.queued_jobs())
        if self.plan.give_back:
            line += [j for j in view.running_jobs() if j.id not in alloc and j.id not in self.preempted]
        moving = {j.id for j in view.running_jobs() if self.lyra.move_back and alloc.get(j.id) is j.allocation
                  and self.training.isdisjoint(j.allocation) and j.rate > 0}
        line += [j for j in view.running_jobs() if j.id in moving]
        ordered = sorted((-levels.get(j.id, NEUTRAL_JOB_LEVEL) if levels else 0, self.line_key(j), j.index, j)
                         for j in line)  # job indices are unique: views are never compared
        for *_, job in ordered:
            if levels and levels.get(job.id, NEUTRAL_JOB_LEVEL) == 0:
                break  # held, and so is everything after it
            if job.id in moving:
                if not self.blocked:
                    self.moved = self.move_back(job) or self.moved
            elif not self.admit_one(job):
                break

    def admit_one(self, job: JobView) -> bool:
        """Place ``job``'s base demand on training GPUs, else on loaned ones when that pays, else across
        both when no one pool can hold it; or let it wait. False: no later job can be placed."""
        need, room = self.lyra.base_demand(job), sum(self.avail[s] for s in self.loaned)
        placement = None if self.blocked else self.fit_training(need)
        if placement is None and self.loaned_groups and room >= need:
            candidate = self.fit(need, self.loaned_groups)
            if candidate is not None and self.loaned_pays(job, need, candidate):
                placement = candidate
        if placement is None and self.loaned and self.view.allow_mixed_gpu_types:
            pools = [*self.sizes.values(), *(len(g) * self.per_server[self.types[g[0]]] for g in self.loaned_groups)]
            if self.spanning:
                pools.append(sum(self.sizes.values()))
            if need > max(pools):
                placement = self.fit(need, [sorted([*self.view.training_server_ids, *self.loaned])])
        if placement is None:
            self.wait_for_training(job, need)
            return not (self.blocked and not self.lyra.backfill and room <= 0)
        self.place(job, placement)
        if self.lyra.elastic and job.spec.elastic:
            self.base[job.id], self.flex[job.id] = placement, {}
            self.elastic_jobs.append(job)
            self.admitted.append(job)
        return True

    def training_estimate(self, job: JobView, need: int) -> tuple[float, float, str | None]:
        """Earliest expected finish (s from now) on training GPUs, the wait before it, the type."""
        best, best_wait, best_type = math.inf, math.inf, None
        for gpu_type in (t for t, size in self.sizes.items() if need <= size):
            wait = self.wait_for(gpu_type, self.waiting.get(gpu_type, 0) + need - self.available(gpu_type))
            finish = wait + self.time_on(job, need, gpu_type)
            if finish < best:
                best, best_wait, best_type = finish, wait, gpu_type
        return best, best_wait, best_type

    def loaned_pays(self, job: JobView, need: int, placement: Alloc) -> bool:
        """Does ``job`` finish sooner on loaned ``placement`` (to the end, or moving back when training GPUs
        would be its) than by waiting? Only stays that end before demand reclaims its servers count."""
        if self.lyra.loaned_rule == "overflow":
            return True
        on_training, wait, training_type = self.training_estimate(job, need)
        on_loaned = self.time_on(job, need, self.types[next(iter(placement))])
        options = [(on_loaned, on_loaned)]  # (expected finish, time on loaned GPUs)
        if self.lyra.move_back and on_loaned > wait and training_type is not None:
            rest = (1.0 - wait / on_loaned) * self.time_on(job, need, training_type)
            options.append((wait + self.view.overheads.migrate_s + rest, wait))
        spare = {s for s in self.loaned if self.avail[s] == self.capacity[s]}  # reclaimed first, with idle ones
        threshold = len(self.view.inference_server_ids) - len(self.loaned) + len(spare) - len(spare & set(placement))
        safe = self.view.next_demand_above(threshold) - self.view.now
        return min((finish for finish, stay in options if stay <= safe), default=math.inf) < on_training

    def wait_for_training(self, job: JobView, need: int) -> None:
        """``job`` waits for training GPUs: counted ahead of later jobs; without backfill it blocks them."""
        holding = [t for t, size in self.sizes.items() if need <= size]
        if not holding and not (self.spanning and need <= sum(self.sizes.values())):
            return
        if not self.lyra.backfill:
            self.blocked = True
        gpu_type = holding[0] if len(holding) == 1 else self.training_estimate(job, need)[2] if holding else None
        if gpu_type is not None:
            self.first_need.setdefault(gpu_type, need)
            self.waiting[gpu_type] = self.waiting.get(gpu_type, 0) + need

    def move_back(self, job: JobView) -> bool:
        """Move ``job`` from loaned to training GPUs when migrate_s plus its time there beats staying."""
        placement = self.fit_training(job.workers)
        if placement is None:
            self.wait_for_training(job, job.workers)
            return False
        if self.lyra.value_rate == "goodput":  # like with like: the engine's rate where it runs
            stay = job.remaining_work / job.rate
        else:
            stay = self.time_on(job, job.workers, self.types[next(iter(job.allocation))])
        stay += max(0.0, job.overhead_until - self.view.now)
        move = self.time_on(job, job.workers, self.types[next(iter(placement))])
        if self.view.overheads.migrate_s + move >= stay:
            return False
        for sid, g in self.base.get(job.id, self.alloc[job.id]).items():  # free its base workers
            self.free[sid] += g
            self.avail[sid] += g
        self.place(job, placement)
        if job.id in self.base:
            self.base[job.id], self.flex[job.id] = self.split(job, placement)
            for sid, g in self.flex[job.id].items():
                self.avail[sid] += g  # its flexible workers stay up for grabs in phase 2
        return True

    def rebalance(self, round_due: bool, hold: bool) -> None:
        """The knapsack at a round or loaning change; else keep and grow when phase 1 changed something."""
        if not self.elastic_jobs:
            return
        lyra, plan = self.lyra, self.plan
        if round_due or plan.give_back or plan.borrow:
            for job_id in [j for j in lyra.granted if j not in self.alloc]:  # holds that ended with their job
                since, gpu_type = lyra.granted.pop(job_id)
                self.observe_hold(gpu_type, self.view.now - since)
            self.rebalance_types(knapsack=True)
            lyra.next_round = self.view.now + lyra.round_s
        elif self.admitted or hold or self.moved or any(  # or phase 1 displaced a flexible worker
                self.avail[s] < sum(extra.get(s, 0) for extra in self.flex.values()) for s in self.touched):
            self.rebalance_types(knapsack=False)

    def rebalance_types(self, knapsack: bool) -> None:
        """Spare GPUs of each type (free or flexible) to that type's elastic jobs, then placed. Extras
        are valued as held until the turn of a job waiting for the type (and then not grown into),
        else for the mean observed hold (at least a round), else (``completion``) to the end."""
        lyra, by_type = self.lyra, dict[str, list[JobView]]()  # GPU type -> its elastic jobs
        for job in self.elastic_jobs:
            by_type.setdefault(self.types[next(iter(self.base[job.id]))], []).append(job)
        for gpu_type, typed in by_type.items():
            capacity = sum(self.avail[s] for s, t in enumerate(self.types) if t == gpu_type)
            need = self.first_need.get(gpu_type)
            waiting = None if need is None else self.wait_for(gpu_type, need - self.available(gpu_type))
            horizon = waiting if waiting is not None else max(lyra.held_s.get(gpu_type, math.inf), lyra.round_s)
            if lyra.flex_horizon == "completion":
                horizon = math.inf
            choose = self.knapsack_choice if knapsack else self.keep_choice
            choice = choose(typed, capacity, gpu_type, horizon, waiting is None)
            for job, new in zip(typed, choice):  # a hold lasts from a grant to the next decrease
                current = sum(self.flex[job.id].values()) if job.workers else 0
                since = lyra.granted.get(job.id)
                if new < current and since is not None:
                    self.observe_hold(gpu_type, self.view.now - since[0])
                if new > current or (new < current and new):
                    lyra.granted[job.id] = (self.view.now, gpu_type)
                elif not new:
                    lyra.granted.pop(job.id, None)
            self.place_extras(gpu_type, typed, choice)

    def observe_hold(self, gpu_type: str, held_s: float) -> None:  # exponentially weighted mean
        mean = self.lyra.held_s.get(gpu_type)
        if held_s > 0:
            self.lyra.held_s[gpu_type] = held_s if mean is None else mean + HOLD_EWMA * (held_s - mean)

    def keep_choice(self, typed: list[JobView], capacity: int, gpu_type: str, horizon: float,
                    grow: bool) -> list[int]:
        """Between rounds: jobs keep the extras that still have room (in job order); displaced ones
        move only when that pays the stall; a new job grows to its most valuable size."""
        room, kept, lost = list(self.avail), [], []
        for job in typed:
            k = 0
            for sid, g in self.flex[job.id].items():
                k, room[sid] = k + min(g, room[sid]), room[sid] - min(g, room[sid])
            kept.append(k)
            lost.append(sum(self.flex[job.id].values()) - k)
        left, overheads, choice = capacity - sum(kept), self.view.overheads, []
        for job, k, displaced in zip(typed, kept, lost):
            spec, want = job.spec, k
            if self.levels and not self.levels.get(job.id, NEUTRAL_JOB_LEVEL):
                want = 0
            elif job.workers:
                moved = min(displaced, left)
                if moved > 0:
                    workers = spec.min_gpus + k
                    stay = self.time_on(job, workers, gpu_type) + overheads.rescale_s
                    move = self.time_on(job, workers + moved, gpu_type) + (
                        overheads.migrate_s if moved == displaced else overheads.rescale_s)
                    if move < stay:
                        want, left = k + moved, left - moved
            elif grow:
                top = min(spec.num_gpus - spec.min_gpus, left)
                if top > 0:
                    want = int(np.argmax(self.value_row(job, gpu_type, top, horizon)))
                    left -= want
            choice.append(want)
        return choice

    def knapsack_choice(self, typed: list[JobView], capacity: int, gpu_type: str, horizon: float,
                        grow: bool) -> list[int]:
        """Extras per job maximising the JCT seconds saved (MCKP); a running job pays a rescale to change."""
        values = []
        for job in typed:
            spec, current = job.spec, sum(self.flex[job.id].values())
            level = self.levels.get(job.id, NEUTRAL_JOB_LEVEL)
            top = min(spec.max_gpus - spec.min_gpus, capacity) if level else 0
            row = self.value_row(job, gpu_type, top if grow else min(top, current), horizon)
            if job.workers > 0:  # v - rescale for every k but the current one
                row = [v if k == current else v - self.view.overheads.rescale_s for k, v in enumerate(row)]
            values.append(row if level == NEUTRAL_JOB_LEVEL else [v * 2.0 ** (level - NEUTRAL_JOB_LEVEL) for v in row])
        return solve(values, capacity, self.lyra.knapsack_exact_limit)

    def place_extras(self, gpu_type: str, typed: list[JobView], choice: list[int]) -> None:
        """Jobs keep what they can of their extras (loaned first); the rest go largest job first on
        spare servers, loaned ones first, so that a reclaim becomes a scale-in."""
        avail, loaned, left = self.avail, set(self.loaned), list(choice)
        extras: list[Alloc] = [{} for _ in typed]
        for i, job in enumerate(typed):
            for sid, g in sorted(self.flex[job.id].items(), key=lambda kv: (kv[0] not in loaned, kv[0])):
                keep = min(g, avail[sid], left[i])
                if keep:
                    extras[i][sid], avail[sid], left[i] = keep, avail[sid] - keep, left[i] - keep
        spare = sorted((s for s, t in enumerate(self.types) if t == gpu_type and avail[s] > 0),
                       key=lambda s: s not in loaned)  # stable: ascending ids, loaned first
        for i in sorted((i for i in range(len(typed)) if left[i] > 0), key=lambda i: (-left[i], typed[i].index)):
            for sid in spare:
                g = min(avail[sid], left[i])
                if g:
                    extras[i][sid] = extras[i].get(sid, 0) + g
                    avail[sid] -= g
                    left[i] -= g
        for job, extra in zip(typed, extras):
            base = self.base[job.id]
            alloc = {sid: base.get(sid, 0) + extra.get(sid, 0) for sid in {**base, **extra}}  # base servers first
            if alloc != self.alloc.get(job.id):
                self.alloc[job.id] = alloc
