"""Issue 23 items 3-5: the agents' command lines check every option, input and output before any
work (one line on stderr, exit status 2, no traceback) and follow the output rule of
:mod:`lyra_gym.outputs` (``lyra_agents.export``, ``train.py``, ``lyra_agents.benchmark``, ``lyra_agents.evaluate``).

Every refusal test stops at the up-front check; the evaluation functions are replaced by ones
that fail, so a check made only after the work shows up at once."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from lyra_agents import benchmark, evaluate
from lyra_agents import export as export_module
from lyra_agents.config import TrainConfig, TrainConfigError, resolve_config
from lyra_agents.factory import OPTIMIZER_MEMBER, build_training_envs, make_model, save_normalizer_stats
from train_script import load_train_script

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "agents" / "pretrained" / "alloc-contended"


train = load_train_script()

# the smallest run that trains: K = 6 job slots, one env, 64 steps per update
TINY = dict(window_s=6 * 3600.0, num_job_slots=6, num_server_slots=3, n_envs=1, vec_env="dummy", n_steps=64,
            batch_size=64, n_epochs=1, net_arch=[16], device="cpu", total_timesteps=64, progress_bar=False,
            eval_freq=0, eval_windows=1, final_windows=1, checkpoint_freq=0, name="tiny")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A run folder as train.py writes it (model.zip with its optimizer state, statistics, config),
    untrained: resumable, exportable, loadable as model:PATH."""
    folder = tmp_path_factory.mktemp("tiny") / "run"
    folder.mkdir()
    cfg = TrainConfig(**TINY)
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    (folder / "config.yaml").write_text(cfg.to_yaml())
    model.save(folder / "model.zip")
    save_normalizer_stats(venv, folder / "vecnormalize.npz")
    venv.close()
    return folder


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


def one_line_error(capsys, prog: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"{prog}: error:"), err
    assert "Traceback" not in err
    return err


def members(model_zip: Path) -> set[str]:
    with zipfile.ZipFile(model_zip) as archive:
        return set(archive.namelist())


# ---------------------------------------------------------------------- 3. lyra_agents.export
def test_export_into_a_non_empty_folder_needs_overwrite(run_copy, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.zip").write_bytes(b"an earlier export")
    assert export_module.main([str(run_copy), str(out)]) == 2
    assert "--overwrite" in one_line_error(capsys, "lyra_agents.export")
    assert (out / "model.zip").read_bytes() == b"an earlier export"
    assert export_module.main([str(run_copy), str(out), "--overwrite"]) == 0
    assert OPTIMIZER_MEMBER not in members(out / "model.zip")
    assert sorted(p.name for p in out.iterdir()) == ["config.yaml", "model.zip", "vecnormalize.npz"]


def test_export_overwrite_refuses_a_folder_holding_other_files(run_copy, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "vecnormalize.pkl").write_bytes(b"stale statistics that a trusted load would pick up")
    assert export_module.main([str(run_copy), str(out), "--overwrite"]) == 2
    assert "vecnormalize.pkl" in one_line_error(capsys, "lyra_agents.export")
    assert [p.name for p in out.iterdir()] == ["vecnormalize.pkl"]


@pytest.mark.parametrize("target", ["same", "model", "parent", "symlink"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_export_never_writes_over_the_run_it_reads(run_copy, tmp_path, capsys, target, overwrite):
    before = {p.name: p.read_bytes() for p in run_copy.iterdir()}
    assert OPTIMIZER_MEMBER in members(run_copy / "model.zip")
    if target == "symlink":
        (tmp_path / "link").symlink_to(run_copy)
    out = {"same": run_copy, "model": run_copy / "model.zip", "parent": tmp_path,
           "symlink": tmp_path / "link"}[target]
    assert export_module.main([str(run_copy), str(out), *(["--overwrite"] if overwrite else [])]) == 2
    one_line_error(capsys, "lyra_agents.export")
    assert {p.name: p.read_bytes() for p in run_copy.iterdir()} == before  # optimizer state kept: still resumable


def test_export_to_a_file_is_a_one_line_error(run_copy, tmp_path, capsys):
    out = tmp_path / "a_file"
    out.write_text("keep me")
    assert export_module.main([str(run_copy), str(out)]) == 2
    assert "is a file" in one_line_error(capsys, "lyra_agents.export")
    assert out.read_text() == "keep me"


# ---------------------------------------------------------------------- 4. train.py --resume, names, --set
@pytest.fixture
def tiny_yaml(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, "runs_dir": str(tmp_path / "runs")}))
    return path


def nothing_written(tmp_path: Path, *keep: str) -> None:
    """No run folder (nor anything an unsafe name could reach) was created under ``tmp_path``."""
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(keep)


@pytest.mark.parametrize("source", ["shipped", "exported"])
def test_resume_from_a_model_without_optimizer_state_is_refused_up_front(tiny_run, tmp_path, monkeypatch, capsys,
                                                                        source):
    monkeypatch.chdir(tmp_path)
    if source == "shipped":
        path = SHIPPED
    else:
        assert export_module.main([str(tiny_run), str(tmp_path / "exported")]) == 0
        capsys.readouterr()
        path = tmp_path / "exported"
    assert train.main(["--resume", str(path), "--no-compare"]) == 2
    err = one_line_error(capsys, "train.py")
    assert "optimizer" in err and "run folder" in err and "checkpoint" in err
    nothing_written(tmp_path, *(["exported"] if source == "exported" else []))


@pytest.mark.parametrize("how", ["--set", "yaml", "resumed config"])
@pytest.mark.parametrize("name", ["x/../../../escaped", "..", "", "a\\b"])
def test_an_unsafe_run_name_is_refused_from_every_source(run_copy, tiny_yaml, tmp_path, monkeypatch, capsys, how,
                                                         name):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    if how == "--set":
        argv = ["--config", str(tiny_yaml), "--set", f"name={name}"]
    elif how == "yaml":
        tiny_yaml.write_text(yaml.safe_dump({**yaml.safe_load(tiny_yaml.read_text()), "name": name}))
        argv = ["--config", str(tiny_yaml)]
    else:
        config = run_copy / "config.yaml"
        config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "name": name,
                                          "runs_dir": str(tmp_path / "runs")}))
        argv = ["--resume", str(run_copy)]
    assert train.main([*argv, "--no-compare"]) == 2
    err = one_line_error(capsys, "train.py")
    assert "name:" in err
    if how == "yaml":
        assert str(tiny_yaml) in err
    elif how == "resumed config":
        assert str(run_copy / "config.yaml") in err
    nothing_written(tmp_path, "run", "tiny.yaml", "work")
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("item, key", [
    ("learning_rate=nan", "learning_rate"), ("learning_rate=inf", "learning_rate"),
    ("learning_rate=-1", "learning_rate"), ("bc_learning_rate=nan", "bc_learning_rate"),
    ("clip_range=inf", "clip_range"), ("window_s=nan", "window_s"), ("ent_coef=-0.1", "ent_coef"),
    ("test_fraction=1", "test_fraction"), ("seed=-1", "seed"), ("device=gpu", "device"),
])
def test_set_values_are_validated_before_any_work(tiny_yaml, tmp_path, monkeypatch, capsys, item, key):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainConfigError, match=f"^--set: {key}:"):
        resolve_config(overrides=[item])
    assert train.main(["--config", str(tiny_yaml), "--set", item, "--no-compare"]) == 2
    assert f"--set: {key}:" in one_line_error(capsys, "train.py")
    nothing_written(tmp_path, "tiny.yaml")


