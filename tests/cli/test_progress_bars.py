"""Progress bars of the long commands (lyra_gym/progress.py): on stderr only, after a delay, off with
TQDM_DISABLE=1; stdout and written files are the same bytes with and without the bar. And the
benchmark's warning when an interval rests on one window."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from lyra_agents import benchmark
from lyra_agents import evaluate as evaluate_mod
from lyra_gym import progress as progress_mod

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def bar_now(monkeypatch):
    """The bar at once (no delay) and at every step (even though stderr is not a terminal)."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setenv(progress_mod.DELAY_ENV, "0")
    monkeypatch.setattr(progress_mod, "PIPE_INTERVAL_S", 0.0)


def _twice(monkeypatch, capsys, run):
    """``run()`` with the bar and with TQDM_DISABLE=1: ((stdout, stderr, files) with, without)."""
    outputs = []
    for disable in (False, True):
        if disable:
            monkeypatch.setenv("TQDM_DISABLE", "1")
        files = run(disable)
        out, err = capsys.readouterr()
        outputs.append((out, err, files))
    return outputs


# ---------------------------------------------------------------------- the helper
def test_defaults_two_second_delay_stderr_and_a_slow_redraw_off_a_terminal(monkeypatch, capsys):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.delenv(progress_mod.DELAY_ENV, raising=False)
    with progress_mod.progress(3, "x") as bar:
        assert bar.delay == 2.0 and not bar.disable
        assert bar.mininterval == progress_mod.PIPE_INTERVAL_S >= 2.0  # capsys's stderr is no terminal
        progress_mod.write("a line")
        bar.update(3)
    out, err = capsys.readouterr()
    assert (out, err) == ("", "a line\n")  # a short run: the line, no bar
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress_mod.progress(3).disable
    monkeypatch.setenv("TQDM_DISABLE", "0")
    monkeypatch.setenv(progress_mod.DELAY_ENV, "0.5")
    assert progress_mod.progress(3).delay == 0.5 and not progress_mod.progress(3).disable


# ---------------------------------------------------------------------- lyra_agents.benchmark
@pytest.mark.slow
def test_benchmark_bar_names_policy_and_scenario_and_changes_no_output(tmp_path, monkeypatch, capsys, bar_now):
    def run(disable: bool) -> bytes:
        out = tmp_path / f"bench{int(disable)}.csv"
        assert benchmark.main(["--policies", "lyra,random", "--scenarios", "default", "--windows", "1",
                               "--reps", "50", "--out", str(out)]) == 0
        return out.read_bytes()

    (out_a, err_a, csv_a), (out_b, err_b, csv_b) = _twice(monkeypatch, capsys, run)
    assert out_a == out_b and csv_a == csv_b
    assert "\r" not in out_a and "sim" not in out_a
    assert "0/2" in err_a and "2/2" in err_a and "random on default window 0" in err_a
    assert "\r" not in err_b and "/2 [" not in err_b
    # one window, one run: the interval is the point; said once, on stderr, with or without the bar
    for err in (err_a, err_b):
        warnings = [line for line in err.splitlines() if "lyra_agents.benchmark: warning:" in line]
        assert len(warnings) == 1 and "rests on 1 unit" in warnings[0] and "lyra, random" in warnings[0]
    assert "warning" not in out_a


def test_thin_interval_warning_only_below_two_units_per_scenario():
    def agg(policy, cells):
        return {"policy": policy, "metric": "jct_vs_lyra", "cells": cells}

    assert benchmark.thin_interval_warning([agg("lyra", 4), agg("ppo", 12)], scenarios=2) is None  # 2 and 6
    warning = benchmark.thin_interval_warning([agg("lyra", 2), agg("ppo", 6)], scenarios=2)
    assert warning and "lyra" in warning and "ppo" not in warning and "1 unit" in warning


def test_evaluation_count_is_runs_times_windows():
    policies = [benchmark.Policy("a", [("", None)]), benchmark.Policy("b", [("r1", None), ("r2", None)])]
    scenarios = [SimpleNamespace(windows=(0, 1, 2)), SimpleNamespace(windows=(0, 1, 2))]
    assert benchmark.evaluation_count(policies, scenarios) == 3 * 6
    assert benchmark.evaluation_count(policies, scenarios, windows=1) == 3 * 2


# ---------------------------------------------------------------------- lyra_agents.evaluate
class _Windows:
    num_test = 3

    def test(self, w):
        return SimpleNamespace(index=w, seed=100 + w, jobs=lambda _trace: [])


def _fake_simulate(jobs, policy, config, seed, profiles=None):
    name = getattr(policy, "name", policy)
    return SimpleNamespace(policy=name, metrics={"jct_mean_s": 1000.0 + seed + (7.0 if name == "lyra" else 0.0),
                                                 "jobs_total": 5, "jobs_finished": 5})


