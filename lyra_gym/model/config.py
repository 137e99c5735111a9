"""Simulation configuration: dataclasses, plus loading them from YAML or TOML.

A config file maps onto :class:`SimConfig`; unknown keys are errors that name
the key's full path. Every field has a default, so an empty file is valid.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

from lyra_gym.errors import ConfigError, LyraGymError, number_problem
from lyra_gym.model.demand import MAX_DEMAND_POINTS, DiurnalDemandConfig
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.model.userfiles import (
    YamlProblem,
    read_user_file,
    shown,
    strict_yaml,
    unique_key_loader,
)

__all__ = [
    "MAX_CLUSTER_SERVERS",
    "MAX_GPUS_PER_SERVER",
    "ClusterConfig",
    "ConfigError",
    "KnowledgeConfig",
    "ModelCheckpoint",
    "OverheadConfig",
    "ServerGroup",
    "SimConfig",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "parse_config_text",
    "read_user_file",
    "shown",
    "unique_key_loader",
]

#: Most servers in both clusters together (each is a Python object in the engine).
MAX_CLUSTER_SERVERS = 100_000
#: Most GPUs on one server.
MAX_GPUS_PER_SERVER = 1024

_NONNEG = {"lo": 0.0}  # a finite number >= 0 (seconds)
#: Most bytes of a config, suite or training YAML/TOML file (larger ones are refused unread).
MAX_CONFIG_BYTES = 16 * 2**20

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _unpack(hint: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); ``X`` -> (X, False)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def _check_fields(obj: Any, prefix: str) -> None:
    """Type- and range-check every field of config dataclass ``obj`` as given in Python (no
    coercion); errors name ``prefix`` + the field."""
    rules = getattr(obj, "RULES", {})
    for f in dataclasses.fields(obj):
        where = f"{prefix}{f.name}"
        value = getattr(obj, f.name)
        base, optional = _unpack(_hints(type(obj))[f.name])
        if value is None and optional:
            continue
        if isinstance(base, type) and dataclasses.is_dataclass(base):
            if not isinstance(value, base):
                raise ConfigError(f"{where}: expected a {base.__name__}, got {type(value).__name__}")
        elif typing.get_origin(base) is tuple:
            item = typing.get_args(base)[0]
            if not isinstance(value, (tuple, list)) or not all(isinstance(v, item) for v in value):
                raise ConfigError(f"{where}: expected a tuple of {item.__name__}, got {shown(value)}")
            if isinstance(value, list):
                object.__setattr__(obj, f.name, tuple(value))
        else:
            problem = _scalar_problem(base, value, rules.get(f.name, {}))
            if problem:
                raise ConfigError(f"{where}: {problem}")


def _scalar_problem(base: type, value: Any, rule: Mapping[str, Any]) -> str | None:
    if base is bool:
        if isinstance(value, (bool, np.bool_)):
            return None
        return f"must be true or false, got {shown(value)}"
    if base is str:
        if isinstance(value, str) and value.strip():
            return None
        return f"must be a non-empty string, got {shown(value)}"
    return number_problem(value, **{**rule, "integer": base is int})  # it cuts the value it echoes


@dataclass(frozen=True)
class ServerGroup:
    """``count`` identical servers of ``gpus_per_server`` GPUs of ``gpu_type``."""

    count: int
    gpu_type: str
    gpus_per_server: int = 8

    RULES: ClassVar[dict[str, dict[str, Any]]] = {
        "count": {"integer": True, "lo": 0, "hi": MAX_CLUSTER_SERVERS},
        "gpus_per_server": {"integer": True, "lo": 1, "hi": MAX_GPUS_PER_SERVER},
    }

    def __post_init__(self) -> None:
        _check_fields(self, "ServerGroup.")


@dataclass(frozen=True)
class ClusterConfig:
    """Both clusters. Sizes are assumptions: the Lyra paper does not publish them.

    Defaults: 16 x 8 V100 training servers (128 GPUs) and 16 x 8 T4 inference
    servers; the paper's inference GPUs are T4-class, its training GPUs
    V100/A100-class.
    """

    training: tuple[ServerGroup, ...] = (ServerGroup(16, "v100", 8),)
    inference: ServerGroup = ServerGroup(16, "t4", 8)

    def __post_init__(self) -> None:
        _check_fields(self, "ClusterConfig.")

    @property
    def training_gpus(self) -> int:
        return sum(g.count * g.gpus_per_server for g in self.training)


@dataclass(frozen=True)
class ModelCheckpoint:
    """One model's checkpoint interval (s of run time), overriding
    ``OverheadConfig.checkpoint_interval_s`` for that model's jobs; 0 = free preemption."""

    model: str
    interval_s: float

    RULES: ClassVar[dict[str, dict[str, Any]]] = {"interval_s": _NONNEG}

    def __post_init__(self) -> None:
        _check_fields(self, "ModelCheckpoint.")


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
      state in host memory, far cheaper than a checkpoint restore). Only on
      the servers it left: resumed anywhere else it pays ``migrate_s``.
    - ``checkpoint_interval_s``: s of a job's run time (making progress)
      between checkpoints; a job preempted or stopped by a reclaim loses the
      work since its last one (:mod:`lyra_gym.sim.overheads`, ``docs/model.md``).
      ``0`` (default, kept so results stand) = free preemption, the Pollux
      artifact's assumption, which flatters preemptive policies; suite v1.1
      uses 1800 s (an assumption, ``docs/model.md``). ``checkpoint_by_model``:
      per-model overrides, ``[{model, interval_s}]`` (:class:`ModelCheckpoint`).
    """

    rescale_s: float = 30.0
    restart_s: float | None = None
    migrate_s: float = 45.0
    resume_s: float = 1.0
    checkpoint_interval_s: float = 0.0
    checkpoint_by_model: tuple[ModelCheckpoint, ...] = ()

    RULES: ClassVar[dict[str, dict[str, Any]]] = {
        "rescale_s": _NONNEG, "restart_s": _NONNEG, "migrate_s": _NONNEG, "resume_s": _NONNEG,
        "checkpoint_interval_s": _NONNEG,
    }

    def __post_init__(self) -> None:
        _check_fields(self, "OverheadConfig.")
        seen = set()
        for i, entry in enumerate(self.checkpoint_by_model):
            if entry.model in seen:
                raise ConfigError(f"OverheadConfig.checkpoint_by_model[{i}].model: {entry.model!r} given twice")
            seen.add(entry.model)

    def checkpoint_interval(self, model: str) -> float:
        """``model``'s checkpoint interval (s): its ``checkpoint_by_model`` entry, else the default."""
        return next((e.interval_s for e in self.checkpoint_by_model if e.model == model), self.checkpoint_interval_s)


