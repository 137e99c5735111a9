"""Parameter sweeps: every policy x trace x trace parameter x engine parameter x seed.

``lyra-gym sweep CONFIG.yaml [--backend local|ray] [--jobs N] [--out DIR]`` reads a
YAML grid::

    policies: [baseline, lyra]            # scheduler names (required)
    traces: [preset:small-1d, traces/default.csv]   # CSV paths (relative to the sweep file's
                                          # folder) and/or preset:NAME (required)
    seeds: [0, 1]                         # default [0]
    trace_seed: run                       # preset traces: generated with each run's seed
                                          # (``run``, the default) or with this fixed integer
    trace_params:                         # TracePreset fields, swept on preset traces only
      elastic_share: [0, 0.25, 0.5, 0.75, 1.0]
    params:                               # engine config keys, dotted for nested ones
      reclaim_grace_s: [0, 60]
      demand.peak_trough_ratio: [2.5, 8]
    base_config: docs/example-config.yaml # optional; relative to the sweep file's folder
    policy_params: {lyra: {reclaim_rule: random}}   # optional scheduler parameters

A sweep file is data: a policy that imports or unpickles code (``MODULE:ATTRIBUTE``, ``file.py:NAME``,
``policy:...``, ``model:PATH?trust=1`` or ``trust_model_files``) is refused before anything is
imported unless the user passes ``--trust-code`` (``trust_code=True``; ``docs/trust.md``).

and writes into ``--out``:

- ``runs.csv``: one row per run: ``trace``, ``trace_seed``, one column per swept
  parameter (its name as written in the grid), ``policy``, ``seed``, every
  metric of ``metrics.json``, then what produced the run: ``lyra_gym_version`` and
  ``lyra_gym_commit`` (:mod:`lyra_gym.provenance`; empty in a row stored by an older
  lyra_gym and resumed). ``trace`` is the label as written in the sweep file;
- ``sweep_<param>.png`` for each swept parameter: mean JCT and mean queuing time
  per policy against the parameter's values (mean over seeds, traces and the other
  swept parameters' values; shaded band: min to max over those runs);
- ``sweep.json``: the grid as run, its hash (``grid_sha256``: the runs, configs, policy
  parameters and the SHA-256 of every file they read), ``status`` (``running``,
  ``complete``, ``interrupted``, ``failed``), ``trace_files`` (each CSV trace's label ->
  the file read, :func:`lyra_gym.model.paths.resolve_beside`), ``lyra_gym_version`` and
  ``lyra_gym_commit``;
- ``sweep_runs/run-NNNNN.json``: each run's ``runs.csv`` row, written (atomically) as
  soon as the run finishes.

Resuming: called again with the same grid and ``--out``, a sweep skips every run whose
``sweep_runs`` file is present and complete (same grid hash, same grid position) and
runs the rest; ``runs.csv`` is then identical to an uninterrupted sweep's. ``--out``
follows the output rule (:mod:`lyra_gym.outputs`): a folder that is or holds an input
(the sweep file, a trace, a config, a profile or demand file it names) is refused; a
non-empty folder holding another sweep or no sweep is refused unless ``overwrite``,
which reruns every run and replaces only the sweep's own files (other entries are kept).

Each run is independent and seeded, so the numbers do not depend on the backend
or the number of workers (except ``sim_wall_s``). A preset trace generated with
the same seed and different ``elastic_share`` values differs only in which jobs
are elastic (the same random draw per job is compared to the share).
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lyra_gym.harness.compare import BACKENDS, RunSpec, run_in_workers, run_one
from lyra_gym.model.feasibility import drop_infeasible
from lyra_gym.model.config import SimConfig, config_to_dict, load_config
from lyra_gym.harness.report import mean_ci
from lyra_gym.harness.sweep_grid import GRID_KEYS as GRID_KEYS
from lyra_gym.harness.sweep_grid import set_dotted as set_dotted
from lyra_gym.harness.sweep_grid import PRESET_PREFIX, Grid, SweepError, apply_params, load_grid, preset_with
from lyra_gym.outputs import (OutputError, atomic_path, atomic_write_text, check_out_folder, is_temporary,
                              named_inputs)
from lyra_gym.run.simulate import SimResult, file_sha256, load_profile_set
from lyra_gym.provenance import PROVENANCE_KEYS, provenance
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.trace import load_trace
from lyra_gym.workloads.tracegen import generate_trace

PLOT_METRICS = (("jct_mean_s", "mean JCT (h)"), ("queue_mean_s", "mean queuing time (h)"))
SWEEP_FORMAT = 1  # part of the grid hash: a change of the stored files' meaning invalidates old ones
RUNS_DIR = "sweep_runs"  # one finished run's row per file (see the module docstring)


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: where it sits in the grid, and what it needs."""

    trace: str
    trace_seed: int | None
    values: Mapping[str, Any]  # every swept parameter's value
    spec: RunSpec
    jobs: Sequence[JobSpec]
    config: SimConfig


