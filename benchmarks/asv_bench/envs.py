"""The guided environments (``LyraGym/Cluster-v1``, ``Loaning-v1``, ``Elastic-v1``) under random
masked actions, K = 32 job slots, the default trace (env-14d, 12 h train windows).

* ``time_steps``: ``steps`` consecutive ``env.step`` calls with the masked action sampling
  (the loop an agent runs; resets included when an episode ends).
* ``track_steps_per_s``: ``env.step`` alone (the sampling is the agent's cost), the README's unit.
* ``track_vec_steps_per_s``: a 4-env ``SyncVectorEnv`` in one process, the whole loop with the
  sampling, steps counted per env.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

import lyra_gym  # noqa: F401  (registers the ids)

from ._common import masked_action

ENV_IDS = ["LyraGym/Cluster-v1", "LyraGym/Loaning-v1", "LyraGym/Elastic-v1"]


class GuidedEnvStep:
    params = (ENV_IDS,)
    param_names = ["env"]
    slots = 32
    steps = 2000  # the smoke test sets a few
    copies = 4
    timeout = 300
    repeat = (1, 5, 20.0)

    def setup(self, env_id):
        self.env = gym.make(env_id, num_job_slots=self.slots).unwrapped
        self.env.reset(seed=0)
        self.rng = np.random.default_rng(0)

    def time_steps(self, env_id):
        env, rng = self.env, self.rng
        for _ in range(self.steps):
            _, _, term, trunc, _ = env.step(masked_action(env, rng))
            if term or trunc:
                env.reset()

    def track_steps_per_s(self, env_id):
        env, rng = self.env, self.rng
        elapsed = 0.0
        for _ in range(self.steps):
            action = masked_action(env, rng)
            start = time.perf_counter()
            _, _, term, trunc, _ = env.step(action)
            elapsed += time.perf_counter() - start
            if term or trunc:
                env.reset()
        return round(self.steps / elapsed, 1)

    track_steps_per_s.unit = "steps/s"

    def track_vec_steps_per_s(self, env_id):
        slots = self.slots
        envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id, num_job_slots=slots) for _ in range(self.copies)])
        envs.reset(seed=list(range(self.copies)))
        rounds = max(1, self.steps // self.copies)
        start = time.perf_counter()
        for _ in range(rounds):
            envs.step(np.stack([masked_action(e.unwrapped, self.rng) for e in envs.envs]))
        elapsed = time.perf_counter() - start
        envs.close()
        return round(rounds * self.copies / elapsed, 1)

    track_vec_steps_per_s.unit = "steps/s"
