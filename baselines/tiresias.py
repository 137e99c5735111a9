"""Tiresias: discretized two-dimensional least-attained-service (2D-LAS).

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning",
NSDI 2019. A job's priority is the service it has attained in GPU-seconds
(GPUs held x time, ``JobView.attained_gpu_s``), discretized into K queues, so
no job duration needs to be known.

Modelled:

- K queues split by attained-service thresholds. A job arrives in the top
  queue and drops a queue each time its service (counted since its last
  promotion) reaches the next threshold.
- FIFO inside a queue by the time the job *entered* it: its submit time, the
  instant it crossed the threshold (computed exactly, not rounded to the
  tick), or the instant it was promoted; ties by trace order. Both artifacts
  append a job to the tail of its new queue.
- Each decision walks the queues top-down and starts every queued job that
  fits; a job that does not fit is skipped and later ones may start (as in the
  artifact's ``dlas-gpu``).
- Preemptive: a queued job that does not fit may stop running jobs of strictly
  lower queues, lowest priority first, only if the whole job then fits; victims
  the fit turns out not to need keep running. Jobs of the same queue never
  preempt each other, so a job that preempted others and is then demoted is
  not preempted back: no thrashing.
- Starvation promotion (Tiresias's STARVELIMIT), off by default: see
  ``starvation_factor``.
- Requested GPU counts only: elastic jobs run at their requested size.
- Placement: best fit (``baselines/placement.py``): one server when possible,
  else as few as possible. Training servers first, then loaned servers; never
  both at once (synchronous data parallel runs at the slowest GPU's pace: on
  ``bench-15d`` allowing it raised ``tiresias+loan``'s mean JCT from 8,094 s
  to 8,260 s).
- Loaning is orthogonal (``baselines/loaning.py``): borrow loanable inference
  servers when ``loan`` is set, answer reclaims by ``reclaim_rule``. A job a
  reclaim stops is placed again at once if it fits elsewhere (the engine counts
  that as a migration).

Left out: the profile-based placement (Tiresias consolidates only jobs with
skewed tensor sizes; here every job is best-fitted, so consolidated when
possible), the Gittins-index variant (needs a duration distribution), and the
artifacts' rounding of times to whole seconds.

Parameters (dataclass fields):

- ``thresholds`` = ``(3250.0, 7200.0)`` GPU-s: 3 queues. Source: the Tiresias
  artifact (SymbioticLab/Tiresias, ``simulator/jobs.py``: ``num_queue = 3``,
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
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from operator import itemgetter
from typing import Mapping, Sequence

import numpy as np

from baselines.loaning import Loaning, free_after
from baselines.placement import best_fit, best_fit_in_groups, take
from lyra_gym.plan import Plan
from lyra_gym.scheduler import Scheduler
from lyra_gym.view import ClusterView, JobView

Key = tuple[int, float, int]  # (queue, entered the queue at s, trace index): smaller runs first


@dataclass
class TiresiasScheduler(Scheduler):
    """Discretized 2D-LAS; parameters are documented in the module docstring."""

    thresholds: Sequence[float] = (3250.0, 7200.0)
    starvation_factor: float = 0.0
    tick_interval: float | None = 60.0
    loan: bool = False
    reclaim_rule: str = "cost"
    name = "tiresias"

    def __post_init__(self) -> None:
        self.thresholds = tuple(float(t) for t in self.thresholds)
        th = self.thresholds
        if any(t <= 0 for t in th) or any(a >= b for a, b in zip(th, th[1:])):
            raise ValueError(f"thresholds: must be positive and increasing (GPU-s), got {list(th)}")
        if not self.starvation_factor >= 0:
            raise ValueError(f"starvation_factor: must be >= 0 (0 = off), got {self.starvation_factor}")
        if self.tick_interval is not None and not self.tick_interval > 0:
            raise ValueError(f"tick_interval: must be > 0 s or None, got {self.tick_interval}")
        self.loaning = Loaning(enabled=self.loan, reclaim_rule=self.reclaim_rule)
        self.reset(np.random.default_rng(0))

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._keys: dict[str, Key] = {}      # job id -> its queue and place there
        self._base: dict[str, float] = {}    # job id -> attained GPU-s at its last promotion
        self._next_check = -math.inf         # earliest time a running job can cross a threshold

    # --- priorities --------------------------------------------------------------------
    def _key(self, job: JobView, now: float) -> Key:
        key = self._keys.get(job.id)
        if key is None:  # first sight (normally on arrival, with no service yet)
            queue = bisect_right(self.thresholds, job.attained_gpu_s)
            key = self._keys[job.id] = (queue, job.spec.submit_time if queue == 0 else now, job.index)
        return key

    def _demote(self, view: ClusterView, now: float) -> None:
        """Move running jobs that crossed a threshold down; note when the next one can."""
        th, last, keys, next_check = self.thresholds, len(self.thresholds), self._keys, math.inf
        for job in view.running_jobs():
            queue, entered, index = self._key(job, now)
            if queue == last:
                continue
            service, workers = job.attained_gpu_s - self._base.get(job.id, 0.0), job.workers
            new = bisect_right(th, service)
            if new > queue:
                queue, entered = new, now - (service - th[new - 1]) / workers  # the exact crossing
                keys[job.id] = (queue, entered, index)
            if queue < last:
                next_check = min(next_check, now + (th[queue] - service) / workers)
        self._next_check = next_check

    def _promote(self, job: JobView, key: Key, now: float) -> Key:
        """Starvation promotion of a queued job in a lower queue, if it is due."""
        attained = job.attained_gpu_s
        run_s = (attained - self._base.get(job.id, 0.0)) / job.spec.num_gpus
        late = job.waiting_s - self.starvation_factor * run_s
        if late < 0:
            return key
        self._base[job.id] = attained
        key = self._keys[job.id] = (0, now - late, key[2])
        return key

    # --- the policy --------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Plan:
        plan = view.current_plan()
        self.loaning.prepare(view, plan, self.rng)
        allocations, now = plan.allocations, view.now
        if now >= self._next_check:
            self._demote(view, now)
        starve, keys = self.starvation_factor > 0, self._keys
        waiting = []
        for job in view.queued_jobs():
            key = keys.get(job.id) or self._key(job, now)
            if starve and key[0] > 0:
                key = self._promote(job, key, now)
            waiting.append((key, job))
        if plan.give_back:  # jobs a reclaim just stopped may start again elsewhere
            waiting += [(self._key(j, now), j) for j in view.running_jobs() if j.id not in allocations]
        if not waiting:
            return plan
        waiting.sort(key=itemgetter(0))
        free = free_after(view, plan)
        free_total = sum(free)  # 0 on servers training may not use
        pools = self._pools(view, plan)
        held = None  # GPUs held per queue by running jobs, computed when first needed
        for key, job in waiting:
            need = job.spec.num_gpus
            placement = best_fit_in_groups(free, need, pools) if need <= free_total else None
            if placement is None:
                if held is None:
                    held = self._held(view, allocations, now)
                room = sum(held[key[0] + 1:])  # what preempting every lower queue would free
                if free_total + room < need:
                    if free_total == 0 and room == 0:
                        break  # the rest are in this queue or lower: nothing more can start
                    continue
                placement = self._preempt(key[0], need, allocations, free, pools, held)
                if placement is None:
                    continue
                free_total = sum(free)
            take(free, placement)
            free_total -= need
            allocations[job.id] = placement
            queue = key[0]
            if queue < len(self.thresholds):
                service = job.attained_gpu_s - self._base.get(job.id, 0.0)
                self._next_check = min(self._next_check, now + (self.thresholds[queue] - service) / need)
        return plan

    def _held(self, view: ClusterView, allocations: Mapping[str, Mapping[int, int]], now: float) -> list[int]:
        """GPUs held per queue by the jobs ``allocations`` keeps running."""
        held, keys = [0] * (len(self.thresholds) + 1), self._keys
        for job_id, alloc in allocations.items():
            key = keys.get(job_id)
            if key is None:  # started by someone else (an env driving part of the cluster)
                key, self._next_check = self._key(view.job(job_id), now), now
            held[key[0]] += sum(alloc.values())
        return held

    def _preempt(self, queue: int, need: int, allocations: dict, free: list[int],
                 pools: list[Sequence[int]], held: list[int]) -> dict[int, int] | None:
        """Stop running jobs of queues below ``queue``, lowest priority first, until ``need`` GPUs
        fit in one server group; keep the victims the fit does not need. Returns the placement,
        or None (then nothing is stopped)."""
        keys = self._keys
        lowest_first = sorted(allocations, key=keys.__getitem__, reverse=True)
        for pool in pools:
            members = set(pool)
            have = sum(free[sid] for sid in pool)
            chosen = []  # (job id, its GPUs in this pool)
            for job_id in lowest_first:
                if keys[job_id][0] <= queue or have >= need:
                    break
                gpus = sum(g for sid, g in allocations[job_id].items() if sid in members)
                if gpus:
                    chosen.append((job_id, gpus))
                    have += gpus
            if have < need:
                continue
            for item in reversed(chosen[:-1]):  # highest priority first
                if have - item[1] >= need:
                    chosen.remove(item)
                    have -= item[1]
            trial = list(free)
            for job_id, _ in chosen:
                for sid, gpus in allocations[job_id].items():
                    trial[sid] += gpus
            for job_id, _ in chosen:
                held[keys[job_id][0]] -= sum(allocations.pop(job_id).values())
            free[:] = trial
            return best_fit(free, need, pool)  # fits: the pool now has ``have`` >= ``need`` free
        return None

    @staticmethod
    def _pools(view: ClusterView, plan: Plan) -> list[Sequence[int]]:
        """Server-id groups to place on, in order: training servers (one group per GPU type if types
        may not mix), then loaned ones. A job never spans both (it would run at the slower pace)."""
        training = view.training_server_ids
        if view.allow_mixed_gpu_types:
            pools: list[Sequence[int]] = [training]
        else:
            by_type: dict[str, list[int]] = {}
            for sid in training:
                by_type.setdefault(view.servers[sid].gpu_type, []).append(sid)
            pools = list(by_type.values())
        gone = set(plan.give_back)
        loaned = [s for s in (*view.loaned_servers(), *plan.borrow) if s not in gone]
        return [*pools, loaned] if loaned else pools


@dataclass
class TiresiasLoanScheduler(TiresiasScheduler):
    """Tiresias that borrows idle inference servers (``loan=True``)."""

    loan: bool = True
    name = "tiresias+loan"
