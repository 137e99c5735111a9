"""Multiple-choice knapsack (MCKP) for Lyra's elastic phase.

One group per elastic job; item k of a group = k extra workers, weight k GPUs,
value ``values[g][k]`` (any real number; item 0 has weight 0). Choose exactly
one item per group with total weight <= capacity, maximising total value.

- :func:`solve_exact`: dynamic programming over capacity, O(groups x items x
  capacity) numpy operations; exact.
- :func:`solve_greedy`: the fast fallback. Each group's items are reduced to
  their upper concave hull (from k = 0); the hull's increments are taken in
  order of value per GPU, best first, while they fit and add value. Exact when
  every group is concave and the capacity is used up by whole increments;
  otherwise a lower bound (``benchmarks/bench_knapsack.py`` reports the gap).
  :func:`ample_greedy` gives its choice group by group when every increment fits at once.
- :func:`solve`: exact below ``exact_limit`` DP cells, greedy above.
- :func:`free_choice`: the DP's answer, without the DP, when every group can take its best item
  and no float tie can move the DP off it (Lyra's rounds, mostly).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

DEFAULT_EXACT_LIMIT = 400_000  # DP cells (groups x items x capacity) before falling back


def total_value(values: Sequence[Sequence[float]], choice: Sequence[int]) -> float:
    return float(sum(values[g][k] for g, k in enumerate(choice)))


def solve_exact(values: Sequence[Sequence[float]], capacity: int, trim: bool = True,
                shortcut: bool = True) -> list[int]:
    """Optimal item index per group (ties: the smallest k in the earliest group that decides).

    The DP runs to ``min(capacity, W)``, W the largest total weight the groups can take: beyond W
    every dp row holds the same value, so each group's argmax, and the choice traced back from
    ``capacity``, are those traced back from W (the same doubles, the same choice). ``trim=False``:
    the DP to ``capacity``; ``shortcut=False``: the DP even where :func:`free_choice` answers
    (tests compare them)."""
    capacity = max(0, int(capacity))
    if shortcut:
        free = free_choice(values, capacity)
        if free is not None:
            return free
    if trim:
        most = sum(max(0, len(items) - 1) for items in values)  # W (items[: W + 1] is whole)
        capacity = min(capacity, most)
    dp = np.zeros(capacity + 1)  # best value using the groups so far with weight <= c
    rows = np.arange(capacity + 1)
    choice = [0] * len(values)
    choices = []  # (group, argmax per capacity)
    for g, items in enumerate(values):
        if len(items) == 1 and items[0] == 0:
            continue  # one item worth 0: dp + 0 is dp (dp never holds -0.0), and its choice is 0
        if len(items) == 1:
            dp = dp + float(items[0])  # cand[c, 0] = dp[c] + v[0], argmax 0: the choice stays 0
            continue
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


def free_choice(values: Sequence[Sequence[float]], capacity: int) -> list[int] | None:
    """:func:`solve_exact`'s choice when each group's first maximum a_g fits together
    (sum a_g <= capacity) and no float tie can arise; None where that is not shown (then run the DP).

    Proof. Let M_0 = 0.0 and M_g = fl(M_{g-1} + v_g[a_g]), the DP's own additions in group order
    (a one-item group adds items[0]; one worth 0 is skipped by the DP and here), S_g = a_1 + ... + a_g.
    Claim: dp_g[c] <= M_g for every c, and dp_g[c] is M_g (the same double) for c >= S_g. True for
    dp_0 = 0. Step: cand[c, k] = fl(dp_{g-1}[c - k] + v[k]) <= fl(M_{g-1} + v[k]) since rounding
    is monotone (-inf where k > c); for k >= a_g that is <= M_g (v[k] <= v[a_g]); for k < a_g it
    is < M_g when fl(M_{g-1} + max(v[:a_g])) < M_g, checked below (monotone again: one check
    covers every k < a_g). For c >= S_g, dp_{g-1}[c - a_g] = M_{g-1}, so cand[c, a_g] = M_g, the
    row's maximum, and no smaller k reaches it: the DP's argmax (the first maximum) is a_g. The
    trace back starts at the (trimmed) capacity >= S_G (S_G <= W) and takes a_G, leaving
    c - a_G >= S_{G-1}, and so on: the choice is (a_1, ..., a_G). Rows cut to capacity + 1 items
    keep a_g (<= S_G). Only finite values are taken (a nan or inf in a row, or a sum that
    overflows, falls back), so every M_g is a finite double and the comparisons are exact. An int
    item is the double the DP makes of it (float + int rounds the int as numpy does); one before
    a_g that is smaller but rounds to v[a_g]'s double adds to M_g too: a tie, left to the DP."""
    choice = []
    total = 0.0  # M_g
    weight = 0
    for items in values:
        if len(items) == 1:
            first = items[0]
            if first != 0:  # (a zero item is skipped by the DP: M stays)
                total = total + first  # a nan or inf here leaves total non-finite: checked at the end
            choice.append(0)
            continue
        if isinstance(items, np.ndarray):
            items = items.tolist()  # the same doubles
        if not -math.inf < sum(items) < math.inf:
            return None  # a nan or inf (or a sum past the largest double): the DP decides
        best = max(items)
        k = items.index(best)  # the first maximum
        new = total + best
        if k and total + max(items[:k]) == new:
            return None  # a smaller k ties in floats: the DP decides
        weight += k
        if weight > capacity:
            return None  # the groups' best items do not fit together
        total = new
        choice.append(k)
    if not math.isfinite(total):
        return None
    return choice


