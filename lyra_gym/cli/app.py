"""The ``lyra-gym`` command line: simulate, compare, sweep, policies, trace generate.

``sweep`` runs a YAML grid of policies, traces, trace and engine parameters and
seeds (:mod:`lyra_gym.harness.sweep`). ``compare`` and ``sweep`` take ``--backend ray``
to run each simulation as a Ray task (:mod:`lyra_gym.harness.ray_backend`).

``compare`` runs every policy on every seed (``--jobs N`` worker processes,
identical results), prints mean ± 95 % CI half-width per metric, and writes
``summary.csv``/``summary.json``, ``compare.json`` (what was run), one folder per
run, four PNG plots (:mod:`lyra_gym.harness.report`) and, with ``--tensorboard DIR``,
TensorBoard scalars (:mod:`lyra_gym.harness.tensorboard_log`).

Before any simulation every command checks all it was given: policy names
(``model:PATH`` paths included) and parameters, seeds (integers >= 0), the
config, the trace (and that every job can fit on the cluster,
:mod:`lyra_gym.model.feasibility`; ``--skip-infeasible`` drops those that cannot) and
the output, by one rule for every command that writes (:mod:`lyra_gym.outputs`):
a non-empty ``--out`` (an existing file for ``trace generate`` and ``convert``) is
refused unless ``--overwrite``, which replaces only the command's own files (nothing is
emptied; ``simulate`` replaces its run folder as a whole, so one holding anything else is
refused); an ``--out`` that is, or holds, something the command reads (symbolic links
followed) is refused, overwrite or not. ``compare`` and ``sweep`` lock ``--out`` while
they run: a second command into it is refused. Every file and run folder is written
atomically; ``run.json`` records what produced a run folder
(:func:`lyra_gym.run.simulate.write_result`). ``compare.json`` says which runs the
folder holds and whether the comparison completed (``status``: ``running``,
``complete``, ``interrupted``, ``failed``); it, ``summary.csv``/``.json`` and the
TensorBoard text ``config/provenance`` record what produced them (:mod:`lyra_gym.provenance`).
``sweep`` writes each run's result as it finishes and resumes: called again on the same
grid and ``--out``, it skips the runs already done (:mod:`lyra_gym.harness.sweep`).

Errors: one line on stderr (``lyra-gym: error: ...``), exit code 2, no
traceback (a run that crashes also prints the run's traceback). Ctrl-C or SIGTERM: worker
processes are stopped at once, ``lyra-gym: interrupted`` and exit code 130.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, NoReturn, Sequence

from lyra_gym.harness.gantt import add_arguments as add_gantt_arguments, run_command as run_gantt
from lyra_gym.errors import shown as cut
from lyra_gym.harness import ray_backend
from lyra_gym.interrupts import sigterm_as_interrupt
from lyra_gym.harness.report import TABLE_KEYS, WIDTH, format_table
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.import_spec import split_spec
from lyra_gym.harness.compare import (BACKENDS, CompareError, RunError, RunSpec, check_policies, parse_policy_params,
                               read_config, run_dirname, run_grid)
from lyra_gym.model.config import ConfigError, SimConfig
from lyra_gym.model.feasibility import InfeasibleJobError, drop_infeasible
from lyra_gym.model.demand import DemandFileError
from lyra_gym.sim.plan import PlanError
from lyra_gym.model.profiles import ProfileError
from lyra_gym.outputs import (OutputError, atomic_path, atomic_write_text, check_inputs_outside, check_out_file,
                              check_out_folder, locked_folder, named_inputs, owned_names, staged_folder)
from lyra_gym.run.simulate import (RUN_FILES, check_out_dir, load_profile_set, simulate, trace_info,
                                write_result)
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.provenance import provenance
from lyra_gym.workloads.trace import TraceError, load_trace, write_trace
from lyra_gym.workloads.tracegen import PRESETS, generate_trace
from lyra_gym.collector.cli import add_profile_parser
from lyra_gym.workloads.realtraces import add_convert_parser

DEFAULT_TRACE = "traces/default.csv"
DEFAULT_PRESET, DEFAULT_PRESET_SEED = "small-1d", 0  # traces/default.csv is this preset at this seed
def _warn(message: str) -> None:
    print(f"lyra-gym: warning: {message}", file=sys.stderr)


def _load_jobs(path: str, config: SimConfig) -> list[JobSpec]:
    """The jobs of :func:`_load_trace_checked` alone (infeasible jobs refused)."""
    return _load_trace_checked(path, config)[0]


def _load_trace_checked(path: str, config: SimConfig, skip_infeasible: bool = False
                        ) -> tuple[list[JobSpec], dict[str, Any], int]:
    """The trace at ``path``, model keys checked against the run's profiles and every job
    checked against the cluster (:mod:`lyra_gym.model.feasibility`); returns the jobs, the trace's
    ``run.json`` entry (path, SHA-256) and the number of jobs dropped as infeasible.

    The default path falls back to regenerating the shipped trace (identical
    content) so the main job runs from an installed package too.
    """
    if path == DEFAULT_TRACE and not Path(path).exists():
        jobs = generate_trace(DEFAULT_PRESET, DEFAULT_PRESET_SEED)
        info = trace_info(path, jobs, generated=f"preset {DEFAULT_PRESET} seed {DEFAULT_PRESET_SEED}")
    else:
        jobs = load_trace(path, known_models=load_profile_set(config).models)
        info = trace_info(path, jobs)
    kept, result = drop_infeasible(jobs, config, skip_infeasible, f"--trace {path}")
    if result.infeasible:
        first = result.infeasible[0]
        if not kept:
            raise InfeasibleJobError(f"--trace {path}: --skip-infeasible would drop all {len(jobs)} jobs; none can ever fit "
                             f"the cluster (first: {first.describe()})")
        _warn(f"--skip-infeasible: dropped {len(result.infeasible)} of {len(jobs)} jobs of {path} that can never fit "
              f"(first: {first.describe()})")
        info["skipped_infeasible"] = [i.job_id for i in result.infeasible]
    if result.needs_loan:
        _warn(f"{len(result.needs_loan)} jobs of {path} fit only with loaned inference servers (first: "
              f"{result.needs_loan[0]!r}, more than the {result.training_capacity} training GPUs); policies that "
              f"never borrow will not start them")
    return kept, info, len(result.infeasible)


def _config(path: str | None) -> SimConfig:
    return read_config(path)


def _non_negative(meaning: str):
    """argparse type: an integer >= 0; ``meaning`` says why in the error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0 ({meaning}), got {value}")
        return value
    return parse


