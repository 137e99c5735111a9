"""A comparison written as TensorBoard scalars (``lyra-gym compare --tensorboard DIR``).

One run (sub-folder of ``DIR``, named as the policy's result folder:
:func:`lyra_gym.harness.compare.run_dirname`) per policy, so TensorBoard overlays the
policies on every chart. Tags:

- ``summary/<metric>`` — the mean over seeds of every numeric metric, at step 0;
- ``summary_ci95/<metric>`` — its 95 % CI half-width (only with two or more seeds);
- ``seeds/<metric>`` — the metric of each run, at step = the seed;
- ``timeline_seed<S>/<column>`` — the run's timeline (:mod:`lyra_gym.run.timeline`
  columns, plus ``gpus_allocated`` = training + loaned) as a series whose step
  is the simulated time in whole seconds. The state after the last decision in
  each second is kept, and a series longer than ``max_points`` is sampled at
  ``max_points`` evenly spaced instants (TensorBoard keeps about 1,000 points
  per chart for display anyway). The event wall time is set to the simulated
  time too, so TensorBoard's "Relative" axis reads as simulated hours;
- ``config/provenance`` — text: what produced the comparison, the lyra_gym version and
  commit (:func:`lyra_gym.provenance.provenance`), as a Markdown table (the tag and layout
  of a training run's, ``train.py``).

Written with TensorBoard's own event-file writer and protobufs (no torch import).
"""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lyra_gym.harness.compare import run_dirname
from lyra_gym.harness.report import CI_SUFFIX
from lyra_gym.provenance import provenance
from lyra_gym.run.simulate import SimResult
from lyra_gym.run.timeline import COLUMNS, Timeline

TIMELINE_TAGS = (*COLUMNS[1:], "gpus_allocated")
#: The text tag naming what produced the comparison (a training run's tag too, ``train.py``).
PROVENANCE_TAG = "config/provenance"


def provenance_markdown(made_by: Mapping[str, Any]) -> str:
    """``made_by`` as the two-column Markdown table TensorBoard shows as text (None: ``-``)."""
    return "|what|value|\n|-|-|\n" + "\n".join(f"|{k}|{'-' if v is None else v}|" for k, v in made_by.items())


class _ScalarWriter:
    def __init__(self, logdir: Path) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        self._writer = EventFileWriter(str(logdir), max_queue_size=1000)
        self._start = time.time()

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        summary = self._summary(value=[self._summary.Value(tag=tag, simple_value=float(value))])
        wall = self._start if wall_time is None else wall_time
        self._writer.add_event(self._event(wall_time=wall, step=int(step), summary=summary))

    def text(self, tag: str, text: str, step: int = 0) -> None:
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._writer.add_event(self._event(wall_time=self._start, step=int(step), summary=text_pb(tag, text)))

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()


def _series(timeline: Timeline, column: str, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """(whole simulated seconds, values): last sample per second, at most ``max_points``."""
    t, v = timeline.steps(column)
    seconds = np.floor(t).astype(np.int64)
    last = np.append(seconds[1:] != seconds[:-1], True)  # last sample of each second
    seconds, v = seconds[last], v[last]
    if seconds.size > max_points:
        grid = np.unique(np.linspace(seconds[0], seconds[-1], max_points).astype(np.int64))
        idx = np.searchsorted(seconds, grid, side="right") - 1
        seconds, v = grid, v[idx]
    return seconds, v


def write_tensorboard(
    logdir: str | os.PathLike,
    rows: Sequence[Mapping[str, Any]],
    results: Mapping[str, Sequence[SimResult]],
    max_points: int = 5000,
    made_by: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write one run per policy under ``logdir``; ``rows`` are the summary rows (same order
    and labels as ``results``); ``made_by`` the text ``config/provenance`` (default: this
    process's :func:`lyra_gym.provenance.provenance`). Returns the run folders."""
    root = Path(logdir)
    made_by_text = provenance_markdown(provenance() if made_by is None else made_by)
    folders: list[Path] = []
    for row in rows:
        label = str(row["policy"])
        folder = root / run_dirname(label)
        while folder in folders:  # two labels that sanitise alike
            folder = folder.with_name(folder.name + "_")
        folder.mkdir(parents=True, exist_ok=True)
        if any(folder.glob("events.out.tfevents.*")):
            warnings.warn(f"{folder} already holds event files: TensorBoard will show both comparisons "
                          "in one run (use a fresh --tensorboard folder)", stacklevel=2)
        writer = _ScalarWriter(folder)
        try:
            writer.text(PROVENANCE_TAG, made_by_text)
            for key, value in row.items():
                if key in ("policy", "seeds") or key.endswith(CI_SUFFIX) or value is None:
                    continue
                writer.scalar(f"summary/{key}", value, 0)
                ci = row.get(key + CI_SUFFIX)
                if ci is not None:
                    writer.scalar(f"summary_ci95/{key}", ci, 0)
            for result in results[label]:
                for key, value in result.metrics.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        writer.scalar(f"seeds/{key}", value, result.seed)
                if result.timeline is None:
                    continue
                for column in TIMELINE_TAGS:
                    steps, values = _series(result.timeline, column, max_points)
                    tag = f"timeline_seed{result.seed}/{column}"
                    for s, v in zip(steps.tolist(), values.tolist()):
                        writer.scalar(tag, v, s, wall_time=float(s))
        finally:
            writer.close()
        folders.append(folder)
    return folders