def expand(grid: Grid, skip_infeasible: bool = False) -> list[SweepRun]:
    """Every run of the grid, in a fixed order (trace, trace params, params, policy, seed).
    Traces and configs shared by several runs are built once (the same objects).

    Every (trace, config) pair is checked by :func:`lyra_gym.model.feasibility.drop_infeasible`: a job
    that can never fit is an :class:`~lyra_gym.model.feasibility.InfeasibleJobError`, or, with
    ``skip_infeasible``, dropped and counted in that run's ``jobs_skipped_infeasible`` metric."""
    runs: list[SweepRun] = []
    # keyed by identity; each entry holds its trace and config, so no id() is reused while cached
    feasible: dict[tuple[int, int], tuple[list[JobSpec], SimConfig, list[JobSpec], int]] = {}

    def checked(jobs: list[JobSpec], config: SimConfig, trace: str) -> tuple[list[JobSpec], int]:
        key = (id(jobs), id(config))
        if key not in feasible:
            kept, result = drop_infeasible(jobs, config, skip_infeasible, f"traces: {trace}")
            feasible[key] = (jobs, config, kept, len(result.infeasible))
        _, _, kept, skipped = feasible[key]
        return kept, skipped

    csv_cache: dict[str, list[JobSpec]] = {}
    profiles = load_profile_set(grid.base_config)
    t_names, p_names = list(grid.trace_params), list(grid.params)
    configs: dict[tuple, SimConfig] = {}
    for trace in grid.traces:
        for t_vals in itertools.product(*grid.trace_params.values()):
            t_values = dict(zip(t_names, t_vals))
            gen_cache: dict[int, list[JobSpec]] = {}
            preset = preset_with(trace[len(PRESET_PREFIX):], t_values) if trace.startswith(PRESET_PREFIX) else None

            def jobs_for(seed: int) -> tuple[list[JobSpec], int | None]:
                if preset is None:
                    if trace not in csv_cache:
                        csv_cache[trace] = load_trace(grid.trace_file(trace), known_models=profiles.models)
                    return csv_cache[trace], None
                ts = seed if grid.trace_seed is None else grid.trace_seed
                if ts not in gen_cache:
                    try:
                        gen_cache[ts] = generate_trace(preset, ts)
                    except ValueError as err:
                        shown = ", ".join(f"{k}={v!r}" for k, v in t_values.items())
                        raise SweepError(f"trace {trace} ({shown}) seed {ts}: {err}") from None
                return gen_cache[ts], ts

            for p_items in itertools.product(*(list(enumerate(v)) for v in grid.params.values())):
                p_key = tuple(i for i, _ in p_items)  # by position: values may be lists (unhashable)
                p_vals = tuple(v for _, v in p_items)
                if p_key not in configs:
                    configs[p_key] = apply_params(grid.base_config, dict(zip(p_names, p_vals)))
                config = configs[p_key]
                values = {**t_values, **dict(zip(p_names, p_vals))}
                for policy in grid.policies:
                    for seed in grid.seeds:
                        jobs, ts = jobs_for(seed)
                        jobs, skipped = checked(jobs, config, trace)
                        extra = {"jobs_skipped_infeasible": skipped} if skip_infeasible else {}
                        spec = RunSpec(policy, seed, dict(grid.policy_params.get(policy, {})), extra_metrics=extra)
                        runs.append(SweepRun(trace, ts, values, spec, jobs, config))
    return runs