_seed = _non_negative("a numpy seed")
_count = _non_negative("0 = one per CPU core")


def _atomic_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


PATH_POLICIES = ("model", "rllib")  # policy prefixes whose argument is a path the run reads


def _policy_path(policy: str) -> str | None:
    """The path a ``model:``/``rllib:`` policy reads (a ``?trust=1`` suffix stripped), or the ``.py``
    file a ``path.py:NAME`` (``policy:path.py:NAME``) spec imports, else None."""
    prefix, sep, argument = policy.partition(":")
    if prefix == "policy" or registry.is_import_spec(policy):
        spec = split_spec(argument if prefix == "policy" else policy)
        return spec[0] if spec is not None and spec[0].endswith(".py") else None
    if not sep or prefix not in PATH_POLICIES or not argument:
        return None
    base, query, _ = argument.rpartition("?")
    return base if query and not os.path.exists(argument) else argument


def _inputs(policy_option: str, policies: Sequence[str], trace: str, config_path: str | None,
            config: SimConfig) -> dict[str, Any]:
    """``{option: path}`` of everything a simulate/compare run reads (the output rule's inputs)."""
    pairs = [("--trace", trace), ("--config", config_path)]
    pairs += [(policy_option, path) for path in map(_policy_path, policies) if path]
    pairs += [("profiles (in --config)", config.profiles), ("demand_csv (in --config)", config.demand_csv)]
    return named_inputs(pairs)


