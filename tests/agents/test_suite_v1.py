"""Benchmark suite v1 (agents/suite.py, traces/suite-v1/): the suite file format and its errors,
the (trace seed, window) units of the bootstrap, the few-units warning, a scenario's profile
reaching the simulation, and ``--suite v1`` end to end."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lyra_agents import benchmark
from lyra_agents.bench_stats import stratified_bootstrap_ci, unit_bootstrap_ci
from lyra_agents.suite import SUITE_FILES, SuiteError, get_suite, load_suite
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.model.profiles import builtin_profiles, load_profiles
from lyra_gym.run.simulate import simulate

BUILTIN = Path(__file__).resolve().parents[2] / "lyra_gym" / "data" / "builtin_profiles.json"


def write_suite(folder: Path, body: str, name: str = "suite.yaml") -> Path:
    path = folder / name
    path.write_text("format: lyra-gym-suite/1\nversion: t1\n" + body)
    return path


TINY_BODY = """\
defaults: {trace: small-1d, trace_seeds: [0, 1], windows: [0], window_s: 7200}
scenarios:
  - name: tiny
    description: small-1d, 2 h windows
"""


# ---------------------------------------------------------------------- the shipped suite
def test_v1_has_the_issues_scenarios_each_on_two_seeds_and_five_or_more_units():
    suite = get_suite("v1")
    assert suite.version == "v1" and suite.bootstrap == "units"
    assert list(suite.scenarios) == ["default", "contended", "contended-warm", "strong-diurnal", "low-elastic",
                                     "paper-shape", "elastic-heavy", "overload", "hetero", "estimates", "history"]
    for s in suite.scenarios.values():
        assert len(s.seeds()) >= 2 and len(s.seeds()) * len(s.windows) >= 5, s.name
    warm = {n for n, s in suite.scenarios.items() if s.warmup_s > 0}
    assert warm == {"contended-warm", "elastic-heavy", "overload", "hetero", "estimates", "history"}
    assert suite.scenarios["elastic-heavy"].elastic_share == 0.7
    assert suite.scenarios["overload"].sim_config().cluster.training_gpus == 64
    types = {g.gpu_type for g in suite.scenarios["hetero"].sim_config().cluster.training}
    assert types == {"v100", "a100"} and suite.scenarios["hetero"].sim_config().cluster.inference.gpu_type == "t4"
    assert not suite.unavailable  # every listed scenario runs in this version


def test_the_knowledge_scenarios_carry_their_setting_into_the_run_config():
    suite = get_suite("v1")
    estimates, history = suite.get("estimates").sim_config(), suite.get("history").sim_config()
    assert (estimates.knowledge.mode, estimates.knowledge.sigma, estimates.knowledge.bias) == ("estimate", 1.0, 1.0)
    assert history.knowledge.mode == "history"
    assert suite.get("contended").sim_config().knowledge.mode == "oracle"
    # the same cluster as contended: only what the schedulers know differs
    assert estimates.cluster == suite.get("contended").sim_config().cluster


def test_v0_is_the_old_fixed_suite_with_its_stratified_bootstrap():
    from lyra_agents.scenarios import SUITE

    v0 = get_suite("v0")
    assert dict(v0.scenarios) == SUITE and v0.bootstrap == "stratified"


def test_paths_are_relative_to_the_suite_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text("cluster:\n  training:\n    - {count: 3, gpu_type: v100}\n")
    (tmp_path / "p.json").write_text(BUILTIN.read_text())
    path = write_suite(tmp_path / "sub", TINY_BODY.replace("description: small-1d, 2 h windows",
                                                           "config_file: c.yaml\n    profiles: ../p.json"))
    scenario = load_suite(path).scenarios["tiny"]
    config = scenario.sim_config()
    assert config.cluster.training_gpus == 24
    assert Path(config.profiles) == (tmp_path / "p.json").resolve()


@pytest.mark.parametrize("body, named", [
    ("scenarios: []\n", "scenarios: a non-empty list"),
    (TINY_BODY + "    nope: 1\n", "scenarios[0].nope: unknown key"),
    (TINY_BODY + "    windows: 3\n", "scenarios[0].windows: a non-empty list"),
    (TINY_BODY + "    windows: [0, 0]\n", "scenarios[0].windows: a value given twice"),
    (TINY_BODY + "    trace: nosuch\n", "scenarios[0].trace"),
    (TINY_BODY + "    elastic_share: 2\n", "scenarios[0].elastic_share"),
    (TINY_BODY + "    config_file: missing.yaml\n", "scenarios[0].config"),
    (TINY_BODY + "    config: {nosuch_key: 1}\n", "scenarios[0].config"),
    (TINY_BODY + "    profiles: none.json\n", "scenarios[0].profiles"),
    (TINY_BODY + "    requires: [telepathy]\n", "scenarios[0].requires: unknown requirement"),
    (TINY_BODY + "  - name: tiny\n", "scenarios[1].name: scenario 'tiny' given twice"),
    (TINY_BODY + "    window_s: 1\n    window_s: 2\n", "duplicate key 'window_s'"),
    (TINY_BODY.replace("trace_seeds: [0, 1]", "trace_seeds: [-1]"), "defaults.trace_seeds"),
])
def test_suite_file_errors_name_the_file_and_field(tmp_path, body, named):
    path = write_suite(tmp_path, body)
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert str(path) in str(err.value) and named in str(err.value)


def test_wrong_format_and_unknown_suite_are_errors(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("format: other/2\nversion: x\nscenarios: [{name: a}]\n")
    with pytest.raises(SuiteError, match="format: must be 'lyra-gym-suite/1'"):
        load_suite(path)
    with pytest.raises(SuiteError, match="unknown suite 'v9'"):
        get_suite("v9")
    assert SUITE_FILES["v1"].is_file()


# ---------------------------------------------------------------------- bootstrap units by hand
def test_a_units_scenarios_are_redrawn_together():
    # units A = (0, 1) and B = (1, 0) over two scenarios, one run: any draw of two units holds
    # two 0s and two 1s, IQM 0.5, so the interval is the point; redrawn per scenario
    # (stratified) a sample of four 0s has p = 1/16 > 2.5 %, so that interval spans [0, 1]
    cube = np.array([[[0.0, 1.0]], [[1.0, 0.0]]])
    assert unit_bootstrap_ci(cube, reps=4000) == (0.5, 0.5)
    assert stratified_bootstrap_ci(cube[:, 0, :], reps=4000) == (0.0, 1.0)


def _row(policy, seed, window, value, scenario="s"):
    return {"kind": "window", "policy": policy, "run": "", "scenario": scenario, "window": window,
            "trace_seed": seed, "jct_vs_lyra": value, "headroom_closed": value}


def test_trace_seed_and_window_make_a_unit():
    # seed 0 window 0 -> 1.0, seed 1 window 0 -> 3.0: two units (not one window with two cells);
    # resampled IQMs are 1, 2, 3 with p = 1/4, 1/2, 1/4: IQM 2, interval [1, 3]
    rows = [_row("p", 0, 0, 1.0), _row("p", 1, 0, 3.0)]
    assert benchmark.score_cube(rows, "p", "jct_vs_lyra", ["s"]).shape == (2, 1, 1)
    (agg, _), = [benchmark.aggregate(rows, 4000, 0, "units")]
    assert (agg["iqm"], agg["ci_low"], agg["ci_high"], agg["units"]) == (2.0, 1.0, 3.0, 2)


def test_units_pair_scenarios_by_position_and_unequal_units_fail():
    rows = [_row("p", 0, 0, 1.0, "a"), _row("p", 0, 1, 2.0, "a"), _row("p", 0, 8, 5.0, "b"), _row("p", 0, 9, 6.0, "b")]
    cube = benchmark.score_cube(rows, "p", "jct_vs_lyra", ["a", "b"])
    assert cube[:, 0, :].tolist() == [[1.0, 5.0], [2.0, 6.0]]
    with pytest.raises(ValueError, match="unequal numbers of units"):
        benchmark.score_cube(rows[:-1], "p", "jct_vs_lyra", ["a", "b"])


def test_few_units_warning_below_five():
    def agg(units):
        return [{"policy": "lyra", "metric": "jct_vs_lyra", "cells": units, "units": units}]

    assert benchmark.few_units_warning(agg(5)) is None
    warning = benchmark.few_units_warning(agg(4))
    assert warning and "4 (trace seed, window) units" in warning and "fewer than 5" in warning


# ---------------------------------------------------------------------- profile and config honoured
def _faster_t4_profile(path: Path) -> Path:
    data = json.loads(BUILTIN.read_text())
    for model in data["models"].values():
        for key in ("step_compute_s", "step_fixed_s"):
            model["gpus"]["t4"][key] *= 0.25
        model["gpus"]["v100"]["allreduce_intra_s"] *= 3
    path.write_text(json.dumps(data))
    return path


def test_a_scenarios_profile_reaches_the_simulation(tmp_path):
    _faster_t4_profile(tmp_path / "fast-t4.json")
    plain = load_suite(write_suite(tmp_path, TINY_BODY, "plain.yaml")).scenarios["tiny"]
    own = load_suite(write_suite(tmp_path, TINY_BODY + "    profiles: fast-t4.json\n", "own.yaml")).scenarios["tiny"]
    policies = benchmark.resolve_policies(["lyra", "random"], [], random_seed=0)
    got = {r["trace_seed"]: r["jct_mean_s"] for r in benchmark.evaluate(policies, [own])
           if r["policy"] == "lyra"}
    base = {r["trace_seed"]: r["jct_mean_s"] for r in benchmark.evaluate(policies, [plain]) if r["policy"] == "lyra"}
    for seed in (0, 1):
        window = own.test_windows(own.build_trace(seed))[0]
        jobs = window.jobs(own.build_trace(seed))
        expected = simulate(jobs, "lyra", own.sim_config(), seed=window.seed,
                            profiles=load_profiles(tmp_path / "fast-t4.json")).metrics["jct_mean_s"]
        builtin = simulate(jobs, "lyra", plain.sim_config(), seed=window.seed,
                           profiles=builtin_profiles()).metrics["jct_mean_s"]
        assert got[seed] == expected and base[seed] == builtin
        assert got[seed] != base[seed]


# ---------------------------------------------------------------------- end to end
def test_suite_v1_end_to_end_through_main(tmp_path, capsys):
    out = tmp_path / "v1.csv"
    assert benchmark.main(["--suite", "v1", "--scenarios", "default", "--windows", "1", "--policies",
                           "lyra,fifo,random", "--reps", "200", "--quiet", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(out.open()))
    assert {r["suite"] for r in rows} == {"v1"}
    windows = [r for r in rows if r["kind"] == "window"]
    assert sorted({(r["trace_seed"], r["window"]) for r in windows}) == [("0", "0"), ("1", "0")]
    assert len(windows) == 3 * 2
    bounds = [r for r in rows if r["kind"] == "bound"]
    assert len(bounds) == 2 and all(0 < float(r["jct_vs_lyra"]) < 1 for r in bounds)
    aggregates = [r for r in rows if r["kind"] == "aggregate"]
    assert {(r["units"], r["bootstrap"]) for r in aggregates} == {("2", "units")}
    assert captured.out.startswith("suite v1\n")
    assert "headroom per scenario" in captured.out and "isolated bound (unreachable)" in captured.out
    assert "fewer than 5" in captured.err and captured.err.count("lyra_agents.benchmark: warning:") == 1


@pytest.mark.slow
def test_suite_v1_hetero_and_overload_end_to_end(capsys):
    assert benchmark.main(["--suite", "v1", "--scenarios", "hetero,overload", "--windows", "1", "--policies",
                           "lyra,pollux,random", "--reps", "200", "--quiet"]) == 0
    text = capsys.readouterr().out
    headroom = text[text.index("headroom per scenario"):]
    for name in ("hetero", "overload"):
        line = next(r for r in headroom.splitlines() if r.startswith(name))
        bound = float(line.split()[-1])
        assert 0 < bound < 1  # the isolated-job bound is below lyra on a loaded cluster


@pytest.mark.slow
def test_an_estimate_scenario_has_lyra_told_the_truth_as_reference(tmp_path, capsys):
    """Under ``knowledge: estimate`` each window gets one ``reference`` row: lyra on the same jobs
    with oracle knowledge, equal to a direct simulation; the policies' rows and aggregates ignore it."""
    from lyra_gym.sim import scheduler as registry

    body = TINY_BODY.replace("    description: small-1d, 2 h windows\n",
                             "    description: small-1d, 2 h windows\n    knowledge: {mode: estimate, sigma: 1.0}\n")
    suite = write_suite(tmp_path, body)
    out = tmp_path / "est.csv"
    assert benchmark.main(["--suite", str(suite), "--policies", "lyra,fifo,random", "--reps", "100", "--quiet",
                           "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    references = [r for r in rows if r["kind"] == "reference"]
    assert [r["policy"] for r in references] == ["lyra@oracle"] * 2
    scenario = load_suite(suite).get("tiny")
    estimated = scenario.sim_config()
    assert estimated.knowledge.mode == "estimate"
    oracle = replace(estimated, knowledge=KnowledgeConfig())
    for seed, ref in zip(scenario.seeds(), references):
        trace = scenario.build_trace(seed)
        window = scenario.test_windows(trace)[0]
        told = simulate(window.jobs(trace), registry.make("lyra"), oracle, seed=window.seed).metrics["jct_mean_s"]
        guessed = simulate(window.jobs(trace), registry.make("lyra"), estimated, seed=window.seed).metrics["jct_mean_s"]
        assert float(ref["jct_mean_s"]) == float(told)  # repr round trip of the CSV: exact
        lyra = next(r for r in rows if r["kind"] == "window" and r["policy"] == "lyra" and r["trace_seed"] == str(seed))
        assert float(lyra["jct_mean_s"]) == float(guessed)
    assert "lyra@oracle" not in {r["policy"] for r in rows if r["kind"] == "aggregate"}
    assert "lyra told the truth" in capsys.readouterr().out


# ---------------------------------------------------------------------- suite v1.1
def test_v1_1_is_v1_with_a_checkpoint_interval_in_every_scenario():
    """Suite v1.1 (issue 39 item 3): v1's scenarios, seeds, windows and clusters, with
    overheads.checkpoint_interval_s = 1800 in every scenario's run config (v1 keeps 0)."""
    import dataclasses

    v1, v11 = get_suite("v1"), get_suite("v1.1")
    assert v11.version == "v1.1" and v11.bootstrap == "units" and not v11.unavailable
    assert list(v11.scenarios) == list(v1.scenarios)
    for name, scenario in v11.scenarios.items():
        old = v1.scenarios[name]
        config, old_config = scenario.sim_config(), old.sim_config()
        assert config.overheads.checkpoint_interval_s == 1800.0, name
        assert old_config.overheads.checkpoint_interval_s == 0.0, name
        same = dataclasses.replace(config, overheads=old_config.overheads)
        assert same == old_config, name  # nothing else differs
        for key in ("trace", "trace_seeds", "windows", "window_s", "warmup_s", "elastic_share", "test_fraction"):
            assert getattr(scenario, key) == getattr(old, key), (name, key)
