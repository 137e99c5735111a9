"""``LyraGym/Alloc-v1`` (full control): sub-actions/s and decision points/s over whole train
episodes (12 h windows of env-14d, reset seed 0, K = 32 and 64 job slots), under the expert (the heuristic's own
sub-actions: it runs ``lyra``'s decision and reproduces it) and under random masked sub-actions.

A sub-action is one ``env.step``; a decision point is one Plan submitted to the engine (the
heuristic's no-op ticks, which the env submits without asking, included). ``track_*`` time
``env.step`` alone (from one episode per policy in ``setup_cache``); ``time_episode`` times the
whole episode loop, the action choice included.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

import lyra_gym  # noqa: F401  (registers the ids)

ALLOC_ENV_ID = "LyraGym/Alloc-v1"
POLICIES = ["expert", "random"]


def _make(slots: int, window_h: float):
    return gym.make(ALLOC_ENV_ID, num_job_slots=slots, window_s=window_h * 3600.0).unwrapped


def _choose(env, policy: str, rng: np.random.Generator):
    if policy == "expert":
        return env.expert_action()
    return np.int64(rng.choice(np.flatnonzero(env.action_masks())))


def episode(env, seed: int, policy: str) -> tuple[int, int, float]:
    """(sub-actions, decision points, seconds in env.step) of one episode."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    steps, elapsed = 0, 0.0
    while True:
        action = _choose(env, policy, rng)
        start = time.perf_counter()
        _, _, term, trunc, info = env.step(action)
        elapsed += time.perf_counter() - start
        steps += 1
        if term or trunc:
            return steps, info["decisions"], elapsed


class AllocEpisode:
    params = (POLICIES, [32, 64])
    param_names = ["policy", "slots"]
    window_h = 12.0  # the smoke test sets a short window
    timeout = 900

    def setup_cache(self):
        out = {}
        for slots in self.params[1]:
            env = _make(slots, self.window_h)
            for policy in self.params[0]:
                steps, decisions, elapsed = episode(env, 0, policy)
                out[policy, slots] = {"sub_actions_per_s": round(steps / elapsed, 1),
                                      "decision_points_per_s": round(decisions / elapsed, 1),
                                      "us_per_sub_action": round(1e6 * elapsed / steps, 1)}
        return out

    setup_cache.timeout = 900

    def track_sub_actions_per_s(self, cache, policy, slots):
        return cache[policy, slots]["sub_actions_per_s"]

    track_sub_actions_per_s.unit = "sub-actions/s"

    def track_decision_points_per_s(self, cache, policy, slots):
        return cache[policy, slots]["decision_points_per_s"]

    track_decision_points_per_s.unit = "decisions/s"

    def track_us_per_sub_action(self, cache, policy, slots):
        return cache[policy, slots]["us_per_sub_action"]

    track_us_per_sub_action.unit = "us"


class TimeAllocEpisode:
    """One whole episode (reset excluded), action choice included, K = 32."""

    params = (POLICIES,)
    param_names = ["policy"]
    slots = 32
    window_h = 12.0
    timeout = 300
    warmup_time = 0.0
    number = 1
    repeat = (1, 3, 30.0)

    def setup(self, policy):
        self.env = _make(self.slots, self.window_h)
        self.env.reset(seed=0)
        self.rng = np.random.default_rng(0)

    def time_episode(self, policy):
        env, rng = self.env, self.rng
        while True:
            _, _, term, trunc, _ = env.step(_choose(env, policy, rng))
            if term or trunc:
                return
