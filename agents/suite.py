"""Versioned benchmark suites: ``v0`` (:data:`lyra_agents.scenarios.SUITE`, built in) and suite files.

A suite file (``traces/suite-v1/suite.yaml``) is YAML read with the config loader's strict rules
(a key given twice is an error, YAML 1.2 scalars)::

    format: lyra-gym-suite/1        # this loader's format
    version: v1                     # the suite's name: --suite v1, recorded in every CSV row
    description: one line
    defaults: {trace: env-14d, trace_seeds: [0, 1], windows: [0, 1, 2]}   # any scenario key
    scenarios:
      - name: contended
        description: what it stresses
        config_file: ../contended.yaml   # a cluster config, relative to the suite file
        config: {demand_preset: strong}  # keys overriding the file's (or the defaults')
        profiles: my-profile.json        # a throughput profile, relative to the suite file
                                         # (every path in a suite file is: lyra_gym.model.paths)
        warmup_s: 21600                  # seconds of jobs run before each window (warm start)

Scenario keys: those of :class:`lyra_agents.scenarios.Scenario` (``trace``, ``trace_seeds``,
``elastic_share``, ``window_s``, ``warmup_s``, ``windows``, ``test_fraction``, ...) plus
``profiles``, ``knowledge`` (the run config's knowledge section: what schedulers may know of job
durations, :mod:`lyra_gym.model.knowledge`) and ``requires``. A scenario with ``requires: [NAME]``
names a setting this version does not have (:data:`NOT_YET`): it is listed, not run, and asking for
it is an error saying why. Every problem is a
:class:`SuiteError` naming the file and the field (``scenarios[2].windows``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from lyra_agents.scenarios import SUITE, TRACES_DIR, Scenario
from lyra_gym.errors import LyraGymError
from lyra_gym.model.config import PATH_FIELDS, ConfigError
from lyra_gym.model.paths import resolve_beside
from lyra_gym.model.userfiles import shown

FORMAT = "lyra-gym-suite/1"
#: Built-in suite files by version.
SUITE_FILES = {"v1": TRACES_DIR / "suite-v1" / "suite.yaml",
               "v1.1": TRACES_DIR / "suite-v1.1" / "suite.yaml"}  # v1 with priced preemption
#: Settings a scenario may require that this version lacks, and why.
NOT_YET: dict[str, str] = {}  # none at present (the knowledge model, once required here, has landed)
_TOP_KEYS = {"format", "version", "description", "defaults", "scenarios"}
_SCALARS: dict[str, type] = {"name": str, "description": str, "trace": str, "elastic_share": float,
                             "config_file": str, "profiles": str, "window_s": float, "warmup_s": float,
                             "test_fraction": float}
_LISTS = {"trace_seeds", "windows", "requires"}
_SCENARIO_KEYS = set(_SCALARS) | _LISTS | {"config", "knowledge"}


class SuiteError(LyraGymError, ValueError):
    """A suite file that cannot be used: the message names the file and the field."""


@dataclass(frozen=True)
class Suite:
    """A named, versioned set of scenarios (``unavailable``: listed scenarios not run, and why;
    ``bootstrap``: how the benchmark's intervals are drawn, ``units`` for every suite file)."""

    version: str
    description: str
    scenarios: Mapping[str, Scenario]
    unavailable: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    source: str = "built in"
    bootstrap: str = "units"  # lyra_agents.benchmark.aggregate's estimator: "units", or v0's "stratified"

    def get(self, name: str) -> Scenario:
        if name in self.scenarios:
            return self.scenarios[name]
        if name in self.unavailable:
            raise ValueError(f"scenario {shown(name)} of suite {self.version} needs {self.unavailable[name]}")
        raise ValueError(f"unknown scenario {shown(name)} in suite {self.version} (known: {', '.join(self.scenarios)})")


V0 = Suite("v0", "the fixed suite of the first benchmark (one trace seed, three windows each)",
           MappingProxyType(dict(SUITE)), bootstrap="stratified")


def get_suite(name: str) -> Suite:
    """``v0``, a built-in suite file's version (``v1``), or a path to a suite file."""
    if name == "v0":
        return V0
    if name in SUITE_FILES:  # shipped: its windows are checked by the tests, not at each load (seconds)
        return load_suite(SUITE_FILES[name], check_windows=False)
    if name.endswith((".yaml", ".yml")) or "/" in name:
        return load_suite(name)
    raise SuiteError(f"unknown suite {shown(name)} (known: v0, {', '.join(SUITE_FILES)}, or a suite file path)")


def load_suite(path: str | Path, check_windows: bool = True) -> Suite:
    """Read and check a suite file (module docstring); :class:`SuiteError` on any problem.
    ``check_windows``: build each scenario's traces to check that its ``windows`` exist (about
    0.05 s a trace seed for ``env-14d``, 1 s for ``lyra-15d``)."""
    from lyra_gym.model.config import MAX_CONFIG_BYTES, parse_config_text  # the config loader's rules
    from lyra_gym.model.userfiles import read_user_file

    path = Path(path)
    try:
        data = parse_config_text(path, read_user_file(path, MAX_CONFIG_BYTES, "suite file", error=SuiteError))
    except OSError as err:
        raise SuiteError(f"{path}: cannot read the suite file ({err.strerror or err})") from None
    except ConfigError as err:
        raise SuiteError(str(err)) from None
    if not isinstance(data, dict):
        raise SuiteError(f"{path}: a mapping with keys {', '.join(sorted(_TOP_KEYS))} expected")
    _no_unknown(path, "", data, _TOP_KEYS)
    if data.get("format") != FORMAT:
        raise SuiteError(f"{path}: format: must be {FORMAT!r}, got {shown(data.get('format'))}")
    version = data.get("version")
    if not isinstance(version, str) or not version.strip():
        raise SuiteError(f"{path}: version: a non-empty string expected, got {shown(version)}")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SuiteError(f"{path}: defaults: a mapping expected")
    _no_unknown(path, "defaults.", defaults, _SCENARIO_KEYS - {"name", "description"})
    entries = data.get("scenarios")
    if not isinstance(entries, list) or not entries:
        raise SuiteError(f"{path}: scenarios: a non-empty list expected")
    scenarios: dict[str, Scenario] = {}
    unavailable: dict[str, str] = {}
    for i, entry in enumerate(entries):
        where = f"scenarios[{i}]"
        if not isinstance(entry, dict):
            raise SuiteError(f"{path}: {where}: a mapping expected")
        _no_unknown(path, f"{where}.", entry, _SCENARIO_KEYS)
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise SuiteError(f"{path}: {where}.name: a non-empty string expected")
        if name in scenarios or name in unavailable:
            raise SuiteError(f"{path}: {where}.name: scenario {shown(name)} given twice")
        merged = {**defaults, **entry}
        needs = _requirements(path, f"{where}.requires", merged.get("requires", []))
        if needs:
            unavailable[name] = "; ".join(NOT_YET[n] for n in needs)
            continue
        scenarios[name] = _scenario(path, where, merged, set(entry))
        if check_windows:
            _check_windows(path, f"{where}.windows" if "windows" in entry else "defaults.windows", scenarios[name])
    return Suite(version.strip(), str(data.get("description", "")), MappingProxyType(scenarios),
                 MappingProxyType(unavailable), str(path))


def _no_unknown(path: Path, prefix: str, data: Mapping[str, Any], known: set[str]) -> None:
    for key in data:
        if key not in known:
            raise SuiteError(f"{path}: {prefix}{key}: unknown key (known: {', '.join(sorted(known))})")


def _requirements(path: Path, where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SuiteError(f"{path}: {where}: a list of names expected, got {shown(value)}")
    for need in value:
        if need not in NOT_YET:
            raise SuiteError(f"{path}: {where}: unknown requirement {shown(need)} (known: {', '.join(NOT_YET)})")
    return list(value)


def _scalar(path: Path, where: str, kind: type, value: Any) -> Any:
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SuiteError(f"{path}: {where}: a finite number expected, got {shown(value)}")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise SuiteError(f"{path}: {where}: a non-empty string expected, got {shown(value)}")
    return value


def _int_list(path: Path, where: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or \
            not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise SuiteError(f"{path}: {where}: a non-empty list of whole numbers >= 0 expected, got {shown(value)}")
    if len(set(value)) != len(value):
        raise SuiteError(f"{path}: {where}: a value given twice in {shown(value)}")
    return tuple(value)


def _scenario(path: Path, where: str, data: Mapping[str, Any], own: set[str]) -> Scenario:
    """The :class:`Scenario` of one entry (defaults merged in; ``own``: the entry's own keys, the
    others' errors name ``defaults.KEY``); files resolved beside ``path``."""
    kwargs: dict[str, Any] = {}

    def field_name(key: str) -> str:
        return f"{where}.{key}" if key in own else f"defaults.{key}"

    for key, kind in _SCALARS.items():
        if key in data:
            kwargs[key] = _scalar(path, field_name(key), kind, data[key])
    for key in ("trace_seeds", "windows"):
        if key in data:
            kwargs[key] = _int_list(path, field_name(key), data[key])
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise SuiteError(f"{path}: {where}.config: a mapping expected")
    config = dict(config)
    if "config_file" in kwargs:
        kwargs["config_file"] = resolve_beside(kwargs["config_file"], path.parent)
    if "profiles" in kwargs:
        config["profiles"] = kwargs.pop("profiles")
    for key in PATH_FIELDS:  # profiles, demand_csv, efficiency: beside the suite file, as in a config file
        if isinstance(config.get(key), str) and config[key].strip():
            config[key] = resolve_beside(config[key], path.parent)
    knowledge = data.get("knowledge")
    if knowledge is not None:
        if not isinstance(knowledge, dict):
            raise SuiteError(f"{path}: {field_name('knowledge')}: a mapping expected, e.g. {{mode: estimate}}")
        config["knowledge"] = dict(knowledge)
    kwargs["config"] = MappingProxyType(config)
    kwargs.setdefault("description", "")
    scenario = Scenario(**kwargs)
    _check(path, where, scenario)
    return scenario


def _check(path: Path, where: str, scenario: Scenario) -> None:
    """The parts checkable without a trace: the preset, the config (file and keys), the profile."""
    if scenario.elastic_share is not None and not 0 <= scenario.elastic_share <= 1:
        raise SuiteError(f"{path}: {where}.elastic_share: must be in [0, 1], got {scenario.elastic_share}")
    try:
        scenario.preset()
    except ValueError as err:
        raise SuiteError(f"{path}: {where}.trace: {err}") from None
    if scenario.window_s <= 0 or scenario.warmup_s < 0 or not 0 < scenario.test_fraction < 1:
        raise SuiteError(f"{path}: {where}: window_s > 0, warmup_s >= 0 and test_fraction in (0, 1) expected")
    try:
        config = scenario.sim_config()
    except (ConfigError, FileNotFoundError) as err:
        raise SuiteError(f"{path}: {where}.config: {err}") from None
    if config.profiles is not None and not Path(config.profiles).is_file():
        raise SuiteError(f"{path}: {where}.profiles: {config.profiles} not found")


def _check_windows(path: Path, where: str, scenario: Scenario) -> None:
    """Every trace seed of ``scenario`` has each of its test ``windows`` (else a one-line error
    naming ``where``, the field that set them)."""
    for seed in scenario.seeds():
        try:
            available = count_test_windows(scenario.trace, seed, scenario.window_s, scenario.test_fraction,
                                      scenario.warmup_s)
        except ValueError as err:
            raise SuiteError(f"{path}: {where}: {err}") from None
        if max(scenario.windows) >= available:
            raise SuiteError(f"{path}: {where}: window {max(scenario.windows)} asked, but trace "
                             f"{scenario.trace} seed {seed} has {available} test windows (0 to {available - 1}) "
                             f"of {scenario.window_s:g} s")


@lru_cache(maxsize=256)
def count_test_windows(trace: str, seed: int, window_s: float, test_fraction: float, warmup_s: float) -> int:
    """How many test windows the preset ``trace`` of ``seed`` has (the elastic share draws only the
    elastic flags, after the submit times: it changes no window)."""
    scenario = Scenario("windows", "", trace=trace, window_s=window_s, test_fraction=test_fraction,
                        warmup_s=warmup_s)
    return scenario.sampler(scenario.build_trace(seed)).num_test
