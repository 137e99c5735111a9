"""Public-trace loaders: hand-written fixtures convert to hand-computed jobs; bad rows name file, line, field."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.realtraces import (
    add_convert_parser,
    default_model_mix,
    load_alibaba,
    load_helios,
    load_philly,
    load_real_trace,
)
from lyra_gym.workloads.trace import TraceError, load_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PHILLY = FIXTURES / "philly_cluster_job_log.json"
HELIOS = FIXTURES / "helios_cluster_log.csv"
PAI_JOBS = FIXTURES / "alibaba_pai_job_table.csv"
PAI_TASKS = FIXTURES / "alibaba_pai_task_table.csv"
FIXED = {"model_mix": {"resnet50": 1.0}, "elastic_share": 0.0}  # no randomness left in the result


def job(job_id, submit, gpus, duration):
    return JobSpec(job_id, submit, gpus, duration, "resnet50", False, gpus, gpus)


def test_philly_fixture_gives_the_hand_computed_jobs():
    jobs = load_philly(PHILLY, **FIXED)
    # t0 = 07:59:00 (job 10006). 10001: submitted 08:00:00, ran 08:00:30-09:00:30 on 2 GPUs.
    # 10002: last attempt 08:20-08:50 on 2 servers x 4 GPUs (the first attempt is ignored).
    assert jobs == [
        job("application_1506638472019_10006", 0.0, 1, 120.0),
        job("application_1506638472019_10001", 60.0, 2, 3600.0),
        job("application_1506638472019_10002", 660.0, 8, 1800.0),
    ]
    assert jobs.records == 6
    assert jobs.skipped == {"failed": 1, "never ran": 2}  # 10003 failed; 10004 no attempt, 10005 no end


def test_helios_fixture_gives_the_hand_computed_jobs():
    jobs = load_helios(HELIOS, **FIXED)
    assert jobs == [job("h0001", 0.0, 1, 600.0), job("h0005", 60.0, 4, 43200.0), job("h0002", 300.0, 16, 7200.0)]
    assert jobs.skipped == {"failed": 1, "never ran": 1, "zero GPUs": 1}


def test_alibaba_fixture_gives_the_hand_computed_jobs():
    jobs = load_alibaba(PAI_JOBS, PAI_TASKS, **FIXED)
    # jobA: 2 instances x 100 % GPU, tasks ran 1010-4010. jobB: ps without GPU + 3 x 50 % = 1.5 -> 2 GPUs,
    # run span 1400 (ps start) .. 8900 (worker end); submitted 300 s after jobA.
    assert jobs == [job("jobA", 0.0, 2, 3000.0), job("jobB", 300.0, 2, 7500.0)]
    assert jobs.skipped == {"failed": 1, "unfinished": 1, "zero GPUs": 1}


def test_alibaba_tables_with_header_lines_load_the_same(tmp_path):
    jobs_file, tasks_file = tmp_path / "jobs.csv", tmp_path / "tasks.csv"
    jobs_file.write_text("job_name,inst_id,user,status,start_time,end_time\n" + PAI_JOBS.read_text())
    tasks_file.write_text("job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
                          + PAI_TASKS.read_text())
    assert load_alibaba(jobs_file, tasks_file, **FIXED) == load_alibaba(PAI_JOBS, PAI_TASKS, **FIXED)


def _replace_line(src: Path, dst: Path, line: int, old: str, new: str) -> Path:
    lines = src.read_text().splitlines(keepends=True)
    assert old in lines[line - 1], (old, lines[line - 1])
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    dst.write_text("".join(lines))
    return dst


@pytest.mark.parametrize(
    "line, old, new, field",
    [
        (3, "2020-04-01 00:05:00", "yesterday", "submit_time"),
        (2, ",1,6,1,COMPLETED", ",one,6,1,COMPLETED", "gpu_num"),
        (2, ",1,6,1,COMPLETED", ",1.5,6,1,COMPLETED", "gpu_num"),
        (6, "TIMEOUT", "EXPLODED", "state"),
        (7, "h0006", "h0001", "job_id"),
    ],
)
def test_helios_bad_row_names_file_line_and_field(tmp_path, line, old, new, field):
    bad = _replace_line(HELIOS, tmp_path / "cluster_log.csv", line, old, new)
    with pytest.raises(TraceError) as info:
        load_helios(bad)
    err = info.value
    assert (err.path, err.line, err.field) == (str(bad), line, field)
    assert str(err).startswith(f"{bad}:{line}: field '{field}'")


def test_helios_missing_column_names_the_header(tmp_path):
    bad = tmp_path / "c.csv"
    bad.write_text("job_id,user,gpu_num,state,submit_time,start_time\nh1,u,1,COMPLETED,0,1\n")
    with pytest.raises(TraceError) as info:
        load_helios(bad)
    assert (info.value.line, info.value.field) == (1, "end_time")


@pytest.mark.parametrize(
    "line, old, new, field",
    [
        (3, '"2017-10-03 08:00:00"', '"3 Oct 2017"', "submitted_time"),
        (10, '"2017-10-03 08:50:00"', '"later"', "attempts[1].end_time"),
        (11, '"gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}', '"gpus": 4}', "attempts[1].detail[0].gpus"),
        (6, '"Killed"', '"Paused"', "status"),
        (6, '"jobid": "application_1506638472019_10002"', '"jobid": ""', "jobid"),
        (6, '"jobid": "application_1506638472019_10002"', '"jobid": "application_1506638472019_10001"', "jobid"),
    ],
)
def test_philly_bad_record_names_file_line_and_field(tmp_path, line, old, new, field):
    bad = _replace_line(PHILLY, tmp_path / "cluster_job_log", line, old, new)
    with pytest.raises(TraceError) as info:
        load_philly(bad)
    # Philly records span several lines: the error names the line where the record starts.
    record_start = 6 if line >= 6 else 2
    assert (info.value.path, info.value.line, info.value.field) == (str(bad), record_start, field)


def test_philly_invalid_json_names_the_line(tmp_path):
    bad = _replace_line(PHILLY, tmp_path / "log.json", 3, '"submitted_time": "2017-10-03 08:00:00",',
                        '"submitted_time" "2017-10-03 08:00:00",')
    with pytest.raises(TraceError) as info:
        load_philly(bad)
    assert (info.value.line, info.value.field) == (3, "json")


@pytest.mark.parametrize(
    "table, line, old, new, field",
    [
        ("jobs", 2, "1300.0", "soon", "start_time"),
        ("jobs", 1, "Terminated", "Done", "status"),
        ("tasks", 3, ",50.0,", ",half,", "plan_gpu"),
        ("tasks", 1, ",2.0,", ",-2.0,", "inst_num"),
        ("tasks", 1, ",1010.0,", ",t0,", "start_time"),
    ],
)
def test_alibaba_bad_row_names_file_line_and_field(tmp_path, table, line, old, new, field):
    jobs, tasks = PAI_JOBS, PAI_TASKS
    if table == "jobs":
        jobs = bad = _replace_line(PAI_JOBS, tmp_path / "pai_job_table.csv", line, old, new)
    else:
        tasks = bad = _replace_line(PAI_TASKS, tmp_path / "pai_task_table.csv", line, old, new)
    with pytest.raises(TraceError) as info:
        load_alibaba(jobs, tasks)
    assert (info.value.path, info.value.line, info.value.field) == (str(bad), line, field)


def test_alibaba_short_row_names_the_missing_column(tmp_path):
    bad = _replace_line(PAI_JOBS, tmp_path / "jobs.csv", 2, ",Terminated,1300.0,9000.0", "")
    with pytest.raises(TraceError) as info:
        load_alibaba(bad, PAI_TASKS)
    assert (info.value.line, info.value.field) == (2, "status")


def _many_helios_rows(path: Path, n: int) -> Path:
    rows = ["job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"]
    for i in range(n):
        rows.append(f"x{i:04d},u,vc,{1 + i % 8},1,1,COMPLETED,{10 * i},{10 * i + 5},{10 * i + 600 + i},0,0")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_seeded_model_and_elastic_draws_are_deterministic(tmp_path):
    path = _many_helios_rows(tmp_path / "many.csv", 400)
    a, b = load_helios(path, seed=7), load_helios(path, seed=7)
    assert a == b
    c = load_helios(path, seed=8)
    assert [j.model for j in a] != [j.model for j in c]
    # Only the draws differ between seeds: times, sizes and durations come from the file.
    assert [(j.job_id, j.submit_time, j.num_gpus, j.duration) for j in a] == \
           [(j.job_id, j.submit_time, j.num_gpus, j.duration) for j in c]


def test_draws_follow_the_mix_and_the_elastic_share(tmp_path):
    path = _many_helios_rows(tmp_path / "many.csv", 400)
    jobs = load_helios(path, seed=3, model_mix={"bert": 0.5, "ncf": 0.5}, elastic_share=0.5)
    counts = Counter(j.model for j in jobs)
    assert set(counts) == {"bert", "ncf"} and 150 < counts["bert"] < 250
    elastic = [j for j in jobs if j.elastic]
    assert 150 < len(elastic) < 250
    assert all(j.min_gpus == max(1, j.num_gpus // 2) and j.max_gpus == 2 * j.num_gpus for j in elastic)
    default = load_helios(path, seed=3)
    assert set(j.model for j in default) <= set(default_model_mix())


def test_unknown_model_in_mix_is_rejected_by_name():
    with pytest.raises(ValueError, match="'gpt9'"):
        load_helios(HELIOS, model_mix={"gpt9": 1.0})


def test_convert_command_writes_a_loadable_trace(tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_convert_parser(parser.add_subparsers(dest="trace_command"))
    out = tmp_path / "pai.csv"
    args = parser.parse_args(["convert", "--format", "alibaba", "--in", str(PAI_JOBS), "--in2", str(PAI_TASKS),
                              "--out", str(out), "--seed", "5"])
    assert args.func(args) == 0
    assert "2 kept" in capsys.readouterr().out
    assert load_trace(out) == list(load_real_trace("alibaba", PAI_JOBS, PAI_TASKS, seed=5))
    args = parser.parse_args(["convert", "--format", "philly", "--in", str(PHILLY), "--out", str(out),
                              "--model-mix", "bert=1,nope"])
    assert args.func(args) == 2
    assert "--model-mix" in capsys.readouterr().err


def test_fixtures_are_small_and_in_the_published_shapes():
    data = json.loads(PHILLY.read_text())
    assert {"status", "vc", "jobid", "user", "submitted_time", "attempts"} <= set(data[0])
    assert HELIOS.read_text().splitlines()[0] == (
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue")
    assert all(len(line.split(",")) == 6 for line in PAI_JOBS.read_text().splitlines())
    assert all(len(line.split(",")) == 10 for line in PAI_TASKS.read_text().splitlines())
