"""Microsoft Philly ``cluster_job_log`` (JSON) to jobs (mapping: :mod:`lyra_gym.workloads.realtraces`)."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from lyra_gym.model.userfiles import shown
from lyra_gym.workloads.realtraces.assemble import DEFAULT_ELASTIC_SHARE, convert_records
from lyra_gym.workloads.realtraces.common import (
    ConvertedJobs,
    RawJob,
    SkipCounts,
    json_records,
    parse_job_id,
    parse_time,
    ran_job,
)
from lyra_gym.workloads.trace import TraceError

_PHILLY_KEEP = frozenset({"Pass", "Killed"})
_PHILLY_FAILED = frozenset({"Failed"})


def _philly_raw(path: str, skips: SkipCounts) -> tuple[list[RawJob], int]:
    raws: list[RawJob] = []
    records = 0
    for index, line, rec in json_records(path):
        records += 1
        if not isinstance(rec, dict):
            raise TraceError(path, line, f"[{index}]", f"expected a job record (JSON object), got {type(rec).__name__}")
        job_id = skips.first_seen(parse_job_id(rec.get("jobid"), path, line, "jobid"), path, line, "jobid", index)
        status = rec.get("status")
        if status in _PHILLY_FAILED:
            skips.add("failed")
            continue
        if status not in _PHILLY_KEEP:
            known = ", ".join(sorted(_PHILLY_KEEP | _PHILLY_FAILED))
            raise TraceError(path, line, "status", f"unknown status {shown(status)} (expected one of {known})")
        submit = parse_time(rec.get("submitted_time"), path, line, "submitted_time")
        if submit is None:
            raise TraceError(path, line, "submitted_time", "missing submission time")
        attempts = rec.get("attempts")
        if not isinstance(attempts, list):
            raise TraceError(path, line, "attempts", f"expected a list of attempts, got {shown(attempts)}")
        if not attempts:
            skips.add("never ran")
            continue
        k = len(attempts) - 1
        last = attempts[k]
        if not isinstance(last, dict):
            raise TraceError(path, line, f"attempts[{k}]", f"expected an object, got {shown(last)}")
        start = parse_time(last.get("start_time"), path, line, f"attempts[{k}].start_time")
        end = parse_time(last.get("end_time"), path, line, f"attempts[{k}].end_time")
        detail = last.get("detail")
        if not isinstance(detail, list):
            raise TraceError(path, line, f"attempts[{k}].detail", f"expected a list of servers, got {shown(detail)}")
        gpus = 0
        for d, server in enumerate(detail):
            listed = server.get("gpus") if isinstance(server, dict) else None
            if not isinstance(listed, list):
                raise TraceError(path, line, f"attempts[{k}].detail[{d}].gpus",
                                 f"expected a list of GPUs, got {shown(listed)}")
            gpus += len(listed)
        raw = ran_job(job_id, submit, gpus, start, end, line, path, skips, zero_gpus_first=False)
        if raw is not None:
            raws.append(raw)
    return raws, records


def load_philly(path: str | os.PathLike[str], seed: int = 0, *, model_mix: Mapping[str, float] | None = None,
                elastic_share: float = DEFAULT_ELASTIC_SHARE, known_models: Collection[str] | None = None
                ) -> ConvertedJobs:
    """Convert a Philly ``cluster_job_log`` JSON file (mapping: :mod:`lyra_gym.workloads.realtraces`).

    :param seed: seed of the model and elastic draws.
    :param model_mix: model key -> probability (default :func:`default_model_mix`).
    :param elastic_share: probability that a job is elastic, in [0, 1] (default 0.3).
    :param known_models: the profile's model keys (default: the built-in profile's).
    :raises TraceError: a malformed record (file, line, field).
    :raises ValueError: a bad ``model_mix`` or ``elastic_share``.
    """
    p = os.fspath(path)
    return convert_records("philly", lambda s: _philly_raw(p, s), p, seed, model_mix, elastic_share, known_models)
