"""Fuzz: random (mostly malformed) trace rows load or fail with a TraceError naming file and line.

Each row's cells are drawn from valid values, near-misses (negative, zero, NaN, inf, 1.5, huge,
empty) and junk (text, quotes, commas, non-ASCII); rows may have too few or too many cells.
"""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_gym.workloads.trace import TRACE_COLUMNS, TraceError, load_trace

NUMBERS = ["0", "1", "2", "8", "-1", "1.5", "nan", "inf", "-inf", "1e400", "1e5", "", " ", "3e-9", "99999999999"]
JUNK = ["x", "ncf", "resnet50", "yes", "\"", ",", "é", "0x10", "1,2", "true", "None"]
cells = st.one_of(st.sampled_from(NUMBERS), st.sampled_from(JUNK), st.text(max_size=5))


@st.composite
def rows(draw) -> list[list[str]]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        width = draw(st.sampled_from([len(TRACE_COLUMNS)] * 4 + [len(TRACE_COLUMNS) - 1, len(TRACE_COLUMNS) + 1, 1]))
        row = [draw(cells) for _ in range(width)]
        if row and draw(st.booleans()):
            row[0] = f"j{i}"  # a plausible id, so later fields get checked
        out.append(row)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=rows())
@pytest.mark.slow
def test_malformed_rows_are_rejected_with_file_line_and_field(tmp_path, body):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(TRACE_COLUMNS)
    writer.writerows(body)
    path = tmp_path / "fuzz.csv"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    try:
        jobs = load_trace(path)
    except TraceError as err:
        assert str(err).startswith(str(path))
        assert 0 <= err.line <= len(body) + 1
        assert err.field and err.problem
        return
    blank = sum(1 for row in body if not any(cell.strip() for cell in row))  # documented as skipped
    assert len(jobs) == len(body) - blank  # accepted: nothing else dropped
    for job in jobs:
        assert job.num_gpus >= 1 and job.duration > 0 and job.submit_time >= 0
        assert 1 <= job.min_gpus <= job.max_gpus
