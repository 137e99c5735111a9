"""The greedy knapsack's shortcuts choose as its general path, bit for bit.

``knapsack.ample_greedy`` answers group by group when every hull increment fits (no sort of all
increments); ``solve_greedy(shortcut=False)`` is the general path, the sort of all increments.
``lyra`` and ``lyra-reference`` share the knapsack, so the equivalence harness cannot see these;
the exact DP's shortcuts are checked in ``tests/baselines/test_knapsack_free_choice.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines.knapsack import ample_greedy, solve_greedy

_item = st.one_of(st.integers(-6, 6).map(float), st.sampled_from([0.0, -0.0, 0.5, -2.5, 1e-300, 5e-324]),
                  st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, -math.inf]))
_rows = st.lists(st.lists(_item, min_size=1, max_size=7), min_size=1, max_size=6)


def _general(values, capacity: int) -> list[int]:
    with np.errstate(invalid="ignore"):
        return solve_greedy(values, capacity, shortcut=False)


@settings(max_examples=600, deadline=None)
@given(_rows, st.integers(0, 40))
@pytest.mark.slow
def test_ample_greedy_gives_the_general_greedys_choice(values, capacity):
    with np.errstate(invalid="ignore"):
        for rows in (values, [np.asarray(v) for v in values]):  # rows as lists and as arrays
            reference = _general(rows, capacity)
            assert solve_greedy(rows, capacity) == reference
            ample = ample_greedy(rows, capacity)
            assert ample is None or ample == reference


def test_ample_greedy_by_hand():
    # hulls: [0, 3, 3.5, 1] -> +3, +0.5 (then -2.5): 2; [5, 4] -> -1: 0; [0, 2, 4] -> (2, 4): 2
    values = [[0.0, 3.0, 3.5, 1.0], [5.0, 4.0], [-1.0], [0.0, 2.0, 4.0]]
    assert ample_greedy(values, 6) == [2, 0, 0, 2] == _general(values, 6)
    assert ample_greedy(values, 5) is None  # 3 + 1 + 2 items past the first do not all fit
    assert ample_greedy([[0.0, math.nan]], 5) is None  # a nan key: the sort decides


def test_a_broken_ample_greedy_fails():
    """The comparison tells a per-group argmax (no hull, no nan fallback) from the greedy."""
    def argmax_greedy(values, capacity):
        return [int(np.argmax(v)) for v in values]

    # a nan key among the sorted increments: the sort puts group 1's increment after the break
    values = [[0.0, -1.0], [0.0, 2.0, math.nan, 1.0], [0.0, 1.0]]
    reference = _general(values, 40)
    assert argmax_greedy(values, 40) != reference
    assert solve_greedy(values, 40) == reference
