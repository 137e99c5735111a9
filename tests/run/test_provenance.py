"""Outputs carry what produced them (issue 27 item 4, in part): the package version and, in a git
checkout, the commit, in run.json, the benchmark CSV and a training run's config.yaml."""
from __future__ import annotations

import csv
import json
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

import lyra_gym
from lyra_gym import provenance
from lyra_gym.cli.app import main

ROOT = Path(__file__).resolve().parents[2]


def _head() -> str | None:
    if not (ROOT / ".git").exists():
        return None
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def test_version_is_the_installed_distributions():
    assert lyra_gym.__version__ == version("lyra-gym") == provenance.package_version()


def test_commit_is_the_checkouts_head():
    head = _head()
    if head is None:
        pytest.skip("not a git checkout")
    commit = provenance.git_commit()
    assert commit is not None and commit.split("+")[0] == head


def test_run_json_records_version_and_commit(tmp_path):
    trace = tmp_path / "t.csv"
    assert main(["trace", "generate", "--preset", "small-1d", "--seed", "0", "--out", str(trace)]) == 0
    assert main(["simulate", "--policy", "fifo", "--trace", str(trace), "--out", str(tmp_path / "run")]) == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["lyra_gym_version"] == lyra_gym.__version__
    assert run["lyra_gym_commit"] == provenance.git_commit()


def test_benchmark_csv_records_version_and_commit(tmp_path):
    from lyra_agents import benchmark

    out = tmp_path / "b.csv"
    assert benchmark.main(["--scenarios", "default", "--windows", "1", "--policies", "lyra,random", "--reps", "50",
                           "--quiet", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert rows and {r["lyra_gym_version"] for r in rows} == {lyra_gym.__version__}
    assert {r["lyra_gym_commit"] for r in rows} == {provenance.git_commit() or ""}
