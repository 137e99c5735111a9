"""Lyra's state, in three lifetimes (``baselines/lyra.py`` is the pipeline over it):

- :class:`ClusterFacts`: the servers of a run, read once from the view's ``Topology`` (the
  cluster never changes during a run): training GPU types, cells, capacities.
- :class:`LyraMemory`: what the scheduler keeps across decisions (caches of job views and
  allocation splits, jobs on loaned servers, grants of extra workers, observed holds, rates).
- :class:`Decision`: one decision's state, shared by its stages (admission, rebalance, extras):
  the view, the plan being built, free and available GPUs, base and flexible workers of the
  running elastic jobs, and phase 1's book-keeping (jobs waiting for training GPUs, release
  timelines built lazily, once per decision).
"""

from __future__ import annotations

import math
from functools import partial
from typing import AbstractSet, Mapping, Protocol, Sequence

from lyra_baselines.loaning import free_map_after
from lyra_baselines.lyra_estimates import ReleaseTimeline, ReleaseTracker
from lyra_baselines.lyra_line import MovingLine
from lyra_baselines.lyra_rates import LyraRates
from lyra_baselines.lyra_running import RunningElastic, add_flex
from lyra_baselines.placement import capacities
from lyra_gym.sim.cluster import Pool
from lyra_gym.sim.journal import ChangeFeed
from lyra_gym.sim.plan import Plan, TrackedAllocations
from lyra_gym.sim.topology import FreeMap, ServerSet
from lyra_gym.sim.view import ClusterView, JobView


class LyraSettings(Protocol):
    """The switches the stages read (``LyraScheduler``'s fields; documented there)."""

    loan: bool
    elastic: bool
    fixed_size: str
    backfill: bool
    loaned_rule: str
    move_back: bool
    flex_horizon: str
    value_rate: str
    knapsack_exact_limit: int
    round_s: float


def base_demand(settings: LyraSettings, job: JobView) -> int:
    """GPUs a job is admitted at: an elastic job's minimum when Lyra scales it (or runs it at its
    minimum), else its requested size."""
    spec = job.spec
    if spec.elastic and (settings.elastic or settings.fixed_size == "min"):
        return spec.min_gpus
    return spec.num_gpus


class ClusterFacts:
    """The run's servers as Lyra groups them, read from ``view.topology`` at the first decision."""

    def __init__(self, view: ClusterView) -> None:
        topology = view.topology
        self.training_types: dict[str, list[int]] = {}  # GPU type -> training server ids, ascending
        for sid in view.training_server_ids:
            self.training_types.setdefault(view.servers[sid].gpu_type, []).append(sid)
        self.training_groups: list[ServerSet] = topology.type_sets(Pool.TRAINING)
        # all training servers, when a job may span types
        self.spanning: ServerSet | None = topology.pool_set(Pool.TRAINING) if (
            view.allow_mixed_gpu_types and len(self.training_groups) > 1) else None
        self.cell_of = topology.cell_of
        self.training_cells: dict[str, list[int]] = {}  # GPU type -> training cells of the index
        for cell in topology.cells:
            if cell.pool is Pool.TRAINING:
                self.training_cells.setdefault(cell.gpu_type, []).append(cell.index)
        self.gpu_types = [s.gpu_type for s in view.servers]
        self.capacity = capacities(view)
        self.rule = view.placement
        self.training_ids = frozenset(view.training_server_ids)
        self.per_server: dict[str, int] = {}  # GPU type -> GPUs per server
        self.ids_by_type: dict[str, list[int]] = {}  # GPU type -> server ids of that type, ascending
        for s in view.servers:
            self.per_server.setdefault(s.gpu_type, s.num_gpus)
            self.ids_by_type.setdefault(s.gpu_type, []).append(s.id)
        self.inference_types = {view.servers[s].gpu_type for s in view.inference_server_ids}
        self._room_for: dict[int, tuple[list[str], bool]] = {}

    def training_room(self, need: int) -> tuple[list[str], bool]:
        """The training GPU types with ``need`` GPUs in all, and whether all training servers
        together have them when types may mix (cached: the training pool never changes)."""
        room = self._room_for.get(need)
        if room is None:
            sizes = {t: len(ids) * self.per_server[t] for t, ids in self.training_types.items()}
            holding = [t for t, size in sizes.items() if need <= size]
            room = self._room_for[need] = (holding, bool(self.spanning) and need <= sum(sizes.values()))
        return room


