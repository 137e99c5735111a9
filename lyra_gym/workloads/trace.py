"""Training-job traces: the CSV loader and writer of :class:`~lyra_gym.model.jobspec.JobSpec` records.

A trace is a CSV file with a header line. The header must contain the columns
in :data:`TRACE_COLUMNS` (in any order); other columns are ignored, so a trace
may carry extra annotations. One row is one job:

==============  =====================================================  ==========
column          meaning                                                unit
==============  =====================================================  ==========
job_id          unique, non-empty identifier                           --
submit_time     time the job is submitted, from trace start, >= 0      seconds
num_gpus        GPUs the job requests, integer >= 1                    GPUs
duration        run time at ``num_gpus`` on the reference GPU type     seconds
model           key into the throughput profiles (e.g. ``resnet50``)   --
elastic         ``1/0``, ``true/false`` or ``yes/no`` (any case)       --
min_gpus        fewest GPUs an elastic job may run on                  GPUs
max_gpus        most GPUs an elastic job may run on                    GPUs
==============  =====================================================  ==========

One optional column: ``batch_size``, the job's global batch at ``num_gpus``
(samples per step, a whole number in ``[num_gpus, MAX_BATCH_SIZE]``: each of
the ``num_gpus`` workers needs at least one sample per step; empty or absent:
``num_gpus`` x the profile's ``local_batch``). It matters under the
batch-aware scaling rules (:mod:`lyra_gym.model.scaling`).

``duration`` and ``submit_time`` must be at most :data:`MAX_DURATION_S` and
:data:`MAX_SUBMIT_TIME_S` (10 years) and
``batch_size`` at most :data:`MAX_BATCH_SIZE` (2**24 samples); larger values
are typos or unit mix-ups (milliseconds for seconds, tokens for samples), see
the constants for why these bounds.

``min_gpus`` and ``max_gpus`` are required for elastic jobs and must satisfy
``1 <= min_gpus <= num_gpus <= max_gpus``. For an inelastic job they may be
left empty (they then equal ``num_gpus``); if given, they must equal
``num_gpus``.

Every mistake in a file raises :class:`TraceError`, whose message names the
file, the 1-based line number (the header is line 1) and the offending field.
A column the loader reads (:data:`TRACE_COLUMNS` and ``batch_size``) may
appear only once in the header (a second copy would be silently ignored);
other, unread columns may repeat. A file with a header but no job rows is an
error too (``"<file>: no jobs ..."``): a run of zero jobs measures nothing.
A path that is not a readable UTF-8 text file (a directory, a gzip-compressed
file, a file in another encoding such as Latin-1, binary data) is a
:class:`TraceError` too, with a one-line message naming the file (and, for a
bad byte, its line); :func:`read_text` is that check, shared by the loaders of
:mod:`lyra_gym.workloads.realtraces`.
Rows may appear in any order; :func:`load_trace` returns the jobs sorted by
submit time, ties kept in file order. Blank lines (and rows whose cells are all blank, e.g. a
spreadsheet's trailing ``,,,,``) are skipped.

:func:`write_trace` writes floats with ``repr`` so ``load_trace(write_trace(x))``
gives back exactly ``x`` (as a list sorted by submit time) for any non-empty ``x``.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Collection, Iterable
from pathlib import Path

from lyra_gym.errors import LyraGymError
from lyra_gym.model.jobspec import MAX_BATCH_SIZE, MAX_DURATION_S, MAX_SUBMIT_TIME_S, JobSpec, JobSpecError
from lyra_gym.model.userfiles import read_user_file, shown

__all__ = [
    "BATCH_COLUMN",
    "MAX_BATCH_SIZE",
    "MAX_DURATION_S",
    "MAX_SUBMIT_TIME_S",
    "TRACE_COLUMNS",
    "JobSpec",
    "JobSpecError",
    "TraceError",
    "load_trace",
    "read_text",
    "write_trace",
]

#: Columns every trace file must have (in any order).
TRACE_COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit_time",
    "num_gpus",
    "duration",
    "model",
    "elastic",
    "min_gpus",
    "max_gpus",
)

#: The optional column: a job's global batch at ``num_gpus`` (samples).
BATCH_COLUMN = "batch_size"

_TRUE = frozenset({"1", "true", "yes"})
_FALSE = frozenset({"0", "false", "no"})


class TraceError(LyraGymError):
    """A trace file is malformed.

    The message has the form ``"<file>:<line>: field '<field>': <problem>"``.
    The parts are also available as attributes.

    Attributes:
        path: the trace file, as given to :func:`load_trace`.
        line: 1-based line number in the file; the header is line 1.
        field: the column (or ``"header"``) the problem is in.
        problem: the bare description of what is wrong.
    """

    def __init__(self, path: str | os.PathLike[str], line: int, field: str, problem: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.field = field
        self.problem = problem
        if line > 0:
            super().__init__(f"{self.path}:{line}: field '{field}': {problem}")
        else:  # the file as a whole (line 0): "<file>: <problem>"
            super().__init__(f"{self.path}: {problem}")

    @classmethod
    def whole_file(cls, path: str | os.PathLike[str], problem: str) -> "TraceError":
        """A problem with the file as a whole (``line`` 0, ``field`` ``"file"``): ``"<file>: <problem>"``."""
        return cls(path, 0, "file", problem)


class _RowError(Exception):
    """Internal: a field of the current row is invalid (line added by the caller)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem


