"""What the public-trace formats share: the converted-jobs list, raw records, skip counts,
value parsing (times in seconds, counts) and the JSON / CSV readers whose errors name file, line
and field (see :mod:`lyra_gym.workloads.realtraces` for the rules)."""

from __future__ import annotations

import bisect
import csv
import io
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.userfiles import shown
from lyra_gym.workloads.trace import TraceError, read_text

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S.%f",
                 "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M")


class ConvertedJobs(list):
    """The converted jobs (a plain ``list`` of :class:`JobSpec`, sorted by submit time) plus counts.

    Attributes:
        source: the input file(s).
        format: ``"philly"``, ``"helios"``, ``"alibaba"`` or ``"pollux"``.
        records: jobs read from the input.
        skipped: reason -> number of jobs left out (see the :mod:`lyra_gym.workloads.realtraces` docstring).
    """

    def __init__(self, jobs: list[JobSpec], source: str, format: str, records: int, skipped: Mapping[str, int]) -> None:
        super().__init__(jobs)
        self.source, self.format, self.records = source, format, records
        self.skipped = dict(sorted(skipped.items()))

    def summary(self) -> str:
        """One line: read, kept and skipped counts."""
        skipped = ", ".join(f"{n} {why}" for why, n in self.skipped.items()) or "none"
        return f"{self.format} {self.source}: {self.records} jobs read, {len(self)} kept; skipped: {skipped}"


@dataclass
class RawJob:
    """One kept record as read, before the model and elastic draws (times in seconds)."""

    job_id: str
    submit: float  # absolute seconds
    gpus: int
    duration: float
    line: int
    path: str


class SkipCounts:
    """Skip counts by reason, and the line of every job id read (duplicates are errors, skipped or not)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.lines: dict[str, tuple[int, int | None]] = {}

    def add(self, reason: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1

    def first_seen(self, job_id: str, path: str, line: int, field: str, index: int | None = None) -> str:
        """``job_id``, or a :class:`TraceError` if an earlier record had it. ``index`` tells JSON
        records apart (several may share a line, e.g. a minified file); CSV rows are told apart by line."""
        first_line, first_index = self.lines.setdefault(job_id, (line, index))
        if (first_line, first_index) != (line, index):
            where = f"line {first_line}" if index is None else f"record [{first_index}] on line {first_line}"
            here = "" if index is None else f" (record [{index}])"
            raise TraceError(path, line, field, f"duplicate job id {shown(job_id)}{here}; first at {where}")
        return job_id


# --------------------------------------------------------------------------- value parsing


def parse_time(value: Any, path: str, line: int, field: str) -> float | None:
    """Seconds (epoch for date-times, UTC assumed; only differences matter); None if absent."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TraceError(path, line, field, f"expected a time, got {shown(value)}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise TraceError(path, line, field, f"must be finite, got {shown(value)}")
        return float(value)
    if not isinstance(value, str):
        raise TraceError(path, line, field, f"expected a time string or number, got {shown(value)}")
    text = value.strip()
    if text == "" or text.lower() in ("none", "null", "nan", "nat"):
        return None
    try:
        number = float(_ascii(text, path, line, field))
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise TraceError(path, line, field, f"must be finite, got {shown(text)}")
        return number
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise TraceError(path, line, field, f"not a time: {shown(text)} (expected 'YYYY-MM-DD HH:MM:SS' or seconds)")


def parse_number(text: str, path: str, line: int, field: str, empty: float | None = None) -> float:
    """A finite number >= 0 from ``text``; ``empty`` (if given) for a blank or ``nan`` cell."""
    text = text.strip()
    if text == "" or text.lower() == "nan":
        if empty is not None:
            return empty
        raise TraceError(path, line, field, "missing value")
    try:
        value = float(_ascii(text, path, line, field))
    except ValueError:
        raise TraceError(path, line, field, f"not a number: {shown(text)}") from None
    if not math.isfinite(value):
        raise TraceError(path, line, field, f"must be finite, got {shown(text)}")
    if value < 0:
        raise TraceError(path, line, field, f"must be >= 0, got {shown(text)}")
    return value


def _ascii(text: str, path: str, line: int, field: str) -> str:
    """``text`` if ASCII: ``float()`` reads other scripts' digits too (Arabic-Indic ``'١٢'``)."""
    if not text.isascii() or "_" in text:  # float() also reads '1_000'
        raise TraceError(path, line, field, f"not a number: {shown(text)} (only ASCII digits, no '_' separators)")
    return text


