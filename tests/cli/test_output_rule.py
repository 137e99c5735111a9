"""Issue 23: one output rule for every command that writes (:mod:`lyra_gym.outputs`).

An existing non-empty target is refused without ``--overwrite``; with it, nothing the command
reads is ever deleted (inputs resolved, symbolic links followed, refused with a one-line error
naming the input), only the command's own files are replaced, atomically. A sweep resumes:
finished runs are kept and skipped on the next call, with results identical to an
uninterrupted sweep."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import types
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_gym.cli import app as cli
from lyra_gym.cli.app import main
from lyra_gym.harness import sweep
from lyra_gym.workloads.trace import load_trace
from lyra_gym.workloads.tracegen import generate_trace

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "agents" / "pretrained" / "alloc-contended"
HELIOS = ROOT / "tests" / "fixtures" / "helios_cluster_log.csv"
TRACE = ("job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus\n"
         "j0,0.0,1,500.0,resnet50,0,,\nj1,60.0,2,300.0,bert,1,1,4\nj2,120.0,4,900.0,resnet50,0,,\n")


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TQDM_DISABLE", "1")


def run(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, captured.out, captured.err


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("lyra-gym: warning:")]
    assert len(lines) == 1 and lines[0].startswith("lyra-gym: error:"), err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` (symbolic links left out) -> its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def data_folder(root: Path) -> Path:
    """``root/data`` holding a 3-job trace, a config, a sweep grid over them and a Helios log."""
    data = root / "data"
    data.mkdir()
    (data / "t.csv").write_text(TRACE)
    (data / "c.yaml").write_text("reclaim_grace_s: 5\n")
    (data / "g.yaml").write_text(f"policies: [fifo]\ntraces: ['{data / 't.csv'}']\nseeds: [0]\n")
    shutil.copy(HELIOS, data / "h.csv")
    return data


# ----------------------------------------------------------------------------- the reproducers
def test_compare_overwrite_keeps_the_model_folder_it_reads(tmp_path, capsys):
    shutil.copytree(MODEL, "mdl")
    Path("t.csv").write_text(TRACE)
    before = snapshot(Path("mdl"))
    code, _, err = run(["compare", "--policies", "fifo,model:mdl", "--trace", "t.csv", "--seeds", "0",
                        "--out", "mdl", "--overwrite"], capsys)
    assert code == 2
    line = error_line(err)
    assert "--out mdl" in line and "--policies mdl" in line
    assert snapshot(Path("mdl")) == before


def test_a_model_policy_option_is_not_part_of_its_path():
    assert cli._policy_path("model:mdl?trust=1") == "mdl"
    assert cli._policy_path("rllib:runs/x") == "runs/x"
    assert cli._policy_path("fifo") is None and cli._policy_path("model:") is None


@pytest.mark.parametrize("option", ["--trace", "--config"])
def test_simulate_overwrite_keeps_an_input_in_out(tmp_path, capsys, option):
    data = data_folder(tmp_path)
    Path("t.csv").write_text(TRACE)
    before = snapshot(data)
    argv = ["simulate", "--policy", "fifo", "--out", "data", "--overwrite"]
    argv += ["--trace", "data/t.csv"] if option == "--trace" else ["--trace", "t.csv", "--config", "data/c.yaml"]
    code, _, err = run(argv, capsys)
    assert code == 2
    line = error_line(err)
    assert f"holds {option} data/" in line and "--out data" in line
    assert snapshot(data) == before


@pytest.mark.parametrize("command", [["simulate", "--policy", "fifo"], ["compare", "--policies", "fifo", "--no-plots"]])
def test_a_symlinked_out_is_followed_to_the_input(tmp_path, capsys, command):
    data = data_folder(tmp_path)
    os.symlink(data, "link")
    before = snapshot(data)
    code, _, err = run([*command, "--trace", "data/t.csv", "--out", "link", "--overwrite"], capsys)
    assert code == 2 and "--trace data/t.csv" in error_line(err)
    assert snapshot(data) == before and Path("link").is_symlink()


def test_simulate_overwrite_through_a_symlink_replaces_the_run_it_points_to(tmp_path, capsys):
    Path("t.csv").write_text(TRACE)
    assert run(["simulate", "--policy", "fifo", "--trace", "t.csv", "--timeline", "--out", "runs/a"], capsys)[0] == 0
    os.symlink(Path("runs/a").resolve(), "link")
    assert run(["simulate", "--policy", "sjf", "--trace", "t.csv", "--out", "link", "--overwrite"], capsys)[0] == 0
    assert Path("link").is_symlink()
    assert json.loads(Path("runs/a/metrics.json").read_text())["policy"] == "sjf"
    assert not Path("runs/a/timeline.csv").exists()
    assert sorted(p.name for p in Path("runs").iterdir()) == ["a"]  # no leftover


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_trace_convert_never_writes_over_its_input(tmp_path, capsys, overwrite):
    shutil.copy(HELIOS, "h.csv")
    os.symlink("h.csv", "link.csv")
    before = Path("h.csv").read_bytes()
    for out in ("h.csv", "link.csv", "./h.csv"):
        code, _, err = run(["trace", "convert", "--format", "helios", "--in", "h.csv", "--out", out, *overwrite],
                           capsys)
        assert code == 2 and "--in h.csv" in error_line(err)
    assert Path("h.csv").read_bytes() == before


def test_trace_convert_refuses_an_existing_file_without_overwrite(tmp_path, capsys):
    Path("t.csv").write_text("keep")
    argv = ["trace", "convert", "--format", "helios", "--in", HELIOS, "--out", "t.csv"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "--overwrite" in error_line(err) and Path("t.csv").read_text() == "keep"
    assert run([*argv, "--overwrite"], capsys)[0] == 0
    assert len(load_trace("t.csv")) > 0


def test_trace_generate_refuses_an_existing_file_without_overwrite(tmp_path, capsys):
    Path("t.csv").write_text("keep")
    code, _, err = run(["trace", "generate", "--out", "t.csv"], capsys)
    assert code == 2 and "--out t.csv" in error_line(err) and "--overwrite" in error_line(err)
    assert Path("t.csv").read_text() == "keep"
    assert run(["trace", "generate", "--out", "t.csv", "--overwrite"], capsys)[0] == 0
    assert load_trace("t.csv") == generate_trace("small-1d", 0)
    assert sorted(os.listdir()) == ["t.csv"]  # written atomically: no temporary file left


def test_compare_tensorboard_runs_are_replaced_not_added_to(tmp_path, capsys):
    Path("t.csv").write_text(TRACE)
    base = ["compare", "--policies", "fifo", "--no-plots", "--trace", "t.csv", "--tensorboard", "tb"]
    assert run([*base, "--out", "a"], capsys)[0] == 0
    first = sorted(Path("tb/fifo").iterdir())
    assert len(first) == 1
    code, _, err = run([*base, "--out", "b"], capsys)
    assert code == 2 and "--tensorboard tb" in error_line(err)
    assert run([*base, "--out", "c", "--overwrite"], capsys)[0] == 0
    second = sorted(Path("tb/fifo").iterdir())
    assert len(second) == 1 and second != first
    assert [p.name for p in Path("tb").iterdir()] == ["fifo"]


# ----------------------------------------------------------------------------- sweep: resume
@pytest.fixture
def fixed_clock(monkeypatch):
    """sim_wall_s (a wall-clock duration) is the one metric that differs between two runs;
    a fixed clock makes runs.csv comparable byte for byte."""
    import lyra_gym.sim.engine

    monkeypatch.setattr(lyra_gym.sim.engine, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))


@pytest.fixture
def counted(monkeypatch):
    calls: list[tuple[str, int]] = []
    real = sweep.run_one

    def run_one(spec, *args, **kwargs):
        calls.append((spec.policy, spec.seed))
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(sweep, "run_one", run_one)
    return calls


def _sweep_grid(path: Path, **extra) -> Path:
    Path("t.csv").write_text(TRACE)
    data = {"policies": ["fifo", "sjf"], "traces": ["t.csv", "preset:small-1d"], "seeds": [0, 1],
            "params": {"reclaim_grace_s": [0, 5]}, **extra}
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_interrupted_sweep_resumes_with_identical_results(tmp_path, capsys, fixed_clock, counted):
    grid = _sweep_grid(Path("g.yaml"), traces=["t.csv"])
    total = 2 * 2 * 2
    sweep.run_sweep(grid, "full", plots=False)
    assert len(counted) == total

    def interrupt_after_three(i: int) -> None:
        if len(counted) == total + 3:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(grid, "out", plots=False, on_done=interrupt_after_three)
    assert len(list(Path("out/sweep_runs").glob("run-*.json"))) == 3 and not Path("out/runs.csv").exists()
    assert json.loads(Path("out/sweep.json").read_text())["status"] == "interrupted"

    del counted[:]
    code, out, _ = run(["sweep", grid, "--out", "out", "--no-plots"], capsys)
    assert code == 0 and f"resumed: 3 of {total} runs already done" in out
    assert len(counted) == total - 3
    assert Path("out/runs.csv").read_bytes() == Path("full/runs.csv").read_bytes()
    assert json.loads(Path("out/sweep.json").read_text())["status"] == "complete"

    # a lost result, and a half-written one, are run again; the rest is kept
    Path("out/sweep_runs/run-00002.json").unlink()
    Path("out/sweep_runs/run-00005.json").write_text('{"grid_sha256": ')
    del counted[:]
    code, out, _ = run(["sweep", grid, "--out", "out", "--no-plots"], capsys)
    assert code == 0 and f"resumed: {total - 2} of {total} runs already done" in out and len(counted) == 2
    assert Path("out/runs.csv").read_bytes() == Path("full/runs.csv").read_bytes()

    # --overwrite reruns everything
    del counted[:]
    assert run(["sweep", grid, "--out", "out", "--no-plots", "--overwrite"], capsys)[0] == 0
    assert len(counted) == total
    assert Path("out/runs.csv").read_bytes() == Path("full/runs.csv").read_bytes()


def _without_wall_time(path: str) -> list[dict[str, str]]:
    import csv

    with open(path, newline="") as fh:
        return [{k: v for k, v in row.items() if k != "sim_wall_s"} for row in csv.DictReader(fh)]


def test_a_parallel_sweep_resumes_too(tmp_path, capsys):
    grid = _sweep_grid(Path("g.yaml"), traces=["t.csv"], params={})
    sweep.run_sweep(grid, "full", plots=False)

    def fail(i: int) -> None:
        raise RuntimeError("stop")
    with pytest.raises(RuntimeError, match="stop"):
        sweep.run_sweep(grid, "out", n_jobs=2, plots=False, on_done=fail)
    done = len(list(Path("out/sweep_runs").glob("run-*.json")))
    assert done == 1
    assert json.loads(Path("out/sweep.json").read_text())["status"] == "failed"
    code, out, _ = run(["sweep", grid, "--out", "out", "--no-plots"], capsys)
    assert code == 0 and "resumed: 1 of 4 runs already done" in out
    # worker processes have their own clock: sim_wall_s differs, every other number is the same
    assert _without_wall_time("out/runs.csv") == _without_wall_time("full/runs.csv")


def test_a_sweep_refuses_another_sweeps_folder_or_foreign_content(tmp_path, capsys, counted):
    grid = _sweep_grid(Path("g.yaml"), traces=["t.csv"], seeds=[0], params={})
    assert run(["sweep", grid, "--out", "out", "--no-plots"], capsys)[0] == 0
    other = _sweep_grid(Path("other.yaml"), traces=["t.csv"], seeds=[1], params={})
    code, _, err = run(["sweep", other, "--out", "out", "--no-plots"], capsys)
    assert code == 2 and "different sweep" in error_line(err)
    Path("t.csv").write_text(TRACE.replace("500.0", "501.0"))  # same grid, changed trace: another sweep
    code, _, err = run(["sweep", grid, "--out", "out", "--no-plots"], capsys)
    assert code == 2 and "different sweep" in error_line(err)
    Path("foreign").mkdir()
    Path("foreign/notes.txt").write_text("mine")
    code, _, err = run(["sweep", grid, "--out", "foreign", "--no-plots"], capsys)
    assert code == 2 and "--overwrite" in error_line(err)
    del counted[:]
    assert run(["sweep", grid, "--out", "foreign", "--no-plots", "--overwrite"], capsys)[0] == 0
    assert Path("foreign/notes.txt").read_text() == "mine" and len(counted) == 2
    code, _, err = run(["sweep", grid, "--out", ".", "--overwrite"], capsys)  # holds the sweep file
    assert code == 2 and "g.yaml" in error_line(err)


def test_a_sweep_never_writes_over_a_config_it_reads(tmp_path, capsys):
    data = data_folder(tmp_path)
    Path("g.yaml").write_text(f"policies: [fifo]\ntraces: ['{data / 't.csv'}']\nbase_config: '{data / 'c.yaml'}'\n")
    os.symlink(data, "link")
    before = snapshot(data)
    code, _, err = run(["sweep", "g.yaml", "--out", "link", "--overwrite"], capsys)
    assert code == 2 and "--out link: holds base_config" in error_line(err)
    assert snapshot(data) == before


# ----------------------------------------------------------------------------- fuzz: the invariant
COMMANDS = {
    "simulate": (["simulate", "--policy", "fifo", "--trace", "{data}/t.csv", "--config", "{data}/c.yaml"],
                 ["t.csv", "c.yaml"], "folder"),
    "compare": (["compare", "--policies", "fifo,sjf", "--no-plots", "--trace", "{data}/t.csv",
                 "--config", "{data}/c.yaml"], ["t.csv", "c.yaml"], "folder"),
    "sweep": (["sweep", "{data}/g.yaml", "--no-plots"], ["g.yaml", "t.csv"], "folder"),
    "generate": (["trace", "generate", "--preset", "small-1d"], [], "file"),
    "convert": (["trace", "convert", "--format", "helios", "--in", "{data}/h.csv"], ["h.csv"], "file"),
}
KINDS = ["fresh", "fresh-nested", "other-file", "input-file", "input-folder", "link-to-folder", "link-to-input",
         "under-file", "foreign-folder"]


def _expected(command: str, kind: str, overwrite: bool) -> int:
    _, inputs, target = COMMANDS[command]
    if kind in ("fresh", "fresh-nested"):
        return 0
    if kind == "under-file":
        return 2
    if kind in ("input-folder", "link-to-folder"):
        return 2  # holds an input, or a folder where a file is written
    if target == "folder":
        if kind in ("other-file", "input-file", "link-to-input"):
            return 2  # a file
        return 0 if overwrite and command != "simulate" else 2  # simulate would replace the folder as a whole
    if kind == "foreign-folder":
        return 2
    if kind in ("input-file", "link-to-input") and inputs:
        return 2  # is the input, overwrite or not
    return 0 if overwrite else 2


# 5 commands x 9 kinds x 2 = 90 cases: hypothesis stops once every one was tried
@settings(max_examples=int(os.environ.get("LYRA_FUZZ_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(command=st.sampled_from(sorted(COMMANDS)), kind=st.sampled_from(KINDS), overwrite=st.booleans())
@pytest.mark.slow
def test_fuzz_output_paths_never_touch_an_input(capsys, command, kind, overwrite):
    argv_template, inputs, target = COMMANDS[command]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = data_folder(root)
        (root / "other.txt").write_text("other")
        (root / "foreign").mkdir()
        (root / "foreign" / "notes.txt").write_text("notes")
        input_file = data / (inputs[0] if inputs else "t.csv")
        os.symlink(data, root / "link")
        os.symlink(input_file, root / "link-file")
        out = {"fresh": root / ("new.csv" if target == "file" else "new"), "fresh-nested": root / "a" / "b" / "new",
               "other-file": root / "other.txt", "input-file": input_file, "input-folder": data,
               "link-to-folder": root / "link", "link-to-input": root / "link-file",
               "under-file": root / "other.txt" / "x", "foreign-folder": root / "foreign"}[kind]
        argv = [t.replace("{data}", str(data)) for t in argv_template] + ["--out", str(out)]
        argv += ["--overwrite"] if overwrite else []
        before = snapshot(root)
        try:
            code = main(argv)
        except BaseException as err:  # the point of the test
            pytest.fail(f"main({argv!r}) raised {type(err).__name__}: {err}")
        captured = capsys.readouterr()
        after = snapshot(root)
        assert "Traceback" not in captured.err, (argv, captured.err)
        assert code == _expected(command, kind, overwrite), (argv, code, captured.err)
        if code == 2:
            error_line(captured.err)
        for name in inputs:  # the invariant: what the command reads is never changed
            assert after[f"data/{name}"] == before[f"data/{name}"], argv
        changed = {k for k in before if after.get(k) != before[k]}
        if target == "file" and code == 0 and kind in ("other-file", "input-file"):
            assert changed == {str(out.relative_to(root))}, (argv, changed)  # not an input: replaced, as asked
        elif target == "file" and code == 0 and kind == "link-to-input":
            assert not changed and not out.is_symlink(), argv  # the link is replaced, never followed
        else:
            assert not changed, (argv, changed)  # nothing is ever emptied or overwritten
        assert not [p for p in root.rglob("*") if ".tmp-" in p.name], argv  # no temporary leftover


def test_jobs_csv_is_what_a_dict_writer_writes(tmp_path):
    """jobs.csv is written row by row in JOB_COLUMNS order, None as an empty cell: byte for byte
    what csv.DictWriter wrote before (unfinished jobs have None times)."""
    import csv
    import dataclasses
    import io

    from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
    from lyra_gym.run.metrics import JOB_COLUMNS
    from lyra_gym.run.simulate import simulate, write_result
    from lyra_gym.workloads.tracegen import generate_trace

    jobs = generate_trace("small-1d", 0)[:60]
    config = SimConfig(cluster=ClusterConfig(training=(ServerGroup(1, "v100", 8),), inference=ServerGroup(1, "t4", 4)))
    result = simulate(jobs, "fifo", config, seed=0)
    rows = [dict(row) for row in result.jobs]
    for row in rows[::3]:  # as an unfinished job's row reads
        row.update(finish_time=None, jct_s=None, finished=0)
    result = dataclasses.replace(result, jobs=rows)
    expected = io.StringIO(newline="")
    writer = csv.DictWriter(expected, fieldnames=JOB_COLUMNS)
    writer.writeheader()
    for row in result.jobs:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    write_result(result, tmp_path / "run")
    assert (tmp_path / "run" / "jobs.csv").read_bytes() == expected.getvalue().encode()
