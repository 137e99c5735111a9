"""The paired evaluation protocol (lyra_agents.paired, ``python -m lyra_agents.evaluate --suite``):
the statistics by hand on small arrays, the units, and the command's header and errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lyra_agents import evaluate, paired
from lyra_agents.bench_stats import iqm
from lyra_agents.suite import get_suite

ROOT = Path(__file__).resolve().parents[2]
GENERALIST = str(ROOT / "agents" / "pretrained" / "cluster-generalist")


def _units(values, scenario="s"):
    return {(scenario, seed, window): v for (seed, window), v in
            zip([(s, w) for s in range(5) for w in range(3)], values)}


# ---------------------------------------------------------------------- statistics
@pytest.mark.parametrize("statistic", paired.STATISTICS)
def test_identical_policies_give_ratio_one_with_a_zero_width_interval(statistic):
    jct = _units([5000.0 + 733.0 * i for i in range(15)])
    [result] = paired.compare({"a": jct, "r": dict(jct)}, "a", ["r"], statistic, reps=2000)
    assert result.ratios == (1.0,) * 15
    assert (result.point, result.low, result.high) == (1.0, 1.0, 1.0)
    assert result.half_width_points == 0.0


@pytest.mark.parametrize("statistic", paired.STATISTICS)
def test_a_known_shift_on_every_unit_is_the_point_and_the_whole_interval(statistic):
    reference = _units([4000.0 + 500.0 * i for i in range(15)])
    agent = {u: 0.9 * v for u, v in reference.items()}
    [result] = paired.compare({"a": agent, "lyra": reference}, "a", ["lyra"], statistic, reps=2000)
    assert result.point == pytest.approx(0.9, abs=1e-12)
    assert result.low == pytest.approx(0.9, abs=1e-12) and result.high == pytest.approx(0.9, abs=1e-12)
    assert result.half_width_points == pytest.approx(0.0, abs=1e-9)


def test_two_units_mean_interval_by_hand():
    # resampled means: 0.8 (1/4), 0.9 (1/2), 1.0 (1/4): the 2.5 and 97.5 percentiles are 0.8 and 1.0
    point, low, high = paired.paired_interval([0.8, 1.0], "mean", reps=4000, seed=3)
    assert point == pytest.approx(0.9)
    assert (low, high) == (0.8, 1.0)


def test_interval_ends_are_the_extremes_when_each_is_likelier_than_the_tail():
    # three units: all-min and all-max resamples each have probability 1/27 > 2.5 %
    values = np.array([1.0, 2.0, 4.0])
    _, low, high = paired.paired_interval(values, "mean", reps=20_000, seed=1)
    assert (low, high) == (1.0, 4.0)


def test_bootstrap_distribution_matches_brute_force_enumeration():
    """Every one of the 4^4 equally likely resamples of 4 units enumerated: the seeded bootstrap's
    95 % interval of the mean lies within one resample step of the exact distribution's."""
    import itertools

    values = np.array([0.85, 0.95, 1.0, 1.3])
    exact = np.array([values[list(idx)].mean() for idx in itertools.product(range(4), repeat=4)])
    lo, hi = np.percentile(exact, [2.5, 97.5])
    _, low, high = paired.paired_interval(values, "mean", reps=50_000, seed=0)
    step = 0.05 / 4
    assert abs(low - lo) <= step and abs(high - hi) <= step


def test_iqm_point_is_the_benchmarks_iqm():
    ratios = np.arange(1, 9) / 8.0
    point, low, high = paired.paired_interval(ratios, "iqm", reps=500)
    assert point == iqm(ratios) == pytest.approx(4.5 / 8.0)
    assert low <= point <= high


def test_seeded_same_seed_same_interval_other_seed_other_interval():
    ratios = np.linspace(0.7, 1.2, 15)
    assert paired.paired_interval(ratios, seed=7, reps=3000) == paired.paired_interval(ratios, seed=7, reps=3000)
    assert paired.paired_interval(ratios, seed=7, reps=3000) != paired.paired_interval(ratios, seed=8, reps=3000)


def test_unpaired_or_bad_jct_and_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="not paired"):
        paired.unit_ratios({("s", 0, 0): 1.0}, {("s", 0, 1): 1.0})
    with pytest.raises(ValueError, match="positive finite"):
        paired.unit_ratios({("s", 0, 0): 1.0}, {("s", 0, 0): 0.0})
    with pytest.raises(ValueError, match="statistic"):
        paired.paired_interval([1.0], "median")
    with pytest.raises(ValueError, match="non-empty"):
        paired.paired_interval([], "mean")


# ---------------------------------------------------------------------- the protocol's units
def test_protocol_defaults_to_nine_trace_seeds_by_three_windows():
    history = paired.Protocol().scenario(get_suite("v1").get("history"))
    assert history.seeds() == tuple(range(9)) and history.windows == (0, 1, 2)


@pytest.mark.parametrize("kwargs, field", [({"trace_seeds": ()}, "trace seeds"),
                                           ({"trace_seeds": (1, 1)}, "trace seeds"),
                                           ({"trace_seeds": (-1,)}, "trace seeds"), ({"windows": 0}, "windows")])
def test_protocol_refuses_bad_counts_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        paired.Protocol(**kwargs)