def cmd_simulate(args: argparse.Namespace) -> int:
    _trust_model_files(args)
    params = parse_policy_params(args.policy_param, [args.policy])
    check_policies([args.policy], params)
    params = params[args.policy]
    config = _config(args.config)
    out = check_out_dir(args.out, args.overwrite, inputs=_inputs("--policy", [args.policy], args.trace,
                                                                  args.config, config))
    jobs, info, skipped = _load_trace_checked(args.trace, config, args.skip_infeasible)
    result = simulate(jobs, args.policy, config, seed=args.seed, policy_params=params,
                      progress=True, record_timeline=args.timeline)
    if args.skip_infeasible:
        result.metrics["jobs_skipped_infeasible"] = skipped
    print(format_table([{"policy": result.policy, **result.metrics}], TABLE_KEYS, None if args.wide else WIDTH))
    _warn_unfinished([{"policy": result.policy, **result.metrics}])
    out = write_result(result, out, {"command": "simulate", "trace": info, "config_file": args.config})
    extra = ", timeline.csv and placements.csv" if args.timeline else ""
    print(f"wrote {out / 'metrics.json'}, {out / 'jobs.csv'}{extra}")
    return 0


def _csv_list(text: str, what: str) -> list[str]:
    items = [p.strip() for p in text.split(",")]
    if not any(items):
        raise CompareError(f"{what}: empty list")
    if "" in items:
        raise CompareError(f"{what} {cut(text)}: item {items.index('') + 1} is empty (a comma-separated list)")
    return items


