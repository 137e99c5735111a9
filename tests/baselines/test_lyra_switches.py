"""Lyra's switches are declared once (issue 41 item 1): ``lyra``, its variants and ``lyra-reference``
all take ``LyraSwitches``' parameters, so the reference cannot drift from the fast path's options, and
the reference stays a short read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lyra_baselines.lyra import (
    BaselineMinScheduler,
    BaselineScheduler,
    LyraBackfillScheduler,
    LyraNoElasticScheduler,
    LyraNoLoanScheduler,
    LyraScheduler,
)
from lyra_baselines.lyra_reference import LyraReferenceScheduler
from lyra_baselines.lyra_switches import LyraSwitches
from lyra_gym.sim.params import describe

REFERENCE = Path(__file__).resolve().parents[2] / "baselines" / "lyra_reference.py"
# (class, the switches it sets differently from LyraSwitches' defaults)
VARIANTS = [(LyraScheduler, {}), (LyraReferenceScheduler, {}), (LyraNoLoanScheduler, {"loan": False}),
            (LyraBackfillScheduler, {"backfill": True}), (LyraNoElasticScheduler, {"elastic": False}),
            (BaselineScheduler, {"loan": False, "elastic": False}),
            (BaselineMinScheduler, {"loan": False, "elastic": False, "fixed_size": "min"})]
SWITCHES = [f.name for f in dataclasses.fields(LyraSwitches) if f.init]


def test_switches_in_the_order_configs_and_listings_know():
    assert SWITCHES == ["loan", "elastic", "fixed_size", "reclaim_rule", "reserve_servers", "backfill",
                        "loaned_rule", "move_back", "flex_horizon", "value_rate", "knapsack_exact_limit",
                        "round_s"]


@pytest.mark.parametrize(("cls", "changed"), VARIANTS, ids=lambda v: getattr(v, "name", ""))
def test_every_lyra_takes_the_switches_declared_once(cls, changed):
    """No subclass redeclares a switch's rule (only a variant's default); the listing's ranges and help
    texts are LyraSwitches' own, and a made scheduler carries the variant's values."""
    assert issubclass(cls, LyraSwitches)
    assert [f.name for f in dataclasses.fields(cls) if f.init] == SWITCHES
    ranges = {row[0]: (row[1], row[3], row[4]) for row in describe(LyraSwitches)}
    assert {row[0]: (row[1], row[3], row[4]) for row in describe(cls)} == ranges
    made, plain = cls(), LyraSwitches()
    for name in SWITCHES:
        assert getattr(made, name) == changed.get(name, getattr(plain, name)), name
    assert (made.loaning.enabled, made.loaning.reserve_servers) == (made.loan, made.reserve_servers)
    assert made.tick_interval == (made.round_s if made.elastic else None)


def test_lyra_and_the_reference_read_the_same_durations():
    assert LyraScheduler.reads == LyraReferenceScheduler.reads == LyraSwitches.reads


def test_the_reference_is_a_short_read():
    """Issue 41: ``lyra-reference`` under 450 lines."""
    assert len(REFERENCE.read_text().splitlines()) < 450
