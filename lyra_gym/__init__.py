"""Lyra-gym: co-simulator of training and inference GPU clusters with capacity loaning and elastic jobs.

This module is the package's face: import what you use from here, as in
``from lyra_gym import Scheduler, Plan, simulate``. The wings (``lyra_gym.model``, ``.workloads``,
``.sim``, ``.run``, ``.envs``, ``.harness``) are internal: their paths may change between releases,
the names below stay.

- Writing a scheduler: :class:`Scheduler`, :class:`Guidance`, :class:`Plan`, :class:`ClusterView`,
  :class:`JobView`; :func:`register` a factory by name, :func:`make` one by name or import spec.
- Running one: :func:`simulate` with a :class:`SimConfig` (:class:`ClusterConfig`,
  :class:`ServerGroup`) over jobs (:class:`JobSpec`) from :func:`load_trace` or :func:`generate_trace`.
- The environments: ``import lyra_gym`` registers the ``LyraGym/`` ids with Gymnasium by entry-point
  string (:data:`ENV_IDS`, :data:`ALL_ENV_IDS`, :data:`ALLOC_ENV_ID`), so ``gymnasium.make`` imports
  an environment's code only then; their classes (:class:`ClusterEnv`, :class:`LoaningEnv`,
  :class:`ElasticEnv`, :class:`AllocEnv`; the bases :class:`LyraClusterEnv`, :class:`EpisodeEnv` to
  subclass, ``docs/writing-an-environment.md``); reward terms (:func:`register_reward_term`, :func:`reward_terms`,
  :class:`StepOutcome`); the observation layout (:data:`JOB_FEATURES`, :data:`CLUSTER_FEATURES`,
  :data:`GPU_NORM`) and ``Alloc-v1``'s (:data:`ALLOC_JOB_FEATURES`, phases :data:`BORROW`,
  :data:`RETURN`, :data:`JOB`, :data:`PLACE`; values :data:`WAIT`, :data:`PROPOSAL`;
  :data:`WORKER_LEVELS` worker options, :func:`worker_options` of a job, :class:`AllocLayout`).

Every name but the env-id table is imported on first use (PEP 562), so ``import lyra_gym`` loads
neither the simulator nor the environments, torch or stable-baselines3.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from lyra_gym.env_ids import DEPRECATED_ENV_IDS, ENV_ADDITIONAL_WRAPPERS, ENV_ENTRY_POINTS, current_env_id
from lyra_gym.env_ids import register_env_ids as _register_env_ids
from lyra_gym.lazy_face import lazy_face

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ imports them
    from lyra_gym.envs import ALL_ENV_IDS, ALLOC_ENV_ID, ENV_IDS, register_envs
    from lyra_gym.envs.alloc_env import AllocEnv
    from lyra_gym.envs.alloc_layout import (
        ALLOC_CLUSTER_FEATURES,
        ALLOC_JOB_FEATURES,
        BORROW,
        JOB,
        PHASES,
        PLACE,
        PROPOSAL,
        RETURN,
        WAIT,
        WORKER_LEVELS,
        AllocLayout,
        worker_options,
    )
    from lyra_gym.envs.cluster_env import ClusterEnv, ElasticEnv, LoaningEnv, LyraClusterEnv
    from lyra_gym.envs.episode_env import EpisodeEnv
    from lyra_gym.envs.observation import CLUSTER_FEATURES, GPU_NORM, JOB_FEATURES
    from lyra_gym.envs.rewards import StepOutcome, register_reward_term, reward_terms, unregister_reward_term
    from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
    from lyra_gym.model.jobspec import JobSpec
    from lyra_gym.run.simulate import simulate
    from lyra_gym.sim.plan import Plan
    from lyra_gym.sim.scheduler import Guidance, Scheduler, make, register
    from lyra_gym.sim.view import ClusterView, JobView
    from lyra_gym.workloads.trace import load_trace
    from lyra_gym.workloads.tracegen import generate_trace

_register_env_ids()

#: Face name -> the module that defines it (imported on first use of the name).
_FACE = {
    **dict.fromkeys(("Scheduler", "Guidance", "register", "make"), "lyra_gym.sim.scheduler"),
    "Plan": "lyra_gym.sim.plan",
    **dict.fromkeys(("ClusterView", "JobView"), "lyra_gym.sim.view"),
    "simulate": "lyra_gym.run.simulate",
    **dict.fromkeys(("SimConfig", "ClusterConfig", "ServerGroup"), "lyra_gym.model.config"),
    "JobSpec": "lyra_gym.model.jobspec",
    "load_trace": "lyra_gym.workloads.trace",
    "generate_trace": "lyra_gym.workloads.tracegen",
    **dict.fromkeys(("register_reward_term", "unregister_reward_term", "reward_terms", "StepOutcome"),
                    "lyra_gym.envs.rewards"),
    **dict.fromkeys(("JOB_FEATURES", "CLUSTER_FEATURES", "GPU_NORM"), "lyra_gym.envs.observation"),
    **dict.fromkeys(("ALLOC_JOB_FEATURES", "ALLOC_CLUSTER_FEATURES", "PHASES", "BORROW", "RETURN", "JOB", "PLACE",
                     "WAIT", "PROPOSAL", "WORKER_LEVELS", "AllocLayout", "worker_options"),
                    "lyra_gym.envs.alloc_layout"),
    **dict.fromkeys(("ENV_IDS", "ALL_ENV_IDS", "ALLOC_ENV_ID", "register_envs"), "lyra_gym.envs"),
    **dict.fromkeys(("ClusterEnv", "LoaningEnv", "ElasticEnv", "LyraClusterEnv"), "lyra_gym.envs.cluster_env"),
    "AllocEnv": "lyra_gym.envs.alloc_env",
    "EpisodeEnv": "lyra_gym.envs.episode_env",
}

__all__ = [
    # writing and running a scheduler
    "ClusterConfig", "ClusterView", "Guidance", "JobSpec", "JobView", "Plan", "Scheduler", "ServerGroup",
    "SimConfig", "generate_trace", "load_trace", "make", "register", "simulate",
    # the environments: ids, reward terms, observation and Alloc-v1 layouts
    "ALLOC_ENV_ID", "ALL_ENV_IDS", "DEPRECATED_ENV_IDS", "ENV_ADDITIONAL_WRAPPERS", "ENV_ENTRY_POINTS", "ENV_IDS",
    "current_env_id", "register_envs",
    "AllocEnv", "ClusterEnv", "ElasticEnv", "EpisodeEnv", "LoaningEnv", "LyraClusterEnv",
    "StepOutcome", "register_reward_term", "reward_terms", "unregister_reward_term",
    "CLUSTER_FEATURES", "GPU_NORM", "JOB_FEATURES",
    "ALLOC_CLUSTER_FEATURES", "ALLOC_JOB_FEATURES", "BORROW", "JOB", "PHASES", "PLACE", "PROPOSAL", "RETURN", "WAIT",
    "WORKER_LEVELS", "AllocLayout", "worker_options",
]


def _version() -> str:
    from lyra_gym.provenance import package_version

    return package_version()


# A face name is imported from its module on first use and kept here; ``envs`` is the environments'
# package; ``__version__`` the installed distribution's version.
__getattr__, __dir__ = lazy_face(globals(), _FACE, {"__version__": _version,
                                                    "envs": lambda: import_module("lyra_gym.envs")})
