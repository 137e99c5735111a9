"""Hardening of the command line (issue 15): jobs that can never fit, Ctrl-C during a parallel
comparison, output folders, seeds, ``model:`` typos, unreadable traces, and a fuzz of the
arguments: every error is one line on stderr with exit code 2, never a traceback."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_gym.cli import app as cli
from lyra_gym.cli.app import main
from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
from lyra_gym.model.feasibility import InfeasibleJobError, capacity, check_feasibility, drop_infeasible
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import SimResult, simulate, write_result
from lyra_gym.workloads.realtraces import load_philly
from lyra_gym.workloads.trace import TraceError, load_trace, write_trace
from lyra_gym.workloads.tracegen import generate_trace

ROOT = Path(__file__).resolve().parents[2]
RUN_FILES = {"metrics.json", "jobs.csv", "config.json", "policy.json", "run.json"}
HEADER = "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus\n"


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TQDM_DISABLE", "1")


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "small.csv"
    write_trace(generate_trace("small-1d", 0)[:25], path)
    return path


@pytest.fixture(scope="module")
def huge_trace(tmp_path_factory) -> Path:
    """The small trace plus one job of 300 GPUs: more than the default cluster's 128 + 128."""
    path = tmp_path_factory.mktemp("trace") / "huge.csv"
    jobs = generate_trace("small-1d", 0)[:12]
    jobs.insert(3, JobSpec("giant", jobs[2].submit_time, 300, 600.0, "resnet50", False, 300, 300))
    write_trace(jobs, path)
    return path


