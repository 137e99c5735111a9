"""``lyra-gym sweep``: a YAML grid -> runs.csv (one row per run) and one PNG per swept parameter;
bad grids fail before any run with an error naming the key."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from lyra_gym.cli.app import main
from lyra_gym.harness.sweep import SweepError, load_grid, plot_name, run_sweep
from lyra_gym.sim.scheduler import UnknownSchedulerError
from lyra_gym.workloads.trace import write_trace
from lyra_gym.workloads.tracegen import generate_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _grid(tmp_path: Path, **data) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def short_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "short.csv"
    write_trace(generate_trace("small-1d", 0)[:40], path)
    return str(path)


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_engine_param_grid(tmp_path, short_trace, capsys):
    grid = _grid(tmp_path, policies=["fifo", "lyra"], traces=[short_trace], seeds=[0],
                 params={"reclaim_grace_s": [0, 60]})
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out")]) == 0
    assert "reclaim_grace_s" in capsys.readouterr().out
    rows = _rows(tmp_path / "out" / "runs.csv")
    assert len(rows) == 2 * 2 * 1
    assert list(rows[0])[:6] == ["trace", "trace_seed", "reclaim_grace_s", "policy", "seed", "jobs_total"]
    assert {"jct_mean_s", "queue_mean_s", "preemptions"} <= set(rows[0])
    assert {(r["policy"], r["reclaim_grace_s"]) for r in rows} == {(p, g) for p in ("fifo", "lyra") for g in ("0", "60")}
    assert all(r["jobs_total"] == "40" and r["trace"] == short_trace for r in rows)
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert pngs == [plot_name("reclaim_grace_s")]
    assert (tmp_path / "out" / pngs[0]).read_bytes().startswith(PNG_MAGIC)


@pytest.mark.slow
def test_trace_and_engine_params_one_png_each(tmp_path):
    grid = _grid(tmp_path, policies=["fifo", "lyra"], traces=["preset:small-1d"], seeds=[3], trace_seed=0,
                 trace_params={"elastic_share": [0.0, 1.0], "num_jobs": [30], "target_load": [None]},
                 params={"demand.peak_trough_ratio": [2.5, 8]})
    _, rows, written = run_sweep(grid, tmp_path / "out")
    assert len(rows) == 2 * 2 * 1 * 2 * 1
    assert all(r["trace_seed"] == 0 and r["seed"] == 3 and r["jobs_total"] == 30 for r in rows)
    assert {r["elastic_share"] for r in rows} == {0.0, 1.0}
    names = {p.name for p in written if p.suffix == ".png"}
    assert names == {plot_name(k) for k in ("elastic_share", "num_jobs", "target_load", "demand.peak_trough_ratio")}
    assert {r["demand.peak_trough_ratio"] for r in rows} == {2.5, 8}


@pytest.mark.slow
def test_local_workers_same_numbers(tmp_path, short_trace):
    grid = _grid(tmp_path, policies=["fifo", "lyra"], traces=[short_trace], seeds=[0, 1])
    _, serial, _ = run_sweep(grid, tmp_path / "a", plots=False)
    _, parallel, _ = run_sweep(grid, tmp_path / "b", n_jobs=2, plots=False)
    strip = [[{k: v for k, v in r.items() if k != "sim_wall_s"} for r in rows] for rows in (serial, parallel)]
    assert strip[0] == strip[1]


@pytest.mark.parametrize("key", ["no_such_setting", "demand.no_such_field", "overheads.rescale"])
def test_unknown_engine_key_is_named(tmp_path, short_trace, key):
    grid = _grid(tmp_path, policies=["fifo"], traces=[short_trace], params={key: [1]})
    with pytest.raises(SweepError, match=key.split(".")[-1]) as info:
        load_grid(grid)
    assert repr(key) in str(info.value)
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_unreachable_trace_preset_is_a_sweep_error(tmp_path):
    grid = _grid(tmp_path, policies=["fifo"], traces=["preset:small-1d"], trace_params={"num_jobs": [3]})
    with pytest.raises(SweepError, match="num_jobs=3"):
        run_sweep(grid, tmp_path / "out")


@pytest.mark.parametrize("data, match", [
    ({"policies": ["fifo"], "traces": ["preset:small-1d"], "trace_params": {"elastic_sharez": [0.5]}},
     "trace_params.elastic_sharez: unknown"),
    ({"policies": ["fifo"], "traces": ["preset:small-1d"], "trace_params": {"elastic_share": [1.5]}}, "elastic_share"),
    ({"policies": ["fifo"], "traces": ["preset:nope"]}, "unknown preset 'nope'"),
    ({"policies": ["fifo"], "traces": ["preset:small-1d"], "sedes": [0]}, "sedes: unknown key"),
    ({"policies": ["nope"], "traces": ["preset:small-1d"]}, "unknown scheduler 'nope'"),
    ({"traces": ["preset:small-1d"]}, "policies: required"),
])
def test_bad_grid(tmp_path, data, match):
    with pytest.raises((SweepError, UnknownSchedulerError), match=match):
        load_grid(_grid(tmp_path, **data))


def test_every_trace_param_value_runs_its_own_trace(tmp_path):
    """Regression: the feasibility cache was keyed by id() of traces freed between trace-param
    values, so a later value could reuse an earlier trace's id and silently run its jobs."""
    from lyra_gym.harness.sweep import expand, preset_with

    shares = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    grid = load_grid(_grid(tmp_path, policies=["fifo"], traces=["preset:small-1d"],
                           trace_params={"elastic_share": shares}))
    runs = expand(grid)
    assert [r.values["elastic_share"] for r in runs] == shares
    for run in runs:
        expected = generate_trace(preset_with("small-1d", {"elastic_share": run.values["elastic_share"]}), 0)
        assert list(run.jobs) == expected, run.values
