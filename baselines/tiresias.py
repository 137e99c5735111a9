"""Tiresias: discretized two-dimensional least-attained-service (2D-LAS).

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning",
NSDI 2019. A job's priority is the service it has attained in GPU-seconds
(GPUs held x time, ``JobView.attained_gpu_s``), discretized into K queues, so
no job duration needs to be known. Two modes (``mode``): ``"realistic"``
(default) and ``"artifact"``, which follows the authors' simulator
(SymbioticLab/Tiresias: ``simulator/run_sim.py``, ``dlas_sim_jobs`` as
``simulator/sim_runs.sh`` runs it, ``--schedule=dlas-gpu --scheme=count``;
queues in ``simulator/jobs.py``).

Both modes:

- K queues split by attained-service thresholds. A job arrives in the top
  queue and drops a queue each time its service (counted since its last
  promotion) reaches the next threshold; it joins the tail of its new queue.
- Each decision walks the queues top-down and starts every queued job that
  fits; a job that does not fit is skipped and later ones may start.
- Preemptive: running jobs of lower priority are stopped for a queued job
  only if it then fits as a whole; victims it does not need keep running.
- Starvation promotion (the paper's STARVELIMIT; the artifact's
  ``dlas-gpu-N``), off by default: see ``starvation_factor``.
- Requested GPU counts only: elastic jobs run at their requested size. A job
  stays on one GPU type unless ``allow_mixed_gpu_types`` (then it spans types
  only when no one type has room for it), and spans training and loaned
  servers only when it is too large for every one of those pools and
  ``allow_mixed_gpu_types`` is set (realistic mode; as ``lyra`` does), since
  synchronous data parallel runs at the slowest GPU's pace: on ``bench-15d``
  letting any job span them raised ``tiresias+loan``'s mean JCT from 8,094 s
  to 8,260 s.
- A job larger than any pool could ever be (every inference server on loan,
  if ``loan``) never starts: the first decision that sees it queued warns,
  naming it (``UnrunnableJobWarning``).
- Loaning is orthogonal (``baselines/loaning.py``; the artifact has none):
  borrow loanable inference servers when ``loan`` is set, answer reclaims by
  ``reclaim_rule``. A job a reclaim stops is placed again at once if it fits
  elsewhere (the engine counts that as a migration).

Guided (``decide_guided``; ``decide`` is it with an empty Guidance; ``baselines/guided.py``):
the ``preempt`` jobs are stopped first and not restarted in the same decision; ``borrow_fraction``
and ``return_levels`` go to ``Loaning.prepare``; a job's level puts it in a tier before its queue
(higher levels first, so a higher level is served and preempts before a lower one; a running job
at level 0 is the first victim), and a queued job at level 0 stays out of the round. All levels
neutral and nothing preempted = plain Tiresias, bit for bit.

Realistic mode (default):

- Placement by the run's ``placement`` rule (``baselines/placement.py``):
  ``spread`` = best fit, one server when possible, else as few as possible;
  ``consolidated`` = one server, or wholly free servers for a larger job.
  Training servers one GPU type at a time, then loaned servers.
- FIFO inside a queue by the time the job *entered* it: its submit time, the
  instant it crossed the threshold (exact, not rounded to the tick), or the
  instant it was promoted; ties by trace order.
- Victims: running jobs of strictly lower queues, lowest priority first, so
  jobs of the same queue never preempt each other and a job that preempted
  others and is then demoted is not preempted back: no thrashing.
- Restarts cost what the run config says (``overheads.restart_s``).

Artifact mode (``mode="artifact"``), as ``dlas_sim_jobs`` does it:

- Placement by GPU count: a job fits when its pool (training GPUs of one type,
  or loaned GPUs) has as many free GPUs in total, whatever their servers; it is
  then placed on any free GPUs (best fit, spreading as needed). The
  ``placement`` rule is ignored.
- Every decision re-walks all jobs, running or not, in queue order, each
  queue in list order; a job runs if its GPUs are still left in the count, so
  a running job is preempted by anything ahead of it that now takes them.
  After the walk each queue's running jobs move ahead of its waiting ones. A
  job demoted into a queue is appended behind that queue's waiting jobs, so a
  waiting job that entered the queue earlier may preempt it at once (not in
  realistic mode); after that round it is safe from its queue-mates again.
- Free preemption: the artifact charges nothing to stop or restart a job. The
  engine charges ``overheads.restart_s`` on every (re)start and a scheduler
  cannot change that, so run this mode with the overheads zeroed, as
  ``traces/tiresias-artifact.yaml`` does; otherwise the first decision warns.

The Pollux artifact's Tiresias (petuum/adaptdl, branch ``osdi21-artifact``,
``simulator/tiresias.py`` run by ``simulator/simulator.py``) is artifact mode with
three switches (``benchmarks/pollux_crosscheck.py`` sets them; measured sizes on
workload 6 in the README):

- ``queue_order="arrival"``: a queue keeps its order (arrival, or the demotion
  that appended a job to it); running jobs do not move ahead of waiting ones, so
  a queue-mate that arrived earlier preempts a later one whenever its GPUs come
  free in the count. ``"running-first"`` (default) is the Tiresias artifact's.
- ``artifact_placement="most-free"``: a started job takes the server with the
  most free GPUs, as many as it has, and repeats (``free_gpus.most_common(1)``);
  ``"best-fit"`` (default) packs. With a profile whose step time depends only on
  one server or several (``lyra_gym/model/profiles.py``) the two give the same run
  times; the artifact's step time depends on the exact placement.
- ``rounds_only=True``: decisions only at multiples of ``tick_interval`` from time
  0 (the artifact's 60 s rounds: an arrival or a freed GPU waits for the next
  round, even on an idle cluster); reclaims are answered at once.

Left out in both modes: the profile-based placement of the paper (Tiresias
consolidates only jobs with skewed tensor sizes), the Gittins-index variant
(needs a duration distribution), and the artifact's rounding of times to
whole seconds (threshold crossings are acted on at the next decision point,
within ``tick_interval``; the artifact schedules an event at each crossing).

Parameters (dataclass fields):

- ``thresholds`` = ``(3250.0, 7200.0)`` GPU-s: 3 queues (one number: two queues, e.g.
  ``--policy-param tiresias.thresholds=57600``, the Pollux artifact's Tiresias).
  Source: the Tiresias
  artifact (``simulator/jobs.py``: ``num_queue = 3``,
  ``queue_limit = [3250, 7200, 18000]``; with three queues the third limit is
  never used). The Pollux artifact's Tiresias (petuum/adaptdl,
  ``simulator/tiresias.py``) uses 2 queues at 16 GPU-hours: ``(57600.0,)``.
- ``starvation_factor`` = ``0.0`` (off, as in both artifacts'
  defaults): a job in a lower queue that has waited at least this many times
  its run time since its last promotion returns to the top queue (its service
  count restarts). The Tiresias artifact's variants use 1, 2, 4, 8; it counts
  all waiting since the last promotion, we count the current wait
  (``JobView.waiting_s``).
- ``tick_interval`` = ``60.0`` s: extra decision points so threshold crossings
  and starvation limits are acted on within a minute (assumption; ``None`` =
  events only).
- ``loan`` = ``False``; ``reclaim_rule`` = ``"cost"`` (see ``Loaning``).
- ``mode`` = ``"realistic"``; ``"artifact"`` as above.
- ``rounds_only`` = ``False``, ``queue_order`` = ``"running-first"``,
  ``artifact_placement`` = ``"best-fit"``: the Pollux artifact's switches above
  (``queue_order`` and ``artifact_placement`` act in artifact mode only).
"""

