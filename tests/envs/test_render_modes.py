"""The render modes of every env: SB3's ``make_vec_env`` builds each id and collects ``rgb_array``
frames of one size per env; a frame is deterministic and shows the cluster; ``human`` prints the text
frame."""

from __future__ import annotations

import numpy as np
import pytest

import lyra_gym


@pytest.mark.parametrize("env_id", lyra_gym.envs.ALL_ENV_IDS)
@pytest.mark.sample(2)
def test_sb3_make_vec_env_works_and_renders_rgb_arrays(env_id):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=2, seed=0)
    try:
        assert "rgb_array" in venv.get_attr("metadata")[0]["render_modes"]
        venv.reset()
        images = venv.get_images()
        assert len(images) == 2
        for image in images:
            assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
        first = images[0]
        venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
        again = venv.get_images()
        assert all(image.shape == first.shape for image in again)  # one frame size per env
    finally:
        venv.close()


@pytest.mark.slow
def test_rgb_array_frames_are_deterministic_and_show_the_cluster():
    import gymnasium as gym

    frames = []
    for _ in range(2):
        env = gym.make("LyraGym/Cluster-v1", render_mode="rgb_array").unwrapped
        blank = env.render()
        env.reset(seed=3)
        for _ in range(5):
            env.step(env.expert_action())
        frames.append(env.render())
    assert blank.shape == frames[0].shape and np.array_equal(frames[0], frames[1])
    assert len(np.unique(frames[0].reshape(-1, 3), axis=0)) > len(np.unique(blank.reshape(-1, 3), axis=0))


def test_human_mode_prints_the_text_frame(capsys):
    import gymnasium as gym

    env = gym.make("LyraGym/Elastic-v1", render_mode="human").unwrapped
    env.reset(seed=0)
    env.step(env.expert_action())
    assert capsys.readouterr().out.count("train: ") == 2
    assert env.render() is None
