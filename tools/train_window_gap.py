"""Is a learned agent as far from its expert on the windows it trained on as on held-out ones?

    python tools/train_window_gap.py RUN_OR_MODEL --scenario history --train-windows 8 --out gap.csv
    python tools/train_window_gap.py --table gap.csv

On one suite scenario of the run's config and the run's own ``trace_seeds`` (the traces its
episodes came from; default: the config's ``trace_seeds``, else its ``trace_seed``), the agent
(deterministic) and its expert (:func:`lyra_agents.paired.expert_name`) each play

- ``--train-windows`` windows drawn without replacement from each trace's *train* part (the
  windows training episodes start on: :attr:`~lyra_gym.envs.windows.WindowSampler.train_starts`;
  starts and simulation seeds drawn by ``numpy.random.default_rng([seed, trace_seed])``), and
- the scenario's first ``--test-windows`` test windows of the same traces,

paired unit by unit as ``python -m lyra_agents.evaluate --suite`` pairs them. An agent that fits
what its training traces happened to hold does better on the train rows than on the test rows;
one whose labels mislead it is as bad on both. CSV rows: ``split, trace_seed, window, start_s,
jct_policy_s, jct_expert_s, ratio``; ``--table``: per split, the units and the IQM and mean of the
ratio with 95 % bootstrap intervals (:func:`lyra_agents.paired.paired_interval`, seed 0).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

COLUMNS = ("split", "trace_seed", "window", "start_s", "jct_policy_s", "jct_expert_s", "ratio")


def train_windows(sampler: Any, count: int, seed: int, trace_seed: int) -> list[Any]:
    """``count`` distinct train windows of ``sampler`` (a ``WindowSampler``), by start, seeded."""
    from lyra_gym.envs.windows import Window

    starts = sampler.train_starts
    if not 1 <= count <= len(starts):
        raise ValueError(f"--train-windows: must be in [1, {len(starts)}] (the trace's train windows), got {count}")
    rng = np.random.default_rng([seed, trace_seed])
    chosen = np.sort(rng.choice(len(starts), size=count, replace=False))
    seeds = rng.integers(2**31, size=count)
    return [Window("train", int(i), float(starts[i]), sampler.length_s, int(s), sampler.warmup_s)
            for i, s in zip(chosen, seeds)]


def gap_rows(model_path: str, scenario_name: str, trace_seeds: Sequence[int] | None, count: int, test: int,
             seed: int) -> list[dict[str, Any]]:
    """The CSV rows (module docstring) of the agent at ``model_path`` on ``scenario_name``."""
    from lyra_agents import paired
    from lyra_agents.policy_scheduler import load_policy_scheduler
    from lyra_agents.suite import get_suite

    agent = load_policy_scheduler(model_path, name="policy")
    cfg = agent.config
    seeds = tuple(trace_seeds if trace_seeds is not None else (cfg.trace_seeds or [cfg.trace_seed]))
    scenario = get_suite(cfg.suite).get(scenario_name)
    scenario = paired.Protocol(trace_seeds=seeds, windows=test).scenario(scenario)
    factories = {"policy": lambda: agent, "expert": paired.reference_factory(paired.EXPERT, cfg)}
    starts: dict[tuple[str, int, int], float] = {}  # (split, trace seed, window index) -> start (s)

    def recorded(split: str, trace_seed: int, windows: list[Any]) -> list[Any]:
        starts.update({(split, trace_seed, w.index): w.start_s for w in windows})
        return windows

    by_split = {
        "train": paired.run_units(factories, scenario, windows_of=lambda ts, trace: recorded(
            "train", ts, train_windows(scenario.sampler(trace), count, seed, ts))),
        "test": paired.run_units(factories, scenario, windows_of=lambda ts, trace: recorded(
            "test", ts, scenario.test_windows(trace))),
    }
    rows = []
    for split, jct in by_split.items():
        for unit, policy in sorted(jct["policy"].items()):
            expert = jct["expert"][unit]
            rows.append({"split": split, "trace_seed": unit[1], "window": unit[2],
                         "start_s": starts[split, unit[1], unit[2]], "jct_policy_s": round(policy, 3),
                         "jct_expert_s": round(expert, 3), "ratio": round(policy / expert, 6)})
    return rows


def table(path: Path) -> str:
    """The Markdown table of a CSV this tool wrote: per split, IQM and mean of the ratio."""
    from lyra_agents.paired import interval_cells

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    lines = ["| windows | units | IQM of policy / expert [95 % CI] | mean [95 % CI] |", "|---|---:|---:|---:|"]
    for split in ("train", "test"):
        ratios = np.array([float(r["ratio"]) for r in rows if r["split"] == split])
        if len(ratios) == 0:
            continue
        cells = interval_cells(ratios)
        lines.append(f"| {split} | {len(ratios)} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", help="a run folder, its model.zip or a checkpoint zip")
    parser.add_argument("--scenario", default="history", help="a suite scenario (default history)")
    parser.add_argument("--trace-seeds", help="comma-separated (default: the run's trace_seeds)")
    parser.add_argument("--train-windows", type=int, default=8, help="train windows per trace seed (default 8)")
    parser.add_argument("--test-windows", type=int, default=3, help="test windows per trace seed (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="the train windows' draw (default 0)")
    parser.add_argument("--out", type=Path, help="CSV to write")
    parser.add_argument("--table", type=Path, help="print the Markdown table of this CSV and exit")
    args = parser.parse_args(argv)
    if args.table is not None:
        print(table(args.table))
        return 0
    if args.path is None or args.out is None:
        parser.error("a run or model path and --out are needed (or --table CSV)")
    try:
        seeds = None if args.trace_seeds is None else [int(s) for s in args.trace_seeds.split(",")]
    except ValueError:
        parser.error(f"--trace-seeds: comma-separated whole numbers, got {args.trace_seeds!r}")
    try:
        rows = gap_rows(args.path, args.scenario, seeds, args.train_windows, args.test_windows, args.seed)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        parser.error(str(exc))
    from lyra_gym.outputs import atomic_write_csv

    atomic_write_csv(args.out, COLUMNS, rows)
    print(table(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
