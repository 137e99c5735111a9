"""The multiple-choice knapsack: exact DP equals brute force; the greedy fallback is feasible and close."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines.knapsack import solve, solve_exact, solve_greedy, total_value

values_st = st.lists(
    st.lists(st.floats(-20, 20, allow_nan=False, allow_infinity=False), min_size=1, max_size=6),
    min_size=1, max_size=5,
)


def brute_force(values, capacity):
    best = -np.inf
    for choice in itertools.product(*(range(len(v)) for v in values)):
        if sum(choice) <= capacity:
            best = max(best, total_value(values, choice))
    return best


@settings(max_examples=300, deadline=None)
@given(values_st, st.integers(0, 12))
def test_exact_solver_equals_brute_force(values, capacity):
    choice = solve_exact(values, capacity)
    assert sum(choice) <= capacity
    assert all(0 <= k < len(v) for k, v in zip(choice, values))
    assert abs(total_value(values, choice) - brute_force(values, capacity)) < 1e-9


@settings(max_examples=300, deadline=None)
@given(values_st, st.integers(0, 12))
def test_greedy_is_feasible_and_never_beats_exact(values, capacity):
    choice = solve_greedy(values, capacity)
    assert sum(choice) <= capacity
    assert all(0 <= k < len(v) for k, v in zip(choice, values))
    assert total_value(values, choice) <= total_value(values, solve_exact(values, capacity)) + 1e-9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(0, 10), min_size=1, max_size=6), min_size=1, max_size=5), st.integers(0, 12))
def test_greedy_is_exact_on_concave_groups_with_unit_steps(gains, capacity):
    # strictly decreasing positive unit increments: every hull step has weight 1, so greedy is optimal
    values = [list(np.concatenate([[0.0], np.cumsum(sorted((g + 1e-3 * (i + 1) for i, g in enumerate(row)), reverse=True))]))
              for row in gains]
    assert abs(total_value(values, solve_greedy(values, capacity)) - brute_force(values, capacity)) < 1e-9


def test_exact_solver_picks_the_better_job_by_hand():
    # job 0: each extra GPU saves 100, 50, 10 s; job 1: 80, 70 s. Capacity 3:
    # best = 100 + 80 + 70 = 250 (k = 1, 2), not 100 + 50 + 80 = 230.
    values = [[0, 100, 150, 160], [0, 80, 150]]
    assert solve_exact(values, 3) == [1, 2]
    assert solve(values, 3) == [1, 2]


def test_solve_falls_back_to_greedy_above_the_limit():
    values = [[0, 5, 9, 12]] * 10
    assert solve(values, 20, exact_limit=10) == solve_greedy(values, 20)
    assert solve(values, 20) == solve_exact(values, 20)
