"""Who holds which GPUs: a job's allocation taken on or released from its servers, and inference
servers lent to training or taken back, kept in step with the free-capacity index
(:class:`~lyra_gym.sim.topology.Topology`) and the GPUs-in-use counters
(:class:`~lyra_gym.sim.accounting.Accounting`)."""

from __future__ import annotations

from typing import Sequence

from lyra_gym.sim.accounting import Accounting
from lyra_gym.sim.cluster import Pool, Server
from lyra_gym.sim.topology import Topology

_TRAINING = Pool.TRAINING


def hold(servers: Sequence[Server], topology: Topology, accounting: Accounting, index: int,
         allocation: dict[int, int]) -> int:
    """Job ``index`` takes ``allocation`` (server id -> GPUs); returns its worker count (GPUs)."""
    workers = on_training = 0
    for sid, gpus in allocation.items():
        workers += gpus
        s = servers[sid]
        s.used += gpus
        s.jobs[index] = gpus
        if s.pool is _TRAINING:
            on_training += gpus
    accounting.used_training += on_training
    if workers != on_training:
        accounting.used_loaned += workers - on_training
    topology.add_free(allocation, -1)
    return workers


def release(servers: Sequence[Server], topology: Topology, accounting: Accounting, index: int,
            allocation: dict[int, int]) -> None:
    """Job ``index`` gives up ``allocation`` (what it holds now)."""
    total = on_training = 0
    for sid, gpus in allocation.items():
        s = servers[sid]
        s.used -= gpus
        del s.jobs[index]
        total += gpus
        if s.pool is _TRAINING:
            on_training += gpus
    accounting.used_training -= on_training
    if total != on_training:
        accounting.used_loaned -= total - on_training
    topology.add_free(allocation, 1)


def lend(servers: Sequence[Server], topology: Topology, counts: dict[str, int], borrow: Sequence[int]) -> int:
    """Put inference servers ``borrow`` (ids, each once) on loan to training; returns how many."""
    for sid in borrow:
        servers[sid].loaned = True
        topology.mark_loaned(sid)
    counts["servers_borrowed"] += len(borrow)
    return len(borrow)


def take_back(servers: Sequence[Server], topology: Topology, counts: dict[str, int], give_back: Sequence[int]) -> int:
    """Return loaned servers ``give_back`` (ids, each once, empty by now) to inference; returns how many."""
    for sid in give_back:
        servers[sid].loaned = False
        topology.mark_returned(sid)
    counts["servers_returned"] += len(give_back)
    return len(give_back)
