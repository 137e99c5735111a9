"""A face for users: the names a training run's pieces define, importable from one place, and
``python -m lyra_agents.factory convert PATH`` (``docs/trust.md``).

Nothing inside the project imports this module (``tests/structure/test_import_hygiene.py`` holds that): each
name lives in, and is imported from, the module that defines it:

- :mod:`lyra_agents.vec_envs`: seeded vector envs in ``VecNormalize`` (slot-tied statistics), the eval env.
- :mod:`lyra_agents.normalizer_stats`: observation statistics as a plain ``.npz``: save, read, apply, restore.
- :mod:`lyra_agents.model_build`: device, torch threads, the algorithm class, the policy network, the model.
- :mod:`lyra_agents.model_loading`: :func:`load_model`, safe by default (see ``docs/trust.md``).
- :mod:`lyra_agents.model_files`: the limits and checks on saved files, :class:`ModelFileError`, trust.
- :mod:`lyra_agents.artifacts`: file names and paths of a run directory or a checkpoint.
- :mod:`lyra_agents.spaces`: the spaces a model is built for.
- :mod:`lyra_agents.convert_cli`: the ``convert`` command.

The limits (``MAX_DATA_BYTES``, ...) live in :mod:`lyra_agents.model_files`, where the checks read
them: set them there (``lyra_agents.model_files.MAX_ARCHIVE_BYTES = ...``); setting them here has no effect.
"""

from __future__ import annotations

import sys

from lyra_agents.artifacts import (
    CHECKPOINT_DIR,
    CHECKPOINT_PREFIX,
    CONFIG_FILE,
    MODEL_FILE,
    VECNORM_FILE,
    VECNORM_STATS_FILE,
    Artifacts,
    find_artifacts,
    new_run_dir,
    stats_path,
)
from lyra_agents.convert_cli import convert_main, convert_pickled_statistics, main
from lyra_agents.model_build import (
    algo_class,
    configure_torch,
    inference_model,
    make_model,
    policy_kwargs,
    resolve_device,
    supports_action_masks,
)
from lyra_agents.model_files import (
    DATA_MEMBER,
    MAX_ARCHIVE_BYTES,
    MAX_CONFIG_BYTES,
    MAX_DATA_BYTES,
    MAX_JSON_DEPTH,
    OPTIMIZER_MEMBER,
    POLICY_MEMBER,
    TRUST_ENV,
    ModelFileError,
    UntrustedModelFileError,
    check_archive,
    json_depth,
    load_run_config,
    parse_json_member,
    read_member,
    read_model_zip,
    read_npz,
    trust_requested,
    warn_trusted,
)
from lyra_agents.model_loading import load_model
from lyra_agents.normalizer_stats import (
    ObsNormalizer,
    load_normalizer,
    read_normalizer_stats,
    restore_normalizer_stats,
    save_normalizer_stats,
)
from lyra_agents.spaces import model_spaces, observation_widths
from lyra_agents.vec_envs import (
    TiedRunningMeanStd,
    build_training_envs,
    choose_vec_env,
    make_env,
    make_eval_env,
    make_vec_env,
    normalize,
)

__all__ = [
    "CHECKPOINT_DIR", "CHECKPOINT_PREFIX", "CONFIG_FILE", "MODEL_FILE", "VECNORM_FILE", "VECNORM_STATS_FILE",
    "Artifacts", "find_artifacts", "new_run_dir", "stats_path",
    "convert_main", "convert_pickled_statistics", "main",
    "algo_class", "configure_torch", "inference_model", "make_model", "policy_kwargs", "resolve_device",
    "supports_action_masks",
    "DATA_MEMBER", "MAX_ARCHIVE_BYTES", "MAX_CONFIG_BYTES", "MAX_DATA_BYTES", "MAX_JSON_DEPTH", "OPTIMIZER_MEMBER",
    "POLICY_MEMBER", "TRUST_ENV", "ModelFileError", "UntrustedModelFileError", "check_archive", "json_depth",
    "load_run_config", "parse_json_member", "read_member", "read_model_zip", "read_npz", "trust_requested",
    "warn_trusted",
    "load_model",
    "ObsNormalizer", "load_normalizer", "read_normalizer_stats", "restore_normalizer_stats", "save_normalizer_stats",
    "model_spaces", "observation_widths",
    "TiedRunningMeanStd", "build_training_envs", "choose_vec_env", "make_env", "make_eval_env", "make_vec_env",
    "normalize",
]

if __name__ == "__main__":
    sys.exit(main())
