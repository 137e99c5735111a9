"""Issue 40 items 1, 11 (benchmark, train.py) and 12: the agents' commands never overwrite a file
they read indirectly (a suite's cluster config, the ``sim_config`` a model's config names, ...);
Ctrl-C and SIGTERM are one line and exit status 130; a full disk never leaves half a file under
its final name, and the benchmark keeps the windows it finished, resuming from them.

Every test fails on the code before the fix: a refusal that was an overwrite with exit 0, an
interruption or ``OSError`` that came out as a traceback (an exception out of ``main``), or a
benchmark that kept nothing."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lyra_agents import benchmark, evaluate
from lyra_agents.callbacks import ClusterMetricsCallback
from lyra_agents.config import TrainConfig
from lyra_agents.factory import build_training_envs, make_model, save_normalizer_stats

# the smallest run that trains; train.py as a module
from tests.agents.test_agent_commands_check_first import TINY, train

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "lyra_gym" / "data" / "builtin_profiles.json"




def last_line(capsys, prog: str) -> str:
    """The line that ends the command's stderr (checked: no traceback; before it only warnings)."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and "Traceback" not in "\n".join(lines), lines
    assert all(line.startswith(f"{prog}: warning: ") for line in lines[:-1]), lines
    assert lines[-1].startswith(f"{prog}: "), lines
    return lines[-1]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".tmp-" in p.name)


# ---------------------------------------------------------------------- a tiny suite
def write_suite(folder: Path) -> Path:
    """A suite file naming a cluster config (which names a profile) and a demand file beside it:
    one scenario, one trace seed, two 2 h windows of small-1d."""
    shutil.copy(PROFILES, folder / "p.json")
    (folder / "cluster.yaml").write_text("profiles: p.json\n")
    (folder / "demand.csv").write_text("time_s,servers_needed\n0,1\n")
    path = folder / "su.yaml"
    path.write_text("format: lyra-gym-suite/1\nversion: t1\n"
                    "defaults: {trace: small-1d, trace_seeds: [0], windows: [0, 1], window_s: 7200}\n"
                    "scenarios:\n"
                    "  - {name: tiny, config_file: cluster.yaml, config: {demand_csv: demand.csv}}\n")
    return path


@pytest.fixture
def suite(tmp_path) -> Path:
    return write_suite(tmp_path)


def bench_args(suite: Path, out: Path, *extra: str) -> list[str]:
    return ["--suite", str(suite), "--policies", "lyra,fifo", "--reps", "10", "--quiet", "--out", str(out), *extra]


# ---------------------------------------------------------------------- 1. files read indirectly
@pytest.mark.parametrize("target", ["su.yaml", "cluster.yaml", "p.json", "demand.csv"])
def test_benchmark_out_is_never_a_file_the_suite_names(suite, capsys, target):
    """``--suite su.yaml --out su.yaml --overwrite`` turned the suite into the results CSV (exit 0);
    so did the cluster config it names, the profile that config names and the demand file."""
    out = suite.parent / target
    before = out.read_bytes()
    assert benchmark.main(bench_args(suite, out, "--overwrite")) == 2
    line = last_line(capsys, "lyra_agents.benchmark")
    assert "which this command reads" in line and target in line
    assert out.read_bytes() == before


@pytest.fixture
def tiny_run(tmp_path) -> Path:
    """An untrained run folder whose config names a cluster config (``sim_config``) that names a
    profile: files the model's config reads, two levels down."""
    folder = tmp_path
    shutil.copy(PROFILES, folder / "p.json")
    (folder / "cluster.yaml").write_text("profiles: p.json\n")
    run = folder / "run"
    run.mkdir()
    cfg = TrainConfig(**TINY, sim_config=str(folder / "cluster.yaml"))
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    (run / "config.yaml").write_text(cfg.to_yaml())
    model.save(run / "model.zip")
    save_normalizer_stats(venv, run / "vecnormalize.npz")
    venv.close()
    return run


