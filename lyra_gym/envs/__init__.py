"""Gymnasium environments (namespace ``LyraGym/``), registered on ``import lyra_gym``."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from lyra_gym.envs.cluster_env import ClusterEnv, ElasticEnv, LoaningEnv, LyraClusterEnv
from lyra_gym.envs.wrappers import ActionMaskObservation

ENV_IDS = ("LyraGym/Cluster-v0", "LyraGym/Loaning-v0", "LyraGym/Elastic-v0")


def register_envs() -> None:
    """Register the three ids (idempotent)."""
    for env_id, cls in zip(ENV_IDS, ("ClusterEnv", "LoaningEnv", "ElasticEnv")):
        if env_id not in registry:
            register(id=env_id, entry_point=f"lyra_gym.envs.cluster_env:{cls}")


register_envs()

__all__ = ["ENV_IDS", "ActionMaskObservation", "ClusterEnv", "ElasticEnv", "LoaningEnv", "LyraClusterEnv",
           "register_envs"]
