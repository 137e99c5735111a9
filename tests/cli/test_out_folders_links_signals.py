"""Issue 40, items 2, 3, 9 (``--seeds``), 11 (compare/sweep) and 13: run folders reached through a
symbolic link or inside ``.git``, two commands into one ``--out``, SIGTERM, leftovers of an
interrupted command, and Ray failures. Each case failed on the code before the fix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lyra_gym.cli.app import main
from lyra_gym.outputs import OutputError, check_out_file, check_out_folder, replace_folder
from lyra_gym.workloads.trace import write_trace
from lyra_gym.workloads.tracegen import generate_trace
from tests.cli.test_output_rule import TRACE

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    Path("t.csv").write_text(TRACE)


def run(argv, capsys) -> tuple[int, str]:
    """``main(argv)``: the exit code and stderr, which never holds a traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return code, err


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("lyra-gym: error: "), err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def compare(out, *extra) -> list[str]:
    return ["compare", "--policies", "fifo", "--seeds", "0", "--no-plots", "--trace", "t.csv", "--out", out, *extra]


# ----------------------------------------------------------------------------- 2. symbolic links, .git
@pytest.mark.parametrize("link", ["policy-folder", "run-folder"])
def test_overwrite_never_follows_a_symlinked_run_folder_into_another_comparison(capsys, link):
    assert run(compare("a"), capsys)[0] == 0
    Path("t2.csv").write_text(TRACE)  # same jobs, another path: a run written by b differs from a's
    assert run(compare("b")[:-3] + ["t2.csv", "--out", "b"], capsys)[0] == 0
    before = snapshot(Path("a"))
    if link == "policy-folder":
        os.rename("b/fifo", "b/fifo-old")
        os.symlink(Path("a/fifo").resolve(), "b/fifo")
        shown = "b/fifo"
    else:
        os.rename("b/fifo/seed0", "b/fifo/seed0-old")
        os.symlink(Path("a/fifo/seed0").resolve(), "b/fifo/seed0")
        shown = "b/fifo/seed0"
    code, err = run(compare("b")[:-3] + ["t2.csv", "--out", "b", "--overwrite"], capsys)
    assert code == 2
    assert f"{shown} is a symbolic link" in one_line(err)
    assert snapshot(Path("a")) == before  # the other comparison's run is untouched


def test_replace_folder_refuses_a_symbolic_link(tmp_path):
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "keep.txt").write_text("keep")
    (tmp_path / "new").mkdir()
    os.symlink(tmp_path / "target", tmp_path / "link")
    with pytest.raises(OutputError, match="symbolic link"):
        replace_folder(tmp_path / "new", tmp_path / "link")
    assert (tmp_path / "target" / "keep.txt").read_text() == "keep" and (tmp_path / "link").is_symlink()


@pytest.mark.parametrize("where", [".git/out", ".git/objects/x", "link/out"])
def test_an_out_inside_a_git_folder_is_refused(capsys, where):
    Path(".git/objects").mkdir(parents=True)
    os.symlink(Path(".git").resolve(), "link")  # a symbolic link does not hide it
    with pytest.raises(OutputError, match=r"inside a \.git folder"):
        check_out_folder(where)
    with pytest.raises(OutputError, match=r"inside a \.git folder"):
        check_out_file(f"{where}.csv")
    code, err = run(compare(where), capsys)
    assert code == 2 and "inside a .git folder" in one_line(err)
    assert sorted(p.name for p in Path(".git").rglob("*")) == ["objects"]  # nothing written, nothing left


# ----------------------------------------------------------------------------- 3. one command per folder
@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_a_folder_in_use_is_refused_with_one_line(capsys, command):
    from lyra_gym.outputs import locked_folder

    Path("grid.yaml").write_text("policies: [fifo]\ntraces: [t.csv]\nseeds: [0]\n")
    argv = compare("out") if command == "compare" else ["sweep", "grid.yaml", "--no-plots", "--out", "out"]
    with locked_folder("out"):  # another command holds it
        code, err = run(argv, capsys)
    assert code == 2
    assert one_line(err) == (f"lyra-gym: error: --out out: in use by another lyra-gym command (pid {os.getpid()}); "
                             f"wait for it to finish, or choose another --out")
    assert not Path("out").exists()  # nothing written
    assert not [p for p in Path(".").iterdir() if "lock" in p.name]  # the lock file goes with its holder
    assert run(argv, capsys)[0] == 0  # free again


