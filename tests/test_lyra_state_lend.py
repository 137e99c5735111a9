"""``RunningElastic.lend``/``restore``: a decision edits the kept base and flexible workers in
place (no copy per decision); the next sync puts every key back as it was, in its place.
``tests/test_lyra_fast_paths.py`` checks the kept state against a rebuild at every decision (a
sync that does not restore fails there)."""

from __future__ import annotations

from types import SimpleNamespace

from lyra_baselines.lyra_running import RunningElastic
from lyra_baselines.lyra_state import Decision


def _running() -> RunningElastic:
    running = RunningElastic(split=None, cell_of=[0, 0, 1, 1], kinds={}, views={})  # type: ignore[arg-type]
    running.base = {"a": {0: 2}, "b": {2: 4}}
    running.flex = {"a": {1: 2}, "b": {}}
    return running


def _decision(running: RunningElastic) -> Decision:
    d = Decision.__new__(Decision)
    d.base, d.flex, d._edits = running.base, running.flex, running.lend()
    return d


def test_a_lent_decisions_edits_are_undone_in_place_and_order():
    running = _running()
    d = _decision(running)
    d.set_split("c", {3: 1}, {})  # admitted now
    d.set_split("a", {2: 2}, {3: 2})  # moved back now
    d.set_split("c", {3: 2}, {3: 1})  # (edited twice)
    assert list(running.base.items()) == [("a", {2: 2}), ("b", {2: 4}), ("c", {3: 2})]
    running.restore()
    assert list(running.base.items()) == [("a", {0: 2}), ("b", {2: 4})]
    assert list(running.flex.items()) == [("a", {1: 2}), ("b", {})]
    assert running.edits is None
    running.restore()  # nothing lent: nothing to undo
    assert list(running.base) == ["a", "b"]


def test_a_decision_on_copies_records_no_edits():
    running = _running()
    d = Decision.__new__(Decision)
    d.base, d.flex, d._edits = dict(running.base), dict(running.flex), None
    d.set_split("a", {2: 2}, {})
    assert running.base["a"] == {0: 2} and d.base["a"] == {2: 2} and running.edits is None


def test_sync_restores_before_it_reads_the_feed():
    running = _running()
    d = _decision(running)
    d.set_split("z", {0: 1}, {})
    feed = SimpleNamespace(changed=lambda: {})
    view = SimpleNamespace()
    running.view, running.feed = view, feed  # type: ignore[assignment]
    running.sync(view)  # type: ignore[arg-type]
    assert list(running.base) == ["a", "b"]
