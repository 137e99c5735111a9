"""The leaderboard: submissions checked by rerunning a sample of their windows, and a page per suite.

A submission is a YAML file (docs/leaderboard.md, "Submitting")::

    name: cluster-history-extras         # the policy's name in the CSV
    csv: ../bench-suite-v1-cluster-history-extras.csv   # python -m lyra_agents.benchmark --out CSV
    load: model:agents/pretrained/cluster-history-extras   # what rebuilds it: a registry name,
                                         # model:PATH, policy:MODULE:FACTORY or MODULE:CLASS; or a
                                         # mapping {CSV run label: spec} for several training seeds
    trust: false                         # let model:/rllib: files unpickle (code in them runs)

Paths in it are relative to the submission file (``model:`` paths to the repository root, as the
benchmark's). The CSV carries its own provenance: ``suite``, ``lyra_gym_version`` and
``lyra_gym_commit`` in every row.

``validate SUBMISSION``: the CSV is read and checked as a whole (one suite; every window row's
``jct_vs_lyra`` is its JCT over lyra's on that window; every aggregate row's IQM is the IQM of its
window rows), then ``--sample`` (trace seed, window) units, drawn with ``--seed``, are simulated again
with this code: lyra, the submitted policy's runs and the isolated-job bound, whose mean JCTs must
equal the CSV's to ``--rtol``. Exit status 0 (accepted) or 1 (refused: one line per problem).

``render``: docs/leaderboard.md from the committed CSVs: per suite, the heuristics and bound of
``docs/bench-suite-SUITE-all.csv`` and every submission of ``docs/submissions/*.yaml``.

    python -m lyra_agents.leaderboard validate docs/submissions/cluster-history-extras.yaml
    python -m lyra_agents.leaderboard render
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import yaml

from lyra_agents.bench_output import METRICS, SCORE, add_scores, aggregate
from lyra_agents.bench_stats import iqm
from lyra_agents.headroom import BOUND, REFERENCE_KINDS
from lyra_agents.shipped import agent_path_beside, shipped_agent
from lyra_gym.errors import LyraGymError
from lyra_gym.outputs import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SUBMISSIONS = DOCS / "submissions"
KEYS = {"name", "csv", "load", "trust"}


class SubmissionError(LyraGymError):
    """A submission file that cannot be read: one line naming the field, exit status 2."""


# ---------------------------------------------------------------------- reading
def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """A benchmark CSV's rows, numbers parsed (old CSVs with ``score_vs_random`` read too)."""
    import csv

    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        for key in ("window", "trace_seed", "window_seed", "reps", "cells", "units"):
            row[key] = int(row[key]) if row.get(key) not in (None, "") else 0
        for key in ("jct_mean_s", "jct_vs_lyra", SCORE, "iqm", "ci_low", "ci_high"):
            row[key] = float(row[key]) if row.get(key) not in (None, "") else math.nan
    return rows


