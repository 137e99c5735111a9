"""Where every job ran, and when: the data of a Gantt picture.

A :class:`PlacementRecorder` follows the engine's change feed (``ClusterView.change_feed``)
and is sampled right after each :meth:`Engine.submit`. Every allocation change happens at a
decision point (a plan applied, a forced reclaim) or at the events just before one (a completion),
so stamping the changes read after a submit with ``engine.now`` is exact; :meth:`placements`
closes what is still open at the engine's time (the end of the run, or now in an episode).
Cost: O(changes) per sample plus a pass over the inference servers (their loan state).

:class:`Placements` holds three things, times in seconds from trace start:

- ``jobs``: one :class:`Segment` per (job, server) stretch of unchanged GPUs (a rescale that
  keeps a server's GPUs keeps that segment open);
- ``loans``: one ``(server, start_s, end_s)`` per stretch an inference server was on loan;
- ``queue``: ``(time_s, queued jobs)`` after each sample, a step function.

``placements.csv`` (written beside ``timeline.csv`` by ``lyra-gym simulate --timeline``) has
columns :data:`CSV_COLUMNS`: a ``job`` row per segment, a ``loan`` row per loan (``job_id``
empty, ``gpus`` the server's GPUs).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, NamedTuple

from lyra_gym.sim.cluster import Pool

if TYPE_CHECKING:
    from lyra_gym.sim.engine import Engine

CSV_COLUMNS = ("kind", "job_id", "server", "gpus", "start_s", "end_s")


class Segment(NamedTuple):
    """``gpus`` GPUs of server ``server`` held by job ``job_id`` over ``[start_s, end_s)`` (s)."""

    job_id: str
    server: int
    gpus: int
    start_s: float
    end_s: float


@dataclass
class Placements:
    """A run's job segments, loans and queue length (module docstring); ``servers`` is
    ``(pool, GPUs)`` per server id ("training" or "inference"), as the engine numbers them."""

    servers: list[tuple[str, int]]
    start_s: float
    end_s: float
    jobs: list[Segment] = field(default_factory=list)
    loans: list[tuple[int, float, float]] = field(default_factory=list)
    queue: list[tuple[float, int]] = field(default_factory=list)

    def gpu_seconds(self, pool: str) -> float:
        """GPU-seconds the segments hold on servers of ``pool`` (a cross-check with the engine's)."""
        return sum(s.gpus * (s.end_s - s.start_s) for s in self.jobs if self.servers[s.server][0] == pool)

    def write_csv(self, path: str | os.PathLike) -> Path:
        """``placements.csv``: a ``job`` row per segment, then a ``loan`` row per loan."""
        path = Path(path)
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(CSV_COLUMNS)
            writer.writerows(("job", *seg) for seg in self.jobs)
            writer.writerows(("loan", "", sid, self.servers[sid][1], a, b) for sid, a, b in self.loans)
        return path


class PlacementRecorder:
    """Call :meth:`record` after every ``engine.submit`` and :meth:`placements` when asked."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.feed = engine.journal.follow()
        self.first_s = float(engine.now)
        self.closed: list[Segment] = []
        self.open: dict[str, dict[int, tuple[int, float]]] = {}  # job -> server -> (GPUs, start)
        self.inference = [s for s in engine.servers if s.pool is Pool.INFERENCE]
        self.loan_start: dict[int, float] = {}  # inference server id -> start of its loan
        self.loans: list[tuple[int, float, float]] = []
        self.queue: list[tuple[float, int]] = []
        self._take(list(engine.running_allocations.items()))  # what already runs (a warm start)

    def _take(self, changes: Iterable[tuple[str, Mapping[int, int] | None]]) -> None:
        """Close the segments whose GPUs changed and open the new ones, at the engine's time."""
        now = float(self.engine.now)
        for job_id, alloc in changes:
            new = alloc or {}
            held = self.open.pop(job_id, {})
            for sid, (gpus, start) in held.items():
                if new.get(sid) != gpus and now > start:
                    self.closed.append(Segment(job_id, sid, gpus, start, now))
            if new:
                self.open[job_id] = {sid: held[sid] if sid in held and held[sid][0] == gpus else (int(gpus), now)
                                     for sid, gpus in new.items()}

    def record(self) -> None:
        """Take the changes since the last sample, stamped with the engine's time now."""
        engine = self.engine
        changed = self.feed.changed()
        if changed is None:  # the feed fell behind: compare with every running job
            running = engine.running_allocations
            gone: list[tuple[str, Mapping[int, int] | None]] = [(j, None) for j in self.open if j not in running]
            self._take([*gone, *running.items()])
        else:
            self._take((job_id, alloc) for job_id, (alloc, _) in changed.items())
        now = float(engine.now)
        for server in self.inference:
            if server.loaned and server.id not in self.loan_start:
                self.loan_start[server.id] = now
            elif not server.loaned and server.id in self.loan_start:
                start = self.loan_start.pop(server.id)
                if now > start:
                    self.loans.append((server.id, start, now))
        queued = len(engine.queue)
        if not self.queue or self.queue[-1][1] != queued:
            self.queue.append((now, queued))

    def placements(self) -> Placements:
        """What was recorded, with every open segment and loan closed at the engine's time now."""
        self.record()  # the changes since the last submit (the run's last completions)
        now = float(self.engine.now)
        jobs = list(self.closed)
        jobs += [Segment(j, sid, g, start, now) for j, held in self.open.items()
                 for sid, (g, start) in held.items() if now > start]
        loans = self.loans + [(sid, start, now) for sid, start in self.loan_start.items() if now > start]
        servers = [(s.pool.value, s.num_gpus) for s in self.engine.servers]
        return Placements(servers, self.first_s, now, sorted(jobs, key=lambda s: (s.start_s, s.server, s.job_id)),
                          sorted(loans, key=lambda x: (x[1], x[0])), list(self.queue))


class PlacementsFileError(ValueError):
    """A ``placements.csv`` that cannot be read: the message names the file, line and field."""


def _field(path: Path, line: int, name: str, text: str, kind: type, lo: float) -> float:
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise PlacementsFileError(f"{path}: line {line}: {name} {text!r} is not {what}") from None
    if not value >= lo or value == float("inf"):
        raise PlacementsFileError(f"{path}: line {line}: {name} {text!r} must be finite and >= {lo:g}")
    return value


def read_placements_csv(path: str | os.PathLike, servers: list[tuple[str, int]],
                        queue: list[tuple[float, int]] | None = None) -> Placements:
    """Read a ``placements.csv`` of a cluster of ``servers`` (``(pool, GPUs)`` per id); every row
    is checked (:class:`PlacementsFileError` names the line and field). ``queue``: ``(time_s,
    queued)`` samples (e.g. from ``timeline.csv``). The span is that of the rows and samples."""
    path = Path(path)
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows or tuple(rows[0]) != CSV_COLUMNS:
        raise PlacementsFileError(f"{path}: not a placements.csv (its header must be {','.join(CSV_COLUMNS)})")
    jobs, loans = [], []
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(CSV_COLUMNS):
            raise PlacementsFileError(f"{path}: line {line}: {len(row)} fields, expected {len(CSV_COLUMNS)}")
        kind, job_id = row[0], row[1]
        sid = int(_field(path, line, "server", row[2], int, 0))
        if sid >= len(servers):
            raise PlacementsFileError(f"{path}: line {line}: server {sid} is not in the cluster "
                                      f"(servers 0..{len(servers) - 1}; read from config.json)")
        gpus = int(_field(path, line, "gpus", row[3], int, 1))
        start, end = _field(path, line, "start_s", row[4], float, 0), _field(path, line, "end_s", row[5], float, 0)
        if end < start:
            raise PlacementsFileError(f"{path}: line {line}: end_s {row[5]} is before start_s {row[4]}")
        if gpus > servers[sid][1]:
            raise PlacementsFileError(f"{path}: line {line}: gpus {gpus} exceeds server {sid}'s {servers[sid][1]}")
        if kind == "job" and job_id:
            jobs.append(Segment(job_id, sid, gpus, start, end))
        elif kind == "loan" and servers[sid][0] == Pool.INFERENCE.value:
            loans.append((sid, start, end))
        else:
            raise PlacementsFileError(f"{path}: line {line}: kind {kind!r} must be 'job' (with a job_id) "
                                      "or 'loan' (of an inference server)")
    queue = list(queue or [])
    times = [s.start_s for s in jobs] + [s.end_s for s in jobs] + [t for _, a, b in loans for t in (a, b)]
    times += [t for t, _ in queue]
    start_s, end_s = (min(times), max(times)) if times else (0.0, 0.0)
    return Placements(servers, start_s, end_s, jobs, loans, queue)
