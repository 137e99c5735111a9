"""The Lyra paper's headline comparison on the calibrated ``lyra-15d`` preset, both scenarios.

Run (from the repository root; the full run is 2 scenarios x 4 seeds x 3 policies x 2 = 48
simulations of 50,000 jobs)::

    python benchmarks/headline.py --jobs 2                      # full: 15 days, seeds 0-3
    python benchmarks/headline.py --days 1 --seeds 0            # quick check (~1 min)
    python benchmarks/headline.py --policies baseline,lyra      # fewer comparison points

For every scenario (cluster file) and seed, the ``lyra-15d`` trace of that seed is generated
(``lyra-gym trace generate --preset lyra-15d --seed N``; cut to the jobs submitted in the first
``--days`` days) and every policy is simulated on it with backfill off and on (the scheduler
parameter ``backfill``), trace seed = simulation seed, through :func:`lyra_gym.harness.compare.run_one`,
the function behind ``lyra-gym compare``.

Scenarios (sizes are assumptions; the paper publishes none):

* ``paper``: ``traces/lyra-15d-paper.yaml``, 1,024 V100 training GPUs, 1,280 T4 inference GPUs
  (an inference pool larger than the training pool, as in the paper's production setting);
* ``loan-scarce``: ``traces/lyra-15d.yaml``, the same training pool, 256 T4 inference GPUs.

The table: per scenario, per comparison point C (every policy but the reference ``lyra``, with
backfill off / on), the reference policy at the same backfill setting against C. Paired over
seeds: per seed the queuing ratio ``C.queue_mean_s / lyra.queue_mean_s``, the JCT ratio
``C.jct_mean_s / lyra.jct_mean_s``, the usage difference ``lyra - C`` of ``gpu_usage_effective_overall``
(useful work in reference-GPU-seconds over both clusters: the same denominator for every policy)
(percentage points; ``gpu_usage_overall`` where a run lacks it, marked in the table), and lyra's
rescale + migration events per job ``(scale_events + migrations) / jobs_total``; then the mean
over seeds and its 95 % Student-t interval (:func:`lyra_gym.harness.report.mean_ci`). The paper
(EuroSys 2023) reports against its baseline: queuing 1.53x lower, JCT 1.48x lower, cluster usage
up to 25 % higher.

Writes ``headline.csv`` and ``headline.md`` to ``--out`` (default ``runs/headline``); with
``--work DIR`` the traces and every run's folder (``metrics.json``, ``jobs.csv``) stay in DIR.
While it runs: a line per finished run on stdout and, after 2 s, a progress bar with tqdm's
estimate of the time left on stderr (``TQDM_DISABLE=1`` turns it off; :mod:`lyra_gym.progress`).
"""

from __future__ import annotations

import argparse
import csv
import functools
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Sequence

from lyra_gym.harness.compare import RunSpec, check_policies, run_dirname, run_one
from lyra_gym.harness.report import mean_ci
from lyra_gym.model.config import load_config
from lyra_gym.progress import progress, write
from lyra_gym.run.simulate import load_profile_set
from lyra_gym.workloads.trace import load_trace, write_trace
from lyra_gym.workloads.tracegen import generate_trace

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {"paper": ROOT / "traces" / "lyra-15d-paper.yaml", "loan-scarce": ROOT / "traces" / "lyra-15d.yaml"}
PAPER = {"queue_ratio": "1.53x", "jct_ratio": "1.48x", "usage_diff_pp": "up to +25 %"}
USAGE_KEY, USAGE_FALLBACK = "gpu_usage_effective_overall", "gpu_usage_overall"
BACKFILL = {"off": False, "on": True}


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def make_trace(preset: str, seed: int, days: float | None, work: Path) -> Path:
    """The preset's trace at ``seed``, cut to jobs submitted before ``days`` days, as CSV in ``work``."""
    jobs = generate_trace(preset, seed)
    if days is not None:
        jobs = [j for j in jobs if j.submit_time < days * 86400.0]
    path = work / "traces" / f"{preset}_seed{seed}{'' if days is None else f'_days{days:g}'}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_trace(jobs, path)
    return path


@functools.lru_cache(maxsize=4)
def _inputs(config_path: str, trace_path: str):
    config = load_config(config_path)
    return config, load_trace(trace_path, known_models=load_profile_set(config).models)


def run_task(config_path: str, trace_path: str, spec: RunSpec) -> dict[str, Any]:
    """One simulation (top-level so a spawned worker can run it); returns its metrics."""
    config, jobs = _inputs(config_path, trace_path)
    return run_one(spec, jobs, config).metrics


def _ci(values: Sequence[float]) -> tuple[float, float | None]:
    return mean_ci(list(values))