def cmd_compare(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from lyra_gym.harness.report import READS_KEY, format_ci_table, summarize_runs, write_plots, write_summary

    _trust_model_files(args)
    policies = _csv_list(args.policies, "--policies")
    seeds = []
    for text in _csv_list(args.seeds, "--seeds"):
        try:
            seeds.append(_seed(text))
        except argparse.ArgumentTypeError as err:
            raise CompareError(f"--seeds {cut(args.seeds)}: {err} (comma-separated integers >= 0, "
                               f"e.g. 0,1,2)") from None
    if len(set(seeds)) != len(seeds):
        raise CompareError(f"--seeds {cut(args.seeds)}: a seed is listed twice")
    n_jobs = args.jobs or os.cpu_count() or 1
    params = parse_policy_params(args.policy_param, policies)
    check_policies(policies, params)  # fail fast on a typo before any run
    if (args.address or args.ray_retries is not None) and args.backend != "ray":
        raise CompareError("--address and --ray-retries are only used with --backend ray")
    config = _config(args.config)
    inputs = _inputs("--policies", policies, args.trace, args.config, config)
    out = check_out_folder(args.out, args.overwrite, inputs=inputs)
    plots = not args.no_plots
    _check_compare_targets(out, args.out, policies, seeds, inputs)
    if args.tensorboard is not None:
        _check_tensorboard(args.tensorboard, policies, args.overwrite, inputs)
    jobs, info, skipped = _load_trace_checked(args.trace, config, args.skip_infeasible)
    manifest: dict[str, Any] = {
        "status": "running", "trace": args.trace, "trace_sha256": info["sha256"], "config": args.config,
        "jobs": len(jobs), "policies": policies, "seeds": seeds,
        "policy_params": {p: v for p, v in params.items() if v},
        "run_folders": {p: run_dirname(p) for p in policies},
        "runs": [], **provenance(),  # what produced the comparison (issue 27)
    }
    if args.skip_infeasible:
        manifest["jobs_skipped_infeasible"] = skipped
    out.mkdir(parents=True, exist_ok=True)
    _atomic_json(out / "compare.json", manifest)
    completed: list[RunSpec] = []
    run_info = {"command": "compare", "trace": info, "config_file": args.config}
    extra = {"jobs_skipped_infeasible": skipped} if args.skip_infeasible else {}
    try:
        with tqdm(total=len(policies) * len(seeds), unit="run", delay=2.0, leave=False) as bar:
            results = run_grid(jobs, config, policies, seeds, params, out, n_jobs,
                               record_timeline=plots or args.tensorboard is not None, on_done=lambda _: bar.update(1),
                               backend=args.backend, address=args.address, run_info=run_info,
                               extra_metrics=extra, completed=completed)
        manifest["runs"] = _runs(completed)
        rows = [summarize_runs(results[p]) for p in policies]
        tags = [registry.knowledge_tag(registry.declared_reads(p)) for p in policies]
        shown = [{**row, READS_KEY: tag} for row, tag in zip(rows, tags)]  # what each reads of durations
        print(format_ci_table(shown, TABLE_KEYS, None if args.wide else WIDTH))
        _warn_unfinished(rows)
        files: list[Path] = []
        with staged_folder(out, files) as stage:  # each file moved into place whole
            write_summary(shown, stage)
        print(f"wrote {out / 'summary.csv'} and {out / 'summary.json'}")
        if plots:
            with staged_folder(out, files) as stage:
                write_plots(results, stage)
            print(f"wrote {', '.join(p.name for p in files if p.suffix == '.png')} to {out}")
        manifest["files"] = sorted(["compare.json", *(p.name for p in files)])
        if args.tensorboard is not None:
            _write_tensorboard(args.tensorboard, rows, results, args.overwrite)
            print(f"wrote TensorBoard runs to {args.tensorboard} (tensorboard --logdir {args.tensorboard})")
    except BaseException as err:
        manifest["status"] = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        manifest["runs"] = _runs(completed)
        try:
            _atomic_json(out / "compare.json", manifest)
        except BaseException:  # the first error is the one to report
            pass
        raise
    manifest["status"] = "complete"
    _atomic_json(out / "compare.json", manifest)
    return 0


def _check_compare_targets(out: Path, shown: str, policies: Sequence[str], seeds: Sequence[int],
                           inputs: dict[str, Any]) -> None:
    """Before any run: every path compare writes in ``out`` can be replaced without losing
    anything it did not write (a run folder is replaced as a whole)."""
    from lyra_gym.harness.report import PLOT_FILES

    for name in ("compare.json", "summary.csv", "summary.json", *PLOT_FILES):
        if (out / name).is_dir():
            raise OutputError(f"--out {shown}: {out / name} is a folder, where this command writes a file; "
                              f"move it or choose another folder")
    own_run = owned_names(*RUN_FILES)
    for p in policies:
        folder = out / run_dirname(p)
        if folder.exists() and not folder.is_dir():
            raise OutputError(f"--out {shown}: {folder} is a file, where this command writes {p!r}'s run folders")
        for s in seeds:
            run = folder / f"seed{s}"
            for path in (folder, run):  # it may lead to another comparison's runs
                if path.is_symlink():
                    raise OutputError(f"--out {shown}: {path} is a symbolic link, where this command writes run "
                                      f"folders; it is never followed, so remove it or choose another --out")
            check_inputs_outside(run, inputs)
            if run.exists() and not run.is_dir():
                raise OutputError(f"--out {shown}: {run} is a file, where this command writes a run folder")
            foreign = [e.name for e in sorted(run.iterdir()) if not own_run(e)] if run.is_dir() else []
            if foreign:
                raise OutputError(f"--out {shown}: run folder {run} holds {', '.join(foreign[:3])}, which no run "
                                  f"wrote; the folder is replaced as a whole, so move it or choose another --out")


TB_EVENTS = "events.out.tfevents.*"


def _check_tensorboard(path: str, policies: Sequence[str], overwrite: bool, inputs: dict[str, Any]) -> None:
    """``--tensorboard DIR``: only the policies' runs (``DIR/<policy>``) are written, so DIR
    may hold other runs; a policy run that already holds event files needs ``--overwrite``."""
    root = check_out_folder(path, overwrite=True, what="--tensorboard")
    for p in policies:
        run = root / run_dirname(p)
        check_inputs_outside(run, inputs, "--tensorboard")
        if run.exists() and not run.is_dir():
            raise OutputError(f"--tensorboard {path}: {run} is a file, where this command writes {p!r}'s run")
        if not overwrite and run.is_dir() and any(run.glob(TB_EVENTS)):
            raise OutputError(f"--tensorboard {path}: {run} already holds TensorBoard event files; pass "
                              f"--overwrite to replace them, or choose another folder")


def _write_tensorboard(path: str, rows: Sequence[dict[str, Any]], results: Any, overwrite: bool) -> None:
    """Write the runs in a hidden folder, move each event file in, then (``overwrite``) remove
    the policies' older event files: a run never holds half a comparison or two of them."""
    from lyra_gym.harness.tensorboard_log import write_tensorboard

    files: list[Path] = []
    with staged_folder(path, files) as stage:
        write_tensorboard(stage, rows, results)
    if overwrite:
        for folder in {f.parent for f in files}:
            for old in folder.glob(TB_EVENTS):
                if old not in files:
                    old.unlink()


def _runs(specs: Sequence[RunSpec]) -> list[dict[str, Any]]:
    """``compare.json``'s record of the runs whose folders are complete, in completion order."""
    return [{"policy": s.policy, "seed": s.seed, "folder": f"{run_dirname(s.policy)}/seed{s.seed}"} for s in specs]


def cmd_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from lyra_gym.harness.sweep import expand, load_grid, run_sweep, summary_table

    grid = load_grid(args.file, trust_code=args.trust_code)
    runs = expand(grid, args.skip_infeasible)  # checks the whole file, and every trace, before any run
    with tqdm(total=len(runs), unit="run", delay=2.0, leave=False) as bar:
        def resumed(done: int, total: int) -> None:
            print(f"resumed: {done} of {total} runs already done")
            bar.update(done)

        # run_sweep checks --out before any run (lyra_gym.harness.sweep.open_out)
        grid, rows, written = run_sweep(args.file, args.out, args.jobs or os.cpu_count() or 1, args.backend,
                                        args.address, plots=not args.no_plots, on_done=lambda _: bar.update(1),
                                        skip_infeasible=args.skip_infeasible, overwrite=args.overwrite,
                                        runs=runs, grid=grid, on_resume=resumed)
    print(summary_table(grid, rows))
    print(f"{len(rows)} runs; wrote {', '.join(p.name for p in written)} to {args.out}")
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    """Every policy name, one a line, with what it is (:mod:`lyra_gym.cli.policy_list`); with
    ``--reads`` what each reads of job durations instead; ``--params NAME``: its parameters."""
    from lyra_gym.cli.policy_list import policy_lines

    if args.params:
        print(registry.describe_params(args.params))
        return 0
    print("\n".join(policy_lines(reads=getattr(args, "reads", False))))
    return 0


def cmd_trace_generate(args: argparse.Namespace) -> int:
    out = check_out_file(args.out, args.overwrite)
    jobs = generate_trace(args.preset, args.seed)
    with atomic_path(out) as tmp:
        write_trace(jobs, tmp)
    print(f"wrote {len(jobs)} jobs to {args.out}")
    return 0


def _add_policy_param(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy-param", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="scheduler parameter, repeatable; VALUE is a YAML scalar "
                        "(e.g. lyra.reclaim_rule=random, fifo.backfill=true)")
    p.add_argument("--trust-model-files", action="store_true",
                   help="let model:/rllib: policies unpickle their files (code in them runs; only for files "
                        "you trust; default: weights and statistics only, see docs/trust.md)")


TRUST_ENV = "LYRA_GYM_TRUST_MODEL_FILES"  # read by lyra_agents.model_files; inherited by worker processes


def _trust_model_files(args: argparse.Namespace) -> None:
    if getattr(args, "trust_model_files", False):
        _warn("--trust-model-files: model files are unpickled; code in them runs")
        os.environ[TRUST_ENV] = "1"


def _warn_unfinished(rows: Sequence[dict[str, Any]]) -> None:
    """One line on stderr per run that left jobs unfinished or had invalid actions dropped."""
    from lyra_gym.run.metrics import invalid_actions_warning, unfinished_warning

    for row in rows:
        for message in filter(None, (unfinished_warning(row), invalid_actions_warning(row))):
            print(f"lyra-gym: {message}", file=sys.stderr)


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="where the runs go: local (this process or --jobs worker processes) or ray "
                        "(one Ray task per run; needs pip install lyra-gym[ray]); results are identical")
    p.add_argument("--address", metavar="ADDR",
                   help="with --backend ray: the Ray cluster to connect to (e.g. auto, ray://host:10001); "
                        "default: start a local Ray instance with --jobs CPUs")
    p.add_argument("--ray-retries", type=_non_negative("reruns of a task"), metavar="N",
                   help=f"with --backend ray: rerun a task whose worker process died up to N times (default "
                        f"{ray_backend.DEFAULT_RETRIES}); any other Ray failure fails the command")


