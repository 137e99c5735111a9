"""The Ray backend (``run_grid(..., backend="ray")``, ``compare --backend ray``): the same
numbers as the local backend, run folders written, failures reported as RunError.

One local Ray instance with 2 CPUs serves the whole module (start-up takes a few seconds);
the module is skipped only when Ray is not installed (``pip install lyra-gym[ray]``).
"""

from __future__ import annotations

import json
import sys

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install lyra-gym[ray]); Ray backend not tested")

from lyra_gym.cli.app import main  # noqa: E402
from lyra_gym.harness.compare import CompareError, RunError, run_grid  # noqa: E402
from lyra_gym.model.config import SimConfig  # noqa: E402
from lyra_gym.workloads.tracegen import generate_trace  # noqa: E402

POLICIES, SEEDS = ("fifo", "lyra"), (0, 1)


@pytest.fixture(scope="module")
def ray_instance():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def short_jobs():
    return generate_trace("small-1d", 0)[:40]


def _strip(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k != "sim_wall_s"}


@pytest.mark.slow
def test_same_numbers_as_local(ray_instance, short_jobs, tmp_path):
    config = SimConfig()
    local = run_grid(short_jobs, config, POLICIES, SEEDS, out=tmp_path / "local")
    seen = []
    remote = run_grid(short_jobs, config, POLICIES, SEEDS, out=tmp_path / "ray", n_jobs=2, backend="ray",
                      on_done=seen.append)
    assert len(seen) == len(POLICIES) * len(SEEDS)
    for p in POLICIES:
        assert [r.seed for r in remote[p]] == list(SEEDS)
        for a, b in zip(local[p], remote[p]):
            assert _strip(a.metrics) == _strip(b.metrics)
            assert a.jobs == b.jobs
        for s in SEEDS:  # the run folders are written by the driver
            written = json.loads((tmp_path / "ray" / p / f"seed{s}" / "metrics.json").read_text())
            assert _strip(written) == _strip(json.loads((tmp_path / "local" / p / f"seed{s}" / "metrics.json").read_text()))


@pytest.mark.slow
def test_cli_compare_ray_summary_identical(ray_instance, short_jobs, tmp_path):
    from lyra_gym.workloads.trace import write_trace

    trace = tmp_path / "short.csv"
    write_trace(short_jobs, trace)
    base = ["compare", "--policies", ",".join(POLICIES), "--seeds", "0,1", "--trace", str(trace), "--no-plots"]
    assert main([*base, "--out", str(tmp_path / "l")]) == 0
    assert main([*base, "--out", str(tmp_path / "r"), "--backend", "ray", "--jobs", "2"]) == 0
    rows = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("l", "r")]
    strip = [[{k: v for k, v in r.items() if not k.startswith("sim_wall_s")} for r in rs] for rs in rows]
    assert strip[0] == strip[1]


@pytest.mark.slow
def test_failed_run_is_a_run_error(ray_instance, short_jobs):
    with pytest.raises(RunError, match="seed 0 failed") as info:
        run_grid(short_jobs, SimConfig(), ["lyra"], [0], {"lyra": {"no_such_param": 1}}, backend="ray")
    assert "Traceback" in info.value.remote_traceback


def test_missing_ray_says_how_to_install(monkeypatch):
    from lyra_gym.harness.ray_backend import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(CompareError, match=r"pip install lyra-gym\[ray\]"):
        import_ray()


def test_unknown_backend(short_jobs):
    with pytest.raises(CompareError, match="unknown backend"):
        run_grid(short_jobs, SimConfig(), ["fifo"], [0], backend="dask")
