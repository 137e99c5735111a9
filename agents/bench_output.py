"""The benchmark's outputs: the CSV (one row per policy, run, scenario, trace seed and window, the
isolated-job bound's rows, then the aggregate rows) written atomically, the text table and the
warnings under it, every file the command reads (:func:`benchmark_inputs`: kept apart from ``--out``),
and the rows kept as they finish (:class:`PartialRows`), so a failed or interrupted run resumes."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from lyra_agents.artifacts import WriteError, run_inputs, scenario_inputs, written
from lyra_agents.bench_stats import MIN_UNITS, headroom_closed, iqm, iqm_ci
from lyra_agents.headroom import BOUND, REFERENCE_KINDS, headroom
from lyra_gym.errors import LyraGymError
from lyra_gym.harness.report import WIDTH, fit_columns
from lyra_gym.outputs import named_inputs

if TYPE_CHECKING:
    from lyra_agents.scenarios import Scenario
    from lyra_agents.suite import Suite

SCORE = "headroom_closed"  # the share of headroom closed (:func:`add_scores`); replaced score_vs_random
METRICS = ("jct_vs_lyra", SCORE)  # the normalised scores aggregated per policy
WINDOW_COLUMNS = ["kind", "policy", "run", "scenario", "window", "trace_seed", "window_seed", "jct_mean_s",
                  "jct_vs_lyra", SCORE, "headroom_ref"]
AGGREGATE_COLUMNS = ["metric", "iqm", "ci_low", "ci_high", "reps", "cells", "units", "bootstrap"]
COLUMNS = WINDOW_COLUMNS + AGGREGATE_COLUMNS + ["suite", "lyra_gym_version", "lyra_gym_commit"]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in COLUMNS])
    return buffer.getvalue()


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to a hidden temporary file beside ``path`` and rename it over ``path``
    (:func:`lyra_gym.outputs.atomic_path`; the parent folder is created); :class:`WriteError`
    naming ``path`` when it cannot be written (disk full), the old file left as it was."""
    with written(path) as tmp:
        with open(tmp, "w", newline="") as fh:
            fh.write(text)


def _ci(point: float, low: float, high: float) -> str:
    return "n/a" if math.isnan(point) else f"{point:.3f} [{low:.3f}, {high:.3f}]"


def _label(policy: str) -> str:
    from lyra_gym.harness.report import short_label

    return short_label(policy)


def table(rows: Sequence[dict[str, Any]], aggregates: Sequence[dict[str, Any]], width: int | None = WIDTH) -> str:
    """The whole-suite table: policy (a run's name, not its path, unless ``width`` is None), runs,
    IQM [95 % CI] of JCT / lyra and of the headroom closed (the ``aggregates``)."""
    agg = {(a["policy"], a["metric"]): a for a in aggregates}
    header = ["policy", "runs", "JCT/lyra IQM [95% CI]", "headroom closed IQM [95% CI]"]
    body = []
    for policy in dict.fromkeys(r["policy"] for r in rows if r.get("kind") not in REFERENCE_KINDS):
        runs = len({r["run"] for r in rows if r["policy"] == policy})
        cells = [_ci(*(agg[policy, m][k] for k in ("iqm", "ci_low", "ci_high"))) for m in METRICS]
        body.append([policy if width is None else _label(policy), str(runs), *cells])
    return "\n".join(fit_columns(header, body, width))


def scenario_table(rows: Sequence[dict[str, Any]], reps: int, seed: int, bootstrap: str = "stratified",
                   width: int | None = WIDTH) -> str:
    """Per scenario, a heading (its best heuristic, lyra's mean JCT, the bound / lyra) and one line
    per policy: runs, mean JCT (s), IQM [95 % CI] of JCT / lyra and of the headroom closed against
    the best heuristic, over the scenario's (trace seed, window) units x runs (the bootstrap of
    :func:`aggregate` on that scenario alone)."""
    lines: list[str] = ["per scenario: IQM [95% CI] over its (trace seed, window) units x runs",
                        "(headroom closed: 0 = the scenario's best heuristic, 1 = the isolated-job bound)"]
    policies = list(dict.fromkeys(r["policy"] for r in rows if r.get("kind") not in REFERENCE_KINDS))
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        lyra = [r["jct_mean_s"] for r in mine if r["policy"] == "lyra" and r.get("kind") == "window"]
        bound = [r["jct_vs_lyra"] for r in mine if r.get("kind") == "bound"]
        ref = next((r.get("headroom_ref") for r in mine if r.get("headroom_ref")), "")
        lines += ["", f"{scenario}: best heuristic {ref or 'n/a'}; lyra {np.mean(lyra):,.0f} s; isolated-job bound "
                      f"{iqm(bound) if bound else math.nan:.3f} of lyra"]
        header = ["  policy", "runs", "JCT s", "JCT/lyra IQM [95% CI]", "headroom closed IQM [95% CI]"]
        body = []
        for policy in policies:
            mine_p = _cells(mine, policy, scenario)
            if not mine_p:
                continue
            cells = [_ci(*_one_scenario(mine, policy, m, scenario, reps, seed, bootstrap)) for m in METRICS]
            body.append(["  " + (policy if width is None else _label(policy)), str(len({r["run"] for r in mine_p})),
                         f"{np.mean([r['jct_mean_s'] for r in mine_p]):,.0f}", *cells])
        lines += fit_columns(header, body, width)
    return "\n".join(lines)


