"""Agents on ``LyraGym/Alloc-v1``: behaviour cloning of the expert, the model run as a scheduler
(also on warm-started windows), and the inference-only export."""

from __future__ import annotations

import pytest

from lyra_agents.config import TrainConfig
from lyra_agents.evaluate import evaluate_model, evaluate_scheduler
from lyra_agents.export import export
from lyra_agents.factory import build_training_envs, make_eval_env, make_model, save_normalizer_stats
from lyra_agents.imitation import behaviour_clone, collect_demonstrations
from lyra_agents.policy_scheduler import AllocPolicyScheduler, load_policy_scheduler
from lyra_gym.envs import ALLOC_ENV_ID


def alloc_config(**changes) -> TrainConfig:
    base = dict(env_id=ALLOC_ENV_ID, window_s=6 * 3600.0, num_job_slots=6, num_server_slots=3, n_envs=2,
                vec_env="dummy", n_steps=64, batch_size=64, net_arch=[64, 64], device="cpu", seed=3)
    return TrainConfig(**{**base, **changes})


def test_behaviour_cloning_learns_the_expert_and_demonstrations_are_the_experts():
    cfg = alloc_config()
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    demos = collect_demonstrations(venv, 600, cfg.gamma)
    assert len(demos.obs) == 600 and demos.actions.shape == (600, 1)
    # every expert action is valid under its mask
    assert all(demos.masks[i, demos.actions[i, 0]] for i in range(len(demos.obs)))
    history = behaviour_clone(model, demos, epochs=30, batch_size=128, learning_rate=1e-3, seed=0, normalizer=venv)
    assert history[0]["agreement"] < history[-1]["agreement"]
    assert history[-1]["agreement"] > 0.9
    assert history[-1]["nll"] < history[0]["nll"]
    venv.close()


# a warm-started window by default (the harder case: the episode starts mid-trace); from the trace's
# start under -m slow
@pytest.mark.parametrize("warmup_s", [pytest.param(0.0, marks=pytest.mark.slow), 3 * 3600.0])
@pytest.mark.slow
def test_alloc_model_as_a_scheduler_reproduces_its_env_episode(warmup_s, tmp_path):
    cfg = alloc_config(warmup_s=warmup_s)
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    model.learn(128)  # non-trivial normalisation statistics and a policy that is not lyra's
    env = make_eval_env(cfg)
    scheduler = AllocPolicyScheduler(model, cfg, venv, name="policy")
    in_env = evaluate_model(model, env, [1], venv)[0]
    in_engine = evaluate_scheduler(scheduler, env, [1])[0]
    for key in ("jct_mean_s", "queue_mean_s", "preemptions", "servers_borrowed", "makespan_s"):
        assert in_env[key] == in_engine[key], key
    # exported for inference (no optimizer state), loaded the safe way: the same decisions
    run = tmp_path / "run"
    run.mkdir()
    model.save(run / "model.zip")
    save_normalizer_stats(venv, run / "vecnormalize.npz")
    (run / "config.yaml").write_text(cfg.to_yaml())
    sizes = export(run, tmp_path / "exported")
    assert sizes["model.zip"] < (run / "model.zip").stat().st_size
    loaded = load_policy_scheduler(tmp_path / "exported")
    assert isinstance(loaded, AllocPolicyScheduler)
    again = evaluate_scheduler(loaded, env, [1])[0]
    assert again["jct_mean_s"] == in_engine["jct_mean_s"]
    venv.close()


def test_export_of_a_folder_without_a_model_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="model"):
        export(tmp_path, tmp_path / "out")


def test_the_shipped_reference_agent_loads_safely_and_is_small():
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "agents" / "pretrained" / "alloc-contended"
    assert sum(f.stat().st_size for f in folder.iterdir()) < 5_000_000
    scheduler = load_policy_scheduler(folder)
    assert isinstance(scheduler, AllocPolicyScheduler)
    assert scheduler.config.env_id == ALLOC_ENV_ID  # its stored shipped name, found from any folder:
    assert scheduler.config.sim_config == str(folder.parents[2] / "traces" / "contended.yaml")


@pytest.mark.slow
def test_the_scheduler_sees_the_observation_the_decision_would_get_built_afresh(monkeypatch):
    """The observer's cached base must belong to the decision it is asked about. Every decision
    point opens a new decision object, and the previous one is freed by then, so its id (a cache
    key that once went stale here: 2 in about 5,000 observations) is often reused."""
    import numpy as np

    from lyra_gym.envs.alloc import AllocObserver

    cfg = alloc_config(warmup_s=3 * 3600.0)
    venv = build_training_envs(cfg)
    scheduler = AllocPolicyScheduler(make_model(cfg, venv), cfg, venv, name="policy")
    cached = AllocObserver.observe
    seen = {"observations": 0, "stale": 0}

    def checked(self, view, decision):
        obs = cached(self, view, decision)
        fresh = AllocObserver(self.k, cfg.num_server_slots)
        seen["observations"] += 1
        seen["stale"] += not np.array_equal(obs, cached(fresh, view, decision))
        return obs

    monkeypatch.setattr(AllocObserver, "observe", checked)
    evaluate_scheduler(scheduler, make_eval_env(cfg), [1, 2])
    assert seen["observations"] > 500
    assert seen["stale"] == 0
    venv.close()
