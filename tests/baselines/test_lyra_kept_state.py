"""Lyra's kept state where the equivalence harness cannot reach it, by hand.

``tests/baselines/test_reference_equivalence.py`` checks the fast ``lyra`` against ``lyra-reference`` plan
for plan on real runs; what no shipped run can show is checked here on hand-made inputs:

- paths no run takes: a lost change feed (the release tracker visits every job), a rate that
  moves with the progress part at the requested size (no shipped scaling rule has one; under a
  knowledge mode it must follow the *true* part, not the believed one), ``part_floor``'s bound;
- speed properties (answers that must not be recomputed or copied): a loaned fit's safe time
  asked once per need, timelines sharing an unchanged release book, goodput rows computed only
  from the least size asked.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

import lyra_baselines.lyra_admission as admission
from lyra_baselines.lyra_estimates import ReleaseBook, ReleaseTimeline, ReleaseTracker
from lyra_baselines.lyra_line import MovingLine
from lyra_baselines.lyra_rates import LyraRates, _grown, part_floor
from lyra_gym.model.jobs import JobState
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.knowledge import Knowledge
from lyra_gym.model.scaling import progress_bin
from lyra_gym.sim.plan import TrackedAllocations
from lyra_gym.sim.view import KnownJobView


def _pairs(timeline: ReleaseTimeline) -> list[tuple[float, int]]:
    return sorted(zip(timeline.times, timeline.gpus))


# ------------------------------------------------------------------ the release tracker and book
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


# ------------------------------------------------------------------ loaned fits
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


# ------------------------------------------------------------------ rates that follow the (true) progress part
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


# by hand under a knowledge mode: the rate at the true part, the believed work (a fake view gives
# a rate that moves with the part at the requested size)
class _Believed(Knowledge):
    """Every job believed to need ``ratio`` times its true work (no growth past it in these tests)."""

    def __init__(self, ratio: float) -> None:
        super().__init__([], 2.0)
        self.ratio = ratio

    def initial(self, job) -> float:
        return self.ratio * job.total_work


class _Job:
    """A job record doing ``rate`` samples/s from time 0 (what KnownJobView reads of one)."""

    def __init__(self, index: int, total: float, rate: float = 1.0) -> None:
        self.spec = JobSpec(f"j{index}", 0.0, 4, 1000.0, "m", True, 1, 8)
        self.index, self.total_work, self.init_batch, self.batch, self.speed = index, total, 64.0, None, rate
        self.workers, self.state = 4, JobState.RUNNING
        self.reference_rate = total / self.spec.duration  # samples/s at the requested size

    def remaining_work(self, now: float) -> float:
        return max(0.0, self.total_work - self.speed * now)

    def work_done_at(self, now: float) -> float:
        return min(self.total_work, self.speed * now)


def _rate(job, workers: int) -> float:
    """The fake goodput: a function of the true part and the workers (samples/s)."""
    return 10.0 + 3.0 * job.progress_part + 0.5 * workers


def _fake_view(engine) -> SimpleNamespace:
    return SimpleNamespace(scaling="fixed-local", rate_settings=None, now=0.0, reference_server=lambda: ("v100", 8),
                           goodput=lambda job, w, t, ps: _rate(job, w),
                           goodputs=lambda job, low, high, t, ps: [_rate(job, w) for w in range(low, high)],
                           overheads=SimpleNamespace(rescale_s=30.0), engine=engine)


def test_a_jobs_kept_reference_rate_follows_its_true_part_not_its_believed_one():
    """Believed total 3x the truth: the believed part moves a third as fast as the true one, so a
    rate kept by the believed part (or a span of believed work in one part) goes stale."""
    engine = SimpleNamespace(now=0.0)
    job = KnownJobView(_Job(0, 1000.0), engine, _Believed(3.0))
    view = _fake_view(engine)
    kept, line = LyraRates("goodput"), MovingLine()
    checked = 0
    for now in [7.0 * k for k in range(143)] + [500.0, 2.0, 999.0]:  # (back in time: a fresh start's path)
        engine.now = view.now = now
        believed_remaining = 3000.0 - now
        expected = believed_remaining / _rate(job, 4)  # by hand: the believed work over the true part's rate
        assert kept.remaining_at(view, job, 4) == expected
        assert kept.running_line(view, [job]) == [(expected, 0, job)]
        assert line.keys(view, [job]) == [(expected, 0, job)]
        checked += 1
    assert checked == 146


def test_two_jobs_alike_but_for_their_true_part_get_their_own_rates():
    """Same model, batch and size, the same believed part (0), true parts 0 and 10: each job's
    rates, times and value rows are its own, whichever asks first."""
    engine = SimpleNamespace(now=100.0)
    near = KnownJobView(_Job(0, 2000.0), engine, _Believed(20.0))   # true part 1 (100 of 2000)
    far = KnownJobView(_Job(1, 200.0), engine, _Believed(100.0))    # true part 10 (100 of 200)
    assert (near.progress_part, far.progress_part) == (1, 10)
    view = _fake_view(engine)
    for first, second in ((near, far), (far, near)):
        kept = LyraRates("goodput")
        kept.per_server = {"v100": 8}
        for job in (first, second):
            rates = kept.job_rates(view, job, "v100", 6)
            assert rates.tolist() == [0.0] + [_rate(job, w) for w in range(1, 7)]
            assert kept.time_on(view, job, 3, "v100") == job.remaining_work / _rate(job, 3)
            row = kept.value_row(view, job, "v100", 2, math.inf)  # min_gpus 1: rates of 1, 2, 3 workers
            first_time = job.remaining_work / _rate(job, 1)
            assert row == [first_time - job.remaining_work / _rate(job, w) for w in (1, 2, 3)]


# ------------------------------------------------------------------ goodput rows from the least size asked
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