def summarize(metrics: dict[tuple, dict[str, Any]], scenarios: Sequence[str], seeds: Sequence[int],
              comparisons: Sequence[str], reference: str) -> list[dict[str, Any]]:
    """One row per (scenario, comparison policy, backfill): paired per-seed ratios, mean and 95 % CI."""
    rows = []
    for scenario in scenarios:
        for policy in comparisons:
            for bf in BACKFILL:
                pairs = [(metrics[scenario, seed, reference, bf], metrics[scenario, seed, policy, bf]) for seed in seeds]
                usage_key = USAGE_KEY if all(USAGE_KEY in m for pair in pairs for m in pair) else USAGE_FALLBACK
                per_seed = {
                    "queue_ratio": [c["queue_mean_s"] / r["queue_mean_s"] for r, c in pairs],
                    "jct_ratio": [c["jct_mean_s"] / r["jct_mean_s"] for r, c in pairs],
                    "usage_diff_pp": [100.0 * (r[usage_key] - c[usage_key]) for r, c in pairs],
                    "events_per_job": [(r["scale_events"] + r["migrations"]) / r["jobs_total"] for r, _ in pairs],
                }
                row: dict[str, Any] = {"scenario": scenario, "comparison": policy, "backfill": bf,
                                       "seeds": len(seeds), "usage_key": usage_key}
                for key, values in per_seed.items():
                    row[key], row[key + "_ci95"] = _ci(values)
                row["comparison_queue_mean_s"] = _ci([c["queue_mean_s"] for _, c in pairs])[0]
                row["reference_queue_mean_s"] = _ci([r["queue_mean_s"] for r, _ in pairs])[0]
                row["comparison_jct_mean_s"] = _ci([c["jct_mean_s"] for _, c in pairs])[0]
                row["reference_jct_mean_s"] = _ci([r["jct_mean_s"] for r, _ in pairs])[0]
                rows.append(row)
    return rows


def _pm(mean: float, half: float | None, digits: int, unit: str = "") -> str:
    return f"{mean:.{digits}f}{unit}" + ("" if half is None else f" ± {half:.{digits}f}")


