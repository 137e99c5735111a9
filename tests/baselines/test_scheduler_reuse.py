"""A scheduler instance reused for a second run gives that run exactly as a fresh one does:
``reset`` clears every piece of per-run state (the benchmark and ``evaluate`` reuse instances)."""

from __future__ import annotations

import pytest

from lyra_gym.run.simulate import simulate
from lyra_gym.sim.scheduler import available, make
from lyra_gym.workloads.tracegen import generate_trace


@pytest.fixture(scope="module")
def traces():
    return generate_trace("small-1d", 3)[:150], generate_trace("small-1d", 4)[:150]


@pytest.mark.parametrize("name", available())
@pytest.mark.sample(4)
def test_a_reused_scheduler_runs_like_a_fresh_one(name, traces):
    first, second = traces
    scheduler = make(name)
    simulate(first, scheduler, seed=2)
    reused = simulate(second, scheduler, seed=1).metrics
    fresh = simulate(second, name, seed=1).metrics
    assert {k: v for k, v in reused.items() if "wall" not in k} == {k: v for k, v in fresh.items() if "wall" not in k}
