"""Alibaba PAI 2020 job and task tables to jobs (mapping: :mod:`lyra_gym.workloads.realtraces`)."""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping

from lyra_gym.workloads.realtraces.assemble import DEFAULT_ELASTIC_SHARE, convert_records
from lyra_gym.workloads.realtraces.common import (
    ConvertedJobs,
    RawJob,
    SkipCounts,
    csv_rows,
    is_kept,
    parse_job_id,
    parse_number,
    parse_time,
)
from lyra_gym.workloads.trace import TraceError

_PAI_KEEP = frozenset({"Terminated"})
_PAI_FAILED = frozenset({"Failed"})
_PAI_UNFINISHED = frozenset({"Running", "Waiting"})

PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")


def _alibaba_raw(job_path: str, task_path: str, skips: SkipCounts) -> tuple[list[RawJob], int]:
    # Tasks first: GPUs and run span per job.
    gpus: dict[str, float] = {}
    span: dict[str, list[float]] = {}
    task_required = ("job_name", "inst_num", "start_time", "end_time", "plan_gpu")
    for line, row in csv_rows(task_path, PAI_TASK_COLUMNS, task_required, header_optional=True):
        name = parse_job_id(row["job_name"], task_path, line, "job_name")
        inst = parse_number(row["inst_num"], task_path, line, "inst_num", empty=0.0)
        plan = parse_number(row["plan_gpu"], task_path, line, "plan_gpu", empty=0.0)  # empty = CPU-only task
        gpus[name] = gpus.get(name, 0.0) + inst * plan / 100.0
        start = parse_time(row["start_time"], task_path, line, "start_time")
        end = parse_time(row["end_time"], task_path, line, "end_time")
        s = span.setdefault(name, [math.inf, -math.inf, 0.0])
        if start is not None and end is not None:
            s[0], s[1] = min(s[0], start), max(s[1], end)
        else:
            s[2] = 1.0  # a task that never ran or never ended
    raws: list[RawJob] = []
    records = 0
    for line, row in csv_rows(job_path, PAI_JOB_COLUMNS, ("job_name", "status", "start_time"), header_optional=True):
        records += 1
        name = skips.first_seen(parse_job_id(row["job_name"], job_path, line, "job_name"), job_path, line, "job_name")
        if not is_kept(row["status"], _PAI_KEEP, _PAI_FAILED, _PAI_UNFINISHED, skips, job_path, line, "status"):
            continue
        submit = parse_time(row["start_time"], job_path, line, "start_time")
        if submit is None:
            raise TraceError(job_path, line, "start_time", "missing submission time")
        if name not in gpus:
            skips.add("no tasks")
            continue
        total = gpus[name]
        whole = math.ceil(total - 1e-9)
        if whole <= 0:
            skips.add("zero GPUs")
            continue
        start, end, incomplete = span[name]
        if incomplete or not math.isfinite(start):
            skips.add("never ran")
            continue
        if end <= start:
            skips.add("non-positive duration")
            continue
        raws.append(RawJob(name, submit, whole, end - start, line, job_path))
    return raws, records


def load_alibaba(job_table: str | os.PathLike[str], task_table: str | os.PathLike[str], seed: int = 0, *,
                 model_mix: Mapping[str, float] | None = None, elastic_share: float = DEFAULT_ELASTIC_SHARE,
                 known_models: Collection[str] | None = None) -> ConvertedJobs:
    """Convert Alibaba PAI 2020 ``pai_job_table.csv`` + ``pai_task_table.csv`` (parameters as :func:`load_philly`)."""
    j, t = os.fspath(job_table), os.fspath(task_table)
    return convert_records("alibaba", lambda s: _alibaba_raw(j, t, s), f"{j} + {t}", seed, model_mix, elastic_share,
                    known_models)
