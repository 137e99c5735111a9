"""Lyra-gym: co-simulator of training and inference GPU clusters with capacity loaning and elastic jobs.

``import lyra_gym`` registers the ``LyraGym/`` environments with Gymnasium by entry-point string,
so ``gymnasium.make("LyraGym/Cluster-v1")`` works and imports the environment's module then: the
simulator and the command line (``lyra-gym simulate``) never load the environments' code.
``lyra_gym.envs`` and its names (``lyra_gym.ENV_IDS``, ...) are imported on first use.
"""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import WrapperSpec as _WrapperSpec
from gymnasium.envs.registration import register as _register
from gymnasium.envs.registration import registry as _registry

#: Gymnasium id -> ``module:class`` of every LyraGym environment (``lyra_gym.envs`` registers the
#: same table, idempotently, when it is imported; tests/test_cli.py checks the two agree).
ENV_ENTRY_POINTS = {
    "LyraGym/Cluster-v1": "lyra_gym.envs.cluster_env:ClusterEnv",
    "LyraGym/Loaning-v1": "lyra_gym.envs.cluster_env:LoaningEnv",
    "LyraGym/Elastic-v1": "lyra_gym.envs.cluster_env:ElasticEnv",
    "LyraGym/Alloc-v1": "lyra_gym.envs.alloc_env:AllocEnv",
}

#: The ids' extra wrapper (the same in ``lyra_gym.envs``): ``info["final_metrics"]`` on a ``TimeLimit``
#: truncation, applied only when ``gymnasium.make`` adds a ``TimeLimit`` (lyra_gym/envs/truncation.py).
ENV_ADDITIONAL_WRAPPERS = (
    _WrapperSpec("FinalMetricsOnTruncation", "lyra_gym.envs.truncation:after_time_limit", {}),)

#: The ``-v0`` ids of releases before 0.2.0 -> their ``-v1`` id (CHANGELOG.md). Kept one release:
#: they make the present (``-v1``) environment, and Gymnasium warns that they are out of date. They
#: do not reproduce what ``-v0`` did before the changes CHANGELOG.md lists.
DEPRECATED_ENV_IDS = {env_id.replace("-v1", "-v0"): env_id for env_id in ENV_ENTRY_POINTS}

for _env_id, _entry_point in ENV_ENTRY_POINTS.items():
    for _id in (_env_id, _env_id.replace("-v1", "-v0")):
        if _id not in _registry:
            _register(id=_id, entry_point=_entry_point, additional_wrappers=ENV_ADDITIONAL_WRAPPERS)


def current_env_id(env_id: str) -> str:
    """``env_id``, or its ``-v1`` id when it is a deprecated ``-v0`` one (a ``DeprecationWarning`` then):
    for configs saved before 0.2.0 (a trained agent's ``config.yaml``)."""
    new = DEPRECATED_ENV_IDS.get(env_id)
    if new is None:
        return env_id
    import warnings

    warnings.warn(f"{env_id} is deprecated: read as {new} (CHANGELOG.md)", DeprecationWarning, stacklevel=2)
    return new

_FROM_ENVS = frozenset({"ENV_IDS", "ALL_ENV_IDS", "ALLOC_ENV_ID", "register_envs"})


def __getattr__(name: str) -> Any:
    """``lyra_gym.envs`` and its id constants, imported on first use (PEP 562); ``__version__``,
    the installed distribution's version (:func:`lyra_gym.provenance.package_version`)."""
    if name == "__version__":
        from lyra_gym.provenance import package_version

        return package_version()
    if name == "envs" or name in _FROM_ENVS:
        import lyra_gym.envs as envs

        return envs if name == "envs" else getattr(envs, name)
    raise AttributeError(f"module 'lyra_gym' has no attribute {name!r}")
