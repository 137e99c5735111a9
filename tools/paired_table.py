"""Markdown table of paired JCT ratios from ``python -m lyra_agents.evaluate RUN --suite ... --json FILE``.

    python tools/paired_table.py docs/learned-v2-seed1.json --agent policy --references expert,lyra

One row per (agent, reference), one column per scenario: the IQM of the per-unit ratio
JCT(agent) / JCT(reference) over the file's paired units (trace seed x test window) with its 95 %
percentile-bootstrap interval (10,000 samples, seed 0; :func:`lyra_agents.paired.paired_interval`),
and ``*`` where the interval excludes 1. Below 1: the agent's mean JCT is lower. Several files (one
per trained seed) give one block of rows each, labelled by ``LABEL=FILE`` or the file's stem; files
of one label (an evaluation split over processes by scenario) make one block, a scenario in only one
of them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from lyra_agents.paired import SuiteUnits, paired_interval, read_units, unit_ratios


def cell(agent: dict[Any, float], reference: dict[Any, float]) -> str:
    ratios = unit_ratios(agent, reference)
    point, low, high = paired_interval(ratios)
    mark = "*" if len(ratios) > 1 and (high < 1 or low > 1) else ""
    return f"{point:.3f} [{low:.3f}, {high:.3f}]{mark}"


def merged(files: Sequence[tuple[str, Path]]) -> list[tuple[str, SuiteUnits]]:
    """``(label, units)`` per label, in first-seen order: the units of its files (:func:`read_units`);
    ValueError for a scenario in two files of one label."""
    out: dict[str, SuiteUnits] = {}
    for label, path in files:
        units = out.setdefault(label, {})
        for scenario, policies in read_units(path).items():
            if scenario in units:
                raise ValueError(f"{path}: scenario {scenario!r} is in another file of label {label!r} too")
            units[scenario] = policies
    return list(out.items())


def table(files: Sequence[tuple[str, Path]], agent: str, references: Sequence[str]) -> str:
    data = merged(files)
    scenarios = list(dict.fromkeys(s for _, units in data for s in units))
    lines = ["| agent | against | " + " | ".join(scenarios) + " |", "|---|---|" + "---|" * len(scenarios)]
    for label, units in data:
        for ref in references:
            cells = []
            for scenario in scenarios:
                policies = units.get(scenario, {})
                if agent not in policies or ref not in policies:
                    cells.append("")
                    continue
                cells.append(cell(policies[agent], policies[ref]))
            lines.append(f"| {label} | {ref} | " + " | ".join(cells) + " |")
    units_per = {len(next(iter(p.values()))) for _, u in data for p in u.values()}
    lines += ["", f"IQM of JCT(agent) / JCT(reference) over {', '.join(map(str, sorted(units_per)))} paired units "
              "(trace seed x test window) per scenario [95 % bootstrap interval]; * the interval excludes 1."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="[LABEL=]FILE", help="evaluate --suite --json files")
    parser.add_argument("--agent", default="policy", help="the agent's policy name in the files (default policy)")
    parser.add_argument("--references", default="expert,lyra", help="comma-separated reference policy names")
    args = parser.parse_args(argv)
    files = []
    for spec in args.files:
        label, sep, name = spec.partition("=")
        path = Path(name if sep else spec)
        if not path.is_file():
            parser.error(f"{path}: no such file")
        files.append((label if sep else path.stem, path))
    try:
        print(table(files, args.agent, [r for r in args.references.split(",") if r]))
    except ValueError as err:
        parser.error(str(err))
    return 0


if __name__ == "__main__":
    sys.exit(main())
