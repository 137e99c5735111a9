"""Lyra's phase 1, admission: base demands of queued jobs, shortest remaining time first.

A job goes on training GPUs (truly free first, then displacing flexible workers); when none
fit, onto loaned GPUs if it is expected to finish sooner there than by waiting (``loaned_rule``);
a job on loaned GPUs keeps its place in line and moves to training GPUs when its turn comes and
that pays after the migration stall (``move_back``). ``baselines/lyra.py`` describes the rules;
every function here reads and changes one :class:`~lyra_baselines.lyra_state.Decision`.
"""

from __future__ import annotations

import math
from typing import Mapping

from lyra_baselines.lyra_line import LazyLine, MovingLine
from lyra_baselines.lyra_state import Decision, base_demand, split_alloc
from lyra_baselines.placement import place, place_in_groups
from lyra_gym.sim.plan import TrackedAllocations
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL
from lyra_gym.sim.topology import ServerSet
from lyra_gym.sim.view import JobView

QUEUED_TIMES_SIZE = 50_000  # queued jobs whose times_on answers are kept (then afresh)
LAZY_LINE = True  # move-back candidates' keys only when due (False: every key, sorted: the reference path)
EMPTY_LINE_EXIT = True  # return at once when nothing is in line (False: the walk over the empty line; tests)


def admit(d: Decision) -> None:
    """Phase 1 over the shortest-first line: queued jobs, jobs just stopped by our own reclaim
    answer, and (``move_back``) jobs on loaned GPUs holding their place in line."""
    view, levels, rates, memory = d.view, d.levels, d.rates, d.memory
    if EMPTY_LINE_EXIT and not (view.num_queued or d.plan.give_back or (d.settings.move_back and memory.on_loaned)):
        # nothing in line (no queued job, none stopped by our reclaim answer, no move-back
        # candidate): the walk below would visit nothing; only the candidates' heap is dropped
        memory.line.drop()
        return
    line: list[tuple] = rates.queued_line(view, view.queued_jobs())
    running = []  # still running now: their remaining work is current, not cached
    if d.plan.give_back:  # jobs our own reclaim answer just stopped may restart elsewhere at once
        stopped_now = d.preempted  # an agent's preemptions wait in the queue: not restarted now
        running += [j for j in view.running_jobs() if j.id not in d.allocations and j.id not in stopped_now]
    if d.settings.move_back and memory.on_loaned and not levels and LAZY_LINE and MovingLine.usable(
            view, d.settings.value_rate):  # the same walk, move-back candidates' keys only when due
        line += rates.running_line(view, running)
        line.sort()
        _walk_lazy(d, line, lazy_candidates(d))
        return
    memory.line.drop()  # the candidates' resting heap is not kept by this walk
    moving = move_back_candidates(d) if d.settings.move_back and memory.on_loaned else {}
    running += moving.values()
    line += rates.running_line(view, running)
    if levels:  # an agent's levels come first (higher first)
        line = [(-levels.get(j.id, NEUTRAL_JOB_LEVEL), t, i, j) for t, i, j in line]
    line.sort()  # job indices are unique: the views themselves are never compared
    for *_, job in line:
        if levels and levels.get(job.id, NEUTRAL_JOB_LEVEL) == 0:
            break  # held, and so is everything sorted after it
        if moving and job.id in moving:  # on loaned GPUs: holds its place in line for training GPUs
            if not d.blocked:
                d.moved = move_back(d, job) or d.moved
            continue
        if not _admit_one(d, job):
            break


def _walk_lazy(d: Decision, line: list[tuple], moving: LazyLine) -> None:
    """:func:`admit`'s walk over the sorted ``line`` (queued and just stopped jobs) merged with the
    move-back candidates, whose keys ``moving`` computes only when one may come next; once a job
    waits with backfill off, candidates only keep their places (nothing to compute)."""
    i, n = 0, len(line)
    while True:
        if moving and not d.blocked:
            first = moving.pop_before(line[i] if i < n else None)
            if first is not None:
                d.moved = move_back(d, first[2]) or d.moved
                continue
        if i >= n or not _admit_one(d, line[i][2]):
            return
        i += 1


