"""A Markdown table from ``lyra-gym compare`` summaries (``OUT/summary.csv``), for the docs.

One row per policy, the mean over seeds of each metric asked for; ``--join LABEL=CSV:KEY,KEY``
adds columns from another comparison of the same policies (e.g. the same run under another
config), headed ``LABEL: KEY``.

    python tools/compare_table.py docs/schedulers-default.csv --keys jct_mean_s,queue_mean_s \\
        --join consolidated=docs/schedulers-consolidated.csv:jct_mean_s
"""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Sequence


def read_summary(path: str) -> dict[str, dict[str, str]]:
    """``{policy: row}`` of a compare ``summary.csv``."""
    with open(path, newline="") as fh:
        return {row["policy"]: row for row in csv.DictReader(fh)}


def cell(text: str | None) -> str:
    """A metric as the compare table prints it: whole numbers plain, small ones to 3 significant digits."""
    if text in (None, ""):
        return "-"
    value = float(text)
    if value.is_integer():
        return f"{value:.0f}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def table(main: dict[str, dict[str, str]], keys: Sequence[str],
          joins: Sequence[tuple[str, dict[str, dict[str, str]], Sequence[str]]] = ()) -> str:
    """Policy | each key | each joined ``label: key``; policies in ``main``'s order."""
    header = ["policy", *keys, *(f"{label}: {k}" for label, _rows, ks in joins for k in ks)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for policy, row in main.items():
        cells = [cell(row.get(k)) for k in keys]
        cells += [cell(rows.get(policy, {}).get(k)) for _label, rows, ks in joins for k in ks]
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("summary", help="a compare summary.csv")
    parser.add_argument("--keys", required=True, help="comma-separated metric columns")
    parser.add_argument("--join", action="append", default=[], metavar="LABEL=CSV:KEY,KEY",
                        help="columns from another summary of the same policies")
    args = parser.parse_args(argv)
    joins = []
    for spec in args.join:
        label, _, rest = spec.partition("=")
        path, _, keys = rest.rpartition(":")
        joins.append((label, read_summary(path), keys.split(",")))
    print(table(read_summary(args.summary), args.keys.split(","), joins))
    return 0


if __name__ == "__main__":
    sys.exit(main())
