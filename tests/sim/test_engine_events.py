"""The engine's event heap: a completion pushed for a job that changed or stopped since is stale,
and is dropped wherever the heap is read (``Engine._live_top``), never a decision point.

Toy profile (tests/toy.py): 1 sample/s per V100 worker, work = duration x requested GPUs.
"""

from __future__ import annotations

import numpy as np

from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobs import JobState
from lyra_gym.sim.engine import _COMPLETION, Engine
from lyra_gym.sim.scheduler import Scheduler
from tests.toy import TOY, config, job


class ShrinkThenStop(Scheduler):
    """Starts queued jobs on server 0 at their size; at the decision at t = 20 shrinks E to 1 GPU
    and stops (preempts) P; never restarts P."""

    def decide(self, view):
        plan = view.current_plan()
        if view.now == 20.0:
            plan.allocations["E"] = {0: 1}
            del plan.allocations["P"]
        for queued in view.queued_jobs():
            if queued.id != "P" or view.now < 20.0:
                plan.allocations[queued.id] = {0: queued.spec.num_gpus}
        return plan


def _engine() -> Engine:
    # E: elastic 1..4, 2 GPUs, 100 s -> 200 samples; done at t = 100 at 2/s if left alone.
    # P: 1 GPU, 60 s -> done at t = 60 if left alone. L: 1 GPU arriving at t = 20, 500 s.
    jobs = [job("E", 0, 2, 100, elastic=True, lo=1, hi=4), job("P", 0, 1, 60), job("L", 20, 1, 500)]
    return Engine(jobs, ShrinkThenStop(), config(gpus=8, rescale=0.0), TOY, DemandCurve.constant(0),
                  np.random.default_rng(0))


def test_stale_completions_are_dropped_and_never_decision_points():
    engine = _engine()
    engine.begin()
    times = []
    while engine.next_decision():
        times.append(engine.now)
        engine.submit(engine.scheduler.decide(engine.view))
        if engine.now == 20.0:
            # E's completion at 100 (2 GPUs) and P's at 60 are stale now: E's live one is at
            # 20 + (200 - 40) / 1 = 180
            completions = sorted((t, index) for t, _, kind, index, _ in engine._heap if kind == _COMPLETION)
            assert completions == [(60.0, 1), (100.0, 0), (180.0, 0), (520.0, 2)]
            assert engine._live_top()[:4] == (180.0, engine._seq - 1, _COMPLETION, 0)
            assert [t for t, *_ in engine._heap if t < 180.0] == []  # dropped on the way
    engine.finish()
    # decisions: t = 0 (E, P arrive), 20 (L arrives), 180 (E done), 520 (L done); nothing at 60 or 100
    assert times == [0.0, 20.0, 180.0, 520.0]
    e, p, late = engine.jobs
    assert e.finish_time == 180.0 and late.finish_time == 520.0
    assert p.state is JobState.QUEUED and p.preemptions == 1
    assert engine.counts["events"] == 3 + 2  # three arrivals, two completions
    assert engine._heap == []


def test_live_top_drops_only_stale_completions():
    engine = _engine()
    engine.begin()
    assert engine._live_top() is None  # nothing pushed yet
    assert engine.next_decision() and engine.now == 0.0
    engine.submit(engine.scheduler.decide(engine.view))  # E to 100, P to 60
    e, p, _ = engine.jobs
    assert engine._live_top()[0] == 60.0
    engine._push(10.0, 1)                      # a reclaim deadline: never stale
    engine._push(5.0, _COMPLETION, p.index, p.version - 1)  # an older version of P: stale
    assert engine._live_top()[0] == 10.0 and len(engine._heap) == 3
    assert engine._live_top() is engine._heap[0]
