"""Our engine beside the Pollux artifact's own simulator, per application (issue 25).

Run from the repository root::

    python benchmarks/pollux_crosscheck.py [--no-workload] [--json PATH]

Two parts, each printed as a table of ours / artifact:

1. **One job alone**: every (application, replicas, batch) of workload 6, submitted at
   0 on ``traces/pollux-testbed-t4.yaml`` and run by ``tiresias`` (``mode=artifact``; it
   never changes a job's size or batch) at the workload's size and batch, converted as
   ``lyra-gym trace convert --format pollux`` does. The artifact's run time for the same
   job (``Job(..., target_num_replicas=n, target_batch_size=b)`` alone, 60 s steps) is in
   ``benchmarks/pollux_reference.json``. Both charge 30 s at the start.
2. **Workload 6** (``tests/fixtures/pollux/workload-6.csv``, seed 0): ``tiresias`` with the
   artifact's settings (``TIRESIAS``: ``mode=artifact``, ``thresholds=57600``, ``queue_order=arrival``,
   ``artifact_placement=most-free``, ``rounds_only``) mean JCT overall and per
   application beside the artifact's Tiresias (60 s rounds), and ``pollux`` beside the
   artifact's README figure (2,446 s), with its mean per application (ours only: the
   artifact publishes only the overall mean); ``--ablate`` adds pollux's switches and tiresias
   with each of its switches turned back.

The reference numbers are outputs of the artifact's simulator (petuum/adaptdl, branch
``osdi21-artifact``, Apache-2.0), copied with their source into
``benchmarks/pollux_reference.json``; nothing of its code is here.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "pollux_reference.json"
WORKLOAD = ROOT / "tests" / "fixtures" / "pollux" / "workload-6.csv"
CONFIG = ROOT / "traces" / "pollux-testbed-t4.yaml"
PROFILE = ROOT / "traces" / "pollux-t4-profile.json"
#: The Pollux artifact's Tiresias (``simulator/tiresias.py``): two queues at 16 GPU-hours, a queue
#: kept in arrival order, placement on the servers with the most free GPUs, decisions in 60 s rounds.
TIRESIAS = {"mode": "artifact", "thresholds": 57600, "queue_order": "arrival",
            "artifact_placement": "most-free", "rounds_only": True}


def _config():
    from lyra_gym.model.config import load_config

    cwd = os.getcwd()
    os.chdir(ROOT)  # the config's profile path is relative to the repository root
    try:
        return load_config(CONFIG)
    finally:
        os.chdir(cwd)


def _convert(rows: list[dict]) -> list:
    from lyra_gym.workloads.realtraces import load_pollux

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["name", "time", "application", "num_replicas", "batch_size"])
    for r in rows:
        w.writerow([r["name"], r["time"], r["application"], r["num_replicas"], r["batch_size"]])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.csv"
        path.write_text(buf.getvalue(), encoding="utf-8")
        return list(load_pollux(path, profiles=PROFILE))


def isolated(reference: dict, config) -> list[dict]:
    """One row per isolated job: ours and the artifact's run time (s)."""
    from lyra_gym.run.simulate import simulate

    out = []
    for ref in reference["isolated"]:
        name = f"{ref['application']}-0"
        jobs = _convert([{"name": name, "time": 0, "application": ref["application"],
                          "num_replicas": ref["num_replicas"], "batch_size": ref["batch_size"]}])
        result = simulate(jobs, "tiresias", config, seed=0, policy_params=TIRESIAS)
        ours = result.jobs[0]["jct_s"]
        out.append({**{k: ref[k] for k in ("application", "num_replicas", "batch_size")},
                    "ours_s": ours, "artifact_s": ref["completion_s"],
                    "ratio": ours / ref["completion_s"] if ours is not None else None})
    return out


def _app(job_id: str) -> str:
    return job_id.rsplit("-", 1)[0]


#: ``--ablate``: pollux variants run besides the default (label -> policy parameters).
POLLUX_ABLATIONS = {
    "pollux batch_range=workload (the old rule: from the workload's batch up)": {"batch_range": "workload"},
    "pollux fixed_batch_models=() (ncf adapts too)": {"fixed_batch_models": ()},
}


#: ``--ablate``: tiresias variants, each one switch of ``TIRESIAS`` turned back (label -> parameters).
TIRESIAS_ABLATIONS = {
    "tiresias queue_order=running-first (the Tiresias artifact's)": {**TIRESIAS, "queue_order": "running-first"},
    "tiresias artifact_placement=best-fit": {**TIRESIAS, "artifact_placement": "best-fit"},
    "tiresias rounds_only=False (events and 60 s ticks)": {**TIRESIAS, "rounds_only": False},
    "tiresias before issue 25 item A (mode=artifact, thresholds=57600 only)": {"mode": "artifact", "thresholds": 57600},
}


