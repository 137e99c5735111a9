"""Every path inside a file resolves beside that file, so the README's commands work from any folder
(issue 27 item 2; the rule: :mod:`lyra_gym.model.paths`), and every output records what produced it
(issue 27 item 4: lyra_gym version and commit, the env id where there is one).

The fast tests run in-process from a temporary working directory; the slow ones run the README's
commands as subprocesses from one (before the rule, each failed with ``traces/contended.yaml:
cannot read the config file``)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lyra_gym.model.config import load_config
from lyra_gym.model.paths import SHIPPED_ROOT, portable, resolve_beside
from lyra_gym.provenance import provenance

ROOT = Path(__file__).resolve().parents[2]
PRETRAINED = ROOT / "agents" / "pretrained" / "alloc-contended"
CONTENDED = ROOT / "traces" / "contended.yaml"


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory with no ``traces/`` in it."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def made_by() -> dict:
    return provenance()


# ---------------------------------------------------------------------- the rule
def test_a_relative_path_in_a_file_is_beside_the_file_then_the_cwd_then_the_shipped_data(tmp_path, elsewhere):
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "beside.csv").write_text("x")
    (elsewhere / "beside.csv").write_text("the working directory's, not taken")
    (elsewhere / "legacy.csv").write_text("x")
    assert resolve_beside("beside.csv", folder) == str(folder / "beside.csv")
    assert resolve_beside("legacy.csv", folder) == str(elsewhere / "legacy.csv")  # files written before the rule
    assert resolve_beside("traces/contended.yaml", folder) == str(CONTENDED)  # a shipped name
    assert resolve_beside("../configs/./beside.csv", folder) == str(folder / "beside.csv")
    assert resolve_beside("/abs/x.csv", folder) == "/abs/x.csv"
    assert resolve_beside("missing.csv", folder) == str(folder / "missing.csv")  # what an error will name
    assert SHIPPED_ROOT == ROOT


def test_a_written_path_is_absolute_or_a_shipped_name(elsewhere):
    assert portable("mine.yaml") == str(elsewhere / "mine.yaml")
    assert portable(str(CONTENDED)) == "traces/contended.yaml"
    assert portable(str(ROOT / "traces" / "suite-v1" / "hetero.yaml")) == "traces/suite-v1/hetero.yaml"
    assert portable(str(ROOT / "docs" / "example-config.yaml")) == str(ROOT / "docs" / "example-config.yaml")


# ---------------------------------------------------------------------- cluster configs
def test_a_shipped_cluster_config_reads_its_profile_from_any_folder(elsewhere):
    config = load_config(ROOT / "traces" / "pollux-testbed-t4.yaml")
    assert config.profiles == str(ROOT / "traces" / "pollux-t4-profile.json")


def test_every_path_of_a_cluster_config_is_beside_it(tmp_path, elsewhere):
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "demand.csv").write_text("time_s,servers_needed\n0,1\n")
    (folder / "config.yaml").write_text("demand_csv: demand.csv\nprofiles: ../p.json\nefficiency: /abs/e.json\n")
    config = load_config(folder / "config.yaml")
    assert (config.demand_csv, config.profiles, config.efficiency) == (
        str(folder / "demand.csv"), str(tmp_path / "p.json"), "/abs/e.json")


# ---------------------------------------------------------------------- training configs and agents
def test_a_training_config_reads_its_paths_beside_it_and_set_reads_them_from_the_cwd(tmp_path, elsewhere):
    from lyra_agents.config import resolve_config

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "cluster.yaml").write_text("cluster: {training: [{count: 2, gpu_type: v100}]}\n")
    (folder / "train.yaml").write_text("sim_config: cluster.yaml\ntrace: env-14d\nprofiles: null\n")
    cfg = resolve_config(config_path=folder / "train.yaml")
    assert (cfg.sim_config, cfg.trace, cfg.profiles) == (str(folder / "cluster.yaml"), "env-14d", None)
    given = resolve_config(config_path=folder / "train.yaml", overrides=["sim_config=here.yaml", "trace=t.csv"])
    assert (given.sim_config, given.trace) == ("here.yaml", "t.csv")  # the command line's: the cwd's
    written = yaml.safe_load(given.to_yaml())
    assert (written["sim_config"], written["trace"]) == (str(elsewhere / "here.yaml"), str(elsewhere / "t.csv"))


def test_the_shipped_alloc_config_and_agent_find_the_contended_cluster_from_any_folder(elsewhere):
    from lyra_agents.config import resolve_config
    from lyra_agents.model_files import load_run_config

    assert resolve_config("LyraGym/Alloc-v1", quick=True).sim_config == str(CONTENDED)
    agent = load_run_config(PRETRAINED / "config.yaml")
    assert agent.sim_config == str(CONTENDED)
    assert yaml.safe_load(agent.to_yaml())["sim_config"] == "traces/contended.yaml"  # written as shipped


def test_an_export_rewrites_the_run_paths_so_they_resolve_from_its_folder(tmp_path, elsewhere):
    from lyra_agents.export import export
    from lyra_agents.model_files import load_run_config

    run = tmp_path / "run"
    run.mkdir()
    for name in ("model.zip", "vecnormalize.npz"):
        (run / name).write_bytes((PRETRAINED / name).read_bytes())
    (run / "mine.yaml").write_text("cluster: {training: [{count: 11, gpu_type: v100}]}\n")
    body = [line for line in (PRETRAINED / "config.yaml").read_text().splitlines(keepends=True)
            if not line.startswith("#")]  # the shipped run's own provenance lines left out
    text = "".join(body).replace("sim_config: traces/contended.yaml", "sim_config: mine.yaml")
    (run / "config.yaml").write_text("# lyra_gym_version: 0.0.1, lyra_gym_commit: abc\n" + text)
    export(run, tmp_path / "out")
    written = (tmp_path / "out" / "config.yaml").read_text()
    assert written.splitlines()[:2] == [
        "# lyra_gym_version: 0.0.1, lyra_gym_commit: abc",
        f"# exported by lyra_gym_version: {made_by()['lyra_gym_version']}, "
        f"lyra_gym_commit: {made_by()['lyra_gym_commit']}"]
    assert load_run_config(tmp_path / "out" / "config.yaml").sim_config == str(run / "mine.yaml")


# ---------------------------------------------------------------------- suites and sweeps
def test_a_suite_file_reads_every_path_beside_it(tmp_path, elsewhere):
    from lyra_agents.suite import load_suite

    (tmp_path / "demand.csv").write_text("time_s,servers_needed\n0,1\n")
    (tmp_path / "suite.yaml").write_text(
        "format: lyra-gym-suite/1\nversion: t\nscenarios:\n"
        "  - {name: a, config_file: traces/contended.yaml, config: {demand_csv: demand.csv}}\n")
    scenario = load_suite(tmp_path / "suite.yaml").get("a")
    assert scenario.config_file == str(CONTENDED)  # not beside the file: the shipped name
    assert scenario.sim_config().demand_csv == str(tmp_path / "demand.csv")


def test_a_sweep_base_config_is_beside_the_sweep_file_before_the_cwd(tmp_path, elsewhere):
    from lyra_gym.harness.sweep_grid import load_grid

    (tmp_path / "base.yaml").write_text("reclaim_grace_s: 7\n")
    (elsewhere / "base.yaml").write_text("reclaim_grace_s: 9\n")
    (tmp_path / "sweep.yaml").write_text("policies: [fifo]\ntraces: [preset:small-1d]\nbase_config: base.yaml\n")
    assert load_grid(tmp_path / "sweep.yaml").base_config.reclaim_grace_s == 7.0


# ---------------------------------------------------------------------- provenance (issue 27 item 4)
def test_metrics_json_records_version_and_commit(tmp_path):
    from lyra_gym.run.simulate import write_result
    from tests.toy import config, job, run

    result = run([job("a", 0.0, 2, 100.0)], "fifo", config())
    write_result(result, tmp_path / "run")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert {k: metrics[k] for k in made_by()} == made_by()
    assert metrics["lyra_gym_version"] and metrics["jobs_finished"] == 1


def test_evaluation_rows_as_written_name_the_env_and_what_produced_them():
    from lyra_agents.evaluate import recorded

    rows = recorded({"policy": [{"window": 0, "jct_mean_s": 5.0}], "lyra": [{"window": 0}]}, "LyraGym/Alloc-v1")
    assert list(rows) == ["policy", "lyra"]
    assert rows["policy"] == [{"window": 0, "jct_mean_s": 5.0, "env_id": "LyraGym/Alloc-v1", **made_by()}]


# ---------------------------------------------------------------------- the README's commands, from elsewhere
def run_here(cwd: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "TQDM_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tools" / "import_names"),
                                          os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def test_lyra_gym_simulate_with_a_shipped_config_from_elsewhere(tmp_path):
    """The config's profile (``pollux-t4-profile.json``, beside it) is read: the trace must use its models."""
    lines = (ROOT / "traces" / "default.csv").read_text().splitlines()
    (tmp_path / "trace.csv").write_text("\n".join([lines[0], *[x for x in lines[1:] if ",resnet" in x][:20]]) + "\n")
    proc = run_here(tmp_path, "-m", "lyra_gym.cli", "simulate", "--policy", "fifo", "--trace", "trace.csv",
                    "--config", str(ROOT / "traces" / "pollux-testbed-t4.yaml"), "--out", "out", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert {k: metrics[k] for k in made_by()} == made_by()
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["profiles"] == str(ROOT / "traces" / "pollux-t4-profile.json")


@pytest.mark.slow
def test_train_quick_on_alloc_from_elsewhere(tmp_path):
    proc = run_here(tmp_path, str(ROOT / "train.py"), "--quick", "--env", "LyraGym/Alloc-v1", "--set",
               "total_timesteps=64", "n_envs=2", "n_steps=32", "batch_size=64", "n_epochs=1", "eval_freq=0",
               "eval_windows=1", "final_windows=1", "checkpoint_freq=0", "progress_bar=false", "window_s=7200")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["sim_config"] == "traces/contended.yaml" and config["env_id"] == "LyraGym/Alloc-v1"
    compare = json.loads((run_dir / "compare.json").read_text())
    assert set(compare) == {"policy", "lyra"}
    assert all(r["env_id"] == "LyraGym/Alloc-v1" and r["lyra_gym_commit"] == made_by()["lyra_gym_commit"]
               for rows in compare.values() for r in rows)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir))
    events.Reload()
    (text,) = [t for t in events.Tags()["tensors"] if t.startswith("config/provenance")]
    summary = events.Tensors(text)[0].tensor_proto.string_val[0].decode()
    for value in (*made_by().values(), "LyraGym/Alloc-v1"):
        assert f"|{value}|" in summary


@pytest.mark.slow
def test_evaluate_the_shipped_agent_from_elsewhere(tmp_path):
    proc = run_here(tmp_path, "-m", "lyra_agents.evaluate", str(PRETRAINED), "--windows", "1", "--baselines", "",
               "--json", "rows.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = json.loads((tmp_path / "rows.json").read_text())["policy"]
    assert row["env_id"] == "LyraGym/Alloc-v1" and row["lyra_gym_version"] == made_by()["lyra_gym_version"]


@pytest.mark.slow
def test_benchmark_suite_v1_from_elsewhere(tmp_path):
    proc = run_here(tmp_path, "-m", "lyra_agents.benchmark", "--suite", "v1", "--scenarios", "overload", "--windows",
               "1", "--policies", "fifo", "--reps", "50", "--quiet", "--out", "bench.csv")
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(tmp_path / "bench.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(r["suite"] == "v1" and r["lyra_gym_commit"] == str(made_by()["lyra_gym_commit"])
                        for r in rows)
