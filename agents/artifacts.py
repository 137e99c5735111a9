"""The files of a run directory or a checkpoint: their names, a new run directory, finding them."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from lyra_agents.config import TrainConfig
from lyra_agents.model_files import _untrusted

MODEL_FILE = "model.zip"
VECNORM_FILE = "vecnormalize.pkl"          # SB3's pickle (written for compatibility; loaded only when trusted)
VECNORM_STATS_FILE = "vecnormalize.npz"    # the same statistics as plain arrays (what is loaded by default)
CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_PREFIX = "model"


@dataclass(frozen=True)
class Artifacts:
    """Files of a saved model: the model, its observation statistics (``.npz``; SB3's ``.pkl``), the run config."""

    model: Path
    vecnormalize: Path | None
    config: Path
    vecnormalize_pickle: Path | None = None

    def normalizer_file(self, trust: bool = False) -> Path | None:
        """The statistics file to load: the ``.npz``; with ``trust``, SB3's pickle when there is one
        (the old behaviour). Only a pickle and no ``trust``: :class:`UntrustedModelFileError`."""
        if trust and self.vecnormalize_pickle is not None:
            return self.vecnormalize_pickle
        if self.vecnormalize is None and self.vecnormalize_pickle is not None:
            raise _untrusted(self.vecnormalize_pickle, "observation statistics")
        return self.vecnormalize


def new_run_dir(cfg: TrainConfig) -> Path:
    """``<runs_dir>/<env>__<name>__<seed>__<unix time>/`` (CleanRL's naming), created empty."""
    stem = f"{cfg.env_id.replace('/', '-')}__{cfg.name}__{cfg.seed}__{int(time.time())}"
    path = Path(cfg.runs_dir) / stem
    suffix = 1
    while path.exists():  # two runs started in the same second
        path = Path(cfg.runs_dir) / f"{stem}-{suffix}"
        suffix += 1
    path.mkdir(parents=True)
    return path


_CHECKPOINT = re.compile(r"^(?P<prefix>.+)_(?P<steps>\d+)_steps\.zip$")


#: The shipped reference agents (package data: installed with the wheel, beside this module).
PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"


def shipped_agent(path: str | os.PathLike) -> Path:
    """``pretrained/NAME`` names a shipped agent (:data:`PRETRAINED_DIR`) unless a file or folder of
    that name exists where the command runs; any other path is returned as given."""
    path = Path(path)
    if not path.exists() and len(path.parts) == 2 and path.parts[0] == "pretrained":
        return PRETRAINED_DIR / path.parts[1]
    return path


def find_artifacts(path: str | os.PathLike) -> Artifacts:
    """Resolve a run directory, its ``model.zip``, or a checkpoint ``.../checkpoints/model_N_steps.zip``;
    ``pretrained/NAME`` is a shipped agent (:func:`shipped_agent`).

    A checkpoint's statistics are ``model_vecnormalize_N_steps.npz`` (and ``.pkl``) beside it and its
    config the run directory's ``config.yaml``. Raises ``FileNotFoundError`` naming what is missing.
    """
    path = shipped_agent(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such model file (give a run directory, its model.zip, or a checkpoint)")
    stats = stats_path(path)
    pickled = stats.with_suffix(".pkl")
    for folder in (path.parent, path.parent.parent):
        if (folder / CONFIG_FILE).is_file():
            config = folder / CONFIG_FILE
            break
    else:
        raise FileNotFoundError(f"{path}: no {CONFIG_FILE} beside it or in its parent (the run's resolved config)")
    return Artifacts(path, stats if stats.is_file() else None, config, pickled if pickled.is_file() else None)


def stats_path(model_path: str | os.PathLike) -> Path:
    """The ``.npz`` statistics of a model file: ``vecnormalize.npz`` beside ``model.zip``,
    ``model_vecnormalize_N_steps.npz`` beside checkpoint ``model_N_steps.zip``."""
    model_path = Path(model_path)
    match = _CHECKPOINT.match(model_path.name)
    if match:
        return model_path.with_name(f"{match['prefix']}_vecnormalize_{match['steps']}_steps.npz")
    return model_path.with_name(VECNORM_STATS_FILE)
