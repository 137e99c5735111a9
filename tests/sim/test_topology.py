"""The engine's free-capacity index (``lyra_gym/sim/topology.py``) and what is built on it.

- the index equals a recomputation from the servers after random sequences of allocations,
  releases, loans and returns, driven by hand and by the engine under a random policy;
- a ``FreeMap`` is a working copy: writes keep its buckets in order and never reach the engine;
- placements answered from the index (``best_fit``, ``consolidated_fit``, ``groups_by_type``
  on a ``FreeMap`` and ``ServerSet``) equal today's walk over the candidates, kept below as the
  oracle, on random clusters (same choices, same tie-breaking);
- ``ClusterView.current_plan()`` copies nothing until read, and read later (after the engine
  moved on) still holds the allocations of its own instant.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_baselines.loaning import free_after, free_map_after
from lyra_baselines.placement import best_fit, consolidated_fit, groups_by_type, place_in_groups, placer, take
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.engine import Engine
from lyra_gym.sim.plan import TrackedAllocations
from lyra_gym.sim.topology import ServerSet, Topology
from tests.sim.test_engine_invariants import PROFILES, RandomScheduler, run_engine, scenarios
from tests.toy import TOY, job


# --------------------------------------------------------------------------- the oracle: the O(candidates) walk
def reference_best_fit(free, need, candidates):
    """``baselines/placement.py``'s best_fit before the index (commit 3fc877f)."""
    best, best_free = -1, None
    total = 0
    for sid in candidates:
        f = free[sid]
        total += f
        if f >= need and (best_free is None or f < best_free):
            best, best_free = sid, f
    if best_free is not None:
        return {best: need}
    if total < need:
        return None
    by_free = sorted((sid for sid in candidates if free[sid] > 0), key=lambda s: (-free[s], s))
    placement = {}
    left = need
    for i, sid in enumerate(by_free):
        if free[sid] >= left:
            last = min((s for s in by_free[i:] if free[s] >= left), key=lambda s: (free[s], s))
            placement[last] = left
            return placement
        placement[sid] = free[sid]
        left -= free[sid]
    return None


def reference_consolidated_fit(free, capacity, need, candidates):
    """``baselines/placement.py``'s consolidated_fit before the index (commit 3fc877f)."""
    if any(capacity[sid] >= need for sid in candidates):
        best, best_free = -1, None
        for sid in candidates:
            f = free[sid]
            if f >= need and (best_free is None or (f, sid) < (best_free, best)):
                best, best_free = sid, f
        return None if best_free is None else {best: need}
    placement = {}
    left = need
    for sid in sorted(candidates):
        if free[sid] == capacity[sid] > 0:
            placement[sid] = min(left, free[sid])
            left -= placement[sid]
            if not left:
                return placement
    return None


def reference_groups_by_type(servers, server_ids, allow_mixed):
    """``baselines/placement.py``'s groups_by_type before the index (commit 3fc877f)."""
    groups = {}
    for sid in server_ids:
        groups.setdefault(servers[sid].gpu_type, []).append(sid)
    out = list(groups.values())
    if allow_mixed and len(out) > 1:
        out.append(list(server_ids))
    return out


# --------------------------------------------------------------------------- random clusters
@st.composite
def clusters(draw):
    """Servers of 1-3 training groups (types may repeat with other sizes) and 0-6 inference servers."""
    servers = []
    for _ in range(draw(st.integers(1, 3))):
        gpu_type, size = draw(st.sampled_from(["v100", "a100", "t4"])), draw(st.sampled_from([1, 2, 4, 8]))
        for _ in range(draw(st.integers(1, 6))):
            servers.append(Server(len(servers), Pool.TRAINING, gpu_type, size))
    inf_size = draw(st.sampled_from([4, 8]))
    for _ in range(draw(st.integers(0, 6))):
        servers.append(Server(len(servers), Pool.INFERENCE, "t4", inf_size))
    return servers


