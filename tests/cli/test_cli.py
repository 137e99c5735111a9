"""End to end through the ``lyra-gym`` command line (``lyra_gym.cli.main``).

Commands run from the repository root, because the default trace path
(``traces/default.csv``) is relative; outputs go to pytest's tmp_path.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from lyra_gym.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TRACE = ROOT / "traces" / "default.csv"

METRIC_KEYS = (
    "jobs_total", "jobs_finished", "jct_mean_s", "jct_p50_s", "jct_p95_s", "jct_p99_s", "queue_mean_s",
    "queue_p95_s", "gpu_usage_training", "gpu_usage_overall", "preemptions", "scale_events",
    "servers_borrowed", "inference_violations", "makespan_s", "sim_wall_s",
)
TRACE_HEADER = "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus\n"


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def trace_ids(path: Path) -> list[str]:
    with open(path, newline="") as fh:
        return [row["job_id"] for row in csv.DictReader(fh)]


def run_simulate(out: Path, *extra: str) -> dict:
    assert main(["simulate", "--policy", "fifo", "--out", str(out), *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_policies_lists_fifo_and_sjf(capsys):
    assert main(["policies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines if line.split()[1:2] == ["registry"]]
    assert "fifo" in names and "sjf" in names
    assert names == sorted(names)


def test_simulate_writes_metrics_and_one_row_per_job(tmp_path, capsys):
    out = tmp_path / "sim"
    assert main(["simulate", "--policy", "fifo", "--trace", "traces/default.csv", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fifo" in printed and "metrics.json" in printed

    metrics = json.loads((out / "metrics.json").read_text())
    missing = [k for k in METRIC_KEYS if k not in metrics]
    assert not missing, missing
    ids = trace_ids(DEFAULT_TRACE)
    assert metrics["jobs_total"] == len(ids)
    assert metrics["policy"] == "fifo" and metrics["seed"] == 0
    assert 0 < metrics["jobs_finished"] <= metrics["jobs_total"]
    assert metrics["jct_p50_s"] <= metrics["jct_p95_s"] <= metrics["jct_p99_s"]

    with open(out / "jobs.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(ids)
    assert sorted(r["job_id"] for r in rows) == sorted(ids)
    assert sum(int(r["finished"]) for r in rows) == metrics["jobs_finished"]
    assert (out / "config.json").exists()  # the resolved config sits next to the results


def test_simulate_default_trace_same_seed_same_metrics(tmp_path):
    a = run_simulate(tmp_path / "a", "--seed", "3")
    b = run_simulate(tmp_path / "b", "--seed", "3")
    a.pop("sim_wall_s"), b.pop("sim_wall_s")
    assert a == b


def test_compare_writes_one_summary_row_per_policy(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "--policies", "fifo,sjf", "--seeds", "0,1", "--out", str(out)]) == 0
    capsys.readouterr()
    with open(out / "summary.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["policy"] for r in rows] == ["fifo", "sjf"]
    summary = json.loads((out / "summary.json").read_text())
    assert [r["policy"] for r in summary] == ["fifo", "sjf"]
    for row in summary:
        assert row["seeds"] == 2
        for key in ("jobs_total", "jobs_finished", "jct_mean_s", "queue_mean_s", "makespan_s"):
            assert key in row
    for policy in ("fifo", "sjf"):
        for seed in (0, 1):
            assert (out / policy / f"seed{seed}" / "metrics.json").exists()
    # the summary is the mean over seeds of the per-run metrics
    fifo_runs = [json.loads((out / "fifo" / f"seed{s}" / "metrics.json").read_text()) for s in (0, 1)]
    assert summary[0]["jct_mean_s"] == pytest.approx(sum(m["jct_mean_s"] for m in fifo_runs) / 2)


def test_unknown_policy_exits_2_naming_it(tmp_path, capsys):
    assert main(["simulate", "--policy", "no-such-policy", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "no-such-policy" in err
    assert main(["compare", "--policies", "fifo,bogus-policy", "--out", str(tmp_path / "y")]) == 2
    assert "bogus-policy" in capsys.readouterr().err
    assert not (tmp_path / "y" / "fifo").exists()  # it fails before any run


def test_malformed_trace_exits_2_naming_the_line(tmp_path, capsys):
    trace = tmp_path / "bad.csv"
    trace.write_text(TRACE_HEADER + "a,0,1,100,resnet50,0,,\nb,5,two,100,resnet50,0,,\nc,9,1,100,ncf,0,,\n")
    assert main(["simulate", "--policy", "fifo", "--trace", str(trace), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and ":3:" in err and "num_gpus" in err
    assert not (tmp_path / "o" / "metrics.json").exists()


def test_trace_with_unknown_model_exits_2_naming_it(tmp_path, capsys):
    trace = tmp_path / "model.csv"
    trace.write_text(TRACE_HEADER + "a,0,1,100,resnet50,0,,\nodd-job,5,1,100,gpt17,0,,\n")
    assert main(["simulate", "--policy", "fifo", "--trace", str(trace), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "gpt17" in err and ("odd-job" in err or "model.csv:3" in err)


def test_missing_trace_file_exits_2(tmp_path, capsys):
    missing = tmp_path / "nope.csv"
    assert main(["simulate", "--policy", "fifo", "--trace", str(missing), "--out", str(tmp_path / "o")]) == 2
    assert "nope.csv" in capsys.readouterr().err


def test_config_file_changes_the_result(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text("cluster: {training: [{count: 2, gpu_type: v100, gpus_per_server: 8}]}\n")
    default = run_simulate(tmp_path / "default")
    small = run_simulate(tmp_path / "small", "--config", str(config))
    resolved = json.loads((tmp_path / "small" / "config.json").read_text())
    assert resolved["cluster"]["training"] == [{"count": 2, "gpu_type": "v100", "gpus_per_server": 8}]
    assert small["jobs_total"] == default["jobs_total"]
    # 16 GPUs instead of 128: jobs wait far longer
    assert small["queue_mean_s"] > default["queue_mean_s"]
    assert small["jct_mean_s"] != default["jct_mean_s"]


@pytest.mark.parametrize(
    "text, key",
    [
        ("cluster: {training: [{count: 2, gpu_type: v100}], bogus_pool: 3}\n", "bogus_pool"),
        ("reclaim_grace: 5\n", "reclaim_grace"),
        ("cluster: {training: [{count: 2, gpu_type: v100, gpus: 8}]}\n", "gpus"),
    ],
)
def test_config_unknown_key_exits_2_naming_it(tmp_path, capsys, text, key):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    assert main(["simulate", "--policy", "fifo", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert key in err and "bad.yaml" in err and "unknown key" in err


def test_trace_generate_reproduces_the_shipped_trace(tmp_path):
    out = tmp_path / "x.csv"
    assert main(["trace", "generate", "--preset", "small-1d", "--seed", "0", "--out", str(out)]) == 0
    assert out.read_bytes() == DEFAULT_TRACE.read_bytes()


def test_installed_script_exit_code_and_message(tmp_path):
    exe = shutil.which("lyra-gym")
    if exe is None:
        pytest.skip("the lyra-gym console script is not on PATH (package not installed)")
    proc = subprocess.run(
        [exe, "simulate", "--policy", "no-such-policy", "--out", str(tmp_path / "o")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "no-such-policy" in proc.stderr
    assert proc.stderr.startswith("lyra-gym: error:")


def test_trace_stats_reports_counts_shares_and_load(tmp_path, capsys, monkeypatch):
    from lyra_gym.harness.tracestats import trace_stats
    from lyra_gym.model.jobspec import JobSpec
    from lyra_gym.workloads.trace import write_trace

    # 4 jobs over 2 h: 2 GPUs x 3600 s + 1 x 1800 + 4 x 900 + 1 x 3600 = 16,200 GPU-s
    jobs = [JobSpec("a", 0, 2, 3600, "ncf", False, 2, 2), JobSpec("b", 1800, 1, 1800, "bert", True, 1, 2),
            JobSpec("c", 3600, 4, 900, "ncf", False, 4, 4), JobSpec("d", 7200, 1, 3600, "ncf", True, 1, 2)]
    stats = trace_stats(jobs, capacity_gpus=8)
    assert stats["jobs"] == 4 and stats["span_s"] == 7200
    assert stats["gpu_size_share"] == {1: 0.5, 2: 0.25, 4: 0.25}
    assert stats["elastic_share"] == 0.5
    assert stats["offered_load"] == pytest.approx(16200 / (8 * 7200))
    assert stats["models"] == {"bert": 1, "ncf": 3}
    path = tmp_path / "t.csv"
    write_trace(jobs, path)
    assert main(["trace", "stats", str(path)]) == 0
    assert "elastic share        50.0%" in capsys.readouterr().out


# --------------------------------------------------------------------------- start-up

def _fresh_python(code: str) -> str:
    """stdout of ``code`` in a new interpreter run from the repository root (this checkout's package)."""
    import sys

    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


def test_the_simulate_path_loads_no_env_training_or_plotting_code():
    """``lyra-gym simulate`` imports the command line, then runs: neither may pull in the Gymnasium
    environments, torch, stable-baselines3, matplotlib or pandas (start-up time, issue 24)."""
    out = _fresh_python(
        "import sys; import lyra_gym.cli\n"
        "heavy = ('torch', 'stable_baselines3', 'sb3_contrib', 'matplotlib', 'pandas', 'tensorboard', 'ray')\n"
        "print(sorted(m for m in sys.modules"
        " if m.split('.')[0] in heavy or m.startswith(('lyra_gym.envs', 'agents'))))")
    assert out.strip() == "[]"


def test_import_lyra_gym_registers_every_env_without_loading_it():
    """``import lyra_gym`` is enough for ``gymnasium.make("LyraGym/...")``; the env's module loads
    then, and the table registered up front is the one ``lyra_gym.envs`` registers."""
    out = _fresh_python(
        "import sys, gymnasium, lyra_gym\n"
        "print('lyra_gym.envs' in sys.modules)\n"
        "print(sorted(i for i in gymnasium.registry if i.startswith('LyraGym/')))\n"
        "env = gymnasium.make('LyraGym/Loaning-v1')\n"
        "print(type(env.unwrapped).__name__, 'lyra_gym.envs.cluster_env' in sys.modules)\n"
        "import lyra_gym.envs as envs\n"
        "print(envs._ENTRY_POINTS == lyra_gym.ENV_ENTRY_POINTS, lyra_gym.ENV_IDS == envs.ENV_IDS)\n"
        "print({i: gymnasium.registry[i].entry_point for i in envs.ALL_ENV_IDS} == envs._ENTRY_POINTS)")
    assert out.split("\n")[:5] == [
        "False",
        "['LyraGym/Alloc-v0', 'LyraGym/Alloc-v1', 'LyraGym/Cluster-v0', 'LyraGym/Cluster-v1', 'LyraGym/Cluster-v2', "
        "'LyraGym/Elastic-v0', 'LyraGym/Elastic-v1', 'LyraGym/Elastic-v2', 'LyraGym/Loaning-v0', 'LyraGym/Loaning-v1', "
        "'LyraGym/Loaning-v2']",  # -v0: deprecated
        "LoaningEnv True",
        "True True",
        "True",
    ]
