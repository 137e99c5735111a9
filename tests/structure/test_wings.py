"""The wings layout (issue 28 item 2): the old flat import paths are gone (issue 41), nothing imports
one; every error of the project shares one base; the command line runs as ``python -m lyra_gym.cli``."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import lyra_gym.errors as errors

#: The flat paths the wings layout replaced (issue 28); their aliases were removed at 0.3.0 (issue 41).
OLD_PATHS = (
    "config", "profiles", "jobs", "scaling", "efficiency", "demand", "feasibility", "trace", "tracegen",
    "tracepreset", "presets_calibrated", "realtraces", "simulate", "metrics", "timeline", "compare", "sweep",
    "ray_backend", "runspec", "calibration", "report", "tensorboard_log", "tracestats", "engine", "view",
    "scheduler", "topology", "cluster", "placement", "plan", "_moved",
)
#: What ``lyra_gym/`` holds: the wings and a handful of leaf modules.
TOP_LEVEL = {"__init__.py", "env_ids.py", "errors.py", "interrupts.py", "lazy_face.py", "outputs.py", "progress.py",
             "provenance.py", "cli", "collector", "data", "envs", "harness", "model", "run", "sim", "workloads"}


@pytest.mark.parametrize("old", OLD_PATHS)
def test_old_flat_path_is_gone(old):
    # by file: an editable install of another checkout may still resolve the name from its own tree
    root = Path(errors.__file__).parent
    assert not (root / f"{old}.py").exists() and not (root / old).exists()


def test_lyra_gym_holds_the_wings_and_a_few_modules():
    root = Path(errors.__file__).parent
    assert {p.name for p in root.iterdir() if p.name != "__pycache__"} == TOP_LEVEL


#: Files that may name a flat path: the history, and the asv suite's fallback for commits before the wings.
MAY_NAME_OLD_PATHS = {"CHANGELOG.md", "benchmarks/asv_bench/_common.py"}


def test_nothing_in_the_tree_names_an_old_flat_path():
    root = Path(__file__).resolve().parents[2]
    names = "|".join(OLD_PATHS)
    old = re.compile(rf"\blyra_gym[./]({names})\b|\bfrom lyra_gym import ({names})\b")
    files = [p for pattern in ("*.py", "*.md", "*.toml", "*.yaml", "*.yml", "*.cfg", "Makefile")
             for p in root.rglob(pattern) if not {".git", ".venv", "site", ".asv"} & set(p.relative_to(root).parts)]
    naming = {str(p.relative_to(root)) for p in files if old.search(p.read_text(encoding="utf-8", errors="replace"))}
    assert naming - MAY_NAME_OLD_PATHS == set()


def _project_errors() -> list[type]:
    from lyra_agents.benchmark import BenchmarkError
    from lyra_agents.config import TrainConfigError
    from lyra_agents.model_files import ModelFileError, UntrustedModelFileError
    from lyra_gym.harness.runspec import CompareError
    from lyra_gym.harness.sweep import SweepError
    from lyra_gym.model.demand import DemandFileError
    from lyra_gym.model.efficiency import EfficiencyError
    from lyra_gym.model.feasibility import InfeasibleJobError
    from lyra_gym.model.jobspec import JobSpecError
    from lyra_gym.model.profiles import ProfileError
    from lyra_gym.outputs import OutputError
    from lyra_gym.sim.scheduler import UnknownSchedulerError
    from lyra_gym.workloads.trace import TraceError

    return [BenchmarkError, TrainConfigError, ModelFileError, UntrustedModelFileError, CompareError, SweepError,
            DemandFileError, EfficiencyError, InfeasibleJobError, JobSpecError, ProfileError, OutputError,
            UnknownSchedulerError, TraceError, errors.ConfigError]


def test_every_project_error_shares_the_base():
    pytest.importorskip("stable_baselines3")
    for error in _project_errors():
        assert issubclass(error, errors.LyraGymError), error
        assert issubclass(error, ValueError), error  # every caller that caught ValueError still does
    # the errors that were also a KeyError / FileNotFoundError still are
    from lyra_agents.model_files import UntrustedModelFileError
    from lyra_gym.sim.scheduler import UnknownSchedulerError
    assert issubclass(UnknownSchedulerError, KeyError) and issubclass(UntrustedModelFileError, FileNotFoundError)


@pytest.mark.parametrize(("value", "rule", "problem"), [
    (3, {"integer": True, "lo": 1}, None),
    (0, {"integer": True, "lo": 1}, "must be an integer >= 1, got 0"),
    (True, {"lo": 0}, "must be a finite number >= 0, got True"),
    (float("inf"), {"lo": 0}, "must be a finite number >= 0, got inf"),
    (float("inf"), {"lo": 0, "allow_inf": True}, None),
    (0.5, {"lo": 0, "hi": 1, "hi_open": True}, None),
    (1.0, {"lo": 0, "hi": 1, "hi_open": True}, "must be a finite number in [0, 1), got 1.0"),
])
def test_number_problem_names_the_requirement(value, rule, problem):
    assert errors.number_problem(value, **rule) == problem


def test_python_m_lyra_gym_cli_runs():
    out = subprocess.run([sys.executable, "-m", "lyra_gym.cli", "policies"], capture_output=True, text=True, check=True)
    assert "lyra" in out.stdout
