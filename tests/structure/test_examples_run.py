"""Issue 27 item 3: every file of examples/ runs, the way docs/writing-a-policy.md says to run it.

- ``examples/alloc_policy.py``: ``policy:examples.alloc_policy:make`` (and by path) in simulate, in
  the env itself, and through the real ``lyra-gym compare --jobs 2`` (worker processes) with the
  numbers of an in-process run;
- ``examples/my_scheduler/``: ``my_scheduler:SmallestFirstScheduler`` (fast), its entry point
  ``smallest-first`` seen through ``importlib.metadata`` (fast), and ``pip install`` (slow);
- ``examples/your_policy_in_20_lines.py``: at most 20 lines, its policy in process (fast), the
  whole script (slow), and its text verbatim in the docs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from loader_entry_points import declare_missing_loaders
from lyra_gym.provenance import PROVENANCE_KEYS
from lyra_gym.run.simulate import simulate
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.import_spec import load_object
from lyra_gym.workloads.trace import write_trace
from lyra_gym.workloads.tracegen import generate_trace
from toy import config, job, run

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TWENTY = EXAMPLES / "your_policy_in_20_lines.py"
ALLOC = "policy:examples.alloc_policy:make"


@pytest.fixture(scope="module")
def entry_points_dir(tmp_path_factory):
    """A folder on sys.path (and on the subprocesses' PYTHONPATH) with the loaders of pyproject.toml
    the installed metadata may lack, and the repository root (``examples`` importable from anywhere)."""
    folder = tmp_path_factory.mktemp("entry_points")
    declare_missing_loaders(folder)
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def jobs():
    return generate_trace("small-1d", 0)[:80]


def _env(*extra: Path) -> dict[str, str]:
    paths = [*map(str, extra), str(ROOT), str(ROOT / "tools" / "import_names"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "TQDM_DISABLE": "1"}


# ---------------------------------------------------------------------- examples/alloc_policy.py
def test_alloc_policy_runs_by_module_and_by_path_alike(entry_points_dir, jobs, monkeypatch):
    monkeypatch.chdir(ROOT)
    by_module = registry.make(ALLOC)
    by_path = registry.make(f"policy:{EXAMPLES / 'alloc_policy.py'}:make")
    a, b = simulate(jobs, by_module, seed=0), simulate(jobs, by_path, seed=0)
    assert a.jobs == b.jobs
    assert a.metrics["jobs_finished"] == len(jobs)
    assert by_module.invalid_actions == 0  # it reads the masks: every action it takes is valid


def test_alloc_policy_parameters_change_what_it_does(entry_points_dir, jobs, monkeypatch):
    monkeypatch.chdir(ROOT)
    greedy = simulate(jobs, ALLOC, seed=0)
    strict = simulate(jobs, ALLOC, seed=0, policy_params={"backfill": False, "borrow": False})
    assert strict.metrics["servers_borrowed"] == 0 < greedy.metrics["servers_borrowed"]


def test_alloc_policy_steps_the_env_itself(monkeypatch):
    """The same object acts in ``LyraGym/Alloc-v1``: every action valid, the episode ends."""
    monkeypatch.chdir(ROOT)
    policy = load_object("examples.alloc_policy:make")()
    env = gym.make("LyraGym/Alloc-v1", trace="small-1d", window_s=3 * 3600.0, max_steps=100_000)
    obs, _ = env.reset(seed=0)
    steps, done = 0, False
    while not done:
        masks = env.unwrapped.action_masks()
        action = policy(obs, masks)
        assert masks[action]
        obs, _reward, terminated, truncated, _info = env.step(action)
        done, steps = terminated or truncated, steps + 1
    assert steps > 10 and terminated


@pytest.mark.slow
def test_a_policy_spec_through_compare_jobs_2_gives_the_in_process_numbers(entry_points_dir, jobs, tmp_path):
    """The real CLI in a subprocess, two worker processes (each imports the policy itself by its
    spec), against ``simulate`` in this process: the same metrics on every seed."""
    trace, out = tmp_path / "trace.csv", tmp_path / "out"
    write_trace(jobs, trace)
    command = [sys.executable, "-m", "lyra_gym.cli", "compare", "--policies", f"lyra,{ALLOC}", "--seeds", "0,1",
               "--jobs", "2", "--trace", str(trace), "--no-plots", "--out", str(out)]
    done = subprocess.run(command, cwd=tmp_path, env=_env(entry_points_dir), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    folder = json.loads((out / "compare.json").read_text())["run_folders"][ALLOC]
    for seed in (0, 1):
        theirs = json.loads((out / folder / f"seed{seed}" / "metrics.json").read_text())
        ours = simulate(jobs, ALLOC, seed=seed).metrics
        theirs.pop("sim_wall_s"), ours.pop("sim_wall_s")
        assert all(theirs.pop(key) for key in PROVENANCE_KEYS)  # metrics.json says what produced it
        assert theirs == json.loads(json.dumps({**ours, "policy": ALLOC, "seed": seed}))


@pytest.mark.slow
def test_a_bad_policy_spec_through_the_cli_is_one_line(entry_points_dir, tmp_path):
    command = [sys.executable, "-m", "lyra_gym.cli", "compare", "--policies", "lyra,policy:examples.alloc_policy:nope",
               "--jobs", "2", "--out", str(tmp_path / "out")]
    done = subprocess.run(command, cwd=tmp_path, env=_env(entry_points_dir), capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "lyra-gym: error: 'policy:examples.alloc_policy:nope': module 'examples.alloc_policy' has no attribute 'nope'"]


def test_benchmark_takes_a_policy_spec(entry_points_dir, monkeypatch, capsys):
    from lyra_agents import benchmark

    monkeypatch.chdir(ROOT)
    policies = benchmark.resolve_policies([ALLOC, "lyra_baselines.sjf:SjfScheduler"], [], 0)
    assert [p.name for p in policies] == ["lyra", "random", ALLOC, "lyra_baselines.sjf:SjfScheduler"]
    first, second = (policies[2].runs[0][1](seed) for seed in (0, 1))
    assert first is not second  # built afresh per window
    assert benchmark.main(["--policies", "policy:examples.alloc_policy:nope", "--quiet"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "lyra_agents.benchmark: error: 'policy:examples.alloc_policy:nope': module 'examples.alloc_policy' has no "
        "attribute 'nope'"]


# ---------------------------------------------------------------------- examples/my_scheduler
def test_my_scheduler_by_import_spec_starts_the_smallest_job_first(monkeypatch):
    """One 8-GPU server, 4 GPUs busy until t = 100: the 8-GPU job queued at t = 1 cannot start, the
    2-GPU job queued at t = 2 starts at once (fifo holds it behind the first); the 8-GPU job starts
    when both others are done (t = 100 and t = 2 + 50)."""
    monkeypatch.syspath_prepend(str(EXAMPLES / "my_scheduler"))
    spec = "my_scheduler:SmallestFirstScheduler"
    assert registry.declared_reads(spec) == frozenset()
    jobs = [job("r", 0.0, 4, 100.0), job("big", 1.0, 8, 10.0), job("small", 2.0, 2, 50.0)]
    starts = {row["job_id"]: row["first_start"] for row in run(jobs, spec, config()).jobs}
    assert starts == {"r": 0.0, "small": 2.0, "big": 100.0}
    fifo = {row["job_id"]: row["first_start"] for row in run(jobs, "fifo", config()).jobs}
    assert fifo["small"] > fifo["big"] == 100.0


def test_my_scheduler_entry_point_is_found_by_name(monkeypatch, tmp_path, jobs):
    """Its pyproject's entry point, as ``pip install`` would record it: the name ``smallest-first``."""
    project = tomllib.loads((EXAMPLES / "my_scheduler" / "pyproject.toml").read_text(encoding="utf-8"))
    group = project["project"]["entry-points"]["lyra_gym.schedulers"]
    info = tmp_path / "my_scheduler-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-scheduler\nVersion: 0.1.0\n")
    lines = ["[lyra_gym.schedulers]", *(f"{name} = {target}" for name, target in group.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(EXAMPLES / "my_scheduler"))
    assert "smallest-first" in registry.available()
    assert simulate(jobs, "smallest-first").jobs == simulate(jobs, "my_scheduler:SmallestFirstScheduler").jobs


@pytest.mark.slow
def test_my_scheduler_installs_with_pip_and_runs_by_name(tmp_path):
    """Into a fresh venv that sees this interpreter's packages (lyra-gym, setuptools), built offline by
    this interpreter's pip (``--python``: a venv's own older setuptools may not build wheels)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-build-isolation",
                    "-q", str(EXAMPLES / "my_scheduler")], check=True, cwd=tmp_path)
    command = [python, "-m", "lyra_gym.cli", "compare", "--policies", "sjf,smallest-first", "--seeds", "0",
               "--jobs", "2", "--no-plots", "--out", str(tmp_path / "out")]
    done = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "smallest-first" in done.stdout


# ---------------------------------------------------------------------- examples/your_policy_in_20_lines.py
def test_the_twenty_line_example_has_at_most_twenty_lines():
    assert len(TWENTY.read_text(encoding="utf-8").splitlines()) <= 20


def test_the_twenty_line_policy_acts_validly(entry_points_dir, jobs):
    spec = f"policy:{TWENTY}:make"
    scheduler = registry.make(spec)
    result = simulate(jobs, scheduler, seed=0)
    assert result.metrics["jobs_finished"] == len(jobs) and scheduler.invalid_actions == 0
    assert result.jobs != simulate(jobs, "lyra", seed=0).jobs  # a policy of its own, not lyra's


@pytest.mark.parametrize("page", ["docs/writing-a-policy.md", "README.md"])
def test_the_docs_show_the_twenty_line_example_verbatim(page):
    doc = (ROOT / page).read_text(encoding="utf-8")
    block = doc.split("<!-- your_policy_in_20_lines.py -->\n```python\n", 1)[1].split("```", 1)[0]
    assert block == TWENTY.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_twenty_line_script_prints_the_table(entry_points_dir, tmp_path):
    done = subprocess.run([sys.executable, str(TWENTY)], cwd=tmp_path, env=_env(entry_points_dir),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "jct_mean_s" in done.stdout and f"policy:{TWENTY}:make" in done.stdout
    assert (tmp_path / "your-policy-vs-lyra" / "summary.json").is_file()

