"""Exact shortcuts in Lyra's phase 2 against the code they replace, on random inputs, bit for bit.

- ``knapsack.solve_exact`` runs its DP only to W = the most the groups can take (when below the
  capacity) and adds a one-item group's value without the window: the same choice as the DP to the
  capacity, ties included (integer values make many).
- ``lyra_extras.place_extras`` hands a job that keeps every extra worker its current dict: the same
  allocations and the same GPUs left per server as the general loop.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import AbstractSet, Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines.knapsack import solve_exact
from lyra_baselines.lyra_extras import place_extras
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.view import JobView


def _dp_before(values: Sequence[Sequence[float]], capacity: int) -> list[int]:
    """knapsack.solve_exact before the trimmed DP and the one-item shortcut (the reference)."""
    capacity = max(0, int(capacity))
    dp = np.zeros(capacity + 1)  # best value using the groups so far with weight <= c
    rows = np.arange(capacity + 1)
    choice = [0] * len(values)
    choices = []  # (group, argmax per capacity)
    for g, items in enumerate(values):
        if len(items) == 1 and items[0] == 0:
            continue  # one item worth 0: dp + 0 is dp (dp never holds -0.0), and its choice is 0
        v = np.asarray(items[: capacity + 1], dtype=np.float64)
        n = len(v)
        # cand[c, k] = dp[c - k] + v[k] (-inf where k > c): a strided view of dp padded with n - 1
        # -infs on the left, read backwards along k
        padded = np.empty(n - 1 + capacity + 1)
        padded[: n - 1] = -np.inf
        padded[n - 1:] = dp
        step = padded.strides[0]
        window = np.ndarray((capacity + 1, n), np.float64, padded, (n - 1) * step, (step, -step))
        cand = window + v
        # argmax picks the first maximum: the smallest k
        arg = cand.argmax(axis=1)
        dp = cand[rows, arg]
        choices.append((g, arg))
    c = capacity
    for g, arg in reversed(choices):
        k = int(arg[c])
        choice[g] = k
        c -= k
    return choice


# integers and halves: many exact ties across groups; one-item rows of any sign; a lone 0 item
_item = st.one_of(st.integers(-6, 6).map(float), st.sampled_from([0.0, -0.0, 0.5, -2.5]))
_rows = st.lists(st.lists(_item, min_size=1, max_size=7), min_size=1, max_size=6)


@settings(max_examples=400, deadline=None)
@given(_rows, st.integers(0, 40))
def test_trimmed_dp_gives_the_choice_of_the_full_dp(values, capacity):
    before = _dp_before(values, capacity)
    assert solve_exact(values, capacity) == before
    assert solve_exact(values, capacity, trim=False) == before
    assert solve_exact([np.asarray(v) for v in values], capacity) == before  # rows as arrays too


def test_trimmed_dp_by_hand():
    # W = 3 + 1 = 4 < capacity 50: job 0 takes 3 (value 9), job 1 ties 0 and 1 (smallest k: 0)
    values = [[0.0, 4.0, 7.0, 9.0], [0.0, 0.0], [-5.0]]
    assert solve_exact(values, 50) == [3, 0, 0] == _dp_before(values, 50)


def _place_before(plan: Plan, typed: list[JobView], choice: list[int], base: dict[str, dict[int, int]],
                 flex: dict[str, dict[int, int]], avail: list[int], servers: list[int],
                 loaned: AbstractSet[int]) -> None:
    """lyra_extras.place_extras before its keep-everything shortcut (the reference)."""
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



@st.composite
def _placements(draw):
    servers = draw(st.integers(1, 6))
    n = draw(st.integers(1, 5))
    flex, base, choice = {}, {}, []
    for i in range(n):
        held = draw(st.dictionaries(st.integers(0, servers - 1), st.integers(1, 4), max_size=3))
        flex[f"j{i}"] = held
        base[f"j{i}"] = {draw(st.integers(0, servers - 1)): draw(st.integers(1, 2))}
        choice.append(draw(st.integers(0, 8)))
    avail = [draw(st.integers(0, 8)) for _ in range(servers)]
    loaned = draw(st.sets(st.integers(0, servers - 1)))
    return flex, base, choice, avail, loaned


def _run(place, flex, base, choice, avail, loaned: AbstractSet[int]):
    jobs = [SimpleNamespace(id=job_id, index=i) for i, job_id in enumerate(flex)]
    allocations = {job_id: {**base[job_id], **{s: base[job_id].get(s, 0) + g for s, g in flex[job_id].items()}}
                   for job_id in flex}
    plan = SimpleNamespace(allocations=dict(allocations))
    left = list(avail)
    place(plan, jobs, choice, base, flex, left, list(range(len(avail))), loaned)
    return {k: dict(sorted(v.items())) for k, v in plan.allocations.items()}, left


@settings(max_examples=400, deadline=None)
@given(_placements())
def test_keep_everything_shortcut_places_as_the_general_loop(case):
    flex, base, choice, avail, loaned = case
    assert _run(place_extras, flex, base, choice, avail, loaned) == _run(_place_before, flex, base, choice, avail,
                                                                          loaned)
