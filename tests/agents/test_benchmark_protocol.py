"""The benchmark protocol (agents/benchmark.py): IQM, stratified bootstrap, normalisation, end to end."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_agents import benchmark
from lyra_agents.benchmark import headroom_closed, iqm, stratified_bootstrap_ci, vs_lyra
from lyra_agents.scenarios import SUITE, Scenario

TINY = Scenario("tiny", "small-1d, 2 h windows", trace="small-1d", window_s=7200.0, windows=(0, 1))


# ---------------------------------------------------------------------- statistics by hand
def test_iqm_of_one_to_eight_is_the_mean_of_three_to_six():
    assert iqm(np.arange(1, 9)) == pytest.approx((3 + 4 + 5 + 6) / 4)
    assert iqm(np.arange(1, 9).reshape(2, 4)) == pytest.approx(4.5)  # all entries, any shape


def test_iqm_drops_a_quarter_rounded_down_from_each_end():
    assert iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)  # int(1.25) = 1 cut: mean(2, 3, 4)
    assert iqm([5.0, 7.0]) == pytest.approx(6.0)  # int(0.5) = 0 cut
    # 35 values: int(8.75) = 8 cut from each end (as scipy.stats.trim_mean(x, 0.25), rliable's aggregate_iqm)
    x = np.random.default_rng(3).normal(size=(7, 5))
    assert iqm(x) == pytest.approx(np.sort(x, axis=None)[8:27].mean())


def test_bootstrap_of_two_runs_spans_both_values():
    # one task, runs 0 and 1: resamples give IQMs 0, 0.5 or 1 (p = 1/4, 1/2, 1/4), so the 2.5 % and
    # 97.5 % percentiles are 0 and 1
    assert stratified_bootstrap_ci(np.array([[0.0], [1.0]]), reps=4000) == (0.0, 1.0)


def test_bootstrap_resamples_within_each_scenario_only():
    # one run per scenario: every resample is the matrix itself, so the interval is the point
    scores = np.array([[1.0, 2.0, 7.0, 9.0]])
    assert stratified_bootstrap_ci(scores, reps=500) == (iqm(scores), iqm(scores))


def test_bootstrap_is_seeded():
    x = np.random.default_rng(0).normal(size=(4, 3))
    assert stratified_bootstrap_ci(x, 2000, seed=5) == stratified_bootstrap_ci(x, 2000, seed=5)
    assert stratified_bootstrap_ci(x, 2000, seed=5) != stratified_bootstrap_ci(x, 2000, seed=6)


def test_normalisation_by_hand():
    assert vs_lyra(110.0, 100.0) == pytest.approx(1.1)
    assert math.isnan(vs_lyra(110.0, 0.0))
    assert headroom_closed(100.0, 100.0, 60.0) == 0.0               # the best heuristic itself
    assert headroom_closed(60.0, 100.0, 60.0) == 1.0                # the bound
    assert headroom_closed(90.0, 100.0, 60.0) == pytest.approx(0.25)
    assert headroom_closed(120.0, 100.0, 60.0) == pytest.approx(-0.5)
    assert math.isnan(headroom_closed(100.0, 100.0, 100.0))         # no headroom: undefined


def test_random_masked_action_takes_only_valid_values():
    nvec = np.array([3, 2, 4])
    masks = np.array([0, 1, 1, 1, 0, 0, 0, 0, 1], dtype=bool)
    rng = np.random.default_rng(0)
    actions = np.array([benchmark.random_masked_action(rng, nvec, masks) for _ in range(200)])
    assert set(actions[:, 0]) == {1, 2} and set(actions[:, 1]) == {0} and set(actions[:, 2]) == {3}


# ---------------------------------------------------------------------- scenarios
def test_suite_scenarios_are_the_envs_test_windows():
    scenario = SUITE["default"]
    env = gym.make("LyraGym/Cluster-v1", **scenario.env_kwargs()).unwrapped
    trace = scenario.build_trace()
    for window in scenario.test_windows(trace):
        env.reset(options={"split": "test", "window": window.index})
        assert (env.window.start_s, env.window.seed) == (window.start_s, window.seed)
        assert env.window.jobs(env.trace) == window.jobs(trace)


def test_suite_has_the_six_named_scenarios_with_equal_window_counts():
    assert list(SUITE) == ["default", "contended", "contended-warm", "strong-diurnal", "low-elastic", "paper-shape"]
    assert len({len(s.windows) for s in SUITE.values()}) == 1
    assert SUITE["contended"].offered_load() >= 1.0
    assert SUITE["contended-warm"].offered_load() >= 1.0


def test_a_warm_scenario_adds_the_jobs_before_each_window_and_keeps_its_seeds():
    cold, warm = SUITE["contended"], SUITE["contended-warm"]
    trace = cold.build_trace()
    for c, w in zip(cold.test_windows(trace), warm.test_windows(trace)):
        assert (c.start_s, c.seed) == (w.start_s, w.seed)
        extra = [j for j in w.jobs(trace) if j not in c.jobs(trace)]
        assert extra and all(w.start_s - 6 * 3600.0 <= j.submit_time < w.start_s for j in extra)


# ---------------------------------------------------------------------- end to end
def test_end_to_end_lyra_is_exactly_one_and_the_best_heuristic_zero():
    policies = benchmark.resolve_policies(["lyra", "baseline", "random"], [], random_seed=0)
    rows = benchmark.evaluate(policies, [TINY], bounds=True)
    assert len([r for r in rows if r["kind"] == "window"]) == 3 * 2
    best = {r["headroom_ref"] for r in rows}
    assert len(best) == 1 and best <= {"lyra", "baseline"}
    for row in rows:
        if row["policy"] == "lyra":
            assert row["jct_vs_lyra"] == 1.0
        if row["policy"] in best:
            assert row["headroom_closed"] == 0.0
        if row["kind"] == "bound":
            assert row["headroom_closed"] == 1.0
    aggregates = {(a["policy"], a["metric"]): a for a in benchmark.aggregate(rows, 500, 0)}
    lyra = aggregates["lyra", "jct_vs_lyra"]
    assert (lyra["iqm"], lyra["ci_low"], lyra["ci_high"]) == (1.0, 1.0, 1.0)
    assert aggregates[best.pop(), "headroom_closed"]["iqm"] == 0.0


CLI = ["--policies", "lyra,baseline,random", "--scenarios", "default", "--windows", "2", "--reps", "300", "--quiet"]


@pytest.mark.slow
def test_same_arguments_write_the_same_bytes(tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert benchmark.main([*CLI, "--out", str(a)]) == 0
    assert benchmark.main([*CLI, "--out", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text().splitlines()
    assert text[0].startswith("kind,policy,run,scenario,window")
    assert sum(line.startswith("window,") for line in text) == 3 * 2
    assert sum(line.startswith("aggregate,") for line in text) == 3 * 2
    assert "lyra" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]  # no temporary file left


@pytest.mark.parametrize("args, named", [
    (["--policies", "lyra,nosuch"], "nosuch"),
    (["--scenarios", "default,nowhere"], "nowhere"),
    (["--policies", "lyra,model:/no/such/run"], "/no/such/run"),
    (["--agent", "ppo=/no/such/a,/no/such/b"], "/no/such/a"),
    (["--out", "/dev/null/x.csv"], "/dev/null"),  # under a file (a missing folder is created)
])
def test_bad_names_are_one_line_errors_with_exit_2(tmp_path, capsys, args, named):
    out = tmp_path / "bench.csv"
    argv = [*args] if "--out" in args else [*args, "--out", str(out)]
    assert benchmark.main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err and err.startswith("lyra_agents.benchmark: error:")
    assert list(tmp_path.iterdir()) == []


def test_a_shipped_agent_loads_by_its_pretrained_name_from_any_folder(tmp_path, monkeypatch):
    """``model:pretrained/NAME`` is a shipped agent wherever the command runs (as in ``compare``);
    a name no agent has stays a one-line error."""
    monkeypatch.chdir(tmp_path)
    scheduler = benchmark.load_model_scheduler("pretrained/cluster-v2-slots-rule-9", "net")
    assert scheduler.name == "net"
    with pytest.raises(benchmark.BenchmarkError, match="'pretrained/no-such-agent' not found"):
        benchmark.load_model_scheduler("pretrained/no-such-agent", "net")