@pytest.mark.slow
def test_two_compares_started_at_once_into_one_new_folder(tmp_path):
    """The race of the issue (both exited 0 in 6 of 12 starts): exactly one comparison runs."""
    write_trace(generate_trace("small-1d", 0), tmp_path / "m.csv")  # read between the check and the first write
    argv = [sys.executable, "-m", "lyra_gym.cli", "compare", "--policies", "fifo,sjf", "--seeds", "0,1,2",
            "--no-plots", "--trace", "m.csv", "--out", "same"]
    procs = [subprocess.Popen([*argv[:5], policies, *argv[6:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for policies in ("fifo,sjf", "sjf,fifo")]
    outcomes = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in outcomes) == [0, 2], outcomes
    refused = next(err for code, err in outcomes if code == 2)
    assert "in use by another lyra-gym command" in refused or "exists and is not empty" in refused, refused
    manifest = json.loads(Path("same/compare.json").read_text())
    winner = "fifo,sjf" if outcomes[0][0] == 0 else "sjf,fifo"
    assert manifest["status"] == "complete" and manifest["policies"] == winner.split(",")
    assert len(manifest["runs"]) == 6


# ----------------------------------------------------------------------------- 9. --seeds
@pytest.mark.parametrize("seeds, item", [("0,,1", 2), ("0,1,", 3), (",0", 1)])
def test_an_empty_seed_is_an_error_naming_seeds(capsys, seeds, item):
    code, err = run(compare("out")[:4] + [seeds] + compare("out")[5:], capsys)
    assert code == 2
    assert one_line(err) == f"lyra-gym: error: --seeds {seeds!r}: item {item} is empty (a comma-separated list)"
    assert not Path("out").exists()


# ----------------------------------------------------------------------------- 11. SIGTERM, leftovers
def _terminate_when_running(argv: list[str], started) -> tuple[subprocess.Popen, str]:
    """Start ``argv``, send SIGTERM to it alone once ``started()`` holds, return it and its stderr."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "TQDM_DISABLE": "1"})
    try:
        deadline = time.monotonic() + 120
        while not started() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the command ended before it could be terminated"
        proc.send_signal(signal.SIGTERM)  # `kill PID`: the command alone, not its process group
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc, err


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM and process groups are POSIX")
@pytest.mark.slow
def test_sigterm_during_parallel_compare_is_an_interruption():
    argv = [sys.executable, "-m", "lyra_gym.cli", "compare", "--policies", "fifo,sjf", "--jobs", "2",
            "--seeds", ",".join(str(s) for s in range(40)), "--no-plots", "--trace", str(ROOT / "traces/default.csv"),
            "--out", "cmp"]
    proc, err = _terminate_when_running(argv, lambda: any(Path("cmp").glob("*/seed*")))
    assert proc.returncode == 130, err
    assert err == "lyra-gym: interrupted\n"
    assert json.loads(Path("cmp/compare.json").read_text())["status"] == "interrupted"
    assert not [p for p in Path("cmp").rglob("*") if ".tmp-" in p.name]
    time.sleep(0.5)  # no worker outlives the command (a dead one not yet reaped, state Z, does not count)
    ps = subprocess.run(["ps", "-o", "stat=,args=", "-g", str(proc.pid)], capture_output=True, text=True)
    assert not [line for line in ps.stdout.splitlines() if line.strip() and not line.strip().startswith("Z")]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is POSIX")
def test_sigterm_during_sweep_is_an_interruption():
    Path("grid.yaml").write_text(f"policies: [fifo, sjf]\ntraces: ['{ROOT / 'traces/default.csv'}']\n"
                                 f"seeds: {list(range(40))}\n")
    argv = [sys.executable, "-m", "lyra_gym.cli", "sweep", "grid.yaml", "--no-plots", "--out", "sw"]
    proc, err = _terminate_when_running(argv, lambda: any(Path("sw/sweep_runs").glob("run-*.json")))
    assert proc.returncode == 130, err
    assert err == "lyra-gym: interrupted\n"
    assert json.loads(Path("sw/sweep.json").read_text())["status"] == "interrupted"
    assert not [p for p in Path("sw").rglob("*") if ".tmp-" in p.name]


def _interrupt_as_it_returns(monkeypatch, name: str, when) -> list[str]:
    """Patch ``os.<name>`` so that, once the call has done its work and ``when(args)`` holds, a
    SIGINT arrives as it returns (where a SIGTERM landed in CI: the folder made, the ``try`` not
    yet entered); returns the paths it was called with."""
    real, seen = getattr(os, name), []

    def call(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(str(args[0]))
        if when(args):
            signal.raise_signal(signal.SIGINT)  # handled as the call returns: KeyboardInterrupt
        return out

    monkeypatch.setattr(os, name, call)
    return seen


def test_an_interrupt_as_a_run_folder_is_made_leaves_nothing(monkeypatch):
    from lyra_gym.run.simulate import simulate, write_result
    from lyra_gym.workloads.trace import load_trace

    result = simulate(load_trace("t.csv"), "fifo", seed=0)
    seen = _interrupt_as_it_returns(monkeypatch, "mkdir", lambda args: ".tmp-" in str(args[0]))
    with pytest.raises(KeyboardInterrupt):
        write_result(result, Path("runs/seed0"))
    assert seen and ".seed0.tmp-" in seen[-1]
    assert list(Path("runs").iterdir()) == []


def test_an_interrupt_as_a_stage_folder_is_made_leaves_nothing(monkeypatch):
    from lyra_gym.outputs import staged_folder

    seen = _interrupt_as_it_returns(monkeypatch, "mkdir", lambda args: ".stage.tmp-" in str(args[0]))
    Path("out").mkdir()
    with pytest.raises(KeyboardInterrupt), staged_folder("out"):
        pass
    assert seen and list(Path("out").iterdir()) == []


def test_an_interrupt_between_the_renames_of_a_replaced_folder_waits_for_both(monkeypatch):
    """The old folder renamed aside, the interrupt arrives: it is handled once the new folder is in
    place, never with no folder at the target or the old one left aside."""
    for name in ("new", "target"):
        Path(name).mkdir()
        (Path(name) / "metrics.json").write_text(name)
    seen = _interrupt_as_it_returns(monkeypatch, "rename", lambda args: True)
    with pytest.raises(KeyboardInterrupt):
        replace_folder("new", "target")
    assert len(seen) == 2  # both renames ran before the interrupt was handled
    assert sorted(p.name for p in Path(".").iterdir()) == ["t.csv", "target"]
    assert (Path("target") / "metrics.json").read_text() == "new"


LEFTOVERS = [".stage.tmp-99999999-ab_cd012", ".compare.json.tmp-99999999-0123abcd",  # of a process that is gone
             "fifo/.seed0.tmp-99999999-deadbeef", "fifo/.seed0.old.tmp-99999999-cafef00d"]


def _plant(folder: Path) -> None:
    for name in LEFTOVERS:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if "stage" in name or "seed0" in name:
            path.mkdir()
            (path / "metrics.json").write_text("{")
        else:
            path.write_text("{")
    (folder / ".notes.tmp-mine").write_text("the user's")  # not a name lyra-gym writes: kept
    (folder / f".live.json.tmp-{os.getppid()}-0123abcd").write_text("{")  # its process runs: kept


def test_leftovers_of_an_interrupted_compare_are_removed_by_the_next(capsys):
    assert run(compare("out"), capsys)[0] == 0
    _plant(Path("out"))
    assert run(compare("out", "--overwrite"), capsys)[0] == 0
    left = sorted(str(p.relative_to("out")) for p in Path("out").rglob("*") if ".tmp-" in p.name)
    assert left == [f".live.json.tmp-{os.getppid()}-0123abcd", ".notes.tmp-mine"]


def test_leftovers_of_an_interrupted_sweep_are_removed_by_the_next(capsys):
    Path("grid.yaml").write_text("policies: [fifo]\ntraces: [t.csv]\nseeds: [0, 1]\n")
    assert run(["sweep", "grid.yaml", "--no-plots", "--out", "sw"], capsys)[0] == 0
    (Path("sw/sweep_runs") / ".run-1.json.tmp-99999999-0123abcd").write_text("{")
    _plant(Path("sw"))
    assert run(["sweep", "grid.yaml", "--no-plots", "--out", "sw"], capsys)[0] == 0  # resumes: nothing to run
    assert sorted(str(p.relative_to("sw")) for p in Path("sw").rglob("*") if ".tmp-" in p.name) == [
        f".live.json.tmp-{os.getppid()}-0123abcd", ".notes.tmp-mine"]


# ----------------------------------------------------------------------------- 13. Ray failures
class _Ref:
    def __init__(self, value):
        self.value = value


class FakeRay:
    """The part of Ray the backend uses, run eagerly in this process; ``fail`` raises from
    ``get`` (a task's failure) or ``wait`` (Ray's own)."""

    def __init__(self, get_error=None, wait_error=None):
        import ray.exceptions

        self.exceptions = ray.exceptions
        self.options: dict = {}
        self.get_error, self.wait_error = get_error, wait_error

    def is_initialized(self):
        return True  # the caller's instance: used in this process

    def remote(self, **options):
        self.options = options
        fake = self

        class Task:
            def __init__(self, fn):
                self.fn = fn

            def remote(self, *args):
                return _Ref(self.fn(*args)) if fake.get_error is None else _Ref(None)

        return Task

    def put(self, obj):
        return obj

    def wait(self, refs, num_returns=1):
        if self.wait_error is not None:
            raise self.wait_error
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        if self.get_error is not None:
            raise self.get_error
        return ref.value

    def cancel(self, ref, force=False):
        pass


@pytest.fixture
def fake_ray(monkeypatch):
    pytest.importorskip("ray", reason="Ray is not installed; its errors are needed")
    from lyra_gym.harness import ray_backend

    def install(**kwargs) -> FakeRay:
        fake = FakeRay(**kwargs)
        monkeypatch.setattr(ray_backend, "import_ray", lambda: fake)
        return fake
    return install


@pytest.mark.parametrize("extra, retries", [([], 2), (["--ray-retries", "5"], 5), (["--ray-retries", "0"], 0)])
def test_ray_tasks_are_retried_when_their_worker_dies(capsys, fake_ray, extra, retries):
    fake = fake_ray()
    assert run(compare("out", "--backend", "ray", *extra), capsys)[0] == 0
    assert fake.options["max_retries"] == retries
    assert fake.options.get("retry_exceptions") is False  # a run's own error is not retried


def test_ray_retries_needs_the_ray_backend(capsys):
    code, err = run(compare("out", "--ray-retries", "3"), capsys)
    assert code == 2 and "--ray-retries" in one_line(err) and not Path("out").exists()


def _ray_error(name: str):
    import ray.exceptions

    if name == "WorkerCrashedError":
        return ray.exceptions.WorkerCrashedError()
    if name == "NodeDiedError":
        return ray.exceptions.NodeDiedError("node 1a2b died\n(more lines of Ray's own)")
    return ray.exceptions.RaySystemError("the raylet is gone\nTraceback (most recent call last):\n  ...")


@pytest.mark.parametrize("where, name, expected", [
    ("get", "WorkerCrashedError", "run 'fifo' seed 0 failed on Ray (tried 3 times): WorkerCrashedError: The worker "
                                  "died unexpectedly"),
    ("get", "NodeDiedError", "run 'fifo' seed 0 failed on Ray: NodeDiedError: node 1a2b died"),
    ("wait", "RaySystemError", "Ray failed: RaySystemError: System error: the raylet is gone"),
])
def test_every_ray_failure_is_one_line_and_a_failed_manifest(capsys, fake_ray, where, name, expected):
    fake_ray(**{f"{where}_error": _ray_error(name)})
    code, err = run(compare("out", "--backend", "ray"), capsys)
    assert code == 2
    assert one_line(err).startswith(f"lyra-gym: error: {expected}"), err
    assert json.loads(Path("out/compare.json").read_text())["status"] == "failed"


def _ray_compare_killing(pattern: str, tmp_path: Path, extra: tuple[str, ...] = ()) -> tuple[int, str, dict]:
    """``compare --backend ray`` (a local instance, 2 CPUs) with one process matching ``pattern``
    (``pgrep -f``) killed once the first run is written: exit code, stderr, manifest."""
    argv = [sys.executable, "-m", "lyra_gym.cli", "compare", "--policies", "fifo,sjf", "--backend", "ray",
            "--jobs", "2", "--seeds", ",".join(str(s) for s in range(30)), "--no-plots", *extra,
            "--trace", str(ROOT / "traces/default.csv"), "--out", str(tmp_path / "r")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not any((tmp_path / "r").glob("*/seed*")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        found = subprocess.run(["pgrep", "-s", str(proc.pid), "-f", pattern], capture_output=True, text=True)
        assert found.stdout.split(), f"no process matches {pattern!r}"
        os.kill(int(found.stdout.split()[0]), signal.SIGKILL)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err, json.loads((tmp_path / "r" / "compare.json").read_text())


@pytest.mark.slow
def test_a_killed_ray_worker_is_retried(tmp_path):
    pytest.importorskip("ray")
    code, err, manifest = _ray_compare_killing("^ray::_run_task", tmp_path)
    assert code == 0 and err == "", err
    assert manifest["status"] == "complete" and len(manifest["runs"]) == 60


@pytest.mark.slow
def test_a_killed_ray_dashboard_agent_is_one_line_and_a_failed_manifest(tmp_path):
    pytest.importorskip("ray")
    code, err, manifest = _ray_compare_killing("^ray::DashboardAgent", tmp_path)
    assert code == 2, err
    # which Ray process notices first is a race: the driver ending, or a task's raylet dying with it
    line = one_line(err)
    assert line.startswith(("lyra-gym: error: Ray failed: its driver process ended",
                            "lyra-gym: error: run 'fifo' seed ")) and "Ray" in line, line
    assert manifest["status"] == "failed"


def test_a_sweep_runs_folder_that_is_a_symbolic_link_is_refused(tmp_path, capsys):
    """A fresh sweep empties ``OUT/sweep_runs``; through a link that would delete another sweep's runs."""
    from lyra_gym.cli.app import main

    other = tmp_path / "other_runs"
    other.mkdir()
    (other / "run-0.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep_runs").symlink_to(other)
    grid = tmp_path / "grid.yaml"
    grid.write_text("policies: [fifo]\ntraces: [preset:small-1d]\nseeds: [0]\n")
    code = main(["sweep", str(grid), "--out", str(out), "--overwrite", "--no-plots"])
    assert code == 2
    assert "sweep_runs is a symbolic link" in capsys.readouterr().err
    assert (other / "run-0.json").read_text() == "{}"


def test_atomic_write_csv_writes_the_header_and_rows_whole_and_leaves_no_temporary(tmp_path):
    from lyra_gym.outputs import atomic_write_csv

    folder = tmp_path / "out"  # made by the write
    path = atomic_write_csv(folder / "rows.csv", ("a", "b"), [{"a": 1, "b": "x,y"}, {"a": 2.5, "b": ""}])
    assert path.read_text() == 'a,b\n1,"x,y"\n2.5,\n'
    assert [p.name for p in folder.iterdir()] == ["rows.csv"]
