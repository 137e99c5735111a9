"""Schedulers are found by name, including ones a researcher registers without editing the engine."""

from __future__ import annotations

import pytest

from lyra_gym.run.simulate import simulate
from lyra_gym.sim import scheduler as registry
from lyra_gym.workloads.tracegen import generate_trace


def test_shipped_schedulers_are_listed():
    assert {"fifo", "sjf"} <= set(registry.available())


def test_unknown_scheduler_error_lists_the_available_ones():
    with pytest.raises(registry.UnknownSchedulerError, match="unknown scheduler 'nope'.*fifo"):
        registry.make("nope")


def test_scheduler_parameters_reach_the_dataclass():
    assert registry.make("fifo", backfill=True).backfill is True


def test_a_registered_scheduler_runs_through_simulate():
    from lyra_baselines.fifo import FifoScheduler

    class Named(FifoScheduler):
        name = "my-fifo"

    registry.register("my-fifo", Named)
    try:
        assert "my-fifo" in registry.available()
        jobs = generate_trace("small-1d", 0)[:40]
        ours, theirs = simulate(jobs, "my-fifo"), simulate(jobs, "fifo")
        assert ours.jobs == theirs.jobs
    finally:
        registry._registered.pop("my-fifo")
