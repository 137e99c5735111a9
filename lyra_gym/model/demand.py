"""Inference demand: how many inference servers the serving side needs over time.

The engine reads demand as a :class:`DemandCurve`, a step function of time in
seconds from trace start. Every inference server not needed at time ``t`` is
idle and may be loaned to training; when demand rises above the servers that
are not on loan, the engine opens a reclaim request.

Two sources of curves:

* :func:`diurnal_demand` draws a synthetic daily/weekly curve from a
  :class:`DiurnalDemandConfig` and a ``numpy.random.Generator``;
* :func:`load_demand_csv` reads a measured or hand-made curve from a CSV file
  with columns ``time_s,servers_needed`` (:func:`write_demand_csv` writes one).

Units everywhere: time in seconds (float), demand in whole servers (int).
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from lyra_gym.errors import ConfigError, LyraGymError, number_problem
from lyra_gym.model.userfiles import read_user_file, shown

__all__ = [
    "ConfigError",
    "DemandCurve",
    "DemandFileError",
    "DiurnalDemandConfig",
    "diurnal_demand",
    "load_demand_csv",
    "write_demand_csv",
    "TIME_COLUMN",
    "SERVERS_COLUMN",
    "MAX_DEMAND_POINTS",
]

SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
TIME_COLUMN = "time_s"
SERVERS_COLUMN = "servers_needed"

#: Most points :func:`diurnal_demand` draws (one per ``step_s`` up to the horizon). 1,000,000
#: points are about 28 years at the default 900 s step and about 50 MB while drawing them;
#: a longer horizon is a :class:`ConfigError` naming the horizon and ``step_s`` (raise
#: ``demand.step_s`` or shorten the trace) instead of a MemoryError.
MAX_DEMAND_POINTS = 1_000_000
#: Most bytes of a demand CSV file (a million points of about 30 bytes, twice over).
MAX_DEMAND_BYTES = 64 * 2**20

# A demand value within this distance of a whole number counts as that whole
# number before rounding up; it keeps floating-point error in the cosine shape
# (e.g. 8.000000000000002) from costing a whole extra server.
_CEIL_TOLERANCE_DECIMALS = 9


class DemandFileError(LyraGymError):
    """A demand CSV file could not be read; names the file, the line (1-based,
    header = line 1) and the field at fault."""

    def __init__(self, path: str | os.PathLike[str], line: int, field: str, problem: str) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(f"{self.path}, line {line}, field '{field}': {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.field, self.problem))


def _merge_equal_runs(times_s: np.ndarray, servers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep only the points where the value changes (the first point always)."""
    if servers.size <= 1:
        return times_s, servers
    keep = np.empty(servers.size, dtype=bool)
    keep[0] = True
    keep[1:] = servers[1:] != servers[:-1]
    return times_s[keep], servers[keep]


