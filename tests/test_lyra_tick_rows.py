"""Lyra's knapsack rows in one pass against the code they replace, bit for bit.

``LyraRates.value_row`` builds its row in one comprehension (h = min(horizon, T(k)) written as a
branch) and ``LyraRates.charged_row`` gives a running job's row less a rescale for every change
(what ``lyra_rebalance._scaled_row`` did to it) at once; an agent's level then scales the row.
Both are compared with the loops before, on random rows (rates of 0, infinite and nan horizons
included) and at every knapsack of real Lyra runs and guided rollouts (levels included).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines import lyra_rebalance
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_rates import LyraRates
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL
from lyra_gym.workloads.tracegen import generate_trace
from tests.toy import masked_random_rollout


def _row_before(rates, gain, remaining: float, horizon: float, rescale: float) -> list[float]:
    """LyraRates.value_row's arithmetic before the one-pass rows (the reference), given its cached rates."""
    if type(rates) is not list:
        times = remaining / rates
        if math.isinf(horizon):
            return times[0] - times
        held = np.minimum(horizon, times)
        row = held * gain
        row[1:] -= np.where(held[1:] < times[1:], rescale, 0.0)
        return list(row)
    times = [remaining / r for r in rates]
    if math.isinf(horizon):
        first = times[0]
        return [first - t for t in times]
    row = [0.0] * len(times)
    for k, (t, g) in enumerate(zip(times, gain)):
        h = horizon if horizon < t else t
        row[k] = h * g - rescale if k and h < t else h * g
    return row


def _scaled_before(row, current: int, top: int, rescale: float) -> list[float]:
    """lyra_rebalance._scaled_row's charge to a running job (the reference)."""
    same = row[current] if current <= top else None
    row = [v - rescale for v in row]
    if same is not None:
        row[current] = same
    return row


def _same(a, b) -> bool:
    """The same doubles (nan equal to nan, -0.0 told from 0.0)."""
    return len(a) == len(b) and all(np.float64(x).tobytes() == np.float64(y).tobytes() for x, y in zip(a, b))


def _stub(rates: list[float], remaining: float, rescale: float):
    """A LyraRates whose value-row cache holds ``rates`` (as value_row would keep them), a job and a view."""
    lyra = LyraRates("throughput")
    array = np.array(rates)
    gain = array / array[0] - 1.0 if array[0] else np.full(len(array), np.nan)
    top = len(rates) - 1
    kept = (array.tolist(), gain.tolist()) if (array > 0).all() else (array, gain)
    lyra._rows[("m", "v100", 1, top)] = kept
    spec = SimpleNamespace(model="m", min_gpus=1)
    job = SimpleNamespace(spec=spec, remaining_work=remaining, total_work=2 * remaining)
    view = SimpleNamespace(overheads=SimpleNamespace(rescale_s=rescale))
    return lyra, job, view, kept, top


_rate = st.one_of(st.floats(0.5, 500.0), st.sampled_from([0.0, 1.0, 3.0, 10.0]))
_horizon = st.one_of(st.floats(0.0, 1e5), st.sampled_from([math.inf, 60.0, 0.0, math.nan]))


@settings(max_examples=500, deadline=None)
@given(st.lists(_rate, min_size=1, max_size=12).filter(lambda r: r[0] > 0), st.floats(1.0, 1e7), _horizon,
       st.sampled_from([0.0, 10.0, 23.5, 1e-9]), st.integers(0, 14))
def test_rows_equal_the_loops_before(rates, remaining, horizon, rescale, current):
    lyra, job, view, (kept_rates, gain), top = _stub(rates, remaining, rescale)
    with np.errstate(divide="ignore", invalid="ignore"):
        before = _row_before(kept_rates, gain, remaining, horizon, rescale)
        assert _same(lyra.value_row(view, job, "v100", top, horizon), before)
        assert _same(lyra.charged_row(view, job, "v100", top, horizon, current),
                     _scaled_before(before, current, top, rescale))


