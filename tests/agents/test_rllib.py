"""RLlib backend: one PPO iteration (new API stack, masked MultiDiscrete module), a checkpoint,
and the checkpoint run through the engine as a scheduler (``rllib:PATH``), loaded from plain
weights (``module_weights.npz``) unless trusted."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="RLlib not installed: pip install lyra-gym[rllib]")

import ray
import torch

from lyra_agents.config import load_train_config
from lyra_agents.factory import make_eval_env
from lyra_gym.run.simulate import simulate

pytestmark = pytest.mark.slow  # one RLlib iteration per test: CI runs them with -m slow


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    if started:
        ray.shutdown()


def test_masked_module_never_picks_a_masked_value():
    import gymnasium as gym
    from ray.rllib.core.columns import Columns

    from lyra_agents.rllib_backend import MaskedMultiDiscreteModule

    nvec = np.array([5, 5, 3])
    obs_space = gym.spaces.Dict({"observations": gym.spaces.Box(-1, 1, (4,), np.float32),
                                 "action_mask": gym.spaces.Box(0, 1, (int(nvec.sum()),), np.float32)})
    module = MaskedMultiDiscreteModule(observation_space=obs_space, action_space=gym.spaces.MultiDiscrete(nvec),
                                       model_config={"hidden": [8]})
    mask = torch.zeros(64, 13)
    mask[:, [1, 2, 5, 12]] = 1.0  # dimension 0: {1, 2}; dimension 1: {0}; dimension 2: {2}
    batch = {Columns.OBS: {"observations": torch.randn(64, 4), "action_mask": mask}}
    logits = module.forward_exploration(batch)[Columns.ACTION_DIST_INPUTS]
    dist = module.get_exploration_action_dist_cls().from_logits(logits)
    actions = dist.sample().numpy()
    assert set(actions[:, 0]) <= {1, 2} and (actions[:, 1] == 0).all() and (actions[:, 2] == 2).all()
    assert module.compute_values(batch).shape == (64,)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, local_ray):
    """One RLlib PPO iteration (2 env runners, batch 256) on 3 h windows, K=8, M=4."""
    from lyra_agents.rllib_backend import train_rllib

    runs = tmp_path_factory.mktemp("rllib_runs")
    args = argparse.Namespace(
        env="LyraGym/Cluster-v1", config=None, quick=False, seed=3, resume=None, no_compare=True,
        overrides=[f"runs_dir={runs}", "window_s=10800", "num_job_slots=8", "num_server_slots=4",
                   "net_arch=[32,32]", "n_epochs=1", "num_env_runners=2", "iterations=1",
                   "train_batch_size=256", "minibatch_size=128", "device=cpu"],
    )
    assert train_rllib(args) == 0
    (run_dir,) = list(runs.iterdir())
    return run_dir


def test_one_rllib_iteration_writes_checkpoint_and_tensorboard(trained_run):
    from lyra_agents.rllib_backend import CHECKPOINT_DIR, MODULE_SUBPATH

    assert (trained_run / CHECKPOINT_DIR / MODULE_SUBPATH).is_dir()
    assert (trained_run / "config.yaml").is_file()
    events = list(trained_run.glob("events.out.tfevents.*"))
    assert events
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(events[0])).Reload().Tags()["scalars"]
    assert any(t.startswith("rllib/") for t in tags)
    # custom/* appear once an episode has ended within the iteration (3 h windows: a few hundred steps)
    assert all(t.startswith(("rllib/", "custom/")) for t in tags)


def test_rllib_checkpoint_runs_through_the_engine_as_a_scheduler(trained_run):
    from lyra_agents.rllib_backend import RllibPolicyScheduler, load_rllib_scheduler

    scheduler = load_rllib_scheduler(str(trained_run))
    assert isinstance(scheduler, RllibPolicyScheduler)
    cfg = load_train_config(trained_run / "config.yaml")
    env = make_eval_env(cfg)
    window = env.windows.test(0)
    jobs = window.jobs(env.trace)
    result = simulate(jobs, scheduler, env.sim_config, seed=window.seed, profiles=env.profiles)
    assert result.metrics["jobs_unfinished"] == 0
    assert result.metrics["jobs_finished"] == len(jobs)
    assert scheduler.invalid_actions == 0  # argmax of masked logits is always a valid value


def test_rllib_loader_by_name(trained_run):
    """``rllib:PATH`` through the registry's loader group, once pyproject declares the entry point."""
    from importlib.metadata import entry_points

    from lyra_agents.rllib_backend import RllibPolicyScheduler
    from lyra_gym.sim import scheduler as registry
    if "rllib" not in {ep.name for ep in entry_points(group=registry.PREFIX_ENTRY_POINT_GROUP)}:
        pytest.skip("entry point rllib = lyra_agents.rllib_backend:load_rllib_scheduler not installed yet")
    assert isinstance(registry.make(f"rllib:{trained_run}"), RllibPolicyScheduler)