class LyraMemory:
    """What Lyra keeps from one decision to the next (a fresh one per run: ``reset``)."""

    def __init__(self, settings: LyraSettings) -> None:
        self.settings = settings
        self.next_round = -math.inf  # s: the next knapsack round is due at the first decision after it
        self.last_decision = -math.inf  # s, the last decision point that was not a skipped tick
        self.facts: ClusterFacts | None = None  # filled at the first decision
        self.rates = LyraRates(settings.value_rate)
        self.views: dict[str, JobView] = {}
        cap = partial(base_demand, settings) if settings.elastic else None  # picklable (envs pickle mid-episode)
        self.releases = ReleaseTracker(self.views, cap)  # servers filled at the first decision
        self.elastic_views: dict[str, JobView | None] = {}  # job id -> its view if elastic, else None
        self.running: RunningElastic | None = None  # the running elastic jobs' splits (filled when first needed)
        self.granted: dict[str, tuple[float, str]] = {}  # job id -> (when extra workers were granted, GPU type)
        self.held_s: dict[str, float] = {}  # GPU type -> smoothed observed hold of extra workers (s)
        # move-back candidates: every job the engine started or moved wholly onto loaned servers
        # (:meth:`track_loaned`, whoever planned it) -> the allocation last found entirely off
        # training servers (None: not checked yet); a job that left them is dropped when visited
        self.on_loaned: dict[str, Mapping[int, int] | None] = {}
        self.loaned_feed: ChangeFeed | None = None  # the engine's changes since track_loaned last read them
        self.loaned_view: ClusterView | None = None  # the view whose engine loaned_feed follows
        # queued job id -> (remaining work, GPUs, {GPU type: time_on s}); None until the first
        # decision, and under the adaptive rule (lyra_admission.times_on)
        self.queued_times: dict[str, tuple[float, int, dict[str, float]]] | None = None
        self.line = MovingLine()  # move-back candidates' line keys (lyra_admission.lazy_candidates)
        self.training_cells: list[int] | None = None  # cells of the training servers (filled when first needed)
        # (topology, (its version, running.generation), avail, avail_cells, loaned_room) at the set-up of
        # the last decision on a clean plan: Decision reuses them while the key is the same
        self.setup: tuple | None = None

    def track_loaned(self, view: ClusterView) -> None:
        """Add to :attr:`on_loaned` the jobs the engine started or moved wholly onto loaned servers
        since the last call (from its change feed; every running job at the first call or after a
        lost feed): Lyra's own placements, and allocations it did not plan (an overruled plan, an
        agent's own plans in ``Alloc-v1``), as the reference considers every such job."""
        training = self.start(view).training_ids
        feed = self.loaned_feed if self.loaned_view is view else None
        changes = feed.changed() if feed is not None else None
        if changes is None:
            feed = self.loaned_feed = view.change_feed()
            self.loaned_view = view
            changes = feed.running()
        on_loaned = self.on_loaned
        for job_id, (alloc, _) in changes.items():
            if alloc is not None and job_id not in on_loaned and training.isdisjoint(alloc):
                on_loaned[job_id] = None

    def start(self, view: ClusterView) -> ClusterFacts:
        """The run's :class:`ClusterFacts` (read at the first decision)."""
        facts = self.facts
        if facts is None:
            facts = self.facts = ClusterFacts(view)
            self.rates.per_server = facts.per_server
            self.rates.settle(view)  # before any rate: where its pure caches are kept (lyra_rates.SHARED)
            self.releases.gpu_types, self.releases.training_ids = facts.gpu_types, facts.training_ids
            if self.settings.elastic:
                self.running = RunningElastic(partial(split_alloc, self.settings, facts), facts.cell_of,
                                              self.elastic_views, self.views)
        return facts



def split_alloc(settings: LyraSettings, facts: ClusterFacts, job: JobView, alloc: Mapping[int, int]
                ) -> tuple[dict[int, int], dict[int, int]]:
    """Base and flexible workers of an allocation: base on training servers first."""
    base_left = base_demand(settings, job) if settings.elastic else sum(alloc.values())
    training = facts.training_ids
    base: dict[int, int] = {}
    flex: dict[int, int] = {}
    for sid in sorted(alloc, key=lambda s: (s not in training, s)):
        g = alloc[sid]
        b = min(g, base_left)
        base_left -= b
        if b:
            base[sid] = b
        if g - b:
            flex[sid] = g - b
    return base, flex


