"""sb3-contrib MaskablePPO trains on every LyraGym id (a short smoke run: the API fits end to end)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym


@pytest.mark.parametrize("env_id", [e if e == "LyraGym/Cluster-v1" else pytest.param(e, marks=pytest.mark.slow)
                                    for e in lyra_gym.ENV_IDS])  # (one env by default: the same loop)
@pytest.mark.slow
def test_maskable_ppo_trains_a_few_thousand_steps(env_id):
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    env = gym.make(env_id, window_s=6 * 3600.0, num_job_slots=8, num_server_slots=4)
    model = MaskablePPO("MlpPolicy", env, n_steps=512, batch_size=128, n_epochs=2, seed=0, device="cpu", verbose=0)
    model.learn(total_timesteps=2048)
    assert model.num_timesteps >= 2048
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, action_masks=get_action_masks(env), deterministic=True)
    assert env.action_space.contains(np.asarray(action))
