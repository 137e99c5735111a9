"""Loading trained models unpickles nothing by default (``docs/trust.md``).

A crafted pickle (its ``__reduce__`` creates a marker directory) placed as
``vecnormalize.pkl`` and as cloudpickled fields of ``model.zip``'s ``data`` does
not run on the default load path (``model:PATH``, ``python -m lyra_agents.evaluate``,
``train.py --resume``), the model still loads and acts as the original, and the
payload runs only when the files are trusted (``?trust=1``,
``LYRA_GYM_TRUST_MODEL_FILES=1``, ``--trust-model-files``).
"""

from __future__ import annotations

import base64
from train_script import load_train_script
import json
import os
import pickle
import shutil
import zipfile
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch

from lyra_agents.config import TrainConfig, load_train_config
from lyra_agents.factory import (
    TRUST_ENV, ModelFileError, UntrustedModelFileError, build_training_envs, find_artifacts, load_model, load_normalizer,
    make_eval_env, make_model, model_spaces, read_model_zip, save_normalizer_stats,
)
from lyra_agents.policy_scheduler import load_policy_scheduler

ROOT = Path(__file__).resolve().parents[2]
K, M = 6, 3
STEPS = 256


class Payload:
    """Unpickling this creates the directory ``marker`` (``os.makedirs``): proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.makedirs, (self.marker, 0o755, True)


def tiny_config(tmp: Path, **changes) -> TrainConfig:
    base = dict(window_s=6 * 3600.0, num_job_slots=K, num_server_slots=M, n_envs=1, vec_env="dummy",
                n_steps=64, batch_size=64, n_epochs=2, net_arch=[32, 32], device="cpu", runs_dir=str(tmp),
                total_timesteps=STEPS, progress_bar=False, eval_freq=0, eval_windows=1, final_windows=1,
                checkpoint_freq=0)
    return TrainConfig(**{**base, **changes})


def save_run(run_dir: Path, cfg: TrainConfig, model, venv) -> Path:
    """A run directory as train.py writes it: config.yaml, model.zip, vecnormalize.npz and .pkl."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(cfg.to_yaml())
    model.save(run_dir / "model.zip")
    save_normalizer_stats(venv, run_dir / "vecnormalize.npz")
    venv.save(str(run_dir / "vecnormalize.pkl"))
    return run_dir


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny MaskablePPO trained for a few hundred steps, saved as a run directory."""
    tmp = tmp_path_factory.mktemp("safe")
    cfg = tiny_config(tmp)
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    model.learn(STEPS)
    run_dir = save_run(tmp / "run", cfg, model, venv)
    yield cfg, model, venv, run_dir
    venv.close()


def observations(cfg: TrainConfig, count: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """Raw observations and masks of a test window, stepped by the env's expert."""
    env = make_eval_env(cfg)
    obs, _ = env.reset(options={"split": "test", "window": 0})
    out, masks = [], []
    for _ in range(count):
        out.append(obs)
        masks.append(env.action_masks())
        obs, _, terminated, truncated, _ = env.step(env.expert_action())
        if terminated or truncated:
            obs, _ = env.reset(options={"split": "test", "window": 1})
    return np.array(out), np.array(masks)


def actions(model, normalizer, obs: np.ndarray, masks: np.ndarray, deterministic: bool = True) -> np.ndarray:
    return np.array([model.predict(normalizer.normalize_obs(o), deterministic=deterministic, action_masks=m)[0]
                     for o, m in zip(obs, masks)])