@pytest.mark.parametrize("target", ["cluster.yaml", "p.json"])
def test_evaluate_json_is_never_a_file_the_models_config_names(tiny_run, capsys, target):
    out = tiny_run.parent / target
    before = out.read_bytes()
    argv = [str(tiny_run), "--windows", "1", "--baselines", "", "--json", str(out), "--overwrite"]
    assert evaluate.main(argv) == 2
    line = last_line(capsys, "lyra_agents.evaluate")
    assert "which this command reads" in line and target in line
    assert out.read_bytes() == before


@pytest.mark.parametrize("target", ["cluster.yaml", "p.json"])
def test_benchmark_out_is_never_a_file_an_agents_config_names(tiny_run, capsys, target):
    out = tiny_run.parent / target
    before = out.read_bytes()
    argv = ["--policies", "lyra", "--scenarios", "default", "--windows", "1", "--reps", "10", "--quiet",
            "--agent", f"ppo={tiny_run}", "--out", str(out), "--overwrite"]
    assert benchmark.main(argv) == 2
    assert "which this command reads" in last_line(capsys, "lyra_agents.benchmark")
    assert out.read_bytes() == before


def test_evaluate_json_on_a_full_disk_is_one_line_and_keeps_the_old_file(tiny_run, tmp_path, capsys, monkeypatch):
    out = tmp_path / "rows.json"
    out.write_text("older")
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst) == out:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    argv = [str(tiny_run), "--windows", "1", "--baselines", "", "--json", str(out), "--overwrite"]
    assert evaluate.main(argv) == 1
    assert "No space left on device" in last_line(capsys, "lyra_agents.evaluate")
    assert out.read_text() == "older" and leftovers(tmp_path) == []


def test_ctrl_c_in_evaluate_is_one_line_and_exit_130(tiny_run, capsys, monkeypatch):
    def interrupt(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "simulate", interrupt)
    try:
        code = evaluate.main([str(tiny_run), "--windows", "1", "--baselines", ""])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C came out of lyra_agents.evaluate as a traceback")
    assert code == 130 and last_line(capsys, "lyra_agents.evaluate") == "lyra_agents.evaluate: interrupted"


# ---------------------------------------------------------------------- 11, 12. the benchmark
class Stop(Exception):
    """Raised by a patched simulate after the given number of simulations."""


def stop_simulating_after(monkeypatch, count: int, error: BaseException) -> list[int]:
    """``benchmark.simulate`` that raises ``error`` at simulation ``count + 1``; the calls made."""
    real = benchmark.simulate
    calls: list[int] = []

    def simulate(*args, **kwargs):
        calls.append(1)
        if len(calls) > count:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(benchmark, "simulate", simulate)
    return calls


@pytest.mark.slow
def test_an_interrupted_benchmark_is_one_line_keeps_its_windows_and_resumes(suite, tmp_path, capsys,
                                                                            monkeypatch):
    """Ctrl-C printed a traceback and kept nothing: now one line, exit 130, the finished window kept
    in OUT.partial; the same command again simulates only the windows left and writes the bytes an
    uninterrupted run writes."""
    whole = tmp_path / "whole.csv"
    assert benchmark.main(bench_args(suite, whole)) == 0
    capsys.readouterr()

    out = tmp_path / "bench.csv"
    with monkeypatch.context() as patch:
        stop_simulating_after(patch, 3, KeyboardInterrupt())  # window 0: lyra, random, fifo; then window 1
        try:
            code = benchmark.main(bench_args(suite, out))
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C came out of the benchmark as a traceback")
    assert code == 130
    line = last_line(capsys, "lyra_agents.benchmark")
    assert line.startswith("lyra_agents.benchmark: interrupted") and "1 window " in line
    assert not out.exists() and (tmp_path / "bench.csv.partial").is_file()

    with monkeypatch.context() as patch:
        calls = stop_simulating_after(patch, 99, Stop())
        assert benchmark.main(bench_args(suite, out)) == 0
    assert len(calls) == 3  # window 1 only: lyra, random, fifo
    assert out.read_bytes() == whole.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.csv", "cluster.yaml", "demand.csv", "p.json",
                                                          "su.yaml", "whole.csv"]


