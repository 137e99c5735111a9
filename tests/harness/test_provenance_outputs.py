"""Every comparison and sweep output records what produced it (issue 27 item 4): ``lyra-gym
compare``'s compare.json, summary.csv/.json and TensorBoard text, ``lyra-gym sweep``'s sweep.json and
runs.csv, the RLlib backend's compare.json; and a sweep's CSV traces resolve beside the sweep file
(item 2), runs.csv keeping each trace's label as written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

import lyra_gym
from lyra_gym.cli.app import main
from lyra_gym.harness.report import summarize_runs
from lyra_gym.harness.sweep import expand, grid_sha256, load_grid
from lyra_gym.provenance import PROVENANCE_KEYS, git_commit
from lyra_gym.workloads.trace import write_trace
from lyra_gym.workloads.tracegen import generate_trace

MADE_BY = {"lyra_gym_version": lyra_gym.__version__, "lyra_gym_commit": git_commit()}
CSV_MADE_BY = {k: "" if v is None else v for k, v in MADE_BY.items()}  # None is an empty cell


@pytest.fixture(scope="module")
def short_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "short.csv"
    write_trace(generate_trace("small-1d", 0)[:30], path)
    return path


def _csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


# ----------------------------------------------------------------------------- compare
@pytest.fixture(scope="module")
def compared(tmp_path_factory, short_trace):
    out = tmp_path_factory.mktemp("compare")
    argv = ["compare", "--policies", "fifo,sjf", "--seeds", "0", "--no-plots", "--trace", str(short_trace),
            "--out", str(out / "cmp"), "--tensorboard", str(out / "tb")]
    assert main(argv) == 0
    return out


def test_compare_json_records_version_and_commit(compared):
    manifest = json.loads((compared / "cmp" / "compare.json").read_text())
    assert manifest["status"] == "complete"
    assert {k: manifest[k] for k in PROVENANCE_KEYS} == MADE_BY
    keys = list(manifest)  # added after the keys compare.json had, before the files and status updates
    assert keys.index("lyra_gym_version") == keys.index("runs") + 1


def test_summary_rows_end_with_version_and_commit(compared):
    header, rows = _csv(compared / "cmp" / "summary.csv")
    assert header[-2:] == list(PROVENANCE_KEYS)
    assert all({k: r[k] for k in PROVENANCE_KEYS} == CSV_MADE_BY for r in rows)
    summary = json.loads((compared / "cmp" / "summary.json").read_text())
    assert [r["policy"] for r in summary] == ["fifo", "sjf"]
    assert all({k: r[k] for k in PROVENANCE_KEYS} == MADE_BY for r in summary)
    assert [list(r)[-2:] for r in summary] == [list(PROVENANCE_KEYS)] * 2
    # the columns before them are as before: policy, seeds, the metrics, their CIs, what the policy reads
    metrics = json.loads((compared / "cmp" / "fifo" / "seed0" / "metrics.json").read_text())
    expected = [*summarize_runs_keys(metrics), "reads"]
    assert header[:-2] == expected


def summarize_runs_keys(metrics: dict) -> list[str]:
    """The keys of :func:`summarize_runs`'s row for runs with these metrics (metrics.json less its
    policy, seed and provenance)."""
    from lyra_gym.run.simulate import SimResult

    kept = {k: v for k, v in metrics.items() if k not in ("policy", "seed", *PROVENANCE_KEYS)}
    return list(summarize_runs([SimResult("fifo", 0, kept, [], None)]))  # type: ignore[arg-type]


def test_tensorboard_runs_hold_a_provenance_text(compared):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from lyra_gym.harness.tensorboard_log import PROVENANCE_TAG

    for policy in ("fifo", "sjf"):
        acc = EventAccumulator(str(compared / "tb" / policy), size_guidance={"tensors": 0})
        acc.Reload()
        assert PROVENANCE_TAG in acc.Tags()["tensors"]
        (event,) = acc.Tensors(PROVENANCE_TAG)
        text = event.tensor_proto.string_val[0].decode()
        assert f"|lyra_gym_version|{lyra_gym.__version__}|" in text
        assert f"|lyra_gym_commit|{MADE_BY['lyra_gym_commit'] or '-'}|" in text
        assert "summary/jct_mean_s" in acc.Tags()["scalars"]  # the scalars are still there


# ----------------------------------------------------------------------------- sweep
def _sweep_file(folder: Path, traces: list[str], **extra) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump({"policies": ["fifo"], "traces": traces, "seeds": [0],
                                    "params": {"reclaim_grace_s": [0, 60]}, **extra}))
    return path


def test_sweep_traces_resolve_beside_the_sweep_file(tmp_path, short_trace, monkeypatch):
    sweep_dir = tmp_path / "sweeps"
    (sweep_dir / "data").mkdir(parents=True)
    (sweep_dir / "data" / "short.csv").write_bytes(short_trace.read_bytes())
    path = _sweep_file(sweep_dir, ["data/short.csv"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no data/short.csv here: only beside the sweep file
    assert main(["sweep", str(path), "--out", "out", "--no-plots", "--jobs", "1"]) == 0
    header, rows = _csv(elsewhere / "out" / "runs.csv")
    assert [r["trace"] for r in rows] == ["data/short.csv"] * 2  # the label as written
    assert all(r["jobs_total"] == "30" for r in rows)
    assert header[-2:] == list(PROVENANCE_KEYS)
    assert header[:5] == ["trace", "trace_seed", "reclaim_grace_s", "policy", "seed"]
    assert all({k: r[k] for k in PROVENANCE_KEYS} == CSV_MADE_BY for r in rows)
    manifest = json.loads((elsewhere / "out" / "sweep.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["traces"] == ["data/short.csv"]
    assert manifest["trace_files"] == {"data/short.csv": str(sweep_dir / "data" / "short.csv")}
    assert {k: manifest[k] for k in PROVENANCE_KEYS} == MADE_BY
    assert list(manifest["trace_sha256"]) == ["data/short.csv"]


def test_sweep_traces_relative_to_the_working_folder_still_load(tmp_path, short_trace, monkeypatch):
    """A sweep file written before the rule (paths from the folder it was run in) still works."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "short.csv").write_bytes(short_trace.read_bytes())
    path = _sweep_file(tmp_path / "sweeps", ["data/short.csv"])
    monkeypatch.chdir(tmp_path)
    grid = load_grid(path)
    assert grid.trace_files == {"data/short.csv": str(tmp_path / "data" / "short.csv")}


