"""Derive lyra_gym/data/efficiency.json: each model's gradient noise scale over training.

Run::

    python tools/derive_efficiency.py TRACES_DIR [--out PATH | --out -]

``TRACES_DIR`` is a local copy of ``simulator/traces/`` of the Pollux artifact
(github.com/petuum/adaptdl, branch ``osdi21-artifact``, commit de25dcc9,
Apache-2.0): one folder per artifact model (``bert``, ``cifar10``,
``deepspeech2``, ``imagenet``, ``ncf``, ``yolov3``), each holding
``validation-<batch>.csv`` files with the columns
``progress,iteration,metric,grad_sqr,grad_var`` (one row per epoch). The files
are not part of this package; fetch them from the public repository, e.g.
``git clone --depth 1 --branch osdi21-artifact https://github.com/petuum/adaptdl``
and pass ``adaptdl/simulator/traces``. All the files the shipped JSON is
derived from are kept, with the artifact's license, in
``tests/fixtures/adaptdl_validation/`` so that the tests can re-derive it
offline. The default output is ``lyra_gym/data/efficiency.json``.

What is derived, and why (the artifact's definitions, our code):

- **Initial batch M0** of a model = the smallest batch size that has a
  validation file, as the artifact's ``Application`` does
  (``simulator/applications.py``: ``init_batch_size = min(validation)``):
  bert 12, cifar10 128, deepspeech2 20, imagenet 200, ncf 256, yolov3 8.
- **Every measured run is kept**: for each batch file, the ``grad_sqr`` and
  ``grad_var`` of each epoch's row (rows beyond the artifact's ``max_epochs``
  per model, ``APPLICATIONS`` in ``simulator/applications.py``, are unused).
  The engine interpolates them in the batch at the batch a job uses, as the
  artifact's ``get_grad_stats(batch_size, epoch)`` does
  (:mod:`lyra_gym.model.efficiency`). ``grad_sqr = 0`` is kept (the artifact's gain
  is then the full scale: efficiency 1); deepspeech2's ``validation-20.csv``
  has such rows.
- **Epoch boundaries** in [0, 1]: epoch ``e`` ends where the smallest
  ``progress`` of row ``e`` over all the model's files lies (the artifact's
  ``get_progress``), over the run's end (row ``max_epochs - 1``), which is the
  completion target ``P*`` (stored as ``target_progress``).

Model mapping (assumption): the artifact's ``bert``, ``deepspeech2``, ``ncf``
and ``yolov3`` are this project's keys of the same name; ``cifar10``
(ResNet-18 on CIFAR-10) stands for ``resnet18`` and ``imagenet`` (ResNet-50
on ImageNet) for ``resnet50``. ``transformer`` has no counterpart.

Only numbers carry over (with the citation in each entry's ``source``); the
code and prose are this project's own.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path
from typing import Mapping

FORMAT = "lyra-gym-efficiency/2"
REPO = "petuum/adaptdl"
BRANCH = "osdi21-artifact"
COMMIT = "de25dcc90c350b8ade3a710e437a651a8d2efae6"
LICENSE = "Apache-2.0"

# artifact model -> (our model key, what the artifact trained, mapping note)
MODEL_MAP: dict[str, tuple[str, str, str]] = {
    "bert": ("bert", "BERT, SQuAD fine-tuning",
             "same model family; the profile's throughput is BERT-large pre-training"),
    "cifar10": ("resnet18", "ResNet-18 on CIFAR-10", "assumption: the artifact's cifar10 job stands for resnet18"),
    "deepspeech2": ("deepspeech2", "DeepSpeech2", "batch in utterances (the profile's stand-in counts tokens)"),
    "imagenet": ("resnet50", "ResNet-50 on ImageNet", "assumption: the artifact's imagenet job stands for resnet50"),
    "ncf": ("ncf", "NCF", ""),
    "yolov3": ("yolov3", "YOLOv3 on VOC", ""),
}

# The artifact's run length per model: simulator/applications.py, APPLICATIONS (max_epochs=...).
ARTIFACT_EPOCHS: dict[str, int] = {
    "bert": 2, "cifar10": 100, "deepspeech2": 80, "imagenet": 90, "ncf": 10, "yolov3": 50,
}

REQUIRED_COLUMNS = ("progress", "grad_sqr", "grad_var")
_NAME = re.compile(r"^validation-(\d+)\.csv$")


class DeriveError(ValueError):
    """An input file is missing or malformed; the message names the file, row and column."""


def validation_files(model_dir: Path) -> dict[int, Path]:
    """``{batch size: path}`` of the ``validation-<batch>.csv`` files in one artifact model folder."""
    found = {}
    if model_dir.is_dir():
        for path in model_dir.iterdir():
            match = _NAME.match(path.name)
            if match:
                found[int(match.group(1))] = path
    if not found:
        raise DeriveError(f"{model_dir}: no validation-<batch>.csv files")
    return dict(sorted(found.items()))


def _number(text: str | None, where: str) -> float:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DeriveError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise DeriveError(f"{where}: expected a finite number, got {text!r}")
    return value


def read_rows(path: Path, epochs: int) -> list[dict[str, float]]:
    """The first ``epochs`` rows of a validation file, as numbers, checked."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise DeriveError(f"{path}: missing column(s) {', '.join(missing)} (have {reader.fieldnames})")
        rows = []
        for line, raw in enumerate(reader, start=2):
            if len(rows) == epochs:
                break
            rows.append({c: _number(raw.get(c), f"{path}:{line} column {c}") for c in REQUIRED_COLUMNS})
            row = rows[-1]
            if row["grad_sqr"] < 0:
                raise DeriveError(f"{path}:{line} column grad_sqr: must be >= 0, got {row['grad_sqr']!r}")
            if row["grad_var"] < 0:
                raise DeriveError(f"{path}:{line} column grad_var: must be >= 0, got {row['grad_var']!r}")
            previous = rows[-2]["progress"] if len(rows) > 1 else 0.0
            if row["progress"] <= previous:
                raise DeriveError(f"{path}:{line} column progress: must increase, "
                                  f"got {row['progress']!r} after {previous!r}")
    if len(rows) < epochs:
        raise DeriveError(f"{path}: {len(rows)} rows, the artifact's run needs {epochs} (one per epoch)")
    return rows