def execute(runs: Sequence[SweepRun], n_jobs: int = 1, backend: str = "local", address: str | None = None,
            on_done: Callable[[int], object] | None = None,
            on_result: Callable[[int, SimResult], None] | None = None) -> list[SimResult]:
    """Run every sweep run; results in ``runs`` order, identical for every backend and ``n_jobs``.

    ``on_result(i, result)`` is called in this process as run ``i`` finishes (completion
    order), then ``on_done(i)``. With Ray, the result it gets holds the metrics only (read
    back from the run folder the Ray backend writes, in a temporary folder)."""
    if backend not in BACKENDS:
        raise SweepError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    workers = min(max(1, n_jobs), len(runs))
    if backend == "ray":
        from lyra_gym.harness.ray_backend import run_tasks_ray

        if on_result is None:
            return run_tasks_ray([(r.spec, r.jobs, r.config) for r in runs], address, workers, on_done)
        with tempfile.TemporaryDirectory(prefix="lyra-gym-sweep-") as stage:
            def ray_done(i: int) -> None:
                folder = Path(stage) / f"run-{i}"
                meta = json.loads((folder / "metrics.json").read_text())
                for key in PROVENANCE_KEYS:  # what produced the run, not a metric
                    meta.pop(key, None)
                on_result(i, SimResult(meta.pop("policy"), meta.pop("seed"), meta, [], runs[i].config))
                shutil.rmtree(folder, ignore_errors=True)
                if on_done:
                    on_done(i)

            tasks = [(dataclasses.replace(r.spec, out_dir=str(Path(stage) / f"run-{i}")), r.jobs, r.config)
                     for i, r in enumerate(runs)]
            return run_tasks_ray(tasks, address, workers, ray_done)
    if address:
        raise SweepError("an address is only used with the ray backend")
    results: list[SimResult | None] = [None] * len(runs)

    def finished(i: int, result: SimResult) -> None:
        results[i] = result
        if on_result:
            on_result(i, result)
        if on_done:
            on_done(i)

    if workers == 1:
        for i, r in enumerate(runs):
            finished(i, run_one(r.spec, r.jobs, r.config))
        return results  # type: ignore[return-value]

    run_in_workers(run_one, [(r.spec, list(r.jobs), r.config) for r in runs], workers, finished,
                   describe=lambda i: f"run {runs[i].spec.policy!r} seed {runs[i].spec.seed} on {runs[i].trace}")
    return results  # type: ignore[return-value]


