"""The moves that opened the import cycles (issue 28 item 3): old import paths give the same
objects, the tree has no cycle left, and the engine has everything the views type it as."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _check_limits():
    spec = importlib.util.spec_from_file_location("check_limits", ROOT / "tools" / "check_limits.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_limits", module)  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("old", "new", "names"), [
    ("lyra_baselines.placement", "lyra_gym.sim.placement",
     ["best_fit", "best_fit_in_groups", "capacities", "consolidated_fit", "groups_by_type", "place",
      "place_in_groups", "placer", "take"]),
    ("lyra_gym.harness.compare", "lyra_gym.harness.runspec", ["CompareError", "RunError", "RunSpec", "run_one"]),
    ("lyra_gym.harness.ray_backend", "lyra_gym.harness.runspec", ["CompareError", "RunError", "RunSpec", "run_one"]),
    ("lyra_gym.workloads.tracegen", "lyra_gym.workloads.tracepreset", ["TracePreset"]),
    ("lyra_gym.workloads.presets_calibrated", "lyra_gym.workloads.tracepreset", ["TracePreset"]),
])
def test_old_import_paths_give_the_moved_objects(old, new, names):
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_module, name) is getattr(new_module, name), name


def test_agents_old_import_paths_give_the_moved_functions():
    pytest.importorskip("stable_baselines3")
    import lyra_agents.factory as factory
    import lyra_agents.policy_scheduler as policy_scheduler
    import lyra_agents.spaces as spaces

    assert factory.model_spaces is spaces.model_spaces and factory.observation_widths is spaces.observation_widths
    assert policy_scheduler.action_codec is spaces.action_codec  # (env_controls is read there now)


def test_the_project_has_no_import_cycle():
    check_limits = _check_limits()
    limits = check_limits.load_limits(ROOT / "pyproject.toml")
    graph = check_limits.import_graph(ROOT, ["lyra_gym", "baselines", "agents"], limits.import_names)
    assert check_limits.import_cycles(graph) == []
    # preset data imports neither the generator nor the simulator; lyra_gym never imports baselines
    assert not graph["lyra_gym.workloads.presets_calibrated"] & {"lyra_gym.workloads.tracegen", "lyra_gym.run.simulate"}
    assert not any(dep.startswith(("lyra_baselines", "lyra_agents"))
                   for module, deps in graph.items() if module.startswith("lyra_gym") for dep in deps)


def test_engine_has_every_member_of_the_views_engine_protocol():
    from lyra_gym.model.config import SimConfig
    from lyra_gym.run.simulate import build_engine
    from lyra_gym.sim.scheduler import make
    from lyra_gym.sim.view import EngineState
    from lyra_gym.workloads.tracegen import generate_trace

    engine = build_engine(generate_trace("small-1d", 0)[:5], make("fifo"), SimConfig(), seed=0)
    members = [name for name in vars(EngineState) if not name.startswith("_")]
    assert len(members) == 24  # 21 + knowledge (issue 26) + journal (the change feed, issue 24) + finished
    for name in members:
        assert hasattr(engine, name), name


def test_trace_preset_reports_the_first_bad_field_as_before():
    from lyra_gym.workloads.tracepreset import TracePreset

    # fields checked in declaration order across both halves of the checks: the first bad one is named
    with pytest.raises(ValueError, match=r"^TracePreset\.days: must be a finite number > 0, got -1$"):
        TracePreset(name="x", days=-1, elastic_share=2.0, target_load=0)
    with pytest.raises(ValueError, match=r"^TracePreset\.duration_max_s: .*got 30\.0$"):
        TracePreset(name="x", duration_max_s=30.0, elastic_share=2.0)
    with pytest.raises(ValueError, match=r"^TracePreset\.elastic_share: must be in \[0, 1\], got 2\.0$"):
        TracePreset(name="x", elastic_share=2.0, target_load=0)
    with pytest.raises(ValueError, match=r"^TracePreset\.target_load: must be None or a finite number > 0, got 0$"):
        TracePreset(name="x", target_load=0)
