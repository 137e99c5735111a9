"""train.py end to end: a tiny --quick run, its run directory, TensorBoard scalars, resuming,
and the saved model run as a scheduler through ``lyra-gym compare`` (all loaded the safe way:
``tests/agents/test_safe_loading.py``)."""

from __future__ import annotations

from train_script import load_train_script
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "train.py"
# --quick, shrunk further: two updates of 4 x 128 steps, an evaluation after each, one checkpoint
TINY = ["--quick", "--set", "total_timesteps=1024", "n_steps=128", "batch_size=128", "n_epochs=2",
        "eval_freq=512", "eval_windows=1", "final_windows=2", "checkpoint_freq=512"]


def run_train(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TRAIN), *args], cwd=cwd, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("train")
    proc = run_train(cwd, *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (cwd / "runs").iterdir()
    return cwd, run_dir, proc.stdout


def test_quick_run_writes_a_complete_run_directory(quick_run):
    _, run_dir, stdout = quick_run
    assert run_dir.name.startswith("LyraGym-Cluster-v1__quick__1__")
    for name in ("config.yaml", "model.zip", "vecnormalize.npz", "vecnormalize.pkl", "compare.json", "progress.csv"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "checkpoints" / "model_512_steps.zip").is_file()
    assert (run_dir / "checkpoints" / "model_vecnormalize_512_steps.npz").is_file()
    assert (run_dir / "checkpoints" / "model_vecnormalize_512_steps.pkl").is_file()
    assert list(run_dir.glob("events.out.tfevents.*"))
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["total_timesteps"] == 1024 and config["num_job_slots"] == 16 and config["name"] == "quick"
    from lyra_gym.provenance import provenance  # what produced the run, as a comment the loader skips
    made_by = provenance()
    assert (run_dir / "config.yaml").read_text().splitlines()[0] == (
        f"# lyra_gym_version: {made_by['lyra_gym_version']}, lyra_gym_commit: {made_by['lyra_gym_commit']}")
    compare = json.loads((run_dir / "compare.json").read_text())
    assert set(compare) == {"policy", "lyra"}
    assert [r["window"] for r in compare["policy"]] == [r["window"] for r in compare["lyra"]] == [0, 1]
    assert "/ lyra" in stdout and "mean" in stdout


def test_tensorboard_holds_the_cluster_scalars_the_eval_ratio_and_the_config(quick_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, run_dir, _ = quick_run
    events = EventAccumulator(str(run_dir))
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    expected = {"custom/jct_mean_s", "custom/queue_mean_s", "custom/gpu_usage_training", "custom/servers_borrowed",
                "custom/preemptions", "custom/inference_violations", "custom/gpu_usage_effective_overall",
                "custom/overhead_gpu_share", "custom/migrations", "custom/reclaim_disruptions",
                "eval/jct_policy", "eval/jct_lyra",
                "eval/jct_vs_lyra", "rollout/ep_rew_mean", "train/value_loss", "time/fps"}
    assert expected <= scalars, expected - scalars
    ratios = events.Scalars("eval/jct_vs_lyra")
    assert [e.step for e in ratios] == [0, 512, 1024]  # evaluated before any update too (issue 42 item 5)
    policy, lyra = events.Scalars("eval/jct_policy"), events.Scalars("eval/jct_lyra")
    assert all(abs(r.value - p.value / q.value) < 1e-5 for r, p, q in zip(ratios, policy, lyra))
    assert any(tag.startswith("config/yaml") for tag in events.Tags()["tensors"])
    # the last evaluation scores the saved model: it equals the comparison run through the engine
    compare = json.loads((run_dir / "compare.json").read_text())
    assert policy[-1].value == pytest.approx(compare["policy"][0]["jct_mean_s"], rel=1e-6)
    assert lyra[-1].value == pytest.approx(compare["lyra"][0]["jct_mean_s"], rel=1e-6)


def test_saved_model_runs_as_a_scheduler_in_lyra_gym_compare(quick_run, tmp_path):
    from lyra_gym.cli import app as cli
    from lyra_gym.sim import scheduler as registry
    from lyra_gym.workloads.trace import load_trace, write_trace
    from lyra_agents.policy_scheduler import PolicyScheduler

    _, run_dir, _ = quick_run
    model_path = run_dir / "model.zip"
    assert isinstance(registry.make(f"model:{model_path}"), PolicyScheduler)
    trace = tmp_path / "trace.csv"
    write_trace(load_trace(ROOT / "traces" / "default.csv")[:120], trace)
    out = tmp_path / "compare"
    code = cli.main(["compare", "--policies", f"lyra,model:{model_path}", "--trace", str(trace), "--out", str(out)])
    assert code == 0
    rows = json.loads((out / "summary.json").read_text())
    assert [r["policy"] for r in rows] == ["lyra", f"model:{model_path}"]
    assert all(r["jobs_total"] == 120 for r in rows)


@pytest.mark.slow
def test_resume_continues_from_a_checkpoint_to_the_total(quick_run):
    cwd, run_dir, _ = quick_run
    checkpoint = run_dir / "checkpoints" / "model_512_steps.zip"
    proc = run_train(cwd, "--resume", str(checkpoint), "--set", "total_timesteps=1536", "--no-compare")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "steps 512 -> 1536" in proc.stdout
    resumed = [d for d in (cwd / "runs").iterdir() if d != run_dir]
    assert len(resumed) == 1
    config = yaml.safe_load((resumed[0] / "config.yaml").read_text())
    assert config["resume_from"] == str(checkpoint)
    assert config["num_job_slots"] == 16  # the checkpoint's run config is the base
    from lyra_agents.policy_scheduler import load_policy_scheduler

    assert load_policy_scheduler(resumed[0]).model.num_timesteps == 1536


def test_checkpoint_statistics_npz_equal_the_pickled_ones(quick_run):
    """The .npz the callback writes beside each checkpoint holds SB3's pickled statistics."""
    import numpy as np

    from lyra_agents.factory import ObsNormalizer, load_normalizer

    _, run_dir, _ = quick_run
    for stem in ("checkpoints/model_vecnormalize_512_steps", "vecnormalize"):
        pickled = load_normalizer(run_dir / f"{stem}.pkl", trust=True)  # our own files
        plain = ObsNormalizer.load(run_dir / f"{stem}.npz")
        np.testing.assert_array_equal(plain.obs_rms.mean, pickled.obs_rms.mean)
        np.testing.assert_array_equal(plain.obs_rms.var, pickled.obs_rms.var)
        obs = np.linspace(-1, 1, plain.obs_rms.mean.shape[0], dtype=np.float32)
        np.testing.assert_array_equal(plain.normalize_obs(obs), pickled.normalize_obs(obs))


def test_unknown_set_key_exits_with_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_train_script().main(["--quick", "--set", "lerning_rate=1"]) == 2
    assert "unknown key 'lerning_rate'; did you mean 'learning_rate'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
