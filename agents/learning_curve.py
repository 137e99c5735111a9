"""Learning curves of training runs: the held-out evaluation train.py records, one line per run.

The curve is what a run's evaluation callback records (the deterministic policy on held-out test
windows, ``eval/*`` in the TensorBoard events, else in ``progress.csv``): left, the policy's mean
JCT (s) with every ``eval/jct_<heuristic>`` the run records (lyra, the expert) as a dashed
horizontal line; right, policy / lyra (1 = parity, lower is better). A run is labelled by its
folder's name. ``band``: runs whose names differ only by a seed suffix (``-seed1``, ``_s2``,
``__3``) are drawn as their mean with a min-max band. A list in ``runs`` is one run and its
resumptions, joined in step order.

``train.py`` draws each run's curve at its end and with ``--plot``; ``tools/plot_learning_curve.py``
is the command line (``docs/rendering.md``). Needs matplotlib (and tensorboard for event files).
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Sequence

Curve = dict[str, list[tuple[float, float]]]  # tag -> [(env steps, value)], in step order
POLICY, RATIO = "eval/jct_policy", "eval/jct_vs_lyra"
_REFERENCE = re.compile(r"^eval/jct_(?!policy$|vs_)(\w+)$")
_SEED = re.compile(r"(?:[-_]+(?:seed|s)?\d+)$")


class CurveError(ValueError):
    """A run folder with nothing to plot; the message names it."""


def _tensorboard(run: Path) -> Curve:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(float(e.step), float(e.value)) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"] if tag.startswith("eval/")}


def _progress_csv(path: Path) -> Curve:
    """``eval/*`` columns of SB3's ``progress.csv``, at the last ``time/total_timesteps`` seen."""
    curve: Curve = {}
    step = 0.0
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("time/total_timesteps"):
                step = float(row["time/total_timesteps"])
            for tag, text in row.items():
                if tag and tag.startswith("eval/") and text:
                    curve.setdefault(tag, []).append((step, float(text)))
    return curve


def read_curve(run: str | Path) -> Curve:
    """The ``eval/*`` scalars of a run folder (TensorBoard events, else ``progress.csv``)."""
    run = Path(run)
    if not run.is_dir():
        raise CurveError(f"{run}: no such run folder")
    curve = _tensorboard(run) if any(run.glob("events.out.tfevents.*")) else {}
    if not curve and (run / "progress.csv").is_file():
        curve = _progress_csv(run / "progress.csv")
    if POLICY not in curve:
        raise CurveError(f"{run}: no eval/jct_policy recorded (TensorBoard events or progress.csv of train.py)")
    return {tag: sorted(points) for tag, points in curve.items()}


def _joined(curves: Sequence[Curve]) -> Curve:
    out: Curve = {}
    for curve in curves:
        for tag, points in curve.items():
            out.setdefault(tag, []).extend(points)
    return {tag: sorted(points) for tag, points in out.items()}


def short_labels(runs: Sequence[Path]) -> list[str]:
    """Each run's folder name; its parent's too where two runs share a name."""
    names = [r.name or str(r) for r in runs]
    return [f"{r.parent.name}/{n}" if names.count(n) > 1 else n for r, n in zip(runs, names)]


def _band(curves: list[Curve], tag: str) -> tuple[list[float], list[float], list[float], list[float]]:
    """Steps every curve has, with the mean, min and max of ``tag`` there."""
    tables = [dict(c.get(tag, [])) for c in curves]
    steps = sorted(set.intersection(*(set(t) for t in tables)))
    values = [[t[s] for t in tables] for s in steps]
    return steps, [sum(v) / len(v) for v in values], [min(v) for v in values], [max(v) for v in values]


def plot_learning_curves(runs: Sequence[str | Path | Sequence[str | Path]], out: str | Path,
                         band: bool = False, title: str = "") -> Path:
    """Write the learning-curve PNG of ``runs`` to ``out`` (module docstring). An item of ``runs``
    that is a list is one run and its resumptions. Returns ``out``."""
    items = [[Path(r)] if isinstance(r, (str, Path)) else [Path(p) for p in r] for r in runs]
    curves = [_joined([read_curve(p) for p in item]) for item in items]
    labels = short_labels([item[0] for item in items])
    groups: dict[str, list[Curve]] = {}
    for label, curve in zip(labels, curves):
        groups.setdefault(_SEED.sub("", label) if band else label, []).append(curve)

    from matplotlib.figure import Figure  # drawn without pyplot: no backend chosen, none changed

    fig = Figure(figsize=(11, 4.2), dpi=100)
    jct_ax, ratio_ax = fig.subplots(1, 2)
    references: dict[str, float] = {}
    for i, (label, members) in enumerate(groups.items()):
        colour = f"C{i % 10}"
        name = f"{label} (mean of {len(members)}, band min-max)" if len(members) > 1 else label
        for ax, tag in ((jct_ax, POLICY), (ratio_ax, RATIO)):
            if not all(tag in c for c in members):
                continue
            steps, mean, lo, hi = _band(members, tag)
            ax.plot(steps, mean, marker="o", markersize=3, color=colour, label=name)
            if len(members) > 1:
                ax.fill_between(steps, lo, hi, color=colour, alpha=0.2, linewidth=0)
        for curve in members:
            for tag, points in curve.items():
                match = _REFERENCE.match(tag)
                if match and points:
                    references.setdefault(match.group(1), points[-1][1])
    lyra = references.get("lyra")
    for j, (name, value) in enumerate(sorted(references.items())):
        colour = "gray" if name == "lyra" else f"C{(len(groups) + j) % 10}"
        jct_ax.axhline(value, label=f"{name} (heuristic)", color=colour, linestyle="--", linewidth=1)
        if lyra and math.isfinite(value):
            ratio_ax.axhline(value / lyra, label=f"{name} (heuristic)", color=colour, linestyle="--", linewidth=1)
    if lyra is None:
        ratio_ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="lyra (heuristic)")
    jct_ax.set_ylabel("mean JCT on held-out test windows (s)")
    ratio_ax.set_ylabel("policy / lyra mean JCT (lower is better)")
    for ax in (jct_ax, ratio_ax):
        ax.set_xlabel("environment steps")
        ax.legend(fontsize=7)
    fig.suptitle(title or "held-out evaluation during training", fontsize=10)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out
