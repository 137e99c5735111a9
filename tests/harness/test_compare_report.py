"""The comparison harness: confidence intervals, report files and plots, TensorBoard export,
parallel runs, policy parameters, and the timeline recorder.

Commands run from the repository root (the default trace path is relative);
outputs go to pytest's tmp_path. One module-scoped comparison (two policies,
two seeds) feeds most checks, to keep the file fast.
"""

from __future__ import annotations

import csv
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from lyra_gym.cli.app import TABLE_KEYS, _config, _load_jobs, main
from lyra_gym.harness.compare import CompareError, RunError, parse_policy_param, parse_policy_params
from lyra_gym.harness.report import CI_SUFFIX, PLOT_FILES, format_ci_table, mean_ci, summarize_runs, t_quantile
from lyra_gym.run.simulate import simulate
from lyra_gym.run.timeline import COLUMNS
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.scheduler import Scheduler

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ("fifo", "lyra")  # lyra borrows servers and scales jobs: every timeline column moves
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """``compare --policies fifo,lyra --seeds 0,1 --tensorboard`` run once for the module."""
    out = tmp_path_factory.mktemp("cmp")
    tb = out / "tb"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        argv = ["compare", "--policies", ",".join(POLICIES), "--seeds", "0,1", "--out", str(out), "--tensorboard", str(tb)]
        assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def default_jobs():
    config = _config(None)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return _load_jobs("traces/default.csv", config), config


def summary(out: Path) -> list[dict]:
    return json.loads((out / "summary.json").read_text())


# ----------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("df, expected", [(1, 12.7062047), (2, 4.3026527), (4, 2.7764451), (10, 2.2281389),
                                          (30, 2.0422725), (1000, 1.9623391)])
def test_t_quantile_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-6)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=1e-6)


def test_mean_ci_hand_computed():
    mean, half = mean_ci([1.0, 2.0, 3.0])  # s = 1, n = 3, t_{0.975, 2} = 4.3027
    assert mean == 2.0
    assert half == pytest.approx(4.3026527 * 1.0 / math.sqrt(3), rel=1e-7)
    mean, half = mean_ci([10.0, 14.0])  # s = 2*sqrt(2), n = 2, t_{0.975, 1} = 12.706
    assert mean == 12.0 and half == pytest.approx(12.7062047 * 2 * math.sqrt(2) / math.sqrt(2), rel=1e-7)
    assert mean_ci([5.0, 5.0, 5.0]) == (5.0, 0.0)


def test_one_seed_has_mean_only(default_jobs):
    jobs, config = default_jobs
    row = summarize_runs([simulate(jobs, "fifo", config, seed=0)])
    assert row["seeds"] == 1 and row["jct_mean_s"] > 0
    assert row["jct_mean_s" + CI_SUFFIX] is None
    table = format_ci_table([row], TABLE_KEYS)
    assert "±" not in table and "mean only" in table


def test_none_metric_stays_none():
    class R:  # the two fields summarize_runs reads
        def __init__(self, jct):
            self.policy, self.metrics = "p", {"jct_mean_s": jct, "jobs_total": 3}

    row = summarize_runs([R(None), R(5.0)])
    assert row["jct_mean_s"] is None and row["jct_mean_s" + CI_SUFFIX] is None
    assert row["jobs_total"] == 3 and row["jobs_total" + CI_SUFFIX] == 0.0


