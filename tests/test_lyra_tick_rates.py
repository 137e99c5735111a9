"""Lyra's kept goodput rows filled only from the least size asked for, against fresh goodputs.

``LyraRates.job_rates(..., low)`` computes a new progress part's goodputs from ``low`` workers up
(the value rows ask from ``min_gpus``), not from 1; asked later for fewer workers it fills them
in. Every entry a caller may read (``low`` .. ``top``) must be the view's goodput, bit for bit, at
every call of real runs under each fixed-batch scaling rule; the rows grow as before.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_rates import LyraRates, _grown
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace


def _counted(asked: list[int]):
    def goodputs(first: int, end: int) -> list[float]:
        asked.extend(range(first, end))
        return [10.0 * w + 0.5 for w in range(first, end)]
    return goodputs


def test_grown_by_hand():
    asked: list[int] = []
    rates, first = _grown(None, 6, 4, _counted(asked))  # a new part asked for 4..6 workers
    assert asked == [4, 5, 6] and first == 4
    assert rates[0] == 0.0 and all(math.isnan(rates[w]) for w in (1, 2, 3)) and list(rates[4:]) == [40.5, 50.5, 60.5]
    asked.clear()
    grown, first = _grown((rates, 4), 9, 2, _counted(asked))  # longer (to 2 x 7 = 14) and down to 2
    assert asked == list(range(7, 14)) + [2, 3] and first == 2 and len(grown) == 14
    assert math.isnan(grown[1]) and list(grown[2:]) == [10.0 * w + 0.5 for w in range(2, 14)]
    assert list(rates[4:]) == [40.5, 50.5, 60.5] and math.isnan(rates[3])  # the kept array is not written
    asked.clear()
    same, first = _grown((grown, 2), 5, 1, _counted(asked))
    assert asked == [1] and same is not grown and first == 1 and math.isnan(grown[1])


def test_fresh_parts_skip_the_sizes_below_the_minimum():
    asked: list[int] = []
    _grown(None, 24, 8, _counted(asked))
    assert asked == list(range(8, 25))  # before: 1..24


@pytest.mark.parametrize("scaling", ["fixed-local", "fixed-global", "throughput"])
def test_every_rate_read_is_the_views_goodput(monkeypatch, scaling):
    original = LyraRates.job_rates
    counts = {"calls": 0, "skipped": 0}

    def checked(self, view, job, gpu_type, top, low=1):
        rates = original(self, view, job, gpu_type, top, low)
        if self.value_rate == "goodput":
            per_server = self.per_server[gpu_type]
            for w in range(max(low, 1), top + 1):
                assert rates[w] == view.goodput(job, w, gpu_type, per_server)
            counts["skipped"] += int(np.isnan(rates[1:]).sum())  # sizes not computed (never read)
        assert rates[0] == 0.0
        counts["calls"] += 1
        return rates

    monkeypatch.setattr(LyraRates, "job_rates", checked)
    base = SimConfig(cluster=ClusterConfig(training=(ServerGroup(6, "v100", 8),), inference=ServerGroup(4, "t4", 8)))
    config = dataclasses.replace(base, scaling=scaling)
    jobs = generate_trace("bench-15d", 5)[:300]
    checked_run = simulate(jobs, LyraScheduler(), config, seed=0)
    assert counts["calls"] > 1000 and counts["skipped"] > 0
    monkeypatch.setattr(LyraRates, "job_rates", original)
    assert checked_run.jobs == simulate(jobs, LyraScheduler(), config, seed=0).jobs