def plant_payloads(run_dir: Path, tmp: Path, every_field: bool = True) -> list[Path]:
    """Crafted pickles in ``run_dir``: ``vecnormalize.pkl`` (the genuine statistics plus a payload
    attribute) and ``model.zip``'s ``data`` (a new cloudpickled field and, with ``every_field``,
    every existing cloudpickled field replaced by a payload). Returns the markers."""
    markers = [tmp / "marker_vecnormalize", tmp / "marker_data_extra"]
    pkl = run_dir / "vecnormalize.pkl"
    with open(pkl, "rb") as fh:
        vecnorm = pickle.load(fh)  # our own genuine file
    vecnorm.__dict__.update(_planted=Payload(markers[0]), venv=None, class_attributes={},
                            returns=None)  # dropped again by VecNormalize.__getstate__
    pkl.write_bytes(pickle.dumps(vecnorm))

    def serialized(marker: Path) -> dict:
        return {":type:": "<class 'Payload'>",
                ":serialized:": base64.b64encode(cloudpickle.dumps(Payload(marker))).decode()}

    model_zip = run_dir / "model.zip"
    with zipfile.ZipFile(model_zip) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"].decode())
    data["_planted"] = serialized(markers[1])
    if every_field:
        for key, value in list(data.items()):
            if isinstance(value, dict) and ":serialized:" in value and key != "_planted":
                markers.append(tmp / f"marker_data_{key}")
                data[key] = serialized(markers[-1])
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model_zip, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return markers


@pytest.fixture
def crafted(trained, tmp_path):
    """A copy of the trained run with every planted payload (default load must not run them)."""
    _, _, _, run_dir = trained
    copy = shutil.copytree(run_dir, tmp_path / "crafted")
    markers = plant_payloads(copy, tmp_path, every_field=True)
    assert len(markers) > 5  # observation_space, action_space, policy_class, policy_kwargs, schedules, ...
    return copy, markers


# ---------------------------------------------------------------------- round trip
def test_safe_load_round_trip_gives_the_original_actions(trained):
    cfg, model, venv, run_dir = trained
    scheduler = load_policy_scheduler(run_dir)
    loaded = scheduler.model
    assert loaded.num_timesteps == model.num_timesteps == STEPS
    for key, value in model.policy.state_dict().items():
        torch.testing.assert_close(loaded.policy.state_dict()[key], value, rtol=0, atol=0)
    obs, masks = observations(cfg)
    np.testing.assert_array_equal(scheduler.normalizer.normalize_obs(obs[5]), venv.normalize_obs(obs[5]))
    np.testing.assert_array_equal(actions(loaded, scheduler.normalizer, obs, masks), actions(model, venv, obs, masks))
    assert scheduler.invalid_actions == 0


def test_safe_spaces_are_the_envs_spaces(trained):
    cfg, model, _, _ = trained
    obs_space, act_space = model_spaces(cfg)
    assert obs_space == model.observation_space and act_space == model.action_space


@pytest.mark.parametrize("changes", [{"algo": "ppo"}, {"extractor": "deepsets", "deepsets_hidden": 16,
                                                        "deepsets_slot_dim": 2, "activation": "relu"}])
def test_safe_load_rebuilds_other_algorithms_and_extractors(tmp_path, changes):
    cfg = tiny_config(tmp_path, **changes)
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    model.learn(64)
    run_dir = save_run(tmp_path / "run", cfg, model, venv)
    loaded = load_policy_scheduler(run_dir).model
    assert type(loaded) is type(model)
    obs, masks = observations(cfg, 20)
    kwargs = (lambda m: {"action_masks": m}) if changes.get("algo") != "ppo" else (lambda m: {})
    for o, m in zip(obs, masks):
        n = venv.normalize_obs(o)
        assert np.array_equal(loaded.predict(n, deterministic=True, **kwargs(m))[0],
                              model.predict(n, deterministic=True, **kwargs(m))[0])
    venv.close()


def test_a_model_of_another_architecture_is_refused(trained, tmp_path):
    _, _, _, run_dir = trained
    copy = shutil.copytree(run_dir, tmp_path / "other")
    text = (copy / "config.yaml").read_text().replace("- 32\n- 32\n", "- 16\n- 16\n")
    (copy / "config.yaml").write_text(text)
    with pytest.raises(ModelFileError, match=r"model\.zip: the weights \(policy\.pth\) do not fit .*size mismatch"):
        load_policy_scheduler(copy)


