"""Placing Lyra's extra workers (phase 2's last step): which servers the chosen extra workers
of each elastic job go on. Jobs keep what they can of their current flexible placement; the
rest go largest first, loaned servers first, so that a reclaim becomes a scale-in.
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Mapping, Sequence

from lyra_gym.sim.plan import Plan
from lyra_gym.sim.view import JobView


def place_extras(plan: Plan, typed: list[JobView], choice: list[int], base: dict[str, dict[int, int]],
                 flex: dict[str, dict[int, int]], avail: list[int],
                 servers: Sequence[int] | Callable[[], Sequence[int]], loaned: AbstractSet[int]) -> None:
    """Place each job's extra workers: first every job keeps what it can of its current
    flexible placement (loaned servers first), then the rest go largest first, loaned servers
    first, on ``servers`` (those with GPUs to spare, ascending; or a function that lists them,
    called only when a job grows). Writes changed allocations into ``plan``."""
    extras, left = _kept_extras(typed, choice, flex, avail, loaned)
    growing = [i for i in range(len(typed)) if left[i] > 0]  # the others take nothing more
    if growing:  # servers is ascending: loaned ones first, then the others, each ascending
        if callable(servers):
            servers = servers()
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


def _kept_extras(typed: list[JobView], choice: list[int], flex: dict[str, dict[int, int]], avail: list[int],
                 loaned: AbstractSet[int]) -> tuple[list[dict[int, int]], list[int]]:
    """:func:`place_extras`' first pass: what each job keeps of its current flexible placement
    (loaned servers first), taken from ``avail``; (kept per job, extra workers still to place)."""
    extras: list[dict[int, int]] = []
    left = list(choice)
    for i, job in enumerate(typed):
        extra: dict[int, int] = {}
        current = flex[job.id]
        if current and left[i] == sum(current.values()) and all(avail[sid] >= g for sid, g in current.items()):
            # it keeps them all (the loop below would take each whole, in any order): the same dict
            for sid, g in current.items():
                avail[sid] -= g
            left[i] = 0
            extras.append(current)  # read only: a job with nothing left never grows below
            continue
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
    return extras, left


def place_admitted(plan: Plan, admitted: list[JobView], wants: list[int], base: dict[str, dict[int, int]],
                   avail: list[int], servers: list[int], loaned: AbstractSet[int], flex_on: Mapping[int, int]) -> None:
    """:func:`place_extras` for admitted jobs when every running job keeps its extra workers:
    largest first, on the GPUs each server has after those, loaned servers first."""
    on_loan = [s for s in servers if s in loaned]
    loaned_first = on_loan + [s for s in servers if s not in loaned] if on_loan else servers
    taken: dict[int, int] = {}  # GPUs placed per server so far (the spare ones: avail less flex_on, less these)
    growing = [i for i, want in enumerate(wants) if want > 0]
    for i in sorted(growing, key=lambda i: (-wants[i], admitted[i].index)):
        job, need, extra = admitted[i], wants[i], {}
        for sid in loaned_first:
            if need <= 0:
                break
            g = min(avail[sid] - flex_on.get(sid, 0) - taken.get(sid, 0), need)
            if g:
                extra[sid] = g
                taken[sid] = taken.get(sid, 0) + g
                need -= g
        alloc = dict(base[job.id])
        for sid, g in extra.items():
            alloc[sid] = alloc.get(sid, 0) + g
        if alloc != plan.allocations.get(job.id):
            plan.allocations[job.id] = alloc
