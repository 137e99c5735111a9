"""Derive traces/pollux-t4-profile.json: a T4 profile from the Pollux artifact's own measurements.

Run::

    python tools/derive_pollux_t4_profile.py [--data DIR] [--out PATH | --out -] [--markdown]

``DIR`` (default ``../shared/data/pollux_t4`` beside the repository) holds the
Pollux OSDI'21 artifact's measured step times (github.com/petuum/adaptdl,
``simulator/traces/<app>/``, branch ``osdi21-artifact``, commit de25dcc9,
Apache-2.0; AWS g4dn.12xlarge nodes of 4 x NVIDIA T4, 25-50 Gbps Ethernet):
per application ``placements.csv`` (``placement,local_bsz,step_time,sync_time``;
``placement`` has one digit per node = GPUs used there, so ``1213`` is 7
workers on 4 nodes) and ``scalability.csv``
(``num_nodes,num_replicas,local_bsz,step_time,sync_time``, 6-16 nodes). The
default output is ``traces/pollux-t4-profile.json``; ``--out -`` prints it.

What it is for: ``lyra-gym trace convert --format pollux --profiles
traces/pollux-t4-profile.json`` turns the artifact's workloads into run times
on T4 (the profile's reference GPU) at the artifact's own samples/s, and a
config with ``profiles: traces/pollux-t4-profile.json`` on
``traces/pollux-testbed.yaml``'s 16 x 4 T4 cluster runs them at those rates.

What is derived, per application (model keys and initial batch ``b0`` from
``lyra_gym.workloads.realtraces.POLLUX_APPLICATIONS``: bert -> bert, cifar10 ->
resnet18, deepspeech2 -> deepspeech2, imagenet -> resnet50, ncf -> ncf,
yolov3 -> yolov3):

- ``local_batch`` = the ``local_bsz`` value of ``placements.csv`` nearest to
  ``b0`` (bert 12, deepspeech2 20, imagenet 200 and yolov3 8 are measured;
  the artifact's grid has 129 for cifar10's 128 and 257 for ncf's 256).
- ``step_compute_s`` = ``step_time`` of the row ``placement == "1"``,
  ``local_bsz == local_batch``: the measured one-GPU step, exactly (as the
  collector builds a profile: compute from one GPU, communication apart).
- ``allreduce_intra_s`` / ``allreduce_inter_s``: the scaling model of
  ``lyra_gym/model/profiles.py``, ``step = step_compute_s + 2(n-1)/n * unit``, fitted
  to every other row at ``local_batch``: one unit for the rows on one node
  (n = 2..4), one for the rows on several nodes (2-4 nodes, up to 16 GPUs).
  Each unit is a weighted least-squares fit with weights 1 / ``step_time``
  (it minimises the relative error), in closed form:
  ``unit = sum(r (y - c) / y^2) / sum(r^2 / y^2)``, ``r = 2(n-1)/n``.
- ``step_fixed_s``: the part of the one-GPU step that does not shrink with the
  local batch. A least-squares line ``step_time = a + b * local_bsz`` (weights
  1 / ``step_time``^2) through every one-GPU row (all local batches); then
  ``step_fixed_s = step_compute_s - b * local_batch`` (clamped to
  [0, ``step_compute_s``]), so the measured step at ``local_batch`` is kept
  exactly and other batches follow the fitted slope. Its error over the
  one-GPU rows is ``fit.one_gpu_by_batch``. With one measured batch only,
  ``step_fixed_s`` = 0 (compute proportional to the batch, an assumption).
- ``max_local_batch`` = the largest ``local_bsz`` measured on one GPU
  (assumption: the artifact's grid stops where GPU memory does). The
  artifact's simulator (``simulator/applications.py``, ``Application``) takes
  ``max_local_bsz = placements.local_bsz.max()`` the same way, except yolov3,
  which it sets to 8 (its grid goes to 16): ``MAX_LOCAL_OVERRIDE`` carries
  that 8 over (the artifact's own run reports ``max_local_bsz`` 8 for yolov3,
  shared/data/pollux_reference/isolated_jobs.csv). Above it both the artifact
  and lyra-gym (``batch_limit: accumulate``, :mod:`lyra_gym.model.scaling`)
  accumulate gradients.
- ``min_local_batch`` = the smallest ``local_bsz`` of any row, as the
  artifact's ``min_local_bsz = placements.local_bsz.min()``: its Pollux
  searches global batches from ``max(init_batch, n x min_local_bsz)`` and
  rejects a micro-batch below it (``baselines/pollux.py``, ``batch_range``).
- ``restart_overhead_s`` = 30: the artifact's simulator charges 30 s of no
  progress after every (re)allocation (``Job.reallocate``: ``rescale_time =
  30``; shared/data/PROVENANCE.md). ``traces/pollux-testbed.yaml`` sets the
  same 30 s in its ``overheads``, which take precedence.

The fit error (absolute percentage error of the modelled step against
``step_time``; mean = MAPE, and max) is reported in sample, split into 1 GPU
(0 by construction), one node and several nodes, and out of sample against
``scalability.csv`` rows at ``local_batch`` (6-16 nodes, never seen by the
fit). It is written into each model's ``fit`` entry and printed as a table
(``--markdown``). The arithmetic is plain Python in a fixed order, so the file
is reproduced bit for bit (tests/model/test_pollux_t4_profile.py checks it).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "pollux_t4"
DEFAULT_OUT = ROOT / "traces" / "pollux-t4-profile.json"
ARTIFACT = "petuum/adaptdl@de25dcc9 (branch osdi21-artifact, Apache-2.0)"
#: The artifact's max_local_bsz where it is not the largest measured one-GPU batch
#: (simulator/applications.py sets yolov3's to 8; its one-GPU grid goes to 16).
MAX_LOCAL_OVERRIDE = {"yolov3": 8}
RESTART_S = 30.0
RESTART_SOURCE = ("Pollux artifact simulator/simulator.py Job.reallocate: rescale_time = 30 s of no progress "
                  "after every (re)allocation (shared/data/PROVENANCE.md)")


def applications() -> dict[str, tuple[str, int]]:
    """Artifact application -> (our model key, initial batch b0), as the pollux converter maps them."""
    from lyra_gym.workloads.realtraces import POLLUX_APPLICATIONS

    return {app: (a.model, a.init_batch_size) for app, a in sorted(POLLUX_APPLICATIONS.items())}


@dataclass(frozen=True)
class Row:
    """One measured step: ``n`` workers on ``k`` nodes at local batch ``b``; ``label`` names the row."""

    n: int
    k: int
    b: int
    step: float
    label: str


def read_placements(path: Path) -> list[Row]:
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        for rec in csv.DictReader(fh):
            placement = rec["placement"].strip()
            digits = [int(c) for c in placement]
            rows.append(Row(sum(digits), sum(1 for d in digits if d > 0), int(rec["local_bsz"]),
                            float(rec["step_time"]), placement))
    return rows


def read_scalability(path: Path) -> list[Row]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [Row(int(r["num_replicas"]), int(r["num_nodes"]), int(r["local_bsz"]), float(r["step_time"]),
                    f"{r['num_nodes']} nodes x {r['num_replicas']} replicas") for r in csv.DictReader(fh)]


def ring(n: int) -> float:
    return 2.0 * (n - 1) / n


def fit_unit(rows: list[Row], compute: float) -> float:
    """Weighted (1 / step) least-squares all-reduce unit of ``step = compute + ring(n) * unit``."""
    num = sum(ring(r.n) * (r.step - compute) / (r.step * r.step) for r in rows)
    den = sum(ring(r.n) * ring(r.n) / (r.step * r.step) for r in rows)
    if den <= 0:
        raise ValueError("no multi-GPU rows to fit an all-reduce unit to")
    return num / den


def fit_line(rows: list[Row]) -> tuple[float, float] | None:
    """Weighted (1 / step) least-squares line ``step = a + b * local_bsz`` (closed form); None when
    the rows hold fewer than two local batches."""
    w = [1.0 / (r.step * r.step) for r in rows]
    sw = sum(w)
    sx = sum(wi * r.b for wi, r in zip(w, rows))
    sy = sum(wi * r.step for wi, r in zip(w, rows))
    sxx = sum(wi * r.b * r.b for wi, r in zip(w, rows))
    sxy = sum(wi * r.b * r.step for wi, r in zip(w, rows))
    den = sw * sxx - sx * sx
    if den <= 0:
        return None
    b = (sw * sxy - sx * sy) / den
    return (sy - b * sx) / sw, b


def batch_errors(rows: list[Row], compute: float, fixed: float, batch: int) -> dict:
    """Error of ``fixed + (compute - fixed) * local_bsz / batch`` against the one-GPU rows."""
    ape = [abs(fixed + (compute - fixed) * r.b / batch - r.step) / r.step * 100.0 for r in rows]
    return {"rows": len(ape), "mape_pct": round(sum(ape) / len(ape), 2), "max_pct": round(max(ape), 2)}


def predict(n: int, k: int, compute: float, intra: float, inter: float) -> float:
    if n <= 1:
        return compute
    return compute + ring(n) * (intra if k <= 1 else inter)


def errors(rows: list[Row], compute: float, intra: float, inter: float) -> dict:
    """Rows, mean and max absolute percentage error (None when there are no rows)."""
    ape = [abs(predict(r.n, r.k, compute, intra, inter) - r.step) / r.step * 100.0 for r in rows]
    if not ape:
        return {"rows": 0, "mape_pct": None, "max_pct": None}
    return {"rows": len(ape), "mape_pct": round(sum(ape) / len(ape), 2), "max_pct": round(max(ape), 2)}


def derive_model(data: Path, app: str, b0: int) -> tuple[dict, dict]:
    """The profile entry of one application and its fit report."""
    path = data / app / "placements.csv"
    rows = read_placements(path)
    batches = sorted({r.b for r in rows})
    batch = min(batches, key=lambda b: (abs(b - b0), b))
    at = [r for r in rows if r.b == batch]
    single = [r for r in at if r.n == 1]
    if len(single) != 1:
        raise ValueError(f"{path}: expected one row placement=1, local_bsz={batch}, found {len(single)}")
    compute = single[0].step
    intra_rows = [r for r in at if r.n > 1 and r.k <= 1]
    inter_rows = [r for r in at if r.k > 1]
    intra = fit_unit(intra_rows, compute)
    inter = fit_unit(inter_rows, compute)
    fit = {
        "all": errors(at, compute, intra, inter),
        "one_gpu": errors(single, compute, intra, inter),
        "one_node": errors(intra_rows, compute, intra, inter),
        "multi_node": errors(inter_rows, compute, intra, inter),
    }
    one_gpu_rows = [r for r in rows if r.n == 1]
    line = fit_line(one_gpu_rows)
    # one batch only: no slope to fit, compute taken as proportional to the batch (assumption)
    fixed = 0.0 if line is None else min(max(compute - line[1] * batch, 0.0), compute)
    fit["one_gpu_by_batch"] = batch_errors(one_gpu_rows, compute, fixed, batch)
    max_local = MAX_LOCAL_OVERRIDE.get(app, max(r.b for r in one_gpu_rows))
    min_local = min(r.b for r in rows)
    scal = data / app / "scalability.csv"
    held = [r for r in read_scalability(scal) if r.b == batch] if scal.exists() else []
    fit["held_out_6_16_nodes"] = errors(held, compute, intra, inter)
    rel = f"simulator/traces/{app}/placements.csv"
    source = (f"Pollux artifact {ARTIFACT}, {rel} (AWS g4dn.12xlarge, 4 x T4 per node): step_compute_s = "
              f"step_time of row placement=1, local_bsz={batch}; allreduce_intra_s / allreduce_inter_s = "
              f"least-squares fit (weights 1/step_time) of step_time = step_compute_s + 2(n-1)/n * unit to the "
              f"{len(intra_rows)} one-node / {len(inter_rows)} multi-node rows at local_bsz={batch}; "
              f"tools/derive_pollux_t4_profile.py")
    entry = {
        "local_batch": batch,
        "restart_overhead_s": RESTART_S,
        "max_local_batch": max_local,
        "min_local_batch": min_local,
        "gpus": {"t4": {"step_compute_s": compute, "allreduce_intra_s": intra, "allreduce_inter_s": inter,
                        "step_fixed_s": fixed, "source": source}},
        "batch_source": (f"{rel}: step_fixed_s = step_compute_s - b * local_bsz, b the slope of a least-squares "
                         f"line (weights 1/step_time^2) step_time = a + b * local_bsz through the "
                         f"{len(one_gpu_rows)} rows placement=1; max_local_batch = the largest local_bsz "
                         f"measured on one GPU (assumption: the grid stops at the memory limit)"
                         + (f"; max_local_batch = {MAX_LOCAL_OVERRIDE[app]}: the artifact's own cap for {app} "
                            f"(simulator/applications.py)" if app in MAX_LOCAL_OVERRIDE else "")
                         + "; min_local_batch = the smallest local_bsz of any row (the artifact's min_local_bsz, "
                           "simulator/applications.py: Pollux searches no batch below n x it)"),
        "pollux_application": app,
        "pollux_init_batch_size": b0,
        "measured_row": {"file": rel, "placement": single[0].label, "local_bsz": batch, "step_time": compute},
        "fit": fit,
        "restart_source": RESTART_SOURCE,
    }
    return entry, fit


def derive(data: Path = DEFAULT_DATA) -> dict:
    """The profile document derived from the artifact files under ``data``."""
    data = Path(data)
    models = {}
    for app, (key, b0) in applications().items():
        models[key], _ = derive_model(data, app, b0)
    return {
        "format": "lyra-gym-profiles/1",
        "metadata": {
            "name": "pollux-t4",
            "derived_by": "tools/derive_pollux_t4_profile.py",
            "reference_gpu": "t4",
            "source": f"Pollux artifact {ARTIFACT}, simulator/traces/<app>/placements.csv and scalability.csv "
                      "(columns placement, num_nodes, num_replicas, local_bsz, step_time), copied in "
                      "shared/data/pollux_t4/",
            "cluster": "AWS g4dn.12xlarge: 4 x NVIDIA T4 per node, 25-50 Gbps Ethernet",
            "note": "for the artifact's workloads on traces/pollux-testbed.yaml; one GPU type (t4). Units per "
                    "model as the artifact counts them (bert SQuAD sequences, resnet18 CIFAR-10 images, "
                    "resnet50 ImageNet images, deepspeech2 utterances, ncf samples, yolov3 VOC images)",
        },
        "models": dict(sorted(models.items())),
    }


def render(doc: dict) -> str:
    return json.dumps(doc, indent=1) + "\n"


def markdown(doc: dict) -> str:
    head = ("| model (Pollux app) | local batch | 1-GPU samples/s | compute ms | intra ms | inter ms | rows | "
            "MAPE all | 1 node | multi-node | max | MAPE 6-16 nodes (held out) | max held out | "
            "fixed ms | max local batch | MAPE 1 GPU over batches |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def pct(x):
        return "-" if x is None else f"{x:.1f} %"

    for key, m in doc["models"].items():
        g, f = m["gpus"]["t4"], m["fit"]
        lines.append(
            f"| {key} ({m['pollux_application']}) | {m['local_batch']} | "
            f"{m['local_batch'] / g['step_compute_s']:,.1f} | "
            f"{g['step_compute_s'] * 1e3:.1f} | {g['allreduce_intra_s'] * 1e3:.1f} | "
            f"{g['allreduce_inter_s'] * 1e3:.1f} | {f['all']['rows']} | {pct(f['all']['mape_pct'])} | "
            f"{pct(f['one_node']['mape_pct'])} | {pct(f['multi_node']['mape_pct'])} | {pct(f['all']['max_pct'])} | "
            f"{pct(f['held_out_6_16_nodes']['mape_pct'])} | {pct(f['held_out_6_16_nodes']['max_pct'])} | "
            f"{g['step_fixed_s'] * 1e3:.1f} | {m['max_local_batch']} | {pct(f['one_gpu_by_batch']['mape_pct'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help=f"pollux_t4 folder (default {DEFAULT_DATA})")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"output JSON, '-' = stdout (default {DEFAULT_OUT})")
    parser.add_argument("--markdown", action="store_true", help="also print the fit table (Markdown) on stderr")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"derive_pollux_t4_profile: error: --data {args.data}: not a folder", file=sys.stderr)
        return 2
    doc = derive(args.data)
    text = render(doc)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    if args.markdown:
        print(markdown(doc), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
