"""The Lyra paper's mechanism, not only its number: can one calibration give BOTH headline ratios?

The paper (EuroSys 2023) reports, against the same scheduler without loaning or elastic scaling,
average queuing 1.53x lower and average JCT 1.48x lower. With JCT = queuing + run time, both
ratios near 1.5x mean the run time falls by about as much: for the baseline's measured means Q
and J, the run-time ratio the paper's two numbers imply is ``(J - Q) / (J / 1.48 - Q / 1.53)``
(column ``implied run ratio``). This script measures, on the ``lyra-15d`` trace (the paper
shape: 1,024 V100 training GPUs, baseline queuing ~3.4 ks), lyra against ``baseline`` for a few
calibrations (variants), each changing one documented assumption of the paper scenario
(``traces/lyra-15d-paper.yaml``), and reports the queuing, JCT and run-time ratios with 95 %
intervals over seeds, the raw and effective usage of both, and whether the queuing and JCT ratios
fall within 20 % of the paper's.

Run (from the repository root; the full run: 6 variants x 4 seeds of lyra, 8 baseline runs)::

    python benchmarks/headline_mechanism.py --jobs 2                  # 15 days, seeds 0-3
    python benchmarks/headline_mechanism.py --days 1 --seeds 0        # quick check
    python benchmarks/headline_mechanism.py --from-csv docs/headline_mechanism.csv   # table only

Variants (:data:`VARIANTS`; the paper publishes none of these numbers):

* ``paper``: the shipped paper scenario (160 x 8 T4 inference servers; an elastic job requesting
  g GPUs may run on ``max(1, g // 2)`` to ``2 g``, the trace generator's rule);
* ``base-requested``: the same, with an elastic job's minimum = its requested size (range g to
  2 g): the trace's demand is the job's base demand and elastic scaling only adds workers
  (assumption; removes lyra's admission at half size, which the baseline does not do);
* ``loan-32`` / ``loan-16`` / ``loan-8``: ``base-requested`` with 32 / 16 / 8 T4 inference
  servers instead of 160: less loanable capacity, so that queues remain as in the paper;
* ``bound-v100``: NOT a defensible calibration, the most favourable case for the paper's
  mechanism: every job elastic (range g to 2 g), inference servers of the training GPU type
  (160 x 8 V100, so loaned GPUs are as fast as training GPUs and elastic jobs may grow onto them)
  and ``scaling: throughput`` (linear speed-up, nothing charged for a larger batch).

``baseline`` never borrows and runs every job at its requested size, so its jobs do not depend on
the elastic minimum or the elastic share (measured: identical queuing and JCT,
``tests/harness/test_headline_mechanism.py``); it runs once per (seed, scaling, inference pool), since the
usage over both clusters counts the inference pool, and serves every variant with those.

Writes ``headline_mechanism.csv`` and ``headline_mechanism.md`` to ``--out`` (default
``runs/headline_mechanism``); ``--from-csv`` rewrites the markdown table from a CSV of this script.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lyra_gym.harness.report import mean_ci
from lyra_gym.model.config import ServerGroup, SimConfig, load_config
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import simulate
from lyra_gym.workloads.presets_calibrated import LYRA_15D
from lyra_gym.workloads.tracegen import generate_trace

ROOT = Path(__file__).resolve().parents[1]
PAPER_CONFIG = ROOT / "traces" / "lyra-15d-paper.yaml"
PAPER = {"queue_ratio": 1.53, "jct_ratio": 1.48}  # Lyra paper, EuroSys 2023, abstract and section 7
BAND = 0.20  # the acceptance band: each ratio within 20 % of the paper's
POLICIES = ("baseline", "lyra")


@dataclass(frozen=True)
class Variant:
    """One calibration of the paper scenario: the inference pool, the elastic minimum rule
    (``"half"``: the generator's ``max(1, g // 2)``; ``"requested"``: g), the elastic share and the
    scaling rule (None: the paper config's)."""

    name: str
    inference: ServerGroup
    min_rule: str = "half"
    elastic_share: float = 0.3
    scaling: str | None = None
    defensible: bool = True


VARIANTS = {v.name: v for v in (
    Variant("paper", ServerGroup(160, "t4", 8)),
    Variant("base-requested", ServerGroup(160, "t4", 8), "requested"),
    Variant("loan-32", ServerGroup(32, "t4", 8), "requested"),
    Variant("loan-16", ServerGroup(16, "t4", 8), "requested"),
    Variant("loan-8", ServerGroup(8, "t4", 8), "requested"),
    Variant("bound-v100", ServerGroup(160, "v100", 8), "requested", 1.0, "throughput", defensible=False),
)}


def variant_jobs(variant: Variant, seed: int, days: float | None) -> list[JobSpec]:
    """The ``lyra-15d`` trace at ``seed`` with the variant's elastic share and minimum rule, cut to
    the jobs submitted in the first ``days`` days. The elastic flags are the generator's last draw,
    so the share changes no other field of any job."""
    jobs = generate_trace(dataclasses.replace(LYRA_15D, elastic_share=variant.elastic_share), seed)
    if days is not None:
        jobs = [j for j in jobs if j.submit_time < days * 86_400.0]
    if variant.min_rule == "requested":
        jobs = [dataclasses.replace(j, min_gpus=j.num_gpus) if j.elastic else j for j in jobs]
    elif variant.min_rule != "half":
        raise ValueError(f"Variant.min_rule: 'half' or 'requested', got {variant.min_rule!r}")
    return jobs


def variant_config(variant: Variant) -> SimConfig:
    """``traces/lyra-15d-paper.yaml`` with the variant's inference pool and scaling rule."""
    config = load_config(str(PAPER_CONFIG))
    config = dataclasses.replace(config, cluster=dataclasses.replace(config.cluster, inference=variant.inference))
    return config if variant.scaling is None else dataclasses.replace(config, scaling=variant.scaling)


def run_task(variant_name: str, seed: int, policy: str, days: float | None) -> dict[str, Any]:
    """One simulation (top-level, for a spawned worker); its metrics."""
    variant = VARIANTS[variant_name]
    return simulate(variant_jobs(variant, seed, days), policy, variant_config(variant), seed=seed).metrics


def task_key(variant: Variant, seed: int, policy: str) -> tuple:
    """Runs with equal keys are the same run: ``baseline`` depends on the seed, the scaling and the
    inference pool (only through the usage keys that count inference GPUs)."""
    if policy == "baseline":
        return ("baseline", seed, variant.scaling, variant.inference.count, variant.inference.gpu_type)
    return (policy, seed, variant.name)


def _cache_path(cache: Path | None, args: tuple) -> Path | None:
    return None if cache is None else cache / ("_".join(map(str, args)) + ".json")


def _run(tasks: dict[tuple, tuple], n_jobs: int, cache: Path | None = None) -> dict[tuple, dict[str, Any]]:
    """Run every task (key -> run_task arguments); with ``cache``, a task whose metrics file is
    there is read, not run, and each finished run's metrics are written there."""
    done: dict[tuple, dict[str, Any]] = {}
    todo = {}
    for key, args in tasks.items():
        path = _cache_path(cache, args)
        if path is not None and path.exists():
            done[key] = json.loads(path.read_text(encoding="utf-8"))
        else:
            todo[key] = args

    def report(key: tuple) -> None:
        m = done[key]
        path = _cache_path(cache, tasks[key])
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(m), encoding="utf-8")
        print(f"[{len(done)}/{len(tasks)}] {key}: queue mean {m['queue_mean_s']:.0f} s, "
              f"JCT mean {m['jct_mean_s']:.0f} s", flush=True)

    if n_jobs <= 1 or len(todo) <= 1:
        for key, args in todo.items():
            done[key] = run_task(*args)
            report(key)
        return done
    with ProcessPoolExecutor(min(n_jobs, len(todo)), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_task, *args): key for key, args in todo.items()}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            report(futures[future])
    return done


