"""The asv speed suite (benchmarks/asv_bench) does not rot: every module imports, and every
benchmark runs its setup_cache, setup and one call, as asv would, on a tiny size."""

from __future__ import annotations

import importlib
import inspect
import itertools
import math
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "asv_bench"
PREFIXES = ("time_", "track_", "peakmem_", "mem_", "timeraw_")

#: Class attributes that shrink each benchmark to a fraction of a second; every benchmark class
#: must be listed (add its tiny size with it).
TINY = {
    "engine.Bench15d": {"days": 0.05},
    "engine.TimeBench15d": {"days": 0.05},
    "engine.Scale": {"days": 0.02},
    "engine.TimeScale": {"days": 0.05},
    "engine.PeakmemScale": {"days": 0.02},
    "trace.GenerateBench15d": {"preset": "small-1d"},
    "trace.GenerateLyra15dX10": {"days": 0.03},
    "envs.GuidedEnvStep": {"steps": 5, "copies": 2},
    "alloc_env.AllocEpisode": {"window_h": 0.5},
    "alloc_env.TimeAllocEpisode": {"window_h": 0.5},
    "agent.AgentSubAction": {"samples": 3},
    "agent.AgentDecision": {"hours": 0.5},
    # one shipped training config by default; every one under -m slow (test_config_step_on_every_config)
    "training.ConfigStep": {"steps": 4, "params": (["cluster"], ["random", "expert"])},
    "training.TrainThroughput": {"n_steps": 4},
}


def _modules():
    sys.path.insert(0, str(SUITE.parent))  # as asv does: the suite's parent folder, package by folder name
    try:
        return [importlib.import_module(f"asv_bench.{info.name}") for info in pkgutil.iter_modules([str(SUITE)])]
    finally:
        sys.path.remove(str(SUITE.parent))


def _classes():
    found = {}
    for module in _modules():
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and any(m.startswith(PREFIXES) for m in dir(cls)):
                found[f"{module.__name__.split('.', 1)[1]}.{name}"] = cls
    return found


CLASSES = _classes()


def test_every_module_imports_and_every_benchmark_class_has_a_tiny_size():
    assert {m.__name__ for m in _modules()} >= {"asv_bench.engine", "asv_bench.trace", "asv_bench.envs",
                                                 "asv_bench.alloc_env", "asv_bench.agent", "asv_bench.training"}
    assert set(CLASSES) == set(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
@pytest.mark.sample(1)
def test_benchmark_runs_once_on_a_tiny_size(name):
    run_once(name, TINY[name])


@pytest.mark.slow
def test_config_step_on_every_config():
    run_once("training.ConfigStep", {"steps": 4})


def run_once(name: str, sizes: dict) -> None:
    """Benchmark class ``name`` with ``sizes`` set: setup_cache, then setup, each method and
    teardown once per parameter combination, as asv would."""
    cls = CLASSES[name]
    bench = cls()
    for key, value in sizes.items():
        assert hasattr(cls, key), f"{name} has no size attribute {key!r}"
        setattr(bench, key, value)
    cache = (bench.setup_cache(),) if hasattr(bench, "setup_cache") else ()
    params = getattr(bench, "params", ())
    combos = list(itertools.product(*params)) if params else [()]
    methods = [m for m in dir(cls) if m.startswith(PREFIXES)]
    assert methods
    for method in methods:
        for combo in combos:
            if hasattr(bench, "setup"):
                bench.setup(*cache, *combo)
            value = getattr(bench, method)(*cache, *combo)
            if method.startswith("track_"):
                assert isinstance(value, (int, float)) and math.isfinite(value) and value > 0, (method, combo, value)
                assert getattr(getattr(cls, method), "unit", None), f"{name}.{method} names no unit"
            if hasattr(bench, "teardown"):
                bench.teardown(*cache, *combo)


@pytest.mark.skipif(shutil.which("asv") is None, reason="asv not installed (pip install -e '.[bench]')")
def test_asv_finds_the_suite_without_problems():
    done = subprocess.run(["asv", "check", "--python=same"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No problems found" in done.stdout


def test_suite_builds_the_scaled_trace_and_cluster_as_the_scale_option_does():
    """The suite falls back to ``dataclasses.replace`` on commits without ``scaled_preset``
    (``asv continuous`` against an older commit): the same jobs either way; its cluster is
    ``lyra_15d_cluster(paper=True, scale=N)``."""
    from lyra_gym.workloads.presets_calibrated import LYRA_15D_X10_CLUSTER, lyra_15d_cluster
    from lyra_gym.workloads.tracegen import generate_trace

    common = next(m for m in _modules() if m.__name__ == "asv_bench._common")
    expected = generate_trace("lyra-15d", 0, scale=10, days=0.1)
    assert len(expected) == 3_333
    assert generate_trace(common.lyra_15d_preset(10, 0.1), 0) == expected
    assert generate_trace(common._replaced_preset(10, 0.1), 0) == expected
    assert common.paper_cluster(10) == LYRA_15D_X10_CLUSTER
    assert common.paper_cluster(1) == lyra_15d_cluster(paper=True)


def test_production_scale_prints_one_json_line_per_policy(capsys):
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import production_scale
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert production_scale.main(["--policy", "fifo", "--scale", "2", "--days", "0.05"]) == 0
    row = json.loads(capsys.readouterr().out.strip())
    assert (row["policy"], row["scale"], row["jobs"]) == ("fifo", 2, 333)
    assert (row["training_gpus"], row["inference_gpus"]) == (2048, 2560)
    assert row["jobs_finished"] == 333 and row["peak_rss_mb"] > 0 and row["jobs_per_s"] > 0
