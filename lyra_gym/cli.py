"""The ``lyra-gym`` command line: simulate, compare, policies, trace generate."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from lyra_gym import scheduler as registry
from lyra_gym.config import ConfigError, SimConfig, load_config
from lyra_gym.demand import DemandFileError
from lyra_gym.plan import PlanError
from lyra_gym.profiles import ProfileError
from lyra_gym.simulate import SimResult, load_profile_set, simulate, write_result
from lyra_gym.trace import JobSpec, TraceError, load_trace, write_trace
from lyra_gym.tracegen import PRESETS, generate_trace

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
    """Mean of every numeric metric over runs (None where any run has None)."""
    row: dict[str, Any] = {"policy": results[0].policy, "seeds": len(results)}
    for key, value in results[0].metrics.items():
        values = [r.metrics[key] for r in results]
        if any(v is None for v in values) or not isinstance(value, (int, float)):
            row[key] = None
        else:
            row[key] = sum(values) / len(values)
    return row


def cmd_simulate(args: argparse.Namespace) -> int:
    config = _config(args.config)
    result = simulate(_load_jobs(args.trace, config), args.policy, config, seed=args.seed, progress=True)
    print(format_table([{"policy": result.policy, **result.metrics}], TABLE_KEYS))
    out = write_result(result, args.out)
    print(f"wrote {out / 'metrics.json'} and {out / 'jobs.csv'}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    for p in policies:  # fail fast on a typo before any run
        if ":" not in p and p not in registry.available():
            raise registry.UnknownSchedulerError(f"unknown scheduler {p!r} (available: {', '.join(registry.available())})")
    config, out = _config(args.config), Path(args.out)
    jobs = _load_jobs(args.trace, config)
    rows = []
    with tqdm(total=len(policies) * len(seeds), unit="run", delay=2.0, leave=False) as bar:
        for policy in policies:
            results = []
            for seed in seeds:
                result = simulate(jobs, policy, config, seed=seed)
                write_result(result, out / policy / f"seed{seed}")
                results.append(result)
                bar.update(1)
            rows.append(mean_over_seeds(results))
    print(format_table(rows, TABLE_KEYS))
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    with open(out / "summary.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
    print(f"wrote {out / 'summary.csv'} and {out / 'summary.json'}")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lyra-gym", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("simulate", help="run one policy over a trace")
    p.add_argument("--policy", required=True, help="scheduler name (see `lyra-gym policies`)")
    p.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace CSV (default {DEFAULT_TRACE})")
    p.add_argument("--config", help="YAML or TOML file mapping onto SimConfig")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/simulate", help="output directory")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("compare", help="run several policies over the same trace and seeds")
    p.add_argument("--policies", default="fifo,sjf", help="comma-separated scheduler names")
    p.add_argument("--trace", default=DEFAULT_TRACE, help=f"trace CSV (default {DEFAULT_TRACE})")
    p.add_argument("--config", help="YAML or TOML file mapping onto SimConfig")
    p.add_argument("--seeds", default="0", help="comma-separated seeds, e.g. 0,1,2")
    p.add_argument("--out", default="results/compare", help="output directory")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("policies", help="list every scheduler name")
    p.set_defaults(func=cmd_policies)

    p = sub.add_parser("trace", help="trace tools")
    trace_sub = p.add_subparsers(dest="trace_command", required=True)
    g = trace_sub.add_parser("generate", help="write a synthetic trace")
    g.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(PRESETS))
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True)
    g.set_defaults(func=cmd_trace_generate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (TraceError, ConfigError, DemandFileError, ProfileError, PlanError,
            registry.UnknownSchedulerError, FileNotFoundError) as err:
        print(f"lyra-gym: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
