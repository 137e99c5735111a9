"""Lyra's phase 2, elastic rebalance: the spare GPUs of each type to elastic jobs.

At a round (every ``round_s``, and on loaning changes) a multiple-choice knapsack decides
(``baselines/knapsack.py``; values from ``LyraRates.value_row``). Between rounds running jobs
keep their extra workers where they are; those displaced by phase 1 are dropped unless moving
them pays for the stall, and a newly admitted job grows toward its requested size as far as
that pays. The holds of extra workers are observed for ``flex_horizon="queue"``. Every function
here reads and changes one :class:`~lyra_baselines.lyra_state.Decision`.
"""

from __future__ import annotations

import math
from functools import partial
from itertools import compress

import numpy as np

from lyra_baselines.knapsack import solve
from lyra_baselines.lyra_extras import place_admitted, place_extras
from lyra_baselines.lyra_state import Decision
from lyra_baselines.lyra_switches import HOLD_EWMA
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL
from lyra_gym.sim.view import JobView

_ZERO_ROW = np.zeros(1)  # the knapsack row of a job that may not change (read only)
_ZERO_ROW.flags.writeable = False


def rebalance(d: Decision, round_due: bool, hold: bool, fast: bool) -> None:
    """Phase 2 when it has work: at a round or a loaning change (the knapsack); else when phase 1
    admitted an elastic job, displaced flexible workers or moved a job, or an agent holds one.
    ``fast``: the admitted-only shortcut (:func:`rebalance_admitted`) where it applies."""
    if not d.elastic_jobs:
        return
    settings, view, plan = d.settings, d.view, d.plan
    if round_due or plan.give_back or plan.borrow:
        if settings.flex_horizon == "queue":
            learn_ended_holds(d)
        rebalance_types(d, knapsack=True)
        d.memory.next_round = view.now + settings.round_s
        return
    evicted = d.evicted()
    if not (d.admitted or evicted or hold or d.moved):
        return
    if fast and not (evicted or hold or d.moved or d.levels or view.allow_mixed_gpu_types):
        rebalance_admitted(d)
    else:
        rebalance_types(d, knapsack=False)


def _spare_servers(d: Decision, gpu_type: str) -> list[int]:
    """The servers of ``gpu_type`` with GPUs to spare (ascending): a walk over them, asked only
    when an extra worker is to be placed."""
    avail = d.avail
    ids = d.facts.ids_by_type[gpu_type]
    return list(compress(ids, map((0).__lt__, map(avail.__getitem__, ids))))


def _spare_gpus(d: Decision, gpu_type: str) -> int:
    """The GPUs of ``gpu_type`` to spare (free or flexible): ``avail`` summed per cell of the
    engine's index (``Decision.avail_cells``), not a walk over the servers."""
    totals = d.avail_cells
    return sum(totals[c.index] for c in d.view.topology.cells if c.gpu_type == gpu_type)


def rebalance_types(d: Decision, knapsack: bool) -> None:
    """Spare GPUs to elastic jobs, per GPU type, then place the extra workers.

    At a round (``knapsack=True``) the knapsack decides. Between rounds running jobs keep
    their extra workers where they are; those displaced by phase 1 are dropped unless moving
    them pays for the stall, and a newly admitted job grows toward its requested size as far
    as that pays (same value as the knapsack's).
    """
    by_type: dict[str, list[JobView]] = {}
    types, base = d.facts.gpu_types, d.base
    for job in d.elastic_jobs:
        by_type.setdefault(types[next(iter(base[job.id]))], []).append(job)
    for gpu_type, typed in by_type.items():
        capacity = _spare_gpus(d, gpu_type)
        waiting = d.horizon(gpu_type)
        horizon = hold_horizon(d, waiting, gpu_type)
        grow = waiting is None  # spare GPUs of a type a job waits for are that job's
        if knapsack:
            choice = knapsack_choice(d, typed, capacity, gpu_type, horizon, grow)
        else:
            choice = keep_choice(d, typed, capacity, gpu_type, horizon, grow)
        settle(d, gpu_type, typed, choice)


def settle(d: Decision, gpu_type: str, typed: list[JobView], choice: list[int]) -> None:
    """:func:`learn_hold` and :func:`place_extras` for the jobs whose extra workers may change: a
    running job that keeps as many as it has, none on a server phase 1 took flexible GPUs from
    (fewer GPUs there than flexible workers), keeps them where they are (place_extras hands it
    its dict, whatever the order), and its hold goes on (or, with none, its grant ends); it is
    left out of both. The GPUs it keeps are taken from ``avail`` only when a job grows (before
    the spare servers are listed: what place_extras' first pass would have taken). After a move
    back (its new flexible workers are not in ``flex_on``) every job is visited."""
    flex, avail, granted = d.flex, d.avail, d.memory.granted
    if d.moved:
        learn_hold(d, gpu_type, typed, choice)
        place_extras(d.plan, typed, choice, d.base, flex, avail, partial(_spare_servers, d, gpu_type), d.loaned_set)
        return
    short = d.short_servers()
    jobs, wants, kept = [], [], []
    for job, new in zip(typed, choice):
        extra = flex[job.id]
        if job.workers:
            if extra:
                if new == sum(extra.values()) and (not short or short.keys().isdisjoint(extra)):
                    kept.append(extra)
                    continue
            elif not new:
                granted.pop(job.id, None)  # learn_hold: no extra workers kept or granted
                continue
        jobs.append(job)
        wants.append(new)
    if not jobs:
        return  # every job keeps its extra workers, or has none: nothing to learn or place
    learn_hold(d, gpu_type, jobs, wants)

    def spare_servers() -> list[int]:
        for extra in kept:
            for sid, g in extra.items():
                avail[sid] -= g
        return _spare_servers(d, gpu_type)

    place_extras(d.plan, jobs, wants, d.base, flex, avail, spare_servers, d.loaned_set)


