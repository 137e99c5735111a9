"""Headroom per scenario (issue 26 item 3): how far apart the heuristics are, and the bounds.

Printed by ``python -m lyra_agents.benchmark`` after its table, from the benchmark's own rows:

* **spread**: every heuristic's IQM of ``JCT / JCT(lyra)`` over the scenario's (trace seed,
  window) units, the best and worst of them;
* **best heuristic** (reachable: a fixed policy that exists);
* **per-window best** (reachable with hindsight: a policy that picked, on every window, the
  heuristic that turned out best there; no shipped policy knows which);
* **isolated-job bound** (unreachable): the mean JCT if every job ran alone from its submission
  at its best size (:func:`isolated_jct`);
* **oracle reference** (scenarios with ``knowledge`` estimate or history): ``lyra`` on the same
  jobs told the true durations (:data:`ORACLE`): what the missing knowledge costs the heuristic,
  reachable only by a policy that recovers the truth.

The isolated-job bound of a job is computed with the run's own engine model (the work the
engine gives it, :meth:`lyra_gym.model.scaling.ScalingModel.rate_for`, the profile the scenario
names): its first-start overhead (``overheads.restart_s``, else the profile's
``restart_overhead_s``: every job pays it once) plus, for each of the ``PROGRESS_BINS`` equal parts
of its work, that part's work over the fastest rate any allowed size reaches in that part. Sizes:
``num_gpus`` for an inelastic job, ``min_gpus..max_gpus`` for an elastic one, on one GPU type
(training or inference pool), at most the GPUs of that type in the cluster, packed on the fewest
servers. Switching sizes between parts is free here, no queue, no other job, no inference
demand: no schedule of the same jobs does better, so it is a lower bound on mean JCT, and
unreachable in a loaded cluster. Not computed (NaN) under the ``adaptive`` scaling rule, where the
scheduler's batch choice changes the rate.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from lyra_agents.bench_stats import iqm
from lyra_gym.model.config import SimConfig
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import ProfileSet
from lyra_gym.model.scaling import PROGRESS_BINS

BOUND = "isolated-bound"  # the policy name of the bound's rows
#: The policy name of the reference rows of a scenario whose schedulers are not told the true
#: durations (``knowledge`` estimate or history): ``lyra`` on the same jobs with oracle knowledge.
ORACLE = "lyra@oracle"
#: Row kinds that are references, not policies under test.
REFERENCE_KINDS = frozenset({"bound", "reference"})


def row_kind(policy: str) -> str:
    """The CSV ``kind`` of a per-window row of ``policy``."""
    return "bound" if policy == BOUND else "reference" if policy == ORACLE else "window"


def _pools(config: SimConfig) -> dict[str, tuple[int, int]]:
    """GPU type -> (GPUs of that type in the cluster, most GPUs per server of it)."""
    pools: dict[str, tuple[int, int]] = {}
    groups = [*config.cluster.training, config.cluster.inference]
    for g in groups:
        if g.count < 1:
            continue
        total, per = pools.get(g.gpu_type, (0, 0))
        pools[g.gpu_type] = (total + g.count * g.gpus_per_server, max(per, g.gpus_per_server))
    return pools


def isolated_jct(jobs: Sequence[JobSpec], config: SimConfig, profiles: ProfileSet) -> list[float]:
    """Per job (in submit order), its JCT alone at its best size from submission, s (module
    docstring); NaN for every job under the ``adaptive`` rule, ``inf`` for a job no size fits."""
    from lyra_gym.run.simulate import build_engine
    from lyra_gym.sim import scheduler as registry

    if not jobs:
        return []
    if config.scaling == "adaptive":
        return [math.nan] * len(jobs)
    engine = build_engine(jobs, registry.make("fifo"), config, 0, profiles)
    scaling, pools = engine.scaling, _pools(config)
    per_work: dict[tuple[Any, ...], float] = {}  # (model, num_gpus, b0, sizes) -> s per sample
    out = []
    for job in engine.jobs:
        spec, b0 = job.spec, job.init_batch
        sizes = range(spec.min_gpus, spec.max_gpus + 1) if spec.elastic else range(spec.num_gpus, spec.num_gpus + 1)
        key = (spec.model, spec.num_gpus, b0, sizes.start, sizes.stop)
        if key not in per_work:
            fastest = [0.0] * PROGRESS_BINS
            for gpu_type, (total, per_server) in pools.items():
                for workers in sizes:
                    if workers > total:
                        break
                    types = frozenset((gpu_type,))
                    servers = -(-workers // per_server)
                    for part in range(PROGRESS_BINS):
                        rate = scaling.rate_for(spec, b0, workers, servers, types, job.batch, part)[0]
                        fastest[part] = max(fastest[part], rate)
            per_work[key] = (sum(1.0 / r for r in fastest) / PROGRESS_BINS if min(fastest) > 0 else math.inf)
        restart = config.overheads.restart_s
        overhead = restart if restart is not None else profiles.model(spec.model).restart_overhead_s
        out.append(overhead + job.total_work * per_work[key])
    return out


def headroom(rows: Sequence[dict[str, Any]], heuristics: Sequence[str]) -> list[dict[str, Any]]:
    """Per scenario: lyra's mean JCT, each heuristic's IQM of ``jct_vs_lyra`` over the scenario's
    units, the best heuristic, the per-window best (hindsight) and the isolated-job bound (IQM
    over units of bound / lyra), from :func:`lyra_agents.benchmark.evaluate`'s rows."""
    out = []
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        units = sorted({(r.get("trace_seed", 0), r["window"]) for r in mine})
        spread = {h: iqm([r["jct_vs_lyra"] for r in mine if r["policy"] == h and r["kind"] == "window"])
                  for h in heuristics}
        spread = {h: v for h, v in spread.items() if not math.isnan(v)}
        per_window = []
        for unit in units:
            here = [r["jct_vs_lyra"] for r in mine if r["kind"] == "window" and r["policy"] in spread
                    and (r.get("trace_seed", 0), r["window"]) == unit]
            if here:
                per_window.append(min(here))
        bound = [r["jct_vs_lyra"] for r in mine if r["kind"] == "bound"]
        oracle = [r["jct_vs_lyra"] for r in mine if r["kind"] == "reference"]
        lyra = [r["jct_mean_s"] for r in mine if r["policy"] == "lyra" and r["kind"] == "window"]
        best = min(spread, key=lambda h: (spread[h], h)) if spread else ""
        out.append({"scenario": scenario, "units": len(units), "lyra_jct_s": float(np.mean(lyra)) if lyra else math.nan,
                     "spread": spread, "best": best, "best_vs_lyra": spread.get(best, math.nan),
                     "worst_vs_lyra": max(spread.values(), default=math.nan),
                     "per_window_best": iqm(per_window) if per_window else math.nan,
                     "isolated_bound": iqm(bound) if bound else math.nan,
                     "oracle_reference": iqm(oracle) if oracle else math.nan})
    return out


