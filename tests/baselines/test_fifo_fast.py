"""The fast ``fifo`` (``baselines/fifo_fast.py``) equals the plain loop (``baselines/fifo.py``)
plan for plan at every decision, keeps none of a run's state when copied, and skips the blocked
head's retry it exists for."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_baselines.fifo import FifoScheduler
from lyra_baselines.fifo_fast import FastFifoScheduler
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.sim.view import ClusterView
from tests.run.test_golden_results import CASES, ROOT, _stored, digest
from toy import TOY, config, job, run

# as test_fifo_plain: X (6 of 8 GPUs, 100 s) from 0 blocks H (4 GPUs); S and T arrive while H waits
BLOCKED = [job("X", 0, 6, 100), job("H", 1, 4, 10), job("S", 2, 2, 10), job("T", 3, 1, 10)]


@dataclass
class Twin(Scheduler):
    """Runs ``fast``; asks ``plain`` the same view first at every decision and compares the plans."""

    fast: FastFifoScheduler
    plain: FifoScheduler
    decisions: int = 0
    name = "fifo-twin"

    def decide(self, view: ClusterView) -> Plan:
        expected = self.plain.decide(view).allocations
        plan = self.fast.decide(view)
        self.decisions += 1
        assert plan.allocations == expected, f"decision {self.decisions} at t={view.now}"
        return plan


@st.composite
def workloads(draw):
    """Jobs of 1 to 12 GPUs (some wider than a server, some wider than a type), in bursts."""
    jobs, t = [], 0.0
    for i in range(draw(st.integers(1, 16))):
        t += draw(st.sampled_from([0.0, 0.0, 5.0, 60.0, 400.0]))
        jobs.append(job(f"j{i}", t, draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12])),
                        draw(st.sampled_from([10.0, 90.0, 300.0, 2000.0]))))
    return jobs


@st.composite
def clusters(draw) -> SimConfig:
    """One or two training GPU types, either placement rule, mixed types allowed or not."""
    training = [ServerGroup(draw(st.integers(1, 3)), "v100", draw(st.sampled_from([2, 4, 8])))]
    if draw(st.booleans()):
        training.append(ServerGroup(draw(st.integers(1, 2)), "t4", 4))
    return SimConfig(cluster=ClusterConfig(training=tuple(training), inference=ServerGroup(1, "t4", 4)),
                     placement=draw(st.sampled_from(["spread", "consolidated"])),
                     allow_mixed_gpu_types=draw(st.booleans()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs=workloads(), cfg=clusters(), backfill=st.booleans())
def test_fast_fifo_equals_the_plain_loop_at_every_decision(jobs, cfg, backfill):
    twin = Twin(FastFifoScheduler(backfill=backfill), FifoScheduler(backfill=backfill))
    simulate(jobs, twin, cfg, seed=0, profiles=TOY)
    assert twin.decisions > 0


def test_one_scheduler_over_two_runs_keeps_nothing_of_the_first():
    """The shortcuts are keyed by the run's view: a second run (another view, same topology
    version and head id) tries its head afresh and plans as a fresh scheduler does."""
    fast = FastFifoScheduler()
    first = run(BLOCKED, fast, config())
    again = run(BLOCKED, fast, config())
    assert first.jobs == again.jobs == run(BLOCKED, FifoScheduler(), config()).jobs


def test_the_blocked_head_is_not_retried_on_unchanged_free_gpus(monkeypatch):
    """S and T arrive while H is blocked on the same free GPUs: the plain loop tries H at each of
    those decisions, the fast one only at the first."""
    tries = {"plain": 0, "fast": 0}
    for name, scheduler in (("plain", FifoScheduler()), ("fast", FastFifoScheduler())):
        original = ClusterView.free_map

        def counted(view, _name=name, _original=original):
            tries[_name] += 1
            return _original(view)
        monkeypatch.setattr(ClusterView, "free_map", counted)
        run(BLOCKED, scheduler, config())
        monkeypatch.setattr(ClusterView, "free_map", original)
    assert tries["fast"] < tries["plain"]


def test_copies_and_pickles_drop_the_run_state():
    """After a run the fast scheduler pickles to what a fresh one pickles to (no view inside), and
    a deep copy mid-life is a working scheduler of the same parameters."""
    for backfill in (False, True):
        scheduler, fresh = FastFifoScheduler(backfill=backfill), pickle.dumps(FastFifoScheduler(backfill=backfill))
        run(BLOCKED, scheduler, config())
        assert scheduler._blocked is not None or backfill  # the run left its view behind (backfill: no memo)
        assert pickle.dumps(scheduler) == fresh
        clone = copy.deepcopy(scheduler)
        assert (clone.backfill, clone._placer, clone._blocked) == (backfill, None, None)
        assert run(BLOCKED, clone, config()).jobs == run(BLOCKED, FifoScheduler(backfill=backfill), config()).jobs


def test_the_fast_fifo_keeps_fifos_golden_digests(monkeypatch):
    """Registered as ``fifo`` (the entry point names it; registered here until it is installed), the
    fast variant gives the stored golden results bit for bit on every golden case."""
    monkeypatch.setitem(registry._registered, "fifo", FastFifoScheduler)
    monkeypatch.chdir(ROOT)
    assert {case: digest(case, "fifo") for case in CASES} == {case: _stored()[case]["fifo"] for case in CASES}