@dataclass(frozen=True, eq=False)
class DemandCurve:
    """Inference demand as a step function of time: ``servers[i]`` inference
    servers are needed on ``[times_s[i], times_s[i+1])``; the last value holds
    forever after. Times in seconds from trace start.

    :param times_s: change times in seconds, float64, strictly increasing,
        ``times_s[0] == 0.0``.
    :param servers: servers needed from each change time on, int64, ``>= 0``,
        same length as ``times_s``. Float input is accepted if every value is a
        whole number.

    Both arrays are stored as read-only copies, so a curve can be shared
    freely. Consecutive equal values are allowed here (they are merged by the
    constructors in this module, not by the class itself).
    """

    times_s: np.ndarray
    servers: np.ndarray

    def __post_init__(self) -> None:
        try:
            times = np.array(self.times_s, dtype=np.float64, copy=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"DemandCurve.times_s must be numeric: {exc}") from None
        raw_servers = np.asarray(self.servers)
        if raw_servers.dtype.kind not in "iuf":
            raise ValueError(
                f"DemandCurve.servers must be integers, got dtype {raw_servers.dtype}"
            )
        if times.ndim != 1 or raw_servers.ndim != 1:
            raise ValueError("DemandCurve.times_s and DemandCurve.servers must be 1-D arrays")
        if times.size == 0:
            raise ValueError("DemandCurve.times_s must hold at least one point")
        if times.size != raw_servers.size:
            raise ValueError(
                f"DemandCurve.times_s ({times.size} points) and DemandCurve.servers "
                f"({raw_servers.size} points) must have the same length"
            )
        if not np.all(np.isfinite(times)):
            raise ValueError("DemandCurve.times_s must be finite")
        if times[0] != 0.0:
            raise ValueError(f"DemandCurve.times_s[0] must be 0.0, got {times[0]!r}")
        if times.size > 1 and not np.all(np.diff(times) > 0):
            bad = int(np.argmax(np.diff(times) <= 0)) + 1
            raise ValueError(
                f"DemandCurve.times_s must be strictly increasing; times_s[{bad}]="
                f"{times[bad]!r} follows {times[bad - 1]!r}"
            )
        if raw_servers.dtype.kind == "f":
            if not np.all(np.isfinite(raw_servers)) or not np.all(raw_servers == np.round(raw_servers)):
                raise ValueError("DemandCurve.servers must be whole numbers")
        servers = np.array(raw_servers, dtype=np.int64, copy=True)
        if np.any(servers < 0):
            bad = int(np.argmax(servers < 0))
            raise ValueError(f"DemandCurve.servers must be >= 0; servers[{bad}]={servers[bad]}")
        times.setflags(write=False)
        servers.setflags(write=False)
        object.__setattr__(self, "times_s", times)
        object.__setattr__(self, "servers", servers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DemandCurve):
            return NotImplemented
        return bool(
            np.array_equal(self.times_s, other.times_s) and np.array_equal(self.servers, other.servers)
        )

    def __hash__(self) -> int:
        return hash((self.times_s.tobytes(), self.servers.tobytes()))

    def __len__(self) -> int:
        """Number of points (change times) in the curve."""
        return int(self.times_s.size)

    def at(self, t: float) -> int:
        """Servers needed at time ``t`` seconds (``t < 0`` gives ``servers[0]``).

        A change at time ``c`` is already in force at ``t == c``.
        """
        if math.isnan(t):
            raise ValueError("DemandCurve.at: t is NaN")
        index = int(np.searchsorted(self.times_s, t, side="right")) - 1
        return int(self.servers[max(index, 0)])

    def next_change(self, t: float) -> float | None:
        """First change time strictly after ``t`` seconds, or ``None`` if the
        curve never changes again (for scheduling demand-change events)."""
        index = int(np.searchsorted(self.times_s, t, side="right"))
        if index >= self.times_s.size:
            return None
        return float(self.times_s[index])

    def peak(self) -> int:
        """Largest number of servers needed at any time."""
        return int(self.servers.max())

    def mean_busy_fraction(self, num_servers: int, horizon_s: float | None = None) -> float:
        """Time-weighted mean of ``min(servers, num_servers) / num_servers`` over
        ``[0, horizon_s]`` seconds.

        :param num_servers: inference servers in the cluster (capacity), ``>= 1``.
        :param horizon_s: end of the averaging window in seconds, ``> 0``.
            Default: the last change time, so the final value (which holds
            forever) does not count; one day (86 400 s) if the curve has a single
            point. A horizon past the last change extends the last value.
        """
        if isinstance(num_servers, bool) or int(num_servers) != num_servers or num_servers < 1:
            raise ValueError(f"num_servers must be an integer >= 1, got {num_servers!r}")
        if horizon_s is None:
            horizon = float(self.times_s[-1]) if self.times_s.size > 1 else SECONDS_PER_DAY
        else:
            horizon = float(horizon_s)
        if not math.isfinite(horizon) or horizon <= 0:
            raise ValueError(f"horizon_s must be a finite number > 0, got {horizon_s!r}")
        starts = np.minimum(self.times_s, horizon)
        ends = np.minimum(np.append(self.times_s[1:], horizon), horizon)
        durations = ends - starts
        busy = np.minimum(self.servers, int(num_servers)).astype(np.float64)
        return float(np.dot(busy, durations) / (int(num_servers) * horizon))

    @classmethod
    def constant(cls, servers: int) -> "DemandCurve":
        """A curve that needs ``servers`` inference servers at all times."""
        return cls(times_s=np.array([0.0]), servers=np.array([servers], dtype=np.int64))


