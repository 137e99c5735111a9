"""Where the generalist's ``env.step`` goes: cProfile shares of named parts (docs/speed.md).

    python benchmarks/step_profile.py --out docs/step-profile.csv     # profile (about a minute)
    python benchmarks/step_profile.py --table docs/step-profile.csv   # the Markdown table

``--steps`` calls of ``env.step`` in the envs of ``cluster-generalist.yaml`` as training builds them
(``benchmarks/asv_bench/training.py``'s ``config_envs``), round-robin over its scenarios with random
valid actions after ``--warmup`` unprofiled steps. Each part's share is its cumulative time over the
profiled total (parts nest: Lyra's phases are inside ``decide_guided``), with its calls per step.
The profiler slows small calls more than large ones, so shares are a guide, not a timing.

CSV columns: part, function (file:name), share (of the profiled total), calls_per_step, steps.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import pstats
import sys
from pathlib import Path

import numpy as np

from lyra_gym.outputs import atomic_write_csv

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("part", "function", "share", "calls_per_step", "steps")
#: (part, file name, function name), in the table's order; a leading "- " marks a part inside the one above
PARTS = (
    ("Lyra's decision (`decide_guided`)", "lyra.py", "decide_guided"),
    ("- phase 2, rebalance", "lyra_rebalance.py", "rebalance"),
    ("- - the knapsack's rows and choice", "lyra_rebalance.py", "knapsack_choice"),
    ("- phase 1, admission", "lyra_admission.py", "admit"),
    ("- - the admission line of queued jobs", "lyra_rates.py", "queued_line"),
    ("- the release timeline", "lyra_state.py", "timeline"),
    ("the engine's run to the next decision", "episode.py", "run"),
    ("observation", "cluster_env.py", "_observe"),
    ("- job rows", "observation.py", "_job_rows"),
    ("learner extras", "learner_extras.py", "compute"),
    ("the knowledge model's believed work", "knowledge.py", "total_work"),
    ("action decoding and masks", "actions.py", "decode"),
)


def profile(steps: int, warmup: int, seed: int = 0) -> tuple[pstats.Stats, float]:
    """(statistics, profiled seconds) of ``steps`` generalist ``env.step`` calls."""
    from benchmarks.asv_bench.training import GENERALIST, choose, config_envs

    envs = config_envs(GENERALIST)
    rng = np.random.default_rng(seed)
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    profiler = cProfile.Profile()
    for n in range(warmup + steps):
        env = envs[n % len(envs)]
        action = choose(env, "random", rng)
        if n >= warmup:
            profiler.enable()
        _, _, terminated, truncated, _ = env.step(action)
        profiler.disable()
        if terminated or truncated:
            env.reset()
    stats = pstats.Stats(profiler)
    return stats, stats.total_tt  # type: ignore[attr-defined]


def shares(stats: pstats.Stats, total: float, steps: int) -> list[dict]:
    """One row per part of :data:`PARTS` (a part the profile never entered: share 0)."""
    table = stats.stats  # type: ignore[attr-defined]  # (file, line, name) -> (cc, nc, tt, ct, callers)
    rows = []
    for part, filename, name in PARTS:
        hits = [(nc, ct) for (path, _, func), (_, nc, _, ct, _) in table.items()
                if func == name and Path(path).name == filename]
        calls, cumulative = sum(h[0] for h in hits), sum(h[1] for h in hits)
        rows.append(dict(part=part, function=f"{filename}:{name}", share=round(cumulative / total, 3),
                         calls_per_step=round(calls / steps, 2), steps=steps))
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| part | function | share | calls per step |", "|---|---|---:|---:|"]
    for r in rows:
        depth = len(r["part"]) - len(r["part"].lstrip("- "))
        label = "&nbsp;&nbsp;" * (depth // 2) + r["part"].lstrip("- ")
        share, calls = float(r["share"]) * 100, float(r["calls_per_step"])
        lines.append(f"| {label} | `{r['function']}` | {share:.0f} % | {calls:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="profiled env.step calls")
    parser.add_argument("--warmup", type=int, default=300, help="unprofiled steps before them")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--out", type=Path, help="write the CSV here (replacing it)")
    out.add_argument("--table", type=Path, help="print the Markdown table of this CSV and exit")
    args = parser.parse_args(argv)
    if args.table:
        print(table(list(csv.DictReader(args.table.open(newline="")))))
        return 0
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    stats, total = profile(args.steps, args.warmup)
    rows = shares(stats, total, args.steps)
    if args.out is None:
        print(table(rows))
        return 0
    atomic_write_csv(args.out, COLUMNS, rows)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # benchmarks.asv_bench, run as a script from anywhere
    np.seterr(all="ignore")
    sys.exit(main())