PLACEMENT_RULES = ("spread", "consolidated")


@dataclass(frozen=True)
class SimConfig:
    """Everything the engine needs besides the trace and the scheduler.

    - ``demand``: synthetic diurnal inference demand. Its ``num_servers`` is
      not a setting here: the curve is always drawn for the inference cluster,
      so it is set to ``cluster.inference.count`` (when that is >= 1; with no
      inference servers no curve is drawn). A config file or mapping that
      gives another ``demand.num_servers`` is a :class:`ConfigError` naming
      the value the cluster implies; :func:`config_to_dict` leaves the derived
      value out, so a resolved config with another ``cluster.inference.count``
      merged in still loads.
    - ``demand_preset``: a named shape from ``lyra_gym.model.demand.DEMAND_PRESETS``
      (``default`` 4x, ``mild`` 2.5x, ``strong`` 8x peak/trough); the settings it
      makes override those of ``demand``.
    - ``demand_csv``: a ``time_s,servers_needed`` file that replaces ``demand``.
    - ``reclaim_grace_s``: seconds between a reclaim request and its deadline
      (DESIGN.md: default 0 = immediate; the policy answers at the same
      decision point).
    - ``allow_mixed_gpu_types``: may one job span GPU types (it runs at the
      slowest worker's pace)? Default false: no shipped scheduler wants a job
      on V100s and T4s at once (Lyra, Tiresias, Gandiva and Pollux keep a job
      on one type); the engine refuses such a plan (``mixed-gpu-types``) and
      the trace loader refuses a job no one GPU type can hold. True lets a job
      too large for any one type span types.
    - ``placement``: how the heuristics place a job's (base) workers on the
      servers of a pool (``baselines/placement.py``). ``"spread"`` (default):
      one server when one can hold the job (best fit), else as few servers as
      possible, any partly free ones included. ``"consolidated"`` (as
      production-trace simulators such as Helios do): a job of up to one
      server's GPUs goes on one server (best fit), a larger one only on wholly
      free servers; ties between equally free servers go to the lowest server
      id. Honoured by fifo, sjf, baseline(-min), lyra (base demands; extra
      elastic workers go anywhere), tiresias and gandiva; pollux places by its
      own optimiser.
    - ``scaling``: what more workers buy (:mod:`lyra_gym.model.scaling`):
      ``"fixed-local"`` (default: each worker keeps its local batch, the
      global batch grows, statistical efficiency is charged),
      ``"fixed-global"`` (workers split a fixed batch), ``"adaptive"`` (the
      scheduler picks the batch, ``Plan.batch_sizes``; efficiency charged) or
      ``"throughput"`` (the old semantics: samples/s, nothing charged).
    - ``noise_scale``: ``"relative"`` (default: a model's measured noise scale
      scaled to the job's initial batch) or ``"absolute"`` (as measured, for
      profiles in the efficiency data's own units).
    - ``batch_limit``: a global batch above ``workers x max_local_batch``:
      ``"accumulate"`` (default: kept through gradient accumulation steps,
      one all-reduce per optimizer step, as the Pollux artifact) or ``"cut"``
      (the old rule: cut to ``workers x max_local_batch``); see
      :mod:`lyra_gym.model.scaling`.
    - ``all_jobs_elastic``: treat every job of the trace as elastic (Pollux's
      setting: every job is adaptive), so the same trace runs both ways. An
      elastic job keeps its range; an inelastic one may run on 1 up to
      ``min(64, 2 x num_gpus)`` GPUs (at least ``num_gpus``): Pollux's cap of
      twice the replicas seen so far and 64 (adaptdl simulator,
      ``get_pollux_job_info``; an assumption for traces that are not Pollux's).
    - ``efficiency``: a noise-scale JSON path (``lyra_gym.model.efficiency``);
      ``None`` = the shipped measurements.
    - ``profiles``: a profile JSON path; ``None`` = the built-in profile.
    - ``reference_gpu``: GPU type the trace's durations refer to; ``None`` =
      the profile's reference type.
    - ``horizon_s``: stop the simulation at this time (unfinished jobs are
      reported); ``None`` = run until every job finishes or nothing can change.
    - ``demand_horizon_pad_s``: the synthetic demand curve covers the last
      submit time plus this; after it the last value holds.
    - ``knowledge``: what schedulers and observations may know of a job's duration:
      ``oracle`` (default, the truth), ``estimate`` or ``history``
      (:mod:`lyra_gym.model.knowledge`).
    """

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    demand: DiurnalDemandConfig = field(default_factory=DiurnalDemandConfig)
    demand_preset: str | None = None
    demand_csv: str | None = None
    reclaim_grace_s: float = 0.0
    allow_mixed_gpu_types: bool = False
    placement: str = "spread"
    overheads: OverheadConfig = field(default_factory=OverheadConfig)
    scaling: str = "fixed-local"
    noise_scale: str = "relative"
    batch_limit: str = "accumulate"
    efficiency: str | None = None
    all_jobs_elastic: bool = False
    profiles: str | None = None
    reference_gpu: str | None = None
    horizon_s: float | None = None
    demand_horizon_pad_s: float = 3 * 86400.0
    knowledge: KnowledgeConfig = field(default_factory=KnowledgeConfig)

    RULES: ClassVar[dict[str, dict[str, Any]]] = {
        "reclaim_grace_s": _NONNEG,
        "horizon_s": {"lo": 0.0, "lo_open": True},
        "demand_horizon_pad_s": _NONNEG,
    }

    def __post_init__(self) -> None:
        _check_fields(self, "")
        inference = self.cluster.inference.count
        if inference >= 1 and self.demand.num_servers != inference:  # derived: see the docstring
            object.__setattr__(self, "demand", dataclasses.replace(self.demand, num_servers=inference))
        if not self.cluster.training:
            raise ConfigError("cluster.training: at least one server group is needed")
        for i, group in enumerate(self.cluster.training):
            if group.count == 0:
                raise ConfigError(f"cluster.training[{i}].count: must be >= 1 (inference may be 0), got 0")
        servers = sum(g.count for g in self.cluster.training) + self.cluster.inference.count
        if servers > MAX_CLUSTER_SERVERS:
            raise ConfigError(f"cluster: {servers} servers in all, more than MAX_CLUSTER_SERVERS="
                              f"{MAX_CLUSTER_SERVERS:,}")
        from lyra_gym.model.scaling import BATCH_LIMITS, NOISE_SCALE_RULES, SCALING_RULES

        if self.scaling not in SCALING_RULES:
            raise ConfigError(f"scaling: must be one of {', '.join(SCALING_RULES)}, got {shown(self.scaling)}")
        if self.noise_scale not in NOISE_SCALE_RULES:
            raise ConfigError(f"noise_scale: must be one of {', '.join(NOISE_SCALE_RULES)}, "
                              f"got {shown(self.noise_scale)}")
        if self.batch_limit not in BATCH_LIMITS:
            raise ConfigError(f"batch_limit: must be one of {', '.join(BATCH_LIMITS)}, got {shown(self.batch_limit)}")
        if self.placement not in PLACEMENT_RULES:
            raise ConfigError(f"placement: must be one of {', '.join(PLACEMENT_RULES)}, got {shown(self.placement)}")
        if self.demand_preset is not None:
            from lyra_gym.model.demand import DEMAND_PRESETS

            if self.demand_preset not in DEMAND_PRESETS:
                raise ConfigError(f"demand_preset: unknown {shown(self.demand_preset)} "
                                  f"(known: {', '.join(DEMAND_PRESETS)})")
        if self.demand_csv is None and self.demand_horizon_pad_s / self.demand.step_s >= MAX_DEMAND_POINTS:
            raise ConfigError(
                f"demand_horizon_pad_s: {self.demand_horizon_pad_s:g} s at demand.step_s="
                f"{self.demand.step_s:g} s is {self.demand_horizon_pad_s / self.demand.step_s:.4g} "
                f"demand points, more than MAX_DEMAND_POINTS={MAX_DEMAND_POINTS:,}")


