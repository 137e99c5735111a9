"""Gymnasium environments (namespace ``LyraGym/``), registered on ``import lyra_gym``."""

from __future__ import annotations

from lyra_gym.env_ids import ENV_ADDITIONAL_WRAPPERS, ENV_ENTRY_POINTS, register_env_ids
from lyra_gym.envs.alloc_env import AllocEnv
from lyra_gym.envs.cluster_env import ClusterEnv, ElasticEnv, LoaningEnv, LyraClusterEnv
from lyra_gym.envs.cluster_env_v2 import ClusterEnvV2, ElasticEnvV2, LeverClusterEnv, LoaningEnvV2
from lyra_gym.envs.rewards import register_reward_term, reward_terms, unregister_reward_term
from lyra_gym.envs.truncation import FinalMetricsOnTruncation
from lyra_gym.envs.wrappers import ActionMaskObservation

#: The guided environments (MultiDiscrete: the agent's levels modulate a heuristic).
ENV_IDS = ("LyraGym/Cluster-v1", "LyraGym/Loaning-v1", "LyraGym/Elastic-v1")
#: The guided environments with the heuristics' levers (preemption, slots over the running jobs,
#: exact masks, auto-commit: ``lyra_gym/envs/cluster_env_v2.py``).
ENV_IDS_V2 = ("LyraGym/Cluster-v2", "LyraGym/Loaning-v2", "LyraGym/Elastic-v2")
#: The full-control environment (Discrete sub-actions build each decision).
ALLOC_ENV_ID = "LyraGym/Alloc-v1"
ALL_ENV_IDS = (*ENV_IDS, ALLOC_ENV_ID, *ENV_IDS_V2)
#: The one table of ids and entry points and their extra wrapper (``lyra_gym/env_ids.py``).
_ENTRY_POINTS = ENV_ENTRY_POINTS
_ADDITIONAL_WRAPPERS = ENV_ADDITIONAL_WRAPPERS


def register_envs() -> None:
    """Register the ids (and the ``-v1`` ids' deprecated ``-v0`` names) again if they were removed
    from Gymnasium's registry (idempotent; ``lyra_gym.env_ids``)."""
    register_env_ids()


register_envs()

__all__ = ["ALLOC_ENV_ID", "ALL_ENV_IDS", "ENV_IDS", "ENV_IDS_V2", "ActionMaskObservation", "AllocEnv",
           "ClusterEnv", "ClusterEnvV2", "ElasticEnv", "ElasticEnvV2", "FinalMetricsOnTruncation", "LeverClusterEnv",
           "LoaningEnv", "LoaningEnvV2", "LyraClusterEnv", "register_envs", "register_reward_term", "reward_terms",
           "unregister_reward_term"]
