"""Where learning stands against issue 38's targets: one Markdown table from the committed results.

    python tools/learning_status.py          # README and docs/benchmark.md print it (docs_numbers blocks)

One row per target, what the committed files measure, and whether it is met. Nothing is run: the
rows read

- paired evaluations (``python -m lyra_agents.evaluate ... --json``, ``docs/learned-*.json``): an
  agent is better than the best heuristic of a scenario when its interval is below 1 against every
  one of :data:`HEURISTICS` (so against the best, whichever it is; a scenario where a file lacks one
  of them is not counted), and significantly worse than ``lyra`` when that interval is above 1;
  PPO adds something when a run's ``policy`` against its ``imitation-start`` is below 1 (each
  95 % percentile-bootstrap interval of the IQM ratio over the paired units, as
  ``tools/paired_table.py``);
- the fork probes of the ``-v2`` training configurations (``docs/fork-probe-cluster-v2-*.csv``);
- the throughput table (``docs/training-throughput.csv``, its last row of each kind).

The agents and files are :data:`AGENTS`; a new result is a new file there (or a new
``learned-*.json`` with an ``imitation-start``), and the table follows.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Sequence

from lyra_agents.fork_probe import read_csv as read_forks
from lyra_agents.paired import SuiteUnits, paired_interval, read_units, unit_ratios

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: the heuristics an agent must beat in a scenario (the best of suite v1's are among them)
HEURISTICS = ("lyra", "lyra-backfill", "pollux+loan")
#: (label, ((evaluate JSON under docs/, the agent's policy name in it), ...)): the first file with
#: both the agent and a reference gives that reference's ratio
AGENTS = (
    ("`rule:pretrained/preempt-rule-contention` (policy search, 6 parameters)",
     (("learned-preempt-rule-contention-part1.json", "policy"),
      ("learned-preempt-rule-contention-part2.json", "policy"))),
    ("`model:pretrained/cluster-v2-slots-rule-9` (network, imitation of that rule on nine scenarios)",
     tuple((f"learned-cluster-v2-slots-rule-9-part{i}.json", "policy") for i in (1, 2, 3))),
    ("`model:pretrained/cluster-v2-slots-rule-9-dagger` (the same, with two DAgger rounds)",
     tuple((f"learned-cluster-v2-slots-rule-9-dagger-part{i}.json", "policy") for i in (1, 2, 3, 4))),
)
ENV_STEP_TARGET, TRAIN_TARGET, MILLION_TARGET_S, NO_EFFECT_TARGET, HALF_WIDTH_TARGET = 2000, 1000, 1800.0, 0.25, 0.02


def interval(sources: Sequence[tuple[SuiteUnits, str]], scenario: str,
             reference: str) -> tuple[float, float, float] | None:
    """(IQM, low, high) of agent / ``reference`` in ``scenario`` from the first source with both."""
    for units, agent in sources:
        policies = units.get(scenario, {})
        if agent in policies and reference in policies:
            return paired_interval(unit_ratios(policies[agent], policies[reference]))
    return None


def agent_row(label: str, sources: Sequence[tuple[SuiteUnits, str]]) -> tuple[str, list[str], list[str], int]:
    """(label, "scenario point" where better than every heuristic, where worse than lyra, scenarios)."""
    scenarios = list(dict.fromkeys(s for units, _ in sources for s in units))
    better, worse = [], []
    for scenario in scenarios:
        cells = [interval(sources, scenario, h) for h in HEURISTICS]
        if all(c is not None and c[2] < 1 for c in cells):
            toughest = max(c[0] for c in cells if c is not None)
            better.append(f"`{scenario}` {toughest:.3f}")
        lyra = cells[0]
        if lyra is not None and lyra[1] > 1:
            worse.append(f"`{scenario}` {lyra[0]:.3f}")
    return label, better, worse, len(scenarios)


def ppo_runs(docs: Path) -> list[tuple[str, list[str], list[str], float | None]]:
    """Per committed evaluation with an imitation start: (run, scenarios better than the start,
    worse, the half-width of the ratio on ``history`` or None)."""
    out = []
    for path in sorted(docs.glob("learned-*.json")):
        units = read_units(path)
        better, worse, half = [], [], None
        for scenario, policies in units.items():
            if "policy" not in policies or "imitation-start" not in policies:
                continue
            point, low, high = paired_interval(unit_ratios(policies["policy"], policies["imitation-start"]))
            if high < 1:
                better.append(f"`{scenario}` {point:.3f}")
            elif low > 1:
                worse.append(scenario)
            if scenario == "history":
                half = (high - low) / 2
        if any("imitation-start" in p for p in units.values()):
            out.append((path.stem.removeprefix("learned-"), better, worse, half))
    return out


def last_rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """The last row of each (what, env id) of the throughput CSV."""
    with open(path, newline="") as handle:
        return {(row["what"], row["env_id"]): row for row in csv.DictReader(handle)}


def mark(met: bool) -> str:
    return "yes" if met else "**no**"


def table(docs: Path = DOCS) -> str:
    lines = ["| target (issue 38) | measured (committed results) | met |", "|---|---|---|"]
    agents = [agent_row(label, [(read_units(docs / name), agent) for name, agent in files]) for label, files in AGENTS]
    for label, better, worse, count in agents:
        lines.append(f"| better than the best heuristic on >= 2 suite v1 scenarios, nowhere significantly worse "
                     f"than `lyra` | {label}: better on {', '.join(better) or 'none'} (against the best); "
                     f"worse than `lyra` on {', '.join(worse) or 'none'} of {count} | "
                     f"{mark(len(better) >= 2 and not worse)} |")
    runs = ppo_runs(docs)
    gained = [(run, b) for run, b, _, _ in runs if b]
    most = max((len(b) for _, b in gained), default=0)
    worse_runs = sum(1 for _, _, w, _ in runs if w)
    listed = "; ".join(f"`{run}`: {', '.join(b)}" for run, b in gained) or "none"
    lines.append(f"| PPO better than its imitation start on >= 2 scenarios | {len(runs)} runs; better on one scenario "
                 f"or more: {listed}; worse on one or more: {worse_runs} | {mark(most >= 2)} |")
    halves = sorted((h, run) for run, *_, h in runs if h is not None)
    if halves:
        widest, run_name = halves[-1]
        lines.append(f"| paired change against the imitation start: 95 % half-width <= 2 points on `history` | "
                     f"{len(halves)} runs, median {halves[len(halves) // 2][0] * 100:.1f} points, widest "
                     f"{widest * 100:.1f} (`{run_name}`) | {mark(widest <= HALF_WIDTH_TARGET)} |")
    probes = {path.stem.removeprefix("fork-probe-"): read_forks(path)
              for path in sorted(docs.glob("fork-probe-cluster-v2-*.csv"))}
    shares = {name: sum(f.delta_return == 0.0 for f in forks) / len(forks) for name, forks in probes.items() if forks}
    if shares:
        worst = max(shares, key=shares.__getitem__)
        lines.append(f"| fork probe: decisions with no effect < 25 % (`-v2`) | {len(shares)} probes, "
                     f"at most {shares[worst]:.0%} (`{worst}`) | {mark(shares[worst] < NO_EFFECT_TARGET)} |")
    rows = last_rows(docs / "training-throughput.csv")
    step = rows.get(("env.step", "LyraGym/Cluster-v1"))
    if step is not None:
        rate = int(step["steps_per_cpu_s"])
        lines.append(f"| `env.step` >= 2,000 per CPU-s (the generalist's envs) | {rate:,} ({step['label']}) | "
                     f"{mark(rate >= ENV_STEP_TARGET)} |")
    run = next((rows[k] for k in reversed(list(rows)) if k[0].startswith("train.py run")), None)
    if run is not None:
        rate = int(run["steps_per_cpu_s"])
        lines.append(f"| `train.py` >= 1,000 env steps per CPU-s | {rate:,} ({run['label']}) | "
                     f"{mark(rate >= TRAIN_TARGET)} |")
        if int(run["steps"]) >= 1_000_000:
            wall = float(run["wall_s"]) * 1_000_000 / int(run["steps"])
            lines.append(f"| 10^6 env steps in <= 30 min on 2 cores | {wall / 60:.1f} min per 10^6 ({run['label']}) | "
                         f"{mark(wall <= MILLION_TARGET_S)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=DOCS, help="the folder of the committed results (default docs/)")
    args = parser.parse_args(argv)
    try:
        print(table(args.docs))
    except (OSError, ValueError, KeyError) as err:
        parser.error(str(err))
    return 0


if __name__ == "__main__":
    sys.exit(main())
