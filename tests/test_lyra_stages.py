"""Lyra's stage helpers on hand-made inputs: the base/flexible split of an allocation and the
release tracker kept across decisions (``baselines/lyra_state.py``, ``baselines/lyra_estimates.py``)."""

from __future__ import annotations

from types import SimpleNamespace

from lyra_baselines.lyra_estimates import ReleaseTracker
from lyra_baselines.lyra_state import base_demand, split_alloc


def _job(job_id="J", elastic=True, lo=2, hi=8, finish=None, allocation=None):
    spec = SimpleNamespace(elastic=elastic, min_gpus=lo, num_gpus=hi)
    return SimpleNamespace(id=job_id, spec=spec, expected_finish=finish, allocation=allocation)


def test_base_workers_go_on_training_servers_first():
    settings = SimpleNamespace(elastic=True, fixed_size="requested")
    facts = SimpleNamespace(training_ids=frozenset({0, 1}))
    job = _job(lo=3, hi=8)
    # 3 base GPUs: 2 on training server 1, then 1 on loaned server 5 (training first, then by id)
    base, flex = split_alloc(settings, facts, job, {5: 4, 1: 2})
    assert base == {1: 2, 5: 1}
    assert flex == {5: 3}
    assert base_demand(settings, job) == 3


def test_without_elastic_scaling_every_worker_is_base():
    settings = SimpleNamespace(elastic=False, fixed_size="requested")
    facts = SimpleNamespace(training_ids=frozenset({0}))
    base, flex = split_alloc(settings, facts, _job(lo=1, hi=4), {0: 4})
    assert (base, flex) == ({0: 4}, {})


def test_the_release_tracker_follows_allocation_objects_across_decisions():
    a = {0: 4}
    b = {1: 2, 2: 2}
    jobs = {"A": _job("A", elastic=False, finish=100.0, allocation=a),
            "B": _job("B", elastic=True, lo=1, finish=50.0, allocation=b)}
    tracker = ReleaseTracker({}, cap=lambda job: job.spec.min_gpus)
    tracker.gpu_types, tracker.training_ids = ["v100", "v100", "v100"], frozenset({0, 1, 2})
    view = SimpleNamespace(now=10.0, job=jobs.__getitem__, believed=False)
    timeline = tracker.timeline(view, {"A": a, "B": b}, "v100", placed=[])
    assert timeline.times == [50.0, 100.0]
    assert timeline.gpus == [1, 4]  # B frees only its base GPU: its flexible ones count as free already
    assert timeline.wait_for(3) == 100.0 - 10.0
    # B finished; a job placed in this decision (finish 30 s, 2 GPUs) counts too
    timeline = tracker.timeline(view, {"A": a}, "v100", placed=[(30.0, 2, "v100")])
    assert (timeline.times, timeline.gpus) == ([30.0, 100.0], [2, 4])
    # A's allocation replaced by this plan: left out
    timeline = tracker.timeline(view, {"A": {0: 2}}, "v100", placed=[])
    assert timeline.times == []
