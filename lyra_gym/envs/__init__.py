"""Gymnasium environments (namespace ``LyraGym/``), registered on ``import lyra_gym``."""

from __future__ import annotations

from gymnasium.envs.registration import WrapperSpec, register, registry

from lyra_gym.envs.alloc_env import AllocEnv
from lyra_gym.envs.cluster_env import ClusterEnv, ElasticEnv, LoaningEnv, LyraClusterEnv
from lyra_gym.envs.rewards import register_reward_term, reward_terms, unregister_reward_term
from lyra_gym.envs.truncation import FinalMetricsOnTruncation
from lyra_gym.envs.wrappers import ActionMaskObservation

#: The guided environments (MultiDiscrete: the agent's levels modulate a heuristic).
ENV_IDS = ("LyraGym/Cluster-v1", "LyraGym/Loaning-v1", "LyraGym/Elastic-v1")
#: The full-control environment (Discrete sub-actions build each decision).
ALLOC_ENV_ID = "LyraGym/Alloc-v1"
ALL_ENV_IDS = (*ENV_IDS, ALLOC_ENV_ID)
_ENTRY_POINTS = {
    "LyraGym/Cluster-v1": "lyra_gym.envs.cluster_env:ClusterEnv",
    "LyraGym/Loaning-v1": "lyra_gym.envs.cluster_env:LoaningEnv",
    "LyraGym/Elastic-v1": "lyra_gym.envs.cluster_env:ElasticEnv",
    ALLOC_ENV_ID: "lyra_gym.envs.alloc_env:AllocEnv",
}
#: ``info["final_metrics"]`` on a ``TimeLimit`` truncation: applied after ``TimeLimit`` when
#: ``gymnasium.make`` adds one (``max_episode_steps``), nothing otherwise (lyra_gym/envs/truncation.py);
#: the same as ``lyra_gym.ENV_ADDITIONAL_WRAPPERS`` (tests/test_truncation_metrics.py checks).
_ADDITIONAL_WRAPPERS = (WrapperSpec("FinalMetricsOnTruncation", "lyra_gym.envs.truncation:after_time_limit", {}),)


def register_envs() -> None:
    """Register the four ids and their deprecated ``-v0`` names (idempotent; ``lyra_gym.DEPRECATED_ENV_IDS``)."""
    for env_id in ALL_ENV_IDS:
        for name in (env_id, env_id.replace("-v1", "-v0")):
            if name not in registry:
                register(id=name, entry_point=_ENTRY_POINTS[env_id], additional_wrappers=_ADDITIONAL_WRAPPERS)


register_envs()

__all__ = ["ALLOC_ENV_ID", "ALL_ENV_IDS", "ENV_IDS", "ActionMaskObservation", "AllocEnv", "ClusterEnv",
           "ElasticEnv", "FinalMetricsOnTruncation", "LoaningEnv", "LyraClusterEnv", "register_envs",
           "register_reward_term", "reward_terms", "unregister_reward_term"]