# ---------------------------------------------------------------------- safe loading (docs/trust.md)
class _Payload:
    """Unpickling this creates the directory ``marker``: proof that code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return os.makedirs, (self.marker, 0o755, True)


def _logits(module, obs, masks):
    from ray.rllib.core.columns import Columns

    batch = {Columns.OBS: {"observations": torch.as_tensor(obs), "action_mask": torch.as_tensor(masks)}}
    with torch.no_grad():
        return module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS]


def test_safe_rllib_load_equals_rllibs_own_checkpoint_loading(trained_run, monkeypatch):
    from ray.rllib.core.rl_module.rl_module import RLModule

    from lyra_agents.rllib_backend import CHECKPOINT_DIR, MODULE_SUBPATH, WEIGHTS_FILE, load_rllib_scheduler

    monkeypatch.delenv("LYRA_GYM_TRUST_MODEL_FILES", raising=False)
    assert (trained_run / CHECKPOINT_DIR / WEIGHTS_FILE).is_file()
    safe = load_rllib_scheduler(trained_run).module
    reference = RLModule.from_checkpoint(str(trained_run / CHECKPOINT_DIR / MODULE_SUBPATH))  # our own file
    rng = np.random.default_rng(0)
    size = safe.pi[0].in_features
    obs = rng.uniform(-1, 1, (16, size)).astype(np.float32)
    masks = (rng.uniform(size=(16, sum(safe.nvec))) < 0.7).astype(np.float32)
    torch.testing.assert_close(_logits(safe, obs, masks), _logits(reference, obs, masks), rtol=0, atol=0)


def test_rllib_crafted_checkpoint_pickles_run_only_when_trusted(trained_run, tmp_path, monkeypatch, capsys):
    import pickle
    import shutil

    from lyra_agents.factory import UntrustedModelFileError
    from lyra_agents.rllib_backend import CHECKPOINT_DIR, MODULE_SUBPATH, WEIGHTS_FILE, load_rllib_scheduler, main

    monkeypatch.delenv("LYRA_GYM_TRUST_MODEL_FILES", raising=False)
    run = shutil.copytree(trained_run, tmp_path / "crafted")
    module_dir = run / CHECKPOINT_DIR / MODULE_SUBPATH
    genuine = (module_dir / "class_and_ctor_args.pkl").read_bytes()
    marker = tmp_path / "marker_rllib"
    (module_dir / "class_and_ctor_args.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    load_rllib_scheduler(run)  # default: rebuilt from config.yaml + module_weights.npz
    assert not marker.exists()
    with pytest.raises(Exception):  # the payload replaced the class information
        load_rllib_scheduler(f"{run}?trust=1")
    assert marker.exists()
    assert capsys.readouterr().err.count("warning: trusting model files") == 1
    # an older run without the .npz: refused in one line, unless trusted or converted
    (module_dir / "class_and_ctor_args.pkl").write_bytes(genuine)
    (run / CHECKPOINT_DIR / WEIGHTS_FILE).unlink()
    with pytest.raises(UntrustedModelFileError) as err:
        load_rllib_scheduler(run)
    assert "\n" not in str(err.value) and "lyra_agents.rllib_backend convert" in str(err.value)
    monkeypatch.setenv("LYRA_GYM_TRUST_MODEL_FILES", "1")
    load_rllib_scheduler(run)
    monkeypatch.delenv("LYRA_GYM_TRUST_MODEL_FILES")
    assert main(["convert", str(run)]) == 0
    assert (run / CHECKPOINT_DIR / WEIGHTS_FILE).is_file()
    load_rllib_scheduler(run)
