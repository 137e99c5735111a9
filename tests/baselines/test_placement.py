"""Placement rules (``baselines/placement.py``): spread (best fit) and consolidated, by hand and
against a brute force over every placement, and the rule honoured end to end by fifo and lyra."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines.fifo import FifoScheduler
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.placement import best_fit, consolidated_fit, place
from lyra_gym.model.config import ConfigError, config_from_dict
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


def reference_consolidated_fifo(jobs, servers: int, per_server: int) -> dict[str, tuple[float, float]]:
    """An independent event loop: FIFO without backfill, consolidated placement, jobs run exactly
    their duration. Returns job id -> (start, end)."""
    free = [per_server] * servers
    pending = sorted(jobs, key=lambda j: j.submit_time)  # stable: trace order on ties
    running: list[tuple[float, str, dict[int, int]]] = []
    out, queue, t = {}, [], 0.0
    while pending or queue or running:
        times = [j.submit_time for j in pending[:1]] + [end for end, *_ in running]
        t = min(times)
        for end, job_id, alloc in [r for r in running if r[0] <= t]:
            running.remove((end, job_id, alloc))
            for s, g in alloc.items():
                free[s] += g
        while pending and pending[0].submit_time <= t:
            queue.append(pending.pop(0))
        while queue:
            head = queue[0]
            if head.num_gpus <= per_server:
                fits = [s for s in range(servers) if free[s] >= head.num_gpus]
                alloc = {min(fits, key=lambda s: (free[s], s)): head.num_gpus} if fits else None
            else:
                whole = [s for s in range(servers) if free[s] == per_server]
                k = -(-head.num_gpus // per_server)
                alloc = None if len(whole) < k else {
                    s: min(per_server, head.num_gpus - i * per_server) for i, s in enumerate(whole[:k])}
            if alloc is None:
                break
            queue.pop(0)
            for s, g in alloc.items():
                free[s] -= g
            out[head.job_id] = (t, t + head.duration)
            running.append((t + head.duration, head.job_id, alloc))
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]),
                          st.integers(1, 40)), min_size=1, max_size=25))
def test_consolidated_fifo_equals_an_independent_simulator(rows):
    # 3 servers x 8 GPUs, zero overheads, the toy profile (speed-up exactly linear, free all-reduce):
    # every start and end time equals the reference loop's
    jobs = [job(f"j{i}", float(submit), gpus, float(duration)) for i, (submit, gpus, duration) in enumerate(rows)]
    result = run(jobs, FifoScheduler(), replace(config(training=3, gpus=8), placement="consolidated"))
    expected = reference_consolidated_fifo(jobs, 3, 8)
    got = {r["job_id"]: (r["first_start"], r["finish_time"]) for r in result.jobs}
    assert got.keys() == expected.keys()
    for job_id, (start, end) in expected.items():
        assert got[job_id] == (pytest.approx(start), pytest.approx(end)), job_id