def server_groups(facts: ClusterFacts, view: ClusterView, plan: Plan, free: FreeMap
                  ) -> tuple[list[ServerSet], list[ServerSet], Sequence[int], AbstractSet[int]]:
    """Training candidate sets (by GPU type), loaned candidate sets by type, and the loaned ids
    usable under ``plan`` (ascending, and as a set). Each set names its cells in the engine's
    index, so placements on ``free`` (made by ``free_map_after``) read the index. Without
    loaning changes the loaned servers' sets are the index's own (kept across decisions)."""
    topology = view.topology
    current = topology.loaned()  # ascending (the engine's index)
    if not current and not plan.borrow:
        return facts.training_groups, [], [], frozenset()
    if plan.give_back or plan.borrow:
        back = set(plan.give_back)
        loaned: Sequence[int] = sorted({*(s for s in current if s not in back), *plan.borrow})
        members: AbstractSet[int] = set(loaned)
    elif len(facts.inference_types) == 1:  # one type of inference server: one group, the index's
        group = topology.loaned_set(free)
        return facts.training_groups, [group], group, topology.loaned_members()
    else:
        loaned = list(current)
        members = topology.loaned_members()
    if len(facts.inference_types) == 1:  # one type of inference server: one group
        return facts.training_groups, [topology.server_set(loaned, free)] if loaned else [], loaned, members
    return facts.training_groups, topology.sets_by_type(loaned, free), loaned, members