def _hull_increments(items: Sequence[float]) -> list[tuple[int, float]]:
    """Upper concave hull of points (k, items[k]) from k = 0, as (weight, value) increments."""
    hull = [0]
    for k in range(1, len(items)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # drop b if it lies on or below the segment a -> k
            if (items[b] - items[a]) * (k - a) <= (items[k] - items[a]) * (b - a):
                hull.pop()
            else:
                break
        hull.append(k)
    return [(b - a, items[b] - items[a]) for a, b in zip(hull, hull[1:])]


def ample_greedy(values: Sequence[Sequence[float]], capacity: int) -> list[int] | None:
    """:func:`solve_greedy`'s choice, group by group (no sort of all increments), when every hull
    increment fits at once (the groups' items less one sum to <= capacity); None where a nan
    increment, or a positive one whose key -v/w underflows to 0, could move the sorted order.

    Why it is the same: the greedy sorts (-v/w, g, step, w, v) and stops at the first v <= 0.
    With no nan key, every v > 0 has a key < 0 (checked) and every v <= 0 a key >= 0, so the
    positive increments all come first; none is refused for weight (all fit). A group's own
    increments are met in (key, step) order, and it takes them while that order is step 0, 1, ...
    (the first out of order blocks it for good): what is computed here per group."""
    if sum(len(items) - 1 for items in values if len(items) > 1) > capacity:
        return None
    choice = [0] * len(values)
    for g, items in enumerate(values):
        n = len(items)
        if n < 2:
            continue
        if n == 2:  # one increment (1, b - a): key -v, never 0 for v > 0
            v = items[1] - items[0]
            if v > 0:
                choice[g] = 1
            elif not v <= 0:
                return None  # nan
            continue
        if isinstance(items, np.ndarray):
            items = items.tolist()  # as solve_greedy: the same doubles
        positive = []
        for step, (w, v) in enumerate(_hull_increments(items)):
            key = -v / w
            if key != key or (v > 0 and key == 0):
                return None
            if v > 0:
                positive.append((key, step, w))
        positive.sort()
        taken = 0
        for expected, (_, step, w) in enumerate(positive):
            if step != expected:
                break
            taken += w
        choice[g] = taken
    return choice


def solve_greedy(values: Sequence[Sequence[float]], capacity: int, shortcut: bool = True) -> list[int]:
    """Convex-hull greedy: near-optimal, O(total items x log). ``shortcut=False``: the sort of all
    increments even where :func:`ample_greedy` answers (tests compare them)."""
    if shortcut:
        ample = ample_greedy(values, capacity)
        if ample is not None:
            return ample
    increments = []
    for g, items in enumerate(values):
        n = len(items)
        if n < 2:
            continue  # one item: no increment
        if isinstance(items, np.ndarray):
            items = items.tolist()  # the same doubles; Python floats index and add faster than numpy scalars
        if n == 2:  # _hull_increments of two points, inline: (1, items[1] - items[0])
            v = items[1] - items[0]
            increments.append((-v / 1, g, 0, 1, v))
            continue
        for step, (w, v) in enumerate(_hull_increments(items)):
            increments.append((-v / w, g, step, w, v))
    increments.sort()
    choice = [0] * len(values)
    next_step = [0] * len(values)
    left = capacity
    for _, g, step, w, v in increments:
        if v <= 0:
            break
        if step != next_step[g] or w > left:
            next_step[g] = -1  # a group's hull increments must be taken in order
            continue
        choice[g] += w
        left -= w
        next_step[g] += 1
    return choice


def solve(values: Sequence[Sequence[float]], capacity: int, exact_limit: int = DEFAULT_EXACT_LIMIT) -> list[int]:
    """Exact DP when groups x items x (capacity + 1) <= ``exact_limit``, else the greedy."""
    if not values:
        return []
    items = max(map(len, values))
    if len(values) * items * (capacity + 1) <= exact_limit:
        return solve_exact(values, capacity)
    return solve_greedy(values, capacity)
