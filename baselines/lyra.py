"""Lyra: capacity loaning plus two-phase elastic scheduling (Li et al., EuroSys 2023).

Read ``baselines/lyra_reference.py`` (``lyra-reference``) first: the same decisions, plan for plan,
without the speed work (``tests/baselines/test_reference_equivalence.py`` checks it at every decision).

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

Variant: ``lyra-backfill`` (admits past a job that does not fit; the paper is silent).
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

from dataclasses import dataclass, field
from typing import AbstractSet, Mapping

import numpy as np

from lyra_baselines.lyra_admission import admit
from lyra_baselines.lyra_extras import place_extras
from lyra_baselines.lyra_rebalance import rebalance
from lyra_baselines.lyra_state import Decision, LyraMemory
from lyra_baselines.lyra_switches import HOLD_EWMA, LyraSwitches
from lyra_gym.model.jobs import JobState
from lyra_gym.sim.cluster import Pool
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Guidance
from lyra_gym.sim.topology import Topology
from lyra_gym.sim.view import ClusterView

__all__ = ["HOLD_EWMA", "BaselineMinScheduler", "BaselineScheduler", "LyraNoElasticScheduler", "LyraNoLoanScheduler",
           "LyraScheduler"]


@dataclass
class LyraScheduler(LyraSwitches):
    """The fast Lyra: the switches of :class:`~lyra_baselines.lyra_switches.LyraSwitches` (documented
    there), decided by the stages over one ``Decision`` (module docstring)."""

    memory: LyraMemory = field(init=False, repr=False, compare=False)
    name = "lyra"
    _admitted_fast_path = True  # lyra_rebalance.rebalance_admitted where it applies (False: always rebalance_types; tests compare them)

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.memory = LyraMemory(self)  # what the stages keep across decisions
        self._held_kept: tuple[dict[str, int], list[str]] | None = None  # levels -> held jobs (_held)

    _place_extras = staticmethod(place_extras)  # the extras stage (``baselines/lyra_extras.py``)

    # ------------------------------------------------------------------ decide
    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Lyra's decision, modulated by an agent (an empty Guidance = plain Lyra): loaning, then
        the stages over one :class:`~lyra_baselines.lyra_state.Decision`: admission (phase 1,
        ``lyra_admission``), elastic rebalance (phase 2, ``lyra_rebalance``, which places the
        extra workers with ``lyra_extras``).

        Job levels: 0 holds a queued job and denies a running one extra workers; otherwise
        queued jobs are admitted by level (higher first), then shortest remaining time, and a
        job's knapsack values are scaled by 2 ** (level - neutral).

        ``guidance.preempt``: those running jobs leave the plan (after the reclaim answer, before
        admission), so their GPUs go to the queue's admission as a completion's would (and to
        extra workers at the next knapsack round); they wait in the queue and are not restarted
        in this decision.
        """
        memory = self.memory
        round_due = self.elastic and view.now >= memory.next_round
        if view.tick_only and not guidance.preempt and (not round_due or view.now - memory.last_decision < self.round_s):
            # a tick only brings the knapsack round of a quiet cluster (no decision for a whole
            # round); on a busy one the round comes with the next event
            return view.current_plan()
        memory.last_decision = view.now
        if self.move_back:
            memory.track_loaned(view)  # every job on loaned GPUs is a move-back candidate, whoever put it there
        levels = guidance.job_levels
        plan = view.current_plan()
        self.loaning.prepare(view, plan, self.rng, guidance.borrow_fraction, guidance.return_levels)
        stopped = _preempt(view, plan, guidance.preempt) if guidance.preempt else frozenset()
        hold = self.elastic and bool(levels) and _holds_extras(view, plan.allocations, self._held(levels))
        if not (stopped or view.num_queued or round_due or plan.give_back or plan.borrow or hold
                or self._may_move_back(view)):
            return plan  # nothing to admit, return, move back or rebalance: keep everything
        decision = Decision(self, memory, view, plan, levels)
        decision.preempted = stopped
        admit(decision)
        rebalance(decision, round_due, hold, self._admitted_fast_path)
        return plan

    def _held(self, levels: Mapping[str, int]) -> list[str]:
        """The jobs ``levels`` holds (level 0), kept while the levels are equal to the last ones
        (an env's ticks apply the same guidance again)."""
        kept = self._held_kept
        if kept is None or kept[0] != levels:
            kept = self._held_kept = (dict(levels), [job_id for job_id, level in levels.items() if level == 0])
        return kept[1]

    def _may_move_back(self, view: ClusterView) -> bool:
        """Might a job on loaned GPUs move to training GPUs now? (one has a free GPU)"""
        if not (self.move_back and self.memory.on_loaned):
            return False
        topology = view.topology  # free GPUs per cell: O(cells), not a walk over the servers
        return topology.free_total(self._training_cells(topology)) > 0

    def _training_cells(self, topology: Topology) -> list[int]:
        """The cells of the training servers (the cluster never changes during a run)."""
        cells = self.memory.training_cells
        if cells is None:
            cells = self.memory.training_cells = [c.index for c in topology.cells if c.pool is Pool.TRAINING]
        return cells


def _preempt(view: ClusterView, plan: Plan, preempt: AbstractSet[str]) -> frozenset[str]:
    """Remove the running jobs of ``preempt`` from ``plan``; the ids of those running jobs (those
    the reclaim answer already stopped included: none of them restarts in this decision). Ids of
    jobs that are not running, or unknown, are ignored."""
    stopped = []
    for job_id in preempt:
        try:
            running = view.job(job_id).state is JobState.RUNNING
        except KeyError:
            continue
        if running:
            stopped.append(job_id)
    allocations = plan.allocations
    for job_id in sorted(stopped):  # (a fixed order: the plan records its edits in it)
        if job_id in allocations:
            del allocations[job_id]
    return frozenset(stopped)


def _holds_extras(view: ClusterView, allocations: Mapping[str, Mapping[int, int]], held: list[str]) -> bool:
    """Does an agent hold (level 0; ``held``) a running elastic job above its minimum? That takes
    effect at once, not at the next round."""
    return any(job_id in allocations and sum(allocations[job_id].values()) > view.job(job_id).spec.min_gpus
               for job_id in held)


@dataclass
class LyraNoLoanScheduler(LyraScheduler):
    loan: bool = False
    name = "lyra-noloan"


@dataclass
class LyraBackfillScheduler(LyraScheduler):
    """Lyra admitting later jobs past one that does not fit (``backfill=True``). The paper is silent
    on backfilling; ``lyra`` keeps its strict shortest-first order, and this row shows what the
    other reading gives, so "best heuristic" is taken over both (issue 39 item 4)."""

    backfill: bool = True
    name = "lyra-backfill"


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