def workload(reference: dict, config, ablate: bool = False) -> dict:
    """Workload 6: tiresias (artifact settings) per application and pollux, ours beside the artifact's."""
    from lyra_gym.run.simulate import simulate

    rows = list(csv.DictReader(open(WORKLOAD, encoding="utf-8")))
    jobs = _convert(rows)
    out = {}
    runs = [("tiresias", "tiresias", TIRESIAS), ("pollux", "pollux", {})]
    if ablate:
        runs += [(label, "pollux", params) for label, params in POLLUX_ABLATIONS.items()]
        runs += [(label, "tiresias", params) for label, params in TIRESIAS_ABLATIONS.items()]
    for label, policy, params in runs:
        result = simulate(jobs, policy, config, seed=0, policy_params=params)
        by_app = defaultdict(list)
        for r in result.jobs:
            if r["jct_s"] is not None:
                by_app[_app(r["job_id"])].append(r["jct_s"])
        out[label] = {"mean_jct_s": result.metrics["jct_mean_s"],
                       "by_application": {a: sum(v) / len(v) for a, v in sorted(by_app.items())},
                       "gpu_usage_goodput": result.metrics.get("gpu_usage_goodput")}
    ref60 = next(r for r in reference["workload6_tiresias"] if r["interval_s"] == 60)
    out["artifact"] = {"tiresias": ref60, "pollux_mean_jct_s": reference["workload6_pollux_mean_jct_s"]}
    return out


def _fmt(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-workload", action="store_true", help="only the one-job-alone table")
    parser.add_argument("--ablate", action="store_true", help="also run pollux's ablations (POLLUX_ABLATIONS)")
    parser.add_argument("--json", help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    # The artifact charges 30 s per (re)allocation to every policy, Tiresias included, so the
    # testbed's restart_s = 30 is meant here; tiresias' warning about it is for its own artifact.
    warnings.filterwarnings("ignore", message="tiresias mode='artifact' assumes free preemption")
    reference = json.loads(REFERENCE.read_text(encoding="utf-8"))
    config = _config()
    iso = isolated(reference, config)
    print("One job alone (tiresias artifact mode, 16 x 4 T4), run time s")
    print("| application | GPUs | batch | ours | artifact | ours / artifact |")
    print("|---|---|---|---|---|---|")
    for r in iso:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        print(f"| {r['application']} | {r['num_replicas']} | {r['batch_size']} | {_fmt(r['ours_s'])} | "
              f"{_fmt(r['artifact_s'])} | {ratio} |")
    result = {"isolated": iso}
    if not args.no_workload:
        w6 = workload(reference, config, args.ablate)
        result["workload6"] = w6
        ref = w6["artifact"]["tiresias"]
        print("\nWorkload 6, seed 0, mean JCT s")
        print("| | ours | artifact | ours / artifact |")
        print("|---|---|---|---|")
        t = w6["tiresias"]
        print(f"| tiresias (artifact settings), all | {_fmt(t['mean_jct_s'])} | {_fmt(ref['mean_jct_s'])} | "
              f"{t['mean_jct_s'] / ref['mean_jct_s']:.2f} |")
        for app, theirs in ref["by_application"].items():
            mine = t["by_application"].get(app)
            ratio = "-" if mine is None else f"{mine / theirs:.2f}"
            print(f"| tiresias, {app} | {_fmt(mine)} | {_fmt(theirs)} | {ratio} |")
        for label in (k for k in w6 if k.startswith("tiresias ")):
            v = w6[label]
            print(f"| {label}, all | {_fmt(v['mean_jct_s'])} | {_fmt(ref['mean_jct_s'])} | "
                  f"{v['mean_jct_s'] / ref['mean_jct_s']:.2f} |")
            print("|   per application |" + ", ".join(
                f" {app} {v['by_application'][app] / theirs:.2f}" for app, theirs in ref["by_application"].items())
                  + " | | |")
        pref = w6["artifact"]["pollux_mean_jct_s"]
        labels = [k for k in w6 if k.startswith("pollux")]
        for label in labels:
            p = w6[label]
            print(f"| {label}, all | {_fmt(p['mean_jct_s'])} | {_fmt(pref)} | {p['mean_jct_s'] / pref:.2f} |")
        print("\nPollux per application, mean JCT s (the artifact publishes only the overall mean)")
        print("| application | " + " | ".join(labels) + " |")
        print("|---|" + "---|" * len(labels))
        for app in w6["pollux"]["by_application"]:
            print(f"| {app} | " + " | ".join(_fmt(w6[k]["by_application"].get(app)) for k in labels) + " |")
        for label in ("tiresias", *labels):  # ablated tiresias runs left out
            if w6[label]["gpu_usage_goodput"] is not None:
                print(f"gpu_usage_goodput, {label}: {w6[label]['gpu_usage_goodput']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
