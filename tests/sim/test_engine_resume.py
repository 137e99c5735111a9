"""Hand-computed resume rule: a suspended job resumed on the servers it left pays
``resume_s``; resumed anywhere else it pays ``migrate_s`` (its state is copied over)
and counts one migration. Jobs stopped without suspend are unaffected.

Toy profile (tests/toy.py): 1 sample/s per V100 worker, free all-reduce. Two
training servers of 4 V100s for A (a third holds B, a long job that keeps the run
going while A waits); restart 5 s, resume 1 s, migrate 20 s. Job A asks for 4 GPUs
for 100 s: 400 samples at 4/s.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pytest

from lyra_gym.model.jobs import JobState
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Scheduler
from toy import config, job, run

A, B = job("A", 0, 4, 100), job("B", 0, 4, 1000)
CFG = config(training=3, gpus=4, restart=5.0, migrate_s=20.0, resume_s=1.0)


class Script(Scheduler):
    """Runs B on server 2; at the first decision at or after each step's time, sets A's
    allocation (None: stop it, suspended when the step says so). Ticks every 10 s."""

    name = "script-resume"
    tick_interval = 10.0

    def __init__(self, steps: Sequence[tuple[float, Mapping[int, int] | None, bool]]) -> None:
        self.steps = list(steps)
        self.done = 0

    def reset(self, rng: np.random.Generator) -> None:
        self.done = 0

    def decide(self, view) -> Plan:
        plan = view.current_plan()
        if "B" not in plan.allocations and view.job("B").state is JobState.QUEUED:
            plan.allocations["B"] = {2: 4}
        while self.done < len(self.steps) and self.steps[self.done][0] <= view.now:
            _, allocation, suspend = self.steps[self.done]
            if allocation is None:
                plan.allocations.pop("A", None)
                plan.suspend = ("A",) if suspend else ()
            else:
                plan.allocations["A"] = dict(allocation)
            self.done += 1
        return plan


def a_row(steps) -> dict:
    result = run([A, B], Script(steps), CFG)
    return next(r for r in result.jobs if r["job_id"] == "A"), result.metrics


# 0: A starts on server 0 (restart to 5). 20: stopped, 15 s x 4/s = 60 samples done.
# 40: started again, 340 samples left = 85 s after its overhead.
@pytest.mark.parametrize("again, suspend, overhead, migrations", [
    ({0: 4}, True, 1.0, 0),           # resumed where it was suspended: resume_s
    ({1: 4}, True, 20.0, 1),          # resumed on another server: migrate_s
    ({0: 2, 1: 2}, True, 20.0, 1),    # resumed on a superset of its servers: migrate_s
    ({0: 4}, False, 5.0, 0),          # preempted, restarted in place: restart overhead
    ({1: 4}, False, 5.0, 0),          # preempted, restarted elsewhere: restart, no migration
])
def test_a_suspended_job_resumed_elsewhere_pays_a_migration(again, suspend, overhead, migrations):
    row, m = a_row([(0, {0: 4}, False), (20, None, suspend), (40, again, False)])
    assert row["jct_s"] == pytest.approx(40 + overhead + 85, abs=1e-9)
    assert row["migrations"] == m["migrations"] == migrations
    assert (m["suspensions"], m["preemptions"]) == ((1, 0) if suspend else (0, 1))


def test_the_last_suspension_decides_where_resume_is_cheap():
    # 0: on server 0 (to 5). 20: suspended (60 done). 40: resumed on server 1, a migration
    # (to 60). 70: suspended (40 more, 100 done). 90: resumed on server 1, where it was last
    # suspended: resume (to 91), 300 left -> 75 s -> ends 166.
    row, m = a_row([(0, {0: 4}, False), (20, None, True), (40, {1: 4}, False),
                    (70, None, True), (90, {1: 4}, False)])
    assert row["jct_s"] == pytest.approx(166, abs=1e-9)
    assert row["migrations"] == 1 and m["suspensions"] == 2


def test_moving_a_running_job_still_pays_migrate():
    # 0: on server 0 (to 5). 20: moved to server 1 with 60 done: migrate to 40, 85 s -> 125.
    row, m = a_row([(0, {0: 4}, False), (20, {1: 4}, False)])
    assert row["jct_s"] == pytest.approx(125, abs=1e-9) and m["migrations"] == 1