def run_row(grid: Grid, run: SweepRun, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The tidy row of one run in ``runs.csv``: grid position, every metric, then what produced
    it (this process's :func:`lyra_gym.provenance.provenance`)."""
    row = {"trace": run.trace, "trace_seed": run.trace_seed}
    row.update({k: run.values[k] for k in grid.swept})
    row.update({"policy": run.spec.policy, "seed": run.spec.seed})
    row.update({k: v for k, v in metrics.items() if k not in row and k not in PROVENANCE_KEYS})
    row.update(provenance())
    return row


def write_runs_csv(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """``runs.csv`` (None as an empty cell), written atomically."""
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
    return path


def plot_name(param: str) -> str:
    return "sweep_" + re.sub(r"[^A-Za-z0-9_\-]", "_", param) + ".png"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def aggregate(rows: Sequence[Mapping[str, Any]], param: str, metric: str,
              policies: Sequence[str]) -> dict[str, list[tuple[Any, float, float, float, int]]]:
    """policy -> ``[(value, mean, min, max, n), ...]`` of ``metric`` over the runs at each value
    of ``param`` (in first-seen order); runs where the metric is missing are left out."""
    out: dict[str, list[tuple[Any, float, float, float, int]]] = {}
    for p in policies:
        by_value: dict[Any, list[float]] = {}
        for r in rows:
            if r["policy"] == p:
                by_value.setdefault(r[param], [])
                if _is_number(r.get(metric)) and math.isfinite(r[metric]):
                    by_value[r[param]].append(float(r[metric]))
        out[p] = [(v, mean_ci(xs)[0], min(xs), max(xs), len(xs)) for v, xs in by_value.items() if xs]
    return out


def write_sweep_plots(grid: Grid, rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike) -> list[Path]:
    """One PNG per swept parameter: mean JCT (left) and mean queuing time (right) per policy."""
    from matplotlib.figure import Figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for param in grid.swept:
        values = list({**grid.trace_params, **grid.params}[param])
        numeric = all(_is_number(v) for v in values)
        others = [k for k in grid.swept if k != param]
        fig = Figure(figsize=(9, 3.6), dpi=90, layout="constrained")
        axes = fig.subplots(1, 2)
        note = f"mean over {len(grid.seeds)} seed{'s' if len(grid.seeds) > 1 else ''}"
        if others:
            note += " and " + ", ".join(others)
        if len(grid.traces) > 1:
            note += f" and {len(grid.traces)} traces"
        fig.suptitle(f"{param} sweep ({note}; band: min-max over runs)", fontsize="medium")
        for ax, (metric, label) in zip(axes, PLOT_METRICS):
            for i, (policy, points) in enumerate(aggregate(rows, param, metric, grid.policies).items()):
                if not points:
                    continue
                xs = [v if numeric else values.index(v) for v, *_ in points]
                ys, lo, hi = ([pt[k] / 3600.0 for pt in points] for k in (1, 2, 3))
                ax.plot(xs, ys, marker="o", color=f"C{i % 10}", label=policy)
                ax.fill_between(xs, lo, hi, color=f"C{i % 10}", alpha=0.15, linewidth=0)
            if not numeric:
                ax.set_xticks(range(len(values)), [str(v) for v in values])
            ax.set_xlabel(param)
            ax.set_ylabel(label)
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
        axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
        path = out / plot_name(param)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png")
        written.append(path)
    return written


def summary_table(grid: Grid, rows: Sequence[Mapping[str, Any]]) -> str:
    """Mean JCT and queuing (h) per policy at every value of every swept parameter."""
    lines = []
    for param in grid.swept:
        lines.append(f"{param}:")
        header = f"  {'value':>10}  " + "  ".join(f"{p + ' JCT h':>14}  {p + ' queue h':>14}" for p in grid.policies)
        lines.append(header)
        jct = aggregate(rows, param, "jct_mean_s", grid.policies)
        queue = aggregate(rows, param, "queue_mean_s", grid.policies)
        for v in {**grid.trace_params, **grid.params}[param]:
            cells = []
            for p in grid.policies:
                j = next((pt[1] for pt in jct[p] if pt[0] == v), None)
                q = next((pt[1] for pt in queue[p] if pt[0] == v), None)
                cells.append(f"{'-' if j is None else f'{j / 3600:.3f}':>14}  {'-' if q is None else f'{q / 3600:.3f}':>14}")
            lines.append(f"  {str(v):>10}  " + "  ".join(cells))
    return "\n".join(lines)


def _position(run: SweepRun) -> dict[str, Any]:
    """Where a run sits in the grid, as JSON data (compared when resuming)."""
    return _canonical({"trace": run.trace, "trace_seed": run.trace_seed, "values": dict(run.values),
                       "policy": run.spec.policy, "seed": run.spec.seed})


def _canonical(data: Any) -> Any:
    """``data`` as read back from JSON, so a stored row and a fresh one write the same CSV."""
    return json.loads(json.dumps(data, default=str))


def _configs(runs: Sequence[SweepRun]) -> list[SimConfig]:
    seen: dict[int, SimConfig] = {}
    for r in runs:
        seen.setdefault(id(r.config), r.config)
    return list(seen.values())


def sweep_inputs(path: str | os.PathLike, grid: Grid, runs: Sequence[SweepRun]) -> dict[str, Any]:
    """``{what: path}`` of every file a sweep reads: the sweep file, its CSV traces, its
    base config and the profile and demand files its configs name."""
    pairs: list[tuple[str, Any]] = [("the sweep file", path), ("base_config", grid.base_config_file)]
    pairs += [("traces", grid.trace_file(t)) for t in grid.traces if not t.startswith(PRESET_PREFIX)]
    for config in _configs(runs):
        pairs += [("profiles", config.profiles), ("demand_csv", config.demand_csv)]
    unique = list(dict.fromkeys((k, os.fspath(v)) for k, v in pairs if v))
    return named_inputs(unique)


def grid_sha256(grid: Grid, runs: Sequence[SweepRun], skip_infeasible: bool = False) -> str:
    """The identity of a sweep's results: every run's grid position, the base config, the
    policy parameters, ``skip_infeasible`` and the SHA-256 of every data file read (traces,
    profiles, demand curves). Two sweeps with the same hash give the same ``runs.csv``."""
    # a trace by its label as written (so the hash does not depend on the folder it was run from)
    files = [(t, grid.trace_file(t)) for t in grid.traces if not t.startswith(PRESET_PREFIX)]
    for config in _configs(runs):
        files += [(f, f) for f in (config.profiles, config.demand_csv) if f]
    identity = {
        "format": SWEEP_FORMAT, "runs": [_position(r) for r in runs], "skip_infeasible": skip_infeasible,
        "base_config": config_to_dict(grid.base_config),
        "policy_params": {p: dict(v) for p, v in grid.policy_params.items()},
        "files_sha256": {k: file_sha256(f) for k, f in dict.fromkeys(files) if Path(f).is_file()},
    }
    return hashlib.sha256(json.dumps(identity, default=str).encode()).hexdigest()


def _run_file(out: Path, i: int) -> Path:
    return out / RUNS_DIR / f"run-{i:05d}.json"


def _stored_row(out: Path, i: int, run: SweepRun, ident: str) -> dict[str, Any] | None:
    """Run ``i``'s stored row, or None when absent, unreadable or of another grid or position."""
    try:
        data = json.loads(_run_file(out, i).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("grid_sha256") != ident or data.get("index") != i \
            or data.get("run") != _position(run) or not isinstance(data.get("row"), dict):
        return None
    row = data["row"]
    for key in PROVENANCE_KEYS:  # a row stored before rows recorded what produced them: unknown
        row.setdefault(key, None)
    return row


def open_out(out: str | os.PathLike, path: str | os.PathLike, grid: Grid, runs: Sequence[SweepRun],
             overwrite: bool = False, skip_infeasible: bool = False, what: str = "--out"
             ) -> tuple[str, dict[int, dict[str, Any]] | None]:
    """Check a sweep's output folder before any run (module docstring); returns the grid hash
    and, when the folder holds this same sweep (and not ``overwrite``), the rows of the runs
    already done by index (None: a fresh sweep). Creates nothing."""
    folder = check_out_folder(out, overwrite=True, inputs=sweep_inputs(path, grid, runs), what=what)
    ident = grid_sha256(grid, runs, skip_infeasible)
    entries = [e for e in folder.iterdir() if not is_temporary(e)] if folder.is_dir() else []
    if (folder / RUNS_DIR).is_symlink():  # a fresh start empties it: through a link, another sweep's runs
        raise OutputError(f"{what} {out}: {folder / RUNS_DIR} is a symbolic link; a sweep keeps its runs in a "
                          f"folder of its own")
    if (folder / RUNS_DIR).exists() and not (folder / RUNS_DIR).is_dir():
        raise OutputError(f"{what} {out}: {folder / RUNS_DIR} is a file, where a sweep keeps its runs")
    for name in ("sweep.json", "runs.csv", *(plot_name(p) for p in grid.swept)):
        if (folder / name).is_dir():
            raise OutputError(f"{what} {out}: {folder / name} is a folder, where this command writes a file")
    if not entries:
        return ident, None
    try:
        manifest = json.loads((folder / "sweep.json").read_text())
    except (OSError, ValueError):
        manifest = None
    same = isinstance(manifest, dict) and manifest.get("grid_sha256") == ident
    if overwrite:
        return ident, None
    if same:
        return ident, {i: row for i, r in enumerate(runs) if (row := _stored_row(folder, i, r, ident)) is not None}
    if isinstance(manifest, dict):
        raise OutputError(f"{what} {out}: holds a different sweep (its sweep.json records another grid, or "
                          f"configs or trace files that changed since); pass --overwrite to rerun this one "
                          f"there, or choose another folder")
    raise OutputError(f"{what} {out}: exists, is not empty and holds no sweep; pass --overwrite to write this "
                      f"sweep's files beside what it holds, or choose another folder")


def run_sweep(path: str | os.PathLike, out: str | os.PathLike, n_jobs: int = 1, backend: str = "local",
              address: str | None = None, plots: bool = True,
              on_done: Callable[[int], object] | None = None, skip_infeasible: bool = False,
              overwrite: bool = False, runs: Sequence[SweepRun] | None = None,
              grid: Grid | None = None, on_resume: Callable[[int, int], None] | None = None,
              trust_code: bool = False) -> tuple[Grid, list[dict[str, Any]], list[Path]]:
    """Load ``path``, run its grid, write ``runs.csv``, ``sweep.json`` and the plots into ``out``.

    ``grid`` and ``runs`` (from :func:`load_grid` and :func:`expand`) may be passed when the
    caller already built them. ``out`` is checked first (:func:`open_out`); each run's row is
    stored as it finishes, and a folder holding this same sweep is resumed: the runs done
    are skipped (``on_resume(done, total)`` is called first), unless ``overwrite``, which
    reruns every run. ``on_done(i)``: run ``i`` (index in ``runs``) finished. ``trust_code``: allow
    policies that import or unpickle code in the file (:func:`load_grid`; refused by default)."""
    grid = load_grid(path, trust_code) if grid is None else grid
    runs = expand(grid, skip_infeasible) if runs is None else runs
    ident, done = open_out(out, path, grid, runs, overwrite, skip_infeasible)
    out = Path(out)
    if done is not None and on_resume:
        on_resume(len(done), len(runs))
    rows: dict[int, dict[str, Any]] = dict(done or {})
    hashes = {t: file_sha256(grid.trace_file(t)) for t in grid.traces if not t.startswith(PRESET_PREFIX)}
    manifest: dict[str, Any] = {
        "status": "running", "grid_sha256": ident, "runs_total": len(runs),
        "sweep_file": str(path), "sweep_file_sha256": file_sha256(path), "trace_sha256": hashes,
        "skip_infeasible": skip_infeasible,
        "policies": list(grid.policies), "traces": list(grid.traces),
        "seeds": list(grid.seeds), "trace_seed": "run" if grid.trace_seed is None else grid.trace_seed,
        "trace_params": {k: list(v) for k, v in grid.trace_params.items()},
        "params": {k: list(v) for k, v in grid.params.items()}, "base_config": grid.base_config_path,
        "policy_params": {p: v for p, v in grid.policy_params.items() if v}, "runs": len(rows),
        "trace_files": dict(grid.trace_files), **provenance(),  # what was read, what produced it (issue 27)
    }

    def save_manifest() -> Path:
        return atomic_write_text(out / "sweep.json", json.dumps(manifest, indent=2, default=str) + "\n")

    out.mkdir(parents=True, exist_ok=True)
    if done is None and (out / RUNS_DIR).is_dir():  # a fresh start: no older run of ours survives
        for old in (out / RUNS_DIR).glob("run-*.json"):
            old.unlink()
    save_manifest()
    todo = [i for i in range(len(runs)) if i not in rows]

    def store(k: int, result: SimResult) -> None:
        i = todo[k]
        row = _canonical(run_row(grid, runs[i], result.metrics))
        record = {"grid_sha256": ident, "index": i, "run": _position(runs[i]), "row": row}
        atomic_write_text(_run_file(out, i), json.dumps(record, indent=1) + "\n")
        rows[i] = row

    try:
        if todo:
            execute([runs[i] for i in todo], n_jobs, backend, address,
                    on_done=None if on_done is None else (lambda k: on_done(todo[k])), on_result=store)
        ordered = [rows[i] for i in range(len(runs))]
        written = [write_runs_csv(ordered, out / "runs.csv")]
        if plots:
            written += write_sweep_plots(grid, ordered, out)
    except BaseException as err:
        manifest.update(status="interrupted" if isinstance(err, KeyboardInterrupt) else "failed", runs=len(rows))
        try:
            save_manifest()
        except BaseException:  # the first error is the one to report
            pass
        raise
    manifest.update(status="complete", runs=len(ordered))
    written.insert(1, save_manifest())
    return grid, ordered, written
