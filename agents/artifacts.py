"""The files of a run directory or a checkpoint: their names, a new run directory, finding them,
writing them atomically (:func:`save_model`, :func:`save_stats`), and every file loading a run
reads (:func:`run_inputs`: what the output rule of :mod:`lyra_gym.outputs` keeps apart from an output)."""

from __future__ import annotations

import errno
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from lyra_agents.config import TrainConfig, is_path_value
from lyra_agents.model_files import untrusted_error
from lyra_agents.shipped import PRETRAINED_DIR as PRETRAINED_DIR  # re-exported: where it was before 0.3.0
from lyra_agents.shipped import shipped_agent
from lyra_gym.outputs import atomic_path

if TYPE_CHECKING:
    from lyra_agents.scenarios import Scenario

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
            raise untrusted_error(self.vecnormalize_pickle, "observation statistics")
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


# ---------------------------------------------------------------------- writing a run's files
#: errno values of a full or read-only disk: a write that fails for them is one line, not a traceback.
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


class WriteError(OSError):
    """A file that could not be written (disk full, ...): the message names it and why."""


@contextmanager
def written(path: str | os.PathLike) -> Iterator[Path]:
    """:func:`lyra_gym.outputs.atomic_path` (a hidden sibling, renamed over ``path`` once complete),
    with an ``OSError`` while writing raised as :class:`WriteError` naming ``path``."""
    try:
        with atomic_path(path) as tmp:
            yield tmp
    except WriteError:
        raise
    except OSError as err:
        raise WriteError(f"cannot write {path}: {err.strerror or err}") from None


def save_model(model: Any, path: str | os.PathLike) -> Path:
    """SB3's ``model.save`` (which writes in place) into a hidden sibling, renamed over ``path`` once
    complete: a failed or interrupted save leaves the old file or none, never half of one. Given an
    open file, SB3 writes it as is (a path without ``.zip`` would get one appended)."""
    with written(path) as tmp, open(tmp, "wb") as fh:
        model.save(fh)
    return Path(path)


def save_stats(vecnorm: Any, npz: str | os.PathLike, pickle_path: str | os.PathLike | None = None) -> None:
    """The observation statistics of ``vecnorm`` as plain arrays (``npz``) and, given ``pickle_path``,
    SB3's pickle, each written atomically (:func:`written`). Written before the model, so a model file
    on disk always has its statistics beside it."""
    from lyra_agents.normalizer_stats import save_normalizer_stats

    with written(npz) as tmp:
        save_normalizer_stats(vecnorm, tmp)
    if pickle_path is not None:
        with written(pickle_path) as tmp:
            vecnorm.save(str(tmp))


# ---------------------------------------------------------------------- what loading a run reads
_SIM_PATH_FIELDS = ("profiles", "demand_csv", "efficiency")  # lyra_gym.model.config.PATH_FIELDS


def _sim_config_files(path: str | os.PathLike, label: str) -> list[tuple[str, str]]:
    """(what, path) of the files a cluster config file names (none when it does not load: loading it
    again later reports why)."""
    from lyra_gym.model.config import load_config

    try:
        config = load_config(path)
    except (OSError, ValueError, RecursionError):
        return []
    return [(f"{key} (in {label})", value) for key in _SIM_PATH_FIELDS if (value := getattr(config, key, None))]


def scenario_inputs(scenario: Scenario, label: str) -> list[tuple[str, str]]:
    """(what, path) of the files a benchmark scenario reads: its cluster config file and the profile,
    demand and efficiency files its resolved config names."""
    pairs: list[tuple[str, Any]] = [(f"{label} config_file", scenario.config_path())]
    try:
        config = scenario.sim_config()
    except (OSError, ValueError, RecursionError):
        config = None  # reported when the scenario is built
    pairs += [(f"{label} {key}", getattr(config, key, None)) for key in _SIM_PATH_FIELDS]
    return [(what, os.fspath(path)) for what, path in pairs if path]


def config_inputs(cfg: TrainConfig, label: str) -> list[tuple[str, str]]:
    """(what, path) of every file a run's config names: ``trace`` (a CSV), ``sim_config`` and the
    files it names, ``profiles``, and the ``suite`` file with the files of the scenarios it trains on."""
    pairs = [(f"{key} (in {label})", getattr(cfg, key)) for key in ("trace", "sim_config", "profiles", "suite")
             if is_path_value(key, getattr(cfg, key))]
    if is_path_value("sim_config", cfg.sim_config):
        pairs += _sim_config_files(cfg.sim_config, f"sim_config of {label}")  # type: ignore[arg-type]
    if cfg.scenarios:
        from lyra_agents.suite import get_suite

        try:
            suite = get_suite(cfg.suite)
            pairs += [p for name in cfg.scenarios for p in scenario_inputs(suite.get(name), f"{label} scenario {name}")]
        except (OSError, ValueError, RecursionError):
            pass  # reported when the run's envs are built
    return pairs


def run_inputs(option: str, path: str | os.PathLike) -> list[tuple[str, str]]:
    """(what, path) of everything loading the saved model at ``path`` reads: ``path`` itself, the model,
    its statistics, its config and every file that config names (:func:`config_inputs`). A part that
    cannot be found or read is left out: loading the model reports it."""
    from lyra_agents.model_files import load_run_config

    pairs = [(option, os.fspath(path))]
    try:
        files = find_artifacts(path)
    except (OSError, ValueError):
        return pairs
    kinds = {"model": files.model, "statistics": files.vecnormalize,
             "statistics pickle": files.vecnormalize_pickle, "config": files.config}
    pairs += [(f"{option} {path} ({kind})", os.fspath(f)) for kind, f in kinds.items() if f is not None]
    try:
        cfg = load_run_config(files.config)
    except (OSError, ValueError, RecursionError):
        return pairs
    return pairs + config_inputs(cfg, f"{option} {path}")