def _admit_one(d: Decision, job: JobView) -> bool:
    """Place ``job``'s base demand, or let it wait; False when no later job can be placed."""
    settings = d.settings
    need = base_demand(settings, job)
    placement = _placement(d, job, need)
    if placement is None:
        wait_for_training(d, job, need)
        return not (d.blocked and not settings.backfill and d.loaned_room <= 0)
    d.place(job, placement)
    d.allocations[job.id] = placement
    if settings.elastic and job.spec.elastic:
        d.set_split(job.id, placement, {})
        d.elastic_jobs.append(job)
        d.admitted.append(job)
    return True


def _placement(d: Decision, job: JobView, need: int) -> dict[int, int] | None:
    """Where ``job``'s base demand goes: training GPUs unless blocked; else loaned GPUs when that
    pays; else, too large for any one pool, training and loaned servers together when mixing
    is allowed; else None."""
    placement = None if d.blocked else fit_training(d, need, d.training_groups)
    if placement is None and d.loaned_groups and d.loaned_room >= need:
        fits = d.loaned_fits  # the same need on unchanged GPUs fits the same way (a long queue asks often)
        candidate = fits[need] if need in fits else fits.setdefault(need, fit(d, need, d.loaned_groups))
        if candidate is not None and loaned_pays(d, job, need, candidate):
            placement = candidate  # (a move-back candidate once it runs: LyraMemory.track_loaned)
    view = d.view
    if placement is None and d.loaned and view.allow_mixed_gpu_types and need > largest_pool(d):
        placement = fit(d, need, [view.topology.server_set([*view.training_server_ids, *d.loaned], d.free)])
    return placement


# ------------------------------------------------------------------ placement
def fit(d: Decision, need: int, groups: list[ServerSet]) -> dict[int, int] | None:
    """The run's placement rule on truly free GPUs of any group first (from the engine's
    index); then counting flexible workers as free (a walk over the group, skipped under
    ``spread`` when the group has fewer than ``need`` such GPUs: best fit finds room iff it has)."""
    facts = d.facts
    rule, capacity = facts.rule, facts.capacity
    placement = place_in_groups(rule, d.free, capacity, need, groups)  # a FreeMap: read by the index
    if placement is not None:
        return placement
    avail, totals = d.avail, d.avail_cells
    spread = rule != "consolidated"
    for group in groups:
        cells = getattr(group, "cells", None)
        if spread and cells is not None and sum(totals[c] for c in cells) < need:
            continue
        placement = place(rule, avail, capacity, need, group)
        if placement is not None:
            return placement
    return None


def fit_training(d: Decision, need: int, groups: list[ServerSet]) -> dict[int, int] | None:
    """:func:`fit` on one training GPU type; across types only when none can hold the job and
    the config allows mixing."""
    placement = fit(d, need, groups)
    facts = d.facts
    if placement is None and facts.spanning and all(
            need > len(g) * facts.per_server[facts.gpu_types[g[0]]] for g in groups):
        placement = fit(d, need, [facts.spanning])
    return placement


def largest_pool(d: Decision) -> int:
    """GPUs of the largest pool one job may use alone: a training type (all training servers
    when types may mix there) or a loaned type."""
    facts = d.facts
    per_server = facts.per_server
    sizes = [len(ids) * per_server[t] for t, ids in facts.training_types.items()]
    sizes += [len(g) * per_server[facts.gpu_types[g[0]]] for g in d.loaned_groups]
    if facts.spanning:
        sizes.append(sum(len(ids) * per_server[t] for t, ids in facts.training_types.items()))
    return max(sizes, default=0)


# ------------------------------------------------------------------ waiting for training GPUs
def training_estimate(d: Decision, job: JobView, need: int, times: dict[str, float] | None = None
                      ) -> tuple[float, float, str | None]:
    """Earliest expected finish (s from now) on training GPUs, the wait before it, and the type.
    ``times``: the job's :func:`times_on` (filled here with the training types' times)."""
    best, best_wait, best_type = math.inf, math.inf, None
    facts, view = d.facts, d.view
    if times is None:
        times = times_on(d, job, need)
    for gpu_type, ids in facts.training_types.items():
        if need > len(ids) * facts.per_server[gpu_type]:
            continue
        deficit = d.waiting.get(gpu_type, 0) + need - d.available(gpu_type)
        wait = d.timeline(gpu_type).wait_for(deficit)
        seconds = times.get(gpu_type)
        if seconds is None:
            seconds = times[gpu_type] = d.rates.time_on(view, job, need, gpu_type)
        t = wait + seconds
        if t < best:
            best, best_wait, best_type = t, wait, gpu_type
    return best, best_wait, best_type


