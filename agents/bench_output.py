"""The benchmark's outputs: the CSV (one row per policy, run, scenario, trace seed and window, the
isolated-job bound's rows, then the aggregate rows) written atomically, and the text table."""

from __future__ import annotations

import csv
import io
import math
import os
from typing import Any, Sequence

import numpy as np

from lyra_agents.headroom import REFERENCE_KINDS
from lyra_gym.outputs import atomic_path

WINDOW_COLUMNS = ["kind", "policy", "run", "scenario", "window", "trace_seed", "window_seed", "jct_mean_s",
                  "jct_vs_lyra", "score_vs_random"]
AGGREGATE_COLUMNS = ["metric", "iqm", "ci_low", "ci_high", "reps", "cells", "units", "bootstrap"]
COLUMNS = WINDOW_COLUMNS + AGGREGATE_COLUMNS + ["suite", "lyra_gym_version", "lyra_gym_commit"]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in COLUMNS])
    return buffer.getvalue()


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to a hidden temporary file beside ``path`` and rename it over ``path``
    (:func:`lyra_gym.outputs.atomic_path`; the parent folder is created)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="") as fh:
            fh.write(text)


def table(rows: Sequence[dict[str, Any]], aggregates: Sequence[dict[str, Any]]) -> str:
    """Policy, IQM JCT/lyra [CI], IQM score vs random [CI], runs, mean JCT (s) per scenario."""
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    agg = {(a["policy"], a["metric"]): a for a in aggregates}

    def ci(a: dict[str, Any]) -> str:
        return f"{a['iqm']:.3f} [{a['ci_low']:.3f}, {a['ci_high']:.3f}]"

    header = ["policy", "runs", "JCT/lyra IQM [95% CI]", "vs random IQM [95% CI]", *scenarios]
    body = []
    for policy in dict.fromkeys(r["policy"] for r in rows if r.get("kind") not in REFERENCE_KINDS):
        mine = [r for r in rows if r["policy"] == policy]
        means = [np.mean([r["jct_mean_s"] for r in mine if r["scenario"] == s]) for s in scenarios]
        body.append([policy, str(len({r["run"] for r in mine})), ci(agg[policy, "jct_vs_lyra"]),
                     ci(agg[policy, "score_vs_random"]), *[f"{m:.0f}" for m in means]])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(b, widths)))
              for b in body]
    return "\n".join(lines)
