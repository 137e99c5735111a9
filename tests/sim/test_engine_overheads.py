"""Hand-computed overhead rules: a later change never shortens an overhead (toy profile: tests/toy.py).

Toy model: 1 sample/s per V100 worker, free all-reduce; an elastic job of
requested size 2 and duration 100 s has 200 samples of work.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pytest

from lyra_gym.sim.scheduler import Scheduler
from toy import config, jct, job, run


class Script(Scheduler):
    """Replays scripted steps: at the first decision at or after each step's time, sets the
    step's allocations (None = stop the job) and borrows / gives back its servers. Ticks every
    ``tick`` s so each scripted time is a decision point. Jobs it does not name stay put."""

    name = "script"

    def __init__(self, steps: Sequence[tuple[float, Mapping[str, Mapping[int, int] | None],
                                         Sequence[int], Sequence[int]]], tick: float = 10.0) -> None:
        self.steps = sorted(steps, key=lambda s: s[0])
        self.tick_interval = tick
        self.done = 0

    def reset(self, rng: np.random.Generator) -> None:
        self.done = 0

    def decide(self, view):
        plan = view.current_plan()
        borrow: list[int] = []
        give_back: list[int] = []
        while self.done < len(self.steps) and self.steps[self.done][0] <= view.now:
            _, allocations, b, g = self.steps[self.done]
            for job_id, allocation in allocations.items():
                if allocation is None:
                    plan.allocations.pop(job_id, None)
                else:
                    plan.allocations[job_id] = dict(allocation)
            borrow += b
            give_back += g
            self.done += 1
        plan.borrow, plan.give_back = tuple(borrow), tuple(give_back)
        return plan


def step(t: float, borrow: Sequence[int] = (), give_back: Sequence[int] = (), **allocations):
    """A Script step at ``t``: job id -> allocation (None = stop)."""
    return (t, allocations, tuple(borrow), tuple(give_back))


E = job("E", 0, 2, 100, elastic=True, lo=2, hi=4)  # 200 samples; 2/s on 2 V100, 4/s on 4


def test_rescale_during_restart_does_not_cut_the_restart_short():
    # Start at 0 on 2 GPUs, 50 s restart -> stalled until 50. At 10, scale out to 4 with a
    # 30 s rescale: now + 30 = 40 < 50, so the stall still ends at 50 (the old rule ended it
    # at 40 and skipped 10 s of restart). Then 200 samples at 4/s = 50 s -> finish at 100.
    script = Script([step(0, E={0: 2}), step(10, E={0: 4})])
    result = run([E], script, config(gpus=4, restart=50.0, rescale=30.0))
    assert jct(result, "E") == pytest.approx(100, abs=1e-9)
    assert result.metrics["scale_outs"] == 1
    # 2 GPUs x 10 s + 4 GPUs x 40 s stalled; 4 GPUs x 50 s busy
    assert result.metrics["overhead_gpu_share"] == pytest.approx(180 / 380)


def test_rescale_whose_overhead_ends_later_extends_the_stall():
    # 20 s restart: stalled until 20. At 10, scale out to 4 with a 30 s rescale:
    # max(20, 10 + 30) = 40. 200 samples at 4/s = 50 s -> finish at 90.
    script = Script([step(0, E={0: 2}), step(10, E={0: 4})])
    result = run([E], script, config(gpus=4, restart=20.0, rescale=30.0))
    assert jct(result, "E") == pytest.approx(90, abs=1e-9)


def test_zero_second_migration_during_restart_keeps_the_restart():
    # A move of the same size (migration, migrate_s = 0) at 10 inside a 50 s restart:
    # max(50, 10 + 0) = 50; 200 samples at 2/s = 100 s -> finish at 150.
    script = Script([step(0, E={0: 2}), step(10, E={1: 2})])
    result = run([E], script, config(training=2, gpus=2, restart=50.0, migrate_s=0.0))
    assert jct(result, "E") == pytest.approx(150, abs=1e-9)
    assert result.metrics["migrations"] == 1


def test_rescale_after_the_restart_starts_a_fresh_overhead():
    # 20 s restart, stall over by 30: 2/s from 20 to 30 -> 20 samples. Scale out at 30:
    # stalled until 60; 180 samples at 4/s = 45 s -> finish at 105.
    script = Script([step(0, E={0: 2}), step(30, E={0: 4})])
    result = run([E], script, config(gpus=4, restart=20.0, rescale=30.0))
    assert jct(result, "E") == pytest.approx(105, abs=1e-9)


def test_job_stopped_during_restart_pays_a_fresh_restart():
    # Preempted at 10 inside a 50 s restart, started again at 20: a new start, stalled
    # until 20 + 50 = 70 (not the old 50); 200 samples at 2/s -> finish at 170. F keeps the
    # run alive while E is queued (an idle cluster whose last decision changed nothing ends).
    f = job("F", 0, 2, 300)
    script = Script([step(0, E={0: 2}, F={0: 2}), step(10, E=None), step(20, E={0: 2})])
    result = run([E, f], script, config(gpus=4, restart=50.0))
    assert jct(result, "E") == pytest.approx(170, abs=1e-9)
    assert result.metrics["preemptions"] == 1


def test_decision_points_brought_only_by_the_schedulers_tick_are_flagged():
    """One 150 s job on a 60 s tick: arrival at 0 (event), ticks at 60 and 120 (tick only),
    the completion at 150 ends the run."""
    from lyra_gym.model.demand import DemandCurve
    from lyra_gym.run.simulate import build_engine
    from lyra_gym.sim.plan import Plan
    from lyra_gym.sim.scheduler import Scheduler
    from tests.toy import TOY, config, job

    class StartAll(Scheduler):
        tick_interval = 60.0

        def decide(self, view):
            queued = list(view.queued_jobs())
            start = {j.id: {view.training_server_ids[0]: j.spec.num_gpus} for j in queued}
            return Plan(allocations={**view.current_plan().allocations, **start})

    engine = build_engine([job("a", 0.0, 1, 150.0)], StartAll(), config(), 0, TOY, DemandCurve.constant(0))
    engine.begin()
    seen = []
    while engine.next_decision():
        seen.append((engine.now, engine.view.tick_only))
        engine.submit(engine.scheduler.decide(engine.view))
    assert seen == [(0.0, False), (60.0, True), (120.0, True)]
    assert engine.finished == 1
