"""Lyra-gym: co-simulator of training and inference GPU clusters with capacity loaning and elastic jobs.

``import lyra_gym`` registers the ``LyraGym/`` environments with Gymnasium by entry-point string,
so ``gymnasium.make("LyraGym/Cluster-v0")`` works and imports the environment's module then: the
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
    "LyraGym/Cluster-v0": "lyra_gym.envs.cluster_env:ClusterEnv",
    "LyraGym/Loaning-v0": "lyra_gym.envs.cluster_env:LoaningEnv",
    "LyraGym/Elastic-v0": "lyra_gym.envs.cluster_env:ElasticEnv",
    "LyraGym/Alloc-v0": "lyra_gym.envs.alloc_env:AllocEnv",
}

#: The ids' extra wrapper (the same in ``lyra_gym.envs``): ``info["final_metrics"]`` on a ``TimeLimit``
#: truncation, applied only when ``gymnasium.make`` adds a ``TimeLimit`` (lyra_gym/envs/truncation.py).
ENV_ADDITIONAL_WRAPPERS = (
    _WrapperSpec("FinalMetricsOnTruncation", "lyra_gym.envs.truncation:after_time_limit", {}),)

for _env_id, _entry_point in ENV_ENTRY_POINTS.items():
    if _env_id not in _registry:
        _register(id=_env_id, entry_point=_entry_point, additional_wrappers=ENV_ADDITIONAL_WRAPPERS)

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