def _apply(topology: Topology, servers: list[Server], op: tuple) -> None:
    """One engine-style change of ``servers`` mirrored into ``topology`` (as the engine does)."""
    kind, sid, gpus = op
    s = servers[sid]
    if kind == "loan" and s.pool is Pool.INFERENCE and not s.loaned:
        s.loaned = True
        topology.mark_loaned(sid)
    elif kind == "return" and s.loaned and not s.used:
        s.loaned = False
        topology.mark_returned(sid)
    elif kind == "alloc" and s.usable and s.used + gpus <= s.num_gpus:
        s.used += gpus
        topology._set(sid, topology.free[sid] - gpus)
    elif kind == "release" and s.used >= gpus:
        s.used -= gpus
        topology._set(sid, topology.free[sid] + gpus)


ops = st.tuples(st.sampled_from(["alloc", "alloc", "release", "loan", "return"]), st.integers(0, 40),
                st.integers(1, 8))


@settings(max_examples=150, deadline=None)
@given(clusters(), st.lists(ops, max_size=60))
def test_index_matches_a_recomputation_after_random_changes(servers, changes):
    topology = Topology(servers)
    topology._check(servers)
    for kind, sid, gpus in changes:
        _apply(topology, servers, (kind, sid % len(servers), gpus))
        topology._check(servers)
        histogram = topology.free_histogram(Pool.TRAINING)
        usable = [s for s in servers if s.pool is Pool.TRAINING]
        assert histogram == [sum(1 for s in usable if s.free == f) for f in range(len(histogram))]


class _IndexCheckingEngine(Engine):
    """Re-checks the index against the servers after every applied plan and batch of events."""

    def apply(self, plan):
        changed = super().apply(plan)
        self.topology._check(self.servers)
        assert self.free is self.topology.free
        return changed

    def _process_events(self, t, times, values):
        tick_only = super()._process_events(t, times, values)
        self.topology._check(self.servers)
        return tick_only


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_index_matches_a_recomputation_in_random_runs(scenario):
    engine = run_engine(scenario, _IndexCheckingEngine)
    engine.topology._check(engine.servers)


# --------------------------------------------------------------------------- the working copy
@settings(max_examples=150, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(0, 40), st.integers(0, 8)), max_size=30))
def test_free_map_is_a_working_copy_that_keeps_its_buckets(servers, writes):
    for s in servers:
        s.loaned = s.pool is Pool.INFERENCE and s.id % 2 == 0
    topology = Topology(servers)
    engine_free = list(topology.free)
    free = topology.free_map()
    plain = list(topology.free)
    for sid, value in writes:
        sid %= len(servers)
        value = min(value, servers[sid].num_gpus)
        free[sid] = value
        plain[sid] = value
        copy = free.copy()
        copy[sid] = 0  # a copy's writes stay in the copy
        assert free[sid] == value
    assert free.tolist() == plain and list(free) == plain and len(free) == len(plain)
    assert topology.free == engine_free  # the engine's index is untouched
    topology._check(servers)
    for c, cell in enumerate(topology.cells):  # the buckets and totals follow the writes
        assert free.total([c]) == sum(plain[s] for s in cell.ids)
        assert list(free.descending([c])) == sorted(((s, plain[s]) for s in cell.ids if plain[s]),
                                                    key=lambda x: (-x[1], x[0]))
        assert list(free.wholly_free([c])) == [s for s in cell.ids if plain[s] == cell.gpus]


def test_a_take_too_large_for_a_server_changes_nothing():
    servers = [Server(i, Pool.TRAINING, "v100", 8) for i in range(3)]
    topology = Topology(servers)
    free = topology.free_map()
    free.take({0: 3})
    with pytest.raises(ValueError, match="server 2"):
        free.take({1: 8, 2: 9})  # server 1 would fit: not taken either
    assert free.tolist() == [5, 8, 8] and topology.free == [8, 8, 8]
    assert list(free.descending([0])) == [(1, 8), (2, 8), (0, 5)] and free.total([0]) == 21


def test_a_free_map_refuses_work_once_the_engine_changed():
    servers = [Server(0, Pool.TRAINING, "v100", 8), Server(1, Pool.TRAINING, "v100", 8)]
    topology = Topology(servers)
    free = topology.free_map()
    free[0] = 5
    servers[1].used = 2
    topology._set(1, 6)
    with pytest.raises(RuntimeError, match="FreeMap"):
        free[0] = 4
    with pytest.raises(RuntimeError, match="FreeMap"):
        free.smallest_fit(1, [0])


