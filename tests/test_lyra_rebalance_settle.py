"""Phase 2's last steps over only the jobs that may change, against every job visited, at every
decision of runs (bit for bit: allocations, grants in order, observed holds, kept workers).

- ``lyra_rebalance.settle``: learn_hold and place_extras skip a running job that keeps as many
  extra workers as it has, none on a server phase 1 took flexible GPUs from.
- ``lyra_rebalance._kept_workers``: keep_choice's kept and displaced workers, walking only the
  servers short of room.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lyra_baselines import lyra_rebalance
from lyra_baselines.lyra import LyraScheduler
from lyra_baselines.lyra_extras import place_extras
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.tracegen import generate_trace
from tests.toy import masked_random_rollout


def _kept_before(d, typed):
    """keep_choice's first pass before the shortcut (the reference): room walked per server."""
    room = list(d.avail)
    kept, lost = [], []
    for job in typed:
        k = 0
        for sid, g in d.flex[job.id].items():
            take = min(g, room[sid])
            room[sid] -= take
            k += take
        kept.append(k)
        lost.append(sum(d.flex[job.id].values()) - k)
    return kept, lost


class _Checked:
    """Runs the reference on copies before each shortcut and compares (installed by monkeypatch)."""

    def __init__(self, monkeypatch, settle=None) -> None:
        self.settles = self.short = self.moved_on = self.grown = self.kept = self.displaced = 0
        settle = settle or lyra_rebalance.settle
        kept_workers = lyra_rebalance._kept_workers

        def checked_settle(d, gpu_type, typed, choice):
            memory = d.memory
            ref = SimpleNamespace(memory=SimpleNamespace(granted=dict(memory.granted), held_s=dict(memory.held_s)),
                                  flex=d.flex, view=d.view)
            lyra_rebalance.learn_hold(ref, gpu_type, typed, choice)
            plan = SimpleNamespace(allocations=dict(d.plan.allocations))
            avail = list(d.avail)
            place_extras(plan, typed, choice, d.base, d.flex, avail, lyra_rebalance._spare_servers(d, gpu_type),
                         d.loaned_set)
            before = dict(d.plan.allocations)
            short = {s for s in d.touched if d.avail[s] < d.flex_on.get(s, 0)}
            settle(d, gpu_type, typed, choice)
            assert dict(d.plan.allocations) == plan.allocations
            assert list(memory.granted.items()) == list(ref.memory.granted.items())  # order too
            assert memory.held_s == ref.memory.held_s
            self.settles += 1
            self.grown += dict(d.plan.allocations) != before
            self.short += bool(short)
            # jobs that keep as many extra workers, some where phase 1 took GPUs: visited
            self.moved_on += sum(j.workers > 0 and c == sum(d.flex[j.id].values()) and not short.isdisjoint(
                d.flex[j.id]) for j, c in zip(typed, choice))

        def checked_kept(d, typed):
            reference = _kept_before(d, typed)
            result = kept_workers(d, typed)
            assert result == reference
            self.kept += 1
            self.displaced += sum(reference[1])
            return result

        monkeypatch.setattr(lyra_rebalance, "settle", checked_settle)
        monkeypatch.setattr(lyra_rebalance, "_kept_workers", checked_kept)


def _run(value_rate="goodput"):
    """300 jobs on 10 V100 and 4 T4 servers: phase 1 displaces flexible workers of jobs that then
    keep as many elsewhere (15 times)."""
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(10, "v100", 8),), inference=ServerGroup(4, "t4", 8)))
    jobs = generate_trace("bench-15d", 1)[:300]
    simulate(jobs, LyraScheduler(value_rate=value_rate), config, seed=0)


@pytest.mark.parametrize("value_rate", ["goodput", "throughput"])
def test_every_settle_and_kept_pass_of_a_run_is_the_full_walk(monkeypatch, value_rate):
    checked = _Checked(monkeypatch)
    _run(value_rate)
    assert checked.settles > 500 and checked.grown > 50 and checked.short > 20 and checked.moved_on > 5
    assert checked.kept > 50 and checked.displaced > 20


def test_every_settle_of_a_guided_rollout_is_the_full_walk(monkeypatch):
    """An agent's levels hold jobs (level 0 drops their extra workers): the same at every decision."""
    checked = _Checked(monkeypatch)
    masked_random_rollout("LyraGym/Elastic-v1", 250, 3)
    assert checked.settles > 200 and checked.kept > 20


def test_a_settle_blind_to_short_servers_fails(monkeypatch):
    """The comparison tells a settle that skips jobs on servers phase 1 took GPUs from."""
    blind_settle = _blind_settle()
    _Checked(monkeypatch, settle=blind_settle)
    with pytest.raises(AssertionError):
        _run()


def _blind_settle():
    original = lyra_rebalance.settle

    def blind(d, gpu_type, typed, choice):
        touched = d.touched
        d.touched = set()  # no server looks short
        try:
            original(d, gpu_type, typed, choice)
        finally:
            d.touched = touched
    return blind