def test_a_partial_file_of_other_arguments_is_refused_unless_overwrite(suite, tmp_path, capsys, monkeypatch):
    out = tmp_path / "bench.csv"
    with monkeypatch.context() as patch:
        stop_simulating_after(patch, 3, KeyboardInterrupt())
        try:
            assert benchmark.main(bench_args(suite, out)) == 130
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C came out of the benchmark as a traceback")
    capsys.readouterr()
    kept = (tmp_path / "bench.csv.partial").read_bytes()
    assert benchmark.main(bench_args(suite, out, "--seed", "1")) == 2  # another seed of the random policy
    assert "other arguments" in last_line(capsys, "lyra_agents.benchmark")
    assert (tmp_path / "bench.csv.partial").read_bytes() == kept and not out.exists()
    with monkeypatch.context() as patch:
        calls = stop_simulating_after(patch, 99, Stop())
        assert benchmark.main(bench_args(suite, out, "--seed", "1", "--overwrite")) == 0
    assert len(calls) == 6  # the old rows discarded: both windows simulated
    assert not (tmp_path / "bench.csv.partial").exists()


def test_a_foreign_file_at_the_partial_name_is_never_replaced(suite, tmp_path, capsys):
    out = tmp_path / "bench.csv"
    (tmp_path / "bench.csv.partial").write_text("my notes\n")
    assert benchmark.main(bench_args(suite, out, "--overwrite")) == 2
    assert "not a partial benchmark file" in last_line(capsys, "lyra_agents.benchmark")
    assert (tmp_path / "bench.csv.partial").read_text() == "my notes\n" and not out.exists()


def test_a_full_disk_mid_benchmark_is_one_line_and_keeps_the_windows_done(suite, tmp_path, capsys, monkeypatch):
    """The benchmark computed everything, then died with an OSError traceback and nothing written."""
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 2:  # the second window's rows
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    out = tmp_path / "bench.csv"
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fsync)
        assert benchmark.main(bench_args(suite, out)) == 1
    line = last_line(capsys, "lyra_agents.benchmark")
    assert f"cannot write {out}.partial: No space left on device" in line and "1 window " in line
    assert not out.exists()
    with monkeypatch.context() as patch:  # the disk has room again: the same command resumes
        calls = stop_simulating_after(patch, 99, Stop())
        assert benchmark.main(bench_args(suite, out)) == 0
    assert len(calls) == 3 and out.is_file()


def test_a_full_disk_at_the_csv_keeps_every_row_for_the_next_run(suite, tmp_path, capsys, monkeypatch):
    out = tmp_path / "bench.csv"
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst) == out:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace)
        assert benchmark.main(bench_args(suite, out)) == 1
    assert "2 windows" in last_line(capsys, "lyra_agents.benchmark")
    assert not out.exists() and leftovers(tmp_path) == []
    with monkeypatch.context() as patch:
        calls = stop_simulating_after(patch, 0, Stop())  # nothing left to simulate
        assert benchmark.main(bench_args(suite, out)) == 0
    assert calls == [] and out.is_file()


@pytest.mark.slow
def test_sigterm_stops_the_benchmark_like_ctrl_c(suite, tmp_path):
    out = tmp_path / "bench.csv"
    argv = [sys.executable, "-m", "lyra_agents.benchmark", "--policies", "lyra,fifo,sjf,tiresias",
            "--scenarios", "default,contended", "--windows", "3", "--reps", "10", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TQDM_DISABLE": "1"})
    assert proc.stderr is not None
    for line in proc.stderr:  # the first window's line: the run is under way
        if line.startswith("default seed 0 window 0:"):
            break
    proc.send_signal(signal.SIGTERM)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("lyra_agents.benchmark: interrupted; the rows of ")
    assert (tmp_path / "bench.csv.partial").is_file() and not out.exists()


# ---------------------------------------------------------------------- 11, 12. train.py
@pytest.fixture
def tiny_yaml(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, "runs_dir": str(tmp_path / "runs")}))
    return path