# --------------------------------------------------------------------------- placements: index == walk
def _setting(draw, servers):
    """Loans, free GPUs, and the engine's index of them; a FreeMap as free_map_after makes it."""
    for s in servers:
        if s.pool is Pool.INFERENCE:
            s.loaned = draw(st.booleans())
        if s.usable:
            s.used = draw(st.integers(0, s.num_gpus))
    return Topology(servers)


@settings(max_examples=300, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_placement_on_the_index_equals_the_walk(data):
    servers = data.draw(clusters())
    topology = _setting(data.draw, servers)
    free = topology.free_map()
    # the scheduler's own changes since: some servers freed or taken, some loaned ones given back
    for s in servers:
        if s.usable and data.draw(st.integers(0, 4)) == 0:
            free[s.id] = data.draw(st.integers(0, s.num_gpus))
    returned = [s.id for s in servers if s.loaned and data.draw(st.integers(0, 3)) == 0]
    for sid in returned:
        free[sid] = 0
    plain = free.tolist()
    capacity = topology.capacity
    training = list(topology.training_ids)
    loaned = [s.id for s in servers if s.loaned and s.id not in returned]
    candidates = [topology.type_sets(Pool.TRAINING), [topology.pool_set(Pool.TRAINING)],
                  topology.sets_by_type(loaned, free), [topology.server_set(training + loaned, free)]]
    for sets in candidates:
        for group in sets:
            assert isinstance(group, ServerSet) and list(group) == sorted(group)
            for need in range(1, sum(capacity[s] for s in group) + 3):
                expected = reference_best_fit(plain, need, list(group))
                assert best_fit(free, need, group) == expected, (list(group), need)
                expected = reference_consolidated_fit(plain, capacity, need, list(group))
                assert consolidated_fit(free, capacity, need, group) == expected, (list(group), need)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_placements_in_sequence_equal_the_walk(data):
    """A scheduler's loop: place, take, place again (fifo's), on the index and on a plain list."""
    servers = data.draw(clusters())
    topology = _setting(data.draw, servers)
    allow_mixed = data.draw(st.booleans())
    rule = data.draw(st.sampled_from(["spread", "consolidated"]))

    class View:  # what groups_by_type reads of a ClusterView
        pass

    view = View()
    view.topology, view.allow_mixed_gpu_types = topology, allow_mixed
    view.training_server_ids = topology.training_ids
    view.servers = servers
    groups = groups_by_type(view, view.training_server_ids)
    assert [list(g) for g in groups] == reference_groups_by_type(servers, topology.training_ids, allow_mixed)
    assert [list(g) for g in groups_by_type(view, list(topology.training_ids))] == [list(g) for g in groups]
    free, plain = topology.free_map(), list(topology.free)
    capacity = topology.capacity
    place = placer(rule, capacity, groups)  # fifo's: the same placements, set up once
    free_too, plain_too = topology.free_map(), list(topology.free)
    for need in data.draw(st.lists(st.integers(0, 20), max_size=12)):
        got = place_in_groups(rule, free, capacity, need, groups)
        expected = None
        for group in reference_groups_by_type(servers, topology.training_ids, allow_mixed):
            expected = (reference_consolidated_fit(plain, capacity, need, group) if rule == "consolidated"
                        else reference_best_fit(plain, need, group))
            if expected is not None:
                break
        assert got == expected
        assert place(free_too, need) == expected and place(plain_too, need) == expected
        if got is not None:
            take(free, got)
            take(plain, got)
            free_too.take(got)
            take(plain_too, got)
        assert free.tolist() == plain == free_too.tolist() == plain_too


def test_groups_of_other_ids_keep_their_order_and_walk():
    servers = [Server(i, Pool.TRAINING, "v100" if i % 2 else "a100", 4) for i in range(6)]
    topology = Topology(servers)

    class View:
        pass

    view = View()
    view.topology, view.allow_mixed_gpu_types, view.training_server_ids, view.servers = topology, True, (), servers
    ids = [5, 2, 3, 0]  # not ascending: groups keep this order and are walked, not indexed
    groups = groups_by_type(view, ids)
    assert [list(g) for g in groups] == reference_groups_by_type(servers, ids, True)
    assert all(g.cells is None for g in groups)
    subset = topology.server_set([1, 3])  # a part of a cell whose other servers have free GPUs
    assert subset.cells is None
    assert best_fit(topology.free_map(), 2, subset) == {1: 2}
    free = topology.free_map()
    assert topology.server_set([1, 3], free).cells is None
    free[5] = 0  # now every other v100 server of the cell has no free GPU in this map
    assert topology.server_set([3, 1], free).cells == (topology.cell_of[1],)


class _FreeAfterChecking(RandomScheduler):
    """The random policy, checking that free_map_after equals free_after on each of its plans."""

    def decide(self, view):
        plan = super().decide(view)
        assert free_map_after(view, plan).tolist() == free_after(view, plan)
        current = view.current_plan()
        for queued in list(view.queued_jobs())[:1]:
            group = groups_by_type(view, view.training_server_ids)[0]
            placement = best_fit(view.free_map(), queued.spec.num_gpus, group)
            if placement is not None:
                current.assign(queued.id, placement)
        assert free_map_after(view, current).tolist() == free_after(view, current)
        return plan


@settings(max_examples=30, deadline=None)
@given(scenarios())
def test_free_map_after_equals_free_after(scenario):
    config, jobs, demand, policy, seed = scenario
    Engine(jobs, _FreeAfterChecking(**policy), config, PROFILES, demand, np.random.default_rng(seed)).run()


# --------------------------------------------------------------------------- current plans
def _engine():
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(4, "v100", 4),), inference=ServerGroup(0, "t4", 4)))
    jobs = [job(f"j{i}", 0.0, 2, 100.0 + 10 * i) for i in range(6)]
    engine = Engine(jobs, RandomScheduler(), config, TOY, DemandCurve.constant(0), np.random.default_rng(0))
    engine.begin()
    assert engine.next_decision()
    return engine


