"""The grid of a parameter sweep: parsing and checking a sweep file (see :mod:`lyra_gym.harness.sweep`
for its format), and applying a grid point's values to a config or a trace preset."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from lyra_gym.harness.compare import CompareError, check_policies, read_config
from lyra_gym.model.config import MAX_CONFIG_BYTES, ConfigError, SimConfig, config_from_dict, config_to_dict
from lyra_gym.model.paths import resolve_beside
from lyra_gym.model.userfiles import YamlProblem, read_user_file, strict_yaml
from lyra_gym.sim.import_spec import UntrustedCodeError, refuse_code_specs, shorten
from lyra_gym.workloads.tracegen import PRESETS, TracePreset

PRESET_PREFIX = "preset:"
GRID_KEYS = ("policies", "traces", "seeds", "trace_seed", "trace_params", "params", "base_config", "policy_params")


class SweepError(CompareError):
    """A sweep file asks for something impossible; the message names the key."""


@dataclass(frozen=True)
class Grid:
    """A parsed sweep file (see the module docstring)."""

    policies: tuple[str, ...]
    traces: tuple[str, ...]
    seeds: tuple[int, ...]
    trace_seed: int | None  # None: each run's seed
    trace_params: Mapping[str, tuple[Any, ...]]
    params: Mapping[str, tuple[Any, ...]]
    base_config: SimConfig
    base_config_path: str | None
    policy_params: Mapping[str, Mapping[str, Any]]
    base_config_file: str | None = None  # base_config_path as found (relative to the sweep file's folder)
    #: every CSV trace's label (as written in ``traces``) -> its file as found (beside the sweep file)
    trace_files: Mapping[str, str] = field(default_factory=dict)

    @property
    def swept(self) -> list[str]:
        """Every swept parameter's column name: trace parameters, then engine parameters."""
        return [*self.trace_params, *self.params]

    def trace_file(self, label: str) -> str:
        """The file a CSV trace's label names (the label itself in a grid built without a file)."""
        return self.trace_files.get(label, label)


def _list(data: Mapping[str, Any], key: str, required: bool, default: Sequence[Any] = ()) -> tuple[Any, ...]:
    value = data.get(key)
    if value is None:
        if required:
            raise SweepError(f"{key}: required (a list)")
        return tuple(default)
    if not isinstance(value, list) or not value:
        raise SweepError(f"{key}: expected a non-empty list, got {value!r}")
    return tuple(value)


def _axes(data: Mapping[str, Any], key: str) -> dict[str, tuple[Any, ...]]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping):
        raise SweepError(f"{key}: expected a mapping of name -> list of values")
    axes = {}
    for name, values in value.items():
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise SweepError(f"{key}.{name}: empty list of values")
        for v in values:
            if isinstance(v, (list, dict)):
                raise SweepError(f"{key}.{name}: swept values must be scalars (they label the plots), got {v!r}; "
                                 f"set structured settings in base_config")
        axes[str(name)] = tuple(values)
    return axes


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """``data["a"]["b"] = value`` for ``key = "a.b"``, creating missing levels."""
    *parents, last = key.split(".")
    node = data
    for i, part in enumerate(parents):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise SweepError(f"params.{key}: {'.'.join(parents[:i + 1])} is not a table of settings")
        node = child
    node[last] = value


def apply_params(base: SimConfig, values: Mapping[str, Any]) -> SimConfig:
    """``base`` with dotted engine keys set; an unknown or bad key is a :class:`SweepError` naming it."""
    data = config_to_dict(base)
    for key, value in values.items():
        set_dotted(data, key, value)
    try:
        return config_from_dict(data)
    except (ConfigError, TypeError, ValueError) as err:
        shown = ", ".join(f"{k}={v!r}" for k, v in values.items())
        raise SweepError(f"params ({shown}): {err}") from None


def preset_with(name: str, values: Mapping[str, Any]) -> TracePreset:
    """``replace(PRESETS[name], **values)``; an unknown field or bad value is a :class:`SweepError`."""
    preset = PRESETS[name]
    fields = {f.name for f in dataclasses.fields(TracePreset)} - {"name"}
    for key in values:
        if key not in fields:
            raise SweepError(f"trace_params.{key}: unknown trace preset field (known: {', '.join(sorted(fields))})")
    try:
        return dataclasses.replace(preset, **values)
    except (TypeError, ValueError) as err:
        raise SweepError(f"trace_params ({', '.join(f'{k}={v!r}' for k, v in values.items())}): {err}") from None


def load_grid(path: str | os.PathLike, trust_code: bool = False) -> Grid:
    """Parse and check a sweep file: unknown keys, policies, presets, trace and engine parameters
    (every value is tried once, so a typo fails before any run). A policy that can run code (a
    ``MODULE:ATTRIBUTE`` or ``.py`` spec, ``policy:``, a trusted model) is refused, before anything is
    imported or built, unless ``trust_code`` (:func:`lyra_gym.sim.import_spec.refuse_code_specs`)."""
    path = Path(path)
    data = _read_grid_file(path)
    policies = tuple(str(p) for p in _list(data, "policies", True))
    traces = tuple(str(t) for t in _list(data, "traces", True))
    seeds = _seeds(data)
    trace_seed = _trace_seed(data)
    trace_params, params = _sweep_axes(data)
    base_path = data.get("base_config")
    base, resolved = _base_config(base_path, path)
    policy_params = _policy_params(data, policies)
    try:
        refuse_code_specs(policies, f"{path}: policies", trust_code, policy_params)
    except UntrustedCodeError as err:
        raise SweepError(str(err)) from None
    check_policies(policies, policy_params)
    trace_files = {t: resolve_beside(t, path.parent) for t in traces if not t.startswith(PRESET_PREFIX)}
    _check_traces(traces, trace_params, trace_files)
    _check_values(base, traces, trace_params, params)
    return Grid(policies, traces, seeds, trace_seed, trace_params, params, base, base_path, policy_params,
                None if resolved is None else str(resolved), trace_files)