def full_disk_save(save_path, *args, **kwargs):
    """SB3's ``save_to_zip_file`` on a full disk: a few bytes written, then ENOSPC."""
    if hasattr(save_path, "write"):
        save_path.write(b"PK\x03\x04 cut short")
    else:
        Path(save_path).write_bytes(b"PK\x03\x04 cut short")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("when, extra", [("the model", []), ("a checkpoint", ["checkpoint_freq=64",
                                                                              "total_timesteps=128"])])
def test_a_full_disk_never_leaves_a_truncated_model_under_its_final_name(tiny_yaml, tmp_path, capsys,
                                                                         monkeypatch, when, extra):
    """SB3's save writes in place: train.py left a truncated model.zip (or checkpoint) and a traceback."""
    monkeypatch.setattr("stable_baselines3.common.base_class.save_to_zip_file", full_disk_save)
    argv = ["--config", str(tiny_yaml), "--no-compare", *(["--set", *extra] if extra else [])]
    assert train.main(argv) == 1
    line = last_line(capsys, "train.py")
    assert "No space left on device" in line and (".zip" in line), line
    run_dir, = (tmp_path / "runs").iterdir()
    assert sorted(p.name for p in run_dir.rglob("*.zip")) == [] and leftovers(run_dir) == []


@pytest.mark.slow
def test_train_checkpoints_are_whole_files_with_their_statistics(tiny_yaml, tmp_path, capsys):
    argv = ["--config", str(tiny_yaml), "--no-compare", "--set", "checkpoint_freq=64", "total_timesteps=128"]
    assert train.main(argv) == 0
    run_dir, = (tmp_path / "runs").iterdir()
    names = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert names == ["model_128_steps.zip", "model_64_steps.zip", "model_vecnormalize_128_steps.npz",
                     "model_vecnormalize_128_steps.pkl", "model_vecnormalize_64_steps.npz",
                     "model_vecnormalize_64_steps.pkl"]
    assert {"model.zip", "vecnormalize.npz", "vecnormalize.pkl"} <= {p.name for p in run_dir.iterdir()}
    assert leftovers(run_dir) == []


def test_ctrl_c_in_train_is_one_line_and_exit_130(tiny_yaml, tmp_path, capsys, monkeypatch):
    def interrupt(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(ClusterMetricsCallback, "_on_step", interrupt)
    try:
        code = train.main(["--config", str(tiny_yaml), "--no-compare"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C came out of train.py as a traceback")
    assert code == 130
    assert last_line(capsys, "train.py").startswith("train.py: interrupted; ")
    run_dir, = (tmp_path / "runs").iterdir()
    assert not (run_dir / "model.zip").exists() and leftovers(run_dir) == []


@pytest.mark.slow
def test_sigterm_stops_train_like_ctrl_c(tiny_yaml, tmp_path):
    argv = [sys.executable, str(ROOT / "train.py"), "--config", str(tiny_yaml), "--no-compare",
            "--set", "total_timesteps=1000000"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # "run RUN_DIR ...": training starts
        if line.startswith("run "):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("train.py: interrupted")


def test_an_rllib_checkpoint_that_fails_part_way_leaves_no_checkpoint_folder(tmp_path):
    """RLlib's checkpoint is saved into a hidden sibling and renamed once whole: a save that fails
    after RLlib wrote its files (here: the weights) leaves neither ``checkpoint/`` nor the sibling."""
    pytest.importorskip("ray.rllib")
    from lyra_agents.rllib_backend import CHECKPOINT_DIR, _save_checkpoint

    class Learners:
        def get_weights(self, ids):
            raise OSError(28, "No space left on device")

    class Algo:
        learner_group = Learners()

        def save_to_path(self, path):
            Path(path).mkdir(parents=True)
            (Path(path) / "algorithm_state.pkl").write_bytes(b"x")

    with pytest.raises(OSError):
        _save_checkpoint(Algo(), tmp_path / CHECKPOINT_DIR)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