def _one_scenario(rows: Sequence[dict[str, Any]], policy: str, metric: str, scenario: str, reps: int, seed: int,
                  bootstrap: str) -> tuple[float, float, float]:
    if bootstrap == "units":
        return iqm_ci(score_cube(rows, policy, metric, [scenario]), reps, seed, units=True)
    return iqm_ci(score_matrix(rows, policy, metric, [scenario]), reps, seed)


# ---------------------------------------------------------------------- the headroom score
def add_scores(rows: Sequence[dict[str, Any]], heuristics: Sequence[str]) -> list[dict[str, Any]]:
    """Every row with ``headroom_closed`` (:func:`~lyra_agents.bench_stats.headroom_closed` of its
    mean JCT against the same window's JCT of the scenario's best heuristic and its isolated-job
    bound) and ``headroom_ref`` (that heuristic). The best heuristic of a scenario is the one of
    ``heuristics`` run with the lowest IQM of JCT / lyra over its units
    (:func:`lyra_agents.headroom.headroom`; ties by name). NaN without a bound row."""
    best = {e["scenario"]: e["best"] for e in headroom(rows, heuristics)}
    jct: dict[tuple[Any, ...], float] = {}
    for r in rows:
        jct.setdefault((r["scenario"], r.get("trace_seed", 0), r["window"], r["policy"]), r["jct_mean_s"])
    out = []
    for r in rows:
        ref = best.get(r["scenario"], "")
        unit = (r["scenario"], r.get("trace_seed", 0), r["window"])
        score = headroom_closed(r["jct_mean_s"], jct.get((*unit, ref), math.nan), jct.get((*unit, BOUND), math.nan))
        out.append({**r, SCORE: score, "headroom_ref": ref})
    return out


# ---------------------------------------------------------------------- aggregate rows
def _cells(rows: Sequence[dict[str, Any]], policy: str, scenario: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["policy"] == policy and r["scenario"] == scenario
            and r.get("kind") not in REFERENCE_KINDS]


def score_matrix(rows: Sequence[dict[str, Any]], policy: str, metric: str,
                 scenarios: Sequence[str]) -> np.ndarray:
    """``metric`` of ``policy`` as a (runs x trace seeds x windows) rows by scenarios columns matrix."""
    columns = []
    for s in scenarios:
        cells = sorted((r["run"], r.get("trace_seed", 0), r["window"], r.get(metric, math.nan))
                       for r in _cells(rows, policy, s))
        columns.append([c[3] for c in cells])
    if len({len(c) for c in columns}) != 1:
        raise ValueError(f"{policy}: unequal numbers of windows per scenario ({[len(c) for c in columns]})")
    return np.array(columns, dtype=float).T


def score_cube(rows: Sequence[dict[str, Any]], policy: str, metric: str, scenarios: Sequence[str]) -> np.ndarray:
    """``metric`` of ``policy`` as units x runs x scenarios. A unit is a (trace seed, window) pair;
    the k-th unit (in (trace seed, window) order) of every scenario are one row, so scenarios on
    the same trace and windows are paired; every scenario must have as many units and runs."""
    runs = sorted({r["run"] for r in rows if r["policy"] == policy})
    planes = []
    for s in scenarios:
        cells = {(r.get("trace_seed", 0), r["window"], r["run"]): r.get(metric, math.nan)
                 for r in _cells(rows, policy, s)}
        units = sorted({(seed, window) for seed, window, _run in cells})
        if len(cells) != len(units) * len(runs):
            raise ValueError(f"{policy}: scenario {s!r} lacks some (unit, run) cells")
        planes.append([[cells[u + (run,)] for run in runs] for u in units])
    if len({len(p) for p in planes}) != 1:
        raise ValueError(f"{policy}: unequal numbers of units per scenario ({[len(p) for p in planes]})")
    return np.array(planes, dtype=float).transpose(1, 2, 0)