def rebalance_admitted(d: Decision) -> None:
    """:func:`rebalance_types` between rounds when the only change is admitted elastic jobs (no
    flexible worker displaced, no move, no agent levels, one GPU type per job): every running
    job keeps its extra workers as they are, so only the admitted jobs are visited (the same
    choices, hold observations and placements as :func:`keep_choice`, :func:`learn_hold`
    and :func:`place_extras`, without a walk over every running elastic job)."""
    types, now, base, flex = d.facts.gpu_types, d.view.now, d.base, d.flex
    new_by_type: dict[str, list[JobView]] = {}
    for job in d.admitted:  # the elastic jobs phase 1 placed (not the whole list of running ones)
        if not job.workers:  # queued in the view (a job our reclaim answer restarted keeps its workers)
            new_by_type.setdefault(types[next(iter(base[job.id]))], []).append(job)
    if len(new_by_type) > 1:  # the order of hold observations across types: the general path
        rebalance_types(d, knapsack=False)
        return
    for gpu_type in d.first_need:  # rebalance_types asks every type with elastic jobs for its horizon,
        if gpu_type not in new_by_type and any(types[next(iter(b))] == gpu_type for b in base.values()):
            d.horizon(gpu_type)  # which builds (and caches) a timeline when a job waits for it
    granted = d.memory.granted
    # running jobs without extra workers keep none: a grant of theirs ends (as learn_hold)
    elastic_views = d.memory.elastic_views
    for job_id in [j for j in granted if j in flex and not flex[j]]:
        running = elastic_views.get(job_id)
        if running is not None and running.workers:
            granted.pop(job_id)
    for gpu_type, admitted in new_by_type.items():
        capacity = _spare_gpus(d, gpu_type)
        waiting = d.horizon(gpu_type)
        horizon = hold_horizon(d, waiting, gpu_type)
        left = capacity - sum(g for sid, g in d.flex_on.items() if types[sid] == gpu_type)  # kept extras
        wants = []
        for job in admitted:  # toward its requested size, as far as it pays (keep_choice)
            spec, want = job.spec, 0
            top = min(spec.num_gpus - spec.min_gpus, left)
            if waiting is None and top > 0:
                want = int(np.argmax(d.rates.value_row(d.view, job, gpu_type, top, horizon)))
                left -= want
            wants.append(want)
            if want:
                granted[job.id] = (now, gpu_type)
            else:
                granted.pop(job.id, None)
        if any(wants):
            place_admitted(d.plan, admitted, wants, base, d.avail, _spare_servers(d, gpu_type), d.loaned_set,
                           d.flex_on)


# ------------------------------------------------------------------ holds of extra workers
def hold_horizon(d: Decision, waiting: float | None, gpu_type: str) -> float:
    """Seconds extra workers of ``gpu_type`` are likely held (``flex_horizon``): until the first
    job waiting for that type gets its GPUs (``waiting``); when none waits, the mean of recently
    observed holds (exponentially weighted); inf before any was observed or with ``"completion"``."""
    settings = d.settings
    if settings.flex_horizon == "completion":
        return math.inf
    if waiting is not None:
        return waiting
    return max(d.memory.held_s.get(gpu_type, math.inf), settings.round_s)


def _observe_hold(held: dict[str, float], gpu_type: str, held_s: float) -> None:
    if held_s > 0:
        mean = held.get(gpu_type)
        held[gpu_type] = held_s if mean is None else mean + HOLD_EWMA * (held_s - mean)


def learn_hold(d: Decision, gpu_type: str, typed: list[JobView], choice: list[int]) -> None:
    """Observe how long extra workers were held: from a grant to the next decrease."""
    memory, flex, now = d.memory, d.flex, d.view.now
    granted = memory.granted
    for job, new in zip(typed, choice):
        current = sum(flex[job.id].values()) if job.workers else 0
        since = granted.get(job.id)
        if new < current and since is not None:
            _observe_hold(memory.held_s, gpu_type, now - since[0])
        if new > current or (new < current and new):
            granted[job.id] = (now, gpu_type)
        elif not new:
            granted.pop(job.id, None)


