"""Phase 2's shortcuts at production scale against the code they replace, bit for bit.

- ``knapsack.ample_greedy``: the greedy's choice group by group when every hull increment fits,
  without the sort of all increments; ``solve_greedy`` takes a two-item row's increment inline
  (the greedy before both, ``_greedy_before``, is the reference).
- ``lyra_rebalance._spare_gpus``: the spare GPUs of a type from the per-cell sums, not a walk;
  the spare servers are listed only when an extra worker is placed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines import knapsack, lyra_rebalance
from lyra_baselines.knapsack import _hull_increments, ample_greedy, solve_greedy
from lyra_baselines.lyra import LyraScheduler
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace

_item = st.one_of(st.integers(-6, 6).map(float), st.sampled_from([0.0, -0.0, 0.5, -2.5, 1e-300, 5e-324]),
                  st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, -math.inf]))
_rows = st.lists(st.lists(_item, min_size=1, max_size=7), min_size=1, max_size=6)


def _greedy_before(values, capacity: int) -> list[int]:
    """knapsack.solve_greedy before the shortcuts (the reference): every row's hull, one sort."""
    increments = []
    for g, items in enumerate(values):
        if len(items) < 2:
            continue
        if isinstance(items, np.ndarray):
            items = items.tolist()
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
            next_step[g] = -1
            continue
        choice[g] += w
        left -= w
        next_step[g] += 1
    return choice


def _same_choice(values, capacity: int) -> bool:
    with np.errstate(invalid="ignore"):
        reference = _greedy_before(values, capacity)
        return solve_greedy(values, capacity) == reference == solve_greedy(values, capacity, shortcut=False)


@settings(max_examples=600, deadline=None)
@given(_rows, st.integers(0, 40))
def test_ample_greedy_gives_the_sorted_greedys_choice(values, capacity):
    assert _same_choice(values, capacity)
    assert _same_choice([np.asarray(v) for v in values], capacity)  # rows as arrays too


def test_ample_greedy_by_hand():
    # hulls: [0, 3, 3.5, 1] -> +3, +0.5 (then -2.5): 2; [5, 4] -> -1: 0; [0, 2, 4] -> (2, 4): 2
    values = [[0.0, 3.0, 3.5, 1.0], [5.0, 4.0], [-1.0], [0.0, 2.0, 4.0]]
    assert ample_greedy(values, 6) == [2, 0, 0, 2] == _greedy_before(values, 6)
    assert ample_greedy(values, 5) is None  # 3 + 1 + 2 items past the first do not all fit
    assert ample_greedy([[0.0, math.nan]], 5) is None  # a nan key: the sort decides


def test_a_broken_ample_greedy_fails():
    """The comparison tells a per-group argmax (no hull, no nan fallback) from the greedy."""
    def argmax_greedy(values, capacity):
        return [int(np.argmax(v)) for v in values]

    # a nan key among the sorted increments: the sort puts group 1's increment after the break
    values = [[0.0, -1.0], [0.0, 2.0, math.nan, 1.0], [0.0, 1.0]]
    with np.errstate(invalid="ignore"):
        reference = _greedy_before(values, 40)
    assert argmax_greedy(values, 40) != reference
    assert solve_greedy(values, 40) == reference


class _Checked:
    """Counts the shortcuts taken in a run and compares each with its reference."""

    def __init__(self, monkeypatch) -> None:
        self.ample = self.greedy = self.spare = 0
        greedy, spare_gpus = knapsack.solve_greedy, lyra_rebalance._spare_gpus

        def checked_greedy(values, capacity, shortcut=True):
            reference = _greedy_before(values, capacity)
            assert greedy(values, capacity, shortcut=False) == reference
            self.greedy += 1
            self.ample += ample_greedy(values, capacity) is not None
            choice = greedy(values, capacity)
            assert choice == reference
            return choice

        def checked_spare(d, gpu_type):
            total = spare_gpus(d, gpu_type)
            assert total == sum(d.avail[s] for s in d.facts.ids_by_type[gpu_type] if d.avail[s] > 0)
            self.spare += 1
            return total

        monkeypatch.setattr(knapsack, "solve_greedy", checked_greedy)
        monkeypatch.setattr(lyra_rebalance, "_spare_gpus", checked_spare)


@pytest.mark.parametrize("value_rate", ["goodput", "throughput"])
def test_every_greedy_knapsack_of_a_run_is_the_sorted_one(monkeypatch, value_rate):
    """Every knapsack by the greedy (an exact limit of 0 cells): the same choices with and without
    the shortcut, which answers most rounds of a cluster with spare GPUs."""
    checked = _Checked(monkeypatch)
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(6, "v100", 8),), inference=ServerGroup(4, "t4", 8)))
    jobs = generate_trace("bench-15d", 7)[:300]
    simulate(jobs, LyraScheduler(value_rate=value_rate, knapsack_exact_limit=0), config, seed=0)
    assert checked.greedy > 300 and checked.ample > 100 and checked.greedy - checked.ample > 10
    assert checked.spare > 1000
