"""Speed where training spends it: ``env.step`` in each shipped training configuration, and
``train.py``'s own throughput (issue 38 item 5).

* :class:`ConfigStep` (``track_steps_per_s``): ``env.step`` alone, steps/s, in the envs of each
  ``agents/configs/*.yaml`` (``quick.yaml`` is an overlay, not a configuration): the config's env
  id, cluster, knowledge mode, warm start, learner extras and expert rule, built as training builds
  them (:func:`lyra_agents.vec_envs.env_kwargs_of` and ``make_env``: ``Monitor``, the extras
  wrapper, the expert rule). A generalist's envs are one per scenario; the steps are shared out
  round-robin, resets (new train windows, warm start included) outside the timed part. Actions:
  ``random`` (uniform over each dimension's valid values) or ``expert`` (``expert_action()``: the
  imitation expert, the config's ``bc_expert``).
* :class:`TrainThroughput` (``track_env_steps_per_s``, ``track_env_steps_per_cpu_s``): a short SB3
  ``learn`` on ``cluster-generalist.yaml`` (its envs, normalisation, network and torch threads;
  ``updates`` rollouts of ``n_envs x n_steps`` and their updates, no evaluation), env steps per
  wall second and per CPU second of this process; imitation and model construction untimed.
"""

from __future__ import annotations

import time
from functools import cache

import numpy as np

from ._common import ROOT, masked_action

CONFIG_DIR = ROOT / "agents" / "configs"
#: The shipped training configurations (file stems), ``quick`` (an overlay) left out.
CONFIGS = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml") if p.stem != "quick")
GENERALIST = "cluster-generalist"


@cache
def train_config(name: str):
    """The :class:`~lyra_agents.config.TrainConfig` of ``agents/configs/NAME.yaml``."""
    from lyra_agents.config import load_train_config

    return load_train_config(CONFIG_DIR / f"{name}.yaml")


def config_envs(name: str) -> list:
    """One env per distinct env setting of configuration ``name`` (a generalist: one per scenario),
    wrapped as training wraps them."""
    from lyra_agents.vec_envs import env_kwargs_of, make_env

    cfg = train_config(name)
    kwargs = env_kwargs_of(cfg)
    distinct = [k for i, k in enumerate(kwargs) if k not in kwargs[:i]]
    return [make_env(cfg.env_id, k, cfg.observation_extras, cfg.bc_expert, cfg.bc_rule) for k in distinct]


def choose(env, policy: str, rng: np.random.Generator):
    """The next action of ``env`` (a wrapped env) under ``policy``: ``expert`` or ``random``."""
    if policy == "expert":
        return env.get_wrapper_attr("expert_action")()
    inner = env.unwrapped
    if hasattr(inner.action_space, "nvec"):
        return masked_action(inner, rng)
    return np.int64(rng.choice(np.flatnonzero(inner.action_masks())))  # Discrete (Alloc-v1)


def timed_steps(envs: list, policy: str, steps: int, seed: int = 0) -> float:
    """Seconds inside ``env.step`` over ``steps`` steps shared round-robin over ``envs``."""
    rng = np.random.default_rng(seed)
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    elapsed = 0.0
    for n in range(steps):
        env = envs[n % len(envs)]
        action = choose(env, policy, rng)
        start = time.perf_counter()
        _, _, term, trunc, _ = env.step(action)
        elapsed += time.perf_counter() - start
        if term or trunc:
            env.reset()
    return elapsed


class ConfigStep:
    params = (CONFIGS, ["random", "expert"])
    param_names = ["config", "policy"]
    steps = 2000  # the smoke test sets a few
    timeout = 600

    def setup_cache(self):
        out = {}
        for name in self.params[0]:
            envs = config_envs(name)
            for policy in self.params[1]:
                out[name, policy] = round(self.steps / timed_steps(envs, policy, self.steps), 1)
            for env in envs:
                env.close()
        return out

    setup_cache.timeout = 1800

    def track_steps_per_s(self, cache, config, policy):
        return cache[config, policy]

    track_steps_per_s.unit = "steps/s"


class TrainThroughput:
    updates = 1  # rollouts of n_envs x n_steps (the generalist's: 9 x 512 = 4,608 env steps each)
    n_steps = 0  # 0: the config's; the smoke test sets a few
    timeout = 900

    def setup_cache(self):
        from lyra_agents.model_build import configure_torch, make_model
        from lyra_agents.vec_envs import build_training_envs

        cfg = train_config(GENERALIST)
        if self.n_steps:
            cfg = cfg.replace(n_steps=self.n_steps, batch_size=min(cfg.batch_size, self.n_steps * cfg.n_envs))
        cfg = cfg.replace(total_timesteps=self.updates * cfg.n_steps * cfg.n_envs, progress_bar=False)
        configure_torch(cfg)
        venv = build_training_envs(cfg)
        model = make_model(cfg, venv)
        wall, cpu = time.perf_counter(), time.process_time()
        model.learn(cfg.total_timesteps)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        venv.close()
        steps = model.num_timesteps
        return {"wall": round(steps / wall, 1), "cpu": round(steps / cpu, 1)}

    setup_cache.timeout = 900

    def track_env_steps_per_s(self, cache):
        return cache["wall"]

    track_env_steps_per_s.unit = "steps/s"

    def track_env_steps_per_cpu_s(self, cache):
        return cache["cpu"]

    track_env_steps_per_cpu_s.unit = "steps/CPU-s"
