"""Fit the profile scaling model to Pollux's measured T4 step times and print its error.

Run: python tools/fit_scaling.py [--data PATH] [--markdown]

The scaling model of ``lyra_gym/model/profiles.py``::

    step(n, k, b) = compute(b) + 2(n-1)/n * (intra  if k == 1 else inter)

is fitted, per model, to every row of ``placements.csv`` of the Pollux OSDI'21
artifact (petuum/adaptdl, ``simulator/traces/<model>/``, branch
``osdi21-artifact``, commit de25dcc9, Apache-2.0; copied in the project's
``shared/data/pollux_t4/``, measured on AWS g4dn.12xlarge: 4 x T4 per node,
25-50 Gbps Ethernet). A placement such as ``"1213"`` means 4 nodes holding
1, 2, 1 and 3 GPUs: ``n = 7`` workers on ``k = 4`` servers. ``b`` is the
per-GPU batch (``local_bsz``).

Unknowns per model: one ``compute(b)`` per batch size in the file, and one
``intra`` and one ``inter`` shared by all batch sizes (the all-reduce moves
the gradient, whose size does not depend on the batch). They enter linearly,
so the fit is a least-squares solve; rows are weighted by 1 / measured step,
which minimises the *relative* error. Reported: mean and max absolute
percentage error, in sample (all placements; split into 1 GPU, one node, and
several nodes) and out of sample on ``scalability.csv`` (6-16 nodes, which the
fit never saw).

The fit answers one question: how much does the profile format's
three-number model (compute, in-server all-reduce, across-server all-reduce)
lose against measured multi-GPU step times?
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Pollux model directory -> this project's profile key.
POLLUX_MODELS = {"cifar10": "resnet18", "imagenet": "resnet50", "bert": "bert", "yolov3": "yolov3",
                 "deepspeech2": "deepspeech2", "ncf": "ncf"}
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "pollux_t4"


@dataclass
class Row:
    n: int
    k: int
    b: int
    step: float


@dataclass
class Fit:
    model: str
    compute: dict[int, float]
    intra: float
    inter: float

    def predict(self, n: int, k: int, b: int) -> float:
        compute = self.compute.get(b)
        if compute is None:  # a batch size the fit did not see: interpolate linearly in b
            bs = sorted(self.compute)
            compute = float(np.interp(b, bs, [self.compute[x] for x in bs]))
        if n <= 1:
            return compute
        return compute + 2.0 * (n - 1) / n * (self.intra if k <= 1 else self.inter)


def read_placements(path: Path) -> list[Row]:
    rows = []
    with open(path, newline="") as fh:
        for rec in csv.DictReader(fh):
            digits = [int(c) for c in rec["placement"].strip()]
            rows.append(Row(sum(digits), sum(1 for d in digits if d > 0), int(rec["local_bsz"]), float(rec["step_time"])))
    return rows


def read_scalability(path: Path) -> list[Row]:
    with open(path, newline="") as fh:
        return [Row(int(r["num_replicas"]), int(r["num_nodes"]), int(r["local_bsz"]), float(r["step_time"]))
                for r in csv.DictReader(fh)]


def fit(model: str, rows: list[Row]) -> Fit:
    batches = sorted({r.b for r in rows})
    col = {b: i for i, b in enumerate(batches)}
    a = np.zeros((len(rows), len(batches) + 2))
    y = np.ones(len(rows))  # step / step after weighting
    for i, r in enumerate(rows):
        w = 1.0 / r.step
        a[i, col[r.b]] = w
        if r.n > 1:
            ring = 2.0 * (r.n - 1) / r.n
            a[i, len(batches) + (0 if r.k <= 1 else 1)] = ring * w
    x, *_ = np.linalg.lstsq(a, y, rcond=None)
    return Fit(model, {b: float(x[col[b]]) for b in batches}, float(x[-2]), float(x[-1]))


def fit_pinned(model: str, rows: list[Row]) -> Fit:
    """As :func:`fit`, but ``compute(b)`` pinned to the measured 1-GPU step at ``b`` (mean of the
    ``placement == 1`` rows), as the collector does; only ``intra`` and ``inter`` are fitted."""
    single: dict[int, list[float]] = {}
    for r in rows:
        if r.n == 1:
            single.setdefault(r.b, []).append(r.step)
    compute = {b: float(np.mean(v)) for b, v in single.items()}
    multi = [r for r in rows if r.n > 1 and r.b in compute]
    a = np.zeros((len(multi), 2))
    y = np.zeros(len(multi))
    for i, r in enumerate(multi):
        w = 1.0 / r.step
        a[i, 0 if r.k <= 1 else 1] = 2.0 * (r.n - 1) / r.n * w
        y[i] = (r.step - compute[r.b]) * w
    x, *_ = np.linalg.lstsq(a, y, rcond=None)
    return Fit(model, compute, float(x[0]), float(x[1]))


def ape(f: Fit, rows: list[Row]) -> np.ndarray:
    return np.array([abs(f.predict(r.n, r.k, r.b) - r.step) / r.step * 100.0 for r in rows])


def report(data: Path, pinned: bool = False) -> list[dict]:
    """One dict of fitted units (ms) and error percentages per model."""
    out = []
    for pollux, key in POLLUX_MODELS.items():
        rows = read_placements(data / pollux / "placements.csv")
        f = fit_pinned(key, rows) if pinned else fit(key, rows)
        groups = {
            "all": rows,
            "1 GPU": [r for r in rows if r.n == 1],
            "1 node": [r for r in rows if r.n > 1 and r.k == 1],
            "multi-node": [r for r in rows if r.k > 1],
        }
        res = {"model": key, "pollux": pollux, "rows": len(rows), "batches": len(f.compute),
               "intra_ms": f.intra * 1e3, "inter_ms": f.inter * 1e3}
        for name, group in groups.items():
            e = ape(f, group)
            res[f"mape {name}"] = float(e.mean())
            res[f"max {name}"] = float(e.max())
        scal = data / pollux / "scalability.csv"
        if scal.exists():
            e = ape(f, read_scalability(scal))
            res["mape 6-16 nodes"] = float(e.mean())
            res["max 6-16 nodes"] = float(e.max())
        out.append(res)
    return out


def format_markdown(results: list[dict]) -> str:
    head = ("| model (Pollux dir) | rows | intra ms | inter ms | MAPE all | 1 GPU | 1 node | multi-node | max | "
            "MAPE 6-16 nodes (held out) | max held out |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(
            f"| {r['model']} ({r['pollux']}) | {r['rows']} | {r['intra_ms']:.1f} | {r['inter_ms']:.1f} | "
            f"{r['mape all']:.1f} % | {r['mape 1 GPU']:.1f} % | {r['mape 1 node']:.1f} % | "
            f"{r['mape multi-node']:.1f} % | {r['max all']:.0f} % | {r.get('mape 6-16 nodes', float('nan')):.1f} % | "
            f"{r.get('max 6-16 nodes', float('nan')):.0f} % |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"pollux_t4 folder (default {DEFAULT_DATA})")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (default: plain text)")
    args = parser.parse_args()
    for pinned in (False, True):
        title = ("compute(b) pinned to the measured 1-GPU step, intra/inter fitted (the collector's procedure)"
                 if pinned else "all parameters fitted (compute per batch size, intra, inter)")
        print(f"\n{title}:\n")
        results = report(args.data, pinned)
        if args.markdown:
            print(format_markdown(results))
        else:
            print_plain(results)


def print_plain(results: list[dict]) -> None:
    cols = ["model", "rows", "intra_ms", "inter_ms", "mape all", "mape 1 GPU", "mape 1 node", "mape multi-node",
            "max all", "mape 6-16 nodes", "max 6-16 nodes"]
    print("  ".join(f"{c:>15}" for c in cols))
    for r in results:
        print("  ".join(f"{r[c]:>15.2f}" if isinstance(r.get(c), float) else f"{r.get(c, '-')!s:>15}" for c in cols))


if __name__ == "__main__":
    main()