def times_on(d: Decision, job: JobView, need: int) -> dict[str, float]:
    """GPU type -> ``LyraRates.time_on`` of ``job`` on ``need`` GPUs of it, as asked so far: kept per
    queued job while its remaining work and ``need`` stay the same (as ``time_on`` keeps its
    answers; a long queue is asked again at every decision while training GPUs are full); a
    fresh dict for a running job, or under the adaptive rule (whose batch may move)."""
    if job.workers:
        return {}
    memory = d.memory
    cache = memory.queued_times
    if cache is None:
        cache = memory.queued_times = {} if d.view.scaling != "adaptive" else None
        if cache is None:
            return {}
    remaining = job.remaining_work
    entry = cache.get(job.id)
    if entry is None or entry[0] != remaining or entry[1] != need:
        if len(cache) > QUEUED_TIMES_SIZE:
            cache.clear()  # jobs that started or finished long ago
        entry = cache[job.id] = (remaining, need, {})
    return entry[2]


def loaned_pays(d: Decision, job: JobView, need: int, placement: Mapping[int, int]) -> bool:
    """Is ``job`` expected to finish sooner on ``placement`` (loaned) than by waiting for training?

    On loaned GPUs it runs at their speed to the end, or (``move_back``) until training GPUs
    would have been its, then moves there for the migration stall and the rest of its work;
    the better of the two whose time on loaned GPUs ends before the next reclaim counts.
    """
    settings, view = d.settings, d.view
    if settings.loaned_rule == "overflow":
        return True
    times = times_on(d, job, need)
    on_training, wait, training_type = training_estimate(d, job, need, times)
    loaned_type = d.facts.gpu_types[next(iter(placement))]
    on_loaned = times.get(loaned_type)
    if on_loaned is None:
        on_loaned = times[loaned_type] = d.rates.time_on(view, job, need, loaned_type)
    options = [(on_loaned, on_loaned)]  # (expected finish, time on loaned GPUs): stay to the end
    if settings.move_back and on_loaned > wait and training_type is not None:
        loaned_share = wait / on_loaned  # of the remaining work, done before moving
        options.append((wait + view.overheads.migrate_s + (1.0 - loaned_share) * times[training_type], wait))
    if placement is d.loaned_fits.get(need):  # spare servers change only with the fits: kept as long
        safe = d.loaned_safe.get(need)
        if safe is None:
            safe = d.loaned_safe[need] = safe_loaned_s(d, placement)
    else:
        safe = safe_loaned_s(d, placement)
    return min((finish for finish, stay in options if stay <= safe), default=math.inf) < on_training


def safe_loaned_s(d: Decision, placement: Mapping[int, int]) -> float:
    """Seconds until inference demand would reclaim a loaned server of ``placement``: reclaims
    take the non-loaned servers' slack first, then (by preemption cost) the other loaned servers
    holding no base worker; the demand curve is known ahead. A job expected to stay on loaned
    GPUs longer would be preempted there (and requeued), so it waits instead."""
    view, avail = d.view, d.avail
    if d.spare is None:  # loaned servers holding no base worker (empty or flexible only)
        capacity = d.facts.capacity
        d.spare = {s for s in d.loaned if avail[s] == capacity[s]}
    spare = d.spare
    threshold = len(view.inference_server_ids) - len(d.loaned) + len(spare) - sum(s in spare for s in placement)
    safe = d.safe_s.get(threshold)
    if safe is None:
        safe = d.safe_s[threshold] = view.next_demand_above(threshold) - view.now
    return safe


def wait_for_training(d: Decision, job: JobView, need: int) -> None:
    """``job`` waits for training GPUs: later estimates count its demand ahead of theirs, and
    without backfill later jobs may not take training GPUs. A job no training pool can ever
    hold does neither (it can only run on loaned GPUs)."""
    holding, spans = d.facts.training_room(need)
    if not holding and not spans:
        return
    if not d.settings.backfill:
        d.blocked = True
    if not holding:
        return  # only across GPU types: no one type to count it against
    gpu_type = holding[0] if len(holding) == 1 else training_estimate(d, job, need)[2]
    if gpu_type is None:
        return
    d.first_need.setdefault(gpu_type, need)
    d.waiting[gpu_type] = d.waiting.get(gpu_type, 0) + need