from __future__ import annotations

import math
import warnings
from bisect import bisect_right
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import Mapping, Sequence

import numpy as np

from lyra_baselines.loaning import Loaning, free_after, free_map_after, loan_param, reclaim_rule_param
from lyra_baselines.guided import Classes, Levels, preempt_jobs
from lyra_baselines.placement import (best_fit_in_groups, capacities, groups_by_type, place, place_in_groups,
                                      spanning_group, take, warn_unrunnable)
from lyra_gym.sim.params import MAX_S, MIN_TICK_S, check_fields, param
from lyra_gym.sim.placement import FreeGPUs
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.topology import FreeMap, ServerSet
from lyra_gym.sim.scheduler import Guidance, Scheduler
from lyra_gym.sim.view import ClusterView, JobView

# (queue, when the job entered it (artifact mode: its place in it), trace index): smaller runs first
Key = tuple[int, float, int]
MODES = ("realistic", "artifact")
QUEUE_ORDERS = ("running-first", "arrival")
ARTIFACT_PLACEMENTS = ("best-fit", "most-free")
MAX_QUEUES = 32  # the most queues (thresholds + 1)
MAX_SERVICE = 1e15  # GPU-s: the largest threshold (a thousand GPUs for 30,000 years)
MAX_STARVATION = 1e6  # the largest starvation_factor
# Artifact mode: (key, job id, GPUs per pool if running, the job if waiting)
_Entry = tuple[Key, str, dict[int, int] | None, JobView | None]