def test_protocol_refuses_more_windows_than_the_scenario_lists():
    with pytest.raises(ValueError, match="windows: 4 asked, but scenario 'history' lists 3"):
        paired.Protocol(windows=4).scenario(get_suite("v1").get("history"))


def test_lyra_against_itself_on_real_units_is_exactly_one():
    scenario = paired.Protocol(trace_seeds=(0,), windows=2).scenario(get_suite("v1").get("default"))
    jct = paired.run_units({"policy": lambda: "lyra", "lyra": lambda: "lyra"}, scenario)
    assert list(jct["lyra"]) == [("default", 0, 0), ("default", 0, 1)]
    [result] = paired.compare(jct, "policy", ["lyra"], reps=500)
    assert result.ratios == (1.0, 1.0) and (result.low, result.high) == (1.0, 1.0)


def test_expert_means_the_runs_imitation_expert():
    from lyra_agents.config import TrainConfig

    assert paired.expert_name(TrainConfig(bc_expert="small_first")) == "small-first"
    assert paired.expert_name(TrainConfig()) == "lyra"
    with pytest.raises(ValueError, match="unknown reference 'nope'"):
        paired.reference_factory("nope", TrainConfig())


# ---------------------------------------------------------------------- the command
def test_scenario_header_names_env_trace_seeds_cluster_knowledge_and_windows():
    history = paired.Protocol().scenario(get_suite("v1").get("history"))
    line = paired.scenario_header(history, "LyraGym/Cluster-v1")
    assert line.startswith("history: env LyraGym/Cluster-v1, trace env-14d seeds 0, 1, 2, 3, 4, 5, 6, 7, 8, cluster ")
    assert "contended.yaml, knowledge history, windows 0, 1, 2 (12 h, warm start 6 h)" in line
    strong = paired.scenario_header(get_suite("v1").get("strong-diurnal"), "E")
    assert "cluster default (no file) + demand_preset=strong, knowledge oracle" in strong


def test_evaluate_prints_its_header_first(monkeypatch, capsys):
    """The generalist's plain evaluation says it runs on the history cluster's own env, before any table."""
    def fake(scheduler, env, windows, baselines, bar=None):
        return {"policy": [{"window": 0, "jct_mean_s": 90.0}], "lyra": [{"window": 0, "jct_mean_s": 100.0}]}

    monkeypatch.setattr(evaluate, "compare_on", fake)
    assert evaluate.main([GENERALIST, "--windows", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("env LyraGym/Cluster-v1, trace env-14d seed 0, cluster "
                      f"{paired.relative_path(ROOT / 'traces/training/contended-history.yaml')}, knowledge history")
    assert out[1] == "test windows 0 of 5 (12 h each, warm start 6 h)"
    assert out[2].startswith("trained on suite v1 scenarios default, contended,")
    assert out[3].split() == ["window", "policy", "jct_mean_s", "lyra", "jct_mean_s"]


def test_protocol_mode_prints_intervals_per_reference_and_writes_unit_rows(monkeypatch, capsys, tmp_path):
    def fake(factories, scenario, bar=None):
        units = [(scenario.name, s, w) for s in scenario.seeds() for w in scenario.windows]
        assert set(factories) == {"policy", "lyra", "expert"}
        return {"policy": {u: 90.0 for u in units}, "lyra": {u: 100.0 for u in units},
                "expert": {u: 90.0 for u in units}}

    monkeypatch.setattr(paired, "run_units", fake)
    out_file = tmp_path / "units.json"
    assert evaluate.main([GENERALIST, "--suite", "v1", "--scenarios", "history", "--reps", "200",
                          "--json", str(out_file)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("suite v1; policy = ") and "expert = small-first" in out[0]
    assert out[1].startswith("history: env LyraGym/Cluster-v1, trace env-14d seeds 0, 1, 2, 3, 4, 5, 6, 7, 8")
    assert out[2] == "history: 27 paired units"
    assert out[3].split() == ["policy", "/", "lyra", "IQM", "0.900", "95", "%", "[0.900,", "0.900]",
                              "half-width", "0.0", "points"]
    assert out[4].split()[:5] == ["policy", "/", "expert", "IQM", "1.000"]
    rows = json.loads(out_file.read_text())["units"]
    assert len(rows) == 81 and {r["policy"] for r in rows} == {"policy", "lyra", "expert"}
    assert rows[0]["env_id"] == "LyraGym/Cluster-v1"


@pytest.mark.parametrize("extra, message", [
    (["--trace-seeds", "0"], "--trace-seeds: must be >= 1, got 0"),
    (["--reps", "0"], "--reps: must be >= 1"),
    (["--windows", "0"], "--windows: must be a whole number >= 1"),
    (["--scenarios", "nope"], "unknown scenario 'nope' in suite v1"),
    (["--baselines", "lyra,lyra"], "--baselines: 'lyra' given twice"),
    (["--baselines", "nope"], "unknown reference 'nope'"),
    (["--windows", "4", "--scenarios", "history"], "windows: 4 asked, but scenario 'history' lists 3"),
])
@pytest.mark.sample(2)
def test_protocol_mode_refuses_bad_options_in_one_line(extra, message, capsys):
    assert evaluate.main([GENERALIST, "--suite", "v1", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
