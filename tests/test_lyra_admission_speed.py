"""Lyra's phase-1 shortcuts against a from-scratch reference, decision for decision.

``lyra_estimates.ReleaseTracker`` keeps its book of expected releases through the engine's change
feed and the plan's own edits (visiting only the jobs that may have changed); the reference is a
second tracker shown a plain copy of the same allocations, which visits every job (the path it
always took before). At every timeline asked, in every decision, both must list the same
releases (the same (finish, GPUs) pairs: the order of equal finish times is documented as
irrelevant, so the lists are compared sorted) and answer every wait the same.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lyra_baselines.lyra as lyra_module
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_estimates import ReleaseBook, ReleaseTimeline, ReleaseTracker
from lyra_baselines.lyra_state import Decision, LyraMemory
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.plan import TrackedAllocations
from lyra_gym.workloads.tracegen import generate_trace
from test_lyra_invariants import CONFIG, SWITCHES, workloads
from toy import TOY


def _pairs(timeline: ReleaseTimeline) -> list[tuple[float, int]]:
    return sorted(zip(timeline.times, timeline.gpus))


_REFERENCES: dict[int, tuple[LyraMemory, ReleaseTracker]] = {}  # id(memory) -> (that memory, its from-scratch tracker)


class _CheckedTimelines(Decision):
    """A Decision whose every release timeline is compared with a from-scratch tracker's."""

    checked = 0
    nonempty = 0

    def timeline(self, gpu_type: str) -> ReleaseTimeline:
        fresh = gpu_type not in self._timelines
        timeline = super().timeline(gpu_type)
        if fresh:
            memory = self.memory
            entry = _REFERENCES.get(id(memory))
            if entry is None or entry[0] is not memory:  # a new run: a new reference
                kept = memory.releases
                tracker = ReleaseTracker(dict(memory.views), kept.cap)
                tracker.gpu_types, tracker.training_ids = kept.gpu_types, kept.training_ids
                entry = _REFERENCES[id(memory)] = (memory, tracker)
            expected = entry[1].timeline(self.view, dict(self.allocations), gpu_type, self.placed)
            assert _pairs(timeline) == _pairs(expected)
            assert timeline.cumulative[-1:] == expected.cumulative[-1:]
            for deficit in range(1, (timeline.cumulative[-1] if timeline.cumulative else 0) + 2):
                assert timeline.wait_for(deficit) == expected.wait_for(deficit)
            type(self).checked += 1
            type(self).nonempty += bool(timeline.times)
        return timeline


@pytest.fixture
def checked(monkeypatch):
    monkeypatch.setattr(lyra_module, "Decision", _CheckedTimelines)
    _CheckedTimelines.checked = _CheckedTimelines.nonempty = 0
    yield _CheckedTimelines
    _REFERENCES.clear()


@pytest.mark.parametrize("backfill, loaned_rule, move_back, flex_horizon", SWITCHES[::3])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
def test_kept_release_book_equals_a_rebuild_at_every_decision(case, backfill, loaned_rule, move_back,
                                                              flex_horizon, checked):
    jobs, demand = case
    switches = dict(backfill=backfill, loaned_rule=loaned_rule, move_back=move_back, flex_horizon=flex_horizon)
    simulate(jobs, LyraScheduler(**switches), CONFIG, seed=0, profiles=TOY, demand=demand)


@pytest.mark.parametrize("elastic", [True, False])
def test_kept_release_book_equals_a_rebuild_on_a_loaded_cluster(elastic, checked):
    jobs = generate_trace("bench-15d", 3)[:700]  # a small cluster: long queues, loaning, move-backs
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(5, "v100", 8),), inference=ServerGroup(6, "t4", 8)))
    simulate(jobs, LyraScheduler(elastic=elastic), config, seed=0)
    assert checked.checked > 300 and checked.nonempty > 300


