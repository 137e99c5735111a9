"""The benchmark's headroom score (issue 42 item 1): the share of the headroom between the scenario's
best heuristic and the isolated-job bound a policy closes, checked by hand, on the history case
where random beats lyra, and as a property (higher JCT, lower score; never above 1)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_agents.bench_output import COLUMNS, METRICS, add_scores, aggregate
from lyra_agents.bench_stats import headroom_closed
from lyra_agents.headroom import BOUND


def _rows(jct: dict[str, float], bound: float, scenario: str = "history", window: int = 0) -> list[dict]:
    """One window's rows as the benchmark makes them (lyra first, the bound's row last)."""
    rows = [{"kind": "window", "policy": p, "run": "", "scenario": scenario, "window": window, "trace_seed": 0,
             "jct_mean_s": v, "jct_vs_lyra": v / jct["lyra"]} for p, v in jct.items()]
    return rows + [{"kind": "bound", "policy": BOUND, "run": "", "scenario": scenario, "window": window,
                    "trace_seed": 0, "jct_mean_s": bound, "jct_vs_lyra": bound / jct["lyra"]}]


def test_formula_by_hand():
    assert headroom_closed(8_000.0, 10_000.0, 5_000.0) == pytest.approx(0.4)
    assert headroom_closed(11_000.0, 10_000.0, 5_000.0) == pytest.approx(-0.2)
    assert headroom_closed(5_000.0, 10_000.0, 5_000.0) == 1.0
    assert math.isnan(headroom_closed(8_000.0, 5_000.0, 5_000.0))      # no headroom left
    assert math.isnan(headroom_closed(8_000.0, 10_000.0, math.nan))    # no bound (adaptive scaling)


# The history case of issue 42: random 0.908 of lyra. A policy at 8,006 s (lyra 10,220 s, random
# 9,096 s) scored (9,096 - 8,006) / (9,096 - 10,220) = -0.97 under score_vs_random, below random's 0.
HISTORY = {"lyra": 10_220.0, "random": 9_096.0, "agent": 8_006.0, "close": 8_500.0, "middling": 9_500.0,
           "poor": 12_000.0}
BOUND_S = 4_979.0  # the isolated-job bound of suite v1's history window 0 (docs/bench-suite-v1-*.csv)


def test_history_case_scores_above_every_worse_policy():
    scored = {r["policy"]: r for r in add_scores(_rows(HISTORY, BOUND_S), ["lyra"])}
    score = {p: r["headroom_closed"] for p, r in scored.items()}
    assert score["agent"] == pytest.approx((10_220 - 8_006) / (10_220 - 4_979))  # 0.422
    assert score["lyra"] == 0.0 and score[BOUND] == 1.0
    worse = [p for p in HISTORY if HISTORY[p] > HISTORY["agent"]]
    assert worse and all(score["agent"] > score[p] for p in worse)
    assert score["random"] > score["lyra"]  # random beats lyra here, and its score says so
    assert {r["headroom_ref"] for r in scored.values()} == {"lyra"}


def test_the_best_heuristic_is_the_reference_even_when_it_beats_the_agent():
    jct = {**HISTORY, "pollux+loan": 7_400.0}
    score = {r["policy"]: r["headroom_closed"] for r in add_scores(_rows(jct, BOUND_S), ["lyra", "pollux+loan"])}
    assert score["pollux+loan"] == 0.0
    assert score["agent"] == pytest.approx((7_400 - 8_006) / (7_400 - 4_979))
    assert all(score["agent"] > score[p] for p in HISTORY if HISTORY[p] > HISTORY["agent"])


def test_the_best_heuristic_is_chosen_per_scenario_by_its_iqm():
    # scenario a: sjf best on both windows; scenario b: lyra best
    rows = (_rows({"lyra": 100.0, "sjf": 90.0}, 50.0, "a", 0) + _rows({"lyra": 100.0, "sjf": 80.0}, 50.0, "a", 1)
            + _rows({"lyra": 100.0, "sjf": 110.0}, 50.0, "b", 0))
    refs = {(r["scenario"], r["window"]): r["headroom_ref"] for r in add_scores(rows, ["lyra", "sjf"])}
    assert refs == {("a", 0): "sjf", ("a", 1): "sjf", ("b", 0): "lyra"}


def test_the_csv_column_is_renamed():
    assert "headroom_closed" in COLUMNS and "headroom_ref" in COLUMNS and "score_vs_random" not in COLUMNS
    assert METRICS == ("jct_vs_lyra", "headroom_closed")


def test_aggregate_of_the_history_case():
    rows = add_scores(_rows(HISTORY, BOUND_S, window=0) + _rows(HISTORY, BOUND_S, window=1), ["lyra"])
    agg = {(a["policy"], a["metric"]): a["iqm"] for a in aggregate(rows, 200, 0)}
    assert agg["agent", "headroom_closed"] > max(agg[p, "headroom_closed"] for p in HISTORY if p != "agent")


@settings(max_examples=60, deadline=None)
@given(bound=st.floats(100.0, 1_000.0), extra=st.lists(st.floats(0.0, 5_000.0), min_size=2, max_size=6, unique=True))
def test_score_falls_as_jct_grows_and_never_passes_one(bound, extra):
    jct = {"lyra": bound + extra[0] + 1.0, **{f"p{i}": bound + e for i, e in enumerate(extra[1:])}}
    scored = add_scores(_rows(jct, bound), ["lyra"])
    score = {r["policy"]: r["headroom_closed"] for r in scored if r["kind"] == "window"}
    order = sorted(jct, key=jct.__getitem__)
    assert [score[p] for p in order] == sorted(score.values(), reverse=True)
    assert all(s <= 1.0 for s in score.values())