OVERWRITE_HELP = ("use an existing non-empty --out, replacing only this command's own files in it (nothing is "
                  "emptied; an --out that is or holds an input is refused even so; default: refuse a non-empty --out)")


def _add_output_flags(p: argparse.ArgumentParser, trace: bool = True, overwrite_help: str = OVERWRITE_HELP) -> None:
    p.add_argument("--overwrite", action="store_true", help=overwrite_help)
    if trace:
        p.add_argument("--skip-infeasible", action="store_true",
                       help="drop jobs that can never fit on the cluster (warned about and counted in metrics.json "
                            "as jobs_skipped_infeasible) instead of refusing the trace")


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error reported as one line (and exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"lyra-gym: error: {' '.join(message.split())} (see: {self.prog} --help)\n")


def cmd_trace_stats(args: argparse.Namespace) -> int:
    from lyra_gym.harness.tracestats import format_stats, trace_stats

    stats = trace_stats(load_trace(args.file), _config(args.config).cluster.training_gpus)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


def _add_wide(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true", help=f"print the table on full-length lines, policies by their "
                                                       f"full names (default: cut to {WIDTH} columns, runs by name)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lyra-gym", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("simulate", help="run one policy over a trace")
    p.add_argument("--policy", required=True, help="scheduler name (see `lyra-gym policies`)")
    p.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace CSV (default {DEFAULT_TRACE})")
    p.add_argument("--config", help="YAML or TOML file mapping onto SimConfig")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the run (integer >= 0)")
    p.add_argument("--out", default="results/simulate", help="output directory (the run folder)")
    _add_output_flags(p)
    _add_policy_param(p)
    p.add_argument("--timeline", action="store_true",
                   help="record the cluster after every decision and write timeline.csv")
    _add_wide(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("compare", help="run several policies over the same trace and seeds")
    p.add_argument("--policies", default="fifo,sjf", help="comma-separated scheduler names")
    p.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace CSV (default {DEFAULT_TRACE})")
    p.add_argument("--config", help="YAML or TOML file mapping onto SimConfig")
    p.add_argument("--seeds", default="0", help="comma-separated seeds (integers >= 0), e.g. 0,1,2")
    p.add_argument("--out", default="results/compare", help="output directory")
    _add_output_flags(p)
    _add_policy_param(p)
    p.add_argument("--jobs", type=_count, default=1, metavar="N",
                   help="worker processes for the (policy, seed) runs (default 1: in this process; "
                        "0: one per CPU core); results are identical")
    _add_backend(p)
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also write TensorBoard scalars: one run per policy under DIR")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    _add_wide(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("sweep", help="run a grid of policies x traces x parameters x seeds from a YAML file")
    p.add_argument("file", metavar="CONFIG.yaml", help="the sweep grid (see lyra_gym/harness/sweep.py, docs/sweep-elastic-share.yaml)")
    p.add_argument("--out", default="results/sweep",
                   help="output directory (runs.csv, sweep.json, sweep_<param>.png, sweep_runs/); called again "
                        "with the same grid and --out, the sweep resumes: runs already done are skipped")
    _add_output_flags(p, overwrite_help="rerun every run, even in an --out holding this sweep, or use an --out "
                                        "holding another sweep or other files (only this command's files are "
                                        "replaced; an --out that is or holds an input is refused even so)")
    p.add_argument("--jobs", type=_count, default=1, metavar="N",
                   help="worker processes, or Ray CPUs of a local instance (default 1; 0: one per CPU core)")
    _add_backend(p)
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--trust-code", action="store_true",
                   help="allow policies in the sweep file that import or unpickle code (MODULE:ATTRIBUTE, file.py:NAME, "
                        "policy:..., model:PATH?trust=1, trust_model_files); only for files you trust (docs/trust.md)")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("policies", help="list every policy name: schedulers, loaders, benchmark-only policies")
    p.add_argument("--reads", action="store_true",
                   help="also what each reads of job durations (Scheduler.reads; see docs/example-config.yaml, "
                        "knowledge)")
    p.add_argument("--params", metavar="NAME", help="print scheduler NAME's parameters: type, default, range, "
                                                    "meaning (set them with --policy-param NAME.KEY=VALUE)")
    p.set_defaults(func=cmd_policies)

    p = sub.add_parser("trace", help="trace tools")
    trace_sub = p.add_subparsers(dest="trace_command", required=True)
    g = trace_sub.add_parser("generate", help="write a synthetic trace")
    g.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(PRESETS))
    g.add_argument("--seed", type=_seed, default=0)
    g.add_argument("--out", required=True, help="trace CSV to write (written atomically)")
    g.add_argument("--overwrite", action="store_true", help="replace an existing --out file (default: refuse)")
    g.set_defaults(func=cmd_trace_generate)
    add_convert_parser(trace_sub)
    t = trace_sub.add_parser("stats", help="summary statistics of a trace CSV")
    t.add_argument("file")
    t.add_argument("--config", help="cluster config for the offered load (default: the default cluster)")
    t.add_argument("--json", action="store_true", help="print JSON instead of text")
    t.set_defaults(func=cmd_trace_stats)
    add_profile_parser(sub)
    p = sub.add_parser("plot", help="draw pictures of runs")
    plots = p.add_subparsers(dest="plot", required=True)
    g = plots.add_parser("gantt", help="the Gantt picture of a run recorded with `simulate --timeline`")
    add_gantt_arguments(g)
    g.set_defaults(func=run_gantt)
    return parser


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


