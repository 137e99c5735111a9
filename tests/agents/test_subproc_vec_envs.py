"""SB3's standard constructor with worker processes (issue 27 item 1): ``make_vec_env(id,
vec_env_cls=SubprocVecEnv)`` and MaskablePPO on it, from a user's script that imports lyra_gym at
the top as any Gymnasium plugin is imported; and ``gym.make("lyra_gym:LyraGym/...")``, which
imports the package in whatever process makes the env (nothing imported beforehand)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import numpy as np
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    import lyra_gym  # noqa: F401  (registers the LyraGym/ ids, in the workers too)

    if __name__ == "__main__":
        venv = make_vec_env("{env_id}", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
        first = venv.reset()
        venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
        masks = venv.env_method("action_masks")
        venv.close()
        print(first.shape, len(masks))
""")


@pytest.mark.parametrize("env_id", ["LyraGym/Elastic-v1", pytest.param("LyraGym/Alloc-v1", marks=pytest.mark.slow)])
@pytest.mark.slow
def test_make_vec_env_with_worker_processes(tmp_path, env_id):
    pytest.importorskip("stable_baselines3")
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT.format(env_id=env_id))
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    shape, masks = out.stdout.split(")")[0] + ")", out.stdout.split(")")[1].split()[0]
    assert shape.startswith("(2, ") and masks == "2"


@pytest.mark.slow
def test_maskable_ppo_learns_on_worker_processes(tmp_path):
    pytest.importorskip("sb3_contrib")
    script = tmp_path / "ppo_script.py"
    script.write_text(textwrap.dedent("""
        from sb3_contrib import MaskablePPO
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import SubprocVecEnv

        import lyra_gym  # noqa: F401

        if __name__ == "__main__":
            venv = make_vec_env("LyraGym/Loaning-v1", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
            model = MaskablePPO("MlpPolicy", venv, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
            model.learn(32)
            venv.close()
            print("steps", model.num_timesteps)
    """))
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "32"


def test_module_qualified_id_needs_no_import(tmp_path):
    code = "import gymnasium as gym; env = gym.make('lyra_gym:LyraGym/Cluster-v1'); print(env.reset(seed=0)[0].shape)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().startswith("(")