def derive_model(model_dir: Path, artifact_model: str, epochs: int) -> tuple[str, dict]:
    """``(our model key, entry)``: M0, the epoch boundaries and every run's gradient statistics."""
    files = validation_files(model_dir)
    init_batch = min(files)
    runs = {b: read_rows(path, epochs) for b, path in files.items()}
    bounds = [min(rows[e]["progress"] for rows in runs.values()) for e in range(epochs)]
    end = bounds[-1]
    epoch_end = [b / end for b in bounds]
    if any(b <= a for a, b in zip(epoch_end, epoch_end[1:])):
        raise DeriveError(f"{model_dir}: epoch ends (smallest progress per row) must increase, got {bounds}")
    key, trained, note = MODEL_MAP.get(artifact_model, (artifact_model, "", ""))
    return key, {
        "init_batch": init_batch,
        "batches": sorted(files),
        "epoch_end": epoch_end,
        "grad_sqr": [[r["grad_sqr"] for r in runs[b]] for b in sorted(files)],
        "grad_var": [[r["grad_var"] for r in runs[b]] for b in sorted(files)],
        "target_progress": end,
        "epochs": epochs,
        "artifact_model": artifact_model,
        "trained": trained,
        "note": note,
        "source": {
            "repo": REPO, "branch": BRANCH, "commit": COMMIT, "license": LICENSE,
            "files": [f"simulator/traces/{artifact_model}/{files[b].name}" for b in sorted(files)],
            "init_batch": "smallest validated batch size (simulator/applications.py, Application.init_batch_size)",
            "grad_stats": "columns grad_sqr, grad_var of rows 0 .. max_epochs - 1 of each file, interpolated in "
                          "the batch as simulator/applications.py get_grad_stats does",
            "epoch_end": "smallest column 'progress' of the row over all files (get_progress), over that of "
                         "row max_epochs - 1 (run length: simulator/applications.py, APPLICATIONS max_epochs)",
        },
    }


def derive(traces_dir: str | Path, epochs: Mapping[str, int] = ARTIFACT_EPOCHS) -> dict:
    """The efficiency document for every artifact model in ``epochs`` found under ``traces_dir``."""
    root = Path(traces_dir)
    models = {}
    for artifact_model in sorted(epochs):
        key, entry = derive_model(root / artifact_model, artifact_model, epochs[artifact_model])
        models[key] = entry
    return {
        "format": FORMAT,
        "metadata": {
            "derived_by": "tools/derive_efficiency.py",
            "source": f"{REPO} ({BRANCH}, commit {COMMIT[:8]}), simulator/traces/*/validation-<batch>.csv, {LICENSE}",
            "efficiency": "E(M) = (phi + M0) / (phi + M), phi = M0 * grad_var / grad_sqr at batch M "
                          "(interpolated between measured batches) in the current epoch",
            "progress": "fraction of the artifact's run (statistical progress), 0 = start, 1 = end",
            "units": "batch sizes in the artifact's samples per step",
        },
        "models": dict(sorted(models.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces_dir", help="local copy of adaptdl's simulator/traces/ (osdi21-artifact branch)")
    default_out = Path(__file__).resolve().parents[1] / "lyra_gym" / "data" / "efficiency.json"
    parser.add_argument("--out", default=str(default_out),
                        help="output JSON path, or - for stdout (default: lyra_gym/data/efficiency.json)")
    args = parser.parse_args(argv)
    try:
        text = json.dumps(derive(args.traces_dir), indent=1) + "\n"
    except DeriveError as err:
        print(f"derive_efficiency: {err}", file=sys.stderr)
        return 2
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
