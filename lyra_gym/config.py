"""Simulation configuration: dataclasses, plus loading them from YAML or TOML.

A config file maps onto :class:`SimConfig`; unknown keys are errors that name
the key's full path. Every field has a default, so an empty file is valid.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from lyra_gym.demand import DiurnalDemandConfig


class ConfigError(ValueError):
    """An impossible or malformed configuration; the message names the field (and file)."""


@dataclass(frozen=True)
class ServerGroup:
    """``count`` identical servers of ``gpus_per_server`` GPUs of ``gpu_type``."""

    count: int
    gpu_type: str
    gpus_per_server: int = 8


@dataclass(frozen=True)
class ClusterConfig:
    """Both clusters. Sizes are assumptions: the Lyra paper does not publish them.

    Defaults: 16 x 8 V100 training servers (128 GPUs) and 16 x 8 T4 inference
    servers; the paper's inference GPUs are T4-class, its training GPUs
    V100/A100-class.
    """

    training: tuple[ServerGroup, ...] = (ServerGroup(16, "v100", 8),)
    inference: ServerGroup = ServerGroup(16, "t4", 8)

    @property
    def training_gpus(self) -> int:
        return sum(g.count * g.gpus_per_server for g in self.training)


@dataclass(frozen=True)
class OverheadConfig:
    """Seconds of no progress while a job holds its GPUs.

    - ``rescale_s``: after any change of a running job's workers or placement;
      30 s as in the Pollux simulator (adaptdl, OSDI 2021 artifact).
    - ``restart_s``: after a (re)start; ``None`` takes the model's
      ``restart_overhead_s`` from the profile (Sia simulator's 15-250 s).
    - ``migrate_s``: after a move with the same worker count; 45 s as the Sia
      simulator's migration cost.
    - ``resume_s``: restart of a job the scheduler suspended in memory
      (``Plan.suspend``, Gandiva's suspend/resume); 1 s is an assumption
      (Gandiva, OSDI 2018, suspends at a mini-batch boundary and keeps the
      state in host memory, far cheaper than a checkpoint restore).
    """

    rescale_s: float = 30.0
    restart_s: float | None = None
    migrate_s: float = 45.0
    resume_s: float = 1.0


@dataclass(frozen=True)
class SimConfig:
    """Everything the engine needs besides the trace and the scheduler.

    - ``demand``: synthetic diurnal inference demand (its ``num_servers`` is
      overwritten by the inference cluster's size).
    - ``demand_preset``: a named shape from ``lyra_gym.demand.DEMAND_PRESETS``
      (``default`` 4x, ``mild`` 2.5x, ``strong`` 8x peak/trough); the settings it
      makes override those of ``demand``.
    - ``demand_csv``: a ``time_s,servers_needed`` file that replaces ``demand``.
    - ``reclaim_grace_s``: seconds between a reclaim request and its deadline
      (DESIGN.md: default 0 = immediate; the policy answers at the same
      decision point).
    - ``allow_mixed_gpu_types``: may one job span GPU types (runs at the
      slowest worker's pace)?
    - ``profiles``: a profile JSON path; ``None`` = the built-in profile.
    - ``reference_gpu``: GPU type the trace's durations refer to; ``None`` =
      the profile's reference type.
    - ``horizon_s``: stop the simulation at this time (unfinished jobs are
      reported); ``None`` = run until every job finishes or nothing can change.
    - ``demand_horizon_pad_s``: the synthetic demand curve covers the last
      submit time plus this; after it the last value holds.
    """

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    demand: DiurnalDemandConfig = field(default_factory=DiurnalDemandConfig)
    demand_preset: str | None = None
    demand_csv: str | None = None
    reclaim_grace_s: float = 0.0
    allow_mixed_gpu_types: bool = True
    overheads: OverheadConfig = field(default_factory=OverheadConfig)
    profiles: str | None = None
    reference_gpu: str | None = None
    horizon_s: float | None = None
    demand_horizon_pad_s: float = 3 * 86400.0

    def __post_init__(self) -> None:
        if self.reclaim_grace_s < 0:
            raise ConfigError(f"reclaim_grace_s: must be >= 0, got {self.reclaim_grace_s}")
        if self.overheads.rescale_s < 0:
            raise ConfigError(f"overheads.rescale_s: must be >= 0, got {self.overheads.rescale_s}")
        if self.overheads.restart_s is not None and self.overheads.restart_s < 0:
            raise ConfigError(f"overheads.restart_s: must be >= 0, got {self.overheads.restart_s}")
        for name in ("migrate_s", "resume_s"):
            if getattr(self.overheads, name) < 0:
                raise ConfigError(f"overheads.{name}: must be >= 0, got {getattr(self.overheads, name)}")
        if not self.cluster.training:
            raise ConfigError("cluster.training: at least one server group is needed")
        for i, group in enumerate((*self.cluster.training, self.cluster.inference)):
            name = f"cluster.training[{i}]" if i < len(self.cluster.training) else "cluster.inference"
            if group.count < 0 or (group.count == 0 and name != "cluster.inference"):
                raise ConfigError(f"{name}.count: must be >= 1 (inference may be 0), got {group.count}")
            if group.gpus_per_server < 1:
                raise ConfigError(f"{name}.gpus_per_server: must be >= 1, got {group.gpus_per_server}")
        if self.demand_preset is not None:
            from lyra_gym.demand import DEMAND_PRESETS

            if self.demand_preset not in DEMAND_PRESETS:
                raise ConfigError(f"demand_preset: unknown {self.demand_preset!r} (known: {', '.join(DEMAND_PRESETS)})")
        if self.horizon_s is not None and self.horizon_s <= 0:
            raise ConfigError(f"horizon_s: must be > 0, got {self.horizon_s}")


def _build(cls: type, data: Any, path: str) -> Any:
    """Build dataclass ``cls`` from a mapping, recursing into nested dataclass fields."""
    if dataclasses.is_dataclass(data):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path or 'config'}: expected a table/mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{path + '.' if path else ''}{unknown[0]}: unknown key (known: {', '.join(fields)})")
    kwargs = {}
    for name, value in data.items():
        where = f"{path}.{name}" if path else name
        kwargs[name] = _convert(cls, name, value, where)
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise ConfigError(f"{path or 'config'}: {err}") from None


def _convert(cls: type, name: str, value: Any, where: str) -> Any:
    nested = {
        (SimConfig, "cluster"): ClusterConfig,
        (SimConfig, "demand"): DiurnalDemandConfig,
        (SimConfig, "overheads"): OverheadConfig,
        (ClusterConfig, "inference"): ServerGroup,
    }
    if (cls, name) in nested:
        return _build(nested[(cls, name)], value, where)
    if (cls, name) == (ClusterConfig, "training"):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list of server groups")
        return tuple(_build(ServerGroup, v, f"{where}[{i}]") for i, v in enumerate(value))
    return value


def config_from_dict(data: Mapping[str, Any]) -> SimConfig:
    """Build a SimConfig from nested dicts; errors name the offending key path."""
    try:
        return _build(SimConfig, dict(data), "")
    except ValueError as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(str(err)) from None


def load_config(path: str | os.PathLike) -> SimConfig:
    """Load a YAML (.yaml/.yml) or TOML (.toml) file onto SimConfig."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        data = tomllib.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text) or {}
    try:
        return config_from_dict(data)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def config_to_dict(config: SimConfig) -> dict[str, Any]:
    """The fully resolved config as plain data (written next to every run's results)."""
    return dataclasses.asdict(config)
