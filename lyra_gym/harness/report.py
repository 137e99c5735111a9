"""Summaries of a comparison: mean and 95 % confidence interval over seeds, tables, files, plots.

Statistics. For each policy and metric, the runs over ``n`` seeds give values
``x_1 .. x_n``; the report shows their mean and the half-width of a two-sided
95 % Student-t confidence interval for it,
``t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample standard deviation
(``ddof = 1``). With one seed the interval is undefined and reported as None
(an empty cell in CSV, ``null`` in JSON, the mean alone in the terminal table).
A metric that is None in any run (e.g. the JCT of a run that finished no job)
has mean and half-width None. Seeds are treated as independent replications;
because every policy runs on the same seeds, paired differences between two
policies have tighter intervals than these per-policy ones.

Plots (PNG, matplotlib's Agg canvas, no display needed), one line per policy:

- ``jct_cdf.png``: empirical CDF of the JCT of finished jobs, pooled over all
  seeds, log time axis;
- ``queued_jobs.png``: queued jobs over simulated time;
- ``loaning.png``: inference servers on loan to training against inference
  demand (and the idle servers that bound borrowing);
- ``gpu_usage.png``: GPUs allocated to training jobs (training plus loaned
  servers) against the training cluster's capacity.

The three timelines are the run of the *first* seed of the comparison (time
series of different seeds do not share decision instants; ``timeline.csv`` in
each run folder has every seed). The inference demand of a seed is the same for
every policy, so it is drawn once.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lyra_gym.provenance import provenance
from lyra_gym.run.simulate import SimResult

#: The metrics of the printed simulate/compare table (every metric is in metrics.json and summary.*):
#: ``queue_*`` is the wait before a job's first start, ``queue_total_*`` all time queued (after
#: preemptions too); ``invalid_actions`` counts a learned policy's actions dropped as no-ops.
TABLE_KEYS = (
    "jobs_finished", "jobs_unfinished", "jct_mean_s", "jct_p95_s", "queue_mean_s", "queue_p95_s",
    "queue_total_mean_s", "queue_total_p95_s", "gpu_usage_training", "gpu_usage_overall", "gpu_usage_effective",
    "gpu_usage_goodput", "gpu_usage_effective_overall", "overhead_gpu_share", "preemptions", "work_lost_gpu_s",
    "scale_events", "migrations", "reclaim_disruptions", "servers_borrowed", "inference_violations", "invalid_actions",
    "makespan_s",
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)


#: The width (characters) the printed simulate and compare tables keep to unless ``--wide``.
WIDTH = 120
_RUN_FOLDER = re.compile(r"^.+__(?P<name>.+)__(?P<seed>\d+)__\d+$")  # ENV__NAME__SEED__TIME (train.py's runs)


def short_label(policy: str) -> str:
    """A policy's label in tables and plot legends: a ``model:``/``rllib:`` path (or a bare run path)
    shown by its run's name, not its path: ``model:runs/LyraGym-Cluster-v1__quick__0__17000/model.zip?trust=1``
    -> ``model:quick-s0``; a folder not named as train.py names runs keeps its own name; other
    policies as they are."""
    prefix, colon, rest = policy.partition(":")
    if not colon or prefix not in ("model", "rllib"):
        if "/" not in policy or ":" in policy:
            return policy
        prefix, rest = "", policy
    path = Path(rest.partition("?")[0].rstrip("/"))
    folder = path.parent if path.suffix in (".zip", ".pt", ".pkl") and path.parent.name else path
    found = _RUN_FOLDER.match(folder.name)
    name = f"{found['name']}-s{found['seed']}" if found else folder.name or rest
    return f"{prefix}:{name}" if prefix else name


def short_labels(policies: Sequence[str]) -> list[str]:
    """:func:`short_label` of each policy; a policy whose short label another shares keeps its full name."""
    short = [short_label(p) for p in policies]
    return [s if short.count(s) == 1 else p for p, s in zip(policies, short)]


def fit_columns(header: Sequence[str], body: Sequence[Sequence[str]], width: int | None = WIDTH) -> list[str]:
    """Aligned text lines (first column left, the others right, two spaces apart). With ``width``,
    the columns after the first are cut into blocks of at most ``width`` characters each (a
    column wider than that alone), every block repeating the first column, blank lines between."""
    rows = [list(header), *map(list, body)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    blocks: list[list[int]] = [[]]
    used = widths[0]
    for i in range(1, len(header)):
        if width is not None and blocks[-1] and used + 2 + widths[i] > width:
            blocks.append([])
            used = widths[0]
        blocks[-1].append(i)
        used += 2 + widths[i]
    lines: list[str] = []
    for block in blocks:
        if lines:
            lines.append("")
        lines += ["  ".join([r[0].ljust(widths[0]), *(r[i].rjust(widths[i]) for i in block)]) for r in rows]
    return lines


def format_table(rows: Sequence[dict[str, Any]], keys: Sequence[str], width: int | None = WIDTH) -> str:
    """Metrics down, one column per row (dict) headed by its ``policy`` (:func:`short_labels`
    unless ``width`` is None), cut to ``width`` columns (:func:`fit_columns`)."""
    policies = [str(r.get("policy", "")) for r in rows]
    header = ["metric", *(policies if width is None else short_labels(policies))]
    body = [[k, *(_fmt(r.get(k)) for r in rows)] for k in keys]
    return "\n".join(fit_columns(header, body, width))


CI_SUFFIX = "_ci95"
PLOT_FILES = ("jct_cdf.png", "queued_jobs.png", "loaning.png", "gpu_usage.png")


# ----------------------------------------------------------------------------- statistics
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on
    :func:`t_cdf`, to about 1e-12; no SciPy needed). ``t_quantile(0.975, 2)`` = 4.3027."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p: must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"df: must be > 0, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float | None]:
    """``(mean, half-width)`` of the two-sided Student-t interval; half-width None for n < 2."""
    if not values:
        raise ValueError("mean_ci: no values")
    arr = np.asarray(values, dtype=np.float64)
    mean = float(arr.mean())
    n = arr.size
    if n < 2:
        return mean, None
    sd = float(arr.std(ddof=1))
    return mean, t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)


def summarize_runs(results: Sequence[SimResult], label: str | None = None) -> dict[str, Any]:
    """One summary row for the runs of one policy: ``policy``, ``seeds``, the mean of every
    metric (the keys of ``metrics.json``, in order), then ``<metric>_ci95`` for each."""
    row: dict[str, Any] = {"policy": label or results[0].policy, "seeds": len(results)}
    cis: dict[str, Any] = {}
    for key, first in results[0].metrics.items():
        numbers = [v for r in results if isinstance(v := r.metrics.get(key), (int, float)) and not isinstance(v, bool)]
        if len(numbers) < len(results):  # a run without a number here (None, a flag, text)
            row[key], cis[key + CI_SUFFIX] = None, None
            continue
        row[key], cis[key + CI_SUFFIX] = mean_ci(numbers)
    row.update(cis)
    return row


# ----------------------------------------------------------------------------- tables and files
def _decimals(value: float) -> int:
    """Digits after the point for a value of this size (3 below 10, none from 10 on)."""
    return 3 if abs(value) < 10 else 0


def format_mean_ci(mean: float | None, half: float | None) -> str:
    """``mean ± half`` with both at the mean's precision; the mean alone when ``half`` is None."""
    if mean is None:
        return "-"
    d = _decimals(mean)
    if float(mean).is_integer() and (half is None or half == 0):
        d = 0
    text = f"{mean:.{d}f}"
    return text if half is None else f"{text} ± {half:.{d}f}"