def test_the_up_front_check_runs_no_crafted_pickle_and_refuses_an_old_run_in_one_line(crafted, tmp_path,
                                                                                      monkeypatch):
    """``check_policies`` (simulate, compare, sweep) loads every model before the first run: the
    crafted run passes without running its payloads; a pickle-only run is refused in one line."""
    from lyra_gym.harness.compare import CompareError, check_policies

    monkeypatch.delenv(TRUST_ENV, raising=False)
    run_dir, markers = crafted
    check_policies(["fifo", f"model:{run_dir}", f"model:{run_dir / 'model.zip'}?trust=0"], {})
    assert not any(m.exists() for m in markers)
    old = shutil.copytree(run_dir, tmp_path / "old")
    (old / "vecnormalize.npz").unlink()
    with pytest.raises(CompareError, match=r"vecnormalize\.pkl: observation statistics only as a pickle") as err:
        check_policies([f"model:{old}"], {})
    assert "\n" not in str(err.value) and not any(m.exists() for m in markers)


def test_read_model_zip_keeps_only_plain_counters(crafted):
    run_dir, markers = crafted
    counters, states = read_model_zip(run_dir / "model.zip")
    assert counters["num_timesteps"] == STEPS and "_planted" not in counters
    assert set(states) == {"policy"}
    assert not any(m.exists() for m in markers)


