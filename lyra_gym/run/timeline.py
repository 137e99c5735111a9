"""The cluster over time, sampled once per decision point.

A :class:`TimelineRecorder` reads a handful of counters the engine already
keeps, right after each :meth:`Engine.submit` (that is, after the decision and
any reclaim it forced were applied), and appends them to plain lists. Nothing
is recomputed, so recording costs a few list appends per decision; it only
happens when asked for (``simulate(..., record_timeline=True)``), so plain runs
stay as fast as before.

Reading a :class:`Timeline`:

- Sample ``i`` is the state from ``time_s[i]`` until ``time_s[i + 1]`` (a step
  function, held constant between decision points: the state only changes at
  events, and every event instant is a decision point).
- Two samples may share a time: a forced reclaim asks the scheduler for a
  second decision at the same instant. ``len(timeline)`` is the number of
  decisions (``metrics["decisions"]``).
- The one instant that is not a decision point is the end of the simulation
  (the last completion, or the horizon); ``end_s`` and ``end`` give the time and
  the state there, so the last sample holds over ``[time_s[-1], end_s)``.
- Integrating a GPU column over time therefore reproduces the engine's
  GPU-seconds exactly (see :meth:`Timeline.integral`).

Columns (all counts are whole numbers; times in seconds from trace start):

``time_s``            simulated time of the decision point (s)
``queued``            jobs waiting (arrived, not running, not finished)
``running``           jobs holding GPUs (including inside an overhead)
``finished``          jobs finished so far
``gpus_training``     GPUs allocated to jobs on training servers
``gpus_loaned``       GPUs allocated to jobs on loaned inference servers
``servers_loaned``    inference servers on loan to training
``inference_demand``  inference servers the inference service needs now
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from lyra_gym.run.placements import Placements
    from lyra_gym.sim.engine import Engine

COLUMNS = (
    "time_s", "queued", "running", "finished", "gpus_training", "gpus_loaned", "servers_loaned", "inference_demand",
)
_COUNT_COLUMNS = COLUMNS[1:]


@dataclass
class Timeline:
    """Columns of equal length (one entry per decision point) plus the end state.

    ``training_gpus``, ``inference_servers`` and ``inference_gpus_per_server``
    are the cluster's capacity, kept so that plots can draw it.
    """

    columns: dict[str, np.ndarray]
    end_s: float
    end: dict[str, int]
    training_gpus: int = 0
    inference_servers: int = 0
    inference_gpus_per_server: int = 0
    start_s: float = 0.0
    placements: "Placements | None" = None  # where every job ran (recorded by simulate beside this)

    def __len__(self) -> int:
        return len(self.columns["time_s"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def gpus_allocated(self) -> np.ndarray:
        """GPUs allocated to training jobs, on training and loaned servers together."""
        return self.columns["gpus_training"] + self.columns["gpus_loaned"]

    def steps(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(times, values)`` of column ``name`` closed by the end state, ready for a
        ``steps-post`` plot. ``name`` may also be ``"gpus_allocated"``."""
        if name == "gpus_allocated":
            values = self.gpus_allocated
            last = self.end["gpus_training"] + self.end["gpus_loaned"]
        else:
            values, last = self.columns[name], self.end[name]
        return np.append(self.columns["time_s"], self.end_s), np.append(values, last)

    def integral(self, name: str) -> float:
        """Time integral of a column over [first decision, end] (e.g. GPU-seconds)."""
        times = np.append(self.columns["time_s"], self.end_s)
        values = self["gpus_training"] + self["gpus_loaned"] if name == "gpus_allocated" else self[name]
        return float(np.sum(values * np.diff(times)))

    def write_csv(self, path: str | os.PathLike) -> Path:
        """One row per decision point, columns :data:`COLUMNS`."""
        path = Path(path)
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(COLUMNS)
            writer.writerows(zip(*(self.columns[c].tolist() for c in COLUMNS)))
        return path


@dataclass
class TimelineRecorder:
    """Appends the engine's state after every decision; call :meth:`record` after each
    ``engine.submit`` and :meth:`timeline` once the run is over."""

    engine: "Engine"
    _cols: dict[str, list] = field(default_factory=lambda: {c: [] for c in COLUMNS})

    def record(self) -> None:
        e, c = self.engine, self._cols
        c["time_s"].append(e.now)
        c["queued"].append(len(e.queue))
        c["running"].append(len(e.running))
        c["finished"].append(e.finished)
        c["gpus_training"].append(e.used_training)
        c["gpus_loaned"].append(e.used_loaned)
        c["servers_loaned"].append(e.loaned_count)
        c["inference_demand"].append(e.demand_now)

    def _state(self) -> dict[str, int]:
        e = self.engine
        return {
            "queued": len(e.queue), "running": len(e.running), "finished": e.finished,
            "gpus_training": e.used_training, "gpus_loaned": e.used_loaned,
            "servers_loaned": e.loaned_count, "inference_demand": e.demand_now,
        }

    def timeline(self) -> Timeline:
        """The recorded columns as arrays (float64 times, int64 counts) and the current
        engine state as the end state."""
        cols = {"time_s": np.asarray(self._cols["time_s"], dtype=np.float64)}
        cols.update({c: np.asarray(self._cols[c], dtype=np.int64) for c in _COUNT_COLUMNS})
        e = self.engine
        cluster = e.config.cluster
        return Timeline(
            columns=cols, end_s=float(e.now), end=self._state(),
            training_gpus=cluster.training_gpus, inference_servers=cluster.inference.count,
            inference_gpus_per_server=cluster.inference.gpus_per_server, start_s=float(e.start_time),
        )
