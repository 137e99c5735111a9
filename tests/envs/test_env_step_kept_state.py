"""What a guided environment's step keeps between steps gives the numbers computed afresh
(issue 24, the env step's speed): at every step of seeded masked-random episodes,

- the observation against one built with nothing kept (no job rows, no cluster features read
  off the free GPUs of an earlier step), on several configs (knowledge models, adaptive batch,
  no inference pool), so the inline fast paths of ``ObservationBuilder._job_rows`` (kept queued
  and running rows) and the occupancy features kept by ``topology.version`` are cross-checked;
- the kept occupancy features are dated by the topology's version of this step.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_gym.envs.observation_state import engine_constants

NO_INFERENCE = {"training": [{"count": 11, "gpu_type": "v100", "gpus_per_server": 8}],
                "inference": {"count": 0, "gpu_type": "t4", "gpus_per_server": 8}}


def _forget(constants) -> None:
    """Drop everything the builder keeps between steps (the per-engine constants stay)."""
    constants.running_rows.clear()
    constants.queued_rows.clear()
    constants.occupancy = None


def _rollout(env, seed: int, steps: int, check) -> int:
    """``check(env)`` after every observation of up to ``steps`` masked-random steps; how many."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    nvec = env.action_space.nvec
    checked = 0
    for _ in range(steps):
        check(env.unwrapped)
        checked += 1
        masks = env.unwrapped.action_masks()
        action = np.array([rng.choice(np.flatnonzero(p)) for p in np.split(masks, np.cumsum(nvec)[:-1])])
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return checked


def _same_as_afresh(env) -> None:
    view = env.engine.view
    constants = engine_constants(view)
    kept = env.obs.tobytes()
    assert constants.occupancy is not None and constants.occupancy[0] == view._engine.topology.version
    _forget(constants)
    fresh = env.builder.build(view, env.slots, env.server_ids)
    assert fresh.tobytes() == kept, f"step {env.steps}"


@pytest.mark.parametrize("env_id, config", [
    ("LyraGym/Cluster-v1", {}),
    ("LyraGym/Elastic-v1", {"scaling": "adaptive"}),
    ("LyraGym/Loaning-v1", {"knowledge": {"mode": "estimate"}}),
    ("LyraGym/Cluster-v1", {"knowledge": {"mode": "history"}, "cluster": NO_INFERENCE}),
])
def test_observation_with_kept_rows_and_occupancy_is_the_one_built_afresh(env_id, config):
    env = gym.make(env_id, config=config, num_job_slots=12, num_server_slots=4)
    assert _rollout(env, 3, 150, _same_as_afresh) > 20


def test_kept_occupancy_is_used_only_while_the_topology_is_unchanged():
    """A step that kept the occupancy features (same topology version) and one that rebuilt
    them both occur, and a stale entry (an older version) is never read."""
    env = gym.make("LyraGym/Cluster-v1", num_job_slots=12, num_server_slots=4)
    seen = {"kept": 0, "rebuilt": 0}
    last: list = [None]

    def check(env) -> None:
        entry = engine_constants(env.engine.view).occupancy
        seen["kept" if entry is last[0] else "rebuilt"] += 1
        last[0] = entry
        _same_as_afresh(env)
        last[0] = engine_constants(env.engine.view).occupancy  # the entry the fresh build made

    _rollout(env, 4, 200, check)
    assert seen["kept"] > 0 and seen["rebuilt"] > 0, seen
