"""Lyra: capacity loaning plus two-phase elastic scheduling (Li et al., EuroSys 2023).

What it models (DESIGN.md, "The paper being modelled"):

1. **Loaning** (``baselines/loaning.py``): borrow every loanable inference
   server (``reserve_servers`` may hold some back); on a reclaim, return the
   servers of least preemption cost, greedily (or at random: ``reclaim_rule``).
2. **Phase 1, base demands**: queued jobs in shortest-job-first order by
   estimated remaining time at their requested size get their base demand
   (inelastic: requested GPUs; elastic: ``min_gpus``). Running jobs keep
   their base workers; GPUs held by running jobs' *flexible* workers (above
   their base) count as available here, so arrivals shrink elastic jobs.
   With ``backfill=False`` the first job that does not fit stops admission.
3. **Phase 2, elastic workers**: the spare GPUs go to elastic jobs by a
   multiple-choice knapsack (``baselines/knapsack.py``): item k of a job = k
   extra workers, value = the job's remaining-time reduction in seconds,
   ``T(0) - T(k)``, minus ``rescale_s`` when k differs from the job's current
   extra workers (assumption: charging the rescale keeps allocations stable).
   T(k) = remaining work / throughput of ``min + k`` workers packed on the
   job's GPU type (profile).
4. **Placement**: best fit (fewest servers, least leftover); base demands on
   training servers first, then loaned ones; flexible workers on loaned
   servers first, so a reclaim becomes a scale-in. Assumption: a job never
   mixes GPU types (a synchronous job would run at the slower type's pace);
   a job whose base sits on loaned T4 servers grows on loaned servers only.

Ablations (same code, fewer ideas): ``lyra-noloan`` (no borrowing),
``lyra-noelastic`` (elastic jobs run at their requested size), ``baseline``
(neither; the paper's comparison point).

Left out: the paper's exact preemption-cost formula and job-size predictor
(remaining time is taken from the trace's duration, an oracle, as in our SJF).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from baselines.knapsack import DEFAULT_EXACT_LIMIT, solve
from baselines.loaning import Loaning, free_after
from baselines.placement import best_fit, take
from lyra_gym.cluster import Pool
from lyra_gym.plan import Plan
from lyra_gym.scheduler import NEUTRAL_JOB_LEVEL, Guidance, Scheduler
from lyra_gym.view import ClusterView, JobView


@dataclass
class LyraScheduler(Scheduler):
    """:param loan: borrow idle inference servers (default True).
    :param elastic: scale elastic jobs above their minimum (default True); when False,
        elastic jobs run at their requested size like inelastic ones.
    :param reclaim_rule: ``"cost"`` (default) or ``"random"``.
    :param reserve_servers: loanable servers left unborrowed (default 0).
    :param backfill: admit later jobs past one that does not fit (default False).
    :param knapsack_exact_limit: DP cells above which the greedy solver is used (default 400,000).
    :param round_s: seconds between knapsack rebalancing rounds (default 60 s, assumption: the
        paper does not give its round length; Pollux re-optimises every 60 s). Between rounds
        phase 2 also runs whenever an elastic job is admitted, flexible workers are displaced,
        or servers are borrowed or returned; a completion alone waits for the next round.
    """

    loan: bool = True
    elastic: bool = True
    reclaim_rule: str = "cost"
    reserve_servers: int = 0
    backfill: bool = False
    knapsack_exact_limit: int = DEFAULT_EXACT_LIMIT
    round_s: float = 60.0
    loaning: Loaning = field(init=False)
    name = "lyra"

    def __post_init__(self) -> None:
        self.loaning = Loaning(enabled=self.loan, reserve_servers=self.reserve_servers, reclaim_rule=self.reclaim_rule)
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._next_round = -np.inf
        self._views: dict[str, JobView] = {}
        self._training_groups: list[list[int]] | None = None
        self._gpu_types: list[str] = []
        self._sjf_keys: dict[str, tuple[int, float]] = {}  # job id -> (preemptions, est. remaining s)
        self._rates: dict[tuple[str, str, int], np.ndarray] = {}
        self._splits: dict[str, tuple[Mapping[int, int], dict[int, int], dict[int, int]]] = {}

    def _remaining_estimate(self, job: JobView) -> float:
        """Seconds left at the requested size (cached: a queued job's remaining work only
        changes by running, so the key is its preemption count)."""
        cached = self._sjf_keys.get(job.id)
        if cached is not None and cached[0] == job.preemptions:
            return cached[1]
        estimate = job.remaining_time_at(job.spec.num_gpus)
        self._sjf_keys[job.id] = (job.preemptions, estimate)
        return estimate

    def _packed_rates(self, view: ClusterView, model: str, gpu_type: str, per_server: int, top: int) -> np.ndarray:
        """Samples/s of 0..top workers packed on ``gpu_type`` servers (index = workers; cached)."""
        key = (model, gpu_type, per_server)
        rates = self._rates.get(key)
        if rates is None or len(rates) <= top:
            size = max(top + 1, 2 * len(rates) if rates is not None else 65)
            rates = np.array([0.0] + [view.profiles.packed_throughput(model, w, gpu_type, per_server)
                                      for w in range(1, size)])
            self._rates[key] = rates
        return rates

    # ------------------------------------------------------------------ helpers
    def base_demand(self, job: JobView) -> int:
        return job.spec.min_gpus if self.elastic and job.spec.elastic else job.spec.num_gpus

    def _server_groups(self, view: ClusterView, plan: Plan) -> tuple[list[list[int]], list[int]]:
        """Candidate server lists in base-placement order (training by GPU type, then loaned),
        and the loaned ids usable under ``plan``."""
        if self._training_groups is None:  # the training pool never changes during a run
            by_type: dict[str, list[int]] = {}
            for sid in view.training_server_ids:
                by_type.setdefault(view.servers[sid].gpu_type, []).append(sid)
            self._training_groups = list(by_type.values())
            self._gpu_types = [s.gpu_type for s in view.servers]
        if not view.loaned_servers() and not plan.borrow:
            return self._training_groups, []
        back = set(plan.give_back)
        loaned = sorted({*(s for s in view.loaned_servers() if s not in back), *plan.borrow})
        groups = list(self._training_groups)
        loaned_by_type: dict[str, list[int]] = {}
        for sid in loaned:
            loaned_by_type.setdefault(view.servers[sid].gpu_type, []).append(sid)
        groups += list(loaned_by_type.values())
        return groups, loaned

    def _split(self, view: ClusterView, job: JobView, alloc: Mapping[int, int]) -> tuple[dict[int, int], dict[int, int]]:
        """Split an allocation into base and flexible workers: base on training servers first (cached
        per allocation object: the engine replaces, never mutates, an allocation)."""
        cached = self._splits.get(job.id)
        if cached is not None and cached[0] is alloc:
            return dict(cached[1]), dict(cached[2])
        base_left = self.base_demand(job) if self.elastic else sum(alloc.values())
        base: dict[int, int] = {}
        flex: dict[int, int] = {}
        order = sorted(alloc, key=lambda s: (view.servers[s].pool is not Pool.TRAINING, s))
        for sid in order:
            g = alloc[sid]
            b = min(g, base_left)
            base_left -= b
            if b:
                base[sid] = b
            if g - b:
                flex[sid] = g - b
        self._splits[job.id] = (alloc, base, flex)
        return dict(base), dict(flex)

    # ------------------------------------------------------------------ decide
    def decide(self, view: ClusterView) -> Plan:
        return self.decide_guided(view, Guidance())

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Lyra's decision, modulated by an agent (an empty Guidance = plain Lyra).

        Job levels: 0 holds a queued job and denies a running one extra workers; otherwise
        queued jobs are admitted by level (higher first), then shortest remaining time, and a
        job's knapsack values are scaled by 2 ** (level - neutral).
        """
        levels = guidance.job_levels
        plan = view.current_plan()
        self.loaning.prepare(view, plan, self.rng, guidance.borrow_fraction, guidance.return_levels)
        round_due = self.elastic and view.now >= self._next_round
        # an agent's hold (level 0) on a running elastic job takes effect at once, not at the next round
        hold = self.elastic and any(
            level == 0 and job_id in plan.allocations and sum(plan.allocations[job_id].values()) > view.job(job_id).spec.min_gpus
            for job_id, level in levels.items())
        if not view.num_queued and not round_due and not plan.give_back and not plan.borrow and not hold:
            return plan  # nothing to admit, return or rebalance: keep everything
        free = free_after(view, plan)
        groups, loaned = self._server_groups(view, plan)
        allocations = plan.allocations

        # Running jobs: base workers stay; flexible ones are up for grabs.
        base: dict[str, dict[int, int]] = {}
        flex: dict[str, dict[int, int]] = {}
        elastic_jobs: list[JobView] = []
        if self.elastic:
            for job_id, alloc in allocations.items():
                job = self._views.get(job_id)
                if job is None:
                    job = self._views[job_id] = view.job(job_id)
                if job.spec.elastic:
                    base[job_id], flex[job_id] = self._split(view, job, alloc)
                    elastic_jobs.append(job)
        avail = list(free)
        flex_on: dict[int, int] = {}  # flexible GPUs per server
        for f in flex.values():
            for sid, g in f.items():
                avail[sid] += g
                flex_on[sid] = flex_on.get(sid, 0) + g
        admitted_elastic = False

        # Phase 1: base demands of queued jobs, shortest remaining time first.
        waiting = list(view.queued_jobs())
        if plan.give_back:  # jobs our own reclaim answer just stopped may restart elsewhere at once
            waiting += [j for j in view.running_jobs() if j.id not in allocations]
        queued = sorted(waiting, key=lambda j: (-levels.get(j.id, NEUTRAL_JOB_LEVEL),
                                                self._remaining_estimate(j), j.index))
        for job in queued:
            if levels.get(job.id, NEUTRAL_JOB_LEVEL) == 0:
                break  # held, and so is everything sorted after it
            need = self.base_demand(job)
            placement = None
            for candidates in groups:
                placement = best_fit(avail, need, candidates)
                if placement is not None:
                    break
            if placement is None:
                if self.backfill:
                    continue
                break
            take(avail, placement)
            allocations[job.id] = placement
            if self.elastic and job.spec.elastic:
                base[job.id], flex[job.id] = placement, {}
                elastic_jobs.append(job)
                admitted_elastic = True

        evicted = any(avail[sid] < g for sid, g in flex_on.items())
        if elastic_jobs and (round_due or plan.give_back or plan.borrow):
            self._phase2(view, plan, elastic_jobs, base, flex, avail, set(loaned), levels, knapsack=True)
            self._next_round = view.now + self.round_s
        elif elastic_jobs and (admitted_elastic or evicted or hold):
            self._phase2(view, plan, elastic_jobs, base, flex, avail, set(loaned), levels, knapsack=False)
        return plan

    def _phase2(self, view: ClusterView, plan: Plan, jobs: list[JobView], base: dict[str, dict[int, int]],
                flex: dict[str, dict[int, int]], avail: list[int], loaned: set[int],
                levels: Mapping[str, int], knapsack: bool) -> None:
        """Spare GPUs to elastic jobs, per GPU type, then place the extra workers.

        At a round (``knapsack=True``) the knapsack decides. Between rounds running jobs keep
        their extra workers (moved if displaced, while room lasts) and a newly admitted job
        grows toward its requested size from the spare GPUs, in order.
        """
        by_type: dict[str, list[JobView]] = {}
        for job in jobs:
            gpu_type = view.servers[next(iter(base[job.id]))].gpu_type
            by_type.setdefault(gpu_type, []).append(job)
        for gpu_type, typed in by_type.items():
            types = self._gpu_types
            servers = [s for s, a in enumerate(avail) if a > 0 and types[s] == gpu_type]
            capacity = sum(avail[s] for s in servers)
            per_server = view.servers[servers[0]].num_gpus if servers else 1
            if knapsack:
                choice = self._knapsack_choice(view, typed, flex, capacity, gpu_type, per_server, levels)
            else:
                choice, left = [], capacity
                for job in typed:
                    spec = job.spec
                    want = sum(flex[job.id].values()) if job.workers else spec.num_gpus - spec.min_gpus
                    want = min(want, left) if levels.get(job.id, NEUTRAL_JOB_LEVEL) else 0
                    choice.append(want)
                    left -= want
            self._place_extras(plan, typed, choice, base, flex, avail, servers, loaned)

    def _knapsack_choice(self, view: ClusterView, typed: list[JobView], flex: dict[str, dict[int, int]],
                         capacity: int, gpu_type: str, per_server: int, levels: Mapping[str, int]) -> list[int]:
        """Extra workers per job maximising the total remaining-time reduction (MCKP)."""
        rescale = view.overheads.rescale_s
        values = []
        for job in typed:
            spec = job.spec
            current = sum(flex[job.id].values())
            level = levels.get(job.id, NEUTRAL_JOB_LEVEL)
            top = min(spec.max_gpus - spec.min_gpus, capacity) if level else 0
            rates = self._packed_rates(view, spec.model, gpu_type, per_server, spec.min_gpus + top)
            times = job.remaining_work / rates[spec.min_gpus: spec.min_gpus + top + 1]
            row = times[0] - times
            if job.workers > 0:  # a running job pays a rescale for any change
                penalty = np.full(len(row), rescale)
                if current <= top:
                    penalty[current] = 0.0
                row -= penalty
            if level != NEUTRAL_JOB_LEVEL:
                row *= 2.0 ** (level - NEUTRAL_JOB_LEVEL)
            values.append(row)
        # GPUs already held as flexible workers are back in avail; weights count all extras.
        return solve(values, capacity, self.knapsack_exact_limit)

    @staticmethod
    def _place_extras(plan: Plan, typed: list[JobView], choice: list[int], base: dict[str, dict[int, int]],
                      flex: dict[str, dict[int, int]], avail: list[int], servers: list[int], loaned: set[int]) -> None:
        """Place each job's extra workers: largest first; keep current flexible placement, then
        loaned servers first. Writes changed allocations into ``plan``."""
        order = sorted(range(len(typed)), key=lambda i: (-choice[i], typed[i].index))
        loaned_first = sorted(servers, key=lambda s: (s not in loaned, s))
        for i in order:
            job = typed[i]
            want = choice[i]
            extra: dict[int, int] = {}
            for sid, g in sorted(flex[job.id].items(), key=lambda kv: (kv[0] not in loaned, kv[0])):
                keep = min(g, avail[sid], want)
                if keep:
                    extra[sid] = keep
                    avail[sid] -= keep
                    want -= keep
            for sid in loaned_first:
                if want <= 0:
                    break
                g = min(avail[sid], want)
                if g:
                    extra[sid] = extra.get(sid, 0) + g
                    avail[sid] -= g
                    want -= g
            alloc = dict(base[job.id])
            for sid, g in extra.items():
                alloc[sid] = alloc.get(sid, 0) + g
            if alloc != plan.allocations.get(job.id):
                plan.allocations[job.id] = alloc


@dataclass
class LyraNoLoanScheduler(LyraScheduler):
    loan: bool = False
    name = "lyra-noloan"


@dataclass
class LyraNoElasticScheduler(LyraScheduler):
    elastic: bool = False
    name = "lyra-noelastic"


@dataclass
class BaselineScheduler(LyraScheduler):
    """The paper's comparison point: Lyra's scheduler without loaning or elastic scaling."""

    loan: bool = False
    elastic: bool = False
    name = "baseline"