#: The summary rows' entry naming what a policy reads of durations
#: (:func:`lyra_gym.sim.scheduler.knowledge_tag`); the compare table shows it as its first line.
READS_KEY = "reads"


def format_ci_table(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], width: int | None = WIDTH) -> str:
    """Metrics down, policies across; each cell ``mean ± 95 % CI half-width``; first the
    policies' duration reads (:data:`READS_KEY`) when the rows carry them. Policies labelled by
    :func:`short_labels` and the table cut to ``width`` columns (:func:`fit_columns`); with
    ``width`` None, full names on one line."""
    seeds = sorted({int(r.get("seeds", 1)) for r in rows})
    seeds_text = "/".join(map(str, seeds))
    note = (f"mean ± 95% CI half-width over {seeds_text} seeds (Student t)" if max(seeds) > 1
            else "one seed: mean only (no confidence interval)")
    policies = [str(r["policy"]) for r in rows]
    header = ["metric", *(policies if width is None else short_labels(policies))]
    body = [[k, *(format_mean_ci(r.get(k), r.get(k + CI_SUFFIX)) for r in rows)] for k in keys]
    if any(READS_KEY in r for r in rows):  # what each policy reads of durations (Scheduler.reads)
        body.insert(0, [READS_KEY, *(str(r.get(READS_KEY, "-")) for r in rows)])
    return "\n".join([note, *fit_columns(header, body, width)])