def _shared_timelines_after_a_placement() -> tuple[list, list, list]:
    """Two timelines of an unchanged book (the second shares the first's lists), the first given a
    placement in between, then one after the book changed: their (time, GPUs) and cumulative GPUs."""
    book = ReleaseBook()
    book.add("v100", 20.0, 4)
    book.add("v100", 10.0, 2)
    first = book.timeline(0.0, "v100", [])
    first.add(15.0, 8)  # a job placed in that decision
    second = book.timeline(1.0, "v100", [])
    book.remove("v100", 10.0, 2)
    third = book.timeline(2.0, "v100", [])
    return [(t.times, t.gpus, t.cumulative) for t in (first, second, third)], \
        [t.wait_for(7) for t in (first, second, third)], [t.shared for t in (first, second, third)]


def test_timelines_share_an_unchanged_book_and_copy_it_before_a_placement():
    lists, waits, shared = _shared_timelines_after_a_placement()
    assert lists == [([10.0, 15.0, 20.0], [2, 8, 4], [2, 10, 14]), ([10.0, 20.0], [2, 4], [2, 6]),
                     ([20.0], [4], [4])]
    assert waits == [15.0, math.inf, math.inf] and shared == [False, True, True]


def test_a_shared_timeline_changed_in_place_is_caught(monkeypatch):
    add = ReleaseTimeline.add

    def add_in_place(self, time, gpus):  # broken: writes into the lists later timelines share
        self.shared = False
        add(self, time, gpus)

    monkeypatch.setattr(ReleaseTimeline, "add", add_in_place)
    assert _shared_timelines_after_a_placement()[0][1] != ([10.0, 20.0], [2, 4], [2, 6])


# ------------------------------------------------------------------ each path, by hand
class _Feed:
    """A change feed whose next answer the test sets (None: lost)."""

    def __init__(self) -> None:
        self.next: dict | None = {}

    def changed(self):
        answer, self.next = self.next, {}
        return answer


def _job(job_id, finish, allocation):
    spec = SimpleNamespace(elastic=False, min_gpus=1, num_gpus=4)
    return SimpleNamespace(id=job_id, spec=spec, expected_finish=finish, allocation=allocation)


def test_the_release_tracker_visits_the_feeds_changes_the_plans_edits_and_the_jobs_without_entries():
    a, b, c = {0: 4}, {1: 4}, {2: 4}
    jobs = {"A": _job("A", 100.0, a), "B": _job("B", 50.0, b), "C": _job("C", None, c)}
    feed = _Feed()
    view = SimpleNamespace(now=10.0, job=jobs.__getitem__, change_feed=lambda: feed, believed=False)
    tracker = ReleaseTracker({}, cap=None)
    tracker.gpu_types, tracker.training_ids = ["v100"] * 3, frozenset({0, 1, 2})

    def plan(**edits):
        allocations = TrackedAllocations({"A": a, "B": b, "C": c}, token=None)
        for job_id, alloc in edits.items():
            allocations[job_id] = alloc
        return allocations

    def releases(allocations):
        return _pairs(tracker.timeline(view, allocations, "v100", placed=[]))

    assert releases(plan()) == [(50.0, 4), (100.0, 4)]  # C has no expected finish yet
    assert releases(plan(A={0: 2})) == [(50.0, 4)]  # edited by this plan: left out
    assert releases(plan()) == [(50.0, 4), (100.0, 4)]  # that plan was not applied: A is back
    stopping = plan()
    del stopping["A"]
    assert releases(stopping) == [(50.0, 4)]  # stopped by this plan
    assert releases(plan()) == [(50.0, 4), (100.0, 4)]  # not applied either
    jobs["C"].expected_finish = 70.0
    assert releases(plan()) == [(50.0, 4), (70.0, 4), (100.0, 4)]  # a job without an entry is asked again
    b2 = {1: 2}
    jobs["B"].allocation, jobs["B"].expected_finish = b2, 40.0
    feed.next = {"B": (b2, 2)}
    allocations = TrackedAllocations({"A": a, "B": b2, "C": c}, token=None)
    assert releases(allocations) == [(40.0, 2), (70.0, 4), (100.0, 4)]  # resized by the engine
    feed.next = {"A": (None, 1)}
    allocations = TrackedAllocations({"B": b2, "C": c}, token=None)
    assert releases(allocations) == [(40.0, 2), (70.0, 4)]  # A finished
    feed.next = None  # lost: every job visited
    assert releases(TrackedAllocations({"C": c}, token=None)) == [(70.0, 4)]