def read_submission(path: str | Path) -> dict[str, Any]:
    """The submission's fields, ``csv`` resolved beside it; :class:`SubmissionError` naming a bad field."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        why = getattr(err, "strerror", None) or type(err).__name__
        raise SubmissionError(f"{path}: cannot read it ({why})") from None
    if not isinstance(data, dict):
        raise SubmissionError(f"{path}: expected a mapping with keys {', '.join(sorted(KEYS))}")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise SubmissionError(f"{path}: {unknown[0]}: unknown key (known: {', '.join(sorted(KEYS))})")
    for key in ("name", "csv", "load"):
        if not data.get(key):
            raise SubmissionError(f"{path}: {key}: required")
    if not isinstance(data["load"], (str, dict)):
        raise SubmissionError(f"{path}: load: a policy spec or a mapping {{run label: spec}}")
    csv_path = (path.parent / str(data["csv"])).resolve()
    if not csv_path.is_file():
        raise SubmissionError(f"{path}: csv: {data['csv']} not found beside the submission")
    return {**data, "csv": csv_path, "trust": bool(data.get("trust", False))}


# ---------------------------------------------------------------------- validate
def check_rows(rows: Sequence[dict[str, Any]], name: str) -> list[str]:
    """Problems of a CSV read whole: several suites, no rows of ``name``, a ``jct_vs_lyra`` that is
    not JCT / lyra's JCT on its window, an aggregate IQM that is not its window rows' IQM."""
    problems = []
    suites = {r.get("suite") for r in rows}
    if len(suites) != 1:
        problems.append(f"rows of several suites: {sorted(map(str, suites))}")
    if not any(r["policy"] == name and r["kind"] == "window" for r in rows):
        problems.append(f"no window rows of policy {name!r}")
    lyra = {_unit(r): r["jct_mean_s"] for r in rows if r["policy"] == "lyra" and r["kind"] == "window"}
    for i, r in enumerate(rows, start=2):
        if r["kind"] in ("window", *REFERENCE_KINDS):
            ratio = r["jct_mean_s"] / lyra.get(_unit(r), math.nan)
            if not math.isclose(ratio, r["jct_vs_lyra"], rel_tol=1e-12):
                problems.append(f"line {i}: jct_vs_lyra {r['jct_vs_lyra']!r} is not jct_mean_s / lyra's ({ratio!r})")
        elif r["kind"] == "aggregate" and r["metric"] == "jct_vs_lyra":
            values = [w["jct_vs_lyra"] for w in rows if w["kind"] == "window" and w["policy"] == r["policy"]]
            if not math.isclose(iqm(values), r["iqm"], rel_tol=1e-12):
                problems.append(f"line {i}: the IQM of {r['policy']} is {r['iqm']!r}, its window rows give "
                                f"{iqm(values)!r}")
    return problems


def _unit(row: dict[str, Any]) -> tuple[str, int, int]:
    return row["scenario"], row["trace_seed"], row["window"]


def sample_units(rows: Sequence[dict[str, Any]], count: int, seed: int) -> list[tuple[str, int, int]]:
    """``count`` distinct (scenario, trace seed, window) units of the CSV (all if fewer), drawn with ``seed``."""
    units = sorted({_unit(r) for r in rows if r["kind"] == "window"})
    picked = np.random.default_rng(seed).permutation(len(units))[:count]
    return [units[i] for i in sorted(picked)]


def rerun(submission: dict[str, Any], rows: Sequence[dict[str, Any]], units: Sequence[tuple[str, int, int]],
          rtol: float) -> list[str]:
    """Simulate ``units`` again (lyra, the submission's runs, the bound) and name every mean JCT
    that differs from the CSV's by more than ``rtol`` (relative)."""
    from lyra_agents import benchmark
    from lyra_agents.suite import get_suite
    from lyra_gym.run.simulate import load_profile_set

    suite = get_suite(str(rows[0]["suite"]))
    runs = list(dict.fromkeys(r["run"] for r in rows if r["policy"] == submission["name"] and r["kind"] == "window"))
    policies = [benchmark.resolve_policies(["lyra"], [], 0)[0], _policy(submission, runs)]
    problems = []
    for scenario_name, trace_seed, index in units:
        scenario = suite.get(scenario_name)
        config = scenario.sim_config()
        trace = scenario.build_trace(trace_seed)
        window = next(w for w in scenario.test_windows(trace) if w.index == index)
        jct = benchmark.window_jct(policies, scenario_name, window, window.jobs(trace), config,
                                    load_profile_set(config), None, bounds=True)
        for r in rows:
            key = (r["policy"], r["run"] if r["policy"] == submission["name"] else "")
            if _unit(r) != (scenario_name, trace_seed, index) or key[0] not in ("lyra", BOUND, submission["name"]):
                continue
            got = jct.get(key, math.nan)
            if not math.isclose(got, r["jct_mean_s"], rel_tol=rtol):
                problems.append(f"{scenario_name} seed {trace_seed} window {index}: {key[0]} {key[1]}".rstrip()
                                + f": the CSV says {r['jct_mean_s']!r} s, a rerun gives {got!r} s")
    return problems


def _policy(submission: dict[str, Any], runs: Sequence[str]) -> Any:
    """The submission's policy, one run per CSV run label, each built from its ``load`` spec."""
    from lyra_agents import benchmark

    load = submission["load"]
    specs = {run: (load if isinstance(load, str) else load.get(run)) for run in runs}
    missing = [run for run, spec in specs.items() if not spec]
    if missing:
        raise SubmissionError(f"load: no spec for the CSV's run {missing[0]!r}")
    made = []
    for run, spec in specs.items():
        spec = str(spec)
        if spec.startswith("model:"):
            found = shipped_agent(agent_path_beside(spec[len("model:"):], ROOT))  # pretrained/NAME: shipped
            path = str(found.resolve()) + ("?trust=1" if submission["trust"] else "")
            made.append((run, benchmark.always(benchmark.load_model_scheduler(path, submission["name"]))))
        else:
            made.append((run, benchmark.resolve_policies([spec], [], 0)[-1].runs[0][1]))
    return benchmark.Policy(submission["name"], made)


def validate(path: str | Path, sample: int = 2, seed: int = 0, rtol: float = 1e-9) -> list[str]:
    """Every problem of submission ``path`` (none: accepted)."""
    submission = read_submission(path)
    rows = read_csv(submission["csv"])
    problems = check_rows(rows, submission["name"])
    if not problems:
        problems = rerun(submission, rows, sample_units(rows, sample, seed), rtol)
    return problems


# ---------------------------------------------------------------------- render
def _entries(suite: str) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(name, kind, rows in JCT / lyra units) of the suite's heuristics, bound and submissions."""
    base = read_csv(DOCS / f"bench-suite-{suite}-all.csv")
    from lyra_gym.sim import scheduler as registry

    heuristics = [p for p in dict.fromkeys(r["policy"] for r in base) if p in registry.available()]
    out = [(h, "heuristic", [r for r in base if r["policy"] == h and r["kind"] == "window"]) for h in heuristics]
    out.append((BOUND, "bound", [{**r, "kind": "window"} for r in base if r["kind"] == "bound"]))
    for path in sorted(SUBMISSIONS.glob("*.yaml")):
        sub = read_submission(path)
        rows = read_csv(sub["csv"])
        if rows and rows[0].get("suite") == suite:
            mine = [r for r in rows if r["policy"] == sub["name"] and r["kind"] == "window"]
            if not mine:
                raise SubmissionError(f"{path}: no window rows of policy {sub['name']!r}")
            out.append((sub["name"], "agent", mine))
    return out


def leaderboard_rows(suite: str, reps: int = 2000) -> list[dict[str, Any]]:
    """Per entry: scenarios covered, IQM [CI] of JCT / lyra and of the headroom closed against the
    suite's best heuristic per scenario (from the heuristics' CSV, in JCT / lyra units, so a
    submission measured at another commit is compared on its own lyra), ranked by JCT / lyra."""
    entries = _entries(suite)
    base = [r for _n, kind, rows in entries if kind != "agent" for r in rows]
    bound = [{**r, "kind": "bound"} for r in base if r["policy"] == BOUND]
    heuristics = [n for n, kind, _r in entries if kind == "heuristic"]
    out = []
    for name, kind, rows in entries:
        scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
        mine = [{**r, "jct_mean_s": r["jct_vs_lyra"]} for r in rows]
        refs = [{**r, "jct_mean_s": r["jct_vs_lyra"]} for r in base + bound
                if r["scenario"] in scenarios and r["policy"] != name]
        scored = [r for r in add_scores(mine + refs, heuristics) if r["policy"] == name and r["kind"] == "window"]
        agg = {a["metric"]: a for a in aggregate(scored, reps, 0, "units")}
        out.append({"name": name, "kind": kind, "scenarios": scenarios, **{m: agg[m] for m in METRICS},
                    "commit": str(rows[0].get("lyra_gym_commit", ""))[:10] if rows else ""})
    return sorted(out, key=lambda e: (-len(e["scenarios"]), e["jct_vs_lyra"]["iqm"]))


def _ci(a: dict[str, Any]) -> str:
    return "n/a" if math.isnan(a["iqm"]) else f"{a['iqm']:.3f} [{a['ci_low']:.3f}, {a['ci_high']:.3f}]"


def render(suites: Sequence[str] = ("v1", "v1.1")) -> str:
    """docs/leaderboard.md's text."""
    lines = ["# Leaderboard", "",
             "Generated by `python -m lyra_agents.leaderboard render` from the committed benchmark CSVs "
             "(`docs/bench-suite-SUITE-all.csv` for the heuristics and the isolated-job bound, "
             "`docs/submissions/*.yaml` for the agents); do not edit by hand. Lower JCT / lyra is better; "
             "headroom closed: 0 = the scenario's best heuristic, 1 = the isolated-job bound "
             "(formulas: [benchmark.md](benchmark.md#scores)). IQM [95 % CI] over (trace seed, window) "
             "units x runs of the scenarios an entry covers; entries covering fewer scenarios are not "
             "comparable with the whole-suite ones and are listed after them.", ""]
    for suite in suites:
        lines += [f"## Suite {suite}", "",
                  "| # | entry | kind | scenarios | JCT/lyra IQM [95 % CI] | headroom closed IQM [95 % CI] | commit |",
                  "|---:|---|---|---|---|---|---|"]
        entries = leaderboard_rows(suite)
        most = max(len(e["scenarios"]) for e in entries)
        for i, e in enumerate(entries, start=1):
            covered = f"all {most}" if len(e["scenarios"]) == most else ", ".join(e["scenarios"])
            lines.append(f"| {i} | {e['name']} | {e['kind']} | {covered} | {_ci(e['jct_vs_lyra'])} | "
                         f"{_ci(e[SCORE])} | {e['commit']} |")
        lines.append("")
    lines += _submitting()
    return "\n".join(lines)


def _submitting() -> list[str]:
    return ["## Submitting", "",
            "1. Benchmark the policy on a suite: `python -m lyra_agents.benchmark --suite v1 "
            "--policies lyra,random,model:PATH --out docs/bench-suite-v1-NAME.csv` (or `--agent NAME=RUN,RUN` "
            "for several training seeds). Every row carries `suite`, `lyra_gym_version` and `lyra_gym_commit`.",
            "2. Write `docs/submissions/NAME.yaml`: `name` (the policy's name in the CSV), `csv` (relative to the "
            "YAML file), `load` (a registry name, `model:PATH`, `policy:MODULE:FACTORY`, `MODULE:CLASS`, or a "
            "mapping from each CSV run label to one of those), `trust` (let `model:` files unpickle).",
            "3. `python -m lyra_agents.leaderboard validate docs/submissions/NAME.yaml` checks the CSV whole "
            "and reruns `--sample` windows (default 2, `--seed 0`): lyra, the policy and the bound must give the "
            "CSV's mean JCT (`--rtol`, default 1e-9). Then `python -m lyra_agents.leaderboard render`.", ""]


# ---------------------------------------------------------------------- command line
def main(argv: Sequence[str] | None = None) -> int:
    """``validate SUBMISSION`` (0 accepted, 1 refused, 2 unreadable) or ``render`` (writes ``--out``)."""
    parser = argparse.ArgumentParser(prog="python -m lyra_agents.leaderboard", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check a submission: its CSV whole and a sample of windows rerun")
    v.add_argument("submission")
    v.add_argument("--sample", type=int, default=2, help="(trace seed, window) units to rerun (default 2)")
    v.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    v.add_argument("--rtol", type=float, default=1e-9, help="relative tolerance of a rerun's mean JCT (default 1e-9)")
    r = sub.add_parser("render", help="write the leaderboard page from the committed CSVs")
    r.add_argument("--out", default=str(DOCS / "leaderboard.md"), help="default docs/leaderboard.md")
    args = parser.parse_args(argv)
    try:
        if args.command == "render":
            atomic_write_text(args.out, render())
            print(f"wrote {args.out}")
            return 0
        if args.sample < 1 or args.seed < 0 or not args.rtol >= 0:
            raise SubmissionError("--sample >= 1, --seed >= 0 and --rtol >= 0 expected")
        problems = validate(args.submission, args.sample, args.seed, args.rtol)
    except LyraGymError as err:
        print(f"lyra_agents.leaderboard: error: {err}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"refused: {problem}")
    if not problems:
        print(f"accepted: {args.submission}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
