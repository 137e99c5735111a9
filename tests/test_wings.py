"""The wings layout (issue 28 item 2): every old import path is an alias of the moved module (the
same object, so state and monkeypatching agree) and warns; every error of the project shares one
base; the command line runs as ``python -m lyra_gym.cli`` as before."""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import lyra_gym.errors as errors

OLD_TO_NEW = {
    "lyra_gym.config": "lyra_gym.model.config", "lyra_gym.jobs": "lyra_gym.model.jobs",
    "lyra_gym.profiles": "lyra_gym.model.profiles", "lyra_gym.scaling": "lyra_gym.model.scaling",
    "lyra_gym.efficiency": "lyra_gym.model.efficiency", "lyra_gym.demand": "lyra_gym.model.demand",
    "lyra_gym.feasibility": "lyra_gym.model.feasibility", "lyra_gym.trace": "lyra_gym.workloads.trace",
    "lyra_gym.tracegen": "lyra_gym.workloads.tracegen", "lyra_gym.tracepreset": "lyra_gym.workloads.tracepreset",
    "lyra_gym.presets_calibrated": "lyra_gym.workloads.presets_calibrated",
    "lyra_gym.realtraces": "lyra_gym.workloads.realtraces", "lyra_gym.simulate": "lyra_gym.run.simulate",
    "lyra_gym.metrics": "lyra_gym.run.metrics", "lyra_gym.timeline": "lyra_gym.run.timeline",
    "lyra_gym.compare": "lyra_gym.harness.compare", "lyra_gym.sweep": "lyra_gym.harness.sweep",
    "lyra_gym.ray_backend": "lyra_gym.harness.ray_backend", "lyra_gym.runspec": "lyra_gym.harness.runspec",
    "lyra_gym.calibration": "lyra_gym.harness.calibration", "lyra_gym.report": "lyra_gym.harness.report",
    "lyra_gym.tensorboard_log": "lyra_gym.harness.tensorboard_log",
    "lyra_gym.tracestats": "lyra_gym.harness.tracestats",
    **{f"lyra_gym.{name}": f"lyra_gym.sim.{name}"
       for name in ("engine", "view", "scheduler", "topology", "cluster", "placement", "plan")},
}


@pytest.mark.parametrize(("old", "new"), sorted(OLD_TO_NEW.items()))
def test_old_path_is_the_moved_module_and_warns(old, new):
    saved = sys.modules.pop(old, None)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new)
        assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught)
    finally:
        if saved is not None:
            sys.modules[old] = saved


def test_old_path_names_resolve_to_the_same_objects():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from lyra_gym.plan import FrozenAllocation as old_frozen
        from lyra_gym.trace import JobSpec as old_spec
        from lyra_gym.trace import load_trace as old_load
    from lyra_gym.model.jobs import FrozenAllocation
    from lyra_gym.model.jobspec import JobSpec
    from lyra_gym.workloads.trace import load_trace

    assert old_spec is JobSpec and old_load is load_trace and old_frozen is FrozenAllocation


def test_new_paths_import_no_old_path():
    """The package itself uses only the new paths: importing every wing warns nothing."""
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "import lyra_gym.cli.app, lyra_gym.harness.sweep, lyra_gym.harness.compare, lyra_gym.envs.alloc_env, "
            "lyra_gym.workloads.realtraces.cli, lyra_gym.collector.cli\n")
    subprocess.run([sys.executable, "-c", code], check=True)


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
