"""Issue 23 item 8, "silent acceptance": inputs that used to be taken without a word (or that
passed one check and failed later) are refused with one line naming the file, line and field,
or now work. One test per case; the command-line ones run ``lyra_gym.cli.main`` and expect
exit code 2 with the message on stderr."""

from __future__ import annotations

from pathlib import Path

import pytest

import lyra_gym
from lyra_gym.cli.app import main
from lyra_gym.model.config import SimConfig, config_from_dict, config_to_dict, load_config
from lyra_gym.model.jobspec import MAX_BATCH_SIZE, MAX_DURATION_S, JobSpec, JobSpecError

ROOT = Path(__file__).resolve().parents[2]
HEADER = "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus"
ROW = "a,0,4,3600,resnet50,0,,"


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TQDM_DISABLE", "1")


def cli_error(capsys, tmp_path, *args: str) -> str:
    """Run ``lyra-gym simulate`` with ``args``; assert exit 2, nothing written, and return the
    one-line message."""
    out = tmp_path / "out"
    code = main(["simulate", "--policy", "fifo", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("lyra-gym: error: ") and err.count("\n") == 1, err
    assert not out.exists() or not any(out.iterdir())
    return err.strip()


def trace_file(tmp_path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text, encoding="utf-8")
    return path


# 1 ------------------------------------------------------------------ a header-only trace
def test_a_trace_with_no_job_rows_is_refused(capsys, tmp_path):
    path = trace_file(tmp_path, HEADER + "\n,,,,,,,\n\n")
    err = cli_error(capsys, tmp_path, "--trace", str(path))
    assert f"{path}: no jobs" in err


# 2 ------------------------------------------------------------------ absurd durations
def test_an_absurd_duration_is_refused_with_file_line_and_column(capsys, tmp_path):
    path = trace_file(tmp_path, f"{HEADER}\n{ROW}\nb,5,1,1e300,resnet50,0,,\n")
    err = cli_error(capsys, tmp_path, "--trace", str(path))
    assert f"{path}:3: field 'duration'" in err and "MAX_DURATION_S" in err and "1e+300" in err
    JobSpec("ok", 0.0, 1, MAX_DURATION_S, "m", False, 1, 1)  # the bound itself is accepted
    with pytest.raises(JobSpecError, match="duration"):
        JobSpec("long", 0.0, 1, MAX_DURATION_S * 1.001, "m", False, 1, 1)


def test_a_far_submit_time_is_refused_with_file_line_and_column(capsys, tmp_path):
    path = trace_file(tmp_path, f"{HEADER}\n{ROW}\nb,1e300,1,60,resnet50,0,,\n")
    err = cli_error(capsys, tmp_path, "--trace", str(path))
    assert f"{path}:3: field 'submit_time'" in err and "MAX_SUBMIT_TIME_S" in err


# 3 ------------------------------------------------------------------ absurd batch sizes
@pytest.mark.parametrize("batch, words", [
    ("1e30", ["MAX_BATCH_SIZE", "1e+30"]),
    (str(MAX_BATCH_SIZE + 1), ["MAX_BATCH_SIZE"]),
    ("3", ["fewer than num_gpus (4)", "at least one sample"]),
])
def test_an_absurd_or_too_small_batch_size_is_refused(capsys, tmp_path, batch, words):
    path = trace_file(tmp_path, f"{HEADER},batch_size\n{ROW},512\nb,5,4,60,resnet50,1,2,8,{batch}\n")
    err = cli_error(capsys, tmp_path, "--trace", str(path))
    assert f"{path}:3: field 'batch_size'" in err
    for word in words:
        assert word in err


# 4 ------------------------------------------------------------------ duplicated columns
def test_a_duplicated_column_is_refused_naming_it(capsys, tmp_path):
    path = trace_file(tmp_path, f"{HEADER},duration\n{ROW},7200\n")
    err = cli_error(capsys, tmp_path, "--trace", str(path))
    assert f"{path}:1: field 'duration'" in err and "appears twice" in err and "columns 4 and 9" in err
    # a repeated column the loader does not read is still fine (it is ignored either way)
    path = trace_file(tmp_path, f"{HEADER},note,note\n{ROW},x,y\n")
    from lyra_gym.workloads.trace import load_trace
    assert [j.job_id for j in load_trace(path)] == ["a"]


# 5 ------------------------------------------------------------------ demand.num_servers
def test_a_demand_size_that_the_cluster_overrides_is_refused(capsys, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("demand: {num_servers: 999}\n")
    err = cli_error(capsys, tmp_path, "--trace", "traces/default.csv", "--config", str(config))
    assert f"{config}: demand.num_servers: 999" in err and "16 servers (cluster.inference.count)" in err
    # the value the cluster implies is accepted, and the resolved config round-trips after another
    # inference size is merged in (as sweeps and scenarios do)
    config.write_text("demand: {num_servers: 16}\n")
    assert load_config(config).demand.num_servers == 16
    data = config_to_dict(SimConfig())
    data["cluster"]["inference"]["count"] = 40
    assert config_from_dict(data).demand.num_servers == 40


# 6 ------------------------------------------------------------------ duplicated YAML keys
def test_a_duplicated_yaml_key_is_refused_naming_key_and_line(capsys, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("reclaim_grace_s: 5\ncluster:\n  inference:\n    count: 4\n    gpu_type: t4\n"
                      "    count: 8\n")
    err = cli_error(capsys, tmp_path, "--trace", "traces/default.csv", "--config", str(config))
    assert f"{config}, line 6:" in err and "duplicate key 'count' (first on line 4)" in err
    # a key brought in by a merge may still be overridden, as YAML intends
    import yaml
    from lyra_gym.model.config import unique_key_loader

    text = "a: &b {count: 4, gpu_type: t4}\nc:\n  <<: *b\n  count: 8\n"
    assert yaml.load(text, Loader=unique_key_loader())["c"] == {"count": 8, "gpu_type": "t4"}
    with pytest.raises(yaml.YAMLError, match="duplicate key 'a' \\(first on line 1\\)"):
        yaml.load("{a: 1, a: 2}", Loader=unique_key_loader())


# 7 ------------------------------------------------------------------ tiny env windows
@pytest.mark.parametrize("env_id", lyra_gym.envs.ALL_ENV_IDS)
def test_one_second_windows_either_step_or_are_refused_at_construction(env_id, tmp_path):
    import gymnasium as gym

    env = gym.make(env_id, window_s=1).unwrapped  # env-14d: a few 1 s windows hold a job
    for seed in range(3):
        env.reset(seed=seed)
        assert not env.done
        env.step(env.expert_action())  # used to raise "the episode is over"
    sparse = trace_file(tmp_path, HEADER + "\n" + "".join(f"j{i},{i * 7200 + 1800.5},1,60,resnet50,0,,\n"
                                                           for i in range(40)))
    with pytest.raises(ValueError, match=r"^window_s: none of the \d+ train windows of 1 s holds a job"):
        gym.make(env_id, trace=str(sparse), window_s=1)
