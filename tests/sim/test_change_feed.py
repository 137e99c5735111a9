"""The engine's change feed (``ClusterView.change_feed``, ``lyra_gym.sim.journal.ChangeFeed``): at
every decision it names every job whose running allocation changed since the last read (found by
comparing snapshots of the running allocations, by hand), with its allocation and start sequence
now; it survives the journal's trimming, and one read too late reports itself lost."""

from __future__ import annotations

import pytest

from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import build_engine
from lyra_gym.sim.journal import MAX_AGE
from lyra_gym.sim.scheduler import make
from lyra_gym.workloads.tracegen import generate_trace

CONFIG = SimConfig(cluster=ClusterConfig(training=(ServerGroup(16, "v100", 8),), inference=ServerGroup(4, "t4", 8)))


def _running(engine):
    """Job id -> (allocation object, start sequence) of the running jobs, start order."""
    return {k: (a, engine.job_by_id(k).start_seq) for k, a in engine.running_allocations.items()}


def _diff(before, after):
    """The ids whose allocation object or start sequence differs, or that started or stopped."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


@pytest.mark.parametrize("policy", ["fifo", "tiresias"])  # (lyra's use: tests/baselines/test_reference_equivalence.py)
def test_the_feed_names_every_changed_job_with_its_state_now(policy):
    engine = build_engine(generate_trace("bench-15d", 1)[:300], make(policy), CONFIG, seed=0)
    engine.begin()
    feed = engine.view.change_feed()
    before, decisions, changed_total = _running(engine), 0, 0
    while engine.next_decision():
        engine.view.current_plan()  # pending plans make the journal trim (it must keep the feed's entries)
        changes = feed.changed()
        now = _running(engine)
        assert changes is not None
        assert _diff(before, now) <= changes.keys()  # every change (a job changed back may be in it too)
        for job_id, (alloc, seq) in changes.items():
            assert (alloc, seq) == (now[job_id] if job_id in now else (None, engine.job_by_id(job_id).start_seq))
        changed_total += len(changes)
        before, decisions = now, decisions + 1
        engine.submit(engine.scheduler.decide(engine.view))
    engine.finish()
    started = sum(job.first_start is not None for job in engine.jobs)
    assert decisions > 100 and started > 200 and changed_total >= started  # each job that ran, at least once
    assert len(engine.journal.entries) <= 2 * max(64, changed_total)


def test_running_gives_the_running_allocations_in_start_order():
    engine = build_engine(generate_trace("bench-15d", 1)[:200], make("lyra"), CONFIG, seed=0)
    engine.begin()
    feed = engine.view.change_feed()
    for _ in range(60):
        assert engine.next_decision()
        engine.submit(engine.scheduler.decide(engine.view))
    assert feed.running() == _running(engine) and list(feed.running()) == list(engine.running_allocations)
    assert feed.changed() == {}  # running() marks everything read


def test_a_feed_read_too_late_reports_itself_lost_and_then_goes_on():
    engine = build_engine(generate_trace("bench-15d", 1)[:3000], make("fifo"), CONFIG, seed=0)
    engine.begin()
    feed = engine.view.change_feed()
    while engine.journal.start + len(engine.journal.entries) - feed.mark <= MAX_AGE:
        assert engine.next_decision()
        engine.view.current_plan()
        engine.submit(engine.scheduler.decide(engine.view))
    for _ in range(3):  # the next trims drop what the feed did not read
        engine.next_decision()
        engine.view.current_plan()
        engine.journal.trim()
        engine.submit(engine.scheduler.decide(engine.view))
    assert feed.changed() is None  # lost: rebuild from feed.running()
    before = _running(engine)
    engine.next_decision()
    assert _diff(before, _running(engine)) <= feed.changed().keys()
    assert len(engine.journal.entries) < 3 * MAX_AGE


def test_a_dropped_feed_does_not_keep_the_journal():
    engine = build_engine(generate_trace("bench-15d", 1)[:300], make("fifo"), CONFIG, seed=0)
    engine.begin()
    engine.view.change_feed()  # not kept
    while engine.next_decision():
        engine.view.current_plan()
        engine.submit(engine.scheduler.decide(engine.view))
    assert len(engine.journal.entries) <= 64 + 16