def test_sweep_grid_hash_does_not_depend_on_the_working_folder(tmp_path, short_trace, monkeypatch):
    beside = _sweep_file(tmp_path / "a", ["short.csv"])
    (tmp_path / "a" / "short.csv").write_bytes(short_trace.read_bytes())
    hashes = []
    for cwd in (tmp_path, tmp_path / "a"):
        monkeypatch.chdir(cwd)
        grid = load_grid(beside)
        hashes.append(grid_sha256(grid, expand(grid)))
    # and equals the hash of the same sweep run, as before the rule, with the label valid from the cwd
    monkeypatch.chdir(tmp_path / "a")
    legacy = load_grid(_sweep_file(tmp_path / "b", ["short.csv"]))
    assert hashes[0] == hashes[1] == grid_sha256(legacy, expand(legacy))


def test_a_sweep_trace_found_neither_beside_the_file_nor_from_the_cwd_is_refused(tmp_path, monkeypatch, capsys):
    path = _sweep_file(tmp_path / "s", ["nowhere.csv"])
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(path), "--out", "out"]) == 2
    assert capsys.readouterr().err == "lyra-gym: error: traces: 'nowhere.csv': no such file\n"
    assert not (tmp_path / "out").exists()


def test_a_resumed_row_stored_without_provenance_records_it_as_unknown(tmp_path, short_trace):
    path = _sweep_file(tmp_path / "s", [str(short_trace)])
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    stored = out / "sweep_runs" / "run-00001.json"
    record = json.loads(stored.read_text())
    for key in PROVENANCE_KEYS:  # as an older lyra_gym stored it
        del record["row"][key]
    stored.write_text(json.dumps(record))
    (out / "sweep_runs" / "run-00000.json").unlink()
    assert main(["sweep", str(path), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    header, rows = _csv(out / "runs.csv")
    assert header[-2:] == list(PROVENANCE_KEYS)
    assert {k: rows[0][k] for k in PROVENANCE_KEYS} == CSV_MADE_BY  # rerun now
    assert {k: rows[1][k] for k in PROVENANCE_KEYS} == {k: "" for k in PROVENANCE_KEYS}


# ----------------------------------------------------------------------------- RLlib
def test_rllib_compare_json_rows_record_env_id_version_and_commit(tmp_path, monkeypatch):
    pytest.importorskip("ray.rllib", reason="RLlib not installed: pip install lyra-gym[rllib]")
    from lyra_agents import rllib_backend
    from lyra_agents.config import resolve_config

    cfg = resolve_config("LyraGym/Cluster-v1", None, False, ["window_s=10800", "final_windows=1"], 3)
    # the checkpoint stands in for a baseline: what is checked is the file the comparison writes
    monkeypatch.setattr(rllib_backend, "load_rllib_scheduler", lambda run_dir, name=None: "fifo")
    rows = rllib_backend.compare_checkpoint(tmp_path, cfg)
    written = json.loads((tmp_path / "compare.json").read_text())
    assert written == rows and list(written) == ["policy", "lyra"]
    for label_rows in written.values():
        assert len(label_rows) == 1
        for row in label_rows:
            assert row["env_id"] == "LyraGym/Cluster-v1"
            assert {k: row[k] for k in PROVENANCE_KEYS} == MADE_BY
            assert list(row)[-3:] == ["env_id", *PROVENANCE_KEYS]
