"""Lyra, the reference: the paper's two phases over the public view, to read first.

``lyra-reference`` decides what ``lyra`` (``baselines/lyra.py``) decides, plan for plan
(``tests/baselines/test_reference_equivalence.py`` checks it at every decision), without its speed work: no
caches, no change feed, one plain :class:`_Decision` per decision reading only the public
``ClusterView``/``JobView``. Read, fork and ablate it; run it for small studies (O(jobs x servers)
per decision).

Each decision (Li et al., EuroSys 2023): loaning (``baselines/loaning.py``: answer a reclaim,
borrow idle inference servers); **phase 1** (:meth:`_Decision.admit`): queued jobs, shortest
remaining time first, get their base demand on training GPUs, or on loaned GPUs when that finishes
sooner, and jobs on loaned GPUs move back when it pays; **phase 2** (:meth:`_Decision.rebalance`):
at a round a multiple-choice knapsack (``baselines/knapsack.py``) gives elastic jobs the extra
workers worth most JCT seconds; between rounds jobs keep theirs and admitted jobs grow.
Remembered across decisions: the round clock, the observed holds of extra workers, and (under
``oracle``) each running job's expected finish as first read for its allocation
(:meth:`_Decision.timeline`). The switches are ``LyraScheduler``'s, documented there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Mapping

import numpy as np

from lyra_baselines.knapsack import DEFAULT_EXACT_LIMIT, solve
from lyra_baselines.loaning import Loaning, free_after, loan_param, reclaim_rule_param
from lyra_baselines.placement import place
from lyra_gym.model.jobs import JobState
from lyra_gym.sim.params import MAX_S, MIN_TICK_S, check_fields, param
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL, Guidance, Scheduler
from lyra_gym.sim.view import ClusterView, JobView

__all__ = ["LyraReferenceScheduler"]

HOLD_EWMA = 0.1  # weight of the newest observed hold of extra workers (assumption, as lyra's)
Alloc = dict[int, int]  # server id -> GPUs


@dataclass
class LyraReferenceScheduler(Scheduler):
    """``lyra``'s switches (``LyraScheduler``'s docstring), decided by the plain algorithm."""

    reads = frozenset({"remaining_work", "remaining_time_at", "total_work", "expected_finish"})
    loan: bool = loan_param(True)
    elastic: bool = param(True, "scale elastic jobs above their minimum")
    fixed_size: str = param("requested", "with elastic=false: run elastic jobs at their requested or min size",
                            choices=("requested", "min"))
    reclaim_rule: str = reclaim_rule_param()
    reserve_servers: int = param(0, "loanable servers left unborrowed", lo=0, hi=100_000, unit="servers")
    backfill: bool = param(False, "admit later jobs past one that does not fit")
    loaned_rule: str = param("speed", "onto loaned GPUs when it finishes sooner there (speed), or whenever "
                             "training GPUs are full (overflow)", choices=("speed", "overflow"))
    move_back: bool = param(True, "move a job from loaned to free training GPUs when that pays")
    flex_horizon: str = param("queue", "how long the knapsack assumes extra workers are held",
                              choices=("queue", "completion"))
    value_rate: str = param("goodput", "rate of the remaining-time estimates and knapsack values",
                            choices=("goodput", "throughput"))
    knapsack_exact_limit: int = param(DEFAULT_EXACT_LIMIT, "DP cells above which the greedy knapsack is used",
                                      lo=0, hi=10**8, unit="cells")
    round_s: float = param(60.0, "seconds between knapsack rounds (the tick when elastic)", lo=MIN_TICK_S,
                           hi=MAX_S, unit="s")
    loaning: Loaning = field(init=False)
    name = "lyra-reference"

    def __post_init__(self) -> None:
        check_fields(self)
        self.loaning = Loaning(enabled=self.loan, reserve_servers=self.reserve_servers, reclaim_rule=self.reclaim_rule)
        self.reset(np.random.default_rng(0))

    @property
    def tick_interval(self) -> float | None:  # type: ignore[override]
        """A tick every ``round_s`` when elastic: a quiet cluster still gets its knapsack round."""
        return self.round_s if self.elastic else None

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.next_round = -math.inf  # s: the next knapsack round is due at the first decision after it
        self.last_decision = -math.inf  # s: the last decision that was not a skipped tick
        self.granted: dict[str, tuple[float, str]] = {}  # job id -> (when extras were granted, GPU type)
        self.held_s: dict[str, float] = {}  # GPU type -> smoothed observed hold of extra workers (s)
        self.finishes: dict[str, tuple[Mapping[int, int], float]] = {}  # job -> (allocation, finish s)

    def base_demand(self, job: JobView) -> int:
        """GPUs ``job`` is admitted at: an elastic job's minimum (scaled, or run at it), else its request."""
        if job.spec.elastic and (self.elastic or self.fixed_size == "min"):
            return job.spec.min_gpus
        return job.spec.num_gpus

    def decide(self, view: ClusterView) -> Plan:
        return self.decide_guided(view, Guidance())

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Loaning, phase 1, phase 2, under an agent's ``guidance`` (``Guidance``'s docstring)."""
        round_due = self.elastic and view.now >= self.next_round
        if view.tick_only and not guidance.preempt and (not round_due or view.now - self.last_decision < self.round_s):
            return view.current_plan()  # a tick brings only the round of a cluster quiet for a whole round
        self.last_decision = view.now
        plan = view.current_plan()
        self.loaning.prepare(view, plan, self.rng, guidance.borrow_fraction, guidance.return_levels)
        # preempted (after the reclaim answer): back to the queue, not restarted in this decision,
        # those the reclaim answer already stopped included
        preempt = {job_id for job_id in guidance.preempt if _is_running(view, job_id)}
        for job_id in preempt:
            plan.allocations.pop(job_id, None)
        levels = guidance.job_levels
        hold = self.elastic and any(level == 0 and job_id in plan.allocations and sum(
            plan.allocations[job_id].values()) > view.job(job_id).spec.min_gpus for job_id, level in levels.items())
        if not (view.num_queued or round_due or plan.give_back or plan.borrow or hold or self._may_move_back(view)
                or preempt):
            return plan  # nothing to admit, return, move back or rebalance
        decision = _Decision(self, view, plan, levels, preempt)
        decision.admit()
        decision.rebalance(round_due, hold)
        return plan

    def _may_move_back(self, view: ClusterView) -> bool:
        """A job runs wholly on loaned GPUs and a training GPU is free."""
        if not self.move_back:
            return False
        training = set(view.training_server_ids)
        free = view.free_gpus()
        return any(training.isdisjoint(job.allocation) for job in view.running_jobs()) and any(
            free[s] for s in training)


class _Decision:
    """One decision's state. ``avail``: free GPUs plus flexible workers per server (phase 1 may
    displace flexible workers); ``base``/``flex``: the elastic jobs' base and extra workers."""

    def __init__(self, lyra: LyraReferenceScheduler, view: ClusterView, plan: Plan, levels: Mapping[str, int],
                 preempted: set[str]) -> None:
        self.lyra, self.view, self.plan, self.levels, self.preempted = lyra, view, plan, levels, preempted
        self.alloc = plan.allocations
        self.types = [s.gpu_type for s in view.servers]
        self.capacity = [s.num_gpus for s in view.servers]
        self.per_server: dict[str, int] = {}  # GPU type -> GPUs per server
        for s in view.servers:
            self.per_server.setdefault(s.gpu_type, s.num_gpus)
        self.training = frozenset(view.training_server_ids)
        self.training_types = self._by_type(view.training_server_ids)  # GPU type -> ids, first seen first
        self.spanning = list(view.training_server_ids) if (
            view.allow_mixed_gpu_types and len(self.training_types) > 1) else None
        back = set(plan.give_back)
        self.loaned = sorted({*(s for s in view.loaned_servers() if s not in back), *plan.borrow})
        self.loaned_set = frozenset(self.loaned)
        self.loaned_groups = list(self._by_type(self.loaned).values())
        self.free = free_after(view, plan)
        self.base: dict[str, Alloc] = {}
        self.flex: dict[str, Alloc] = {}
        self.elastic_jobs: list[JobView] = []  # running elastic jobs in start order, then admitted ones
        for job in view.running_jobs():
            if lyra.elastic and job.spec.elastic and job.id in self.alloc:
                self.base[job.id], self.flex[job.id] = self.split(job, self.alloc[job.id])
                self.elastic_jobs.append(job)
        self.avail = list(self.free)
        for extra in self.flex.values():
            for sid, g in extra.items():
                self.avail[sid] += g
        self.admitted: list[JobView] = []
        self.moved = False  # a job moved from loaned to training GPUs
        self.blocked = False  # a job waits for training GPUs and backfill is off
        self.touched: set[int] = set()  # servers a placement took GPUs on
        self.waiting: dict[str, int] = {}  # training GPU type -> base GPUs of the jobs waiting for it
        self.first_need: dict[str, int] = {}  # training GPU type -> base GPUs of the first job waiting
        self.placed: list[tuple[float, int, str]] = []  # (finish s, GPUs, type) of jobs placed on training now

    def _by_type(self, ids: list[int] | tuple[int, ...]) -> dict[str, list[int]]:
        groups: dict[str, list[int]] = {}  # GPU type -> ids, first-seen type first
        for sid in ids:
            groups.setdefault(self.types[sid], []).append(sid)
        return groups

    def split(self, job: JobView, alloc: Mapping[int, int]) -> tuple[Alloc, Alloc]:
        """Base and flexible workers of an allocation: the base on training servers first."""
        base_left = self.lyra.base_demand(job)
        base, flex = {}, {}
        for sid in sorted(alloc, key=lambda s: (s not in self.training, s)):
            b = min(alloc[sid], base_left)
            base_left -= b
            if b:
                base[sid] = b
            if alloc[sid] - b:
                flex[sid] = alloc[sid] - b
        return base, flex

    # ------------------------------------------------------------------ rates and times
    def rate(self, job: JobView, workers: int, gpu_type: str) -> float:
        """The job's rate (samples/s) on ``workers`` GPUs of ``gpu_type`` packed, by ``value_rate``."""
        if workers < 1:
            return 0.0
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
        if view.scaling == "adaptive" or workers < 1:
            return job.remaining_time_at(workers)
        return job.remaining_work / view.goodput(job, workers, *view.reference_server())

    def value_row(self, job: JobView, gpu_type: str, top: int, horizon: float) -> list[float]:
        """JCT seconds saved by k = 0..top extra workers: held h = min(horizon, T(k)) they save
        h * (r_k / r_0 - 1); taken back before the job ends (h < T(k)) they cost a rescale."""
        low = job.spec.min_gpus
        rates = np.array([self.rate(job, low + k, gpu_type) for k in range(top + 1)])
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = rates / rates[0] - 1.0
            times = job.remaining_work / rates
        if math.isinf(horizon):
            return list((times[0] - times).tolist())
        held = np.minimum(horizon, times)
        row = held * gain
        row[1:] -= np.where(held[1:] < times[1:], self.view.overheads.rescale_s, 0.0)
        return list(row.tolist())

    # ------------------------------------------------------------------ training GPUs
    def available(self, gpu_type: str) -> int:
        """Free or flexible GPUs on training servers of ``gpu_type``."""
        return sum(self.avail[s] for s in self.training_types[gpu_type])

    def timeline(self, gpu_type: str) -> tuple[list[float], list[int]]:
        """When training GPUs of ``gpu_type`` free up: (finish times ascending, GPUs freed by then).
        Each running job unchanged by this plan frees its base GPUs there at its expected finish,
        as does each job placed on training GPUs now. Under ``oracle`` a job's finish is the one
        first read for its allocation (a rate change at a progress part is not seen: ``lyra``'s
        approximation, which the golden results pin); under a knowledge mode it is read afresh."""
        view, releases, finishes = self.view, [], {}
        for job in view.running_jobs():
            alloc = self.alloc.get(job.id)
            if alloc is None or alloc is not job.allocation:
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
        releases += [(t, g) for t, g, typ in self.placed if typ == gpu_type]
        releases.sort()  # the order of equal times changes no wait
        return [t for t, _ in releases], list(accumulate(g for _, g in releases))

    def wait_for(self, gpu_type: str, deficit: int) -> float:
        """Seconds until ``deficit`` more training GPUs of ``gpu_type`` than available now free up."""
        if deficit <= 0:
            return 0.0
        times, freed = self.timeline(gpu_type)
        reached = [t for t, n in zip(times, freed) if n >= deficit]
        return max(0.0, reached[0] - self.view.now) if reached else math.inf

    def horizon(self, gpu_type: str) -> float | None:
        """Seconds until the first job waiting for ``gpu_type`` would get it (None: none waits)."""
        need = self.first_need.get(gpu_type)
        if need is None or gpu_type not in self.training_types:
            return None
        return self.wait_for(gpu_type, need - self.available(gpu_type))

    # ------------------------------------------------------------------ placement
    def fit(self, need: int, groups: list[list[int]]) -> Alloc | None:
        """The placement rule on free GPUs of the first group that holds ``need``; else on ``avail``."""
        rule = self.view.placement
        for free in (self.free, self.avail):
            for group in groups:
                placement = place(rule, free, self.capacity, need, group)
                if placement is not None:
                    return placement
        return None

    def fit_training(self, need: int) -> Alloc | None:
        """:meth:`fit` on one training GPU type; across types only when none can hold the job."""
        placement = self.fit(need, list(self.training_types.values()))
        if placement is None and self.spanning and all(
                need > len(ids) * self.per_server[t] for t, ids in self.training_types.items()):
            placement = self.fit(need, [self.spanning])
        return placement

    def pool_sizes(self) -> list[int]:
        """GPUs of each pool one job may use alone: training types, loaned types, all training."""
        sizes = [len(ids) * self.per_server[t] for t, ids in self.training_types.items()]
        sizes += [len(g) * self.per_server[self.types[g[0]]] for g in self.loaned_groups]
        return sizes + ([sum(sizes[: len(self.training_types)])] if self.spanning else [])

    def loaned_room(self) -> int:  # free or flexible GPUs on loaned servers
        return sum(self.avail[s] for s in self.loaned)

    def place(self, job: JobView, placement: Alloc) -> None:
        """Occupy ``placement``: free GPUs first, then flexible workers; note a training release."""
        for sid, g in placement.items():
            self.free[sid] -= min(g, self.free[sid])
            self.avail[sid] -= g
        self.touched.update(placement)
        if self.loaned_set.isdisjoint(placement):
            gpu_type, need = self.types[next(iter(placement))], sum(placement.values())
            self.placed.append((self.view.now + self.time_on(job, need, gpu_type), need, gpu_type))

    def release(self, job_id: str) -> None:
        """Free a running job's base GPUs (its flexible ones already count as available)."""
        for sid, g in self.base.get(job_id, self.alloc[job_id]).items():
            self.free[sid] += g
            self.avail[sid] += g

    # ------------------------------------------------------------------ phase 1
    def admit(self) -> None:
        """Phase 1 over the shortest-first line (an agent's levels first): queued jobs, those our
        reclaim answer just stopped, and jobs on loaned GPUs holding their place (``move_back``)."""
        view, levels = self.view, self.levels
        line = list(view.queued_jobs())
        if self.plan.give_back:
            line += [j for j in view.running_jobs() if j.id not in self.alloc and j.id not in self.preempted]
        moving = {j.id for j in view.running_jobs() if self.lyra.move_back and self.on_loaned(j)}
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

    def on_loaned(self, job: JobView) -> bool:
        """Runs wholly on loaned GPUs, unchanged by this plan (a move-back candidate)."""
        alloc = self.alloc.get(job.id)
        return alloc is not None and self.training.isdisjoint(alloc) and job.rate > 0 and alloc is job.allocation

    def admit_one(self, job: JobView) -> bool:
        """Place ``job``'s base demand, or let it wait; False when no later job can be placed."""
        need = self.lyra.base_demand(job)
        placement = None if self.blocked else self.fit_training(need)
        if placement is None and self.loaned_groups and self.loaned_room() >= need:
            candidate = self.fit(need, self.loaned_groups)
            if candidate is not None and self.loaned_pays(job, need, candidate):
                placement = candidate
        if placement is None and self.loaned and self.view.allow_mixed_gpu_types and need > max(self.pool_sizes()):
            placement = self.fit(need, [sorted([*self.view.training_server_ids, *self.loaned])])
        if placement is None:
            self.wait_for_training(job, need)
            return not (self.blocked and not self.lyra.backfill and self.loaned_room() <= 0)
        self.place(job, placement)
        self.alloc[job.id] = placement
        if self.lyra.elastic and job.spec.elastic:
            self.base[job.id], self.flex[job.id] = placement, {}
            self.elastic_jobs.append(job)
            self.admitted.append(job)
        return True

    def training_estimate(self, job: JobView, need: int) -> tuple[float, float, str | None]:
        """Earliest expected finish (s from now) on training GPUs, the wait before it, the type."""
        best, best_wait, best_type = math.inf, math.inf, None
        for gpu_type, ids in self.training_types.items():
            if need > len(ids) * self.per_server[gpu_type]:
                continue
            wait = self.wait_for(gpu_type, self.waiting.get(gpu_type, 0) + need - self.available(gpu_type))
            finish = wait + self.time_on(job, need, gpu_type)
            if finish < best:
                best, best_wait, best_type = finish, wait, gpu_type
        return best, best_wait, best_type

    def loaned_pays(self, job: JobView, need: int, placement: Alloc) -> bool:
        """Does ``job`` finish sooner on loaned ``placement`` (to the end, or moving back when training
        GPUs would be its) than by waiting? Only stays ending before the next reclaim count."""
        if self.lyra.loaned_rule == "overflow":
            return True
        on_training, wait, training_type = self.training_estimate(job, need)
        on_loaned = self.time_on(job, need, self.types[next(iter(placement))])
        options = [(on_loaned, on_loaned)]  # (expected finish, time on loaned GPUs)
        if self.lyra.move_back and on_loaned > wait and training_type is not None:
            rest = (1.0 - wait / on_loaned) * self.time_on(job, need, training_type)
            options.append((wait + self.view.overheads.migrate_s + rest, wait))
        safe = self.safe_loaned_s(placement)
        return min((finish for finish, stay in options if stay <= safe), default=math.inf) < on_training

    def safe_loaned_s(self, placement: Alloc) -> float:
        """Seconds until demand reclaims a server of ``placement`` (idle ones and loaned ones without
        a base worker go first)."""
        view = self.view
        spare = {s for s in self.loaned if self.avail[s] == self.capacity[s]}
        threshold = len(view.inference_server_ids) - len(self.loaned) + len(spare) - len(spare & set(placement))
        return view.next_demand_above(threshold) - view.now

    def wait_for_training(self, job: JobView, need: int) -> None:
        """``job`` waits for training GPUs: counted ahead of later jobs; without backfill it blocks them."""
        holding = [t for t, ids in self.training_types.items() if need <= len(ids) * self.per_server[t]]
        spans = bool(self.spanning) and need <= sum(len(ids) * self.per_server[t]
                                                    for t, ids in self.training_types.items())
        if not holding and not spans:
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
        gpu_type = self.types[next(iter(placement))]
        if self.lyra.value_rate == "goodput":  # like with like: the engine's rate where it runs
            stay = job.remaining_work / job.rate
        else:
            stay = self.time_on(job, job.workers, self.types[next(iter(job.allocation))])
        stay += max(0.0, job.overhead_until - self.view.now)
        if self.view.overheads.migrate_s + self.time_on(job, job.workers, gpu_type) >= stay:
            return False
        self.release(job.id)
        self.place(job, placement)
        self.alloc[job.id] = placement
        if job.id in self.base:
            self.base[job.id], self.flex[job.id] = self.split(job, placement)
            for sid, g in self.flex[job.id].items():
                self.avail[sid] += g  # its flexible workers stay up for grabs in phase 2
        return True

    # ------------------------------------------------------------------ phase 2
    def rebalance(self, round_due: bool, hold: bool) -> None:
        """The knapsack at a round or loaning change; else keep and grow when phase 1 changed something."""
        if not self.elastic_jobs:
            return
        lyra, plan = self.lyra, self.plan
        if round_due or plan.give_back or plan.borrow:
            if lyra.flex_horizon == "queue":  # holds that ended with their job (seen within a round)
                for job_id in [j for j in self.lyra.granted if j not in self.alloc]:
                    since, gpu_type = self.lyra.granted.pop(job_id)
                    self.observe_hold(gpu_type, self.view.now - since)
            self.rebalance_types(knapsack=True)
            lyra.next_round = self.view.now + lyra.round_s
            return
        flex_on = [0] * len(self.avail)
        for extra in self.flex.values():
            for sid, g in extra.items():
                flex_on[sid] += g
        evicted = any(self.avail[s] < flex_on[s] for s in self.touched)
        if self.admitted or evicted or hold or self.moved:
            self.rebalance_types(knapsack=False)

    def rebalance_types(self, knapsack: bool) -> None:
        """Spare GPUs of each type (free or flexible) to that type's elastic jobs, then placed."""
        by_type: dict[str, list[JobView]] = {}
        for job in self.elastic_jobs:
            by_type.setdefault(self.types[next(iter(self.base[job.id]))], []).append(job)
        for gpu_type, typed in by_type.items():
            capacity = sum(self.avail[s] for s, t in enumerate(self.types) if t == gpu_type)
            waiting = self.horizon(gpu_type)
            horizon = self.hold_horizon(waiting, gpu_type)
            grow = waiting is None  # spare GPUs of a type a job waits for are that job's
            choose = self.knapsack_choice if knapsack else self.keep_choice
            choice = choose(typed, capacity, gpu_type, horizon, grow)
            self.learn_hold(gpu_type, typed, choice)
            self.place_extras(gpu_type, typed, choice)

    def hold_horizon(self, waiting: float | None, gpu_type: str) -> float:
        """Seconds extra workers are likely held: until a waiting job's turn, else the mean hold."""
        if self.lyra.flex_horizon == "completion":
            return math.inf
        if waiting is not None:
            return waiting
        return max(self.lyra.held_s.get(gpu_type, math.inf), self.lyra.round_s)

    def observe_hold(self, gpu_type: str, held_s: float) -> None:  # exponentially weighted mean
        held = self.lyra.held_s
        if held_s > 0:
            mean = held.get(gpu_type)
            held[gpu_type] = held_s if mean is None else mean + HOLD_EWMA * (held_s - mean)

    def learn_hold(self, gpu_type: str, typed: list[JobView], choice: list[int]) -> None:
        """Observe how long extra workers were held: from a grant to the next decrease."""
        granted = self.lyra.granted
        for job, new in zip(typed, choice):
            current = sum(self.flex[job.id].values()) if job.workers else 0
            since = granted.get(job.id)
            if new < current and since is not None:
                self.observe_hold(gpu_type, self.view.now - since[0])
            if new > current or (new < current and new):
                granted[job.id] = (self.view.now, gpu_type)
            elif not new:
                granted.pop(job.id, None)

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
        rescale, values = self.view.overheads.rescale_s, []
        for job in typed:
            spec, current = job.spec, sum(self.flex[job.id].values())
            level = self.levels.get(job.id, NEUTRAL_JOB_LEVEL)
            top = min(spec.max_gpus - spec.min_gpus, capacity) if level else 0
            if not grow:
                top = min(top, current)
            row = self.value_row(job, gpu_type, top, horizon)
            if job.workers > 0:  # v - rescale for every k but the current one
                row = [v if k == current else v - rescale for k, v in enumerate(row)]
            values.append(row if level == NEUTRAL_JOB_LEVEL else [v * 2.0 ** (level - NEUTRAL_JOB_LEVEL) for v in row])
        return solve(values, capacity, self.lyra.knapsack_exact_limit)

    def place_extras(self, gpu_type: str, typed: list[JobView], choice: list[int]) -> None:
        """Jobs keep what they can of their extras (loaned first); the rest go largest job first on
        spare servers, loaned ones first, so that a reclaim becomes a scale-in."""
        avail, loaned, extras, left = self.avail, self.loaned_set, [], list(choice)
        for i, job in enumerate(typed):
            extra: Alloc = {}
            for sid, g in sorted(self.flex[job.id].items(), key=lambda kv: (kv[0] not in loaned, kv[0])):
                keep = min(g, avail[sid], left[i])
                if keep:
                    extra[sid], avail[sid], left[i] = keep, avail[sid] - keep, left[i] - keep
            extras.append(extra)
        spare = [s for s, t in enumerate(self.types) if t == gpu_type and avail[s] > 0]
        spare = [s for s in spare if s in loaned] + [s for s in spare if s not in loaned]
        for i in sorted((i for i in range(len(typed)) if left[i] > 0), key=lambda i: (-left[i], typed[i].index)):
            for sid in spare:
                g = min(avail[sid], left[i])
                if g:
                    extras[i][sid] = extras[i].get(sid, 0) + g
                    avail[sid] -= g
                    left[i] -= g
        for job, extra in zip(typed, extras):
            alloc = dict(self.base[job.id])
            for sid, g in extra.items():
                alloc[sid] = alloc.get(sid, 0) + g
            if extra != self.flex[job.id] and alloc != self.alloc.get(job.id):
                self.alloc[job.id] = alloc


def _is_running(view: ClusterView, job_id: str) -> bool:
    """Is ``job_id`` a running job of ``view`` (unknown ids: no)?"""
    try:
        return view.job(job_id).state is JobState.RUNNING
    except KeyError:
        return False