def implied_run_ratio(queue_s: float, jct_s: float) -> float:
    """Baseline run time over lyra's if lyra cut the baseline's mean queuing by 1.53x and its mean
    JCT by 1.48x (the paper): ``(J - Q) / (J / 1.48 - Q / 1.53)``."""
    return (jct_s - queue_s) / (jct_s / PAPER["jct_ratio"] - queue_s / PAPER["queue_ratio"])


def summarize(metrics: dict[tuple, dict[str, Any]], variants: Sequence[str],
              seeds: Sequence[int]) -> list[dict[str, Any]]:
    """One row per variant: per-seed paired values (baseline vs lyra), mean and 95 % half-width."""
    rows = []
    for name in variants:
        v = VARIANTS[name]
        pairs = [(metrics[task_key(v, s, "baseline")], metrics[task_key(v, s, "lyra")]) for s in seeds]
        run = [(b["jct_mean_s"] - b["queue_mean_s"], r["jct_mean_s"] - r["queue_mean_s"]) for b, r in pairs]
        per_seed = {
            "queue_ratio": [b["queue_mean_s"] / r["queue_mean_s"] for b, r in pairs],
            "jct_ratio": [b["jct_mean_s"] / r["jct_mean_s"] for b, r in pairs],
            "run_ratio": [rb / rl for rb, rl in run],
            "implied_run_ratio": [implied_run_ratio(b["queue_mean_s"], b["jct_mean_s"]) for b, _ in pairs],
            "baseline_queue_s": [b["queue_mean_s"] for b, _ in pairs],
            "lyra_queue_s": [r["queue_mean_s"] for _, r in pairs],
            "baseline_run_s": [rb for rb, _ in run],
            "lyra_run_s": [rl for _, rl in run],
            "baseline_usage_training": [b["gpu_usage_training"] for b, _ in pairs],
            "lyra_usage_training": [r["gpu_usage_training"] for _, r in pairs],
            "usage_training_diff_pp": [100.0 * (r["gpu_usage_training"] - b["gpu_usage_training"]) for b, r in pairs],
            "usage_effective_diff_pp": [100.0 * (r["gpu_usage_effective_overall"] - b["gpu_usage_effective_overall"])
                                        for b, r in pairs],
        }
        row: dict[str, Any] = {"variant": name, "defensible": v.defensible, "seeds": len(seeds),
                               "unfinished": sum(m["jobs_unfinished"] for pair in pairs for m in pair)}
        for key, values in per_seed.items():
            row[key], row[key + "_ci95"] = mean_ci(values)
        row["within_band"] = all(abs(row[k] / PAPER[k] - 1.0) <= BAND for k in PAPER)
        rows.append(row)
    return rows


