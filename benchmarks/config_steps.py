"""``env.step`` in every shipped training configuration, per CPU second (docs/speed.md's table).

    python benchmarks/config_steps.py --out docs/config-steps.csv     # measure (a few minutes)
    python benchmarks/config_steps.py --table docs/config-steps.csv   # the Markdown table

The envs of each ``agents/configs/*.yaml`` (``quick`` overlays left out) as training builds them
(``benchmarks/asv_bench/training.py``'s ``config_envs``: env id, cluster file, knowledge mode, warm
start, learner extras, the expert rule; a generalist's scenario envs stepped round-robin), stepped
``--steps`` times after ``--warmup`` untimed steps, with random valid actions and with the config's
imitation expert (``expert_action()``). Process time inside ``env.step`` only (resets not counted):
on a shared machine the wall clock counts other processes. The asv suite's ``training.ConfigStep``
times the same steps by the wall clock.

CSV columns: label, config, env_id, envs (scenario envs stepped), policy, steps, cpu_s, steps_per_cpu_s.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from lyra_gym.outputs import atomic_write_csv

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("label", "config", "env_id", "envs", "policy", "steps", "cpu_s", "steps_per_cpu_s")
POLICIES = ("random", "expert")


def cpu_steps(envs: list, policy: str, steps: int, warmup: int, seed: int = 0) -> float:
    """CPU seconds inside ``env.step`` over ``steps`` steps shared round-robin over ``envs``, after
    ``warmup`` untimed ones (a finished episode is reset, untimed)."""
    from benchmarks.asv_bench.training import choose

    rng = np.random.default_rng(seed)
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    cpu = 0.0
    for n in range(warmup + steps):
        env = envs[n % len(envs)]
        action = choose(env, policy, rng)
        start = time.process_time()
        _, _, terminated, truncated, _ = env.step(action)
        if n >= warmup:
            cpu += time.process_time() - start
        if terminated or truncated:
            env.reset()
    return cpu


def measure(label: str, steps: int, warmup: int, names: list[str]) -> list[dict]:
    from benchmarks.asv_bench.training import config_envs, train_config

    rows = []
    for name in names:
        envs = config_envs(name)
        for policy in POLICIES:
            cpu = cpu_steps(envs, policy, steps, warmup)
            rows.append(dict(label=label, config=name, env_id=train_config(name).env_id, envs=len(envs),
                             policy=policy, steps=steps, cpu_s=round(cpu, 2),
                             steps_per_cpu_s=round(steps / max(cpu, 1e-9))))
            print(rows[-1], file=sys.stderr)
        for env in envs:
            env.close()
    return rows


def table(rows: list[dict]) -> str:
    """One line per (label, config): its env id, scenario envs, and steps per CPU-s by policy."""
    lines = ["| label | configuration | env | envs | random | expert |", "|---|---|---|---:|---:|---:|"]
    seen: dict[tuple[str, str], dict[str, dict]] = {}
    for r in rows:
        seen.setdefault((r["label"], r["config"]), {})[r["policy"]] = r
    for (label, config), by_policy in seen.items():
        first = next(iter(by_policy.values()))
        rates = [f"{int(by_policy[p]['steps_per_cpu_s']):,}" if p in by_policy else "" for p in POLICIES]
        lines.append(f"| {label} | `{config}` | {first['env_id'].split('/')[-1]} | {first['envs']} | "
                     f"{rates[0]} | {rates[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.asv_bench.training import CONFIGS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="new", help="the rows' label (e.g. a commit)")
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per configuration and policy")
    parser.add_argument("--warmup", type=int, default=200, help="untimed steps before them")
    parser.add_argument("--configs", nargs="+", default=CONFIGS, choices=CONFIGS, metavar="NAME",
                        help="configuration stems (default: every shipped one)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--out", type=Path, help="write the CSV here (replacing it)")
    out.add_argument("--append", type=Path, help="append the rows to this CSV (header if new)")
    out.add_argument("--table", type=Path, help="print the Markdown table of this CSV and exit")
    args = parser.parse_args(argv)
    if args.table:
        print(table(list(csv.DictReader(args.table.open(newline="")))))
        return 0
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    rows = measure(args.label, args.steps, args.warmup, list(args.configs))
    path = args.out or args.append
    if path is None:
        print(table(rows))
        return 0
    kept = list(csv.DictReader(path.open(newline=""))) if args.append and path.exists() else []
    atomic_write_csv(path, COLUMNS, kept + rows)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # benchmarks.asv_bench, run as a script from anywhere
    np.seterr(all="ignore")
    sys.exit(main())
