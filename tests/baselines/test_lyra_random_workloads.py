"""Lyra under random workloads: every plan it makes is valid and every job finishes.

Random traces (elastic and inelastic toy jobs, bursts), a small V100 training pool and a T4
inference pool whose demand moves up and down (so servers are lent and reclaimed), over every
combination of Lyra's switches. The engine validates each plan completely, so a bookkeeping slip
in Lyra (a server over-full, a worker range broken) fails the run.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_baselines.lyra import LyraScheduler
from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from toy import TOY, job
from lyra_gym.run.simulate import simulate

SWITCHES = list(itertools.product([False, True], ["speed", "overflow"], [True, False], ["queue", "completion"]))


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 14))
    jobs = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 5.0, 60.0, 400.0]))
        gpus = draw(st.sampled_from([1, 2, 3, 4, 6, 8]))
        duration = draw(st.sampled_from([10.0, 90.0, 300.0, 2000.0]))
        if draw(st.booleans()):
            lo = draw(st.integers(1, gpus))
            hi = draw(st.integers(gpus, 8))
            jobs.append(job(f"e{i}", t, gpus, duration, elastic=True, lo=lo, hi=hi))
        else:
            jobs.append(job(f"j{i}", t, gpus, duration))
    steps = draw(st.lists(st.integers(0, 3), min_size=1, max_size=8))
    demand = DemandCurve(times_s=[300.0 * k for k in range(len(steps))], servers=steps)
    return jobs, demand


CONFIG = SimConfig(
    cluster=ClusterConfig(training=(ServerGroup(2, "v100", 4),), inference=ServerGroup(3, "t4", 4)),
    overheads=OverheadConfig(rescale_s=30.0, restart_s=20.0, migrate_s=45.0),
)


@pytest.mark.parametrize("backfill, loaned_rule, move_back, flex_horizon", SWITCHES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
@pytest.mark.sample(3)
def test_every_plan_is_valid_and_every_job_finishes(case, backfill, loaned_rule, move_back, flex_horizon):
    jobs, demand = case
    policy = LyraScheduler(backfill=backfill, loaned_rule=loaned_rule, move_back=move_back, flex_horizon=flex_horizon)
    result = simulate(jobs, policy, CONFIG, seed=0, profiles=TOY, demand=demand)
    assert result.metrics["jobs_unfinished"] == 0
    again = simulate(jobs, LyraScheduler(backfill=backfill, loaned_rule=loaned_rule, move_back=move_back,
                                         flex_horizon=flex_horizon), CONFIG, seed=0, profiles=TOY, demand=demand)
    assert again.jobs == result.jobs  # deterministic
