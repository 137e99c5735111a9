"""The loaned servers' set kept by the index (``Topology.loaned_set``, ``loaned_members``) equals
a rebuild from scratch (``Topology.server_set(topology.loaned(), free)``) after random sequences
of loans, returns, allocations and releases, on the engine's map and on working copies changed
by random writes (ids and cells, and so every placement that reads them)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.topology import Topology
from tests.sim.test_topology import _apply, clusters, ops


def _assert_same(topology: Topology, free) -> None:
    fresh = topology.server_set(list(topology.loaned()), free)
    kept = topology.loaned_set(free)
    assert tuple(kept) == tuple(fresh)
    assert kept.cells == fresh.cells
    assert topology.loaned_members() == set(topology.loaned())


@settings(max_examples=200, deadline=None)
@given(clusters(), st.lists(ops, max_size=60),
       st.lists(st.tuples(st.integers(0, 40), st.integers(0, 8)), max_size=6))
def test_loaned_set_equals_a_rebuild_after_random_changes(servers, changes, writes):
    topology = Topology(servers)
    for kind, sid, gpus in changes:
        _apply(topology, servers, (kind, sid % len(servers), gpus))
        if not topology.loaned():
            continue
        _assert_same(topology, None)
        _assert_same(topology, topology.free_map())
        free = topology.free_map()  # a working copy: some servers written (returned, borrowed, taken)
        for wsid, value in writes:
            wsid %= len(servers)
            free[wsid] = min(value, servers[wsid].num_gpus)
        _assert_same(topology, free)


def test_a_free_gpu_on_a_server_not_on_loan_drops_the_cells():
    """A working copy that gives a server not on loan free GPUs (a borrow being planned) makes
    the set walk its ids, as the rebuild does."""
    servers = [Server(0, Pool.TRAINING, "v100", 8)] + [Server(i, Pool.INFERENCE, "t4", 8) for i in (1, 2, 3)]
    servers[1].loaned = servers[2].loaned = True
    topology = Topology(servers)
    assert topology.loaned_set(topology.free_map()).cells == (1,)
    free = topology.free_map()
    free[3] = 8
    assert topology.loaned_set(free).cells is None
    assert topology.server_set([1, 2], free).cells is None
    servers[3].loaned = True
    topology.mark_loaned(3)  # all inference servers on loan: whole cells
    assert tuple(topology.loaned_set()) == (1, 2, 3) and topology.loaned_set().cells == (1,)
