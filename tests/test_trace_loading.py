"""Trace format: JobSpec validation, CSV loading (happy path and every error), writing."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_gym.trace import MAX_DURATION_S, MAX_SUBMIT_TIME_S, TRACE_COLUMNS, JobSpec, JobSpecError, TraceError, load_trace, write_trace

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