# ---------------------------------------------------------------- building from plain data

# A number written as text: YAML 1.1 (PyYAML's safe_load) reads 1e5 and 1E+5 (no dot) as strings.
_NUMBER_TEXT = re.compile(r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?")


# An integer written with a leading zero (010): octal in YAML 1.1, decimal in 1.2: refused.
_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]+")


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {shown(value)}" if not isinstance(value, (dict, list)) else type(value).__name__


def _coerce_scalar(base: type, value: Any, rule: Mapping[str, Any], where: str) -> Any:
    """A file's value for a scalar field: numbers written as text are read; whole floats for an
    integer field become ints; ints for a float field become floats. Then type and range."""
    if base in (int, float) and isinstance(value, str) and _LEADING_ZERO.fullmatch(value.strip()):
        raise ConfigError(f"{where}: must be {'an integer' if base is int else 'a number'}, got {shown(value)}: "
                          "a leading zero is ambiguous (YAML 1.1 reads 010 as octal 8); write 10, or 0o10 for octal")
    if base in (int, float) and isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()):
        text = value.strip().replace("_", "")
        try:
            value = int(text) if base is int and re.fullmatch(r"[-+]?[0-9]+", text) else float(text)
        except (ValueError, OverflowError):
            pass
    if base is int and isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        value = int(value)
    if base in (int, float) and not isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        kind = "an integer" if base is int else "a number"
        raise ConfigError(f"{where}: must be {kind}, got {_describe(value)}")
    problem = _scalar_problem(base, value, rule)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    if base is float:
        return float(value)
    if base is int:
        return int(value)
    if base is bool:
        return bool(value)
    return value


