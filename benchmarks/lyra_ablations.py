"""Lyra's modelling choices, one at a time, on the calibrated ``lyra-15d`` preset (both scenarios).

Run from the repository root::

    python benchmarks/lyra_ablations.py --jobs 2                 # seed 0, all 15 days, both scenarios
    python benchmarks/lyra_ablations.py --days 3 --seeds 0,1     # quicker

Each variant is ``lyra`` with one parameter changed (``baselines/lyra.py`` documents them) or
with the engine's rescale and migration stalls set to 0 s, next to its ablations and the
comparison points. Printed (and written to ``--out``) as one markdown table per scenario: mean
over seeds of queuing, JCT, effective usage, events per job (rescales + migrations) and
preemptions. Traces and runs as in ``benchmarks/headline.py``. While it runs, after 2 s, a
progress bar with tqdm's estimate of the time left on stderr (``TQDM_DISABLE=1`` turns it off).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from headline import SCENARIOS, make_trace

from lyra_gym.model.config import load_config
from lyra_gym.progress import progress
from lyra_gym.run.simulate import load_profile_set, simulate
from lyra_gym.workloads.trace import load_trace

#: name -> (policy, scheduler parameters, overhead overrides in seconds, other config fields)
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, float], dict[str, Any]]] = {
    "lyra": ("lyra", {}, {}, {}),
    "lyra loaned_rule=overflow": ("lyra", {"loaned_rule": "overflow"}, {}, {}),
    "lyra move_back=false": ("lyra", {"move_back": False}, {}, {}),
    "lyra flex_horizon=completion": ("lyra", {"flex_horizon": "completion"}, {}, {}),
    "lyra with 0 s rescale and migration": ("lyra", {}, {"rescale_s": 0.0, "migrate_s": 0.0}, {}),
    "lyra scaling=throughput (no statistical efficiency)": ("lyra", {}, {}, {"scaling": "throughput"}),
    "lyra-noloan": ("lyra-noloan", {}, {}, {}),
    "lyra-noelastic": ("lyra-noelastic", {}, {}, {}),
    "baseline": ("baseline", {}, {}, {}),
    "baseline-min": ("baseline-min", {}, {}, {}),
}
COLUMNS = ("queue_mean_s", "jct_mean_s", "gpu_usage_effective_overall", "events_per_job", "preemptions")


def run_variant(config_path: str, trace_path: str, variant: str, seed: int) -> dict[str, float]:
    """One simulation of ``variant`` (top-level for spawned workers); the table's columns."""
    policy, params, overheads, fields = VARIANTS[variant]
    config = dataclasses.replace(load_config(config_path), **fields)
    if overheads:
        config = dataclasses.replace(config, overheads=dataclasses.replace(config.overheads, **overheads))
    jobs = load_trace(trace_path, known_models=load_profile_set(config).models)
    m = simulate(jobs, policy, config, seed=seed, policy_params=params).metrics
    return {**{k: m[k] for k in COLUMNS if k in m},
            "events_per_job": (m["scale_events"] + m["migrations"]) / m["jobs_total"]}


def run_calls(keys: Sequence[tuple[str, str, int]], calls: Sequence[tuple[str, str, str, int]],
              n_jobs: int) -> list[dict[str, float]]:
    """:func:`run_variant` of every call, in order, serially or in ``n_jobs`` spawned processes,
    with a progress bar on stderr (:func:`lyra_gym.progress.progress`)."""
    with progress(len(calls)) as bar:
        if n_jobs <= 1:
            outputs = []
            for (scenario, variant, seed), call in zip(keys, calls):
                bar.set_description_str(f"{scenario} {variant} seed {seed}", refresh=False)
                outputs.append(run_variant(*call))
                bar.update(1)
            return outputs
        bar.set_description_str(f"{n_jobs} processes", refresh=False)
        with ProcessPoolExecutor(n_jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_variant, *call) for call in calls]
            try:
                for future in as_completed(futures):
                    future.result()  # a failed run stops the command now, not after the rest
                    bar.update(1)
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
            return [f.result() for f in futures]


def table(results: dict[tuple[str, str], list[dict[str, float]]], scenario: str, variants: Sequence[str]) -> str:
    lines = ["| variant | queue mean s | JCT mean s | effective usage (both clusters) | events per job | preemptions |",
             "|---|---|---|---|---|---|"]
    for variant in variants:
        runs = results[scenario, variant]
        mean = {k: float(np.mean([r[k] for r in runs])) for k in COLUMNS}
        lines.append(f"| {variant} | {mean['queue_mean_s']:,.0f} | {mean['jct_mean_s']:,.0f} | "
                     f"{mean['gpu_usage_effective_overall']:.3f} | {mean['events_per_job']:.2f} | {mean['preemptions']:,.0f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Lyra's modelling choices one at a time on lyra-15d.")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="subset of the variant names")
    parser.add_argument("--days", type=float, default=None, help="keep only jobs submitted in the first D days")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default="runs/ablations", help="where ablations.md goes")
    args = parser.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    variants = [v for v in args.variants.split(",") if v]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    bad = [s for s in scenarios if s not in SCENARIOS] + [v for v in variants if v not in VARIANTS]
    if bad or not seeds:
        parser.error(f"unknown scenario or variant: {bad}; scenarios {list(SCENARIOS)}, variants {list(VARIANTS)}")

    with tempfile.TemporaryDirectory(prefix="ablations-") as tmp:
        traces = {seed: str(make_trace("lyra-15d", seed, args.days, Path(tmp))) for seed in seeds}
        keys = [(s, v, seed) for s in scenarios for v in variants for seed in seeds]
        calls = [(str(SCENARIOS[s]), traces[seed], v, seed) for s, v, seed in keys]
        outputs = run_calls(keys, calls, args.jobs)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for (scenario, variant, _), output in zip(keys, outputs):
        results.setdefault((scenario, variant), []).append(output)
    days = "15 days" if args.days is None else f"first {args.days:g} days"
    text = "\n\n".join(f"### {s} ({days}, seeds {args.seeds})\n\n{table(results, s, variants)}" for s in scenarios)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ablations.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
