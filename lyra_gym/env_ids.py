"""The ``LyraGym/`` environment ids: the one table of ids and entry points, their extra wrapper,
the deprecated ``-v0`` names, and their registration with Gymnasium (by entry-point string, so
registering loads no environment code). ``import lyra_gym`` registers them; ``lyra_gym.envs``
re-registers from the same table."""

from __future__ import annotations

import warnings

from gymnasium.envs.registration import WrapperSpec, register, registry

#: Gymnasium id -> ``module:class`` of every LyraGym environment.
ENV_ENTRY_POINTS = {
    "LyraGym/Cluster-v1": "lyra_gym.envs.cluster_env:ClusterEnv",
    "LyraGym/Loaning-v1": "lyra_gym.envs.cluster_env:LoaningEnv",
    "LyraGym/Elastic-v1": "lyra_gym.envs.cluster_env:ElasticEnv",
    "LyraGym/Alloc-v1": "lyra_gym.envs.alloc_env:AllocEnv",
    "LyraGym/Cluster-v2": "lyra_gym.envs.cluster_env_v2:ClusterEnvV2",
    "LyraGym/Loaning-v2": "lyra_gym.envs.cluster_env_v2:LoaningEnvV2",
    "LyraGym/Elastic-v2": "lyra_gym.envs.cluster_env_v2:ElasticEnvV2",
}

#: The ids' extra wrapper: ``info["final_metrics"]`` on a ``TimeLimit`` truncation, applied only
#: when ``gymnasium.make`` adds a ``TimeLimit`` (lyra_gym/envs/truncation.py).
ENV_ADDITIONAL_WRAPPERS = (
    WrapperSpec("FinalMetricsOnTruncation", "lyra_gym.envs.truncation:after_time_limit", {}),)

#: The ``-v0`` ids of releases before 0.2.0 -> their ``-v1`` id (CHANGELOG.md). Kept one release:
#: they make the present (``-v1``) environment, and Gymnasium warns that they are out of date. They
#: do not reproduce what ``-v0`` did before the changes CHANGELOG.md lists.
DEPRECATED_ENV_IDS = {env_id.replace("-v1", "-v0"): env_id for env_id in ENV_ENTRY_POINTS if env_id.endswith("-v1")}


def register_env_ids() -> None:
    """Register every id of :data:`ENV_ENTRY_POINTS` and the deprecated ``-v0`` name of each ``-v1``
    id (idempotent)."""
    old_names = {new: old for old, new in DEPRECATED_ENV_IDS.items()}
    for env_id, entry_point in ENV_ENTRY_POINTS.items():
        for name in (env_id, *([old_names[env_id]] if env_id in old_names else [])):
            if name not in registry:
                register(id=name, entry_point=entry_point, additional_wrappers=ENV_ADDITIONAL_WRAPPERS)


def current_env_id(env_id: str) -> str:
    """``env_id``, or its ``-v1`` id when it is a deprecated ``-v0`` one (a ``DeprecationWarning`` then):
    for configs saved before 0.2.0 (a trained agent's ``config.yaml``)."""
    new = DEPRECATED_ENV_IDS.get(env_id)
    if new is None:
        return env_id
    warnings.warn(f"{env_id} is deprecated: read as {new} (CHANGELOG.md)", DeprecationWarning, stacklevel=2)
    return new