def _build(cls: type, data: Any, path: str) -> Any:
    """Build dataclass ``cls`` from a mapping, recursing into nested dataclass fields."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path or 'config'}: expected a table/mapping of settings, got {_describe(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted((k for k in data if k not in fields), key=repr)
    if unknown:
        key = unknown[0]
        key = key if isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,59}", key) else shown(key)
        raise ConfigError(f"{path + '.' if path else ''}{key}: unknown key (known: {', '.join(fields)})")
    missing = [n for n, f in fields.items() if n not in data and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{path + '.' if path else ''}{missing[0]}: missing (required)")
    rules = getattr(cls, "RULES", {})
    kwargs = {}
    for name, value in data.items():
        where = f"{path}.{name}" if path else name
        kwargs[name] = _convert(_hints(cls)[name], value, where, rules.get(name, {}))
    try:
        return cls(**kwargs)
    except ConfigError as err:
        if path and str(err).startswith(f"{cls.__name__}."):  # a check of the class itself
            raise ConfigError(f"{path}.{str(err)[len(cls.__name__) + 1:]}") from None
        raise


def _convert(hint: Any, value: Any, where: str, rule: Mapping[str, Any]) -> Any:
    base, optional = _unpack(hint)
    if value is None and optional:
        return None
    if isinstance(base, type) and dataclasses.is_dataclass(base):
        return _build(base, value, where)
    if typing.get_origin(base) is tuple:
        item = typing.get_args(base)[0]
        if not isinstance(value, (list, tuple)):
            what = "server groups" if item is ServerGroup else f"{item.__name__} tables"
            raise ConfigError(f"{where}: expected a list of {what}, got {_describe(value)}")
        return tuple(_build(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    return _coerce_scalar(base, value, rule, where)


def config_from_dict(data: Mapping[str, Any]) -> SimConfig:
    """Build a SimConfig from nested dicts; errors are :class:`ConfigError` naming the key path
    (``cluster.training[0].count``).

    Every value is type- and range-checked: numbers must be finite (NaN and infinity are
    rejected), integer fields take whole numbers (``2.0`` is read as 2, ``1.5`` is an error),
    numbers written as text (``"1e5"``, which YAML 1.1 reads as a string) are read as numbers,
    booleans must be true or false, strings non-empty.
    """
    if isinstance(data, SimConfig):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"config: expected a table/mapping of settings at the top level, got {_describe(data)}")
    try:
        config = _build(SimConfig, data, "")
    except RecursionError:
        raise ConfigError("config: nested too deeply") from None
    _check_demand_servers(data, config)
    return config


def _check_demand_servers(data: Mapping[str, Any], config: SimConfig) -> None:
    """A ``demand.num_servers`` given in ``data`` must be the inference cluster's size: the curve
    is always drawn for ``cluster.inference.count`` servers (:class:`SimConfig`), so any other
    value would be silently replaced."""
    demand = data.get("demand")
    if not isinstance(demand, Mapping) or "num_servers" not in demand:
        return
    rule = DiurnalDemandConfig.RULES["num_servers"]
    given = _coerce_scalar(int, demand["num_servers"], rule, "demand.num_servers")
    servers = config.cluster.inference.count
    if given != servers:
        fix = f"leave it out or set it to {servers}" if servers else "leave it out (no demand curve is drawn)"
        raise ConfigError(
            f"demand.num_servers: {given}, but the inference cluster has {servers} servers "
            f"(cluster.inference.count) and the demand curve is always sized to it; {fix}")


def parse_config_text(path: Path, raw: bytes, yaml11_bools: bool = False) -> Any:
    """The document in a config file's bytes (YAML, or TOML by the ``.toml`` suffix); any syntax
    problem is a one-line ConfigError naming the file and line (``yaml11_bools``: see
    :func:`~lyra_gym.model.userfiles.strict_yaml`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise ConfigError(f"{path}, line {line}: not UTF-8 text (byte 0x{raw[err.start]:02x})") from None
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            message = str(err)
            found = re.search(r"\(at line (\d+), column \d+\)", message)
            line = int(found.group(1)) if found else text.count("\n") + 1
            message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
            raise ConfigError(f"{path}, line {line}: invalid TOML: {message}") from None
    try:
        data = strict_yaml(text, yaml11_bools)
    except YamlProblem as err:
        where = f"{path}, line {err.line}" if err.line else f"{path}"
        raise ConfigError(f"{where}: invalid YAML: {err.problem}") from None
    return {} if data is None else data


#: The fields of a config file that hold file paths.
PATH_FIELDS = ("profiles", "demand_csv", "efficiency")


def _paths_beside(data: Any, folder: Path) -> Any:
    """``data`` with each relative path of :data:`PATH_FIELDS` made relative to ``folder``, the
    config file's (:func:`lyra_gym.model.paths.resolve_beside`); other values left to the checks."""
    from lyra_gym.model.paths import resolve_beside

    if not isinstance(data, Mapping):
        return data
    paths = {key: resolve_beside(data[key], folder) for key in PATH_FIELDS
             if isinstance(data.get(key), str) and data[key].strip()}
    return {**data, **paths}


def load_config(path: str | os.PathLike) -> SimConfig:
    """Load a YAML (.yaml/.yml) or TOML (.toml) file onto SimConfig. A relative path in it
    (``profiles``, ``demand_csv``, ``efficiency``) is relative to the file's folder
    (:mod:`lyra_gym.model.paths`: then the working directory, then the shipped data, for older files).

    YAML is read with YAML 1.2 scalars: ``1e5`` is a number, only ``true``/``false`` are
    booleans (``yes``/``no``/``on``/``off`` are strings, so an error for a bool field), ``010``
    (octal in YAML 1.1) and ``1:20`` (sexagesimal) are errors for a number field; aliases
    (``*name``) are refused. Only a regular file of at most :data:`MAX_CONFIG_BYTES` is read.
    Each file the config names that exists is read now by its own loader
    (:func:`_check_named_files`): a problem names the field, that file and this one. Every
    problem (unreadable file, bad syntax, non-UTF-8 bytes, a value of the wrong type or range)
    is a :class:`ConfigError` whose message names the file (and line, or the field's path).
    """
    path = Path(path)
    try:
        raw = read_user_file(path, MAX_CONFIG_BYTES, "config file")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file ({err.strerror or err})") from None
    data = _paths_beside(parse_config_text(path, raw), path.parent)
    try:
        config = config_from_dict(data)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    _check_named_files(path, config)
    return config


#: Most bytes of a file a config names (profiles, efficiency, demand CSV).
MAX_NAMED_FILE_BYTES = 64 * 2**20


def _check_named_files(path: Path, config: SimConfig) -> None:
    """Read each file the config at ``path`` names (``profiles``, ``efficiency``, ``demand_csv``)
    with its own loader; a problem is a one-line :class:`ConfigError` naming the field, the path
    and the config file, never the named file's bytes (only regular files of at most
    :data:`MAX_NAMED_FILE_BYTES` are read). A file that does not exist is left to the run."""
    from lyra_gym.model.demand import load_demand_csv
    from lyra_gym.model.efficiency import load_efficiency
    from lyra_gym.model.profiles import load_profiles

    loaders = {"profiles": load_profiles, "efficiency": load_efficiency, "demand_csv": load_demand_csv}
    for name, load in loaders.items():
        named = getattr(config, name)
        if named is None or not os.path.lexists(named):
            continue
        where = f"{name} {named} (field {name} of {path})"
        try:
            read_user_file(named, MAX_NAMED_FILE_BYTES, f"{name} file", error=_named(where, named))
        except OSError as err:
            raise ConfigError(f"{where}: cannot read it ({err.strerror or err})") from None
        try:
            load(named)
        except (LyraGymError, OSError, RecursionError) as err:
            problem = " ".join(str(err).split()).removeprefix(named).lstrip(":, ")
            raise ConfigError(f"{where}: {problem[:200]}") from None


def _named(where: str, named: str) -> Callable[[str], ConfigError]:
    """An error type for :func:`read_user_file` of ``named``: its message starts with ``where``."""
    return lambda message: ConfigError(f"{where}: {message.removeprefix(f'{named}: ')}")


def config_to_dict(config: SimConfig) -> dict[str, Any]:
    """The fully resolved config as plain data (written next to every run's results).

    ``demand.num_servers`` is left out: it is derived from ``cluster.inference.count``
    (:class:`SimConfig`), so :func:`config_from_dict` of this dict gives back ``config``, and
    still loads after another inference size is merged in (sweeps, scenarios)."""
    data = dataclasses.asdict(config)
    data["demand"].pop("num_servers", None)
    return data