# ---------------------------------------------------------------------- crafted files
def test_crafted_pickles_do_not_run_on_the_default_load_path(trained, crafted, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    cfg, model, venv, _ = trained
    run_dir, markers = crafted
    scheduler = load_policy_scheduler(run_dir)
    assert not any(m.exists() for m in markers), [m.name for m in markers if m.exists()]
    obs, masks = observations(cfg, 30)
    np.testing.assert_array_equal(actions(scheduler.model, scheduler.normalizer, obs, masks),
                                  actions(model, venv, obs, masks))
    # by name, as lyra-gym compare / simulate build it
    from lyra_gym.sim import scheduler as registry
    registry.make(f"model:{run_dir / 'model.zip'}")
    assert not any(m.exists() for m in markers)


def test_evaluate_command_does_not_run_crafted_pickles(crafted, monkeypatch, capsys):
    from lyra_agents import evaluate

    monkeypatch.delenv(TRUST_ENV, raising=False)
    run_dir, markers = crafted
    assert evaluate.main([str(run_dir), "--windows", "1", "--baselines", ""]) == 0
    assert not any(m.exists() for m in markers)


@pytest.mark.parametrize("how", ["param", "query", "env"])
def test_crafted_pickles_run_only_when_trusted(trained, tmp_path, monkeypatch, capsys, how):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    _, _, _, run_dir = trained
    copy = shutil.copytree(run_dir, tmp_path / "crafted")
    markers = plant_payloads(copy, tmp_path, every_field=False)  # the trusted load must still work
    if how == "param":
        load_policy_scheduler(copy, trust_model_files=True)
    elif how == "query":
        from lyra_gym.sim import scheduler as registry
        registry.make(f"model:{copy / 'model.zip'}?trust=1")
    else:
        monkeypatch.setenv(TRUST_ENV, "1")
        load_policy_scheduler(copy)
    assert all(m.exists() for m in markers)
    err = capsys.readouterr().err
    assert err.count("warning: trusting model files") == 1


def test_an_old_run_with_only_the_pickle_is_refused_with_a_one_line_error(trained, tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    _, _, _, run_dir = trained
    copy = shutil.copytree(run_dir, tmp_path / "old")
    (copy / "vecnormalize.npz").unlink()
    marker = plant_payloads(copy, tmp_path, every_field=False)[0]
    with pytest.raises(UntrustedModelFileError) as err:
        load_policy_scheduler(copy)
    message = str(err.value)
    assert "\n" not in message and "vecnormalize.pkl" in message
    assert "python -m lyra_agents.factory convert" in message and "--trust-model-files" in message
    assert not marker.exists()
    with pytest.raises(UntrustedModelFileError):
        load_normalizer(copy / "vecnormalize.pkl")
    assert not marker.exists()
    # the error is caught as a FileNotFoundError by the commands: one line, exit status 2
    from lyra_agents import evaluate

    assert evaluate.main([str(copy), "--windows", "1"]) == 2
    assert not marker.exists()


def test_convert_writes_the_npz_of_a_trusted_old_run(trained, tmp_path, monkeypatch, capsys):
    from lyra_agents import factory

    monkeypatch.delenv(TRUST_ENV, raising=False)
    cfg, model, venv, run_dir = trained
    copy = shutil.copytree(run_dir, tmp_path / "old")
    (copy / "vecnormalize.npz").unlink()
    assert factory.main(["convert", str(copy)]) == 0
    assert "warning: trusting model files" in capsys.readouterr().err
    scheduler = load_policy_scheduler(copy)
    obs, _ = observations(cfg, 3)
    np.testing.assert_array_equal(scheduler.normalizer.normalize_obs(obs[2]), venv.normalize_obs(obs[2]))


def test_statistics_npz_holds_no_objects(trained):
    _, _, _, run_dir = trained
    with np.load(run_dir / "vecnormalize.npz", allow_pickle=False) as data:
        assert {"obs_mean", "obs_var", "obs_count", "ret_mean", "clip_obs", "epsilon"} <= set(data.files)
        assert all(data[key].dtype != object for key in data.files)


# ---------------------------------------------------------------------- train.py --resume
def _train_module():
    return load_train_script("train_script_safe")


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.slow
def test_resume_does_not_run_crafted_pickles_unless_trusted(trained, tmp_path, monkeypatch, capsys, trusted):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    _, model, _, run_dir = trained
    copy = shutil.copytree(run_dir, tmp_path / "crafted")
    markers = plant_payloads(copy, tmp_path, every_field=not trusted)
    args = ["--resume", str(copy / "model.zip"), "--no-compare",
            "--set", f"runs_dir={tmp_path / 'runs'}", f"total_timesteps={STEPS + 64}"]
    assert _train_module().main(args + (["--trust-model-files"] if trusted else [])) == 0
    assert all(m.exists() for m in markers) == trusted and any(m.exists() for m in markers) == trusted
    out = capsys.readouterr()
    assert f"steps {STEPS} -> {STEPS + 64}" in out.out
    assert ("warning: trusting model files" in out.err) == trusted
    (resumed,) = (tmp_path / "runs").iterdir()
    assert {"model.zip", "vecnormalize.npz", "vecnormalize.pkl"} <= {p.name for p in resumed.iterdir()}
    files = find_artifacts(resumed)
    assert files.vecnormalize == resumed / "vecnormalize.npz"
    assert load_model(load_train_config(files.config), files.model).num_timesteps == STEPS + 64


def test_a_config_cannot_name_a_loader_as_its_heuristic(trained, tmp_path):
    """config.yaml is read with yaml.safe_load; its guided heuristic must be a plain name, so a crafted
    config cannot make loading a model load (and trust) another file through ``model:PATH?trust=1``."""
    from lyra_agents.config import TrainConfigError

    _, _, _, run_dir = trained
    copy = shutil.copytree(run_dir, tmp_path / "crafted")
    text = (copy / "config.yaml").read_text().replace("heuristic: lyra", f"heuristic: model:{run_dir}?trust=1")
    (copy / "config.yaml").write_text(text)
    with pytest.raises(TrainConfigError, match="heuristic: must be a registered heuristic name"):
        load_policy_scheduler(copy)
