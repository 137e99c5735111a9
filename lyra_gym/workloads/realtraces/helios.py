"""SenseTime Helios ``cluster_log.csv`` to jobs (mapping: :mod:`lyra_gym.workloads.realtraces`)."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from lyra_gym.workloads.realtraces.assemble import DEFAULT_ELASTIC_SHARE, convert_records
from lyra_gym.workloads.realtraces.common import (
    ConvertedJobs,
    RawJob,
    SkipCounts,
    csv_rows,
    is_kept,
    parse_gpus,
    parse_job_id,
    parse_time,
    ran_job,
)
from lyra_gym.workloads.trace import TraceError

_HELIOS_KEEP = frozenset({"COMPLETED", "CANCELLED", "TIMEOUT"})
_HELIOS_FAILED = frozenset({"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"})
_HELIOS_UNFINISHED = frozenset({"RUNNING", "PENDING"})

HELIOS_COLUMNS = ("job_id", "gpu_num", "state", "submit_time", "start_time", "end_time")


def _helios_raw(path: str, skips: SkipCounts) -> tuple[list[RawJob], int]:
    raws: list[RawJob] = []
    records = 0
    for line, row in csv_rows(path, HELIOS_COLUMNS, HELIOS_COLUMNS, header_optional=False):
        records += 1
        job_id = skips.first_seen(parse_job_id(row["job_id"], path, line, "job_id"), path, line, "job_id")
        if not is_kept(row["state"], _HELIOS_KEEP, _HELIOS_FAILED, _HELIOS_UNFINISHED, skips, path, line, "state"):
            continue
        gpus = parse_gpus(row["gpu_num"], path, line, "gpu_num")
        submit = parse_time(row["submit_time"], path, line, "submit_time")
        if submit is None:
            raise TraceError(path, line, "submit_time", "missing submission time")
        start = parse_time(row["start_time"], path, line, "start_time")
        end = parse_time(row["end_time"], path, line, "end_time")
        raw = ran_job(job_id, submit, gpus, start, end, line, path, skips, zero_gpus_first=True)
        if raw is not None:
            raws.append(raw)
    return raws, records


def load_helios(path: str | os.PathLike[str], seed: int = 0, *, model_mix: Mapping[str, float] | None = None,
                elastic_share: float = DEFAULT_ELASTIC_SHARE, known_models: Collection[str] | None = None
                ) -> ConvertedJobs:
    """Convert a Helios ``cluster_log.csv`` (parameters as :func:`load_philly`)."""
    p = os.fspath(path)
    return convert_records("helios", lambda s: _helios_raw(p, s), p, seed, model_mix, elastic_share, known_models)