def test_a_changed_charge_is_caught():
    """The comparison tells a row charged twice at ``current`` from the right one."""
    lyra, job, view, (kept_rates, gain), top = _stub([2.0, 3.0, 3.5], 1000.0, 10.0)
    right = lyra.charged_row(view, job, "v100", top, 100.0, 1)
    assert _same(right, _scaled_before(_row_before(kept_rates, gain, 1000.0, 100.0, 10.0), 1, top, 10.0))
    assert not _same([right[0], right[1] - 10.0, right[2]], right)
    # by hand: T = 500, 333.3, 285.7 s; held 100 s (< T): 0, 100 * 0.5 - 10 = 40, 100 * 0.75 - 10 = 65;
    # a change from 1 extra worker costs 10 s now
    assert right == [0.0 - 10.0, 40.0, 65.0 - 10.0]


def _values_before(d, typed, capacity: int, gpu_type: str, horizon: float, grow: bool) -> list:
    """lyra_rebalance.knapsack_choice's knapsack rows before the one-pass rows (the reference): the
    loops of _row_before, then _scaled_row (a rescale charged to a running job, an agent's level)."""
    view, flex, levels, rates = d.view, d.flex, d.levels, d.rates
    rescale = view.overheads.rescale_s
    values = []
    for job in typed:
        spec = job.spec
        current = sum(flex[job.id].values())
        level = levels.get(job.id, NEUTRAL_JOB_LEVEL)
        top = min(spec.max_gpus - spec.min_gpus, capacity) if level else 0
        if not grow:
            top = min(top, current)
        if top == 0 and level == NEUTRAL_JOB_LEVEL and rates.job_rates(
                view, job, gpu_type, spec.min_gpus)[spec.min_gpus] > 0:
            values.append([0.0 - rescale] if job.workers > 0 and current > 0 else [0.0])
            continue
        kept_rates, gain = rates._row_rates(view, job, gpu_type, top, job.remaining_work)
        with np.errstate(divide="ignore", invalid="ignore"):
            row = _row_before(kept_rates, gain, job.remaining_work, horizon, rescale)
        if job.workers > 0:
            row = _scaled_before(row, current, top, rescale)
        if level != NEUTRAL_JOB_LEVEL:
            factor = 2.0 ** (level - NEUTRAL_JOB_LEVEL)
            row = [v * factor for v in row]
        values.append(row)
    return values


class _Rows:
    """Checks every knapsack's rows against :func:`_values_before` (installed by ``monkeypatch``)."""

    def __init__(self, monkeypatch) -> None:
        self.knapsacks = self.rows = self.scaled = 0
        self.seen: list = []
        choice = lyra_rebalance.knapsack_choice
        solve = lyra_rebalance.solve

        def recording_solve(values, capacity, exact_limit):
            self.seen.append(values)
            return solve(values, capacity, exact_limit)

        def checked(d, typed, capacity, gpu_type, horizon, grow):
            before = _values_before(d, typed, capacity, gpu_type, horizon, grow)
            self.seen.clear()
            result = choice(d, typed, capacity, gpu_type, horizon, grow)
            (values,) = self.seen
            assert len(values) == len(before) and all(_same(a, b) for a, b in zip(values, before))
            self.knapsacks += 1
            self.rows += sum(len(v) > 1 for v in values)
            self.scaled += sum(d.levels.get(job.id, NEUTRAL_JOB_LEVEL) != NEUTRAL_JOB_LEVEL for job in typed)
            return result

        monkeypatch.setattr(lyra_rebalance, "solve", recording_solve)
        monkeypatch.setattr(lyra_rebalance, "knapsack_choice", checked)


@pytest.mark.parametrize("value_rate,flex_horizon", [("goodput", "queue"), ("throughput", "queue"),
                                                     ("goodput", "completion")])
def test_every_knapsack_of_a_run_has_the_rows_before(monkeypatch, value_rate, flex_horizon):
    rows = _Rows(monkeypatch)
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(6, "v100", 8),), inference=ServerGroup(4, "t4", 8)))
    jobs = generate_trace("bench-15d", 7)[:300]
    simulate(jobs, LyraScheduler(value_rate=value_rate, flex_horizon=flex_horizon), config, seed=0)
    assert rows.knapsacks > 300 and rows.rows > 1000


@pytest.mark.parametrize("env_id", ["LyraGym/Cluster-v1", "LyraGym/Elastic-v1"])
def test_every_knapsack_of_a_guided_rollout_has_the_rows_before(monkeypatch, env_id):
    """An agent's random levels scale rows (and hold jobs): the same rows at every round."""
    rows = _Rows(monkeypatch)
    masked_random_rollout(env_id, 250, 3)
    assert rows.knapsacks > 200 and rows.rows > 200 and rows.scaled > 100
