"""The ``lyra-gym`` command line: simulate, compare, sweep, policies, trace generate.

``sweep`` runs a YAML grid of policies, traces, trace and engine parameters and
seeds (:mod:`lyra_gym.sweep`). ``compare`` and ``sweep`` take ``--backend ray``
to run each simulation as a Ray task (:mod:`lyra_gym.ray_backend`).

``compare`` runs every policy on every seed (``--jobs N`` worker processes,
identical results), prints mean ± 95 % CI half-width per metric, and writes
``summary.csv``/``summary.json``, ``compare.json`` (what was run), one folder per
run, four PNG plots (:mod:`lyra_gym.report`) and, with ``--tensorboard DIR``,
TensorBoard scalars (:mod:`lyra_gym.tensorboard_log`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from lyra_gym import scheduler as registry
from lyra_gym.compare import BACKENDS, CompareError, RunError, check_policies, parse_policy_params, run_dirname, run_grid
from lyra_gym.config import ConfigError, SimConfig, load_config
from lyra_gym.demand import DemandFileError
from lyra_gym.plan import PlanError
from lyra_gym.profiles import ProfileError
from lyra_gym.report import format_ci_table, summarize_runs, write_plots, write_summary
from lyra_gym.simulate import SimResult, load_profile_set, simulate, write_result
from lyra_gym.trace import JobSpec, TraceError, load_trace, write_trace
from lyra_gym.tracegen import PRESETS, generate_trace
from lyra_gym.tracestats import format_stats, trace_stats
from lyra_gym.collector.cli import add_profile_parser
from lyra_gym.realtraces import add_convert_parser

DEFAULT_TRACE = "traces/default.csv"
DEFAULT_PRESET, DEFAULT_PRESET_SEED = "small-1d", 0  # traces/default.csv is this preset at this seed
TABLE_KEYS = (
    "jobs_finished", "jct_mean_s", "jct_p95_s", "queue_mean_s", "queue_p95_s", "gpu_usage_training",
    "gpu_usage_overall", "preemptions", "scale_events", "servers_borrowed", "inference_violations", "makespan_s",
)


def _load_jobs(path: str, config: SimConfig) -> list[JobSpec]:
    """The trace at ``path``, model keys checked against the run's profiles.

    The default path falls back to regenerating the shipped trace (identical
    content) so the main job runs from an installed package too.
    """
    if path == DEFAULT_TRACE and not Path(path).exists():
        return generate_trace(DEFAULT_PRESET, DEFAULT_PRESET_SEED)
    return load_trace(path, known_models=load_profile_set(config).models)


def _config(path: str | None) -> SimConfig:
    return load_config(path) if path else SimConfig()


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)


def format_table(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> str:
    """Aligned text table, one row per dict, first column ``policy``."""
    header = ["policy", *keys]
    body = [[str(r.get("policy", "")), *(_fmt(r.get(k)) for k in keys)] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def mean_over_seeds(results: Sequence[SimResult]) -> dict[str, Any]:
    """Summary row of one policy's runs: mean of every metric over seeds and its 95 % CI
    half-width (``<metric>_ci95``; None with one seed). See :func:`lyra_gym.report.summarize_runs`."""
    return summarize_runs(results)


def cmd_simulate(args: argparse.Namespace) -> int:
    params = parse_policy_params(args.policy_param, [args.policy])
    check_policies([args.policy], params)
    params = params[args.policy]
    config = _config(args.config)
    result = simulate(_load_jobs(args.trace, config), args.policy, config, seed=args.seed, policy_params=params,
                      progress=True, record_timeline=args.timeline)
    print(format_table([{"policy": result.policy, **result.metrics}], TABLE_KEYS))
    out = write_result(result, args.out)
    extra = " and timeline.csv" if args.timeline else ""
    print(f"wrote {out / 'metrics.json'}, {out / 'jobs.csv'}{extra}")
    return 0


def _csv_list(text: str, what: str) -> list[str]:
    items = [p.strip() for p in text.split(",") if p.strip()]
    if not items:
        raise CompareError(f"{what}: empty list")
    return items


def cmd_compare(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    policies = _csv_list(args.policies, "--policies")
    try:
        seeds = [int(s) for s in _csv_list(args.seeds, "--seeds")]
    except ValueError:
        raise CompareError(f"--seeds {args.seeds!r}: expected comma-separated integers, e.g. 0,1,2") from None
    if args.jobs < 0:
        raise CompareError(f"--jobs {args.jobs}: must be >= 0 (0 = one per CPU core)")
    n_jobs = args.jobs or os.cpu_count() or 1
    params = parse_policy_params(args.policy_param, policies)
    check_policies(policies, params)  # fail fast on a typo before any run
    config, out = _config(args.config), Path(args.out)
    jobs = _load_jobs(args.trace, config)
    plots = not args.no_plots
    with tqdm(total=len(policies) * len(seeds), unit="run", delay=2.0, leave=False) as bar:
        results = run_grid(jobs, config, policies, seeds, params, out, n_jobs,
                           record_timeline=plots or args.tensorboard is not None, on_done=lambda _: bar.update(1),
                           backend=args.backend, address=args.address)
    rows = [summarize_runs(results[p]) for p in policies]
    print(format_ci_table(rows, TABLE_KEYS))
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "trace": args.trace, "config": args.config, "jobs": len(jobs), "policies": policies, "seeds": seeds,
        "policy_params": {p: v for p, v in params.items() if v},
        "run_folders": {p: run_dirname(p) for p in policies},
    }
    (out / "compare.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    csv_path, json_path = write_summary(rows, out)
    print(f"wrote {csv_path} and {json_path}")
    if plots:
        written = write_plots(results, out)
        print(f"wrote {', '.join(p.name for p in written)} to {out}")
    if args.tensorboard is not None:
        from lyra_gym.tensorboard_log import write_tensorboard

        write_tensorboard(args.tensorboard, rows, results)
        print(f"wrote TensorBoard runs to {args.tensorboard} (tensorboard --logdir {args.tensorboard})")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from lyra_gym.sweep import expand, load_grid, run_sweep, summary_table

    if args.jobs < 0:
        raise CompareError(f"--jobs {args.jobs}: must be >= 0 (0 = one per CPU core)")
    n_runs = len(expand(load_grid(args.file)))  # checks the whole file before any run
    with tqdm(total=n_runs, unit="run", delay=2.0, leave=False) as bar:
        grid, rows, written = run_sweep(args.file, args.out, args.jobs or os.cpu_count() or 1, args.backend,
                                        args.address, plots=not args.no_plots, on_done=lambda _: bar.update(1))
    print(summary_table(grid, rows))
    print(f"{len(rows)} runs; wrote {', '.join(p.name for p in written)} to {args.out}")
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    for name in registry.available():
        print(name)
    return 0


def cmd_trace_generate(args: argparse.Namespace) -> int:
    jobs = generate_trace(args.preset, args.seed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_trace(jobs, args.out)
    print(f"wrote {len(jobs)} jobs to {args.out}")
    return 0


def _add_policy_param(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy-param", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="scheduler parameter, repeatable; VALUE is a YAML scalar "
                        "(e.g. lyra.reclaim_rule=random, fifo.backfill=true)")


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="where the runs go: local (this process or --jobs worker processes) or ray "
                        "(one Ray task per run; needs pip install lyra-gym[ray]); results are identical")
    p.add_argument("--address", metavar="ADDR",
                   help="with --backend ray: the Ray cluster to connect to (e.g. auto, ray://host:10001); "
                        "default: start a local Ray instance with --jobs CPUs")


def cmd_trace_stats(args: argparse.Namespace) -> int:
    stats = trace_stats(load_trace(args.file), _config(args.config).cluster.training_gpus)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lyra-gym", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("simulate", help="run one policy over a trace")
    p.add_argument("--policy", required=True, help="scheduler name (see `lyra-gym policies`)")
    p.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace CSV (default {DEFAULT_TRACE})")
    p.add_argument("--config", help="YAML or TOML file mapping onto SimConfig")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/simulate", help="output directory")
    _add_policy_param(p)
    p.add_argument("--timeline", action="store_true",
                   help="record the cluster after every decision and write timeline.csv")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("compare", help="run several policies over the same trace and seeds")
    p.add_argument("--policies", default="fifo,sjf", help="comma-separated scheduler names")
    p.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace CSV (default {DEFAULT_TRACE})")
    p.add_argument("--config", help="YAML or TOML file mapping onto SimConfig")
    p.add_argument("--seeds", default="0", help="comma-separated seeds, e.g. 0,1,2")
    p.add_argument("--out", default="results/compare", help="output directory")
    _add_policy_param(p)
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes for the (policy, seed) runs (default 1: in this process; "
                        "0: one per CPU core); results are identical")
    _add_backend(p)
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also write TensorBoard scalars: one run per policy under DIR")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("sweep", help="run a grid of policies x traces x parameters x seeds from a YAML file")
    p.add_argument("file", metavar="CONFIG.yaml", help="the sweep grid (see lyra_gym/sweep.py, docs/sweep-elastic-share.yaml)")
    p.add_argument("--out", default="results/sweep", help="output directory (runs.csv, sweep_<param>.png)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="worker processes, or Ray CPUs of a local instance (default 1; 0: one per CPU core)")
    _add_backend(p)
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("policies", help="list every scheduler name")
    p.set_defaults(func=cmd_policies)

    p = sub.add_parser("trace", help="trace tools")
    trace_sub = p.add_subparsers(dest="trace_command", required=True)
    g = trace_sub.add_parser("generate", help="write a synthetic trace")
    g.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(PRESETS))
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True)
    g.set_defaults(func=cmd_trace_generate)
    add_convert_parser(trace_sub)
    t = trace_sub.add_parser("stats", help="summary statistics of a trace CSV")
    t.add_argument("file")
    t.add_argument("--config", help="cluster config for the offered load (default: the default cluster)")
    t.add_argument("--json", action="store_true", help="print JSON instead of text")
    t.set_defaults(func=cmd_trace_stats)
    add_profile_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (TraceError, ConfigError, DemandFileError, ProfileError, PlanError, CompareError,
            registry.UnknownSchedulerError, FileNotFoundError) as err:
        print(f"lyra-gym: error: {err}", file=sys.stderr)
        return 2
    except RunError as err:  # a run failed (in this process or a worker): say which, then where
        print(f"lyra-gym: error: {err}", file=sys.stderr)
        print(f"traceback of the failed run:\n{err.remote_traceback}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
