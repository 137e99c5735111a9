"""Markdown tables from a benchmark CSV (``python -m lyra_agents.benchmark --out CSV``), for the docs.

Two tables, every cell from the CSV's rows:

- ``--kind jct`` (default): per policy, the whole-suite IQM of JCT / lyra with its 95 % interval
  (the CSV's ``aggregate`` row) and the mean JCT (s) of each scenario over its units;
- ``--kind ratio``: per policy, the whole-suite IQM [CI] and, per scenario, the IQM of JCT / lyra
  over the scenario's (trace seed, window) units with its 95 % bootstrap interval over the units
  (``iqm_ci(units=True)``, the benchmark's own statistics), and the isolated-job bound's IQM;
- ``--kind headroom``: the benchmark's headroom table (:func:`lyra_agents.headroom.headroom` over
  the registered heuristics in the CSV: the best heuristic per scenario, the per-window best, the
  isolated-job bound).

    python tools/bench_table.py docs/bench-suite-v1-all.csv
    python tools/bench_table.py docs/bench-suite-v1-all.csv docs/bench-suite-v1-generalist-seed1.csv  # + an agent
    python tools/bench_table.py docs/bench-suite-v1-all.csv --kind ratio --scenarios history,overload \\
        --policies lyra,pollux+loan,lyra-backfill
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from typing import Any, Sequence

import numpy as np

from lyra_agents.bench_output import score_cube
from lyra_agents.bench_stats import iqm, iqm_ci


def read_rows(path: str) -> list[dict[str, Any]]:
    """The CSV's rows, numbers parsed (window, trace seed, JCT and ratio columns)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        for key in ("window", "trace_seed"):
            row[key] = int(row[key]) if row.get(key) not in (None, "") else 0
        for key in ("jct_mean_s", "jct_vs_lyra", "headroom_closed", "iqm", "ci_low", "ci_high"):
            row[key] = float(row[key]) if row.get(key) not in (None, "") else math.nan
    return rows


def merged_rows(paths: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of several CSVs of one suite; every policy's rows come from the first file that has
    the policy (the reference rows, lyra and random, are the same runs in each file)."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path in paths:
        mine = read_rows(path)
        new = {r["policy"] for r in mine} - seen
        rows += [r for r in mine if r["policy"] in new]
        seen |= new
    return rows


def _fmt(x: float, digits: int = 3) -> str:
    return "" if math.isnan(x) else f"{x:.{digits}f}"


def _whole(rows: Sequence[dict[str, Any]], policy: str) -> str:
    """The CSV's whole-suite IQM of JCT / lyra with its interval (its ``aggregate`` row)."""
    agg = [r for r in rows if r["kind"] == "aggregate" and r["policy"] == policy and r["metric"] == "jct_vs_lyra"]
    return f"{_fmt(agg[0]['iqm'])} [{_fmt(agg[0]['ci_low'])}, {_fmt(agg[0]['ci_high'])}]" if agg else ""


def jct_table(rows: Sequence[dict[str, Any]], policies: Sequence[str], scenarios: Sequence[str]) -> str:
    """Policy | whole-suite IQM [CI] | mean JCT per scenario."""
    lines = ["| policy | JCT/lyra IQM [95 % CI] | " + " | ".join(scenarios) + " |",
             "|---|---|" + "---:|" * len(scenarios)]
    for policy in policies:
        whole = _whole(rows, policy)
        cells = []
        for s in scenarios:
            jct = [r["jct_mean_s"] for r in rows if r["kind"] == "window" and r["policy"] == policy
                   and r["scenario"] == s]
            cells.append(f"{np.mean(jct):,.0f}" if jct else "")
        lines.append(f"| {policy} | {whole} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio_table(rows: Sequence[dict[str, Any]], policies: Sequence[str], scenarios: Sequence[str],
                reps: int = 10_000, seed: int = 0) -> str:
    """Policy | whole suite | per scenario, IQM of JCT / lyra over units [95 % CI]; last row the
    isolated-job bound."""
    lines = ["| policy | whole suite | " + " | ".join(scenarios) + " |", "|---|---|" + "---|" * len(scenarios)]
    windows = [r for r in rows if r["kind"] == "window"]
    for policy in policies:
        cells = []
        for s in scenarios:
            cube = score_cube(windows, policy, "jct_vs_lyra", [s])
            point, low, high = iqm_ci(cube, reps, seed, units=True)
            cells.append(_fmt(point) if policy == "lyra" else f"{_fmt(point)} [{_fmt(low)}, {_fmt(high)}]")
        lines.append(f"| {policy} | {_whole(rows, policy)} | " + " | ".join(cells) + " |")
    bound = [_fmt(iqm([r["jct_vs_lyra"] for r in rows if r["kind"] == "bound" and r["scenario"] == s]))
             for s in scenarios]
    lines.append("| isolated-job bound (unreachable) | | " + " | ".join(bound) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+", help="benchmark CSVs of one suite (a policy's rows are taken from the "
                                               "first file that has them: lyra and random repeat in each run)")
    parser.add_argument("--kind", choices=("jct", "ratio", "headroom"), default="jct")
    parser.add_argument("--policies", default=None, help="comma-separated (default: every policy, CSV order)")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: every scenario, CSV order)")
    args = parser.parse_args(argv)
    rows = merged_rows(args.csv)
    windows = [r for r in rows if r["kind"] == "window"]
    policies = args.policies.split(",") if args.policies else list(dict.fromkeys(r["policy"] for r in windows))
    scenarios = args.scenarios.split(",") if args.scenarios else list(dict.fromkeys(r["scenario"] for r in windows))
    for what, asked, present in (("policy", policies, {r["policy"] for r in windows}),
                                 ("scenario", scenarios, {r["scenario"] for r in windows})):
        missing = [name for name in asked if name not in present]
        if missing:
            parser.error(f"--{what.replace('policy', 'policie')}s: {missing[0]!r} has no window rows in "
                         f"{', '.join(args.csv)} (there: {', '.join(sorted(present))})")
    if args.kind == "headroom":
        print(headroom_markdown(rows))
    else:
        print(jct_table(rows, policies, scenarios) if args.kind == "jct" else ratio_table(rows, policies, scenarios))
    return 0


def headroom_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The benchmark's headroom table of the CSV's rows, over the registered heuristics in it."""
    from lyra_agents.headroom import headroom, headroom_table
    from lyra_gym.sim import scheduler as registry

    known = set(registry.available())
    heuristics = [p for p in dict.fromkeys(r["policy"] for r in rows if r["kind"] == "window") if p in known]
    per_window = [r for r in rows if r["kind"] != "aggregate"]  # aggregates have no scenario
    return headroom_table(headroom(per_window, heuristics))


if __name__ == "__main__":
    sys.exit(main())