def test_evaluate_bar_over_windows_times_policies(tmp_path, monkeypatch, capsys, bar_now):
    import lyra_agents.artifacts
    import lyra_agents.policy_scheduler
    import lyra_agents.vec_envs

    env = SimpleNamespace(windows=_Windows(), trace=None, profiles=None,
                          sim_config=SimpleNamespace(knowledge=SimpleNamespace(mode="oracle")))
    env.unwrapped = env
    config = SimpleNamespace(final_windows=2, env_id="LyraGym/Alloc-v1", trace="env-14d", trace_seed=0,
                             sim_config=None, window_s=43200.0, warmup_s=0.0, scenarios=[])  # the header's fields
    model = SimpleNamespace(name="policy", config=config)
    monkeypatch.setattr(lyra_agents.policy_scheduler, "load_policy_scheduler", lambda *a, **k: model)
    monkeypatch.setattr(lyra_agents.artifacts, "find_artifacts",
                        lambda base: SimpleNamespace(model=None, vecnormalize=None, vecnormalize_pickle=None,
                                                     config=tmp_path / "absent.yaml"))
    monkeypatch.setattr(lyra_agents.vec_envs, "make_eval_env", lambda config: env)
    monkeypatch.setattr(evaluate_mod, "simulate", _fake_simulate)

    def run(disable: bool) -> bytes:
        out = tmp_path / f"eval{int(disable)}.json"
        assert evaluate_mod.main([str(tmp_path / "run"), "--windows", "2", "--baselines", "lyra,sjf",
                                  "--json", str(out)]) == 0
        return out.read_bytes()

    (out_a, err_a, json_a), (out_b, err_b, json_b) = _twice(monkeypatch, capsys, run)
    assert out_a == out_b and json_a == json_b and "lyra" in out_a and "\r" not in out_a
    assert "0/6" in err_a and "6/6" in err_a and "sjf window 1" in err_a  # 2 windows x 3 policies
    assert err_b == ""


# ---------------------------------------------------------------------- benchmarks/*.py
@pytest.fixture
def scripts(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import headline
    import lyra_ablations

    def fake_trace(preset, seed, days, work):
        return Path(work) / f"{preset}_seed{seed}.csv"  # never read: the runs are stubs

    monkeypatch.setattr(headline, "make_trace", fake_trace)
    monkeypatch.setattr(lyra_ablations, "make_trace", fake_trace)
    monkeypatch.setattr(headline.time, "perf_counter", lambda: 0.0)  # the [i/N  t s] lines, the same twice
    return headline, lyra_ablations


def test_headline_bar_on_stderr_and_same_stdout_and_files(tmp_path, monkeypatch, capsys, bar_now, scripts):
    headline, _ = scripts

    def fake_run(config_path, trace_path, spec):
        value = 100.0 + 10 * spec.seed + (0 if spec.policy == "lyra" else 40) + (5 if spec.params["backfill"] else 0)
        return {"queue_mean_s": value, "jct_mean_s": 2 * value, "gpu_usage_effective_overall": 0.5,
                "scale_events": spec.seed, "migrations": 1, "jobs_total": 10}

    monkeypatch.setattr(headline, "run_task", fake_run)

    def run(disable: bool) -> dict[str, bytes]:
        out = tmp_path / f"headline{int(disable)}"
        assert headline.main(["--scenarios", "paper", "--seeds", "0,1", "--policies", "baseline,lyra",
                              "--out", str(out)]) == 0
        return {p.name: p.read_bytes() for p in sorted(out.iterdir())}

    (out_a, err_a, files_a), (out_b, err_b, files_b) = _twice(monkeypatch, capsys, run)
    assert files_a == files_b and set(files_a) == {"headline.csv", "headline.md"}
    assert out_a.replace(str(tmp_path / "headline0"), "OUT") == out_b.replace(str(tmp_path / "headline1"), "OUT")
    assert "[8/8" in out_a and "\r" not in out_a
    assert "0/8" in err_a and "8/8" in err_a and "paper seed 1 lyra backfill=on" in err_a
    assert err_b == ""


def test_ablations_bar_on_stderr_and_same_stdout_and_files(tmp_path, monkeypatch, capsys, bar_now, scripts):
    _, ablations = scripts

    def fake_run(config_path, trace_path, variant, seed):
        base = 100.0 + list(ablations.VARIANTS).index(variant) + seed
        return {"queue_mean_s": base, "jct_mean_s": 2 * base, "gpu_usage_effective_overall": 0.5,
                "events_per_job": 0.25, "preemptions": 3.0}

    monkeypatch.setattr(ablations, "run_variant", fake_run)

    def run(disable: bool) -> bytes:
        out = tmp_path / f"abl{int(disable)}"
        assert ablations.main(["--scenarios", "paper", "--seeds", "0,1", "--variants", "lyra,baseline",
                               "--out", str(out)]) == 0
        return (out / "ablations.md").read_bytes()

    (out_a, err_a, md_a), (out_b, err_b, md_b) = _twice(monkeypatch, capsys, run)
    assert out_a == out_b and md_a == md_b and "| lyra |" in out_a and "\r" not in out_a
    assert "0/4" in err_a and "4/4" in err_a and "paper baseline seed 1" in err_a
    assert err_b == ""