# ----------------------------------------------------------------------------- report files
@pytest.mark.slow
def test_compare_writes_summary_with_ci_and_plots(compared):
    rows = summary(compared)
    assert [r["policy"] for r in rows] == list(POLICIES)
    for row, policy in zip(rows, POLICIES):
        assert row["seeds"] == 2
        runs = [json.loads((compared / policy / f"seed{s}" / "metrics.json").read_text()) for s in (0, 1)]
        for key in ("jct_mean_s", "queue_mean_s", "gpu_usage_overall", "servers_borrowed"):
            values = [m[key] for m in runs]
            assert row[key] == pytest.approx(np.mean(values))
            # n = 2: half-width = t_{0.975,1} * |x1 - x2| / sqrt(2) / sqrt(2)
            expected = 12.7062047 * abs(values[0] - values[1]) / 2
            assert row[key + CI_SUFFIX] == pytest.approx(expected, rel=1e-7, abs=1e-12)
    with open(compared / "summary.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert header[:3] == ["policy", "seeds", "jobs_total"]
    assert {"jct_mean_s_ci95", "queue_p95_s_ci95", "gpu_usage_training_ci95"} <= set(header)
    for name in PLOT_FILES:
        data = (compared / name).read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000, name
    # every run folder has its timeline and policy record; compare.json says what ran
    assert (compared / "lyra" / "seed1" / "timeline.csv").exists()
    assert json.loads((compared / "lyra" / "seed1" / "policy.json").read_text())["seed"] == 1
    manifest = json.loads((compared / "compare.json").read_text())
    assert manifest["policies"] == list(POLICIES) and manifest["seeds"] == [0, 1]


def test_terminal_table_shows_mean_and_half_width(tmp_path, capsys):
    assert main(["compare", "--policies", "lyra", "--seeds", "0,1", "--no-plots", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "95% CI" in printed
    row = summary(tmp_path)[0]
    jct_line = next(line for line in printed.splitlines() if line.startswith("jct_mean_s "))
    assert f"{row['jct_mean_s']:.0f} ± {row['jct_mean_s_ci95']:.0f}" in jct_line
    for key in ("migrations", "jobs_unfinished", "gpu_usage_effective", "overhead_gpu_share", "reclaim_disruptions"):
        assert any(line.startswith(key + " ") for line in printed.splitlines()), key
    assert not any(tmp_path.glob("*.png"))


# ----------------------------------------------------------------------------- parallel runs
@pytest.mark.slow  # (--jobs 2 equals in-process: tests/structure/test_examples_run.py, through the real CLI)
def test_parallel_jobs_give_identical_numbers(tmp_path, capsys):
    args = ["compare", "--policies", "fifo,sjf,lyra", "--seeds", "0,1", "--no-plots"]
    assert main([*args, "--jobs", "1", "--out", str(tmp_path / "j1")]) == 0
    assert main([*args, "--jobs", "2", "--out", str(tmp_path / "j2")]) == 0
    capsys.readouterr()
    serial, parallel = summary(tmp_path / "j1"), summary(tmp_path / "j2")
    for row in (*serial, *parallel):
        row.pop("sim_wall_s"), row.pop("sim_wall_s" + CI_SUFFIX)
    assert serial == parallel  # exact: same floats, not approximately
    assert (tmp_path / "j2" / "lyra" / "seed1" / "jobs.csv").read_bytes() == \
        (tmp_path / "j1" / "lyra" / "seed1" / "jobs.csv").read_bytes()


# ----------------------------------------------------------------------------- TensorBoard
@pytest.mark.slow
def test_tensorboard_runs_hold_the_expected_tags(compared):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows = {r["policy"]: r for r in summary(compared)}
    for policy in POLICIES:
        acc = EventAccumulator(str(compared / "tb" / policy), size_guidance={"scalars": 0})
        acc.Reload()
        tags = set(acc.Tags()["scalars"])
        expected = {"summary/jct_mean_s", "summary_ci95/jct_mean_s", "seeds/jct_mean_s",
                    *(f"timeline_seed{s}/{c}" for s in (0, 1) for c in (*COLUMNS[1:], "gpus_allocated")),
                    # every numeric metric is logged, the honest-usage keys included
                    *(f"{prefix}/{k}" for prefix in ("summary", "seeds") for k in (
                        "gpu_usage_effective", "gpu_usage_effective_overall", "overhead_gpu_share",
                        "reclaim_disruptions"))}
        assert expected <= tags, sorted(expected - tags)
        (mean,) = acc.Scalars("summary/jct_mean_s")
        assert mean.step == 0 and mean.value == pytest.approx(rows[policy]["jct_mean_s"], rel=1e-6)  # float32
        assert [e.step for e in acc.Scalars("seeds/jct_mean_s")] == [0, 1]
        queued = acc.Scalars("timeline_seed0/queued")
        steps = [e.step for e in queued]
        assert len(steps) > 100 and steps == sorted(steps)  # over simulated seconds
        timeline = np.genfromtxt(compared / policy / "seed0" / "timeline.csv", delimiter=",", names=True)
        assert steps[0] == int(timeline["time_s"][0])


# ----------------------------------------------------------------------------- policy parameters
def test_parse_policy_param():
    assert parse_policy_param("lyra.reclaim_rule=random") == ("lyra", "reclaim_rule", "random")
    assert parse_policy_param("fifo.backfill=true") == ("fifo", "backfill", True)
    assert parse_policy_param("lyra.round_s=30") == ("lyra", "round_s", 30)
    assert parse_policy_param("lyra.round_s=1e2") == ("lyra", "round_s", 100.0)  # plain YAML 1.1 gives "1e2"
    assert parse_policy_param("tiresias+loan.queue_limits=null") == ("tiresias+loan", "queue_limits", None)
    # a loader name with dots, a colon and slashes: the key follows the last dot
    assert parse_policy_param("model:runs/x/model.zip.deterministic=false") == \
        ("model:runs/x/model.zip", "deterministic", False)
    for bad in ("lyra", "lyra=3", "lyra.=3", ".x=1", "lyra.a-b=1", "lyra.x=[1, 2]"):
        with pytest.raises(CompareError):
            parse_policy_param(bad)
    with pytest.raises(CompareError, match="sjf"):
        parse_policy_params(["sjf.backfill=true"], ["fifo", "lyra"])
    assert parse_policy_params(["fifo.backfill=true", "fifo.backfill=false"], ["fifo"]) == {"fifo": {"backfill": False}}


def test_policy_param_reaches_the_scheduler(tmp_path, capsys):
    def jct(out):
        return json.loads((out / "metrics.json").read_text())["jct_mean_s"]

    assert main(["simulate", "--policy", "fifo", "--out", str(tmp_path / "plain")]) == 0
    assert main(["simulate", "--policy", "fifo", "--policy-param", "fifo.backfill=true",
                 "--out", str(tmp_path / "bf")]) == 0
    assert jct(tmp_path / "bf") < jct(tmp_path / "plain")  # backfilling shortens the queue on this trace
    assert json.loads((tmp_path / "bf" / "policy.json").read_text())["params"] == {"backfill": True}
    out = tmp_path / "cmp"
    assert main(["compare", "--policies", "fifo,sjf", "--policy-param", "fifo.backfill=true", "--no-plots",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert summary(out)[0]["jct_mean_s"] == pytest.approx(jct(tmp_path / "bf"))
    assert json.loads((out / "compare.json").read_text())["policy_params"] == {"fifo": {"backfill": True}}


@pytest.mark.parametrize("argv, needle", [
    (["simulate", "--policy", "fifo", "--policy-param", "fifo.bogus_knob=1"], "bogus_knob"),
    (["simulate", "--policy", "fifo", "--policy-param", "lyra.loan=false"], "lyra"),
    (["compare", "--policies", "fifo,lyra", "--policy-param", "lyra.reclaim_rule=cheapest"], "cheapest"),
    (["compare", "--policies", "fifo", "--policy-param", "fifo-backfill"], "NAME.KEY=VALUE"),
    (["compare", "--policies", "fifo,fifo"], "twice"),
    (["compare", "--policies", "fifo", "--seeds", "0,x"], "--seeds"),
])
def test_bad_policy_params_exit_2_before_any_run(tmp_path, capsys, argv, needle):
    out = tmp_path / "o"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lyra-gym: error:") and needle in err
    assert not out.exists()


def test_unknown_loader_prefix_fails_before_any_run(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["compare", "--policies", "fifo,nosuchloader:x.zip", "--out", str(out)]) == 2
    assert "nosuchloader" in capsys.readouterr().err
    assert not out.exists()


def test_a_failing_run_names_policy_and_seed(tmp_path, capsys, monkeypatch):
    class Broken(Scheduler):
        name = "broken"

        def decide(self, view):
            raise RuntimeError("scheduler bug")

    monkeypatch.setitem(registry._registered, "broken-test", Broken)  # in-process only: --jobs 1
    assert main(["compare", "--policies", "fifo,broken-test", "--seeds", "3", "--no-plots",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lyra-gym: error: run 'broken-test' seed 3 failed: RuntimeError: scheduler bug")
    assert "Traceback" in err and "decide" in err
    # what a worker process sends back survives pickling, message and traceback
    sent = RunError("run 'x' seed 1 failed: ValueError: no", "Traceback ...")
    back = pickle.loads(pickle.dumps(sent))
    assert str(back) == str(sent) and back.remote_traceback == "Traceback ..."


# ----------------------------------------------------------------------------- timeline
def test_timeline_is_consistent_with_the_run(default_jobs):
    jobs, config = default_jobs
    result = simulate(jobs, "lyra", config, seed=1, record_timeline=True)
    tl, m = result.timeline, result.metrics
    assert len(tl) == m["decisions"] > 0
    t = tl["time_s"]
    assert np.all(np.diff(t) >= 0) and t[-1] <= tl.end_s
    # jobs in system = arrived - finished, with arrivals counted from the trace itself
    submits = np.sort([j.submit_time for j in jobs])
    arrived = np.searchsorted(submits, t, side="right")
    assert np.array_equal(tl["queued"] + tl["running"], arrived - tl["finished"])
    assert np.all(np.diff(tl["finished"]) >= 0) and tl.end["finished"] == m["jobs_finished"]
    # capacity: training GPUs, loaned GPUs within loaned servers, loans within idle servers
    gpus_per_inf = config.cluster.inference.gpus_per_server
    assert tl["gpus_training"].max() <= config.cluster.training_gpus
    assert np.all(tl["gpus_loaned"] <= tl["servers_loaned"] * gpus_per_inf)
    assert np.all(tl["servers_loaned"] + tl["inference_demand"] <= config.cluster.inference.count)  # grace 0
    assert tl["servers_loaned"].max() > 0 and tl["gpus_loaned"].max() > 0  # lyra does borrow here
    # the step function integrates to the engine's own GPU-seconds
    span = m["makespan_s"]
    assert tl.integral("gpus_training") == pytest.approx(m["gpu_usage_training"] * config.cluster.training_gpus * span,
                                                         rel=1e-9)
    # recording changes nothing; plain simulate records nothing
    plain = simulate(jobs, "lyra", config, seed=1)
    assert plain.timeline is None
    plain.metrics.pop("sim_wall_s"), m.pop("sim_wall_s")
    assert plain.metrics == m


def test_simulate_timeline_flag_writes_csv(tmp_path, capsys):
    out = tmp_path / "sim"
    assert main(["simulate", "--policy", "sjf", "--timeline", "--out", str(out)]) == 0
    capsys.readouterr()
    with open(out / "timeline.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(rows[0]) == list(COLUMNS) and len(rows) == metrics["decisions"]