def test_a_current_plan_read_later_holds_its_own_instant():
    engine = _engine()
    view = engine.view
    start = view.current_plan()
    for i in range(4):
        start.assign(f"j{i}", {i: 2})
    assert engine.apply(start)
    before = {k: dict(v) for k, v in engine.running_allocations.items()}
    order = list(engine.running_allocations)
    kept = view.current_plan()          # never read until the engine has moved on
    other = view.current_plan()
    other.allocations.pop("j1")       # j1 stops, j4 starts, j2 moves
    other.allocations["j4"] = {1: 2}
    other.allocations["j2"] = {3: 2}
    assert engine.apply(other)
    engine.submit(view.current_plan())
    engine.next_decision()              # j0 finishes at t = 100
    assert type(kept.allocations) is TrackedAllocations
    assert list(kept.allocations) == order and {k: dict(v) for k, v in kept.allocations.items()} == before
    # stale: checked in full, so applying it (less the job finished since) puts everything back
    kept.allocations.pop("j0")
    assert engine.apply(kept)
    assert {k: dict(v) for k, v in engine.running_allocations.items()} == {
        k: v for k, v in before.items() if k != "j0"}


def test_a_current_plan_changed_only_by_assign_is_applied_without_a_copy():
    engine = _engine()
    plan = engine.view.current_plan()
    plan.assign("j0", {0: 2})
    assert plan._unread() is not None  # nothing copied
    assert engine.apply(plan)
    assert plan._unread() is not None
    assert dict(plan.allocations) == {"j0": {0: 2}}  # read after: the allocations of its instant
    unchanged = engine.view.current_plan()
    assert engine.apply(unchanged) is False and unchanged._unread() is not None


def test_pending_plans_kept_alive_do_not_grow_the_journal_without_bound():
    engine = _engine()
    kept = [engine.view.current_plan() for _ in range(3)]
    for _ in range(3000):
        plan = engine.view.current_plan()
        plan.assign("j5", {3: 2})
        engine.apply(plan)
        plan = engine.view.current_plan()
        plan.allocations.pop("j5")
        engine.apply(plan)
    assert len(engine._journal) < 5000 and len(engine._pending) <= 33
    for plan in kept:
        assert dict(plan.allocations) == {}
    many = [engine.view.current_plan() for _ in range(100)]  # kept alive: the older ones are copied
    assert len(engine._pending) <= 33
    plan = engine.view.current_plan()
    plan.assign("j5", {3: 2})
    engine.apply(plan)
    assert all(dict(p.allocations) == {} for p in many)