def _pm(row: dict[str, Any], key: str, digits: int, unit: str = "") -> str:
    half = row[key + "_ci95"]
    half = None if half in (None, "") else float(half)
    return f"{float(row[key]):.{digits}f}{unit}" + ("" if half is None else f" ± {half:.{digits}f}")


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    header = ["variant", "seeds", "queue ratio (paper 1.53x)", "JCT ratio (paper 1.48x)", "both within 20 %",
              "run-time ratio", "implied run ratio", "queue mean B / L (s)", "run mean B / L (s)",
              "raw training usage B / L", "effective usage diff (pp)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        name = r["variant"] + ("" if str(r["defensible"]) == "True" else " (bound)")
        cells = [name, str(r["seeds"]), _pm(r, "queue_ratio", 2, "x"), _pm(r, "jct_ratio", 2, "x"),
                 "yes" if str(r["within_band"]) == "True" else "no",
                 _pm(r, "run_ratio", 2, "x"), _pm(r, "implied_run_ratio", 2, "x"),
                 f"{float(r['baseline_queue_s']):.0f} / {float(r['lyra_queue_s']):.0f}",
                 f"{float(r['baseline_run_s']):.0f} / {float(r['lyra_run_s']):.0f}",
                 f"{float(r['baseline_usage_training']):.3f} / {float(r['lyra_usage_training']):.3f}",
                 _pm(r, "usage_effective_diff_pp", 1)]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("B = baseline, L = lyra (backfill off, both). Ratios: baseline over lyra, per seed, then mean ± "
                 "95 % Student-t half-width over seeds. Run time = JCT - queuing (means). Implied run ratio: "
                 "what the paper's two ratios would need, from the baseline's Q and J. Raw training usage = "
                 "`gpu_usage_training`; effective = `gpu_usage_effective_overall` (both clusters). Paper: "
                 "usage up to +25 % (arXiv: up to +26.9 %).")
    return "\n".join(lines) + "\n"


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="lyra vs baseline under calibrations of the paper scenario: "
                                                 "queuing, JCT and run-time ratios with 95 % intervals.")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"subset of {','.join(VARIANTS)}")
    parser.add_argument("--seeds", default="0,1,2,3", help="comma-separated (trace seed = simulation seed)")
    parser.add_argument("--days", type=float, default=None, help="keep only jobs submitted in the first D days")
    parser.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default 1)")
    parser.add_argument("--out", default="runs/headline_mechanism")
    parser.add_argument("--cache", default=None, help="keep each run's metrics here; reruns read them")
    parser.add_argument("--from-csv", default=None, help="print the table of this script's CSV; run nothing")
    args = parser.parse_args(argv)
    if args.from_csv:
        with open(args.from_csv, encoding="utf-8") as handle:
            print(markdown(list(csv.DictReader(handle))), end="")
        return 0
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if not variants or any(v not in VARIANTS for v in variants) or not seeds:
        parser.error(f"--variants must name some of {', '.join(VARIANTS)}; --seeds must not be empty")
    if args.days is not None and args.days <= 0:
        parser.error("--days must be > 0")
    tasks = {task_key(VARIANTS[v], s, p): (v, s, p, args.days) for v in variants for s in seeds for p in POLICIES}
    print(f"{len(tasks)} runs: variants {variants}, seeds {seeds}, days {args.days or 'all'}", flush=True)
    rows = summarize(_run(tasks, args.jobs, None if args.cache is None else Path(args.cache)), variants, seeds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "headline_mechanism.csv")
    table = markdown(rows)
    days = "all 15 days" if args.days is None else f"first {args.days:g} day(s)"
    (out / "headline_mechanism.md").write_text(f"# lyra vs baseline per calibration, lyra-15d ({days}), seeds "
                                               f"{','.join(map(str, seeds))}\n\n{table}", encoding="utf-8")
    print()
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