def markdown(rows: Sequence[dict[str, Any]], reference: str) -> str:
    """The table as markdown: mean ± 95 % CI half-width over seeds, the paper's figure beside each."""
    header = ["scenario", "comparison", "backfill", "seeds", "queue mean ratio (C/lyra)", "paper",
              "JCT mean ratio (C/lyra)", "paper", "usage diff (lyra - C, pp)", "paper",
              f"{reference} rescale+migration per job", "C / lyra queue mean (s)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    fallback = False
    for r in rows:
        mark = "" if r["usage_key"] == USAGE_KEY else " *"
        fallback |= bool(mark)
        cells = [r["scenario"], r["comparison"], r["backfill"], str(r["seeds"]),
                 _pm(r["queue_ratio"], r["queue_ratio_ci95"], 2, "x"), PAPER["queue_ratio"],
                 _pm(r["jct_ratio"], r["jct_ratio_ci95"], 2, "x"), PAPER["jct_ratio"],
                 _pm(r["usage_diff_pp"], r["usage_diff_pp_ci95"], 1) + mark, PAPER["usage_diff_pp"],
                 _pm(r["events_per_job"], r["events_per_job_ci95"], 3),
                 f"{r['comparison_queue_mean_s']:.0f} / {r['reference_queue_mean_s']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"C = comparison policy; {reference} runs with C's backfill setting. ± = 95 % Student-t "
                 "half-width over seeds (paired, per-seed ratios); none with one seed. Usage = "
                 f"`{USAGE_KEY}`." + (f" * = `{USAGE_FALLBACK}` (runs without `{USAGE_KEY}`)." if fallback else ""))
    return "\n".join(lines) + "\n"


def read_csv(path: str) -> list[dict[str, Any]]:
    """The rows of a ``headline.csv``: numbers parsed, an empty interval (one seed) as None."""
    text = ("scenario", "comparison", "backfill", "usage_key")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [{k: (v if k in text else int(v) if k == "seeds" else None if v == "" else float(v)) for k, v in r.items()}
            for r in rows]


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _label(key: tuple) -> str:
    return f"{key[0]} seed {key[1]} {key[2]} backfill={key[3]}"


def run_all(tasks: list[tuple[tuple, str, str, RunSpec]], n_jobs: int) -> dict[tuple, dict[str, Any]]:
    """Run every (key, config, trace, spec) task, serially or in ``n_jobs`` spawned processes: a line
    per finished run on stdout, and a progress bar with the time left on stderr
    (:func:`lyra_gym.progress.progress`)."""
    done: dict[tuple, dict[str, Any]] = {}
    start = time.perf_counter()

    def report(key: tuple) -> None:
        m = done[key]
        write(f"[{len(done)}/{len(tasks)} {time.perf_counter() - start:6.0f} s] {_label(key)}: "
              f"queue mean {m['queue_mean_s']:.0f} s, JCT mean {m['jct_mean_s']:.0f} s", file=sys.stdout)
        bar.update(1)

    with progress(len(tasks)) as bar:
        if n_jobs <= 1:
            for key, config_path, trace_path, spec in tasks:
                bar.set_description_str(_label(key), refresh=False)
                done[key] = run_task(config_path, trace_path, spec)
                report(key)
            return done
        context = multiprocessing.get_context("spawn")
        bar.set_description_str(f"{min(n_jobs, len(tasks))} processes", refresh=False)
        with ProcessPoolExecutor(min(n_jobs, len(tasks)), mp_context=context) as pool:
            futures = {pool.submit(run_task, c, t, spec): key for key, c, t, spec in tasks}
            try:
                for future in as_completed(futures):
                    done[futures[future]] = future.result()
                    report(futures[future])
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Lyra vs baseline(-min), backfill off/on, on lyra-15d: "
                                                 "the paper's headline ratios with 95 % intervals over seeds.")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"subset of {','.join(SCENARIOS)}")
    parser.add_argument("--seeds", default="0,1,2,3", help="comma-separated (trace seed = simulation seed)")
    parser.add_argument("--policies", default="baseline,baseline-min,lyra",
                        help="policies to run; all but --reference are comparison points")
    parser.add_argument("--reference", default="lyra")
    parser.add_argument("--preset", default="lyra-15d", help="trace preset (default lyra-15d)")
    parser.add_argument("--days", type=float, default=None, help="keep only jobs submitted in the first D days")
    parser.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default 1)")
    parser.add_argument("--work", default=None, help="keep traces and run folders here (default: a temp dir)")
    parser.add_argument("--out", default="runs/headline", help="where headline.csv / headline.md go")
    parser.add_argument("--from-csv", metavar="CSV", help="print the table of a headline.csv written before "
                                                          "(docs/headline.csv); runs nothing")
    args = parser.parse_args(argv)
    if args.from_csv:
        print(markdown(read_csv(args.from_csv), args.reference), end="")
        return 0

    scenarios, policies = _csv(args.scenarios), _csv(args.policies)
    seeds = [int(s) for s in _csv(args.seeds)]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown or not scenarios or not seeds:
        parser.error(f"--scenarios must name some of {', '.join(SCENARIOS)}; --seeds must not be empty")
    if args.reference not in policies or len(policies) < 2:
        parser.error(f"--policies must include the reference {args.reference!r} and a comparison point")
    if args.days is not None and args.days <= 0:
        parser.error("--days must be > 0")
    comparisons = [p for p in policies if p != args.reference]
    try:  # fail fast: an unknown policy or one without a `backfill` parameter
        for bf in BACKFILL.values():
            check_policies(policies, {p: {"backfill": bf} for p in policies})
    except (ValueError, LookupError) as err:
        parser.error(f"{err} (choose the policies with --policies)")

    with tempfile.TemporaryDirectory(prefix="headline-") as tmp:
        work = Path(args.work or tmp)
        traces = {seed: make_trace(args.preset, seed, args.days, work) for seed in seeds}
        tasks = []
        for scenario in scenarios:
            for seed in seeds:
                for policy in policies:
                    for bf, value in BACKFILL.items():
                        out_dir = None if args.work is None else str(
                            work / "runs" / scenario / f"{run_dirname(policy)}_backfill-{bf}" / f"seed{seed}")
                        spec = RunSpec(policy, seed, {"backfill": value}, out_dir)
                        tasks.append(((scenario, seed, policy, bf), str(SCENARIOS[scenario]), str(traces[seed]), spec))
        print(f"{len(tasks)} runs: scenarios {scenarios}, seeds {seeds}, policies {policies}, backfill off/on, "
              f"days {args.days or 'all'}, {args.jobs} process(es)", flush=True)
        metrics = run_all(tasks, args.jobs)

    rows = summarize(metrics, scenarios, seeds, comparisons, args.reference)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "headline.csv")
    table = markdown(rows, args.reference)
    days = "all 15 days" if args.days is None else f"first {args.days:g} day(s)"
    (out / "headline.md").write_text(
        f"# Headline: {args.reference} vs comparison points, preset {args.preset} ({days}), seeds "
        f"{','.join(map(str, seeds))}\n\n{table}", encoding="utf-8")
    print()
    print(table)
    print(f"wrote {out / 'headline.csv'} and {out / 'headline.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
