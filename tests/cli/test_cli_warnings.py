"""CLI: a run with unfinished jobs warns; --trust-model-files is explicit and warned about."""

from __future__ import annotations

import os
from pathlib import Path

from lyra_gym.cli.app import TRUST_ENV, main

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_with_unfinished_jobs_warns(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = tmp_path / "short.yaml"
    cfg.write_text("horizon_s: 3600\n")  # the shipped day-long trace cannot finish in an hour
    code = main(["simulate", "--policy", "fifo", "--trace", "traces/default.csv", "--config", str(cfg),
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 0
    assert "fifo:" in err and "jobs unfinished" in err


def test_a_run_that_finishes_every_job_does_not_warn(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["simulate", "--policy", "sjf", "--trace", "traces/default.csv", "--out", str(tmp_path / "o")]) == 0
    assert "unfinished" not in capsys.readouterr().err


def test_trust_model_files_is_explicit_and_warned(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv(TRUST_ENV, "0")  # restored (unset) after the test: the CLI sets it in os.environ
    assert main(["simulate", "--policy", "sjf", "--trace", "traces/default.csv", "--out", str(tmp_path / "a")]) == 0
    assert os.environ[TRUST_ENV] == "0"
    assert main(["simulate", "--policy", "sjf", "--trace", "traces/default.csv", "--out", str(tmp_path / "b"),
                 "--trust-model-files"]) == 0
    assert os.environ[TRUST_ENV] == "1"
    assert "--trust-model-files: model files are unpickled" in capsys.readouterr().err


def test_a_sweep_file_reads_yaml_1_2_booleans(tmp_path):
    from lyra_gym.harness.sweep import SweepError, load_grid
    import pytest

    path = tmp_path / "grid.yaml"
    path.write_text("policies: [fifo]\ntraces: [traces/default.csv]\nparams: {allow_mixed_gpu_types: [no]}\n")
    with pytest.raises((SweepError, ValueError), match="allow_mixed_gpu_types"):
        load_grid(path)