def _read_grid_file(path: Path) -> Mapping[str, Any]:
    """The sweep file's top-level mapping; a folder, non-UTF-8 text, bad YAML, another top level
    or an unknown key is a :class:`SweepError` naming the file."""
    raw = read_user_file(path, MAX_CONFIG_BYTES, "sweep file", error=SweepError)  # a regular file, bounded
    try:
        data = strict_yaml(raw.decode("utf-8")) or {}  # YAML 1.2 numbers and bools, no aliases
    except UnicodeDecodeError:
        raise SweepError(f"{path}: not UTF-8 text") from None
    except YamlProblem as err:
        raise SweepError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(data, Mapping):
        raise SweepError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(data) - set(GRID_KEYS))
    if unknown:
        raise SweepError(f"{path}: {unknown[0]}: unknown key (known: {', '.join(GRID_KEYS)})")
    return data


def _seeds(data: Mapping[str, Any]) -> tuple[int, ...]:
    """``seeds``: distinct integers >= 0 (default ``(0,)``); not ``true``, ``1.5`` nor ``"1"``."""
    value = data.get("seeds")
    seeds = (0,) if value is None else tuple(value) if isinstance(value, list) else ()
    if not seeds or any(not isinstance(s, int) or isinstance(s, bool) for s in seeds):
        raise SweepError(f"seeds: expected a list of integers, got {shorten(repr(value))}")
    negative = [s for s in seeds if s < 0]
    if negative:
        raise SweepError(f"seeds: must be integers >= 0, got {negative[0]}")
    if len(set(seeds)) != len(seeds):
        raise SweepError(f"seeds: listed twice: {sorted(s for s in set(seeds) if seeds.count(s) > 1)}")
    return seeds


def _trace_seed(data: Mapping[str, Any]) -> int | None:
    """``trace_seed``: ``"run"`` (the default; None: each run's seed) or an integer >= 0."""
    trace_seed = data.get("trace_seed", "run")
    if trace_seed == "run":
        return None
    if not isinstance(trace_seed, int) or isinstance(trace_seed, bool) or trace_seed < 0:
        raise SweepError(f"trace_seed: expected 'run' or an integer >= 0, got {trace_seed!r}")
    return trace_seed


def _sweep_axes(data: Mapping[str, Any]) -> tuple[dict[str, tuple[Any, ...]], dict[str, tuple[Any, ...]]]:
    """``trace_params`` and ``params``; no name may be in both."""
    trace_params, params = _axes(data, "trace_params"), _axes(data, "params")
    both = sorted(set(trace_params) & set(params))
    if both:
        raise SweepError(f"{both[0]}: in both trace_params and params")
    return trace_params, params


def _base_config(base_path: Any, path: Path) -> tuple[SimConfig, Path | None]:
    """The base config and where it was found: relative to the sweep file's folder
    (:func:`lyra_gym.model.paths.resolve_beside`: then the working directory, then the shipped
    data); the default config (and None) without one."""
    if base_path is None:
        return SimConfig(), None
    resolved = Path(resolve_beside(base_path, path.parent)) if isinstance(base_path, str) else Path(base_path)
    return read_config(resolved), resolved


def _policy_params(data: Mapping[str, Any], policies: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``policy_params`` for every policy (empty where not given); a name must be a policy's."""
    policy_params = data.get("policy_params") or {}
    if not isinstance(policy_params, Mapping) or any(not isinstance(v, Mapping) for v in policy_params.values()):
        raise SweepError("policy_params: expected a mapping of policy -> mapping of parameters")
    for name in policy_params:
        if name not in policies:
            raise SweepError(f"policy_params.{name}: not among the policies ({', '.join(policies)})")
    return {p: dict(policy_params.get(p, {})) for p in policies}


def _check_traces(traces: Sequence[str], trace_params: Mapping[str, Any], files: Mapping[str, str]) -> None:
    """Every trace is a known preset or an existing CSV file (``files``: label -> file as found);
    trace parameters need presets."""
    for t in traces:
        if t.startswith(PRESET_PREFIX):
            name = t[len(PRESET_PREFIX):]
            if name not in PRESETS:
                raise SweepError(f"traces: unknown preset {name!r} (known: {', '.join(sorted(PRESETS))})")
        elif trace_params:
            raise SweepError(f"traces: {t!r} is a CSV file; trace_params can only be swept on preset:NAME traces")
        elif not Path(files[t]).exists():
            raise SweepError(f"traces: {t!r}: no such file")  # beside the sweep file, nor from the cwd


def _check_values(base: SimConfig, traces: Sequence[str], trace_params: Mapping[str, Sequence[Any]],
                  params: Mapping[str, Sequence[Any]]) -> None:
    """Try every swept value alone (on every trace, or on the base config), so the error names it."""
    for key, values in trace_params.items():
        for v in values:
            for t in traces:
                preset_with(t[len(PRESET_PREFIX):], {key: v})
    for key, values in params.items():
        for v in values:
            try:
                apply_params(base, {key: v})
            except SweepError as err:
                inner = str(err).split("): ", 1)[-1]
                raise SweepError(f"params: {key!r} = {v!r} is not a valid engine setting: {inner}") from None
