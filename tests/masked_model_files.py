"""Shared helper of the masked-PPO tests: a model saved as a run folder, loaded back as a
scheduler, and played through the engine with the same metrics as in its env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lyra_agents.artifacts import save_model, save_stats
from lyra_agents.evaluate import evaluate_model, evaluate_scheduler
from lyra_agents.factory import make_eval_env
from lyra_agents.policy_scheduler import load_policy_scheduler


def assert_runs_as_a_scheduler(model: Any, cfg: Any, folder: Path) -> Any:
    """Save ``model`` (trained on ``cfg``) into ``folder``, close it, load the folder as a scheduler
    and assert its engine episode's metrics equal the model's env episode on test window 0;
    returns the loaded scheduler."""
    save_stats(model.get_vec_normalize_env(), folder / "vecnormalize.npz")
    save_model(model, folder / "model.zip")
    (folder / "config.yaml").write_text(cfg.to_yaml())
    model.close()
    env = make_eval_env(cfg)
    in_env = evaluate_model(model, env, [0], model.get_vec_normalize_env())[0]
    loaded = load_policy_scheduler(folder)
    in_engine = evaluate_scheduler(loaded, env, [0])[0]
    for key in ("jct_mean_s", "queue_mean_s", "preemptions", "makespan_s"):
        assert in_env[key] == in_engine[key], key
    return loaded