# ------------------------------------------------------------------ move back
def move_back_candidates(d: Decision) -> dict[str, JobView]:
    """Running jobs whose workers all sit on loaned servers, unchanged by this plan."""
    memory, allocations, view = d.memory, d.allocations, d.view
    training, candidates, on_loaned, views = d.facts.training_ids, {}, memory.on_loaned, memory.views
    for job_id, checked in list(on_loaned.items()):
        alloc = allocations.get(job_id)
        if alloc is None or alloc is not checked:  # (an allocation object found off training servers is kept)
            if alloc is None or not training.isdisjoint(alloc):
                del on_loaned[job_id]  # stopped, finished or already on training servers
                continue
            on_loaned[job_id] = alloc
        job = views.get(job_id) or view.job(job_id)
        if job.rate > 0 and alloc is job.allocation:  # not just changed by a reclaim
            candidates[job_id] = job
    return candidates


def lazy_candidates(d: Decision) -> LazyLine:
    """:func:`move_back_candidates` (the same jobs, the same book-keeping) as a :class:`LazyLine`:
    only the jobs ``MovingLine.start`` names are visited (the others rest in the kept heap, whose
    bounds the walk reads); a visited job whose kept state bounds its key waits in line with that
    bound, one that is no candidate now is visited again at the next decision."""
    memory, allocations, view = d.memory, d.allocations, d.view
    training, on_loaned, views, kept = d.facts.training_ids, memory.on_loaned, memory.views, memory.line
    known, now, exact, bounds = kept.known, view.now, [], []
    # untouched by this plan, a job's allocation here is the engine's (job.allocation) itself
    touched = allocations.touched if type(allocations) is TrackedAllocations else None
    visit = kept.start(view, touched, on_loaned)
    working, revisit = kept.working, kept.visit
    for job_id in visit:
        checked = on_loaned[job_id]
        alloc = allocations.get(job_id)
        if alloc is None or alloc is not checked:
            if alloc is None or not training.isdisjoint(alloc):
                del on_loaned[job_id]
                kept.forget(job_id)
                continue
            on_loaned[job_id] = alloc
        entry = known.get(job_id)  # its key's lower bound (lyra_line's docstring), if the entry proves one
        if entry is not None and entry[0] is alloc and touched is not None and job_id not in touched:
            job = entry[7]
            rate = job.rate
            if rate == entry[1]:  # (> 0: kept only for running jobs)
                work = entry[3] - rate * (now - entry[2]) - entry[6]
                if work >= entry[5]:
                    bounds.append((work / entry[4], job.index, job))
                    working.append(job)
                    continue
        else:
            job = views.get(job_id) or view.job(job_id)
            rate = job.rate
        if rate > 0 and alloc is job.allocation:
            exact.append(job)
            working.append(job)
        else:
            revisit[job_id] = None  # no candidate now
    return LazyLine(kept, view, kept.keys(view, exact), bounds)


def move_back(d: Decision, job: JobView) -> bool:
    """Move ``job`` from loaned to training GPUs when its remaining time there plus the migration
    stall beats staying; when training GPUs cannot hold it now, it waits in line for them.
    Returns whether it moved."""
    view, allocations, avail, facts = d.view, d.allocations, d.avail, d.facts
    workers = job.workers
    placement = fit_training(d, workers, d.training_groups)
    if placement is None:
        wait_for_training(d, job, workers)
        return False
    gpu_type = facts.gpu_types[next(iter(placement))]
    # like with like: staying and moving both by value_rate (goodput: the engine's rate where it
    # runs; throughput: the profile's samples/s on its loaned type)
    time_on = d.rates.time_on
    if d.settings.value_rate == "goodput":
        stay = job.remaining_work / job.rate
    else:
        stay = time_on(view, job, workers, facts.gpu_types[next(iter(job.allocation))])
    stay += max(0.0, job.overhead_until - view.now)
    if view.overheads.migrate_s + time_on(view, job, workers, gpu_type) >= stay:
        return False
    base, flex = d.base, d.flex
    d.release(allocations[job.id], base.get(job.id))
    d.place(job, placement)
    allocations[job.id] = placement
    if job.id in base:
        d.set_split(job.id, *split_alloc(d.settings, facts, job, placement))
        for sid, g in flex[job.id].items():
            avail[sid] += g  # its flexible workers stay up for grabs in phase 2
            d.avail_cells[facts.cell_of[sid]] += g
    d.memory.line.forget(job.id)  # (left in on_loaned: the plan may be overruled; dropped once off loaned servers)
    return True
