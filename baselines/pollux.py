"""Pollux: goodput-driven elastic allocation with a restart penalty.

After Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI 2021, and its simulator (adaptdl,
``simulator/pollux.py``).

What is modelled
----------------
- **Goodput** = throughput x statistical efficiency, by default the engine's own
  (``view.goodput``: the profile's throughput packed onto the pool's servers, the
  measured noise scale of the run's ``scaling`` rule), as if Pollux's online fit
  were exact. Under ``scaling: adaptive`` each GPU count is valued at its best
  batch and the plan sends that batch (Pollux's batch-size adaptation). With
  ``batch_range="application"`` (default, as the Pollux artifact:
  ``simulator/simulator.py`` creates Pollux's jobs without the workload's
  batch, ``update_local_bsz`` / ``goodput.py`` ``optimize``) the batch is
  searched over the application's range, not the workload's: 50 batches
  spaced geometrically from ``max(M0, n x min_local_batch)`` to the largest
  measured batch (:func:`application_batches`; ``M0`` the application's
  initial batch, the efficiency data's smallest), with gradient accumulation
  above GPU memory, a micro-batch below the profile's ``min_local_batch``
  rejected; so a job starts near ``M0`` whatever the workload's
  ``batch_size``, which only non-adaptive policies (tiresias, fifo, lyra) run
  at. Models in ``fixed_batch_models`` (default ``ncf``, which the artifact
  pins to its workload batch 32,768 under Pollux) keep the workload's batch.
  ``batch_range="workload"`` is the old rule (:func:`batch_candidates`: from
  the workload's batch ``B0`` up, never below it, to 64 ``B0`` and GPU
  memory); models without a per-batch efficiency curve always use it. ``noise_scale_ratio`` / ``model_noise_scale_ratio``
  switch to Pollux's assumed model instead: ``E(M) = (phi + M0) / (phi + M)``
  with ``M = x * local_batch``, ``M0 = num_gpus * local_batch`` and
  ``phi = ratio * M0`` (an assumption; the traces carry no noise scale).
- **Speed-up** of job j at ``x`` GPUs = goodput(x) / goodput at the
  ``speedup_base``: ``fair-share`` (default, as Pollux's ``Problem``: the pool's
  GPUs split evenly over its jobs, rounded up) or ``request`` (the job's
  requested GPUs on the first training server's type).
- **Objective**: the power mean (exponent ``p``, default -1 as in Pollux's
  simulator) of the speed-ups of the *admitted* jobs, maximised exactly (for
  the jobs' pools) by :func:`lyra_baselines.pollux_optimizer.best_sizes`, a
  dynamic programme where Pollux runs a genetic algorithm.
- **Pools**: the training servers and the loaned servers are two pools, each
  sized and placed on its own, and a job runs in one of them: a queued job
  joins the training pool if its minimum fits there, else the loaned pool;
  a running job stays in its pool. (Pollux assumes identical GPUs; left to
  it, a job spread over V100 and T4 servers would run at the T4 pace while
  the optimiser counted V100 speed.) Without loaning there is one pool.
  Unless ``allow_mixed_gpu_types``, each of the two is split by GPU type
  (training types first, in server order): a pool of several types counted
  GPUs no one job could use together, so an elastic job sized to them was
  never placed (issue 23: 2 V100 + 12 A100 GPUs, a job of 4-16 never ran).
- **Spanning** (``allow_mixed_gpu_types`` only, as ``lyra`` does): a queued
  job whose minimum no pool can ever hold runs on all training servers and
  loaned ones together (``lyra_baselines.placement.spanning_group``), at its
  minimum and the slowest worker's pace. It is admitted after the per-pool
  admission (its minimum is the largest, so Pollux's most-jobs order would
  take it last), before sizing (an unallocated job costs more than any
  speed-up), if the pools' spare GPUs cover it: they are reserved, training
  pools first, and placed once every pool is placed. A running spanning job is
  left as it is (not preempted, resized or re-batched; a reclaim may stop it).
- A job whose minimum exceeds what any pool, or the spanning set, could ever
  hold (every inference server on loan, with ``loan``) never starts: the first
  decision that sees it queued warns, naming it (``UnrunnableJobWarning``).
- **Who gets GPUs** (admission). A job with no GPUs has speed-up 0; Pollux's
  simulator adds 1e-3 to every speed-up, so an unallocated job costs
  1/1e-3 = 1000 in the p = -1 sum while an allocated one costs about 1: its
  optimiser first runs as many jobs as possible, then balances speed-ups. We
  make that order explicit. With ``preempt`` (default, as Pollux, which may
  give any job zero GPUs): per pool, the most jobs whose minimums fit, then
  the most of those already running there, smallest minimums first
  (:func:`lyra_baselines.pollux_optimizer.most_jobs`, exact); a running job left
  out is preempted (a large inelastic job gives way to several small ones).
  With ``preempt=false``: running jobs stay admitted (scaled down to their
  minimum if need be; only a reclaim stops one) and queued jobs are admitted
  in Pollux's priority order (never-started jobs in submit order, then
  preempted ones by least attained GPU-time) while their minimum fits
  (``backfill`` skips one that does not fit, else it blocks those behind it).
  Then the power mean over the admitted jobs sizes them. Minimum =
  ``min_gpus`` for an elastic job (it may get ``min_gpus..max_gpus``),
  ``num_gpus`` for an inelastic one (exactly that); the trace or
  ``all_jobs_elastic`` says which jobs are elastic.
- **Restart penalty**: a running job whose GPU count would change has its
  speed-up multiplied by Pollux's ``max(age - R * delay, 0) / (age + delay)``
  (age = now - submit, R = re-allocations this scheduler made so far,
  delay = ``restart_penalty_s``), so a change happens only when the objective
  still gains after the discount; young jobs are not thrashed. Starting a
  newly admitted job is never discounted (it is not optional once admitted),
  nor is a job a reclaim already changes.
- **When**: every decision point (arrivals, completions, demand changes) and
  a ``tick_interval`` tick (default 60 s, Pollux's scheduling interval), so
  restart factors that grow with age are re-evaluated. (Pollux itself waits
  for its next 60 s round; the exact optimiser is cheap enough not to.)
- **Placement**: a job whose count is unchanged keeps its GPUs. Changed and
  new jobs, largest first, are best-fit packed (fewest servers) in their
  pool (of one GPU type unless the config lets types mix).
- **Loaning** is orthogonal (``baselines/loaning.py``): ``loan`` borrows every
  loanable inference server at every decision; reclaims are answered first,
  by ``reclaim_rule``, whether or not ``loan`` is set.

**Guided** (``decide_guided``; ``decide`` is it with an empty Guidance, so the two cannot drift;
``baselines/guided.py``): the ``preempt`` jobs are stopped first and are not admitted again in the
same decision (their GPUs go to others); ``borrow_fraction`` / ``return_levels`` go to
``Loaning.prepare``; job levels are admission tiers, highest first, each tier admitted by the rule
above on what higher tiers left (a queued job at level 0 is not admitted; a running one at level 0
gives way first and, if elastic, is held at its minimum), and weights ``2 ** (level - 2)`` of the
jobs' terms in the power mean. All levels neutral and nothing preempted = plain Pollux, bit for bit.

Left out: learning-rate scaling (AdaScale is not modelled), online fitting of the
throughput and noise-scale models (both are known exactly), interference
avoidance and the one-distributed-job-per-node rule, placement optimised
jointly with sizes (the GA's node matrix), cluster autoscaling, the 16-node cap
per job, moving jobs between pools, and heterogeneity beyond one pool per type
(with ``allow_mixed_gpu_types`` a pool of several GPU types is valued at its
first server's type; Sia's territory).

Parameters (dataclass fields, defaults and sources)
---------------------------------------------------
=========================  =========  ==============================================
``p``                      -1.0       power-mean exponent (Pollux simulator)
``noise_scale_ratio``      None       phi / M0 for every model: Pollux's assumed
                                      efficiency instead of the engine's (2.0 was
                                      this baseline's old assumption)
``model_noise_scale_ratio`` {}        per-model ratio (the rest use 2.0)
``speedup_base``           fair-share ``fair-share`` (Pollux) or ``request``
``preempt``                True       any job may get zero GPUs (Pollux)
``batch_range``            application ``application`` (M0 .. largest measured batch, the
                                      artifact) or ``workload`` (B0 .. 64 B0, old)
``fixed_batch_models``     ("ncf",)   models whose jobs keep the workload's batch
``restart_penalty_s``      30.0       Pollux's restart delay (adaptdl simulator;
                                      equals the engine's default rescale_s)
``tick_interval``          60.0       s between re-optimisations (Pollux)
``backfill``               True       without ``preempt``: admit later queued jobs
                                      past one that does not fit
``loan``                   False      borrow idle inference servers
``reclaim_rule``           "cost"     which loaned servers to return (loaning.py)
=========================  =========  ==============================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from lyra_baselines.loaning import Loaning, free_after, loan_param, reclaim_rule_param
from lyra_baselines.placement import best_fit, take, warn_unrunnable
from lyra_baselines.guided import Levels, preempt_jobs
from lyra_baselines.pollux_admission import admit, admit_running, minimum, place_spanning
from lyra_baselines.pollux_batches import BATCH_POINTS as BATCH_POINTS
from lyra_baselines.pollux_batches import MAX_BATCH_GROWTH as MAX_BATCH_GROWTH
from lyra_baselines.pollux_batches import application_batches, batch_candidates
from lyra_baselines.pollux_optimizer import best_sizes, restart_factor, statistical_efficiency
from lyra_baselines.pollux_pools import Pool, build_pools, job_limit
from lyra_gym.sim.params import MAX_S, MIN_TICK_S, check_fields, param
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Guidance, Scheduler
from lyra_gym.sim.view import ClusterView, JobView


#: What a speed-up is measured against (``speedup_base``).
SPEEDUP_BASES = ("fair-share", "request")
#: Where the adaptive batch is searched (``batch_range``).
BATCH_RANGES = ("application", "workload")
MAX_P = 10.0  # the largest |p| (Pollux uses -1; a floored speed-up, 1e-3, to the power -100 nears float64's limit)
MAX_RATIO = 1e6  # the largest noise-scale ratio phi / M0
MAX_MODELS = 1000  # the most model keys in model_noise_scale_ratio and fixed_batch_models


@dataclass
class PolluxScheduler(Scheduler):
    """Goodput-driven elastic allocation (see the module docstring for the model).

    :param p: power-mean exponent over the admitted jobs' speed-ups (default -1).
    :param noise_scale_ratio: if set, Pollux's assumed efficiency with noise scale phi as this
        multiple of the job's initial batch M0 = num_gpus x local_batch (default None: the
        engine's goodput).
    :param model_noise_scale_ratio: per-model-key ratios (the assumed model for those keys).
    :param speedup_base: ``"fair-share"`` (default) or ``"request"``.
    :param batch_range: ``"application"`` (default: the artifact's M0 .. largest measured batch)
        or ``"workload"`` (the old rule: from the workload's batch up).
    :param fixed_batch_models: model keys whose jobs keep the workload's batch (default ncf).
    :param restart_penalty_s: delay in Pollux's restart factor, seconds (default 30; 0 = off).
    :param tick_interval: seconds between re-optimisations besides events (default 60).
    :param backfill: without ``preempt``, skip queued jobs whose minimum does not fit (default True).
    :param preempt: any job may get zero GPUs; the most jobs that fit run (default True).
    :param loan: borrow idle inference servers (default False).
    :param reclaim_rule: ``"cost"`` (default) or ``"random"``.
    """

    reads = frozenset()  # no duration: goodput at the job's current (measured) progress part

    p: float = param(-1.0, "power-mean exponent over the admitted jobs' speed-ups", lo=-MAX_P, hi=MAX_P)
    noise_scale_ratio: float | None = param(None, "phi / M0 of Pollux's assumed efficiency for every model "
                                            "(null: the engine's goodput)", lo=0, hi=MAX_RATIO)
    model_noise_scale_ratio: Mapping[str, float] = param(factory=dict, doc="per-model-key phi / M0", lo=0,
                                                         hi=MAX_RATIO, max_items=MAX_MODELS)
    speedup_base: str = param("fair-share", "what a speed-up is measured against", choices=SPEEDUP_BASES)
    batch_range: str = param("application", "where the adaptive batch is searched", choices=BATCH_RANGES)
    fixed_batch_models: Sequence[str] = param(("ncf",), "model keys whose jobs keep the workload's batch",
                                              max_items=MAX_MODELS, scalar=True)
    restart_penalty_s: float = param(30.0, "delay in Pollux's restart factor (0: off)", lo=0, hi=MAX_S, unit="s")
    tick_interval: float | None = param(60.0, "seconds between re-optimisations besides events (null: events "
                                        "only)", lo=MIN_TICK_S, hi=MAX_S, unit="s")
    backfill: bool = param(True, "without preempt: skip queued jobs whose minimum does not fit")
    preempt: bool = param(True, "any job may get zero GPUs; the most jobs that fit run")
    loan: bool = loan_param(False)
    reclaim_rule: str = reclaim_rule_param()
    name = "pollux"

    def __post_init__(self) -> None:
        check_fields(self)
        if isinstance(self.fixed_batch_models, str):  # one model, e.g. from the command line
            self.fixed_batch_models = (self.fixed_batch_models,)
        self.loaning = Loaning(enabled=self.loan, reclaim_rule=self.reclaim_rule)
        self.rng = np.random.default_rng(0)  # replaced by the run's generator in reset()
        self._speedups: dict[tuple, np.ndarray] = {}
        self._goodputs: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._reallocations: dict[str, int] = {}
        self._batches: dict[str, float] = {}  # job id -> batch chosen at its planned size (adaptive)
        self._limit: int | None = None  # the most GPUs one job can ever get (set at the first decision)
        self._checked: set[str] = set()  # jobs checked for being never runnable

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._speedups = {}
        self._goodputs = {}
        self._reallocations = {}
        self._batches = {}
        self._limit = None
        self._checked = set()

    @property
    def assumed_efficiency(self) -> bool:
        """Does this run use the assumed ``phi = ratio x M0`` model instead of the engine's goodput?"""
        return self.noise_scale_ratio is not None or bool(self.model_noise_scale_ratio)

    # --- the goodput model --------------------------------------------------------------
    def speedups(self, view: ClusterView, model: str, num_gpus: int, lo: int, hi: int,
                 gpu_type: str | None = None, gpus_per_server: int | None = None) -> np.ndarray:
        """Speed-ups of a ``model`` job requesting ``num_gpus`` at ``lo..hi`` GPUs packed on servers of
        ``gpus_per_server`` GPUs of ``gpu_type`` (default: the first training server's), relative
        to its requested GPUs packed on the first training server's type. A read-only array."""
        ref = view.servers[view.training_server_ids[0]]
        gpu_type = gpu_type or ref.gpu_type
        gpus_per_server = gpus_per_server or ref.num_gpus
        key = (model, num_gpus, gpu_type, gpus_per_server, ref.gpu_type, ref.num_gpus)
        table = self._speedups.get(key)
        if table is None or len(table) < hi:
            profiles = view.profiles
            batch = profiles.model(model).local_batch
            ratio = self.model_noise_scale_ratio.get(model, 2.0 if self.noise_scale_ratio is None else self.noise_scale_ratio)
            m0 = num_gpus * batch
            base = profiles.packed_throughput(model, num_gpus, ref.gpu_type, ref.num_gpus)
            table = np.array([
                profiles.packed_throughput(model, x, gpu_type, gpus_per_server) / base
                * statistical_efficiency(x * batch, m0, ratio * m0)
                for x in range(1, max(hi, 2 * num_gpus) + 1)
            ])
            table.flags.writeable = False
            self._speedups[key] = table
        return table[lo - 1:hi]

    def goodputs(self, view: ClusterView, job: JobView, hi: int, gpu_type: str,
                 gpus_per_server: int) -> tuple[np.ndarray, np.ndarray]:
        """The engine's goodput of ``job`` at 1..``hi`` GPUs packed on ``gpu_type`` servers, at its
        current progress, and the batch giving it: under ``scaling: adaptive`` the best batch of
        :func:`application_batches` (or :func:`batch_candidates`, ``batch_range="workload"``) for
        each count (Pollux's batch-size adaptation), else the rule's
        own batch. Read-only arrays, cached per (model, initial batch, progress part, servers)."""
        adaptive = view.scaling == "adaptive"
        part = job.progress_part  # the true part: Pollux measures its gradient statistics as it trains
        key = (job.request.model, job.init_batch, part, gpu_type, gpus_per_server)
        cached = self._goodputs.get(key)
        if cached is not None and len(cached[0]) >= hi:
            return cached
        size = max(hi, 2 * job.request.num_gpus)
        goodput, batches = np.empty(size), np.empty(size)
        model = view.profiles.model(job.request.model)
        cap = model.max_local_batch
        limits = None
        if adaptive and self.batch_range == "application" and job.request.model not in self.fixed_batch_models:
            limits = view.batch_range(job)
        for x in range(1, size + 1):
            if adaptive:
                if job.request.model in self.fixed_batch_models:
                    candidates = [job.init_batch]
                elif limits is None:
                    candidates = batch_candidates(job.init_batch, x, cap)
                else:
                    candidates = application_batches(*limits, x, model.min_local_batch, cap)
                options = [(view.goodput(job, x, gpu_type, gpus_per_server, m), m) for m in candidates]
                goodput[x - 1], batches[x - 1] = max(options, key=lambda gm: (gm[0], -gm[1]))
            else:
                goodput[x - 1], batches[x - 1] = view.goodput(job, x, gpu_type, gpus_per_server), np.nan
        goodput.flags.writeable = batches.flags.writeable = False
        self._goodputs[key] = (goodput, batches)
        return goodput, batches

    def job_speedups(self, view: ClusterView, job: JobView, lo: int, hi: int, gpu_type: str,
                     gpus_per_server: int, fair_share: int) -> np.ndarray:
        """Speed-ups of ``job`` at ``lo..hi`` GPUs: the engine's goodput over the goodput at the
        :attr:`speedup_base` allocation (``fair-share``: ``fair_share`` GPUs, clipped to the job's
        range; ``request``: its requested GPUs on the first training server's type)."""
        request = job.request
        goodput, _ = self.goodputs(view, job, max(hi, request.max_gpus), gpu_type, gpus_per_server)
        if self.speedup_base == "fair-share":
            base = goodput[min(max(fair_share, 1), request.max_gpus) - 1]
        else:
            ref = view.servers[view.training_server_ids[0]]
            base = self.goodputs(view, job, request.num_gpus, ref.gpu_type, ref.num_gpus)[0][request.num_gpus - 1]
        return goodput[lo - 1:hi] / base

    # --- the policy ---------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Plan:
        return self.decide_guided(view, Guidance())

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Pollux's decision, modulated by an agent (an empty Guidance = plain Pollux; module
        docstring, "Guided"): loaning with the agent's borrow fraction and return levels; the
        ``preempt`` jobs stopped first and not admitted again now; job levels as admission tiers
        (level 0: a queued job is not admitted) and as weights of the power mean."""
        plan = view.current_plan()
        stopped = preempt_jobs(plan.allocations, guidance.preempt) if guidance.preempt else ()
        self.loaning.prepare(view, plan, self.rng, guidance.borrow_fraction, guidance.return_levels)
        free = free_after(view, plan)
        pools = build_pools(view, plan, free)
        if view.num_queued:
            if self._limit is None:
                self._limit = job_limit(view, self.loan)
            warn_unrunnable(view, self.name, self._limit, minimum, self._checked)
        levels = Levels(guidance.job_levels, stopped)
        dropped = admit_running(view, plan.allocations, pools)  # (1) running jobs stay in their pools
        dropped = [job for job in dropped if levels.admissible(job.id)] if levels.active else dropped
        spanning = admit(view, plan, pools, free, dropped, self.preempt, self.backfill, levels)  # (2) queued jobs
        for pool in pools:  # (3) per pool: size the elastic jobs by the power mean of speed-ups, place
            self._size_and_place(view, plan, free, pool, levels)
        place_spanning(plan.allocations, free, spanning)
        return plan

    def _size_and_place(self, view: ClusterView, plan: Plan, free: list[int], pool: Pool, levels: Levels) -> None:
        """Size the pool's elastic jobs (:meth:`_sizes`), free the GPUs of those whose count changes,
        and place them with the newly started inelastic jobs (:meth:`_place`)."""
        changed = [(job, job.request.num_gpus) for job in pool.started]
        for (job, count, _), x in zip(pool.elastic, self._sizes(view, pool, levels)):
            if x != count:
                changed.append((job, x))
                for sid, gpus in plan.allocations.get(job.id, {}).items():
                    free[sid] += gpus
        self._place(view, plan, free, pool, changed)

    def _sizes(self, view: ClusterView, pool: Pool, levels: Levels) -> list[int]:
        """GPU counts of the pool's elastic jobs, given its ``spare`` GPUs beyond their minimums;
        ``levels`` weight the jobs' terms (level 0: held at its minimum)."""
        if pool.spare == 0:
            return [job.request.min_gpus for job, _, _ in pool.elastic]
        options = []
        for job, _, current in pool.elastic:
            request = job.request
            lo = request.min_gpus
            hi = lo if levels.active and levels.level(job.id) == 0 else min(request.max_gpus, lo + pool.spare)
            if self.assumed_efficiency:
                s = self.speedups(view, request.model, request.num_gpus, lo, hi, pool.gpu_type, pool.gpus_per_server)
            else:
                fair = pool.fair_share()
                s = self.job_speedups(view, job, lo, hi, pool.gpu_type, pool.gpus_per_server, fair)
            if current is not None and self.restart_penalty_s > 0:
                age = view.now - request.submit_time
                factor = restart_factor(age, self._reallocations.get(job.id, 0), self.restart_penalty_s)
                unchanged = s[current - lo] if current <= hi else None
                s = s * factor
                if unchanged is not None:
                    s[current - lo] = unchanged
            options.append((lo, s))
        weights = [levels.weight(job.id) for job, _, _ in pool.elastic] if levels.active else None
        return best_sizes(options, sum(lo for lo, _ in options) + pool.spare, self.p, weights)

    def _place(self, view: ClusterView, plan: Plan, free: list[int], pool: Pool,
               changed: list[tuple[JobView, int]]) -> None:
        """Best-fit the ``changed`` jobs (largest first) into the pool's ``free`` GPUs."""
        allocations = plan.allocations
        changed.sort(key=lambda jx: -jx[1])  # stable: ties keep admission order
        for job, x in changed:
            placement = None
            for candidates in pool.groups:
                placement = best_fit(free, x, candidates)
                if placement is not None:
                    break
            if placement is None:  # not expected (a pool is one group): the job waits
                allocations.pop(job.id, None)
                continue
            take(free, placement)
            allocations[job.id] = placement
            if job.first_start is not None:
                self._reallocations[job.id] = self._reallocations.get(job.id, 0) + 1
        if view.scaling == "adaptive" and not self.assumed_efficiency:
            self._adapt_batches(view, plan, pool)

    def _adapt_batches(self, view: ClusterView, plan: Plan, pool: Pool) -> None:
        """Pollux's batch-size adaptation: every job of the pool in the plan runs at the batch that
        maximises its goodput at its planned GPU count (sent only when it changes)."""
        allocations = plan.allocations
        for job in (*(j for j, _, _ in pool.elastic), *pool.started, *pool.fixed):
            alloc = allocations.get(job.id)
            if not alloc:
                continue
            x = sum(alloc.values())
            _, batches = self.goodputs(view, job, x, pool.gpu_type, pool.gpus_per_server)
            batch = float(batches[x - 1])
            if batch != job.batch_size:  # the adaptive rule's current batch
                plan.batch_sizes[job.id] = batch


@dataclass
class PolluxLoanScheduler(PolluxScheduler):
    """Pollux with capacity loaning: borrows every loanable inference server (``loan=True``)."""

    loan: bool = True
    name = "pollux+loan"