def learn_ended_holds(d: Decision) -> None:
    """Holds that ended because the job finished or stopped (seen at a round: within ``round_s``)."""
    memory, allocations, now = d.memory, d.allocations, d.view.now
    granted = memory.granted
    for job_id in [j for j in granted if j not in allocations]:
        since, gpu_type = granted.pop(job_id)
        _observe_hold(memory.held_s, gpu_type, now - since)


# ------------------------------------------------------------------ choices
def keep_choice(d: Decision, typed: list[JobView], capacity: int, gpu_type: str, horizon: float,
                grow: bool) -> list[int]:
    """Extra workers per job between rounds: running jobs keep what still has room where it is;
    displaced workers move only when T(w) + migrate_s < T(w - d) + rescale_s; a new job grows
    toward its request from what is left, to the most valuable size (``value_row``)."""
    levels, view, rates = d.levels, d.view, d.rates
    kept, losts = _kept_workers(d, typed)
    left = capacity - sum(kept)
    overheads = view.overheads
    choice = []
    for job, k, lost in zip(typed, kept, losts):
        spec = job.spec
        want = k
        if levels and not levels.get(job.id, NEUTRAL_JOB_LEVEL):
            want = 0
        elif job.workers:  # running: keep, and move the displaced workers only if it pays
            moved = min(lost, left)
            if moved > 0:
                workers = spec.min_gpus + k
                stay = rates.time_on(view, job, workers, gpu_type) + overheads.rescale_s
                move = rates.time_on(view, job, workers + moved, gpu_type) + (
                    overheads.migrate_s if moved == lost else overheads.rescale_s)
                if move < stay:
                    want = k + moved
                    left -= moved
        elif grow:  # just admitted: toward its requested size, as far as it pays
            top = min(spec.num_gpus - spec.min_gpus, left)
            if top > 0:
                want = int(np.argmax(rates.value_row(view, job, gpu_type, top, horizon)))
                left -= want
        choice.append(want)
    return choice


def _kept_workers(d: Decision, typed: list[JobView]) -> tuple[list[int], list[int]]:
    """Per job, the extra workers that still have room where they are (taken in order, server by
    server) and those displaced. Only servers phase 1 took flexible GPUs from (fewer GPUs there
    than flexible workers) are short: elsewhere every job keeps them all. After a move back (its
    new flexible workers are not in ``flex_on``) every server is walked."""
    flex, avail = d.flex, d.avail
    kept, lost = [], []
    if d.moved:
        room = list(avail)
        for job in typed:
            k = 0
            extra = flex[job.id]
            for sid, g in extra.items():
                take = min(g, room[sid])
                room[sid] -= take
                k += take
            kept.append(k)
            lost.append(sum(extra.values()) - k)
        return kept, lost
    short = d.short_servers()  # room left there
    for job in typed:
        extra = flex[job.id]
        current = sum(extra.values())
        k = current
        if short and not short.keys().isdisjoint(extra):
            for sid, g in extra.items():
                there = short.get(sid)
                if there is not None and there < g:
                    short[sid] = 0
                    k -= g - there
                elif there is not None:
                    short[sid] = there - g
        kept.append(k)
        lost.append(current - k)
    return kept, lost


def knapsack_choice(d: Decision, typed: list[JobView], capacity: int, gpu_type: str, horizon: float,
                    grow: bool) -> list[int]:
    """Extra workers per job maximising the total JCT reduction (MCKP over ``value_row``);
    a running job pays ``rescale_s`` for any change; no job grows unless ``grow``."""
    view, flex, levels, rates = d.view, d.flex, d.levels, d.rates
    rescale = view.overheads.rescale_s
    values: list = []
    stay = None  # the one-item row of a job that may not change: 0, less a rescale to drop extras
    for job in typed:
        spec = job.spec
        current = sum(flex[job.id].values())
        level = levels.get(job.id, NEUTRAL_JOB_LEVEL)
        top = min(spec.max_gpus - spec.min_gpus, capacity) if level else 0
        if not grow:
            top = min(top, current)
        if top == 0 and level == NEUTRAL_JOB_LEVEL and rates.job_rates(
                view, job, gpu_type, spec.min_gpus, spec.min_gpus)[spec.min_gpus] > 0:
            # what value_row and the penalty below give for top = 0, without the arrays
            if job.workers > 0 and current > 0:
                if stay is None:
                    stay = [0.0 - rescale]
                values.append(stay)
            else:
                values.append(_ZERO_ROW)
            continue
        # a running job pays a rescale now for any change (none to stay as it is): charged_row
        row = rates.charged_row(view, job, gpu_type, top, horizon, current) if job.workers > 0 else \
            rates.value_row(view, job, gpu_type, top, horizon)
        values.append(row if level == NEUTRAL_JOB_LEVEL else _level_scaled(row, level))
    # GPUs already held as flexible workers are back in avail; weights count all extras.
    return solve(values, capacity, d.settings.knapsack_exact_limit)


def _level_scaled(row: list[float], level: int) -> list[float]:
    """A value row as the knapsack sees it under an agent's level: scaled by 2 ** (level - neutral)."""
    factor = 2.0 ** (level - NEUTRAL_JOB_LEVEL)
    return [v * factor for v in row]
