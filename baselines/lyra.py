"""Lyra: capacity loaning plus two-phase elastic scheduling (Li et al., EuroSys 2023).

What it models (DESIGN.md, "The paper being modelled"):

1. **Loaning** (``baselines/loaning.py``): borrow every loanable inference
   server (``reserve_servers`` may hold some back); on a reclaim, return the
   servers of least preemption cost, greedily (or at random: ``reclaim_rule``).
2. **Phase 1, base demands**: queued jobs in shortest-job-first order by
   estimated remaining time at their requested size get their base demand
   (inelastic: requested GPUs; elastic: ``min_gpus``) on training servers:
   truly free GPUs first, then GPUs held by running jobs' *flexible* workers
   (above their base), so an arrival shrinks an elastic job only when free
   GPUs do not suffice.
3. **Speed-aware loaning** (our reading of the paper; ``loaned_rule``): a job
   that does not fit on training GPUs goes onto loaned, slower GPUs only when
   it is expected to finish sooner there than by waiting for training GPUs
   (``baselines/lyra_estimates.py``: the profile's speed on each type, and the
   releases the running jobs and the queue ahead show). A job on loaned GPUs
   keeps its place in the shortest-first line for training GPUs and moves there
   when its turn comes and that pays after the migration stall (``move_back``).
   With ``backfill=False`` the first job that waits for training GPUs (queued,
   or on loaned GPUs in line to move back) blocks later jobs from training
   GPUs, not from loaned ones. A job too large for any one pool spans training
   and loaned servers when ``allow_mixed_gpu_types`` allows it.
4. **Phase 2, elastic workers**: every ``round_s`` (at the first event at
   least ``round_s`` after the last round, or at Lyra's tick when no event came
   for a whole round; and on loaning changes) the spare GPUs go to elastic jobs by a multiple-choice knapsack
   (``baselines/knapsack.py``): item k of a job = k extra workers, value = the
   job's JCT reduction in seconds from holding them for as long as they are
   likely held (``flex_horizon``), less the rescale stalls the change costs.
   Between rounds running jobs keep their extra workers; workers displaced by
   phase 1 are dropped (scale-in) unless moving them pays for the stall, and a
   newly admitted elastic job grows toward its requested size from spare GPUs.
5. **Placement**: base demands by the run's ``placement`` rule (``spread``:
   best fit, fewest servers, least leftover; ``consolidated``: one server up
   to a server's GPUs, else wholly free servers); a job whose
   worker count does not change keeps its servers; flexible workers go on
   loaned servers first, so a reclaim becomes a scale-in. A job never mixes
   GPU types unless the config allows it (``allow_mixed_gpu_types``; then a
   job too large for any one type may span the training types); a job whose
   base sits on loaned servers grows on loaned servers only.

Ablations (same code, fewer ideas): ``lyra-noloan`` (no borrowing),
``lyra-noelastic`` (elastic jobs run at their requested size), ``baseline``
(neither; the paper's comparison point) and ``baseline-min`` (neither, with
elastic jobs run at their minimum, the size Lyra admits them at).

**Rate model** (``value_rate``): remaining times (shortest-first order, loaned-or-wait, move-back)
and the value of extra workers use the rate the engine charges, goodput (``"goodput"``, default:
``ClusterView.goodput``, throughput x the statistical efficiency of the run's ``scaling`` rule at
the job's progress), so a knapsack value, a move-back's "stay" and "move" are in the same units as
the job's work. ``"throughput"`` is the paper-literal reading: the profile's samples/s, nothing
charged for a larger batch, in every one of those estimates (the stay included).

Left out: the paper's exact preemption-cost formula and job-size predictor
(remaining time is taken from the trace's duration, an oracle, as in our SJF).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import compress
from typing import Mapping

import numpy as np

from baselines.knapsack import DEFAULT_EXACT_LIMIT, solve
from baselines.loaning import Loaning, free_map_after
from baselines.lyra_estimates import ReleaseBook, ReleaseTimeline
from baselines.placement import capacities, place, place_in_groups
from lyra_gym.model.scaling import progress_bin
from lyra_gym.sim.cluster import Pool
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL, Guidance, Scheduler
from lyra_gym.sim.topology import FreeMap, ServerSet
from lyra_gym.sim.view import ClusterView, JobView

LOANED_RULES = ("speed", "overflow")
FLEX_HORIZONS = ("queue", "completion")
FIXED_SIZES = ("requested", "min")
VALUE_RATES = ("goodput", "throughput")
HOLD_EWMA = 0.1  # weight of the newest observed hold of extra workers (assumption)
QUEUED_CACHE_SIZE = 50_000  # queued jobs whose time-on answers _time_on keeps (then starts afresh)
_ZERO_ROW = np.zeros(1)  # the knapsack row of a job that may not change (read only)
_ZERO_ROW.flags.writeable = False


@dataclass
class LyraScheduler(Scheduler):
    """:param loan: borrow idle inference servers (default True).
    :param elastic: scale elastic jobs above their minimum (default True).
    :param fixed_size: with ``elastic=False``, run elastic jobs at their ``"requested"`` size
        (default) or at their ``"min"``.
    :param reclaim_rule: ``"cost"`` (default) or ``"random"``.
    :param reserve_servers: loanable servers left unborrowed (default 0).
    :param backfill: admit later jobs past one that does not fit (default False).
    :param loaned_rule: ``"speed"`` (default): a job goes onto loaned GPUs only when it is expected
        to finish sooner there than by waiting for training GPUs; ``"overflow"``: whenever it does
        not fit on training GPUs (the rule before speed awareness; measured in the README).
    :param move_back: move a job from loaned to free training GPUs when that pays after the
        migration stall (default True).
    :param flex_horizon: how long the knapsack assumes extra workers are held: ``"queue"``
        (default): until the first job waiting for that GPU type would get its GPUs (from the
        release timeline); when none waits, the smoothed observed holding time (at least
        ``round_s``; to completion before any was observed); ``"completion"``: always to completion.
    :param value_rate: ``"goodput"`` (default: the engine's rate, module docstring) or
        ``"throughput"`` (the profile's samples/s, the paper-literal reading).
    :param knapsack_exact_limit: DP cells above which the greedy solver is used (default 400,000).
    :param round_s: seconds between knapsack rounds (default 60 s, assumption: the paper does not
        give its round length; Pollux re-optimises every 60 s); with ``elastic`` it is also the
        scheduler's tick, so a round happens on a quiet cluster too. Between rounds phase 2 also
        runs whenever an elastic job is admitted, flexible workers are displaced, or servers are
        borrowed or returned.
    """

    loan: bool = True
    elastic: bool = True
    fixed_size: str = "requested"
    reclaim_rule: str = "cost"
    reserve_servers: int = 0
    backfill: bool = False
    loaned_rule: str = "speed"
    move_back: bool = True
    flex_horizon: str = "queue"
    value_rate: str = "goodput"
    knapsack_exact_limit: int = DEFAULT_EXACT_LIMIT
    round_s: float = 60.0
    loaning: Loaning = field(init=False)
    name = "lyra"
    _admitted_fast_path = True  # _phase2_admitted when it applies (False: always _phase2; tests compare them)

    def __post_init__(self) -> None:
        for key, value, allowed in (("loaned_rule", self.loaned_rule, LOANED_RULES),
                                    ("flex_horizon", self.flex_horizon, FLEX_HORIZONS),
                                    ("fixed_size", self.fixed_size, FIXED_SIZES),
                                    ("value_rate", self.value_rate, VALUE_RATES)):
            if value not in allowed:
                raise ValueError(f"{key}: must be one of {allowed}, got {value!r}")
        if not (math.isfinite(self.round_s) and self.round_s > 0):
            raise ValueError(f"round_s: must be a finite number > 0, got {self.round_s!r}")
        self.loaning = Loaning(enabled=self.loan, reserve_servers=self.reserve_servers, reclaim_rule=self.reclaim_rule)
        self.reset(np.random.default_rng(0))

    @property
    def tick_interval(self) -> float | None:  # type: ignore[override]
        """A tick every ``round_s`` when elastic: a cluster with no event for a whole round still
        gets its knapsack round."""
        return self.round_s if self.elastic else None

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._next_round = -np.inf
        self._last_decision = -np.inf  # s, the last decision point that was not a skipped tick
        self._views: dict[str, JobView] = {}
        self._elastic_views: dict[str, JobView | None] = {}  # job id -> its view if elastic, else None
        self._training_groups: list[list[int]] | None = None
        self._spanning: list[int] = []  # training servers of every type, when a job may span types
        self._training_types: dict[str, list[int]] = {}
        self._room_for: dict[int, tuple[list[str], bool]] = {}  # see _training_room
        self._training_ids: frozenset[int] = frozenset()
        self._gpu_types: list[str] = []
        self._per_server: dict[str, int] = {}
        self._sjf_keys: dict[str, tuple[int, float]] = {}  # job id -> (preemptions, est. remaining s)
        self._rates: dict[tuple[str, str, int], np.ndarray] = {}
        self._goodputs: dict[tuple, np.ndarray] = {}  # value_rate="goodput": see _job_rates
        self._rows: dict[tuple, tuple] = {}  # value-row rates, gains (_value_row): lists, or arrays with a rate of 0
        self._view: ClusterView | None = None  # the view of the decision under way
        self._splits: dict[str, tuple[Mapping[int, int], dict[int, int], dict[int, int]]] = {}
        self._releases: dict[str, tuple[Mapping[int, int], str, float, int]] = {}  # see _release_entry
        self._counted: dict[str, tuple[Mapping[int, int], str, float, int]] = {}  # entries in _book now
        self._book = ReleaseBook()
        self._granted: dict[str, tuple[float, str]] = {}  # job id -> (when extra workers were granted, GPU type)
        self._held_s: dict[str, float] = {}   # GPU type -> smoothed observed hold of extra workers (s)
        self._on_loaned: dict[str, None] = {}  # jobs whose base sits on loaned servers (move-back candidates)
        self._queued_times: dict[str, tuple[float, dict[tuple[int, str], float]]] = {}  # see _time_on

    # ------------------------------------------------------------------ estimates
    def _remaining_estimate(self, job: JobView) -> float:
        """Seconds a queued job has left at its requested size on the reference GPU (cached: its
        remaining work only changes by running, so the key is the preemption count)."""
        cached = self._sjf_keys.get(job.id)
        if cached is not None and cached[0] == job.preemptions:
            return cached[1]
        estimate = self._remaining_at(job, job.spec.num_gpus)
        self._sjf_keys[job.id] = (job.preemptions, estimate)
        return estimate

    def _remaining_at(self, job: JobView, workers: int) -> float:
        """Seconds left on ``workers`` reference GPUs packed, by ``value_rate``."""
        if self.value_rate == "goodput":
            return job.remaining_time_at(workers)
        return job.remaining_work / self._view.reference_throughput(job.spec.model, workers)

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

    def _job_rates(self, view: ClusterView, job: JobView, gpu_type: str, top: int) -> np.ndarray:
        """The job's rate on 0..top workers packed on ``gpu_type`` servers by ``value_rate``: goodput
        (cached per model, initial batch, requested size and progress part) or samples/s."""
        per_server = self._per_server[gpu_type]
        if self.value_rate == "throughput":
            return self._packed_rates(view, job.spec.model, gpu_type, per_server, top)
        spec = job.spec
        part = progress_bin(job.total_work - job.remaining_work, job.total_work)
        key = (spec.model, job.init_batch, spec.num_gpus, part, gpu_type, per_server)
        rates = self._goodputs.get(key)
        if rates is None or len(rates) <= top:
            size = max(top + 1, 2 * len(rates) if rates is not None else 9)
            rates = np.array([0.0] + [view.goodput(job, w, gpu_type, per_server) for w in range(1, size)])
            self._goodputs[key] = rates
        return rates

    def _time_on(self, view: ClusterView, job: JobView, workers: int, gpu_type: str) -> float:
        """Seconds ``job`` needs on ``workers`` packed GPUs of ``gpu_type`` (no overhead). A queued
        job's answers are kept while its remaining work stays the same (a pure function of it)."""
        remaining = job.remaining_work
        if job.workers:
            rate = self._job_rates(view, job, gpu_type, workers)[workers]
            return remaining / rate if rate > 0 else math.inf
        cache = self._queued_times
        entry = cache.get(job.id)
        if entry is None or entry[0] != remaining:
            if len(cache) > QUEUED_CACHE_SIZE:
                cache.clear()  # entries of jobs that started or finished long ago
            entry = cache[job.id] = (remaining, {})
        times = entry[1]
        key = (workers, gpu_type)
        seconds = times.get(key)
        if seconds is None:
            rate = self._job_rates(view, job, gpu_type, workers)[workers]
            seconds = times[key] = remaining / rate if rate > 0 else math.inf
        return seconds

    def _timeline(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]], gpu_type: str,
                  placed: list[tuple[float, int, str]]) -> ReleaseTimeline:
        """When training GPUs of ``gpu_type`` are expected to free up: every running job's expected
        finish and the base GPUs it then frees there (cached per allocation object, kept in a
        :class:`ReleaseBook` across decisions), plus the jobs placed in this decision (``placed``:
        finish, GPUs, type). A job placed or changed by this plan is left out."""
        book, counted = self._book, self._counted
        for job_id in set(counted).difference(allocations):  # stopped or finished
            _, typ, finish, held = counted.pop(job_id)
            if held:
                book.remove(typ, finish, held)
        get = counted.get
        for job_id, alloc in [(k, a) for k, a in allocations.items() if (c := get(k)) is None or c[0] is not a]:
            old = counted.pop(job_id, None)
            if old is not None and old[3]:
                book.remove(old[1], old[2], old[3])
            entry = self._release_entry(view, job_id, alloc)
            if entry is not None:
                counted[job_id] = entry
                if entry[3]:
                    book.add(entry[1], entry[2], entry[3])
        return book.timeline(view.now, gpu_type, [(t, g) for t, g, typ in placed if typ == gpu_type])

    def _release_entry(self, view: ClusterView, job_id: str, alloc: Mapping[int, int]
                       ) -> tuple[Mapping[int, int], str, float, int] | None:
        """(allocation, GPU type, expected finish s, base training GPUs it frees) of a running job,
        cached per allocation object; None for a job placed or changed by this plan."""
        entry = self._releases.get(job_id)
        if entry is None or entry[0] is not alloc:
            job = self._views.get(job_id) or view.job(job_id)
            finish = job.expected_finish
            if finish is None or alloc is not job.allocation:
                return None
            types, training = self._gpu_types, self._training_ids
            typ = types[next(iter(alloc))]
            held = sum(g for s, g in alloc.items() if s in training and types[s] == typ)
            if job.spec.elastic and self.elastic:
                held = min(held, self.base_demand(job))  # flexible workers count as available already
            entry = self._releases[job_id] = (alloc, typ, finish, held)
        return entry

    # ------------------------------------------------------------------ helpers
    def _training_gpus_free(self, view: ClusterView) -> bool:
        """Does any training server have a free GPU now?"""
        free = view.free_gpus()
        return any(free[s] for s in view.training_server_ids)

    def base_demand(self, job: JobView) -> int:
        spec = job.spec
        if spec.elastic and (self.elastic or self.fixed_size == "min"):
            return spec.min_gpus
        return spec.num_gpus

    def _server_groups(self, view: ClusterView, plan: Plan, free: FreeMap) -> tuple[list[ServerSet], list[ServerSet],
                                                                                  list[int]]:
        """Training candidate sets (by GPU type; all training servers last when types may mix),
        loaned candidate sets by type, and the loaned ids usable under ``plan``. Each set names
        its cells in the engine's index, so placements on ``free`` (made by ``free_map_after``)
        read the index."""
        topology = view.topology
        if self._training_groups is None:  # the training pool never changes during a run
            for sid in view.training_server_ids:
                self._training_types.setdefault(view.servers[sid].gpu_type, []).append(sid)
            self._training_groups = topology.type_sets(Pool.TRAINING)
            if view.allow_mixed_gpu_types and len(self._training_groups) > 1:
                self._spanning = topology.pool_set(Pool.TRAINING)
            self._cell_of = topology.cell_of
            self._training_cells = {}  # GPU type -> training cells
            for cell in topology.cells:
                if cell.pool is Pool.TRAINING:
                    self._training_cells.setdefault(cell.gpu_type, []).append(cell.index)
            self._gpu_types = [s.gpu_type for s in view.servers]
            self._capacity = capacities(view)
            self._rule = view.placement
            self._training_ids = frozenset(view.training_server_ids)
            for s in view.servers:
                self._per_server.setdefault(s.gpu_type, s.num_gpus)
            self._ids_by_type = {}  # GPU type -> server ids of that type, ascending
            for s in view.servers:
                self._ids_by_type.setdefault(s.gpu_type, []).append(s.id)
            self._inference_types = {view.servers[s].gpu_type for s in view.inference_server_ids}
        current = topology.loaned()  # ascending (the engine's index)
        if not current and not plan.borrow:
            return self._training_groups, [], []
        if plan.give_back or plan.borrow:
            back = set(plan.give_back)
            loaned = sorted({*(s for s in current if s not in back), *plan.borrow})
        else:
            loaned = list(current)
        if len(self._inference_types) == 1:  # one type of inference server: one group
            return self._training_groups, [topology.server_set(loaned, free)] if loaned else [], loaned
        return self._training_groups, topology.sets_by_type(loaned, free), loaned

    def _split_alloc(self, view: ClusterView, job: JobView, alloc: Mapping[int, int]) -> tuple[dict[int, int], dict[int, int]]:
        """Base and flexible workers of an allocation: base on training servers first."""
        base_left = self.base_demand(job) if self.elastic else sum(alloc.values())
        base: dict[int, int] = {}
        flex: dict[int, int] = {}
        for sid in sorted(alloc, key=lambda s: (view.servers[s].pool is not Pool.TRAINING, s)):
            g = alloc[sid]
            b = min(g, base_left)
            base_left -= b
            if b:
                base[sid] = b
            if g - b:
                flex[sid] = g - b
        return base, flex

    def _split(self, view: ClusterView, job: JobView, alloc: Mapping[int, int]) -> tuple[dict[int, int], dict[int, int]]:
        """:meth:`_split_alloc`, cached per allocation object (the engine replaces, never mutates, one)."""
        cached = self._splits.get(job.id)
        if cached is None or cached[0] is not alloc:
            cached = self._splits[job.id] = (alloc, *self._split_alloc(view, job, alloc))
        return cached[1], cached[2]  # shared with the cache: read only (never changed in place here)

    def _fit(self, phase1: "_Phase1", need: int, groups: list[ServerSet]) -> dict[int, int] | None:
        """The run's placement rule on truly free GPUs of any group first (from the engine's
        index); then counting flexible workers as free (a walk over the group, skipped under
        ``spread`` when the group has fewer than ``need`` such GPUs: best fit finds room iff it has)."""
        rule, capacity = self._rule, self._capacity
        placement = place_in_groups(rule, phase1.free, capacity, need, groups)
        if placement is not None:
            return placement
        avail, totals = phase1.avail, phase1.avail_cells
        spread = rule != "consolidated"
        for group in groups:
            cells = getattr(group, "cells", None)
            if spread and cells is not None and sum(totals[c] for c in cells) < need:
                continue
            placement = place(rule, avail, capacity, need, group)
            if placement is not None:
                return placement
        return None

    def _fit_training(self, phase1: "_Phase1", need: int, groups: list[ServerSet]) -> dict[int, int] | None:
        """:meth:`_fit` on one training GPU type; across types only when none can hold the job
        and the config allows mixing."""
        placement = self._fit(phase1, need, groups)
        if placement is None and self._spanning and all(need > len(g) * self._per_server[self._gpu_types[g[0]]]
                                                        for g in groups):
            placement = self._fit(phase1, need, [self._spanning])
        return placement

    def _training_room(self, need: int) -> tuple[list[str], bool]:
        """The training GPU types with ``need`` GPUs in all, and whether all training servers
        together have them when types may mix (cached: the training pool never changes)."""
        room = self._room_for.get(need)
        if room is None:
            sizes = {t: len(ids) * self._per_server[t] for t, ids in self._training_types.items()}
            holding = [t for t, size in sizes.items() if need <= size]
            room = self._room_for[need] = (holding, bool(self._spanning) and need <= sum(sizes.values()))
        return room

    @staticmethod
    def _take(free: list[int], avail: list[int], placement: Mapping[int, int]) -> None:
        """Occupy ``placement``: free GPUs first, then displacing flexible workers."""
        for sid, g in placement.items():
            free[sid] -= min(g, free[sid])
            avail[sid] -= g

    # ------------------------------------------------------------------ decide
    def decide(self, view: ClusterView) -> Plan:
        return self.decide_guided(view, Guidance())

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Lyra's decision, modulated by an agent (an empty Guidance = plain Lyra).

        Job levels: 0 holds a queued job and denies a running one extra workers; otherwise
        queued jobs are admitted by level (higher first), then shortest remaining time, and a
        job's knapsack values are scaled by 2 ** (level - neutral).
        """
        round_due = self.elastic and view.now >= self._next_round
        if view.tick_only and (not round_due or view.now - self._last_decision < self.round_s):
            # a tick only brings the knapsack round of a quiet cluster (no decision for a whole
            # round); on a busy one the round comes with the next event
            return view.current_plan()
        self._last_decision = view.now
        self._view = view
        levels = guidance.job_levels
        plan = view.current_plan()
        self.loaning.prepare(view, plan, self.rng, guidance.borrow_fraction, guidance.return_levels)
        # an agent's hold (level 0) on a running elastic job takes effect at once, not at the next round
        hold = self.elastic and any(
            level == 0 and job_id in plan.allocations and sum(plan.allocations[job_id].values()) > view.job(job_id).spec.min_gpus
            for job_id, level in levels.items())
        if not view.num_queued and not round_due and not plan.give_back and not plan.borrow and not hold:
            if not (self.move_back and self._on_loaned and self._training_gpus_free(view)):
                return plan  # nothing to admit, return, move back or rebalance: keep everything
        free = free_map_after(view, plan)  # indexed: a placement on free GPUs reads the engine's index
        training_groups, loaned_groups, loaned = self._server_groups(view, plan, free)
        allocations = plan.allocations

        # Running jobs: base workers stay; flexible ones are up for grabs.
        base: dict[str, dict[int, int]] = {}
        flex: dict[str, dict[int, int]] = {}
        elastic_jobs: list[JobView] = []
        if self.elastic:
            views, splits, kinds = self._views, self._splits, self._elastic_views
            for job_id in set(allocations).difference(kinds):  # first sight: its view, or None if inelastic
                job = views.get(job_id)
                if job is None:
                    job = views[job_id] = view.job(job_id)
                kinds[job_id] = job if job.spec.elastic else None
            for job_id in filter(kinds.__getitem__, allocations):  # the elastic ones, in start order
                alloc = allocations[job_id]
                cached = splits.get(job_id)
                if cached is None or cached[0] is not alloc:
                    cached = splits[job_id] = (alloc, *self._split_alloc(view, kinds[job_id], alloc))
                base[job_id], flex[job_id] = cached[1], cached[2]  # shared with the cache: read only
                elastic_jobs.append(kinds[job_id])
        avail = free.tolist()
        avail_cells = free.totals()  # free and flexible GPUs per cell of the index
        cell_of = self._cell_of
        flex_on: dict[int, int] = {}  # flexible GPUs per server
        for f in flex.values():
            for sid, g in f.items():
                avail[sid] += g
                flex_on[sid] = flex_on.get(sid, 0) + g
        for sid, g in flex_on.items():
            avail_cells[cell_of[sid]] += g
        phase1 = _Phase1(self, view, allocations, free, avail, loaned, avail_cells)
        admitted: list[JobView] = []  # elastic jobs placed in phase 1, in order

        # Phase 1: base demands of queued jobs, shortest remaining time first.
        estimate = self._remaining_estimate
        line = [(estimate(j), j.index, j) for j in view.queued_jobs()]
        running = []  # still running now: their remaining work is current, not cached
        if plan.give_back:  # jobs our own reclaim answer just stopped may restart elsewhere at once
            running += [j for j in view.running_jobs() if j.id not in allocations]
        moving = self._move_back_candidates(view, allocations) if self.move_back and self._on_loaned else {}
        running += moving.values()
        line += [(self._remaining_at(j, j.spec.num_gpus), j.index, j) for j in running]
        if levels:  # an agent's levels come first (higher first)
            line = [(-levels.get(j.id, NEUTRAL_JOB_LEVEL), t, i, j) for t, i, j in line]
        line.sort()  # job indices are unique: the views themselves are never compared
        moved = False
        for *_, job in line:
            if levels and levels.get(job.id, NEUTRAL_JOB_LEVEL) == 0:
                break  # held, and so is everything sorted after it
            if moving and job.id in moving:  # on loaned GPUs: holds its place in line for training GPUs
                if not phase1.blocked:
                    moved = self._move_back(view, phase1, job, training_groups, base, flex) or moved
                continue
            need = self.base_demand(job)
            placement = None if phase1.blocked else self._fit_training(phase1, need, training_groups)
            if placement is None and loaned_groups and phase1.loaned_room >= need:
                candidate = self._fit(phase1, need, loaned_groups)
                if candidate is not None and phase1.loaned_pays(job, need, candidate):
                    placement = candidate
                    self._on_loaned[job.id] = None
            if placement is None and loaned and view.allow_mixed_gpu_types and need > phase1.largest_pool(loaned_groups):
                # too large for any one pool: training and loaned servers together, as mixing is allowed
                placement = self._fit(phase1, need, [view.topology.server_set([*view.training_server_ids, *loaned],
                                                                              free)])
            if placement is None:
                phase1.wait_for_training(job, need)
                if phase1.blocked and not self.backfill and phase1.loaned_room <= 0:
                    break
                continue
            phase1.place(job, placement)
            allocations[job.id] = placement
            if self.elastic and job.spec.elastic:
                base[job.id], flex[job.id] = placement, {}
                elastic_jobs.append(job)
                admitted.append(job)

        evicted = any(avail[sid] < flex_on.get(sid, 0) for sid in phase1.touched)  # only placements take avail
        if elastic_jobs and (round_due or plan.give_back or plan.borrow):
            if self.flex_horizon == "queue":
                self._learn_ended_holds(view.now, allocations)
            self._phase2(view, plan, elastic_jobs, base, flex, avail, set(loaned), levels, phase1, knapsack=True)
            self._next_round = view.now + self.round_s
        elif elastic_jobs and (admitted or evicted or hold or moved):
            if self._admitted_fast_path and not (evicted or hold or moved or levels or view.allow_mixed_gpu_types):
                self._phase2_admitted(view, plan, elastic_jobs, admitted, base, flex, avail, set(loaned), phase1,
                                      flex_on)
            else:
                self._phase2(view, plan, elastic_jobs, base, flex, avail, set(loaned), levels, phase1, knapsack=False)
        return plan

    def _move_back_candidates(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]]) -> dict[str, JobView]:
        """Running jobs whose workers all sit on loaned servers, unchanged by this plan."""
        training, candidates = self._training_ids, {}
        for job_id in list(self._on_loaned):
            alloc = allocations.get(job_id)
            if alloc is None or any(s in training for s in alloc):
                del self._on_loaned[job_id]  # stopped, finished or already on training servers
                continue
            job = self._views.get(job_id) or view.job(job_id)
            if job.rate > 0 and alloc is job.allocation:  # not just changed by a reclaim
                candidates[job_id] = job
        return candidates

    def _move_back(self, view: ClusterView, phase1: "_Phase1", job: JobView, training_groups: list[list[int]],
                   base: dict[str, dict[int, int]], flex: dict[str, dict[int, int]]) -> bool:
        """Move ``job`` from loaned to training GPUs when its remaining time there plus the migration
        stall beats staying; when training GPUs cannot hold it now, it waits in line for them.
        Returns whether it moved."""
        allocations, avail = phase1.allocations, phase1.avail
        workers = job.workers
        placement = self._fit_training(phase1, workers, training_groups)
        if placement is None:
            phase1.wait_for_training(job, workers)
            return False
        gpu_type = self._gpu_types[next(iter(placement))]
        # like with like: staying and moving both by value_rate (goodput: the engine's rate where it
        # runs; throughput: the profile's samples/s on its loaned type)
        if self.value_rate == "goodput":
            stay = job.remaining_work / job.rate
        else:
            stay = self._time_on(view, job, workers, self._gpu_types[next(iter(job.allocation))])
        stay += max(0.0, job.overhead_until - view.now)
        if view.overheads.migrate_s + self._time_on(view, job, workers, gpu_type) >= stay:
            return False
        phase1.release(allocations[job.id], base.get(job.id))
        phase1.place(job, placement)
        allocations[job.id] = placement
        if job.id in base:
            base[job.id], flex[job.id] = self._split_alloc(view, job, placement)
            for sid, g in flex[job.id].items():
                avail[sid] += g  # its flexible workers stay up for grabs in phase 2
                phase1.avail_cells[self._cell_of[sid]] += g
        del self._on_loaned[job.id]
        return True

    def _phase2(self, view: ClusterView, plan: Plan, jobs: list[JobView], base: dict[str, dict[int, int]],
                flex: dict[str, dict[int, int]], avail: list[int], loaned: set[int],
                levels: Mapping[str, int], phase1: "_Phase1", knapsack: bool) -> None:
        """Spare GPUs to elastic jobs, per GPU type, then place the extra workers.

        At a round (``knapsack=True``) the knapsack decides. Between rounds running jobs keep
        their extra workers where they are; those displaced by phase 1 are dropped unless moving
        them pays for the stall, and a newly admitted job grows toward its requested size as far
        as that pays (same value as the knapsack's).
        """
        by_type: dict[str, list[JobView]] = {}
        for job in jobs:
            gpu_type = self._gpu_types[next(iter(base[job.id]))]
            by_type.setdefault(gpu_type, []).append(job)
        positive = (0).__lt__
        for gpu_type, typed in by_type.items():
            ids = self._ids_by_type[gpu_type]  # the servers of this type with GPUs to spare, ascending:
            servers = list(compress(ids, map(positive, map(avail.__getitem__, ids))))
            capacity = sum(map(avail.__getitem__, servers))
            waiting = phase1.horizon(gpu_type)
            horizon = self._horizon(waiting, gpu_type)
            grow = waiting is None  # spare GPUs of a type a job waits for are that job's
            if knapsack:
                choice = self._knapsack_choice(view, typed, flex, capacity, gpu_type, levels, horizon, grow)
            else:
                choice = self._keep_choice(view, typed, flex, avail, capacity, gpu_type, levels, horizon, grow)
            self._learn_hold(view.now, gpu_type, typed, flex, choice)
            self._place_extras(plan, typed, choice, base, flex, avail, servers, loaned)

    def _phase2_admitted(self, view: ClusterView, plan: Plan, jobs: list[JobView], placed: list[JobView],
                         base: dict[str, dict[int, int]],
                         flex: dict[str, dict[int, int]], avail: list[int], loaned: set[int], phase1: "_Phase1",
                         flex_on: Mapping[int, int]) -> None:
        """:meth:`_phase2` between rounds when the only change is admitted elastic jobs (no
        flexible worker displaced, no move, no agent levels, one GPU type per job): every running
        job keeps its extra workers as they are, so only the admitted jobs are visited (the same
        choices, hold observations and placements as :meth:`_keep_choice`, :meth:`_learn_hold`
        and :meth:`_place_extras`, without a walk over every running elastic job)."""
        types, now = self._gpu_types, view.now
        new_by_type: dict[str, list[JobView]] = {}
        for job in placed:  # the elastic jobs phase 1 placed (not the whole list of running ones)
            if not job.workers:  # queued in the view (a job our reclaim answer restarted keeps its workers)
                new_by_type.setdefault(types[next(iter(base[job.id]))], []).append(job)
        if len(new_by_type) > 1:  # the order of hold observations across types: the general path
            self._phase2(view, plan, jobs, base, flex, avail, loaned, {}, phase1, knapsack=False)
            return
        for gpu_type in phase1.first_need:  # _phase2 asks every type with elastic jobs for its horizon,
            if gpu_type not in new_by_type and any(types[next(iter(b))] == gpu_type for b in base.values()):
                phase1.horizon(gpu_type)  # which builds (and caches) a timeline when a job waits for it
        granted = self._granted
        # running jobs without extra workers keep none: a grant of theirs ends (as _learn_hold)
        for job_id in [j for j in granted if j in flex and not flex[j]]:
            job = self._elastic_views.get(job_id)
            if job is not None and job.workers:
                granted.pop(job_id)
        positive = (0).__lt__
        for gpu_type, admitted in new_by_type.items():
            ids = self._ids_by_type[gpu_type]
            servers = list(compress(ids, map(positive, map(avail.__getitem__, ids))))
            capacity = sum(map(avail.__getitem__, servers))
            waiting = phase1.horizon(gpu_type)
            horizon = self._horizon(waiting, gpu_type)
            left = capacity - sum(g for sid, g in flex_on.items() if types[sid] == gpu_type)  # kept extras
            wants = []
            for job in admitted:  # toward its requested size, as far as it pays (_keep_choice)
                spec, want = job.spec, 0
                top = min(spec.num_gpus - spec.min_gpus, left)
                if waiting is None and top > 0:
                    want = int(np.argmax(self._value_row(view, job, gpu_type, top, horizon)))
                    left -= want
                wants.append(want)
                if want:
                    granted[job.id] = (now, gpu_type)
                else:
                    granted.pop(job.id, None)
            if any(wants):
                self._place_admitted(plan, admitted, wants, base, avail, servers, loaned, flex_on)

    @staticmethod
    def _place_admitted(plan: Plan, admitted: list[JobView], wants: list[int], base: dict[str, dict[int, int]],
                        avail: list[int], servers: list[int], loaned: set[int], flex_on: Mapping[int, int]) -> None:
        """:meth:`_place_extras` for admitted jobs when every running job keeps its extra workers:
        largest first, on the GPUs each server has after those, loaned servers first."""
        loaned_first = [s for s in servers if s in loaned] + [s for s in servers if s not in loaned]
        spare = {s: avail[s] - flex_on.get(s, 0) for s in loaned_first}
        growing = [i for i, want in enumerate(wants) if want > 0]
        for i in sorted(growing, key=lambda i: (-wants[i], admitted[i].index)):
            job, need, extra = admitted[i], wants[i], {}
            for sid in loaned_first:
                if need <= 0:
                    break
                g = min(spare[sid], need)
                if g:
                    extra[sid] = g
                    spare[sid] -= g
                    need -= g
            alloc = dict(base[job.id])
            for sid, g in extra.items():
                alloc[sid] = alloc.get(sid, 0) + g
            if alloc != plan.allocations.get(job.id):
                plan.allocations[job.id] = alloc

    def _horizon(self, waiting: float | None, gpu_type: str) -> float:
        """Seconds extra workers of ``gpu_type`` are likely held (``flex_horizon``): until the first
        job waiting for that type gets its GPUs (``waiting``); when none waits, the mean of recently
        observed holds (exponentially weighted); inf before any was observed or with ``"completion"``."""
        if self.flex_horizon == "completion":
            return math.inf
        if waiting is not None:
            return waiting
        return max(self._held_s.get(gpu_type, math.inf), self.round_s)

    def _observe_hold(self, gpu_type: str, held_s: float) -> None:
        if held_s > 0:
            mean = self._held_s.get(gpu_type)
            self._held_s[gpu_type] = held_s if mean is None else mean + HOLD_EWMA * (held_s - mean)

    def _learn_hold(self, now: float, gpu_type: str, typed: list[JobView], flex: dict[str, dict[int, int]],
                    choice: list[int]) -> None:
        """Observe how long extra workers were held: from a grant to the next decrease."""
        granted = self._granted
        for job, new in zip(typed, choice):
            current = sum(flex[job.id].values()) if job.workers else 0
            since = granted.get(job.id)
            if new < current and since is not None:
                self._observe_hold(gpu_type, now - since[0])
            if new > current or (new < current and new):
                granted[job.id] = (now, gpu_type)
            elif not new:
                granted.pop(job.id, None)

    def _learn_ended_holds(self, now: float, allocations: Mapping[str, Mapping[int, int]]) -> None:
        """Holds that ended because the job finished or stopped (seen at a round: within ``round_s``)."""
        for job_id in [j for j in self._granted if j not in allocations]:
            since, gpu_type = self._granted.pop(job_id)
            self._observe_hold(gpu_type, now - since)

    def _value_row(self, view: ClusterView, job: JobView, gpu_type: str, top: int, horizon: float) -> list[float]:
        """Value in seconds of the job's JCT of k = 0..top extra workers of ``gpu_type``: held for
        h = min(horizon, T(k)) they save h * (r_k / r_0 - 1); extras taken back before the job
        finishes (h < T(k)) cost a rescale then. (A running job's rescale now is charged by the caller.)"""
        spec = job.spec
        # cached by everything _job_rates depends on: the model alone under value_rate="throughput";
        # under "goodput" also the job's initial batch, requested size and progress part (its key)
        if self.value_rate == "throughput":
            key = (spec.model, gpu_type, spec.min_gpus, top)
        else:
            part = progress_bin(job.total_work - job.remaining_work, job.total_work)
            key = (spec.model, job.init_batch, spec.num_gpus, part, gpu_type, spec.min_gpus, top)
        cached = self._rows.get(key)
        if cached is None:
            rates = self._job_rates(view, job, gpu_type, spec.min_gpus + top)
            rates = rates[spec.min_gpus: spec.min_gpus + top + 1]
            gain = rates / rates[0] - 1.0
            if (rates > 0).all():  # as Python floats: the same doubles, faster for short rows
                cached = self._rows[key] = (rates.tolist(), gain.tolist())
            else:
                cached = self._rows[key] = (rates, gain)
        rates, gain = cached
        remaining = job.remaining_work
        if type(rates) is not list:  # a rate of 0: numpy's inf and nan, as before
            times = remaining / rates
            if math.isinf(horizon):
                return times[0] - times
            held = np.minimum(horizon, times)
            row = held * gain
            row[1:] -= np.where(held[1:] < times[1:], view.overheads.rescale_s, 0.0)
            return list(row)
        times = [remaining / r for r in rates]
        if math.isinf(horizon):
            first = times[0]
            return [first - t for t in times]
        rescale = view.overheads.rescale_s
        row = [0.0] * len(times)
        for k, (t, g) in enumerate(zip(times, gain)):
            h = horizon if horizon < t else t  # np.minimum (t is never nan here: rates > 0)
            row[k] = h * g - rescale if k and h < t else h * g
        return row

    def _keep_choice(self, view: ClusterView, typed: list[JobView], flex: dict[str, dict[int, int]],
                     avail: list[int], capacity: int, gpu_type: str, levels: Mapping[str, int],
                     horizon: float, grow: bool) -> list[int]:
        """Extra workers per job between rounds: running jobs keep what still has room where it is;
        displaced workers move only when T(w) + migrate_s < T(w - d) + rescale_s; a new job grows
        toward its request from what is left, to the most valuable size (``_value_row``)."""
        room = list(avail)
        kept = []
        for job in typed:
            k = 0
            for sid, g in flex[job.id].items():
                take = min(g, room[sid])
                room[sid] -= take
                k += take
            kept.append(k)
        left = capacity - sum(kept)
        overheads = view.overheads
        choice = []
        for job, k in zip(typed, kept):
            spec = job.spec
            want = k
            if not levels.get(job.id, NEUTRAL_JOB_LEVEL):
                want = 0
            elif job.workers:  # running: keep, and move the displaced workers only if it pays
                lost = sum(flex[job.id].values()) - k
                moved = min(lost, left)
                if moved > 0:
                    workers = spec.min_gpus + k
                    stay = self._time_on(view, job, workers, gpu_type) + overheads.rescale_s
                    move = self._time_on(view, job, workers + moved, gpu_type) + (
                        overheads.migrate_s if moved == lost else overheads.rescale_s)
                    if move < stay:
                        want = k + moved
                        left -= moved
            elif grow:  # just admitted: toward its requested size, as far as it pays
                top = min(spec.num_gpus - spec.min_gpus, left)
                if top > 0:
                    want = int(np.argmax(self._value_row(view, job, gpu_type, top, horizon)))
                    left -= want
            choice.append(want)
        return choice

    def _knapsack_choice(self, view: ClusterView, typed: list[JobView], flex: dict[str, dict[int, int]],
                         capacity: int, gpu_type: str, levels: Mapping[str, int], horizon: float,
                         grow: bool) -> list[int]:
        """Extra workers per job maximising the total JCT reduction (MCKP over ``_value_row``);
        a running job pays ``rescale_s`` for any change; no job grows unless ``grow``."""
        rescale = view.overheads.rescale_s
        values = []
        stay = None  # the one-item row of a job that may not change: 0, less a rescale to drop extras
        for job in typed:
            spec = job.spec
            current = sum(flex[job.id].values())
            level = levels.get(job.id, NEUTRAL_JOB_LEVEL)
            top = min(spec.max_gpus - spec.min_gpus, capacity) if level else 0
            if not grow:
                top = min(top, current)
            if top == 0 and level == NEUTRAL_JOB_LEVEL and self._job_rates(
                    view, job, gpu_type, spec.min_gpus)[spec.min_gpus] > 0:
                # what _value_row and the penalty below give for top = 0, without the arrays
                if job.workers > 0 and current > 0:
                    if stay is None:
                        stay = np.array([0.0 - rescale])
                    values.append(stay)
                else:
                    values.append(_ZERO_ROW)
                continue
            row = self._value_row(view, job, gpu_type, top, horizon)
            if job.workers > 0:  # a running job pays a rescale for any change (none to stay as it is)
                same = row[current] if current <= top else None
                row = [v - rescale for v in row]
                if same is not None:
                    row[current] = same  # (x - 0.0 is x)
            if level != NEUTRAL_JOB_LEVEL:
                factor = 2.0 ** (level - NEUTRAL_JOB_LEVEL)
                row = [v * factor for v in row]
            values.append(row)
        # GPUs already held as flexible workers are back in avail; weights count all extras.
        return solve(values, capacity, self.knapsack_exact_limit)

    @staticmethod
    def _place_extras(plan: Plan, typed: list[JobView], choice: list[int], base: dict[str, dict[int, int]],
                      flex: dict[str, dict[int, int]], avail: list[int], servers: list[int], loaned: set[int]) -> None:
        """Place each job's extra workers: first every job keeps what it can of its current
        flexible placement (loaned servers first), then the rest go largest first, loaned servers
        first. Writes changed allocations into ``plan``."""
        extras: list[dict[int, int]] = []
        left = list(choice)
        for i, job in enumerate(typed):
            extra: dict[int, int] = {}
            current = flex[job.id]
            if current and left[i]:
                items = current.items() if len(current) == 1 else \
                    sorted(current.items(), key=lambda kv: (kv[0] not in loaned, kv[0]))
                for sid, g in items:
                    keep = min(g, avail[sid], left[i])
                    if keep:
                        extra[sid] = keep
                        avail[sid] -= keep
                        left[i] -= keep
            extras.append(extra)
        growing = [i for i in range(len(typed)) if left[i] > 0]  # the others take nothing more
        if growing:  # servers is ascending: loaned ones first, then the others, each ascending
            loaned_first = [s for s in servers if s in loaned] + [s for s in servers if s not in loaned]
            for i in sorted(growing, key=lambda i: (-left[i], typed[i].index)):
                extra = extras[i]
                for sid in loaned_first:
                    if left[i] <= 0:
                        break
                    g = min(avail[sid], left[i])
                    if g:
                        extra[sid] = extra.get(sid, 0) + g
                        avail[sid] -= g
                        left[i] -= g
        allocations = plan.allocations
        for job, extra in zip(typed, extras):
            if extra == flex[job.id]:
                continue  # unchanged: base and flexible workers make up allocations[job.id]
            alloc = base[job.id]
            if extra:
                alloc = dict(alloc)
                for sid, g in extra.items():
                    alloc[sid] = alloc.get(sid, 0) + g
            if alloc != allocations.get(job.id):
                allocations[job.id] = alloc if extra else dict(alloc)


class _Phase1:
    """Book-keeping of one phase 1: free and available GPUs, jobs waiting for training GPUs,
    and the speed-aware loaned test (release timelines built lazily, once per decision)."""

    def __init__(self, lyra: LyraScheduler, view: ClusterView, allocations: Mapping[str, Mapping[int, int]],
                 free: FreeMap, avail: list[int], loaned: list[int], avail_cells: list[int]) -> None:
        self.lyra, self.view, self.allocations = lyra, view, allocations
        self.free, self.avail = free, avail
        self.avail_cells = avail_cells  # sum of avail per cell of the engine's index
        self.loaned = loaned
        self.loaned_set = set(loaned)
        self.loaned_room = sum(map(avail.__getitem__, loaned))
        self.blocked = False  # a job waits for training GPUs and backfill is off
        self.touched: set[int] = set()  # servers a placement took GPUs on (the only ones avail drops on)
        self.waiting: dict[str, int] = {}      # training GPU type -> base GPUs of the jobs waiting for it
        self.first_need: dict[str, int] = {}   # training GPU type -> base GPUs of the first job waiting
        self.placed: list[tuple[float, int, str]] = []  # (finish, GPUs, type) of jobs placed on training now
        self._timelines: dict[str, ReleaseTimeline] = {}
        self._available_by_type: dict[str, int] = {}  # cleared whenever avail changes
        self._spare: set[int] | None = None            # see safe_loaned_s; cleared when loaned GPUs change
        self._safe_s: dict[int, float] = {}            # servers needed -> seconds until demand exceeds them

    def _available(self, gpu_type: str) -> int:
        """Free or flexible GPUs on training servers of ``gpu_type`` (cached until a placement)."""
        n = self._available_by_type.get(gpu_type)
        if n is None:
            totals = self.avail_cells
            n = self._available_by_type[gpu_type] = sum(totals[c] for c in self.lyra._training_cells[gpu_type])
        return n

    def timeline(self, gpu_type: str) -> ReleaseTimeline:
        timeline = self._timelines.get(gpu_type)
        if timeline is None:
            timeline = self._timelines[gpu_type] = self.lyra._timeline(self.view, self.allocations, gpu_type, self.placed)
        return timeline

    def training_estimate(self, job: JobView, need: int) -> tuple[float, float, str | None]:
        """Earliest expected finish (s from now) on training GPUs, the wait before it, and the type."""
        best, best_wait, best_type = math.inf, math.inf, None
        for gpu_type, ids in self.lyra._training_types.items():
            if need > len(ids) * self.lyra._per_server[gpu_type]:
                continue
            deficit = self.waiting.get(gpu_type, 0) + need - self._available(gpu_type)
            wait = self.timeline(gpu_type).wait_for(deficit)
            t = wait + self.lyra._time_on(self.view, job, need, gpu_type)
            if t < best:
                best, best_wait, best_type = t, wait, gpu_type
        return best, best_wait, best_type

    def loaned_pays(self, job: JobView, need: int, placement: Mapping[int, int]) -> bool:
        """Is ``job`` expected to finish sooner on ``placement`` (loaned) than by waiting for training?

        On loaned GPUs it runs at their speed to the end, or (``move_back``) until training GPUs
        would have been its, then moves there for the migration stall and the rest of its work;
        the better of the two whose time on loaned GPUs ends before the next reclaim counts.
        """
        lyra = self.lyra
        if lyra.loaned_rule == "overflow":
            return True
        on_training, wait, training_type = self.training_estimate(job, need)
        loaned_type = lyra._gpu_types[next(iter(placement))]
        on_loaned = lyra._time_on(self.view, job, need, loaned_type)
        options = [(on_loaned, on_loaned)]  # (expected finish, time on loaned GPUs): stay to the end
        if lyra.move_back and on_loaned > wait and training_type is not None:
            loaned_share = wait / on_loaned  # of the remaining work, done before moving
            options.append((wait + self.view.overheads.migrate_s + (1.0 - loaned_share) * lyra._time_on(
                self.view, job, need, training_type), wait))
        safe = self.safe_loaned_s(placement)
        return min((finish for finish, stay in options if stay <= safe), default=math.inf) < on_training

    def safe_loaned_s(self, placement: Mapping[int, int]) -> float:
        """Seconds until inference demand would reclaim a loaned server of ``placement``: reclaims
        take the non-loaned servers' slack first, then (by preemption cost) the other loaned servers
        holding no base worker; the demand curve is known ahead. A job expected to stay on loaned
        GPUs longer would be preempted there (and requeued), so it waits instead."""
        view, avail = self.view, self.avail
        if self._spare is None:  # loaned servers holding no base worker (empty or flexible only)
            capacity = self.lyra._capacity
            self._spare = {s for s in self.loaned if avail[s] == capacity[s]}
        threshold = len(view.inference_server_ids) - len(self.loaned) + len(self._spare.difference(placement))
        safe = self._safe_s.get(threshold)
        if safe is None:
            safe = self._safe_s[threshold] = view.next_demand_above(threshold) - view.now
        return safe

    def wait_for_training(self, job: JobView, need: int) -> None:
        """``job`` waits for training GPUs: later estimates count its demand ahead of theirs, and
        without backfill later jobs may not take training GPUs. A job no training pool can ever
        hold does neither (it can only run on loaned GPUs)."""
        lyra = self.lyra
        holding, spans = lyra._training_room(need)
        if not holding and not spans:
            return
        if not lyra.backfill:
            self.blocked = True
        if not holding:
            return  # only across GPU types: no one type to count it against
        gpu_type = holding[0] if len(holding) == 1 else self.training_estimate(job, need)[2]
        if gpu_type is None:
            return
        self.first_need.setdefault(gpu_type, need)
        self.waiting[gpu_type] = self.waiting.get(gpu_type, 0) + need

    def largest_pool(self, loaned_groups: list[list[int]]) -> int:
        """GPUs of the largest pool one job may use alone: a training type (all training servers
        when types may mix there) or a loaned type."""
        lyra = self.lyra
        sizes = [len(ids) * lyra._per_server[t] for t, ids in lyra._training_types.items()]
        sizes += [len(g) * lyra._per_server[lyra._gpu_types[g[0]]] for g in loaned_groups]
        if lyra._spanning:
            sizes.append(sum(len(ids) * lyra._per_server[t] for t, ids in lyra._training_types.items()))
        return max(sizes, default=0)

    def release(self, alloc: Mapping[int, int], base: Mapping[int, int] | None) -> None:
        """Free a running job's base GPUs (its flexible ones are already counted as available, and
        may have been taken by a job placed earlier in this decision)."""
        held = base if base is not None else alloc
        cell_of, totals = self.lyra._cell_of, self.avail_cells
        for sid, g in held.items():
            self.free[sid] += g
            self.avail[sid] += g
            totals[cell_of[sid]] += g
        loaned = self.loaned_set
        self.loaned_room += sum(g for s, g in held.items() if s in loaned)
        self._available_by_type.clear()
        self._update_spare(held)

    def _update_spare(self, servers: Mapping[int, int]) -> None:
        """Keep :meth:`safe_loaned_s`'s spare loaned servers current after ``avail`` changed on
        ``servers``."""
        spare = self._spare
        if spare is None:
            return
        loaned, avail, capacity = self.loaned_set, self.avail, self.lyra._capacity
        for sid in servers:
            if sid in loaned:
                if avail[sid] == capacity[sid]:
                    spare.add(sid)
                else:
                    spare.discard(sid)

    def place(self, job: JobView, placement: Mapping[int, int]) -> None:
        loaned = self.loaned_set
        on_loaned = sum(g for s, g in placement.items() if s in loaned)
        self.loaned_room -= on_loaned
        self.lyra._take(self.free, self.avail, placement)
        self.touched.update(placement)
        if on_loaned:
            self._update_spare(placement)
        cell_of, totals = self.lyra._cell_of, self.avail_cells
        for sid, g in placement.items():
            totals[cell_of[sid]] -= g
        self._available_by_type.clear()
        if not on_loaned:
            gpu_type = self.lyra._gpu_types[next(iter(placement))]
            need = sum(placement.values())
            finish = self.view.now + self.lyra._time_on(self.view, job, need, gpu_type)
            self.placed.append((finish, need, gpu_type))
            timeline = self._timelines.get(gpu_type)
            if timeline is not None:
                timeline.add(finish, need)

    def horizon(self, gpu_type: str) -> float | None:
        """Seconds until the first job waiting for training GPUs of ``gpu_type`` would get them
        (None when none waits)."""
        need = self.first_need.get(gpu_type)
        if need is None or gpu_type not in self.lyra._training_types:
            return None
        self._available_by_type.clear()  # move-back may have changed avail since
        return self.timeline(gpu_type).wait_for(need - self._available(gpu_type))


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
    """The paper's comparison point: Lyra's scheduler without loaning or elastic scaling
    (elastic jobs at their requested size)."""

    loan: bool = False
    elastic: bool = False
    name = "baseline"


@dataclass
class BaselineMinScheduler(BaselineScheduler):
    """``baseline`` with elastic jobs run at their minimum, the size Lyra admits them at."""

    fixed_size: str = "min"
    name = "baseline-min"