def _ascii(field: str, text: str, kind: str) -> None:
    """Refuse a number ``int()``/``float()`` read from another script's digits (Arabic-Indic ``'١٢'``)."""
    if not text.isascii() or "_" in text:  # float() also reads '1_000'
        raise _RowError(field, f"not {kind}: {shown(text)} (only ASCII digits, no '_' separators)")


def _parse_float(field: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _RowError(field, f"not a number: {shown(text)}") from None
    if not math.isfinite(value):
        raise _RowError(field, f"must be finite, got {shown(text)}")
    _ascii(field, text, "a number")
    return value


def _parse_int(field: str, text: str) -> int:
    try:
        whole = int(text)
    except ValueError:
        pass
    else:
        _ascii(field, text, "an integer")
        return whole
    # Accept integral floats ("4.0"), as written by tools that store an
    # integer column holding blanks as floats.
    try:
        value = float(text)
    except ValueError:
        raise _RowError(field, f"not an integer: {shown(text)}") from None
    if not math.isfinite(value) or not value.is_integer():
        raise _RowError(field, f"not an integer: {shown(text)}")
    _ascii(field, text, "an integer")
    return int(value)


_MISSING_CELL = "missing: the row has fewer cells than the header"


class _MissingCell:
    """Stands in for a cell past the end of a short row: reading it (``strip``) raises the
    ``missing`` error of its column, so the row's fields are still checked in order."""

    __slots__ = ("field",)

    def __init__(self, field: str) -> None:
        self.field = field

    def strip(self) -> str:
        raise _RowError(self.field, _MISSING_CELL)


class _Columns:
    """Where each read column is in a row (from the header), in the order the fields are checked."""

    __slots__ = ("job_id", "submit_time", "num_gpus", "duration", "model", "elastic", "min_gpus", "max_gpus",
                 "batch_size", "width", "names")
    def __init__(self, idx: dict[str, int]) -> None:
        self.job_id, self.submit_time, self.num_gpus = idx["job_id"], idx["submit_time"], idx["num_gpus"]
        self.duration, self.model, self.elastic = idx["duration"], idx["model"], idx["elastic"]
        self.min_gpus, self.max_gpus = idx["min_gpus"], idx["max_gpus"]
        self.batch_size = idx.get(BATCH_COLUMN)
        read = [*TRACE_COLUMNS, *((BATCH_COLUMN,) if BATCH_COLUMN in idx else ())]
        self.width = 1 + max(idx[name] for name in read)  # cells a row needs
        self.names = {idx[name]: name for name in read}

    def padded(self, cells: list[str]) -> list:
        """``cells`` of a short row, padded to :attr:`width` with :class:`_MissingCell` items."""
        return [*cells, *(_MissingCell(self.names.get(i, "")) for i in range(len(cells), self.width))]


def _parse_row(cells: list[str], col: _Columns) -> JobSpec:
    """The row's job; the first invalid field (in column order of :data:`TRACE_COLUMNS`) is a
    :class:`_RowError`. One straight pass: this runs once per job of every trace loaded."""
    if len(cells) < col.width:
        cells = col.padded(cells)
    job_id = cells[col.job_id].strip()
    if not job_id:
        raise _RowError("job_id", "empty job_id")

    submit_time = _parse_float("submit_time", cells[col.submit_time].strip())
    if submit_time < 0:
        raise _RowError("submit_time", f"must be >= 0, got {submit_time!r}")

    num_gpus = _parse_int("num_gpus", cells[col.num_gpus].strip())
    if num_gpus < 1:
        raise _RowError("num_gpus", f"must be >= 1, got {num_gpus}")

    duration = _parse_float("duration", cells[col.duration].strip())
    if duration <= 0:
        raise _RowError("duration", f"must be > 0, got {duration!r}")

    model = cells[col.model].strip()
    if not model:
        raise _RowError("model", "empty model key")

    el_text = cells[col.elastic].strip()
    el_key = el_text.lower()
    if el_key in _TRUE:
        elastic = True
    elif el_key in _FALSE:
        elastic = False
    else:
        raise _RowError("elastic", f"expected one of 1/0/true/false/yes/no, got {shown(el_text)}")

    min_gpus = _parse_bound("min_gpus", cells[col.min_gpus].strip(), elastic, num_gpus)
    max_gpus = _parse_bound("max_gpus", cells[col.max_gpus].strip(), elastic, num_gpus)

    batch_size = None
    if col.batch_size is not None:
        text = cells[col.batch_size].strip()
        if text:
            batch_size = _parse_int(BATCH_COLUMN, text)
            if batch_size < 1:
                raise _RowError(BATCH_COLUMN, f"must be >= 1, got {batch_size}")

    try:
        return JobSpec(job_id, submit_time, num_gpus, duration, model, elastic, min_gpus, max_gpus, batch_size)
    except JobSpecError as exc:
        raise _RowError(exc.field, exc.problem) from None


def _parse_bound(name: str, text: str, elastic: bool, num_gpus: int) -> int:
    """``min_gpus``/``max_gpus``: required for an elastic job, ``num_gpus`` when empty otherwise."""
    if text:
        value = _parse_int(name, text)
        if value < 1:
            raise _RowError(name, f"must be >= 1, got {value}")
        return value
    if elastic:
        raise _RowError(name, "required for an elastic job")
    return num_gpus


_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"


#: Most bytes of a trace file (or of a public trace converted by :mod:`lyra_gym.workloads.realtraces`).
MAX_TRACE_BYTES = 2**30


def _read_bytes(path: str | os.PathLike[str]) -> bytes:
    """A regular file's bytes, at most :data:`MAX_TRACE_BYTES` (a FIFO or ``/dev/zero`` is refused unread)."""
    def error(message: str) -> TraceError:
        return TraceError.whole_file(path, message.removeprefix(f"{os.fspath(path)}: "))

    return read_user_file(path, MAX_TRACE_BYTES, "trace file", error=error)


def read_text(path: str | os.PathLike[str]) -> str:
    """The whole file as text (UTF-8, an optional byte-order mark dropped; line endings kept).

    Only a regular file of at most :data:`MAX_TRACE_BYTES` bytes is read: a FIFO, a device
    (``/dev/zero``) or a larger file is refused before reading.

    Raises:
        TraceError: the path is a directory, not a regular file, too large, a gzip or zip
            archive, or not UTF-8 text (the message names the line of the first bad byte), or
            holds NUL bytes (binary data).
        OSError: the file cannot be opened (missing, no permission).
    """
    if os.path.isdir(path):
        raise TraceError.whole_file(path, "is a directory, not a trace file")
    data = _read_bytes(path)
    if data.startswith(_GZIP_MAGIC):
        raise TraceError.whole_file(path, "is gzip-compressed; decompress it first (gunzip)")
    if data.startswith(_ZIP_MAGIC):
        raise TraceError.whole_file(path, "is a zip archive; extract the file first")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise TraceError(path, line, "encoding",
                         f"not UTF-8 text (byte 0x{data[err.start]:02x}); save the file as UTF-8") from None
    if "\x00" in text:
        line = text[:text.index("\x00")].count("\n") + 1
        raise TraceError(path, line, "encoding", "NUL byte: binary data, not a text file")
    return text


def load_trace(
    path: str | os.PathLike[str], known_models: Collection[str] | None = None
) -> list[JobSpec]:
    """Read a trace CSV file (format: see the module docstring).

    Args:
        path: the CSV file.
        known_models: if given, every row's ``model`` must be one of these keys.

    Returns:
        The jobs sorted by ``submit_time``; jobs with equal submit times keep
        their file order.

    Raises:
        TraceError: naming the file, the 1-based line (header = 1) and the field
            of the first problem found; or naming the file when it is not a
            UTF-8 text file (:func:`read_text`) or holds no job rows.
        OSError: if the file cannot be opened.
    """
    known = None if known_models is None else frozenset(known_models)
    jobs: list[JobSpec] = []
    first_line: dict[str, int] = {}
    # utf-8-sig: tolerate the byte-order mark spreadsheet programs write.
    fh = io.StringIO(read_text(path), newline="")
    reader = csv.reader(fh)
    try:
        header: list[str] | None = None
        for row in reader:
            if any(cell.strip() for cell in row):
                header = [cell.strip() for cell in row]
                break
            # Blank lines before the header are skipped too; the header is
            # then not on line 1, and errors about it name its real line.
        if header is None:
            raise TraceError(path, 1, "header", "empty file: expected a header line with columns " + ", ".join(TRACE_COLUMNS))
        header_line = reader.line_num
        idx: dict[str, int] = {}
        read = (*TRACE_COLUMNS, BATCH_COLUMN)
        for i, name in enumerate(header):
            if name in idx and name in read:
                raise TraceError(
                    path, header_line, name,
                    f"column {name!r} appears twice in the header (columns {idx[name] + 1} and {i + 1}); "
                    "keep one (the loader would read only the first)",
                )
            idx.setdefault(name, i)
        for name in TRACE_COLUMNS:
            if name not in idx:
                raise TraceError(
                    path, header_line, name,
                    f"missing column {name!r} in the header (required: {', '.join(TRACE_COLUMNS)})",
                )

        columns = _Columns(idx)
        line_end = reader.line_num
        for row in reader:
            # The row's first line (a quoted cell may span several lines).
            line, line_end = line_end + 1, reader.line_num
            if not (row and row[0].strip()) and not any(cell.strip() for cell in row):
                continue  # blank (the first test is a shortcut: a row whose first cell is not blank)
            try:
                job = _parse_row(row, columns)
            except _RowError as exc:
                raise TraceError(path, line, exc.field, exc.problem) from None
            if known is not None and job.model not in known:
                raise TraceError(
                    path, line, "model",
                    f"unknown model key {shown(job.model)}; known models: {', '.join(sorted(known))}",
                )
            prev = first_line.setdefault(job.job_id, line)
            if prev != line:
                raise TraceError(path, line, "job_id", f"duplicate job_id {shown(job.job_id)} (first on line {prev})")
            jobs.append(job)
    except csv.Error as err:  # e.g. a field larger than the csv module's limit
        raise TraceError(path, reader.line_num or 1, "csv", f"not a readable CSV file ({err})") from None

    if not jobs:
        raise TraceError.whole_file(path, "no jobs: the trace has a header line but no job rows")
    jobs.sort(key=lambda j: j.submit_time)  # list.sort is stable: ties keep file order
    return jobs


# --------------------------------------------------------------------------- writing


def write_trace(jobs: Iterable[JobSpec], path: str | os.PathLike[str]) -> None:
    """Write jobs to a trace CSV file (format: see the module docstring).

    Jobs are written in the order given. Floats are written with ``repr`` so
    that loading the file gives back exactly the same values; ``elastic`` is
    written as ``1``/``0``; ``min_gpus``/``max_gpus`` are left empty for
    inelastic jobs; a ``batch_size`` column is written only when some job has
    one. Parent directories are created if needed. Line endings
    are ``\\n``.

    Raises:
        ValueError: if two jobs share a ``job_id`` (the file would not load).
        TypeError: if an item is not a :class:`JobSpec`.
    """
    rows: list[tuple[object, ...]] = []
    seen: set[str] = set()
    jobs = list(jobs)
    with_batch = any(isinstance(job, JobSpec) and job.batch_size is not None for job in jobs)
    for job in jobs:
        if not isinstance(job, JobSpec):
            raise TypeError(f"write_trace expects JobSpec items, got {type(job).__name__}")
        if job.job_id in seen:
            raise ValueError(f"duplicate job_id {job.job_id!r}")
        seen.add(job.job_id)
        if job.elastic:
            lo, hi = str(job.min_gpus), str(job.max_gpus)
        else:
            lo = hi = ""
        rows.append((
            job.job_id,
            repr(float(job.submit_time)),
            str(job.num_gpus),
            repr(float(job.duration)),
            job.model,
            "1" if job.elastic else "0",
            lo,
            hi,
            *(("" if job.batch_size is None else str(job.batch_size),) if with_batch else ()),
        ))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow((*TRACE_COLUMNS, BATCH_COLUMN) if with_batch else TRACE_COLUMNS)
        writer.writerows(rows)