class Decision:
    """One decision's state: read and changed by the stages in turn.

    ``avail`` counts free GPUs plus flexible workers per server (phase 1 may displace flexible
    workers); ``avail_cells`` sums it per cell of the engine's index; ``base``/``flex`` are the
    running elastic jobs' base and flexible workers (the memory's own, lent: changed only by
    :meth:`set_split`, undone at the next sync).
    """

    def __init__(self, settings: LyraSettings, memory: LyraMemory, view: ClusterView, plan: Plan,
                 levels: Mapping[str, int]) -> None:
        self.settings, self.memory, self.view, self.plan, self.levels = settings, memory, view, plan, levels
        facts = self.facts = memory.start(view)
        self.rates = memory.rates
        self.allocations = plan.allocations
        free = self.free = free_map_after(view, plan)  # indexed: a placement on free GPUs reads the engine's index
        self.training_groups, self.loaned_groups, self.loaned, self.loaned_set = server_groups(facts, view, plan, free)
        self.base: dict[str, dict[int, int]] = {}
        self.flex: dict[str, dict[int, int]] = {}
        self.elastic_jobs: list[JobView] = []  # running elastic jobs in start order, then those admitted now
        self.flex_on: Mapping[int, int] = {}  # flexible GPUs per server (non-zero; read only)
        self._edits: list | None = None  # base/flex lent by the memory: their edits' undo list (set_split)
        flex_cells = self._split_running() if settings.elastic else {}
        self._set_avail(free, flex_cells)
        self.admitted: list[JobView] = []  # elastic jobs placed in phase 1, in order
        self.preempted: AbstractSet[str] = frozenset()  # running jobs an agent stopped now (not restarted now)
        self.moved = False  # a job moved from loaned to training servers
        # phase 1's book-keeping
        self.blocked = False  # a job waits for training GPUs and backfill is off
        self.touched: set[int] = set()  # servers a placement took GPUs on (the only ones avail drops on)
        self.waiting: dict[str, int] = {}      # training GPU type -> base GPUs of the jobs waiting for it
        self.first_need: dict[str, int] = {}   # training GPU type -> base GPUs of the first job waiting
        self.placed: list[tuple[float, int, str]] = []  # (finish, GPUs, type) of jobs placed on training now
        self._timelines: dict[str, ReleaseTimeline] = {}
        self._available_by_type: dict[str, int] = {}  # cleared whenever avail changes
        self.spare: set[int] | None = None  # loaned servers holding no base worker (admission's safe_loaned_s)
        self.safe_s: dict[int, float] = {}  # servers needed -> seconds until demand exceeds them
        self.loaned_fits: dict[int, dict[int, int] | None] = {}  # need -> fit on loaned GPUs (cleared on any change)
        self.loaned_safe: dict[int, float] = {}  # need -> safe_loaned_s of its loaned_fits entry (cleared with it)

    def _set_avail(self, free: FreeMap, flex_cells: Mapping[int, int]) -> None:
        """``avail``, ``avail_cells`` and ``loaned_room`` (free plus flexible GPUs; loaned ones).
        On a clean plan (no edit, no loaning change) they are functions of the engine's index
        (``topology.version``) and the running elastic jobs' flexible workers
        (``RunningElastic.generation``): copies of the last clean decision's while both are the same."""
        memory, plan, allocations = self.memory, self.plan, self.allocations
        key = None
        if type(allocations) is TrackedAllocations and not allocations.touched and not (plan.borrow or plan.give_back):
            topology, running = self.view.topology, memory.running
            key = (topology.version, running.generation if running is not None else -1)
            kept = memory.setup
            if kept is not None and kept[0] is topology and kept[1] == key:
                self.avail, self.avail_cells, self.loaned_room = list(kept[2]), list(kept[3]), kept[4]
                return
        avail = self.avail = free.tolist()
        avail_cells = self.avail_cells = free.totals()  # free and flexible GPUs per cell of the index
        for sid, g in self.flex_on.items():
            avail[sid] += g
        for c, g in flex_cells.items():
            avail_cells[c] += g
        self.loaned_room = sum(map(avail.__getitem__, self.loaned))
        if key is not None:
            memory.setup = (self.view.topology, key, list(avail), list(avail_cells), self.loaned_room)

    def _split_running(self) -> dict[int, int]:
        """Base and flexible workers of every running elastic job (in start order) and the
        flexible GPUs per server (``flex_on``); returns those per cell. From the memory's
        :class:`~lyra_baselines.lyra_running.RunningElastic` (kept by the engine's change feed):
        its own dicts, lent (this decision's edits undone at the next sync), or, with the plan's
        own edits so far (a reclaim answer's), copies with those edits laid over."""
        memory, allocations = self.memory, self.allocations
        touched = allocations.touched if type(allocations) is TrackedAllocations else None
        running = memory.running
        if touched is None or running is None:  # not a current plan's allocations: split them all
            return self._split_all()
        running.sync(self.view)
        jobs = running.jobs
        flex_on, flex_cells = running.flex_on, running.flex_cells
        if not touched:  # lent in place: this decision's edits (set_split) are undone at the next sync
            self.base, self.flex, self._edits = running.base, running.flex, running.lend()
        else:
            base = self.base = dict(running.base)
            flex = self.flex = dict(running.flex)
            jobs, flex_on, flex_cells = dict(jobs), dict(flex_on), dict(flex_cells)
            cell_of, known = self.facts.cell_of, running.allocs
            for job_id in touched:
                old, new = known.get(job_id), allocations.get(job_id)
                if old is None:
                    if new is not None and running.kind(self.view, job_id) is not None:
                        return self._split_all()  # (a job the plan started: not Lyra's own edits)
                    continue
                if new is old:
                    continue
                add_flex(flex_on, flex_cells, cell_of, flex[job_id], -1)
                if new is None:
                    del base[job_id], flex[job_id], jobs[job_id]
                    continue
                base[job_id], flex[job_id] = split_alloc(self.settings, self.facts, jobs[job_id], new)
                add_flex(flex_on, flex_cells, cell_of, flex[job_id], 1)
        self.elastic_jobs = list(jobs.values())
        self.flex_on = flex_on
        return flex_cells

    def _split_all(self) -> dict[int, int]:
        """:meth:`_split_running` from scratch: every job of the plan's allocations visited."""
        view, settings, facts = self.view, self.settings, self.facts
        kinds, views = self.memory.elastic_views, self.memory.views
        self.base, self.flex, self.elastic_jobs = {}, {}, []
        flex_on: dict[int, int] = {}
        flex_cells: dict[int, int] = {}
        for job_id, alloc in self.allocations.items():
            job = kinds.get(job_id)
            if job_id not in kinds:
                job = views.get(job_id) or view.job(job_id)
                views[job_id] = job
                job = kinds[job_id] = job if job.spec.elastic else None
            if job is not None:
                self.base[job_id], flex = split_alloc(settings, facts, job, alloc)
                self.flex[job_id] = flex
                self.elastic_jobs.append(job)
                add_flex(flex_on, flex_cells, facts.cell_of, flex, 1)
        self.flex_on = flex_on
        return flex_cells

    def set_split(self, job_id: str, base: dict[int, int], flex: dict[int, int]) -> None:
        """Set a job's base and flexible workers for the rest of the decision (the one way
        ``base``/``flex`` change after set-up: lent ones are restored at the next sync)."""
        edits = self._edits
        if edits is not None:
            edits.append((job_id, self.base.get(job_id), self.flex.get(job_id)))
        self.base[job_id], self.flex[job_id] = base, flex

    # ------------------------------------------------------------------ training GPUs
    def available(self, gpu_type: str) -> int:
        """Free or flexible GPUs on training servers of ``gpu_type`` (cached until a placement)."""
        n = self._available_by_type.get(gpu_type)
        if n is None:
            totals = self.avail_cells
            n = self._available_by_type[gpu_type] = sum(totals[c] for c in self.facts.training_cells[gpu_type])
        return n

    def timeline(self, gpu_type: str) -> ReleaseTimeline:
        """When training GPUs of ``gpu_type`` are expected to free up (built once per decision)."""
        timeline = self._timelines.get(gpu_type)
        if timeline is None:
            timeline = self._timelines[gpu_type] = self.memory.releases.timeline(
                self.view, self.allocations, gpu_type, self.placed)
        return timeline

    def horizon(self, gpu_type: str) -> float | None:
        """Seconds until the first job waiting for training GPUs of ``gpu_type`` would get them
        (None when none waits)."""
        need = self.first_need.get(gpu_type)
        if need is None or gpu_type not in self.facts.training_types:
            return None
        self._available_by_type.clear()  # move-back may have changed avail since
        return self.timeline(gpu_type).wait_for(need - self.available(gpu_type))

    # ------------------------------------------------------------------ changes
    def release(self, alloc: Mapping[int, int], base: Mapping[int, int] | None) -> None:
        """Free a running job's base GPUs (its flexible ones are already counted as available, and
        may have been taken by a job placed earlier in this decision)."""
        held = base if base is not None else alloc
        cell_of, totals = self.facts.cell_of, self.avail_cells
        for sid, g in held.items():
            self.free[sid] += g
            self.avail[sid] += g
            totals[cell_of[sid]] += g
        loaned = self.loaned_set
        self.loaned_room += sum(g for s, g in held.items() if s in loaned)
        self._available_by_type.clear()
        self.loaned_fits.clear()
        self.loaned_safe.clear()
        self._update_spare(held)

    def _update_spare(self, servers: Mapping[int, int]) -> None:
        """Keep :attr:`spare` current after ``avail`` changed on ``servers``."""
        spare = self.spare
        if spare is None:
            return
        loaned, avail, capacity = self.loaned_set, self.avail, self.facts.capacity
        for sid in servers:
            if sid in loaned:
                if avail[sid] == capacity[sid]:
                    spare.add(sid)
                else:
                    spare.discard(sid)

    def place(self, job: JobView, placement: Mapping[int, int]) -> None:
        """Occupy ``placement`` for ``job``: free GPUs first, then displacing flexible workers."""
        loaned = self.loaned_set
        on_loaned = sum(g for s, g in placement.items() if s in loaned)
        self.loaned_room -= on_loaned
        free, avail = self.free, self.avail
        for sid, g in placement.items():
            free[sid] -= min(g, free[sid])
            avail[sid] -= g
        self.touched.update(placement)
        self.loaned_fits.clear()
        self.loaned_safe.clear()
        if on_loaned:
            self._update_spare(placement)
        facts = self.facts
        cell_of, totals = facts.cell_of, self.avail_cells
        for sid, g in placement.items():
            totals[cell_of[sid]] -= g
        self._available_by_type.clear()
        if not on_loaned:
            gpu_type = facts.gpu_types[next(iter(placement))]
            need = sum(placement.values())
            finish = self.view.now + self.rates.time_on(self.view, job, need, gpu_type)
            self.placed.append((finish, need, gpu_type))
            timeline = self._timelines.get(gpu_type)
            if timeline is not None:
                timeline.add(finish, need)

    def short_servers(self) -> dict[int, int]:
        """Server id -> GPUs left in ``avail`` where a placement took flexible GPUs (fewer there than
        flexible workers; only placements take avail)."""
        avail, flex_on = self.avail, self.flex_on
        return {sid: avail[sid] for sid in self.touched if avail[sid] < flex_on.get(sid, 0)}

    def evicted(self) -> bool:
        """Did a placement displace flexible workers?"""
        return bool(self.short_servers())