# ------------------------------------------------------------------ the line's running jobs, move-back
# candidates and the loaned fits' safe times, each against its from-scratch form at every decision
import lyra_baselines.lyra_admission as admission  # noqa: E402
from lyra_baselines.lyra_rates import LyraRates, part_floor  # noqa: E402
from lyra_gym.model.scaling import progress_bin  # noqa: E402

_SEEN = {"line": 0, "queued": 0, "candidates": 0, "safe": 0}


def _reference_candidates(d, on_loaned):
    """``move_back_candidates`` as it was: every job's allocation checked afresh."""
    training, allocations = d.facts.training_ids, d.allocations
    kept, candidates = [], {}
    for job_id in on_loaned:
        alloc = allocations.get(job_id)
        if alloc is None or not training.isdisjoint(alloc):
            continue
        kept.append(job_id)
        job = d.memory.views.get(job_id) or d.view.job(job_id)
        if job.rate > 0 and alloc is job.allocation:
            candidates[job_id] = job
    return kept, candidates


def _reference_safe(d, placement):
    """``safe_loaned_s`` with the spare loaned servers counted from ``avail`` now."""
    avail, capacity, view = d.avail, d.facts.capacity, d.view
    spare = {s for s in d.loaned if avail[s] == capacity[s]}
    threshold = len(view.inference_server_ids) - len(d.loaned) + len(spare) - sum(s in spare for s in placement)
    return view.next_demand_above(threshold) - view.now


@pytest.fixture
def checked_admission(monkeypatch):
    line, candidates, pays = LyraRates.running_line, admission.move_back_candidates, admission.loaned_pays

    def checked_line(self, view, jobs):
        jobs = list(jobs)
        got = line(self, view, jobs)
        assert got == [(self.remaining_at(view, j, j.spec.num_gpus), j.index, j) for j in jobs]
        assert all(a[2] is b for a, b in zip(got, jobs))
        _SEEN["line"] += len(jobs)
        return got

    queued = LyraRates.queued_line

    def checked_queued(self, view, jobs):
        jobs = list(jobs)
        reference = LyraRates(self.value_rate)  # remaining_estimate per job, from the same kept estimates
        reference._sjf_keys = dict(self._sjf_keys)
        got = queued(self, view, jobs)
        assert got == [(reference.remaining_estimate(view, j), j.index, j) for j in jobs]
        assert all(a[2] is b for a, b in zip(got, jobs))
        _SEEN["queued"] += len(jobs)
        return got

    def checked_candidates(d):
        before = list(d.memory.on_loaned)
        kept, expected = _reference_candidates(d, before)
        got = candidates(d)
        assert list(d.memory.on_loaned) == kept
        assert list(got) == list(expected) and all(got[k] is expected[k] for k in got)
        _SEEN["candidates"] += len(got)
        return got

    def checked_pays(d, job, need, placement):
        answer = pays(d, job, need, placement)
        for kept_need, safe in d.loaned_safe.items():
            assert safe == _reference_safe(d, d.loaned_fits[kept_need])
            _SEEN["safe"] += 1
        return answer

    monkeypatch.setattr(LyraRates, "running_line", checked_line)
    monkeypatch.setattr(LyraRates, "queued_line", checked_queued)
    monkeypatch.setattr(admission, "move_back_candidates", checked_candidates)
    monkeypatch.setattr(admission, "loaned_pays", checked_pays)
    # the path that computes every candidate's key (the lazy line is checked against it in
    # tests/test_lyra_admission_line.py)
    monkeypatch.setattr(admission, "LAZY_LINE", False)
    for key in _SEEN:
        _SEEN[key] = 0
    yield _SEEN


@pytest.mark.parametrize("backfill, loaned_rule, move_back, flex_horizon", SWITCHES[::2])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=workloads())
def test_admission_shortcuts_equal_their_from_scratch_forms_at_every_decision(
        case, backfill, loaned_rule, move_back, flex_horizon, checked_admission):
    jobs, demand = case
    switches = dict(backfill=backfill, loaned_rule=loaned_rule, move_back=move_back, flex_horizon=flex_horizon)
    simulate(jobs, LyraScheduler(**switches), CONFIG, seed=0, profiles=TOY, demand=demand)


