"""Lyra-gym: co-simulator of training and inference GPU clusters with capacity loaning and elastic jobs.

``import lyra_gym`` registers the ``LyraGym/`` environments with Gymnasium by entry-point string,
so ``gymnasium.make("LyraGym/Cluster-v1")`` works and imports the environment's module then: the
simulator and the command line (``lyra-gym simulate``) never load the environments' code.
``lyra_gym.envs`` and its names (``lyra_gym.ENV_IDS``, ...) are imported on first use.
"""

from __future__ import annotations

from typing import Any

from lyra_gym.env_ids import DEPRECATED_ENV_IDS, ENV_ADDITIONAL_WRAPPERS, ENV_ENTRY_POINTS, current_env_id
from lyra_gym.env_ids import register_env_ids as _register_env_ids

_register_env_ids()

__all__ = ["DEPRECATED_ENV_IDS", "ENV_ADDITIONAL_WRAPPERS", "ENV_ENTRY_POINTS", "current_env_id"]

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
