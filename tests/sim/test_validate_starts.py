"""``validate_starts``, the engine's check of a current plan whose only changes start queued jobs,
against ``validate_plan`` on the same plan (the same changes, or the same PlanError), and the
engine taking that path for FIFO's starts with the same result as the full path.

State: servers 0, 1 (training, V100 x 4), 2 (training, A100 x 4), 3 (inference T4 x 4, on loan),
4 (inference T4 x 4, off loan). Running: "run" holds {0: 2}. Queued: "q0" (1..4 GPUs), "q1" (2),
"q2" (3). Finished: "done".
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lyra_gym.sim.engine as engine_module
from lyra_gym.model.jobs import Job, JobState
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.plan import PendingAllocations, Plan, PlanError
from lyra_gym.sim.validate import validate_plan, validate_starts
from tests import toy


def _state():
    servers = [Server(0, Pool.TRAINING, "v100", 4), Server(1, Pool.TRAINING, "v100", 4),
               Server(2, Pool.TRAINING, "a100", 4), Server(3, Pool.INFERENCE, "t4", 4),
               Server(4, Pool.INFERENCE, "t4", 4)]
    servers[3].loaned = True
    specs = [JobSpec("run", 0.0, 2, 100.0, "resnet50", True, 1, 4), JobSpec("q0", 0.0, 2, 100.0, "ncf", True, 1, 4),
             JobSpec("q1", 0.0, 2, 100.0, "ncf", False, 2, 2), JobSpec("q2", 0.0, 3, 100.0, "bert", False, 3, 3),
             JobSpec("done", 0.0, 1, 100.0, "ncf", False, 1, 1)]
    jobs = [Job(i, spec, 100.0) for i, spec in enumerate(specs)]
    jobs[0].state, jobs[0].allocation, jobs[0].workers = JobState.RUNNING, {0: 2}, 2
    servers[0].used, servers[0].jobs[0] = 2, 2
    for job in jobs[1:4]:
        job.state = JobState.QUEUED
    jobs[4].state = JobState.FINISHED
    return servers, {job.spec.job_id: job for job in jobs}, {"run": jobs[0].allocation}


def _outcome(call):
    try:
        return [(job.spec.job_id, dict(new) if new is not None else None) for job, new in call()]
    except PlanError as error:
        return ("error", str(error))


_ids = st.sampled_from(["q0", "q1", "q2", "run", "done", "nobody"])
_sids = st.sampled_from([0, 1, 2, 3, 4, 5, -1, np.int64(1)])
_gpus = st.sampled_from([1, 2, 3, 4, 0, np.int64(2), 2.0])
_writes = st.dictionaries(_ids, st.dictionaries(_sids, _gpus, max_size=3), max_size=4)


@settings(max_examples=400, deadline=None)
@given(writes=_writes, mixed=st.booleans())
def test_validate_starts_matches_validate_plan(writes, mixed):
    servers, by_id, running = _state()
    token = object()
    pending = PendingAllocations(lambda p: running, token)
    pending.writes = writes
    fast = _outcome(lambda: validate_starts(writes, servers, by_id, mixed) or [])
    starts_only = all(by_id.get(k) is not None and by_id[k].state is JobState.QUEUED and v for k, v in writes.items())
    if not starts_only:
        assert validate_starts(writes, servers, by_id, mixed) is None  # left to validate_plan
        return
    assert fast == _outcome(lambda: validate_plan(Plan(), pending, servers, by_id, running, token, 0, mixed))


def test_validate_starts_hand_cases():
    servers, by_id, _ = _state()
    assert [(j.spec.job_id, n) for j, n in validate_starts({"q0": {1: 3}, "q1": {0: 2}}, servers, by_id, False)] \
        == [("q0", {1: 3}), ("q1", {0: 2})]
    with pytest.raises(PlanError, match=r"\[server-overfull\].*server 0: 5 GPUs planned, 4 present"):
        validate_starts({"q2": {0: 3}}, servers, by_id, False)  # "run" holds 2 of server 0's 4
    with pytest.raises(PlanError, match=r"\[server-unavailable\]"):
        validate_starts({"q0": {4: 1}}, servers, by_id, False)  # an inference server not on loan
    assert validate_starts({"q0": {1: 1}, "run": {1: 2}}, servers, by_id, False) is None  # a running job: full path
    assert validate_starts({"q0": {}}, servers, by_id, False) is None  # not a start


def test_fifo_starts_take_the_starts_path(monkeypatch):
    """FIFO's plans start queued jobs only: the engine never needs the full check for them, and
    the run is the one of the full path."""
    jobs = [toy.job(f"j{i}", 10.0 * i, 1 + i % 3, 100.0 + 7 * i) for i in range(12)]
    before = toy.run(jobs, "fifo", toy.config(training=2, gpus=4))
    calls = []
    full = engine_module.validate_plan
    monkeypatch.setattr(engine_module, "validate_plan", lambda *a: calls.append(1) or full(*a))
    assert toy.run(jobs, "fifo", toy.config(training=2, gpus=4)).jobs == before.jobs
    assert not calls
    monkeypatch.setattr(engine_module, "validate_starts", lambda *a: None)  # the full path for every plan
    assert toy.run(jobs, "fifo", toy.config(training=2, gpus=4)).jobs == before.jobs
    assert calls