@pytest.mark.parametrize("value_rate", ["goodput", "throughput"])
def test_admission_shortcuts_equal_their_from_scratch_forms_on_a_loaded_cluster(value_rate, checked_admission):
    jobs = generate_trace("bench-15d", 3)[:700]  # long queues, loaning, jobs on loaned GPUs waiting to move back
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(5, "v100", 8),), inference=ServerGroup(6, "t4", 8)))
    simulate(jobs, LyraScheduler(value_rate=value_rate), config, seed=0)
    assert checked_admission["line"] > 500 and checked_admission["candidates"] > 500
    assert checked_admission["safe"] > 500 and checked_admission["queued"] > 500


def test_a_safe_time_is_kept_per_need_until_the_loaned_fits_change():
    d = SimpleNamespace(loaned_fits={}, loaned_safe={})
    calls = []

    def counted(decision, placement):
        calls.append(placement)
        return 100.0 + len(calls)

    original = admission.safe_loaned_s
    admission.safe_loaned_s = counted
    try:
        fit = {7: 4}
        d.loaned_fits[4] = fit
        settings_ = SimpleNamespace(loaned_rule="speed", move_back=False)
        d.settings = settings_
        d.view = SimpleNamespace(overheads=SimpleNamespace(migrate_s=0.0))
        d.facts = SimpleNamespace(gpu_types={7: "t4", 8: "t4"})
        d.rates = SimpleNamespace(time_on=lambda view, job, need, gpu_type: 50.0)
        estimate = admission.training_estimate
        admission.training_estimate = lambda decision, job, need, times=None: (60.0, 10.0, "v100")
        job = SimpleNamespace(workers=4)  # running: its times are not kept
        try:
            assert admission.loaned_pays(d, job, 4, fit) and admission.loaned_pays(d, job, 4, fit)
            assert calls == [fit] and d.loaned_safe == {4: 101.0}  # asked once for the kept fit
            other = {8: 4}  # not the kept fit: asked every time, not kept
            assert admission.loaned_pays(d, job, 4, other) and calls == [fit, other]
            assert d.loaned_safe == {4: 101.0}
        finally:
            admission.training_estimate = estimate
    finally:
        admission.safe_loaned_s = original


@settings(max_examples=300, deadline=None)
@given(total=st.floats(1.0, 1e12), share=st.floats(0.0, 1.0))
def test_part_floor_is_the_least_remaining_work_of_the_part(total, share):
    remaining = total * share
    part = progress_bin(total - remaining, total)
    low = part_floor(total, part, remaining)
    assert 0.0 <= low <= remaining and progress_bin(total - low, total) == part
    if low > 0.0:
        assert progress_bin(total - math.nextafter(low, 0.0), total) != part


def test_running_line_follows_a_rate_that_changes_with_the_progress_part():
    """A reference rate that depends on the progress part (none of the shipped rules has one at
    the requested size, so the kept parts are checked here): every answer as remaining_at's."""
    job = SimpleNamespace(spec=SimpleNamespace(num_gpus=4), id="j", index=0, total_work=1000.0, remaining_work=1000.0)
    job.progress_part_at = lambda remaining: progress_bin(job.total_work - remaining, job.total_work)  # JobView's
    view = SimpleNamespace(scaling="fixed-local", reference_server=lambda: ("v100", 8),
                           goodput=lambda j, w, t, ps: 10.0 + 3 * progress_bin(j.total_work - j.remaining_work,
                                                                                 j.total_work))
    kept = LyraRates("goodput")
    path = [1000.0 - 7.0 * k for k in range(143)] + [950.0, 640.0, 3.0, 0.0, 999.0, 0.0]
    for remaining in path:
        job.remaining_work = remaining
        expected = LyraRates("goodput").remaining_at(view, job, 4)
        assert kept.running_line(view, [job]) == [(expected, 0, job)]
    for total, remaining in ((1000.0, 700.0), (1000.0, 690.0), (800.0, 695.0), (800.0, 400.0)):
        job.total_work, job.remaining_work = total, remaining  # (a believed total moves: its part with it)
        assert kept.running_line(view, [job]) == [(LyraRates("goodput").remaining_at(view, job, 4), 0, job)]