@dataclass
class TiresiasScheduler(Scheduler):
    """Discretized 2D-LAS; parameters are documented in the module docstring."""

    reads = frozenset()  # no duration: attained service only (Tiresias's premise)

    thresholds: Sequence[float] = param((3250.0, 7200.0), "attained service where a job drops a queue; one "
                                        "number = two queues", lo=0, lo_open=True, hi=MAX_SERVICE, unit="GPU-s",
                                        max_items=MAX_QUEUES - 1, scalar=True)
    starvation_factor: float = param(0.0, "wait, as a multiple of run time, that returns a job to the top "
                                     "queue (0: off)", lo=0, hi=MAX_STARVATION)
    tick_interval: float | None = param(60.0, "seconds between extra decision points (null: events only)",
                                        lo=MIN_TICK_S, hi=MAX_S, unit="s")
    loan: bool = loan_param(False)
    reclaim_rule: str = reclaim_rule_param()
    mode: str = param("realistic", "realistic, or the Pollux artifact's rules", choices=MODES)
    rounds_only: bool = param(False, "decide only at multiples of tick_interval (the artifact's rounds)")
    queue_order: str = param("running-first", "artifact mode: order within a queue", choices=QUEUE_ORDERS)
    artifact_placement: str = param("best-fit", "artifact mode: where a job is placed",
                                    choices=ARTIFACT_PLACEMENTS)
    name = "tiresias"

    def __post_init__(self) -> None:
        check_fields(self)
        # a lone number is one threshold (two queues), e.g. from the command line
        self.thresholds = tuple(float(t) for t in np.atleast_1d(self.thresholds))
        th = self.thresholds
        if any(a >= b for a, b in zip(th, th[1:])):
            raise ValueError(f"thresholds: must be positive and increasing (GPU-s), got {list(th)}")
        if self.rounds_only and self.tick_interval is None:
            raise ValueError("rounds_only: needs a tick_interval (the round length)")
        self.tick_origin = 0.0 if self.rounds_only else None  # rounds at multiples of tick_interval
        self.artifact = self.mode == "artifact"
        self.loaning = Loaning(enabled=self.loan, reclaim_rule=self.reclaim_rule)
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._keys: dict[str, Key] = {}      # job id -> its queue and place there
        self._base: dict[str, float] = {}    # job id -> attained GPU-s at its last promotion
        self._next_check = -math.inf         # earliest time a running job can cross a threshold
        self._seq = 0                        # artifact mode: next place at a queue's tail
        self._overheads_checked = not self.artifact
        self._limit: int | None = None       # the most GPUs one job can ever get (set at the first decision)
        self._checked: set[str] = set()      # jobs checked for being never runnable

    # --- priorities --------------------------------------------------------------------
    def _tail(self) -> int:
        """Artifact mode: a place behind every job now in any queue."""
        self._seq += 1
        return self._seq

    def _key(self, job: JobView, now: float) -> Key:
        key = self._keys.get(job.id)
        if key is None:  # first sight (normally on arrival, with no service yet)
            queue = bisect_right(self.thresholds, job.attained_gpu_s)
            rank = self._tail() if self.artifact else job.spec.submit_time if queue == 0 else now
            key = self._keys[job.id] = (queue, rank, job.index)
        return key

    def _demote(self, view: ClusterView, now: float) -> None:
        """Move running jobs that crossed a threshold down; note when the next one can."""
        th, last, keys, next_check = self.thresholds, len(self.thresholds), self._keys, math.inf
        crossed = []  # artifact mode: (crossing time, index, job id, new queue)
        for job in view.running_jobs():
            queue, entered, index = self._key(job, now)
            if queue == last:
                continue
            service, workers = job.attained_gpu_s - self._base.get(job.id, 0.0), job.workers
            new = bisect_right(th, service)
            if new > queue:
                queue, entered = new, now - (service - th[new - 1]) / workers  # the exact crossing
                if self.artifact:
                    crossed.append((entered, index, job.id, queue))
                else:
                    keys[job.id] = (queue, entered, index)
            if queue < last:
                next_check = min(next_check, now + (th[queue] - service) / workers)
        for _, index, job_id, queue in sorted(crossed):  # to the tail, in crossing order
            keys[job_id] = (queue, self._tail(), index)
        self._next_check = next_check

    def _promote(self, job: JobView, key: Key, now: float) -> Key:
        """Starvation promotion of a queued job in a lower queue, if it is due."""
        attained = job.attained_gpu_s
        run_s = (attained - self._base.get(job.id, 0.0)) / job.spec.num_gpus
        late = job.waiting_s - self.starvation_factor * run_s
        if late < 0:
            return key
        self._base[job.id] = attained
        key = self._keys[job.id] = (0, self._tail() if self.artifact else now - late, key[2])
        return key

    # --- the policy --------------------------------------------------------------------
    def _off_round(self, view: ClusterView) -> bool:
        """``rounds_only``: True between two rounds (multiples of ``tick_interval`` from 0)."""
        interval = self.tick_interval
        assert interval is not None  # rounds_only needs one (checked in __post_init__)
        k = view.now / interval
        return abs(k - round(k)) > 1e-9

    def decide(self, view: ClusterView) -> Plan:
        return self.decide_guided(view, Guidance())

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Tiresias's decision, modulated by an agent (an empty Guidance = plain Tiresias; module
        docstring, "Guided"): loaning with the agent's borrow fraction and return levels; the
        ``preempt`` jobs stopped first and not started again now; a job's level shifts its queue
        (level 0: a queued job stays out of the round, a running one is the first victim)."""
        off_round = self.rounds_only and self._off_round(view) and not view.reclaim_pending
        if off_round and not guidance.preempt:
            return view.current_plan()  # as the Pollux artifact: arrivals and freed GPUs wait for the round
        plan = view.current_plan()
        stopped = preempt_jobs(plan.allocations, guidance.preempt) if guidance.preempt else frozenset()
        if off_round:
            return plan
        self.loaning.prepare(view, plan, self.rng, guidance.borrow_fraction, guidance.return_levels)
        if not self._overheads_checked:
            self._check_overheads(view)
        if view.num_queued:
            if self._limit is None:
                self._limit = self._job_limit(view)
            warn_unrunnable(view, self.name, self._limit, _requested, self._checked)
        now = view.now
        if now >= self._next_check:
            self._demote(view, now)
        waiting = self._waiting(view, plan, now)
        levels = Levels(guidance.job_levels, stopped)
        if levels.active:
            waiting = [(key, job) for key, job in waiting if levels.admissible(job.id)]
        classes = Classes(self._keys, len(self.thresholds) + 1, levels)
        if not waiting:
            return plan
        if self.artifact:
            return self._artifact_round(view, plan, waiting, now, classes)
        waiting.sort(key=classes.order)
        self._realistic_round(view, plan, waiting, now, classes)
        return plan

    def _waiting(self, view: ClusterView, plan: Plan, now: float) -> list[tuple[Key, JobView]]:
        """The jobs that may start now, with their keys (arrivals first, unsorted): queued jobs
        (promoted if starving), and running jobs a reclaim just stopped (they may start elsewhere)."""
        keys = self._keys
        waiting = [(keys.get(job.id) or self._key(job, now), job) for job in view.queued_jobs()]  # arrivals first
        if self.starvation_factor > 0:
            waiting = [(self._promote(job, key, now) if key[0] > 0 else key, job) for key, job in waiting]
        if plan.give_back:  # jobs a reclaim just stopped may start again elsewhere
            allocations = plan.allocations
            waiting += [(self._key(j, now), j) for j in view.running_jobs() if j.id not in allocations]
        return waiting

    def _realistic_round(self, view: ClusterView, plan: Plan, waiting: list[tuple[Key, JobView]],
                         now: float, classes: Classes) -> None:
        """Realistic mode: start the ``waiting`` jobs (in key order) that fit, each preempting
        lower queues if it then fits as a whole; stop at the first job when nothing is free and
        nothing lower could be preempted."""
        allocations = plan.allocations
        free = free_map_after(view, plan)  # indexed: placements read the engine's index
        all_cells = range(len(view.topology.cells))
        free_total = free.total(all_cells)  # 0 on servers training may not use
        rule, capacity = view.placement, capacities(view)
        pools = self._pools(view, plan, free)
        largest = max(sum(map(capacity.__getitem__, pool)) for pool in pools)
        held = None  # GPUs held per queue by running jobs, computed when first needed
        for key, job in waiting:
            need, c = job.spec.num_gpus, classes.of(job.id)
            groups = pools
            if need > largest:  # too large for every pool: training and loaned servers together, if allowed
                span = spanning_group(view, self._loaned(view, plan), need)
                groups = [span] if span else pools
            placement = place_in_groups(rule, free, capacity, need, groups) if need <= free_total else None
            if placement is None:
                if held is None:
                    held = self._held(view, allocations, now, classes)
                room = sum(held[c + 1:])  # what preempting every lower class would free
                if free_total + room < need:
                    if free_total == 0 and room == 0:
                        break  # the rest are in this queue or lower: nothing more can start
                    continue
                placement = self._preempt(c, need, allocations, free, groups, held, rule, capacity, classes)
                if placement is None:
                    continue
                free_total = free.total(all_cells)
            take(free, placement)
            free_total -= need
            allocations[job.id] = placement
            self._started(job, key[0], now)

    def _started(self, job: JobView, queue: int, now: float) -> None:
        """Note when a job started now can first cross its queue's threshold."""
        if queue < len(self.thresholds):
            service = job.attained_gpu_s - self._base.get(job.id, 0.0)
            self._next_check = min(self._next_check, now + (self.thresholds[queue] - service) / job.spec.num_gpus)

    def _held(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]], now: float,
              classes: Classes) -> list[int]:
        """GPUs held per priority class (queue, without levels) by the jobs ``allocations`` keeps running."""
        held, keys = [0] * classes.count, self._keys
        for job_id, alloc in allocations.items():
            if job_id not in keys:  # started by someone else (an env driving part of the cluster)
                self._key(view.job(job_id), now)
                self._next_check = now
            held[classes.of(job_id)] += sum(alloc.values())
        return held

    def _preempt(self, queue: int, need: int, allocations: dict, free: FreeGPUs, pools: list[Sequence[int]],
                 held: list[int], rule: str, capacity: Sequence[int], classes: Classes) -> dict[int, int] | None:
        """Stop running jobs of classes below ``queue`` (the queue, without levels), lowest priority
        first, until ``need`` GPUs fit in one server group by the placement ``rule``; keep the victims
        the fit does not need. Returns the placement, or None (then nothing is stopped)."""
        of = classes.of
        spread = rule != "consolidated"  # best fit fits whenever the group has ``need`` GPUs free
        lowest_first = sorted(allocations, key=classes.running_order, reverse=True)
        for pool in pools:
            members = set(pool)
            if type(free) is FreeMap and type(pool) is ServerSet and pool.cells is not None:
                have = free.total(pool.cells)
            else:
                have = sum(free[sid] for sid in pool)
            trial = None if spread else list(free)  # consolidated: free GPUs with the victims stopped
            chosen = []  # (job id, its GPUs in this pool)
            ok = False
            for job_id in lowest_first:
                if of(job_id) <= queue or ok:
                    break
                gpus = sum(g for sid, g in allocations[job_id].items() if sid in members)
                if gpus:
                    chosen.append((job_id, gpus))
                    have += gpus
                    if trial is not None:
                        _add(trial, allocations[job_id], 1)
                    ok = have >= need if trial is None else place(rule, trial, capacity, need, pool) is not None
            if not ok:
                continue
            for item in reversed(chosen[:-1]):  # highest priority first
                if trial is None:
                    if have - item[1] >= need:
                        chosen.remove(item)
                        have -= item[1]
                    continue
                _add(trial, allocations[item[0]], -1)
                if place(rule, trial, capacity, need, pool) is not None:
                    chosen.remove(item)
                else:
                    _add(trial, allocations[item[0]], 1)
            for job_id, _ in chosen:
                for sid, gpus in allocations.pop(job_id).items():
                    free[sid] += gpus
                    held[of(job_id)] -= gpus
            return place(rule, free, capacity, need, pool)  # fits: checked above
        return None

    @staticmethod
    def _loaned(view: ClusterView, plan: Plan) -> list[int]:
        gone = set(plan.give_back)
        return [s for s in (*view.loaned_servers(), *plan.borrow) if s not in gone]

    def _pools(self, view: ClusterView, plan: Plan, free: FreeMap | None = None) -> list[Sequence[int]]:
        """Server-id groups to place on, in order: training servers one GPU type at a time (then
        all of them if ``allow_mixed_gpu_types``), then loaned ones. A job spans training and
        loaned servers only when it is too large for every one of these and mixing is allowed
        (:func:`~lyra_baselines.placement.spanning_group`; it runs at the slower pace)."""
        pools: list[Sequence[int]] = groups_by_type(view, view.training_server_ids)
        loaned: Sequence[int] = self._loaned(view, plan)
        if loaned and free is not None and all(a < b for a, b in zip(loaned, loaned[1:])):
            loaned = view.topology.server_set(loaned, free)  # ascending: placements on it read the index
        return [*pools, loaned] if loaned else pools

    def _job_limit(self, view: ClusterView) -> int:
        """The most GPUs one job can ever get: the largest pool with every inference server on
        loan (if ``loan``), or (realistic mode, mixing allowed) training and inference together."""
        def size(ids: Sequence[int]) -> int:
            return sum(view.servers[sid].num_gpus for sid in ids)

        sizes = [size(group) for group in groups_by_type(view, view.training_server_ids)]
        if self.loan and view.inference_server_ids:
            sizes.append(size(view.inference_server_ids))
            if view.allow_mixed_gpu_types and not self.artifact:
                sizes.append(size(view.training_server_ids) + sizes[-1])
        return max(sizes, default=0)

    # --- artifact mode -----------------------------------------------------------------
    def _artifact_pools(self, view: ClusterView, plan: Plan) -> list[tuple[Sequence[int], list[Sequence[int]]]]:
        """Artifact mode: (servers counted together, groups to place on in order) per pool. A pool
        is the training servers of one GPU type (all training servers if
        ``allow_mixed_gpu_types``; placed on one type when one can hold the job), or the loaned
        servers."""
        training = list(view.training_server_ids)
        groups = groups_by_type(view, training)
        pools: list[tuple[Sequence[int], list[Sequence[int]]]]
        if view.allow_mixed_gpu_types:
            pools = [(training, groups)]
        else:
            pools = [(g, [g]) for g in groups]
        loaned = self._loaned(view, plan)
        return [*pools, (loaned, [loaned])] if loaned else pools

    def _artifact_round(self, view: ClusterView, plan: Plan, waiting: list[tuple[Key, JobView]],
                        now: float, classes: Classes) -> Plan:
        """One scheduling round of the artifact's ``dlas-gpu`` with ``--scheme=count``: walk every
        job, running or not, in queue order; a job runs if its pool still has its GPUs (a count,
        not servers); a running job that no longer fits is preempted. Then, in every queue, the
        running jobs move ahead of the waiting ones (order kept otherwise)."""
        allocations = plan.allocations
        free = free_after(view, plan)
        pools = self._artifact_pools(view, plan)
        room = [sum(free[sid] for sid in ids) for ids, _ in pools]  # GPUs per pool, as if empty
        entries = self._artifact_running(view, allocations, pools, room, now)
        entries += [(key, job.id, None, job) for key, job in waiting]
        entries.sort(key=itemgetter(0))
        if classes.tiered:  # levels first (stable: key order within a level)
            entries.sort(key=lambda e: classes.of(e[1]) // classes.queues)
        victims, starts = _count_fits(entries, room)
        for job_id in victims:
            for sid, gpus in allocations.pop(job_id).items():
                free[sid] += gpus
        fit = most_free_in_groups if self.artifact_placement == "most-free" else best_fit_in_groups
        for key, job, p in starts:  # the counts leave room: any free GPUs of the pool will do
            placement = fit(free, job.spec.num_gpus, pools[p][1])
            if placement is None:  # only if a job started elsewhere spans pools
                continue
            take(free, placement)
            allocations[job.id] = placement
            self._started(job, key[0], now)
        if self.queue_order == "arrival":  # the Pollux artifact: places kept (arrival, or demotion)
            return plan
        self._running_first(sorted(entries, key=itemgetter(0)) if classes.tiered else entries, allocations)
        return plan

    def _artifact_running(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]],
                          pools: list[tuple[Sequence[int], list[Sequence[int]]]], room: list[int],
                          now: float) -> list[_Entry]:
        """Artifact mode: an entry per running job with its GPUs per pool, which are added to the
        pools' ``room`` (GPUs per pool, counted as if every job were stopped)."""
        keys = self._keys
        pool_of = {sid: p for p, (ids, _) in enumerate(pools) for sid in ids}
        entries: list[_Entry] = []
        for job_id, alloc in allocations.items():
            key = keys.get(job_id)
            if key is None:  # started by someone else (an env driving part of the cluster)
                key, self._next_check = self._key(view.job(job_id), now), now
            by_pool: dict[int, int] = {}
            for sid, gpus in alloc.items():
                p = pool_of[sid]
                by_pool[p] = by_pool.get(p, 0) + gpus
                room[p] += gpus
            entries.append((key, job_id, by_pool, None))
        return entries

    def _running_first(self, entries: list[_Entry], allocations: Mapping[str, Mapping[int, int]]) -> None:
        """Artifact mode, ``queue_order="running-first"``: in every queue (``entries`` in key
        order), the jobs now running move to the tail ahead of the waiting ones, order kept."""
        keys = self._keys
        for queue, group in groupby(entries, key=lambda e: e[0][0]):  # running jobs first
            for key, job_id, _, _ in sorted(group, key=lambda e: e[1] not in allocations):
                keys[job_id] = (queue, self._tail(), key[2])

    def _check_overheads(self, view: ClusterView) -> None:
        """Artifact mode: warn once per run if (re)starts cost time, which the artifact never charges."""
        self._overheads_checked = True
        restart_s = view.overheads.restart_s
        if restart_s is None:
            restart_s = max((m.restart_overhead_s for m in view.profiles.models.values()), default=0.0)
        if restart_s > 0:
            warnings.warn(
                f"{self.name} mode='artifact' assumes free preemption as in the Tiresias artifact, but this run "
                f"charges up to {restart_s:g} s per (re)start: set overheads.restart_s to 0 "
                "(traces/tiresias-artifact.yaml)", stacklevel=3)


