"""Trace format: JobSpec validation, CSV loading (happy path and every error), writing."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_gym.model.jobspec import MAX_DURATION_S, MAX_SUBMIT_TIME_S, JobSpec, JobSpecError

from lyra_gym.workloads.trace import TRACE_COLUMNS, TraceError, load_trace, write_trace

HEADER = ",".join(TRACE_COLUMNS)


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def spec(**kw) -> JobSpec:
    base = dict(
        job_id="a", submit_time=0.0, num_gpus=2, duration=10.0, model="resnet50",
        elastic=False, min_gpus=2, max_gpus=2,
    )
    base.update(kw)
    return JobSpec(**base)


# --------------------------------------------------------------------------- JobSpec


def test_jobspec_is_frozen():
    job = spec()
    with pytest.raises(AttributeError):
        job.num_gpus = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(job_id=""), "job_id"),
        (dict(job_id=" a"), "job_id"),
        (dict(submit_time=-1.0), "submit_time"),
        (dict(submit_time=math.inf), "submit_time"),
        (dict(submit_time=math.nan), "submit_time"),
        (dict(submit_time="1"), "submit_time"),
        (dict(num_gpus=0, min_gpus=0, max_gpus=0), "num_gpus"),
        (dict(num_gpus=2.0), "num_gpus"),
        (dict(num_gpus=True), "num_gpus"),
        (dict(duration=0.0), "duration"),
        (dict(duration=-5.0), "duration"),
        (dict(duration=math.inf), "duration"),
        (dict(model=""), "model"),
        (dict(elastic=1), "elastic"),
        (dict(elastic=True, min_gpus=0), "min_gpus"),
        (dict(elastic=True, min_gpus=4, max_gpus=3, num_gpus=3), "min_gpus"),
        (dict(elastic=True, min_gpus=1, max_gpus=4, num_gpus=8), "num_gpus"),
        (dict(elastic=False, min_gpus=1), "min_gpus"),
        (dict(elastic=False, max_gpus=4), "max_gpus"),
    ],
)
def test_jobspec_rejects_invalid_values(kw, field):
    with pytest.raises(JobSpecError) as info:
        spec(**kw)
    assert isinstance(info.value, ValueError)
    assert info.value.field == field
    assert field in str(info.value)


def test_jobspec_normalises_numpy_scalars():
    job = spec(submit_time=np.float32(1.5), num_gpus=np.int64(4), duration=7, elastic=np.bool_(True),
               min_gpus=np.int32(2), max_gpus=8)
    assert type(job.submit_time) is float and job.submit_time == 1.5
    assert type(job.duration) is float and job.duration == 7.0
    assert type(job.num_gpus) is int and type(job.min_gpus) is int
    assert job.elastic is True


# --------------------------------------------------------------------------- loading: happy path


def test_load_happy_path(tmp_path):
    text = (
        "model, job_id ,comment,num_gpus,elastic,duration,submit_time,min_gpus,max_gpus\n"
        "resnet50,a,first job,4,0,3600,0,,\n"
        "\n"
        "bert,b,,8,TRUE,120.5,10.25,4,16\n"
        "ncf,c,x,1,no,60,11,1,1\n"
        "yolov3,d,,2,Yes,1e3,12,1,2\n"
        "   \n"
        "ncf,e,,4.0,false,5,13,,\n"
    )
    jobs = load_trace(write(tmp_path, text), known_models={"resnet50", "bert", "ncf", "yolov3"})
    assert jobs == [
        JobSpec("a", 0.0, 4, 3600.0, "resnet50", False, 4, 4),
        JobSpec("b", 10.25, 8, 120.5, "bert", True, 4, 16),
        JobSpec("c", 11.0, 1, 60.0, "ncf", False, 1, 1),
        JobSpec("d", 12.0, 2, 1000.0, "yolov3", True, 1, 2),
        JobSpec("e", 13.0, 4, 5.0, "ncf", False, 4, 4),
    ]
    assert all(type(j.num_gpus) is int and type(j.submit_time) is float for j in jobs)


def test_load_header_only_is_refused(tmp_path):
    # A run of zero jobs measures nothing (issue 23): refused, naming the file.
    path = write(tmp_path, HEADER + "\n")
    with pytest.raises(TraceError, match=rf"^{re.escape(str(path))}: no jobs"):
        load_trace(path)


def test_load_accepts_crlf_and_bom(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(("\ufeff" + HEADER + "\r\na,1,1,2,m,1,1,2\r\n").encode("utf-8"))
    assert load_trace(path) == [JobSpec("a", 1.0, 1, 2.0, "m", True, 1, 2)]


def test_unsorted_rows_are_sorted_stably(tmp_path):
    rows = [("x", 50), ("y", 10), ("z", 50), ("w", 0), ("v", 10), ("u", 50)]
    text = HEADER + "\n" + "".join(f"{jid},{t},1,5,m,0,,\n" for jid, t in rows)
    jobs = load_trace(write(tmp_path, text))
    assert [j.job_id for j in jobs] == ["w", "y", "v", "x", "z", "u"]


def test_blank_rows_are_skipped_and_every_other_row_kept(tmp_path):
    text = HEADER + "\na,0,1,5,m,0,,\n\n,,,,,,,\n\"\"\n  ,\t,,,,,,\nb,1,1,5,m,0,,\n"
    assert [j.job_id for j in load_trace(write(tmp_path, text))] == ["a", "b"]


# --------------------------------------------------------------------------- loading: errors

ROW_OK = "a,0,2,10,resnet50,0,,"

ERROR_CASES = [
    # (id, file text, expected line, expected field)
    ("missing column", "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus\n" + ROW_OK + "\n", 1, "max_gpus"),
    ("empty file", "", 1, "header"),
    ("blank file", "\n  \n", 1, "header"),
    ("submit_time non-numeric", HEADER + "\na,soon,2,10,resnet50,0,,\n", 2, "submit_time"),
    ("submit_time empty", HEADER + "\na,,2,10,resnet50,0,,\n", 2, "submit_time"),
    ("submit_time negative", HEADER + "\na,-1,2,10,resnet50,0,,\n", 2, "submit_time"),
    ("submit_time inf", HEADER + "\na,inf,2,10,resnet50,0,,\n", 2, "submit_time"),
    ("submit_time nan", HEADER + "\na,nan,2,10,resnet50,0,,\n", 2, "submit_time"),
    ("duration non-numeric", HEADER + "\na,0,2,long,resnet50,0,,\n", 2, "duration"),
    ("duration zero", HEADER + "\na,0,2,0,resnet50,0,,\n", 2, "duration"),
    ("duration negative", HEADER + "\na,0,2,-3,resnet50,0,,\n", 2, "duration"),
    ("duration inf", HEADER + "\na,0,2,Infinity,resnet50,0,,\n", 2, "duration"),
    ("num_gpus zero", HEADER + "\na,0,0,10,resnet50,0,,\n", 2, "num_gpus"),
    ("num_gpus negative", HEADER + "\na,0,-4,10,resnet50,0,,\n", 2, "num_gpus"),
    ("num_gpus fractional", HEADER + "\na,0,2.5,10,resnet50,0,,\n", 2, "num_gpus"),
    ("num_gpus text", HEADER + "\na,0,two,10,resnet50,0,,\n", 2, "num_gpus"),
    ("min > max", HEADER + "\na,0,4,10,resnet50,1,8,4\n", 2, "min_gpus"),
    ("num below min", HEADER + "\na,0,2,10,resnet50,1,4,8\n", 2, "num_gpus"),
    ("num above max", HEADER + "\na,0,16,10,resnet50,1,4,8\n", 2, "num_gpus"),
    ("min_gpus zero", HEADER + "\na,0,2,10,resnet50,1,0,4\n", 2, "min_gpus"),
    ("min_gpus text", HEADER + "\na,0,2,10,resnet50,1,one,4\n", 2, "min_gpus"),
    ("elastic without min", HEADER + "\na,0,2,10,resnet50,1,,4\n", 2, "min_gpus"),
    ("elastic without max", HEADER + "\na,0,2,10,resnet50,1,1,\n", 2, "max_gpus"),
    ("inelastic min differs", HEADER + "\na,0,2,10,resnet50,0,1,2\n", 2, "min_gpus"),
    ("inelastic max differs", HEADER + "\na,0,2,10,resnet50,0,2,4\n", 2, "max_gpus"),
    ("bad elastic", HEADER + "\na,0,2,10,resnet50,maybe,,\n", 2, "elastic"),
    ("empty elastic", HEADER + "\na,0,2,10,resnet50,,,\n", 2, "elastic"),
    ("duplicate job_id", HEADER + "\n" + ROW_OK + "\nb,1,1,1,ncf,0,,\n" + ROW_OK + "\n", 4, "job_id"),
    ("empty job_id", HEADER + "\n" + ROW_OK + "\n ,1,1,1,ncf,0,,\n", 3, "job_id"),
    ("empty model", HEADER + "\na,0,2,10,,0,,\n", 2, "model"),
    ("short row", HEADER + "\na,0,2,10,resnet50\n", 2, "elastic"),
    # Blank lines count: the bad row is on line 5.
    ("line after blanks", HEADER + "\n" + ROW_OK + "\n\n\nb,0,2,-1,ncf,0,,\n", 5, "duration"),
    # A quoted cell spanning lines: the next row's line number is still right.
    ("after multi-line cell", HEADER + '\n"a\nb",0,2,10,ncf,0,,\nc,0,0,1,ncf,0,,\n', 4, "num_gpus"),
]


@pytest.mark.parametrize("text, line, field", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_load_errors_name_file_line_and_field(tmp_path, text, line, field):
    path = write(tmp_path, text, name="bad_trace.csv")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    err = info.value
    msg = str(err)
    assert isinstance(err, ValueError)
    assert "bad_trace.csv" in msg
    assert f":{line}:" in msg
    assert field in msg
    assert (err.line, err.field) == (line, field)


def test_unknown_model_lists_known_models(tmp_path):
    text = HEADER + "\n" + ROW_OK + "\nb,1,1,5,gpt9,0,,\n"
    with pytest.raises(TraceError) as info:
        load_trace(write(tmp_path, text, name="models.csv"), known_models=["resnet50", "bert", "ncf"])
    msg = str(info.value)
    assert "models.csv" in msg and ":3:" in msg and "model" in msg and "gpt9" in msg
    for known in ("resnet50", "bert", "ncf"):
        assert known in msg
    # Without known_models any key is accepted.
    assert len(load_trace(tmp_path / "models.csv")) == 2


def test_duplicate_message_names_first_line(tmp_path):
    text = HEADER + "\n" + ROW_OK + "\n" + ROW_OK + "\n"
    with pytest.raises(TraceError, match="first on line 2"):
        load_trace(write(tmp_path, text))


def test_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        load_trace(tmp_path / "nope.csv")


# --------------------------------------------------------------------------- writing


def test_write_format(tmp_path):
    jobs = [
        JobSpec("a", 0.1, 4, 3600.0, "bert", False, 4, 4),
        JobSpec("b, quoted", 2.0, 2, 1e-3, "ncf", True, 1, 4),
    ]
    path = tmp_path / "sub" / "out.csv"
    write_trace(jobs, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == [
        HEADER,
        "a,0.1,4,3600.0,bert,0,,",
        '"b, quoted",2.0,2,0.001,ncf,1,1,4',
    ]
    assert load_trace(path) == jobs


def test_write_rejects_duplicates_and_non_jobs(tmp_path):
    job = spec()
    with pytest.raises(ValueError, match="duplicate"):
        write_trace([job, job], tmp_path / "x.csv")
    with pytest.raises(TypeError):
        write_trace([("a", 0.0)], tmp_path / "y.csv")  # type: ignore[list-item]


_name_chars = st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff") | st.sampled_from(
    [",", '"', "'", " ", "\n", ";"]
)
_names = st.text(_name_chars, min_size=1, max_size=12).filter(lambda s: s == s.strip() and s != "")


@st.composite
def job_specs(draw, job_id: str) -> JobSpec:
    num = draw(st.integers(1, 1024))
    elastic = draw(st.booleans())
    if elastic:
        lo = draw(st.integers(1, num))
        hi = draw(st.integers(num, 4 * num))
    else:
        lo = hi = num
    return JobSpec(
        job_id=job_id,
        submit_time=draw(st.floats(min_value=0.0, max_value=MAX_SUBMIT_TIME_S, allow_nan=False, allow_infinity=False)),
        num_gpus=num,
        duration=draw(st.floats(min_value=0.0, exclude_min=True, max_value=MAX_DURATION_S, allow_nan=False,
                                allow_infinity=False)),
        model=draw(_names),
        elastic=elastic,
        min_gpus=lo,
        max_gpus=hi,
    )


@st.composite
def traces(draw) -> list[JobSpec]:
    ids = draw(st.lists(_names, min_size=1, max_size=20, unique=True))  # a trace file holds >= 1 job
    jobs = [draw(job_specs(jid)) for jid in ids]
    # A few equal submit times so that stability is exercised.
    if len(jobs) > 2 and draw(st.booleans()):
        t = jobs[0].submit_time
        jobs = [jobs[0]] + [
            JobSpec(j.job_id, t, j.num_gpus, j.duration, j.model, j.elastic, j.min_gpus, j.max_gpus)
            if k % 2 else j
            for k, j in enumerate(jobs[1:])
        ]
    return jobs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=traces())
@pytest.mark.slow
def test_write_load_round_trip_is_exact(tmp_path, jobs):
    path = tmp_path / "rt.csv"
    write_trace(jobs, path)
    loaded = load_trace(path)
    expected = sorted(jobs, key=lambda j: j.submit_time)
    assert loaded == expected
    # Bit-exact floats, not just ==.
    for a, b in zip(loaded, expected):
        assert a.submit_time.hex() == b.submit_time.hex()
        assert a.duration.hex() == b.duration.hex()


# --------------------------------------------------------------------------- old vs new
# The loader before its speed-up (commit 862f366: a per-row closure, JobSpec checks through
# getattr), kept here as the reference: the faster one must accept the same rows, build the same
# jobs and reject the same rows with the same line, field and message.

class _OldRowError(Exception):
    def __init__(self, field, problem):
        self.field, self.problem = field, problem


def _old_jobspec_checks(v: dict) -> None:
    """JobSpec.__post_init__ of 862f366 on plain values (as a row parse gives them)."""
    def fail(field, problem):
        raise _OldRowError(field, problem)

    if not isinstance(v["job_id"], str) or not v["job_id"]:
        fail("job_id", f"must be a non-empty string, got {v['job_id']!r}")
    if v["job_id"] != v["job_id"].strip():
        fail("job_id", f"must not start or end with whitespace, got {v['job_id']!r}")
    st_ = v["submit_time"]
    if not math.isfinite(st_) or st_ < 0:
        fail("submit_time", f"must be a finite number >= 0, got {st_!r}")
    if st_ > MAX_SUBMIT_TIME_S:
        fail("submit_time", f"must be at most MAX_SUBMIT_TIME_S = {MAX_SUBMIT_TIME_S:.0f} s (10 years), got {st_!r}")
    if v["num_gpus"] < 1:
        fail("num_gpus", f"must be an integer >= 1, got {v['num_gpus']!r}")
    d = v["duration"]
    if not math.isfinite(d) or d <= 0:
        fail("duration", f"must be a finite number > 0, got {d!r}")
    if d > MAX_DURATION_S:
        fail("duration", f"must be at most MAX_DURATION_S = {MAX_DURATION_S:.0f} s (10 years), got {d!r} s "
                         f"(a unit mix-up?)")
    m = v["model"]
    if not isinstance(m, str) or not m or m != m.strip():
        fail("model", f"must be a non-empty string without surrounding whitespace, got {m!r}")
    for name in ("min_gpus", "max_gpus"):
        if v[name] < 1:
            fail(name, f"must be an integer >= 1, got {v[name]!r}")
    if not v["elastic"]:
        for name in ("min_gpus", "max_gpus"):
            if v[name] != v["num_gpus"]:
                fail(name, f"an inelastic job must have {name} == num_gpus ({v['num_gpus']}), got {v[name]}")
    if v["min_gpus"] > v["max_gpus"]:
        fail("min_gpus", f"min_gpus ({v['min_gpus']}) is greater than max_gpus ({v['max_gpus']})")
    if not v["min_gpus"] <= v["num_gpus"] <= v["max_gpus"]:
        fail("num_gpus", f"num_gpus ({v['num_gpus']}) is outside [min_gpus, max_gpus] = "
                         f"[{v['min_gpus']}, {v['max_gpus']}]")
    b = v["batch_size"]
    if b is not None:
        if b < 1:
            fail("batch_size", f"must be an integer >= 1, got {b!r}")
        if b > 2**24:
            fail("batch_size", f"must be at most MAX_BATCH_SIZE = {2**24:,} samples, got {b:.6g}")
        if b < v["num_gpus"]:
            fail("batch_size", f"{b} samples is fewer than num_gpus ({v['num_gpus']}): each of the job's workers "
                               f"needs at least one sample per step")


def _old_ascii(field, text, kind):
    """Issue 40's rule added to 862f366's: numbers in ASCII digits, no '_' (float() reads both)."""
    if not text.isascii() or "_" in text:
        raise _OldRowError(field, f"not {kind}: {text!r} (only ASCII digits, no '_' separators)")


def _old_float(field, text):
    try:
        value = float(text)
    except ValueError:
        raise _OldRowError(field, f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise _OldRowError(field, f"must be finite, got {text!r}")
    _old_ascii(field, text, "a number")
    return value


def _old_int(field, text):
    try:
        whole = int(text)
    except ValueError:
        pass
    else:
        _old_ascii(field, text, "an integer")
        return whole
    try:
        value = float(text)
    except ValueError:
        raise _OldRowError(field, f"not an integer: {text!r}") from None
    if not math.isfinite(value) or not value.is_integer():
        raise _OldRowError(field, f"not an integer: {text!r}")
    _old_ascii(field, text, "an integer")
    return int(value)


def _old_parse_row(cells: list[str], idx: dict[str, int]) -> tuple:
    """862f366's _parse_row: the job's fields as a tuple, or _OldRowError."""
    def get(name):
        i = idx[name]
        if i >= len(cells):
            raise _OldRowError(name, "missing: the row has fewer cells than the header")
        return cells[i].strip()

    v = {"job_id": get("job_id")}
    if not v["job_id"]:
        raise _OldRowError("job_id", "empty job_id")
    v["submit_time"] = _old_float("submit_time", get("submit_time"))
    if v["submit_time"] < 0:
        raise _OldRowError("submit_time", f"must be >= 0, got {v['submit_time']!r}")
    v["num_gpus"] = _old_int("num_gpus", get("num_gpus"))
    if v["num_gpus"] < 1:
        raise _OldRowError("num_gpus", f"must be >= 1, got {v['num_gpus']}")
    v["duration"] = _old_float("duration", get("duration"))
    if v["duration"] <= 0:
        raise _OldRowError("duration", f"must be > 0, got {v['duration']!r}")
    v["model"] = get("model")
    if not v["model"]:
        raise _OldRowError("model", "empty model key")
    el_text = get("elastic")
    if el_text.lower() in {"1", "true", "yes"}:
        v["elastic"] = True
    elif el_text.lower() in {"0", "false", "no"}:
        v["elastic"] = False
    else:
        raise _OldRowError("elastic", f"expected one of 1/0/true/false/yes/no, got {el_text!r}")
    for name in ("min_gpus", "max_gpus"):
        text = get(name)
        if text:
            v[name] = _old_int(name, text)
            if v[name] < 1:
                raise _OldRowError(name, f"must be >= 1, got {v[name]}")
        elif v["elastic"]:
            raise _OldRowError(name, "required for an elastic job")
        else:
            v[name] = v["num_gpus"]
    v["batch_size"] = None
    if "batch_size" in idx:
        text = get("batch_size")
        if text:
            v["batch_size"] = _old_int("batch_size", text)
            if v["batch_size"] < 1:
                raise _OldRowError("batch_size", f"must be >= 1, got {v['batch_size']}")
    _old_jobspec_checks(v)
    return tuple(v.values())


def _old_outcome(header: list[str], body: list[list[str]]):
    """What 862f366's loader made of a file with this header (line 1) and rows: the jobs' fields in
    file order, or (line, field, problem) of the first error (model keys and duplicates unchecked)."""
    idx: dict[str, int] = {}
    for i, name in enumerate(header):
        idx.setdefault(name, i)
    jobs = []
    for line, row in enumerate(body, start=2):
        if not any(cell.strip() for cell in row):
            continue
        try:
            jobs.append(_old_parse_row(row, idx))
        except _OldRowError as err:
            return (line, err.field, err.problem)
    return jobs


CROSS_NUMBERS = ["0", "1", "2", "4", "8", "16", "-1", "1.5", "4.0", "nan", "inf", "1e400", "3e9", "4e8", "",
                 " ", " 8 ", "99999999999", "20000000", "x", "1_0"]
CROSS_CELLS = st.one_of(st.sampled_from(CROSS_NUMBERS),
                        st.sampled_from(["resnet50", " bert", "yes", "No", "TRUE", "0", "1", "é", ""]),
                        st.text(max_size=4))


_VALID_ROWS = [
    {"job_id": "j", "submit_time": "5", "num_gpus": "4", "duration": "60", "model": "bert", "elastic": "0",
     "min_gpus": "", "max_gpus": "", "batch_size": "", "note": "x"},
    {"job_id": "j", "submit_time": "0.5", "num_gpus": "2", "duration": "7.25", "model": "ncf", "elastic": "yes",
     "min_gpus": "1", "max_gpus": "8", "batch_size": "64", "note": ""},
]


@st.composite
def _cross_files(draw):
    columns = [*TRACE_COLUMNS, *(["batch_size"] if draw(st.booleans()) else []),
               *(["note"] if draw(st.booleans()) else [])]
    header = draw(st.permutations(columns))
    body = []
    for i in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 3)):  # a valid row with 0-2 cells replaced: every check gets reached
            good = dict(draw(st.sampled_from(_VALID_ROWS)), job_id=f"j{i}")
            row = [good[name] for name in header]
            for _ in range(draw(st.integers(0, 2))):
                row[draw(st.integers(0, len(row) - 1))] = draw(CROSS_CELLS)
            if draw(st.integers(0, 5)) == 0:
                row = row[:draw(st.integers(0, len(row)))]  # a short row
        else:
            width = draw(st.sampled_from([len(header), len(header) - 1, 1, len(header) + 1]))
            row = [draw(CROSS_CELLS) for _ in range(width)]
        body.append([c.replace("\n", " ").replace("\r", " ").replace("\x00", " ") for c in row])  # one line, text
    return list(header), body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_cross_files())
@pytest.mark.slow
def test_loader_matches_the_loader_before_its_speed_up(tmp_path, case):
    """Same jobs, or the same first error (line, field, message), as the 862f366 loader."""
    import csv
    import io

    header, body = case
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *body])
    path = write(tmp_path, buffer.getvalue())
    # what csv gives back is what both loaders see (a quote inside a cell may re-split a row)
    header_read, *body_read = list(csv.reader(io.StringIO(buffer.getvalue(), newline="")))
    expected = _old_outcome(header_read, body_read)
    try:
        jobs = load_trace(path)
    except TraceError as err:
        if isinstance(expected, list) and not expected:
            assert err.line == 0 and "no jobs" in err.problem
        else:
            assert (err.line, err.field, err.problem) == expected
        return
    assert isinstance(expected, list)
    got = sorted(((j.job_id, j.submit_time, j.num_gpus, j.duration, j.model, j.elastic, j.min_gpus, j.max_gpus,
                   j.batch_size) for j in jobs), key=lambda t: t[0])
    assert got == sorted(expected, key=lambda t: t[0])


@pytest.mark.parametrize("kwargs, field", [
    ({"submit_time": np.float32(2.5), "num_gpus": np.int64(2)}, None),
    ({"elastic": np.bool_(True), "min_gpus": np.int16(1), "max_gpus": 4}, None),
    ({"num_gpus": 2.0}, "num_gpus"), ({"elastic": 1}, "elastic"), ({"duration": True}, "duration"),
    ({"min_gpus": np.int64(0)}, "min_gpus"), ({"max_gpus": 3}, "max_gpus"),
    ({"elastic": True, "min_gpus": 3, "max_gpus": 2, "num_gpus": 2}, "min_gpus"),
    ({"elastic": True, "min_gpus": 1, "max_gpus": 1}, "num_gpus"),
    ({"batch_size": np.int32(1)}, "batch_size"), ({"batch_size": 2**24 + 1}, "batch_size"),
])
def test_jobspec_numpy_values_convert_and_bad_ones_name_their_field(kwargs, field):
    """The faster __post_init__ keeps the conversions (numpy scalars to plain int/float/bool, in
    place) and the order of its checks."""
    if field is None:
        job = spec(**kwargs)
        for name in kwargs:
            assert type(getattr(job, name)) in (int, float, bool)
            assert getattr(job, name) == kwargs[name]
    else:
        with pytest.raises(JobSpecError) as err:
            spec(**kwargs)
        assert err.value.field == field
