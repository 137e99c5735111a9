"""Lyra's stage helpers on hand-made inputs: the base/flexible split of an allocation
(``baselines/lyra_state.py``). The release tracker kept across decisions is checked by the
equivalence harness (``tests/baselines/test_reference_equivalence.py``) and
``tests/baselines/test_lyra_kept_state.py``."""

from __future__ import annotations

from types import SimpleNamespace

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