@contextmanager
def _command_context(args: argparse.Namespace) -> Iterator[None]:
    """Around a command: SIGTERM raises KeyboardInterrupt as Ctrl-C does (main thread), ``--ray-retries``
    applies, and the ``--out`` of compare and sweep is locked (:func:`locked_folder`) before it is checked."""
    with ExitStack() as stack:
        stack.enter_context(sigterm_as_interrupt())
        if getattr(args, "ray_retries", None) is not None:
            stack.enter_context(ray_backend.task_retries(args.ray_retries))
        if args.command in ("compare", "sweep"):
            stack.enter_context(locked_folder(args.out))
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """The ``lyra-gym`` command: returns the exit code (0, 2 on any error, 130 on Ctrl-C)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help (0), or a usage error already reported in one line (2)
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
    try:
        with _command_context(args):
            return args.func(args)
    except KeyboardInterrupt:
        print("lyra-gym: interrupted", file=sys.stderr)
        return 130
    except RunError as err:  # a run failed (in this process or a worker): say which, then where
        print(f"lyra-gym: error: {_one_line(err)}", file=sys.stderr)
        if err.remote_traceback:
            print(f"traceback of the failed run:\n{err.remote_traceback}", file=sys.stderr)
        return 2
    except (TraceError, ConfigError, DemandFileError, ProfileError, PlanError, CompareError, OutputError,
            registry.UnknownSchedulerError, OSError, ValueError) as err:
        # ValueError: also every other bad input of the setup (a run's own errors are RunErrors);
        # OSError: a file that cannot be read or written (its message names it)
        print(f"lyra-gym: error: {_one_line(err)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
