"""observation_extras on the agent side: a model trained with the learner extras sees the same
observation in the env (LearnerExtrasObservation) and run as a scheduler (model:PATH), so both
give the same episode; the DeepSets extractor takes the extras (issue 26 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from lyra_agents.config import TrainConfig
from lyra_agents.evaluate import evaluate_model, evaluate_scheduler
from lyra_agents.factory import build_training_envs, make_eval_env, make_model
from lyra_agents.policy_scheduler import AllocPolicyScheduler
from lyra_agents.spaces import model_spaces
from lyra_gym.envs import ALLOC_ENV_ID
from lyra_gym.envs.learner_extras import LearnerExtrasObservation, extras_size


@pytest.mark.slow
def test_alloc_model_with_extras_reproduces_its_env_episode_as_a_scheduler():
    cfg = TrainConfig(env_id=ALLOC_ENV_ID, window_s=3 * 3600.0, num_job_slots=8, num_server_slots=2, n_envs=1,
                      vec_env="dummy", n_steps=64, batch_size=64, net_arch=[32, 32], device="cpu",
                      extractor="deepsets", deepsets_hidden=16, deepsets_slot_dim=4, observation_extras=True,
                      max_steps=100_000)
    plain = TrainConfig(**{**cfg.to_dict(), "observation_extras": False})
    assert model_spaces(cfg)[0].shape[0] == model_spaces(plain)[0].shape[0] + extras_size(8)
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    model.learn(128)  # non-trivial normalisation statistics
    env = make_eval_env(cfg)
    assert isinstance(env, LearnerExtrasObservation)
    scheduler = AllocPolicyScheduler(model, cfg, venv)
    in_env = evaluate_model(model, env, [0], venv)[0]
    in_engine = evaluate_scheduler(scheduler, env, [0])[0]
    assert in_env["jobs_total"] > 0
    for key in ("jct_mean_s", "queue_mean_s", "preemptions", "servers_borrowed", "scale_events", "makespan_s"):
        assert in_env[key] == in_engine[key], key
    assert np.isfinite(in_env["jct_mean_s"])
    venv.close()