def write_summary(rows: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike,
                  made_by: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """``summary.json`` (None as null) and ``summary.csv`` (None as an empty cell); every row ends
    with what produced it, ``made_by`` (default :func:`lyra_gym.provenance.provenance`: the
    ``lyra_gym_version`` and ``lyra_gym_commit`` columns, the last ones)."""
    made_by = provenance() if made_by is None else made_by
    rows = [{**r, **made_by} for r in rows]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(list(rows), indent=2) + "\n")
    with open(out / "summary.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
    return out / "summary.csv", out / "summary.json"


# ----------------------------------------------------------------------------- plots
def _figure(title: str, xlabel: str, ylabel: str):
    from matplotlib.figure import Figure  # Agg canvas; never touches pyplot's global state

    fig = Figure(figsize=(9, 5), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig, ax, path: Path) -> Path:
    """Legend outside the axes (right), so it never hides a line; then write the PNG."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    fig.savefig(path)
    return path


_LINESTYLES = ("-", "--", "-.", ":")


def _styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One colour and line style per policy, the same in every plot; the style cycle keeps
    policies with identical curves (e.g. a policy and its own ablation) both visible."""
    colours = [f"C{i % 10}" for i in range(len(labels))]
    return {p: {"color": c, "linestyle": _LINESTYLES[i % len(_LINESTYLES)],
                "linewidth": 1.8 if i % len(_LINESTYLES) == 3 else 1.3, "label": short}
            for i, (p, c, short) in enumerate(zip(labels, colours, short_labels(labels)))}


def write_plots(results: Mapping[str, Sequence[SimResult]], out_dir: str | os.PathLike) -> list[Path]:
    """The four PNGs of :data:`PLOT_FILES` into ``out_dir``; ``results`` maps a policy's label to
    its runs (seed order as compared). Timelines come from each policy's first run; runs
    without a timeline are left out of the time plots."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    labels = list(results)
    first = {p: results[p][0] for p in labels}
    seed = first[labels[0]].seed
    n_seeds = len(results[labels[0]])
    hours = 3600.0
    style = _styles(labels)
    written = []

    fig, ax = _figure(
        f"JCT distribution (finished jobs, pooled over {n_seeds} seed{'s' if n_seeds > 1 else ''})",
        "job completion time (s, log scale)", "fraction of finished jobs")
    for p in labels:
        jct = np.sort([row["jct_s"] for r in results[p] for row in r.jobs if row["jct_s"] is not None])
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", **style[p])
    ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    written.append(_save(fig, ax, out / "jct_cdf.png"))

    timelines = {p: tl for p in labels if (tl := first[p].timeline) is not None}
    timed = list(timelines)

    fig, ax = _figure(f"Queued jobs over time (seed {seed})", "simulated time (h)", "queued jobs")
    for p in timed:
        t, v = timelines[p].steps("queued")
        ax.step(t / hours, v, where="post", **style[p])
    ax.set_ylim(bottom=0)
    written.append(_save(fig, ax, out / "queued_jobs.png"))

    fig, ax = _figure(f"Borrowed inference servers vs. inference demand (seed {seed})",
                      "simulated time (h)", "inference servers")
    if timed:
        ref = timelines[timed[0]]
        t, demand = ref.steps("inference_demand")
        ax.fill_between(t / hours, 0, ref.inference_servers - demand, step="post", color="0.88", linewidth=0,
                        label="idle inference servers\n(most that can be on loan)")
        ax.step(t / hours, demand, where="post", color="black", linewidth=1.6, label="inference demand")
        for p in timed:
            t, v = timelines[p].steps("servers_loaned")
            ax.step(t / hours, v, where="post", **{**style[p], "label": f"{style[p]['label']}: on loan"})
        ax.set_ylim(0, ref.inference_servers + 0.5)
    written.append(_save(fig, ax, out / "loaning.png"))

    fig, ax = _figure(f"GPUs allocated to training jobs (seed {seed})", "simulated time (h)",
                      "GPUs (training + loaned servers)")
    for p in timed:
        t, v = timelines[p].steps("gpus_allocated")
        ax.step(t / hours, v, where="post", **style[p])
    if timed:
        ax.axhline(timelines[timed[0]].training_gpus, color="black", linestyle="--", linewidth=1.0,
                   label="training cluster\ncapacity")
    ax.set_ylim(bottom=0)
    written.append(_save(fig, ax, out / "gpu_usage.png"))
    return written