def test_a_resumed_model_that_does_not_fit_leaves_no_run_folder(run_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    assert train.main(["--resume", str(run_copy), "--set", "net_arch=[32]", f"runs_dir={runs}", "--no-compare"]) == 2
    one_line_error(capsys, "train.py")
    assert not runs.exists()


def test_a_missing_input_file_of_the_config_is_refused_before_the_run_folder(tiny_yaml, tmp_path, monkeypatch,
                                                                           capsys):
    monkeypatch.chdir(tmp_path)
    assert train.main(["--config", str(tiny_yaml), "--set", "sim_config=no/such.yaml", "--no-compare"]) == 2
    assert "no/such.yaml" in one_line_error(capsys, "train.py")
    nothing_written(tmp_path, "tiny.yaml")


@pytest.mark.slow
def test_resume_from_a_run_folder_still_continues(run_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    assert train.main(["--resume", str(run_copy), "--set", "total_timesteps=128", f"runs_dir={runs}",
                       "--no-compare"]) == 0
    (run_dir,) = runs.iterdir()
    assert run_dir.name.startswith("LyraGym-Cluster-v1__tiny__1__")
    assert {"config.yaml", "model.zip", "vecnormalize.npz"} <= {p.name for p in run_dir.iterdir()}
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["resume_from"] == str(run_copy / "model.zip")


# ---------------------------------------------------------------------- 5. lyra_agents.benchmark / lyra_agents.evaluate
@pytest.fixture
def no_benchmark_work(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("the benchmark ran before its options were checked")
    monkeypatch.setattr(benchmark, "evaluate", refuse)
    monkeypatch.setattr(benchmark, "train_seeds", refuse)


SMALL = ["--policies", "lyra", "--scenarios", "default", "--windows", "1", "--reps", "10", "--quiet"]


@pytest.mark.parametrize("args, named", [
    (["--out", "{tmp}/folder"], "is a folder"),
    (["--out", "{tmp}/existing.csv"], "--overwrite"),
    (["--out", "{tmp}/existing.csv/x.csv"], "is a file"),
    (["--seed", "-1"], "--seed"),
    (["--seeds", "1,2"], "--seeds"),
    (["--windows", "0"], "--windows"),
    (["--windows", "-1"], "--windows"),
    (["--windows", "4"], "only 3"),
    (["--policies", "lyra,bogus"], "bogus"),
    (["--train", "{tmp}/tiny.yaml", "--seeds", "0,x"], "'x'"),
    (["--train", "{tmp}/tiny.yaml", "--train-name", "a/b"], "--train-name"),
])
def test_benchmark_checks_every_option_before_any_work(tmp_path, capsys, no_benchmark_work, args, named):
    (tmp_path / "folder").mkdir()
    (tmp_path / "existing.csv").write_text("keep me")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    argv = [*SMALL, *[a.format(tmp=tmp_path) for a in args]]
    assert benchmark.main(argv) == 2
    assert named in one_line_error(capsys, "lyra_agents.benchmark")
    assert (tmp_path / "existing.csv").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.csv", "folder", "tiny.yaml"]


@pytest.mark.parametrize("member", ["model.zip", "config.yaml", "vecnormalize.npz"])
def test_benchmark_out_is_never_one_of_the_models_files(run_copy, capsys, no_benchmark_work, member):
    before = (run_copy / member).read_bytes()
    argv = [*SMALL, "--agent", f"ppo={run_copy}", "--out", str(run_copy / member), "--overwrite"]
    assert benchmark.main(argv) == 2
    assert "which this command reads" in one_line_error(capsys, "lyra_agents.benchmark")
    assert (run_copy / member).read_bytes() == before


@pytest.mark.slow
def test_benchmark_out_folder_is_created_and_overwrite_replaces_the_file(tmp_path, capsys):
    out = tmp_path / "new" / "sub" / "bench.csv"
    argv = [*SMALL, "--out", str(out)]
    assert benchmark.main(argv) == 0
    first = out.read_bytes()
    capsys.readouterr()  # the first run's own warnings (a one-window interval)
    assert benchmark.main(argv) == 2
    assert "--overwrite" in one_line_error(capsys, "lyra_agents.benchmark")
    out.write_text("older")
    assert benchmark.main([*argv, "--overwrite"]) == 0
    assert out.read_bytes() == first
    assert [p.name for p in out.parent.iterdir()] == ["bench.csv"]


@pytest.fixture
def no_evaluation(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("lyra_agents.evaluate simulated before its options were checked")
    monkeypatch.setattr(evaluate, "evaluate_scheduler", refuse)


@pytest.mark.parametrize("args, named", [
    (["--windows", "0"], "--windows"),
    (["--windows", "-1"], "--windows"),
    (["--windows", "999"], "test windows"),
    (["--baselines", "bogus"], "bogus"),
    (["--baselines", "lyra,model:/no/such/run"], "/no/such/run"),
    (["--json", "{tmp}/a_file/under/it.json"], "is a file"),
    (["--json", "{tmp}/a_file"], "--overwrite"),
    (["--json", "{tmp}"], "is a folder"),
    (["--json", "{run}/model.zip", "--overwrite"], "which this command reads"),
    (["--json", "{run}/config.yaml", "--overwrite"], "which this command reads"),
])
def test_evaluate_checks_every_option_before_evaluating(run_copy, tmp_path, capsys, no_evaluation, args, named):
    (tmp_path / "a_file").write_text("keep me")
    before = {p.name: p.read_bytes() for p in run_copy.iterdir()}
    argv = [str(run_copy), *[a.format(tmp=tmp_path, run=run_copy) for a in args]]
    assert evaluate.main(argv) == 2
    assert named in one_line_error(capsys, "lyra_agents.evaluate")
    assert (tmp_path / "a_file").read_text() == "keep me"
    assert {p.name: p.read_bytes() for p in run_copy.iterdir()} == before


@pytest.mark.slow
def test_evaluate_json_folder_is_created_and_overwrite_replaces_it(run_copy, tmp_path, capsys):
    out = tmp_path / "new" / "rows.json"
    argv = [str(run_copy), "--windows", "1", "--baselines", "", "--json", str(out)]
    assert evaluate.main(argv) == 0
    first = json.loads(out.read_text())
    capsys.readouterr()  # (the first run's progress bar, shown on stderr when a window takes over 2 s)
    assert evaluate.main(argv) == 2
    assert "--overwrite" in one_line_error(capsys, "lyra_agents.evaluate")
    out.write_text("older")
    assert evaluate.main([*argv, "--overwrite"]) == 0
    again = json.loads(out.read_text())  # the same rows (sim_wall_s is wall-clock time)
    assert again["policy"][0]["jct_mean_s"] == first["policy"][0]["jct_mean_s"]
    assert [p.name for p in out.parent.iterdir()] == ["rows.json"]


def test_a_train_config_with_a_key_given_twice_is_refused_naming_it(tmp_path):
    from lyra_agents.config import TrainConfigError, read_yaml

    path = tmp_path / "c.yaml"
    path.write_text("seed: 1\nlearning_rate: 0.001\nseed: 2\n")
    with pytest.raises(TrainConfigError, match=r"c.yaml: not valid YAML: .*duplicate key 'seed' \(first on line 1\)"):
        read_yaml(path)