def aggregate(rows: Sequence[dict[str, Any]], reps: int, seed: int,
              bootstrap: str = "stratified") -> list[dict[str, Any]]:
    """Per policy and metric: IQM and bootstrap CI over scenarios x units x runs: ``stratified``
    (suite v0, :func:`stratified_bootstrap_ci`) or ``units`` (:func:`unit_bootstrap_ci`)."""
    if bootstrap not in ("stratified", "units"):
        raise ValueError(f"bootstrap: 'stratified' or 'units', got {bootstrap!r}")
    policies = list(dict.fromkeys(r["policy"] for r in rows if r.get("kind") not in REFERENCE_KINDS))
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    out = []
    for policy in policies:
        for metric in METRICS:
            cube = score_cube(rows, policy, metric, scenarios)
            if bootstrap == "units":
                point, low, high = iqm_ci(cube, reps, seed, units=True)
            else:
                point, low, high = iqm_ci(score_matrix(rows, policy, metric, scenarios), reps, seed)
            out.append({"kind": "aggregate", "policy": policy, "metric": metric, "iqm": point, "ci_low": low,
                        "ci_high": high, "reps": reps, "cells": cube.size, "units": cube.shape[0],
                        "bootstrap": bootstrap})
    return out


# ---------------------------------------------------------------------- warnings under the table
def thin_interval_warning(aggregates: Sequence[dict[str, Any]], scenarios: int) -> str | None:
    """Why the CIs of some policies mean nothing, or None: the bootstrap redraws (unit, run)
    cells within each scenario, so with fewer than 2 per scenario every resample is the data
    itself and the interval has zero width."""
    units = {a["policy"]: a["cells"] // max(scenarios, 1) for a in aggregates}
    thin = [p for p, n in units.items() if n < 2]
    if not thin:
        return None
    fewest = min(units[p] for p in thin)
    return (f"the 95 % CI of {', '.join(thin)} rests on {fewest} unit{'s' if fewest != 1 else ''} (window x run) "
            f"per scenario: zero width, not an uncertainty; evaluate 2 or more windows (--windows) or runs")


def few_units_warning(aggregates: Sequence[dict[str, Any]]) -> str | None:
    """A warning when the intervals rest on fewer than :data:`MIN_UNITS` (trace seed, window) units
    per scenario (too few independent draws for a 95 % interval to mean much), or None."""
    fewest = min((a.get("units", MIN_UNITS) for a in aggregates), default=MIN_UNITS)
    if fewest >= MIN_UNITS:
        return None
    return (f"the 95 % CIs rest on {fewest} (trace seed, window) unit{'s' if fewest != 1 else ''} per scenario, "
            f"fewer than {MIN_UNITS}: read them as rough; evaluate more windows or trace seeds (suite v1)")


# ---------------------------------------------------------------------- what the command reads
def model_paths(names: Sequence[str], agents: Sequence[str]) -> list[tuple[str, str]]:
    """(option, path) of ``model:PATH`` policies and ``--agent`` runs (``?trust=`` dropped) and of
    every file each reads (:func:`lyra_agents.artifacts.run_inputs`: the model, its statistics, its
    config and the files that config names)."""
    from lyra_agents.policy_scheduler import split_trust_option

    pairs = [("--policies model:", name[len("model:"):]) for name in names if name.startswith("model:")]
    for spec in agents:
        _label, _eq, paths = spec.partition("=")
        pairs.extend(("--agent", p.strip()) for p in paths.split(",") if p.strip())
    found: list[tuple[str, str]] = []
    for option, path in pairs:
        try:
            base, _ = split_trust_option(path)
        except ValueError:
            base = path
        found += run_inputs(option, base)
    return found


def benchmark_inputs(suite: Suite, scenarios: Sequence[Scenario], names: Sequence[str], agents: Sequence[str],
                     train: str | None = None) -> dict[str, str | os.PathLike[str] | None]:
    """``{what: path}`` of every file the benchmark reads, directly or named inside another file: the
    suite file, each scenario's cluster config and the profile, demand and efficiency files it names,
    the models (:func:`model_paths`) and the ``--train`` config with the files it names."""
    pairs: list[tuple[str, str]] = [] if suite.source == "built in" else [("--suite", suite.source)]
    for scenario in scenarios:
        pairs += scenario_inputs(scenario, f"scenario {scenario.name} of --suite")
    pairs += model_paths(names, agents)
    if train:
        from lyra_agents.artifacts import config_inputs
        from lyra_agents.config import load_train_config

        pairs.append(("--train", train))
        try:
            pairs += config_inputs(load_train_config(train), f"--train {train}")
        except (OSError, ValueError, RecursionError):
            pass  # _check_training reports it
    return named_inputs(list(dict.fromkeys(pairs)))


def files_sha256(inputs: Mapping[str, str | os.PathLike[str] | None]) -> dict[str, str]:
    """``{path: SHA-256}`` of every input that is a file (a run folder is named by its files)."""
    from lyra_gym.run.simulate import file_sha256

    return {os.fspath(p): file_sha256(p) for p in dict.fromkeys(inputs.values()) if p and Path(p).is_file()}


# ---------------------------------------------------------------------- rows kept as they finish
PARTIAL_FORMAT = "lyra-gym-benchmark-partial/1"
Unit = tuple[str, int, int]  # (scenario, trace seed, window)


class PartialError(LyraGymError):
    """A ``--out`` partial file that must not be used or replaced: one line, exit status 2."""


def partial_path(out: str | os.PathLike) -> Path:
    """Where the rows of ``--out`` are kept until it is written: ``OUT.partial`` beside it."""
    return Path(os.fspath(out) + ".partial")


class PartialRows:
    """The window rows of a benchmark with ``--out``, appended as each window finishes to
    ``OUT.partial`` (JSON lines, flushed to disk per window: a header line with the run's identity,
    then ``{"unit": [scenario, trace seed, window], "rows": [...]}`` per window). The same command run
    again (same identity) skips the windows kept; the file is removed once ``--out`` is written.

    :param out: the ``--out`` path.
    :param identity: what the rows depend on (a SHA-256 of the arguments, models, data files and code).
    """

    def __init__(self, out: str | os.PathLike, identity: str) -> None:
        self.path = partial_path(out)
        self.identity = identity
        self.done: dict[Unit, list[dict[str, Any]]] = {}

    def _header(self) -> str:
        return json.dumps({"format": PARTIAL_FORMAT, "identity": self.identity}) + "\n"

    def open(self, overwrite: bool) -> dict[Unit, list[dict[str, Any]]]:
        """Read the windows kept by an earlier run of the same identity (rewriting the file without a
        cut last line), or start the file; :class:`PartialError` for a file that is not one, or of
        another identity without ``overwrite`` (which discards its rows)."""
        lines = self._read()
        if lines is not None:
            header = _json(lines[0]) if lines else None
            if not isinstance(header, dict) or header.get("format") != PARTIAL_FORMAT:
                raise PartialError(f"{self.path}: exists and is not a partial benchmark file; move it away or "
                                   f"choose another --out")
            if header.get("identity") == self.identity:
                self.done = dict(_kept_units(lines[1:]))
            elif not overwrite:
                raise PartialError(f"{self.path}: holds the rows of a benchmark with other arguments, models, data "
                                   f"files or code; run that command again to finish it, or pass --overwrite to "
                                   f"discard its rows")
        self._rewrite()
        return self.done

    def _read(self) -> list[str] | None:
        if not (self.path.exists() or self.path.is_symlink()):
            return None
        if not self.path.is_file():
            raise PartialError(f"{self.path}: exists and is not a file; move it away or choose another --out")
        try:
            return self.path.read_text(errors="replace").splitlines()
        except OSError as err:
            raise PartialError(f"{self.path}: cannot read it ({err.strerror or err})") from None

    def _rewrite(self) -> None:
        with written(self.path) as tmp:
            tmp.write_text(self._header() + "".join(_line(u, r) for u, r in self.done.items()))

    def append(self, unit: Unit, rows: Sequence[dict[str, Any]]) -> None:
        """Keep one window's rows: appended and flushed to disk; when that fails (:class:`WriteError`
        naming the file) the file is cut back to the windows kept before."""
        size = self.path.stat().st_size
        try:
            with open(self.path, "a") as fh:
                fh.write(_line(unit, rows))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as err:
            with contextlib.suppress(OSError):
                os.truncate(self.path, size)
            raise WriteError(f"cannot write {self.path}: {err.strerror or err}") from None
        self.done[unit] = list(rows)

    def note(self) -> str:
        """What is kept, for the line that says the run stopped."""
        count = len(self.done)
        return (f"the rows of {count} window{'s' if count != 1 else ''} are kept in {self.path}; "
                f"the same command resumes")

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _line(unit: Unit, rows: Sequence[dict[str, Any]]) -> str:
    return json.dumps({"unit": list(unit), "rows": list(rows)}) + "\n"


def _kept_units(lines: Sequence[str]) -> list[tuple[Unit, list[dict[str, Any]]]]:
    """The whole windows of a partial file's lines, up to the first one cut short or unreadable."""
    kept = []
    for line in lines:
        entry = _json(line)
        unit = entry.get("unit") if isinstance(entry, dict) else None
        rows = entry.get("rows") if isinstance(entry, dict) else None
        if not isinstance(unit, list) or [type(u) for u in unit] != [str, int, int] \
                or not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            break
        kept.append(((unit[0], unit[1], unit[2]), rows))
    return kept


def identity_sha256(parts: Mapping[str, Any]) -> str:
    """The SHA-256 of ``parts`` as canonical JSON (what a partial file's rows depend on)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