def _fmt(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def headroom_table(entries: Sequence[dict[str, Any]]) -> str:
    """The headroom summary and the spread of every heuristic, as aligned text."""
    header = ["scenario", "units", "lyra JCT s", "best heuristic", "best/lyra", "worst/lyra",
              "per-window best (hindsight)", "lyra told the truth", "isolated bound (unreachable)"]
    body = [[e["scenario"], str(e["units"]), f"{e['lyra_jct_s']:.0f}", e["best"] or "-", _fmt(e["best_vs_lyra"]),
             _fmt(e["worst_vs_lyra"]), _fmt(e["per_window_best"]), _fmt(e.get("oracle_reference", math.nan)),
             _fmt(e["isolated_bound"])] for e in entries]
    lines = ["headroom per scenario (JCT / lyra, IQM over (trace seed, window) units; lower is better)",
             *_aligned(header, body)]
    heuristics = list(dict.fromkeys(h for e in entries for h in e["spread"]))
    if heuristics:
        header = ["heuristic", *[e["scenario"] for e in entries]]
        body = [[h, *[_fmt(e["spread"].get(h, math.nan)) for e in entries]] for h in heuristics]
        lines += ["", "spread: every heuristic's IQM JCT / lyra per scenario", *_aligned(header, body)]
    return "\n".join(lines)


def _aligned(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max([len(h), *(len(b[i]) for b in body)]) for i, h in enumerate(header)]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
            for row in [header, *body]]