def parse_gpus(text: str, path: str, line: int, field: str) -> int:
    """A whole number of GPUs >= 0 from ``text``."""
    value = parse_number(text, path, line, field)
    if not value.is_integer():
        raise TraceError(path, line, field, f"not a whole number of GPUs: {shown(text.strip())}")
    return int(value)


def parse_job_id(value: Any, path: str, line: int, field: str) -> str:
    """A non-empty job id (numbers as their text), stripped."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise TraceError(path, line, field, f"missing or empty job id: {shown(value)}")
    return value.strip()


# --------------------------------------------------------------------------- readers


def json_records(path: str) -> Iterator[tuple[int, int, Any]]:
    """(index, line, record) for each element of the top-level JSON list, lines 1-based."""
    text = read_text(path)
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line_of(pos: int) -> int:
        return bisect.bisect_left(newlines, pos) + 1

    decoder = json.JSONDecoder()
    n = len(text)

    def skip_ws(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    i = skip_ws(0)
    if i >= n or text[i] != "[":
        raise TraceError(path, line_of(i), "json", "expected a JSON list of job records ('[' ...)")
    i = skip_ws(i + 1)
    index = 0
    if i < n and text[i] == "]":
        return
    while True:
        try:
            record, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as err:
            raise TraceError(path, err.lineno, "json", f"invalid JSON: {err.msg} (column {err.colno})") from None
        except RecursionError:
            raise TraceError(path, line_of(i), "json", "a job record nested too deeply") from None
        yield index, line_of(i), record
        index += 1
        i = skip_ws(end)
        if i < n and text[i] == ",":
            i = skip_ws(i + 1)
            continue
        if i < n and text[i] == "]":
            return
        raise TraceError(path, line_of(i), "json", "expected ',' or ']' after a job record")


def csv_rows(path: str, columns: tuple[str, ...], required: tuple[str, ...], header_optional: bool
              ) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, {column: text}) per non-blank data row.

    With ``header_optional`` a file whose first row is not a header is read with
    ``columns`` in that order (the published PAI tables have no header line).
    """
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    try:
        idx: dict[str, int] | None = None
        line_end = 0
        for row in reader:
            line, line_end = line_end + 1, reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            cells = [c.strip() for c in row]
            if idx is None:
                if required[0] in cells:  # a header line
                    idx = {}
                    for i, name in enumerate(cells):
                        idx.setdefault(name, i)
                    for name in required:
                        if name not in idx:
                            raise TraceError(path, line, name,
                                             f"missing column {name!r} in the header (required: {', '.join(required)})")
                    continue
                if not header_optional:
                    raise TraceError(path, line, "header",
                                     f"expected a header line with columns {', '.join(required)}")
                idx = {name: i for i, name in enumerate(columns)}
            record = {}
            for name, i in idx.items():
                if name in required and i >= len(cells):
                    raise TraceError(path, line, name,
                                     f"missing: the row has {len(cells)} cells, the column is number {i + 1}")
                record[name] = cells[i] if i < len(cells) else ""
            yield line, record
        if idx is None:
            raise TraceError(path, 1, "header", "empty file")
    except csv.Error as err:
        raise TraceError(path, reader.line_num or 1, "csv", f"not a readable CSV file ({err})") from None



# --------------------------------------------------------------------------- run span and status


def ran_job(job_id: str, submit: float, gpus: int, start: float | None, end: float | None, line: int, path: str,
         skips: SkipCounts, zero_gpus_first: bool) -> RawJob | None:
    """The job as run, or None (counted in ``skips``) if it holds no GPUs, never ran, or has no
    positive duration. ``zero_gpus_first`` sets which reason a row with both is counted under."""
    if zero_gpus_first and gpus == 0:
        skips.add("zero GPUs")
        return None
    if start is None or end is None:
        skips.add("never ran")
        return None
    if gpus == 0:
        skips.add("zero GPUs")
        return None
    if end <= start:
        skips.add("non-positive duration")
        return None
    return RawJob(job_id, submit, gpus, end - start, line, path)


def is_kept(state: str, keep: frozenset | set, failed: frozenset | set, unfinished: frozenset | set,
          skips: SkipCounts, path: str, line: int, field: str) -> bool:
    """Is a row in this final state kept? Failed and unfinished rows are counted as skipped;
    an unknown state is an error naming the file, line and field."""
    if state in failed:
        skips.add("failed")
        return False
    if state in unfinished:
        skips.add("unfinished")
        return False
    if state not in keep:
        known = sorted(keep | failed | unfinished)
        raise TraceError(path, line, field, f"unknown {field} {shown(state)} (expected one of {', '.join(known)})")
    return True
