"""Lyra's kept answers against a fresh computation, at every decision of real runs.

``LyraRates.remaining_at`` keeps a job's reference rate per (job, size, progress part) instead of
asking ``JobView.remaining_time_at``; ``LyraRates.job_rates`` grows its goodput rows only as far as
asked (each entry a fresh ``ClusterView.goodput``); the Decision's loaned servers come from the index's kept
set (``Topology.loaned_set``) instead of ``Topology.server_set`` over ``loaned()``. Both must give
the very same floats and sets as the fresh computation, under each scaling rule.
"""

from __future__ import annotations

import dataclasses

import pytest

from lyra_baselines.lyra import LyraScheduler
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.scaling import SCALING_RULES
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace


class _Checking(LyraScheduler):
    """Lyra that compares the kept answers with fresh ones before each decision."""

    checked = 0
    loaned = 0

    def decide_guided(self, view, guidance):
        rates = self.memory.rates
        for job in [*view.queued_jobs(), *view.running_jobs()]:
            for workers in {1, job.spec.num_gpus}:
                assert rates.remaining_at(view, job, workers) == job.remaining_time_at(workers)
                type(self).checked += 1
            if view.scaling != "adaptive" and job.workers:  # kept goodput rows, grown lazily
                per_server = rates.per_server.get("v100")
                if per_server:
                    row = rates.job_rates(view, job, "v100", job.spec.num_gpus)
                    assert len(row) > job.spec.num_gpus and row[0] == 0.0
                    assert all(row[w] == view.goodput(job, w, "v100", per_server) for w in range(1, len(row)))
        topology = view.topology
        if topology.loaned():
            free = view.free_map()
            kept, fresh = topology.loaned_set(free), topology.server_set(list(topology.loaned()), free)
            assert tuple(kept) == tuple(fresh) and kept.cells == fresh.cells
            type(self).loaned += 1
        return super().decide_guided(view, guidance)


@pytest.mark.parametrize("scaling", SCALING_RULES)
def test_kept_rates_and_loaned_sets_equal_fresh_ones(scaling):
    base = SimConfig(cluster=ClusterConfig(training=(ServerGroup(6, "v100", 8),), inference=ServerGroup(6, "t4", 8)))
    config = dataclasses.replace(base, scaling=scaling)
    jobs = generate_trace("bench-15d", 5)[:300]
    _Checking.checked = _Checking.loaned = 0
    checked = simulate(jobs, _Checking(), config, seed=0)
    plain = simulate(jobs, LyraScheduler(), config, seed=0)
    assert _Checking.checked > 1000 and _Checking.loaned > 10
    assert checked.jobs == plain.jobs