@dataclass(frozen=True)
class DiurnalDemandConfig:
    """Parameters of the synthetic diurnal inference demand.

    Weekday shape (servers, before noise and rounding)::

        peak   = peak_fraction * num_servers
        trough = peak / peak_trough_ratio
        d(h)   = trough + (peak - trough) * (1 + cos(2*pi*(h - peak_hour)/24)) / 2

    with ``h`` the hour of day. Saturday and Sunday keep the trough but the part
    above it is multiplied by ``weekend_factor``.

    :param num_servers: inference servers in the cluster (capacity); demand is
        clipped to it. Default 16 (assumption; the Lyra paper does not publish
        cluster sizes). Inside a :class:`lyra_gym.model.config.SimConfig` it is not a
        free setting: it is set to ``cluster.inference.count``, and a config
        giving another value is refused.
    :param peak_fraction: weekday peak demand as a fraction of ``num_servers``,
        in [0, 1]. Default 0.9 (assumption: a cluster sized with ~10 % headroom).
    :param peak_trough_ratio: weekday peak / trough, ``>= 1``. Default 4.0.
        Source for the range: Azure LLM inference trace 2024 (CC-BY-4.0), where
        the coding service's peak/trough is about 8-10x and the conversation
        service's about 2.5x; 4 is an assumption in between. With 0.9 and 4 the
        trough is 22.5 % busy, under the 40 % that the Lyra paper (EuroSys 2023)
        reports for long stretches.
    :param peak_hour: hour of day of the peak, in [0, 24). Default 14.0 (the
        Azure 2024 trace peaks around 14-20 h UTC).
    :param weekend_factor: on Saturday and Sunday the demand above the trough
        is scaled by this, in [0, 1]. Default 0.6 (assumption; the Azure trace
        shows much lower weekends).
    :param noise_std: standard deviation of the multiplicative Gaussian noise
        drawn once per step, as a fraction of the noiseless value, ``>= 0``.
        Default 0.05 (assumption).
    :param step_s: resolution of the curve in seconds, ``> 0``. Default 900.0
        (15 minutes; assumption).
    :param start_weekday: weekday of ``t = 0``, 0 = Monday ... 6 = Sunday.
        Default 0.

    Invalid values (wrong type, out of range, NaN, infinity; ``True``/``False`` for a
    number) raise :class:`ConfigError`, a ``ValueError``, naming the field at construction.
    """

    num_servers: int = 16
    peak_fraction: float = 0.9
    peak_trough_ratio: float = 4.0
    peak_hour: float = 14.0
    weekend_factor: float = 0.6
    noise_std: float = 0.05
    step_s: float = 900.0
    start_weekday: int = 0

    #: Range of each field (keyword arguments of :func:`number_problem`); the config
    #: loader (:mod:`lyra_gym.model.config`) checks file values against the same rules.
    RULES: ClassVar[dict[str, dict[str, Any]]] = {
        "num_servers": {"integer": True, "lo": 1},
        "peak_fraction": {"lo": 0.0, "hi": 1.0},
        "peak_trough_ratio": {"lo": 1.0},
        "peak_hour": {"lo": 0.0, "hi": 24.0, "hi_open": True},
        "weekend_factor": {"lo": 0.0, "hi": 1.0},
        "noise_std": {"lo": 0.0},
        "step_s": {"lo": 0.0, "lo_open": True},
        "start_weekday": {"integer": True, "lo": 0, "hi": 6},
    }

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` (a ``ValueError``) naming the first invalid field."""
        for name, rule in self.RULES.items():
            problem = number_problem(getattr(self, name), **rule)
            if problem is not None:
                raise ConfigError(f"DiurnalDemandConfig.{name}: {problem}")


#: Named demand shapes (``SimConfig.demand_preset``). Peak/trough ratios from the Azure LLM
#: inference trace 2024 (CC-BY-4.0, shared/data/PROVENANCE.md): conversation service about
#: 2.5x ("mild"), coding service about 8-10x ("strong"); "default" sits between (4x).
DEMAND_PRESETS: dict[str, DiurnalDemandConfig] = {
    "default": DiurnalDemandConfig(),
    "mild": DiurnalDemandConfig(peak_trough_ratio=2.5),
    "strong": DiurnalDemandConfig(peak_trough_ratio=8.0),
}


def diurnal_demand(
    config: DiurnalDemandConfig, horizon_s: float, rng: np.random.Generator
) -> DemandCurve:
    """Draw a synthetic diurnal demand curve over ``[0, horizon_s]`` seconds.

    One value per ``config.step_s`` seconds at ``t = 0, step_s, 2*step_s, ...
    <= horizon_s`` (at least one point), computed from the daily shape of
    :class:`DiurnalDemandConfig` at the start of each step, multiplied by
    ``1 + noise_std * z`` with ``z`` standard normal, rounded up to whole
    servers and clipped to ``[0, num_servers]``. Exactly one normal draw is
    taken from ``rng`` per step, whatever ``noise_std`` is, so the stream
    position afterwards depends only on the number of steps. Consecutive equal
    values are merged, so the curve holds only real changes.

    :param config: shape parameters.
    :param horizon_s: length of the curve in seconds, finite and ``>= 0``;
        the last value holds beyond it.
    :param rng: the only source of randomness.
    :raises ConfigError: if the curve would need :data:`MAX_DEMAND_POINTS` points or more
        (``horizon_s / step_s``), naming both values.
    """
    config.validate()
    horizon = float(horizon_s)
    if not math.isfinite(horizon) or horizon < 0.0:
        raise ValueError(f"horizon_s must be a finite number >= 0, got {horizon_s!r}")
    step = float(config.step_s)
    if horizon / step >= MAX_DEMAND_POINTS:
        raise ConfigError(
            f"demand curve: horizon_s={horizon:.12g} s at demand.step_s={step:.12g} s needs "
            f"{horizon / step + 1:.4g} points, more than MAX_DEMAND_POINTS={MAX_DEMAND_POINTS:,}; "
            f"raise demand.step_s or shorten the horizon (the last submit time plus "
            f"demand_horizon_pad_s)"
        )
    num_steps = int(math.floor(horizon / step))
    if (num_steps + 1) * step <= horizon:  # guard against floor rounding down
        num_steps += 1
    times = np.arange(num_steps + 1, dtype=np.float64) * step

    peak = config.peak_fraction * config.num_servers
    trough = peak / config.peak_trough_ratio
    hour = np.mod(times / SECONDS_PER_HOUR, 24.0)
    shape = (1.0 + np.cos(2.0 * np.pi * (hour - config.peak_hour) / 24.0)) / 2.0
    weekday = (config.start_weekday + np.floor(times / SECONDS_PER_DAY).astype(np.int64)) % 7
    above_trough_scale = np.where(weekday >= 5, config.weekend_factor, 1.0)
    value = trough + (peak - trough) * shape * above_trough_scale

    noise = rng.standard_normal(times.size)
    value = value * (1.0 + config.noise_std * noise)
    value = np.ceil(np.round(value, _CEIL_TOLERANCE_DECIMALS))
    servers = np.clip(value, 0, config.num_servers).astype(np.int64)

    times, servers = _merge_equal_runs(times, servers)
    return DemandCurve(times_s=times, servers=servers)


def load_demand_csv(path: str | os.PathLike[str]) -> DemandCurve:
    """Read a demand curve from a CSV file.

    Format: a header row holding (at least) the columns ``time_s`` (seconds
    from trace start, float ``>= 0``) and ``servers_needed`` (whole servers,
    ``>= 0``); other columns are ignored and column order is free. Each row
    says that from ``time_s`` on, ``servers_needed`` servers are needed.

    * Blank lines are skipped; line numbers in errors count them (header = 1).
    * Rows may be in any order; they are sorted by time.
    * ``servers_needed`` may be written as ``3`` or ``3.0`` but must be whole.
    * If the earliest time is after 0, its value is taken to hold from 0 (a
      point at 0 is prepended), since the curve must cover the whole trace.
    * Consecutive equal values are merged.
    * Only a regular UTF-8 file of at most :data:`MAX_DEMAND_BYTES` bytes is read (a FIFO or
      ``/dev/zero`` is refused unread); numbers are ASCII; errors never show the header's text.

    :raises DemandFileError: naming the file, line and field for an empty file,
        a missing column, a non-numeric, non-finite or negative time, a
        non-integer or negative ``servers_needed``, a duplicate time, or a file
        with no data rows.
    """
    name = os.fspath(path)
    points: list[tuple[float, int, int]] = []  # (time, servers, line)
    reader = csv.reader(io.StringIO(_demand_text(name), newline=""))
    try:
        header: list[str] | None = None
        header_line = 1
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                header_line = line
                for column in (TIME_COLUMN, SERVERS_COLUMN):
                    count = header.count(column)
                    if count == 0:  # the header's text is not shown: the file may be anything
                        raise DemandFileError(
                            name, line, column, f"missing column: the header's {len(header)} columns "
                            f"do not include {column!r} (a demand CSV has {TIME_COLUMN},{SERVERS_COLUMN})"
                        )
                    if count > 1:
                        raise DemandFileError(name, line, column, "column appears more than once")
                time_index = header.index(TIME_COLUMN)
                servers_index = header.index(SERVERS_COLUMN)
                continue
            time_s = _parse_time(name, line, row, time_index)
            needed = _parse_servers(name, line, row, servers_index)
            points.append((time_s, needed, line))
    except csv.Error as err:  # a field larger than the csv module's limit, a NUL byte
        raise DemandFileError(name, reader.line_num or 1, "csv", f"not a readable CSV file ({err})") from None
    if header is None:
        raise DemandFileError(
            name, 1, f"{TIME_COLUMN},{SERVERS_COLUMN}", "empty file, expected a header row"
        )
    if not points:
        raise DemandFileError(
            name, header_line + 1, f"{TIME_COLUMN},{SERVERS_COLUMN}", "no data rows after the header"
        )

    first_line_of_time: dict[float, int] = {}
    for time_s, _, line in points:
        if time_s in first_line_of_time:
            raise DemandFileError(
                name, line, TIME_COLUMN,
                f"duplicate time {time_s!r} (first given on line {first_line_of_time[time_s]})",
            )
        first_line_of_time[time_s] = line

    points.sort(key=lambda point: point[0])
    times = np.array([p[0] for p in points], dtype=np.float64)
    servers = np.array([p[1] for p in points], dtype=np.int64)
    if times[0] > 0.0:
        times = np.concatenate(([0.0], times))
        servers = np.concatenate((servers[:1], servers))
    times, servers = _merge_equal_runs(times, servers)
    return DemandCurve(times_s=times, servers=servers)


def _demand_text(name: str) -> str:
    """The file's text: a regular UTF-8 file of at most :data:`MAX_DEMAND_BYTES` bytes."""
    def error(message: str) -> DemandFileError:
        return DemandFileError(name, 1, "file", message.removeprefix(f"{name}: "))

    raw = read_user_file(name, MAX_DEMAND_BYTES, "demand CSV file", error=error)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise DemandFileError(name, line, "file", f"not UTF-8 text (byte 0x{raw[err.start]:02x})") from None


def _cell(path: str, line: int, row: list[str], index: int, field: str) -> str:
    if index >= len(row) or not row[index].strip():
        raise DemandFileError(path, line, field, "missing value")
    text = row[index].strip()
    if not text.isascii() or "_" in text:  # float() reads other scripts' digits ('١٢') and '1_000' too
        raise DemandFileError(path, line, field, f"not a number: {shown(text)} (only ASCII digits, no '_' separators)")
    return text





def _parse_time(path: str, line: int, row: list[str], index: int) -> float:
    text = _cell(path, line, row, index, TIME_COLUMN)
    try:
        value = float(text)
    except ValueError:
        raise DemandFileError(path, line, TIME_COLUMN, f"not a number: {shown(text)}") from None
    if not math.isfinite(value):
        raise DemandFileError(path, line, TIME_COLUMN, f"not a finite number: {shown(text)}")
    if value < 0.0:
        raise DemandFileError(path, line, TIME_COLUMN, f"negative time: {shown(text)}")
    return value + 0.0  # turns -0.0 into 0.0


def _parse_servers(path: str, line: int, row: list[str], index: int) -> int:
    text = _cell(path, line, row, index, SERVERS_COLUMN)
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise DemandFileError(path, line, SERVERS_COLUMN, f"not an integer: {shown(text)}") from None
        if not math.isfinite(as_float) or not as_float.is_integer():
            raise DemandFileError(path, line, SERVERS_COLUMN, f"not an integer: {shown(text)}") from None
        value = int(as_float)
    if value < 0:
        raise DemandFileError(path, line, SERVERS_COLUMN, f"negative server count: {shown(text)}")
    return value


def write_demand_csv(curve: DemandCurve, path: str | os.PathLike[str]) -> None:
    """Write ``curve`` as CSV with columns ``time_s,servers_needed``, one row
    per point. Times are written with ``repr`` so that :func:`load_demand_csv`
    reads back exactly the same curve (for a curve built directly with
    consecutive equal values, the reader merges them; the step function it
    describes is the same)."""
    with open(os.fspath(path), "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow([TIME_COLUMN, SERVERS_COLUMN])
        for time_s, servers in zip(curve.times_s.tolist(), curve.servers.tolist()):
            writer.writerow([repr(float(time_s)), int(servers)])