def run(argv, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(err: str) -> str:
    """The single ``lyra-gym: error:`` line of ``err`` (warnings aside); no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("lyra-gym: warning:")]
    assert len(lines) == 1 and lines[0].startswith("lyra-gym: error:"), err
    return lines[0]


def no_simulation(monkeypatch):
    """Make any simulation fail the test: errors must come before the first run."""
    def boom(*args, **kwargs):
        raise AssertionError("a simulation started")
    monkeypatch.setattr(cli, "simulate", boom)
    monkeypatch.setattr(cli, "run_grid", boom)


# ----------------------------------------------------------------------------- 3. infeasible jobs
def test_feasibility_rule():
    mixed = SimConfig(cluster=ClusterConfig((ServerGroup(2, "v100", 8), ServerGroup(1, "a100", 4)),
                                            ServerGroup(3, "t4", 8)), allow_mixed_gpu_types=True)
    assert capacity(mixed) == (16 + 4 + 24, 20)
    split = SimConfig(cluster=mixed.cluster, allow_mixed_gpu_types=False)
    assert capacity(split) == (24, 16)  # the t4 inference pool alone is the largest single type
    jobs = [JobSpec("a", 0, 20, 1, "ncf", False, 20, 20), JobSpec("b", 0, 30, 1, "ncf", True, 25, 40),
            JobSpec("c", 0, 50, 1, "ncf", True, 45, 60), JobSpec("d", 0, 4, 1, "ncf", False, 4, 4)]
    result = check_feasibility(jobs, mixed)
    assert [i.job_id for i in result.infeasible] == ["c"] and result.infeasible[0].need == 45
    assert result.needs_loan == ("b",)  # elastic: judged by min_gpus (25 > 20 training GPUs, <= 44)
    assert [i.job_id for i in check_feasibility(jobs, split).infeasible] == ["b", "c"]
    with pytest.raises(InfeasibleJobError, match="'c'.*45"):
        drop_infeasible(jobs, mixed, skip=False)
    kept, _ = drop_infeasible(jobs, mixed, skip=True)
    assert [j.job_id for j in kept] == ["a", "b", "d"]


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_job_larger_than_the_cluster_is_refused(tmp_path, capsys, monkeypatch, huge_trace, command):
    no_simulation(monkeypatch)
    policy = ["--policy", "fifo"] if command == "simulate" else ["--policies", "fifo,sjf"]
    code, _, err = run([command, *policy, "--trace", huge_trace, "--out", tmp_path / "o"], capsys)
    line = one_line_error(err)
    most = capacity(SimConfig())[0]  # 256 when jobs may mix GPU types (training + loaned inference), else 128
    assert code == 2 and "giant" in line and "300" in line and f"at most {most}" in line and "--skip-infeasible" in line
    assert not (tmp_path / "o").exists()


def test_skip_infeasible_drops_counts_and_warns(tmp_path, capsys, huge_trace):
    code, _, err = run(["simulate", "--policy", "fifo", "--trace", huge_trace, "--skip-infeasible",
                        "--out", tmp_path / "s"], capsys)
    assert code == 0 and "warning" in err and "giant" in err
    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text())
    assert metrics["jobs_skipped_infeasible"] == 1 and metrics["jobs_total"] == 12
    assert metrics["jobs_finished"] == 12  # nothing is stuck behind the giant any more
    assert json.loads((tmp_path / "s" / "run.json").read_text())["trace"]["skipped_infeasible"] == ["giant"]
    code, _, _ = run(["compare", "--policies", "fifo,sjf", "--trace", huge_trace, "--skip-infeasible",
                      "--no-plots", "--out", tmp_path / "c"], capsys)
    assert code == 0
    for policy in ("fifo", "sjf"):
        assert json.loads((tmp_path / "c" / policy / "seed0" / "metrics.json").read_text())[
            "jobs_skipped_infeasible"] == 1


def test_skip_infeasible_that_would_drop_every_job_is_an_error(tmp_path, capsys):
    trace = tmp_path / "giants.csv"
    write_trace([JobSpec("g1", 0, 1000, 60.0, "resnet50", False, 1000, 1000),
                 JobSpec("g2", 5, 2000, 60.0, "resnet50", False, 2000, 2000)], trace)
    code, _, err = run(["simulate", "--policy", "fifo", "--trace", trace, "--skip-infeasible",
                        "--out", tmp_path / "s"], capsys)
    line = one_line_error(err)
    assert code == 2 and "all 2 jobs" in line and "g1" in line
    assert not (tmp_path / "s").exists()


def test_sweep_checks_every_trace_against_every_config(tmp_path, capsys, small_trace):
    (tmp_path / "tiny.yaml").write_text("cluster: {training: [{count: 1, gpu_type: v100, gpus_per_server: 4}]}\n")
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"policies: [fifo]\ntraces: ['{small_trace}']\nbase_config: tiny.yaml\n"
                    "params: {cluster.inference.count: [0, 1]}\n")
    code, _, err = run(["sweep", grid, "--out", tmp_path / "o"], capsys)
    assert code == 2 and "--skip-infeasible" in one_line_error(err)
    assert not (tmp_path / "o").exists()
    code, _, _ = run(["sweep", grid, "--skip-infeasible", "--no-plots", "--out", tmp_path / "o"], capsys)
    assert code == 0
    assert "jobs_skipped_infeasible" in (tmp_path / "o" / "runs.csv").read_text().splitlines()[0]


# ----------------------------------------------------------------------------- 4. interrupts, atomic folders
@pytest.mark.slow
def test_sigint_during_parallel_compare_exits_at_once_and_leaves_whole_folders(tmp_path):
    out = tmp_path / "cmp"
    argv = [sys.executable, "-m", "lyra_gym.cli", "compare", "--policies", "fifo,sjf,tiresias,lyra",
            "--seeds", ",".join(str(s) for s in range(40)), "--jobs", "2", "--no-plots",
            "--trace", "traces/default.csv", "--out", str(out)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "TQDM_DISABLE": "1"})
    try:
        deadline = time.monotonic() + 120
        while not any(out.glob("*/seed*")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the comparison ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert elapsed < 10
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "lyra-gym: interrupted"
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    folders = sorted(p for p in out.glob("*/seed*"))
    assert folders
    for folder in folders:
        assert RUN_FILES <= {p.name for p in folder.iterdir()}, folder
        run_json = json.loads((folder / "run.json").read_text())
        assert {p.name for p in folder.iterdir()} == set(run_json["files"])
        json.loads((folder / "metrics.json").read_text())
    manifest = json.loads((out / "compare.json").read_text())
    assert manifest["status"] == "interrupted"
    assert sorted(r["folder"] for r in manifest["runs"]) == sorted(str(f.relative_to(out)) for f in folders)
    # no worker outlives its parent (a dead one not yet reaped, state Z, does not count)
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-o", "stat=,args=", "-g", str(proc.pid)], capture_output=True, text=True)
    assert not [line for line in ps.stdout.splitlines() if line.strip() and not line.strip().startswith("Z")]


def test_keyboard_interrupt_in_process_exits_130_with_one_line(tmp_path, capsys, monkeypatch, small_trace):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "simulate", interrupted)
    code, _, err = run(["simulate", "--policy", "fifo", "--trace", small_trace, "--out", tmp_path / "o"], capsys)
    assert code == 130 and err == "lyra-gym: interrupted\n"


def test_run_folder_is_written_atomically(tmp_path, small_trace, monkeypatch):
    jobs = load_trace(small_trace)
    result = simulate(jobs, "fifo", seed=0, record_timeline=True)
    out = tmp_path / "run"
    write_result(result, out)
    assert RUN_FILES | {"timeline.csv", "placements.csv"} == {p.name for p in out.iterdir()}
    # a rewrite without a timeline replaces the folder as a whole: no stale timeline.csv or placements.csv
    plain = SimResult(result.policy, result.seed, result.metrics, result.jobs, result.config)
    write_result(plain, out)
    assert RUN_FILES == {p.name for p in out.iterdir()}
    # interrupted half-way: the old folder stays as it was, no temporary folder is left
    import lyra_gym.run.simulate as sim

    def half(result, folder, info):
        (folder / "metrics.json").write_text("{")
        raise KeyboardInterrupt
    monkeypatch.setattr(sim, "_write_files", half)
    with pytest.raises(KeyboardInterrupt):
        write_result(result, out)
    assert RUN_FILES == {p.name for p in out.iterdir()}
    assert json.loads((out / "metrics.json").read_text())["policy"] == "fifo"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_compare_json_lists_every_run_it_covers(tmp_path, capsys, small_trace):
    code, _, _ = run(["compare", "--policies", "fifo,sjf", "--seeds", "0,1", "--jobs", "2", "--no-plots",
                      "--trace", small_trace, "--out", tmp_path / "o"], capsys)
    assert code == 0
    manifest = json.loads((tmp_path / "o" / "compare.json").read_text())
    assert manifest["status"] == "complete"
    assert sorted((r["policy"], r["seed"]) for r in manifest["runs"]) == [("fifo", 0), ("fifo", 1), ("sjf", 0),
                                                                         ("sjf", 1)]


# ----------------------------------------------------------------------------- 5. outputs
@pytest.mark.parametrize("case", ["file", "under-file", "non-empty"])
def test_bad_out_is_refused_before_any_simulation(tmp_path, capsys, monkeypatch, small_trace, case):
    no_simulation(monkeypatch)
    (tmp_path / "f").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("old")
    out = {"file": tmp_path / "f", "under-file": tmp_path / "f" / "sub", "non-empty": tmp_path / "full"}[case]
    for argv in (["simulate", "--policy", "fifo"], ["compare", "--policies", "fifo"]):
        code, _, err = run([*argv, "--trace", small_trace, "--out", out], capsys)
        line = one_line_error(err)
        assert code == 2 and "--out" in line
        if case == "non-empty":
            assert "--overwrite" in line
    assert (tmp_path / "full" / "keep.txt").read_text() == "old"


def test_unwritable_out_is_refused(tmp_path, capsys, monkeypatch, small_trace):
    no_simulation(monkeypatch)
    if os.geteuid() == 0:  # root writes into any folder of a normal file system; /proc refuses everyone
        if not Path("/proc/self").exists():
            pytest.skip("running as root without /proc")
        code, _, err = run(["simulate", "--policy", "fifo", "--trace", small_trace, "--out", "/proc/lyra-out"], capsys)
        assert code == 2 and "cannot write" in one_line_error(err)
        return
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code, _, err = run(["simulate", "--policy", "fifo", "--trace", small_trace, "--out", locked / "o"], capsys)
        assert code == 2 and "cannot write" in one_line_error(err)
    finally:
        locked.chmod(0o755)


def test_overwrite_replaces_only_the_commands_own_files(tmp_path, capsys, small_trace):
    """Issue 23: --overwrite empties nothing. simulate replaces its run folder as a whole (an older
    run's timeline.csv goes with it); compare replaces its own files and keeps the rest."""
    out = tmp_path / "o"
    base = ["--trace", small_trace, "--out", out]
    assert run(["simulate", "--policy", "fifo", "--timeline", *base], capsys)[0] == 0
    assert (out / "timeline.csv").exists()
    assert run(["simulate", "--policy", "fifo", *base], capsys)[0] == 2  # not empty
    assert run(["simulate", "--policy", "fifo", "--overwrite", *base], capsys)[0] == 0
    assert not (out / "timeline.csv").exists()
    cmp = tmp_path / "c"
    assert run(["compare", "--policies", "fifo,sjf", "--no-plots", "--trace", small_trace, "--out", cmp], capsys)[0] == 0
    (cmp / "notes.txt").write_text("mine")
    assert run(["compare", "--policies", "sjf", "--no-plots", "--overwrite", "--trace", small_trace,
                "--out", cmp], capsys)[0] == 0
    assert (cmp / "fifo" / "seed0").is_dir() and (cmp / "sjf" / "seed0").is_dir()  # kept, and replaced
    assert (cmp / "notes.txt").read_text() == "mine"
    manifest = json.loads((cmp / "compare.json").read_text())
    assert manifest["policies"] == ["sjf"] and [r["policy"] for r in manifest["runs"]] == ["sjf"]


def test_overwrite_refuses_a_folder_it_would_lose_files_of(tmp_path, capsys, monkeypatch, small_trace):
    """simulate replaces its run folder as a whole: a folder holding anything but a run's files,
    or the working folder, is refused even with --overwrite."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "precious.txt").write_text("keep")
    monkeypatch.chdir(work)
    code, _, err = run(["simulate", "--policy", "fifo", "--trace", small_trace, "--overwrite", "--out", "."], capsys)
    assert code == 2 and "precious.txt" in one_line_error(err)
    (work / "precious.txt").unlink()
    code, _, err = run(["simulate", "--policy", "fifo", "--trace", small_trace, "--overwrite", "--out", "."], capsys)
    assert code == 2 and "working folder" in one_line_error(err)
    assert (tmp_path / "work").is_dir()


def test_every_run_folder_records_its_trace_config_and_policy(tmp_path, capsys, small_trace):
    import hashlib

    config = tmp_path / "c.yaml"
    config.write_text("reclaim_grace_s: 5\n")
    assert run(["compare", "--policies", "fifo", "--policy-param", "fifo.backfill=true", "--no-plots",
                "--config", config, "--trace", small_trace, "--out", tmp_path / "o"], capsys)[0] == 0
    record = json.loads((tmp_path / "o" / "fifo" / "seed0" / "run.json").read_text())
    assert record["trace"]["path"] == str(small_trace)
    assert record["trace"]["sha256"] == hashlib.sha256(small_trace.read_bytes()).hexdigest()
    assert record["config_file"] == str(config) and record["config"]["reclaim_grace_s"] == 5
    assert record["policy"] == "fifo" and record["seed"] == 0 and record["policy_params"] == {"backfill": True}


# ----------------------------------------------------------------------------- 9. smaller findings
@pytest.mark.parametrize("argv", [
    ["simulate", "--policy", "fifo", "--seed", "-1"],
    ["compare", "--policies", "fifo", "--seeds", "0,-1"],
    ["compare", "--policies", "fifo", "--seeds", "1,1"],
    ["trace", "generate", "--seed", "-1", "--out", "x.csv"],
    ["simulate", "--policy", "fifo", "--no-such-flag"],
    ["compare", "--jobs", "-2"],
])
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, monkeypatch, argv):
    no_simulation(monkeypatch)
    code, _, err = run([*argv, "--out", tmp_path / "o"] if argv[0] != "trace" else argv, capsys)
    assert code == 2
    one_line_error(err)


def test_model_typo_is_found_before_any_run(tmp_path, capsys, monkeypatch, small_trace):
    no_simulation(monkeypatch)
    code, _, err = run(["compare", "--policies", "fifo,sjf,model:runs/no-such-run/model.zip", "--trace",
                        small_trace, "--out", tmp_path / "o"], capsys)
    assert code == 2 and "runs/no-such-run/model.zip" in one_line_error(err)
    assert not (tmp_path / "o").exists()


def test_duplicate_philly_ids_on_one_line_are_an_error(tmp_path, capsys):
    record = {"status": "Pass", "vc": "a", "jobid": "app_1", "user": "u", "submitted_time": "2017-10-03 10:00:00",
              "attempts": [{"start_time": "2017-10-03 10:00:05", "end_time": "2017-10-03 11:00:00",
                            "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}
    path = tmp_path / "philly.json"
    path.write_text(json.dumps([record, dict(record)]))  # one line, as a minified dump
    with pytest.raises(TraceError, match=r"duplicate job id 'app_1' \(record \[1\]\)"):
        load_philly(path)
    code, _, err = run(["trace", "convert", "--format", "philly", "--in", path, "--out", tmp_path / "t.csv"], capsys)
    assert code == 2 and "app_1" in one_line_error(err)


@pytest.mark.parametrize("kind", ["directory", "gzip", "latin-1", "binary"])
def test_unreadable_trace_is_a_one_line_error_naming_it(tmp_path, capsys, small_trace, kind):
    if kind == "directory":
        trace = tmp_path / "dir.csv"
        trace.mkdir()
    else:
        trace = tmp_path / f"{kind}.csv"
        text = small_trace.read_text()
        data = {"gzip": lambda: gzip.compress(text.encode()),
                "latin-1": lambda: (text + "café,9,1,10,resnet50,0,,\n").encode("latin-1"),
                "binary": lambda: b"\x00\x01\x02" * 10}[kind]()
        trace.write_bytes(data)
    with pytest.raises(TraceError, match=str(trace.name)):
        load_trace(trace)
    for argv in (["simulate", "--policy", "fifo"], ["compare", "--policies", "fifo"]):
        code, _, err = run([*argv, "--trace", trace, "--out", tmp_path / "o"], capsys)
        assert code == 2 and trace.name in one_line_error(err)
    code, _, err = run(["trace", "stats", trace], capsys)
    assert code == 2 and trace.name in one_line_error(err)
    if kind == "latin-1":
        assert ":27:" in err  # the line of the first non-UTF-8 byte


# ----------------------------------------------------------------------------- fuzz
@pytest.fixture(scope="module")
def fuzz_files(tmp_path_factory, small_trace, huge_trace):
    base = tmp_path_factory.mktemp("fuzz")
    (base / "a-file").write_text("x")
    (base / "a-dir").mkdir()
    (base / "latin1.csv").write_bytes(HEADER.encode() + "é,1,1,10,ncf,0,,\n".encode("latin-1"))
    (base / "trace.gz").write_bytes(gzip.compress(small_trace.read_bytes()))
    (base / "bad.yaml").write_text("cluster: [\n")
    (base / "list.yaml").write_text("- 1\n")
    (base / "small.yaml").write_text("cluster: {training: [{count: 1, gpu_type: v100, gpus_per_server: 2}]}\n")
    (base / "grid.yaml").write_text(f"policies: [fifo]\ntraces: ['{small_trace}']\nseeds: [0]\n"
                                    "params: {reclaim_grace_s: [0, 5]}\n")
    return {"small": str(small_trace), "huge": str(huge_trace), **{k: str(base / k) for k in (
        "a-file", "a-dir", "latin1.csv", "trace.gz", "bad.yaml", "list.yaml", "small.yaml", "grid.yaml")},
        "missing": str(base / "missing.csv"), "under-file": str(base / "a-file" / "x")}


COMMANDS = [["simulate", "--policy", "fifo"], ["compare", "--policies", "fifo", "--no-plots"],
            ["sweep", "{grid.yaml}", "--no-plots"], ["trace", "stats", "{small}"], ["policies"],
            ["trace", "generate"]]
FLAGS = ["--policy", "--policies", "--trace", "--config", "--seed", "--seeds", "--out", "--jobs",
         "--policy-param", "--backend", "--preset", "--address", "--tensorboard"]
SWITCHES = ["--overwrite", "--skip-infeasible", "--timeline", "--no-plots", "--json", "--help"]
VALUES = ["fifo", "sjf", "fifo,sjf", "fifo,fifo", "bogus", "model:no/such.zip", "rllib:", "", "0", "1", "-1", "x",
          "1e3", "0,1", "0,-1", "99999999999999999999", "fifo.backfill=true", "fifo.nope=1", "sjf.x", "=",
          "local", "ray", "small-1d", "nope", "auto", "\n", "a b", "--", "-",
          "{small}", "{huge}", "{a-file}", "{a-dir}", "{latin1.csv}", "{trace.gz}", "{bad.yaml}", "{list.yaml}",
          "{small.yaml}", "{missing}", "{under-file}", "{grid.yaml}"]


@settings(max_examples=int(os.environ.get("LYRA_FUZZ_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(command=st.sampled_from(COMMANDS),
       extra=st.lists(st.one_of(st.tuples(st.sampled_from(FLAGS), st.sampled_from(VALUES)),
                                st.tuples(st.sampled_from(FLAGS), st.text(alphabet="-.,:=/x0é \t\n", max_size=6)),
                                st.sampled_from(SWITCHES).map(lambda s: (s,)),
                                st.sampled_from(VALUES).map(lambda s: (s,))),
                      max_size=4).map(lambda items: [t for item in items for t in item]))
def test_fuzz_cli_arguments(fuzz_files, capsys, command, extra):
    with tempfile.TemporaryDirectory() as tmp:
        def fill(token: str) -> str:
            for key, path in fuzz_files.items():
                token = token.replace("{" + key + "}", path)
            return token
        argv = [fill(t) for t in command]
        if argv[0] in ("simulate", "compare", "sweep") or argv[:2] == ["trace", "generate"]:
            out = os.path.join(tmp, "out.csv" if argv[0] == "trace" else "out")
            argv += ["--out", out]
            if argv[0] != "sweep" and argv[0] != "trace":
                argv += ["--trace", fuzz_files["small"]]
        if "ray" in extra:  # never start Ray here
            extra = [t for t in extra if t != "ray"]
        argv += [fill(t) for t in extra]
        cwd = os.getcwd()
        os.chdir(tmp)  # junk values of --out, --tensorboard ... land in the temporary folder
        try:
            code = main(argv)
        except BaseException as err:  # the point of the test
            pytest.fail(f"main({argv!r}) raised {type(err).__name__}: {err}")
        finally:
            os.chdir(cwd)
        err = capsys.readouterr().err
    assert "Traceback" not in err, (argv, err)
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        one_line_error(err)
