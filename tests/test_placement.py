"""Placement rules (``baselines/placement.py``): spread (best fit) and consolidated, by hand and
against a brute force over every placement, and the rule honoured end to end by fifo and lyra."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.fifo import FifoScheduler
from baselines.lyra import LyraScheduler
from baselines.placement import best_fit, consolidated_fit, place
from lyra_gym.config import ConfigError, config_from_dict
from tests.toy import config, job, run


def test_consolidated_by_hand():
    capacity = [8, 8, 8, 8]
    # up to one server: the best-fitting server that holds it, never split
    assert consolidated_fit([3, 5, 8, 4], capacity, 4, range(4)) == {3: 4}
    assert consolidated_fit([3, 3, 2, 3], capacity, 4, range(4)) is None  # 11 free GPUs, no server holds 4
    assert best_fit([3, 3, 2, 3], 4, range(4)) == {0: 3, 2: 1}  # spread would split it
    # ties between equally free servers: the lowest id
    assert consolidated_fit([5, 8, 5, 5], capacity, 4, [3, 2, 0]) == {0: 4}
    # larger than a server: wholly free servers only, lowest ids first, the remainder on the last
    assert consolidated_fit([8, 7, 8, 8], capacity, 12, range(4)) == {0: 8, 2: 4}
    assert consolidated_fit([8, 7, 7, 8], capacity, 16, range(4)) == {0: 8, 3: 8}
    assert consolidated_fit([8, 7, 7, 7], capacity, 16, range(4)) is None  # one wholly free server
    assert place("spread", [8, 7, 7, 7], capacity, 16, range(4)) == {0: 8, 1: 7, 2: 1}


def brute_force_consolidated(free, capacity, need, candidates):
    """Every assignment of need GPUs to candidates, filtered by the rule's definition, the
    rule's order applied last: the reference the implementation must equal."""
    candidates = sorted(candidates)
    if any(capacity[s] >= need for s in candidates):
        options = [s for s in candidates if free[s] >= need]
        return None if not options else {min(options, key=lambda s: (free[s], s)): need}
    whole = [s for s in candidates if free[s] == capacity[s] > 0]
    for k in range(1, len(whole) + 1):
        for chosen in itertools.combinations(whole, k):
            if sum(capacity[s] for s in chosen) >= need and chosen == tuple(whole[:k]):
                left, out = need, {}
                for s in chosen:
                    out[s] = min(left, capacity[s])
                    left -= out[s]
                if all(out.values()):
                    return out
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([4, 8]), min_size=1, max_size=6).flatmap(
    lambda caps: st.tuples(st.just(caps), st.tuples(*[st.integers(0, c) for c in caps]),
                           st.integers(1, sum(caps) + 2))))
def test_consolidated_equals_a_brute_force_and_never_overfills(case):
    capacity, free, need = case
    free = list(free)
    got = consolidated_fit(free, capacity, need, range(len(capacity)))
    assert got == brute_force_consolidated(free, capacity, need, range(len(capacity)))
    if got is not None:
        assert sum(got.values()) == need and all(0 < g <= free[s] for s, g in got.items())
        if need <= max(capacity):
            assert len(got) == 1


def test_config_rule_is_checked_and_recorded():
    assert config_from_dict({"placement": "consolidated"}).placement == "consolidated"
    with pytest.raises(ConfigError, match="placement"):
        config_from_dict({"placement": "packed"})


def test_fifo_waits_for_one_server_under_consolidated():
    # two 4-GPU servers; A (3 GPUs, 100 s) and B (3 GPUs, 50 s) leave 1 GPU free on each; C (2 GPUs)
    # spreads over both at once under spread, but waits for B's server to free up (t=50) consolidated
    jobs = [job("A", 0, 3, 100), job("B", 0, 3, 50), job("C", 1, 2, 10)]
    spread = run(jobs, FifoScheduler(), config(training=2, gpus=4))
    consolidated = run(jobs, FifoScheduler(), replace(config(training=2, gpus=4), placement="consolidated"))
    c_spread = next(r for r in spread.jobs if r["job_id"] == "C")
    c_cons = next(r for r in consolidated.jobs if r["job_id"] == "C")
    assert c_spread["jct_s"] == pytest.approx(10)
    assert c_cons["jct_s"] == pytest.approx(59)  # starts at 50, 10 s of work


def test_lyra_places_base_demands_by_the_rule():
    # the same cluster and jobs under lyra (no loaning possible: no inference servers)
    jobs = [job("A", 0, 3, 100), job("B", 0, 3, 50), job("C", 1, 2, 10)]
    cfg = replace(config(training=2, gpus=4), placement="consolidated")
    result = run(jobs, LyraScheduler(), cfg)
    assert next(r for r in result.jobs if r["job_id"] == "C")["jct_s"] == pytest.approx(59)