def _count_fits(entries: Sequence[_Entry], room: list[int]) -> tuple[list[str], list[tuple[Key, JobView, int]]]:
    """Artifact mode's walk over every job in key order, by GPU counts: a running job keeps running
    if every pool it is in still has its GPUs, else it is a victim; a waiting job starts in the
    first pool with room for it. Takes from ``room``; returns (victims' ids, (key, job, pool) starts)."""
    victims: list[str] = []
    starts: list[tuple[Key, JobView, int]] = []
    for key, job_id, by_pool, job in entries:
        if by_pool is not None:  # running
            if all(room[p] >= gpus for p, gpus in by_pool.items()):
                for p, gpus in by_pool.items():
                    room[p] -= gpus
            else:
                victims.append(job_id)
            continue
        assert job is not None  # a waiting entry carries its job
        need = job.spec.num_gpus
        target = next((p for p, r in enumerate(room) if r >= need), None)
        if target is not None:
            room[target] -= need
            starts.append((key, job, target))
    return victims, starts


def most_free_in_groups(free: list[int], need: int, groups: Sequence[Sequence[int]]) -> dict[int, int] | None:
    """The Pollux artifact's Tiresias placement (``simulator/tiresias.py``): in the first group that
    can hold ``need`` GPUs, take the server with the most free GPUs (ties: the first listed), as many
    as it has or as are still needed, and repeat. Does not modify ``free``."""
    for candidates in groups:
        left = dict((sid, free[sid]) for sid in candidates if free[sid] > 0)
        if sum(left.values()) < need:
            continue
        placement: dict[int, int] = {}
        todo = need
        while todo:
            sid = max(left, key=left.__getitem__)  # first of the largest: dicts keep the order
            n = min(left[sid], todo)
            placement[sid] = placement.get(sid, 0) + n
            left[sid] -= n
            todo -= n
        return placement
    return None


def _requested(job: JobView) -> int:
    """GPUs a job runs on under Tiresias: its requested size."""
    return job.spec.num_gpus


def _add(free: list[int], allocation: Mapping[int, int], sign: int) -> None:
    """Return (``sign`` = 1) or take back (-1) a job's GPUs in ``free``."""
    for sid, gpus in allocation.items():
        free[sid] += sign * gpus


@dataclass
class TiresiasLoanScheduler(TiresiasScheduler):
    """Tiresias that borrows idle inference servers (``loan=True``)."""

    loan: bool = True
    name = "tiresias+loan"
