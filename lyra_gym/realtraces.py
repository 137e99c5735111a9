"""Loaders for public production GPU-cluster traces, converted to this project's jobs.

The public traces (Microsoft Philly, SenseTime Helios, Alibaba PAI 2020) carry
no license that allows redistribution, so none ships here: download them
yourself, then convert with ``lyra-gym trace convert`` or the functions below.
Only tiny hand-written fixtures in the same formats live in ``tests/fixtures/``.

Input formats (as published by each project)
--------------------------------------------
* **Philly** (msr-fiddle/philly-traces), ``cluster_job_log``: one JSON list of
  ``{"status", "vc", "jobid", "user", "submitted_time", "attempts": [{"start_time",
  "end_time", "detail": [{"ip", "gpus": [...]}]}]}``; times are
  ``"YYYY-MM-DD HH:MM:SS"`` strings (``null`` / ``"None"`` when absent).
* **Helios** (S-Lab-System-Group/HeliosData), ``cluster_log.csv`` with a header:
  ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,
  end_time,duration,queue``; times are date-time strings or epoch seconds.
* **Alibaba PAI 2020** (alibaba/clusterdata, cluster-trace-gpu-v2020):
  ``pai_job_table.csv`` (``job_name,inst_id,user,status,start_time,end_time``;
  here ``start_time`` is the *submission* time) and ``pai_task_table.csv``
  (``job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,
  plan_gpu,gpu_type``; ``plan_gpu`` in percent of one GPU). The published
  files have no header line (the columns are in separate ``.header`` files);
  a header line, if present, is recognised and skipped. Times are seconds.

Mapping to :class:`~lyra_gym.trace.JobSpec`
-------------------------------------------
=============  =============================================================================
field          how it is set
=============  =============================================================================
job_id         Philly ``jobid``, Helios ``job_id``, PAI ``job_name`` (must be unique)
submit_time    submission time minus the earliest submission among the *kept* jobs (so the
               first job arrives at 0 s). Philly ``submitted_time``; Helios ``submit_time``;
               PAI job ``start_time``
num_gpus       Philly: GPUs listed in the ``detail`` of the last attempt; Helios ``gpu_num``;
               PAI: sum over the job's tasks of ``inst_num * plan_gpu / 100``, rounded *up*
               (a job sharing half a GPU takes one: the engine allocates whole GPUs)
duration       the run's end minus its start, seconds. Philly: the last attempt (earlier
               attempts failed and were retried); Helios ``end_time - start_time``; PAI: the
               latest task end minus the earliest task start. Taken as the run time on the
               reference GPU type, although the traces ran on their own hardware
model          seeded draw from ``model_mix`` over the profile's model keys: the traces do
               not name models. Default mix: the synthetic presets' mix restricted to the
               profile's keys (``lyra_gym.tracegen``); uniform if none of those keys exist
elastic        seeded draw: each job is elastic with probability ``elastic_share`` (default
               0.3, the presets' default; the traces do not say which jobs could scale).
               An elastic job of ``g`` GPUs gets ``min_gpus = max(1, g // 2)`` and
               ``max_gpus = 2 g``, the rule of the synthetic presets
=============  =============================================================================

The random draws come from ``numpy.random.default_rng(seed)``: models for
all kept jobs in submit order, then the elastic flags; the same file and
seed give the same trace.

Skipped, and counted by reason (``ConvertedJobs.skipped``): failed jobs
(Philly ``Failed``; Helios ``FAILED``, ``NODE_FAIL``, ``OUT_OF_MEMORY``,
``BOOT_FAIL``; PAI ``Failed``), unfinished ones (Helios ``RUNNING`` /
``PENDING``; PAI ``Running`` / ``Waiting``), jobs that never ran (no attempt,
or a start or end time missing), zero-GPU jobs (CPU-only), jobs with no task
(PAI) and runs whose end is not after their start. Kept: Philly ``Pass`` and
``Killed``, Helios ``COMPLETED``, ``CANCELLED`` and ``TIMEOUT``, PAI
``Terminated`` (killed or timed-out jobs did occupy their GPUs for that long).
Any other status value is an error.

A job id must be unique in its file, skipped records included: a repeated id is
an error naming both records (for JSON, records are told apart by their index in
the list, so two records on one line of a minified file are caught too). An
input that is a directory, compressed, or not UTF-8 text is a one-line
:class:`~lyra_gym.trace.TraceError` naming the file.

Pollux workloads (``--format pollux``)
--------------------------------------
The Pollux artifact (petuum/adaptdl, branch ``osdi21-artifact``, commit de25dcc9,
Apache-2.0) ships its simulator's workloads as ``simulator/workloads/workload-N.csv``
(also ``workloads-0.5/``, ``-1.5/``, ``-2.0/``): a header ``name,time,application,
num_replicas,batch_size``, one job a row. These workloads name the application
and the GPU count, so the conversion is deterministic (no seed, no draws):

=============  =============================================================================
field          how it is set
=============  =============================================================================
job_id         ``name`` (must be unique)
submit_time    ``time``, unchanged: seconds from the workload's start, as the artifact's
               simulator clock (``Job.submission_time``) reads it; not shifted to 0
num_gpus       ``num_replicas``: one replica per GPU (``JobInfo(resources={"nvidia.com/gpu": 1})``
               in ``simulator/simulator.py``); it is the GPU count the artifact's
               Tiresias+TunedJobs runs a job at (``target_num_replicas`` -> ``max_replicas``),
               picked by ``workload.py`` from ``Application.get_configurations(0.5, 0.8)``:
               sizes with 50-80 % scaling efficiency and a JCT under 12 h
duration       the job's work :data:`POLLUX_APPLICATIONS` ``[app].work_samples`` divided by the
               profile's throughput of ``model`` on ``num_gpus`` reference GPUs (V100 in the
               built-in profile) packed onto servers of ``gpus_per_server`` GPUs (default 4,
               the artifact's nodes), i.e. ``ProfileSet.packed_throughput`` -- the same
               throughput the engine turns ``duration`` back into work with, so on a cluster
               whose reference-packing server size is also 4 (``traces/pollux-testbed.yaml``)
               the engine's work is exactly ``work_samples``
model          ``application`` mapped: bert, deepspeech2, ncf, yolov3 to themselves;
               ``cifar10`` -> ``resnet18`` (the artifact trains ResNet-18 on CIFAR-10) and
               ``imagenet`` -> ``resnet50`` (ResNet-50 on ImageNet); our profile's model of
               each is an assumption, not the artifact's code or measurements
elastic        yes, ``min_gpus = 1`` and ``max_gpus`` = the application's cap (table below),
               except ``ncf``: inelastic. The artifact's Pollux treats every job as
               adaptive (``get_pollux_job_info``: ``min_replicas=0``, ``max_replicas =
               min(max(2 * profiled replicas, 1), 64, max_batch_size // min_local_bsz)``) but
               pins ncf to one replica (``job_info.max_replicas = 1``). The cap is that
               formula's static part, ``min(64, max_batch_size // min_local_bsz)``; Pollux's
               growing "twice the most replicas profiled so far" part is left out
=============  =============================================================================

``batch_size`` (a whole number >= 1) becomes the job's ``batch_size``: its initial global batch,
at which it starts (and stays, under a scheduler that does not adapt batches). ``duration`` is
the work below divided by the samples/s at that batch (local batch ``batch_size / num_replicas``,
cut to the profile's ``max_local_batch``; :meth:`lyra_gym.scaling.ScalingModel.reference_rate`),
so under ``noise_scale: absolute`` the engine's work is exactly ``work_samples`` in the
application's ``b0``-samples, with statistical efficiency charged against ``b0`` as the artifact
does (``traces/pollux-testbed-t4.yaml``).

The work of a job. The artifact's ``Job.step`` advances ``progress`` by ``gain`` per step,
``gain = (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)`` with ``scale = batch /
init_batch_size``: at perfect statistical efficiency one step at batch ``b`` adds ``b / b0``
(``b0`` = the application's ``init_batch_size`` = its smallest validated batch size). A job
completes when ``epoch > get_completion_epoch() = max_epochs - 1`` (no application has a
``target_metric``), i.e. when ``progress`` reaches ``get_progress(max_epochs)`` = the smallest
``progress`` in row ``max_epochs`` of the application's ``traces/<app>/validation-<B>.csv``
files. We take ``work_samples = P* x b0``: the samples that progress is worth at perfect
efficiency, i.e. ``max_epochs`` passes over the training set (the artifact charges more
samples at large batches through ``gain < scale``; we do not). Numbers carried over, each
from ``petuum/adaptdl@de25dcc9:simulator/``:

===========  ===========  ==========  ===  ===========  ========================================
application  model        max_epochs  b0   P*           source of P* (row ``max_epochs``) and b0
===========  ===========  ==========  ===  ===========  ========================================
bert         bert         2           12   14,774.0     ``traces/bert/validation-12.csv``
                                                        (``-384``: 14,789.7); 2 x 88,644 SQuAD
                                                        features
cifar10      resnet18     100         128  39,062.908   ``traces/cifar10/validation-256.csv``
                                                        (``-2048``: 39,070.6); b0 = 128, the
                                                        smallest file (``validation-128.csv``)
deepspeech2  deepspeech2  80          20   28,536.0     ``traces/deepspeech2/validation-20.csv``
                                                        (``-640``: 28,553.4); b0 = 20, the
                                                        smallest file
imagenet     resnet50     90          200  576,525.59   ``traces/imagenet/validation-400.csv``
                                                        (``-200``: 576,526.0): 90 x 1,281,169
                                                        images
ncf          ncf          10          256  194,174.0    ``traces/ncf/validation-256.csv``:
                                                        10 x 4,970,854 samples
yolov3       yolov3       50          8    103,443.98   ``traces/yolov3/validation-16.csv``
                                                        (``-8``: 103,444.0): 50 x 16,551 VOC
                                                        images
===========  ===========  ==========  ===  ===========  ========================================

``max_epochs``: ``APPLICATIONS`` in ``applications.py``. ``b0``: where a file's ``progress``
equals its ``iteration`` it ran at ``init_batch_size`` = the smallest validated batch
(bert 12, cifar10 128, deepspeech2 20, imagenet 200, ncf 256, yolov3 8). P* is the smallest
over every validation file of the application (all of them in shared/data/pollux_t4 and
``tests/fixtures/adaptdl_validation``), as the artifact's ``get_progress`` takes it. Caps
(``max_gpus``): ``min_local_bsz`` from ``traces/<app>/placements.csv`` (bert 4, cifar10 32,
deepspeech2 10, imagenet 20, yolov3 4) and ``max_batch_size`` = the largest validated batch
(bert 384, deepspeech2 640, yolov3 128, cifar10 >= 4,096 and imagenet >= 6,400 as the
workloads use them): bert 64, cifar10 64, deepspeech2 64, imagenet 64, yolov3 32.

The trace's durations are at the profile's reference GPU (V100 in the built-in profile, T4
in ``traces/pollux-t4-profile.json``); on the artifact's T4 testbed
(``traces/pollux-testbed.yaml``) the engine runs them slower by the profile's T4/V100 speed,
as intended. Errors name file, line and field, as for the other formats.

Caveat: a duration is only as good as the profile's samples/s in the artifact's units. The
built-in profile's figures are not the artifact's: single-T4 samples/s, built-in profile against
the artifact's ``placements.csv`` (best local batch), are about bert 67 / 13 (seq-128
pre-training against SQuAD at 384), resnet18 691 / 1,461, resnet50 360 / 217, ncf 6.5 M / 1.5 M,
yolov3 89 / 28 and deepspeech2 22,931 / 36 (the built-in deepspeech2 rate is not in
utterances/s), so converted deepspeech2 jobs last seconds instead of hours. ``--profiles``
converts with another profile, e.g. one derived from the artifact's T4 measurements.

Errors: a malformed record raises :class:`~lyra_gym.trace.TraceError` whose
message is ``<file>:<line>: field '<field>': <problem>`` (JSON records: the
line where the record starts).
"""

from __future__ import annotations

import argparse
import bisect
import csv
import io
import json
import math
import os
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np

from lyra_gym.scaling import ScalingModel
from lyra_gym.trace import JobSpec, TraceError, read_text, write_trace

__all__ = [
    "FORMATS",
    "ConvertedJobs",
    "load_philly",
    "load_helios",
    "load_alibaba",
    "load_pollux",
    "load_real_trace",
    "POLLUX_APPLICATIONS",
    "PolluxApplication",
    "default_model_mix",
    "add_convert_parser",
    "run_convert",
]

FORMATS = ("philly", "helios", "alibaba", "pai", "pollux")  # "pai" = "alibaba" (Alibaba PAI 2020)

#: Elastic share used when none is given (same assumption as the synthetic presets).
DEFAULT_ELASTIC_SHARE = 0.3

_PHILLY_KEEP = frozenset({"Pass", "Killed"})
_PHILLY_FAILED = frozenset({"Failed"})
_HELIOS_KEEP = frozenset({"COMPLETED", "CANCELLED", "TIMEOUT"})
_HELIOS_FAILED = frozenset({"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"})
_HELIOS_UNFINISHED = frozenset({"RUNNING", "PENDING"})
_PAI_KEEP = frozenset({"Terminated"})
_PAI_FAILED = frozenset({"Failed"})
_PAI_UNFINISHED = frozenset({"Running", "Waiting"})

HELIOS_COLUMNS = ("job_id", "gpu_num", "state", "submit_time", "start_time", "end_time")
PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
#: GPUs per node of the Pollux artifact's cluster (``simulator.py --num-gpus`` default 4; AWS g4dn.12xlarge).
POLLUX_GPUS_PER_NODE = 4

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S.%f",
                 "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M")


class ConvertedJobs(list):
    """The converted jobs (a plain ``list`` of :class:`JobSpec`, sorted by submit time) plus counts.

    Attributes:
        source: the input file(s).
        format: ``"philly"``, ``"helios"``, ``"alibaba"`` or ``"pollux"``.
        records: jobs read from the input.
        skipped: reason -> number of jobs left out (see the module docstring).
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
class _Raw:
    job_id: str
    submit: float  # absolute seconds
    gpus: int
    duration: float
    line: int
    path: str


class _Skips:
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
            raise TraceError(path, line, field, f"duplicate job id {job_id!r}{here}; first at {where}")
        return job_id


# --------------------------------------------------------------------------- value parsing


def _parse_time(value: Any, path: str, line: int, field: str) -> float | None:
    """Seconds (epoch for date-times, UTC assumed; only differences matter); None if absent."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TraceError(path, line, field, f"expected a time, got {value!r}")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise TraceError(path, line, field, f"must be finite, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise TraceError(path, line, field, f"expected a time string or number, got {value!r}")
    text = value.strip()
    if text == "" or text.lower() in ("none", "null", "nan", "nat"):
        return None
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(number):
            raise TraceError(path, line, field, f"must be finite, got {text!r}")
        return number
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise TraceError(path, line, field, f"not a time: {text!r} (expected 'YYYY-MM-DD HH:MM:SS' or seconds)")


def _parse_number(text: str, path: str, line: int, field: str, empty: float | None = None) -> float:
    text = text.strip()
    if text == "" or text.lower() == "nan":
        if empty is not None:
            return empty
        raise TraceError(path, line, field, "missing value")
    try:
        value = float(text)
    except ValueError:
        raise TraceError(path, line, field, f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise TraceError(path, line, field, f"must be finite, got {text!r}")
    if value < 0:
        raise TraceError(path, line, field, f"must be >= 0, got {text!r}")
    return value


def _parse_gpus(text: str, path: str, line: int, field: str) -> int:
    value = _parse_number(text, path, line, field)
    if not value.is_integer():
        raise TraceError(path, line, field, f"not a whole number of GPUs: {text.strip()!r}")
    return int(value)


def _job_id(value: Any, path: str, line: int, field: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise TraceError(path, line, field, f"missing or empty job id: {value!r}")
    return value.strip()


# --------------------------------------------------------------------------- readers


def _json_records(path: str) -> Iterator[tuple[int, int, Any]]:
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
        yield index, line_of(i), record
        index += 1
        i = skip_ws(end)
        if i < n and text[i] == ",":
            i = skip_ws(i + 1)
            continue
        if i < n and text[i] == "]":
            return
        raise TraceError(path, line_of(i), "json", "expected ',' or ']' after a job record")


def _csv_rows(path: str, columns: tuple[str, ...], required: tuple[str, ...], header_optional: bool
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


# --------------------------------------------------------------------------- formats


def _philly_raw(path: str, skips: _Skips) -> tuple[list[_Raw], int]:
    raws: list[_Raw] = []
    records = 0
    for index, line, rec in _json_records(path):
        records += 1
        if not isinstance(rec, dict):
            raise TraceError(path, line, f"[{index}]", f"expected a job record (JSON object), got {type(rec).__name__}")
        job_id = skips.first_seen(_job_id(rec.get("jobid"), path, line, "jobid"), path, line, "jobid", index)
        status = rec.get("status")
        if status in _PHILLY_FAILED:
            skips.add("failed")
            continue
        if status not in _PHILLY_KEEP:
            raise TraceError(path, line, "status",
                             f"unknown status {status!r} (expected one of {', '.join(sorted(_PHILLY_KEEP | _PHILLY_FAILED))})")
        submit = _parse_time(rec.get("submitted_time"), path, line, "submitted_time")
        if submit is None:
            raise TraceError(path, line, "submitted_time", "missing submission time")
        attempts = rec.get("attempts")
        if not isinstance(attempts, list):
            raise TraceError(path, line, "attempts", f"expected a list of attempts, got {attempts!r}")
        if not attempts:
            skips.add("never ran")
            continue
        k = len(attempts) - 1
        last = attempts[k]
        if not isinstance(last, dict):
            raise TraceError(path, line, f"attempts[{k}]", f"expected an object, got {last!r}")
        start = _parse_time(last.get("start_time"), path, line, f"attempts[{k}].start_time")
        end = _parse_time(last.get("end_time"), path, line, f"attempts[{k}].end_time")
        detail = last.get("detail")
        if not isinstance(detail, list):
            raise TraceError(path, line, f"attempts[{k}].detail", f"expected a list of servers, got {detail!r}")
        gpus = 0
        for d, server in enumerate(detail):
            listed = server.get("gpus") if isinstance(server, dict) else None
            if not isinstance(listed, list):
                raise TraceError(path, line, f"attempts[{k}].detail[{d}].gpus", f"expected a list of GPUs, got {listed!r}")
            gpus += len(listed)
        raw = _ran(job_id, submit, gpus, start, end, line, path, skips, zero_gpus_first=False)
        if raw is not None:
            raws.append(raw)
    return raws, records


def _ran(job_id: str, submit: float, gpus: int, start: float | None, end: float | None, line: int, path: str,
         skips: "_Skips", zero_gpus_first: bool) -> "_Raw | None":
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
    return _Raw(job_id, submit, gpus, end - start, line, path)


def _kept(state: str, keep: frozenset | set, failed: frozenset | set, unfinished: frozenset | set,
          skips: "_Skips", path: str, line: int, field: str) -> bool:
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
        raise TraceError(path, line, field, f"unknown {field} {state!r} (expected one of {', '.join(known)})")
    return True


def _helios_raw(path: str, skips: _Skips) -> tuple[list[_Raw], int]:
    raws: list[_Raw] = []
    records = 0
    for line, row in _csv_rows(path, HELIOS_COLUMNS, HELIOS_COLUMNS, header_optional=False):
        records += 1
        job_id = skips.first_seen(_job_id(row["job_id"], path, line, "job_id"), path, line, "job_id")
        if not _kept(row["state"], _HELIOS_KEEP, _HELIOS_FAILED, _HELIOS_UNFINISHED, skips, path, line, "state"):
            continue
        gpus = _parse_gpus(row["gpu_num"], path, line, "gpu_num")
        submit = _parse_time(row["submit_time"], path, line, "submit_time")
        if submit is None:
            raise TraceError(path, line, "submit_time", "missing submission time")
        start = _parse_time(row["start_time"], path, line, "start_time")
        end = _parse_time(row["end_time"], path, line, "end_time")
        raw = _ran(job_id, submit, gpus, start, end, line, path, skips, zero_gpus_first=True)
        if raw is not None:
            raws.append(raw)
    return raws, records


def _alibaba_raw(job_path: str, task_path: str, skips: _Skips) -> tuple[list[_Raw], int]:
    # Tasks first: GPUs and run span per job.
    gpus: dict[str, float] = {}
    span: dict[str, list[float]] = {}
    for line, row in _csv_rows(task_path, PAI_TASK_COLUMNS, ("job_name", "inst_num", "start_time", "end_time", "plan_gpu"),
                               header_optional=True):
        name = _job_id(row["job_name"], task_path, line, "job_name")
        inst = _parse_number(row["inst_num"], task_path, line, "inst_num", empty=0.0)
        plan = _parse_number(row["plan_gpu"], task_path, line, "plan_gpu", empty=0.0)  # empty = CPU-only task
        gpus[name] = gpus.get(name, 0.0) + inst * plan / 100.0
        start = _parse_time(row["start_time"], task_path, line, "start_time")
        end = _parse_time(row["end_time"], task_path, line, "end_time")
        s = span.setdefault(name, [math.inf, -math.inf, 0.0])
        if start is not None and end is not None:
            s[0], s[1] = min(s[0], start), max(s[1], end)
        else:
            s[2] = 1.0  # a task that never ran or never ended
    raws: list[_Raw] = []
    records = 0
    for line, row in _csv_rows(job_path, PAI_JOB_COLUMNS, ("job_name", "status", "start_time"), header_optional=True):
        records += 1
        name = skips.first_seen(_job_id(row["job_name"], job_path, line, "job_name"), job_path, line, "job_name")
        if not _kept(row["status"], _PAI_KEEP, _PAI_FAILED, _PAI_UNFINISHED, skips, job_path, line, "status"):
            continue
        submit = _parse_time(row["start_time"], job_path, line, "start_time")
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
        raws.append(_Raw(name, submit, whole, end - start, line, job_path))
    return raws, records


# --------------------------------------------------------------------------- Pollux workloads


@dataclass(frozen=True)
class PolluxApplication:
    """One application of the Pollux artifact and what a job of it becomes (module docstring).

    Attributes:
        model: our profile's model key.
        max_epochs: ``APPLICATIONS[app].max_epochs`` (artifact ``simulator/applications.py``).
        init_batch_size: ``b0``, the batch size the artifact's ``progress`` counts steps of.
        target_progress: ``P*`` = ``Application.get_progress(max_epochs)``, the progress that
            completes a job (the smallest row-``max_epochs`` progress of the validation files read).
        max_gpus: most GPUs of an elastic job: ``min(64, max_batch_size // min_local_bsz)``.
        elastic: False for ncf, pinned to one replica by the artifact's Pollux.
    """

    model: str
    max_epochs: int
    init_batch_size: int
    target_progress: float
    max_gpus: int
    elastic: bool = True

    @property
    def work_samples(self) -> float:
        """Samples a job of this application processes to complete (``P* x b0``)."""
        return self.target_progress * self.init_batch_size


#: Pollux artifact application -> how its jobs convert (numbers cited in the module docstring).
POLLUX_APPLICATIONS: dict[str, PolluxApplication] = {
    "bert": PolluxApplication("bert", 2, 12, 14774.0, 64),
    "cifar10": PolluxApplication("resnet18", 100, 128, 39062.90816659533, 64),
    "deepspeech2": PolluxApplication("deepspeech2", 80, 20, 28536.0, 64),
    "imagenet": PolluxApplication("resnet50", 90, 200, 576525.594895604, 64),
    "ncf": PolluxApplication("ncf", 10, 256, 194174.0, 1, elastic=False),
    "yolov3": PolluxApplication("yolov3", 50, 8, 103443.97796253164, 32),
}


def _whole(text: str, path: str, line: int, field: str, what: str) -> int:
    value = _parse_number(text, path, line, field)
    if not value.is_integer():
        raise TraceError(path, line, field, f"not a whole number of {what}: {text.strip()!r}")
    if value < 1:
        raise TraceError(path, line, field, f"must be >= 1, got {text.strip()!r}")
    return int(value)


def _pollux_jobs(path: str, profiles: Any, gpus_per_server: int, skips: _Skips) -> tuple[list[JobSpec], int]:
    jobs: list[JobSpec] = []
    records = 0
    reference = profiles.reference_gpu
    # samples/s at a batch, as the engine counts work under the artifact's ground truth
    # (noise_scale: absolute, traces/pollux-testbed-t4.yaml): a 1-GPU job above its application's
    # initial batch M0 (ncf at 32,768) runs at least one accumulation step there, as in the artifact
    # (Job.update_local_bsz), so its duration must be converted at that rate for the engine to
    # recover P* x b0 (with no noise scale the engine took ncf's work 25 % short: 35 s alone
    # against the artifact's 46 s).
    from lyra_gym.efficiency import builtin_efficiency

    scaling = ScalingModel(profiles, builtin_efficiency(), "fixed-local", "absolute")
    for line, row in _csv_rows(path, POLLUX_COLUMNS, POLLUX_COLUMNS, header_optional=False):
        records += 1
        name = skips.first_seen(_job_id(row["name"], path, line, "name"), path, line, "name")
        submit = _parse_number(row["time"], path, line, "time")
        app_name = row["application"]
        app = POLLUX_APPLICATIONS.get(app_name)
        if app is None:
            raise TraceError(path, line, "application", f"unknown application {app_name!r} "
                             f"(expected one of {', '.join(sorted(POLLUX_APPLICATIONS))})")
        gpus = _whole(row["num_replicas"], path, line, "num_replicas", "replicas")
        batch = _whole(row["batch_size"], path, line, "batch_size", "samples")
        if app.model not in profiles:
            raise TraceError(path, line, "application",
                             f"{app_name!r} maps to model {app.model!r}, which the profile "
                             f"{profiles.source or ''} lacks (known: {', '.join(sorted(profiles.models))})")
        if app.elastic:
            elastic, lo, hi = True, 1, max(app.max_gpus, gpus)
        else:
            elastic, lo, hi = False, gpus, gpus
        spec = JobSpec(name, submit, gpus, 1.0, app.model, elastic, lo, hi, batch)
        speed = scaling.reference_rate(spec, float(batch), reference, gpus_per_server)
        jobs.append(replace(spec, duration=app.work_samples / speed))
    return jobs, records


# --------------------------------------------------------------------------- assembling


def _known_models(known_models: Collection[str] | None) -> list[str]:
    if known_models is not None:
        keys = list(dict.fromkeys(known_models))
    else:
        from lyra_gym.profiles import builtin_profiles

        keys = list(builtin_profiles().models)
    if not keys:
        raise ValueError("known_models: no model keys")
    return keys


def default_model_mix(known_models: Collection[str] | None = None) -> dict[str, float]:
    """The synthetic presets' model mix restricted to ``known_models`` (default: the built-in
    profile's keys) and renormalised; uniform over them if the presets' keys are all absent."""
    from lyra_gym.tracegen import PRESETS

    keys = _known_models(known_models)
    base = dict(PRESETS["small-1d"].model_mix)
    mix = {k: base[k] for k in keys if k in base}
    if not mix:
        mix = {k: 1.0 for k in keys}
    total = sum(mix.values())
    return {k: v / total for k, v in mix.items()}


def _check_mix(mix: Mapping[str, float], keys: list[str]) -> dict[str, float]:
    clean = {}
    for key, p in mix.items():
        if key not in keys:
            raise ValueError(f"model_mix: unknown model key {key!r} (known: {', '.join(sorted(keys))})")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p < 0:
            raise ValueError(f"model_mix[{key!r}]: must be a finite number >= 0, got {p!r}")
        clean[key] = float(p)
    if sum(clean.values()) <= 0:
        raise ValueError("model_mix: the probabilities must not all be 0")
    return clean


def _assemble(raws: list[_Raw], seed: int, model_mix: Mapping[str, float] | None, elastic_share: float,
              known_models: Collection[str] | None) -> list[JobSpec]:
    if not 0.0 <= elastic_share <= 1.0:
        raise ValueError(f"elastic_share: must be in [0, 1], got {elastic_share!r}")
    keys = _known_models(known_models)
    mix = _check_mix(model_mix if model_mix is not None else default_model_mix(keys), keys)
    raws = sorted(raws, key=lambda r: r.submit)  # stable: ties keep file order
    n = len(raws)
    rng = np.random.default_rng(seed)
    names = list(mix)
    p = np.array([mix[k] for k in names], dtype=float)
    models = rng.choice(len(names), size=n, p=p / p.sum()) if n else np.zeros(0, dtype=int)
    elastic = rng.random(n) < elastic_share
    t0 = raws[0].submit if raws else 0.0
    jobs = []
    for r, m, e in zip(raws, models.tolist(), elastic.tolist()):
        g = r.gpus
        lo, hi = (max(1, g // 2), 2 * g) if e else (g, g)
        jobs.append(JobSpec(r.job_id, r.submit - t0, g, r.duration, names[m], bool(e), lo, hi))
    return jobs


def _convert(fmt: str, raw_fn, source: str, seed: int, model_mix, elastic_share: float, known_models) -> ConvertedJobs:
    skips = _Skips()
    raws, records = raw_fn(skips)
    jobs = _assemble(raws, seed, model_mix, elastic_share, known_models)
    return ConvertedJobs(jobs, source, fmt, records, skips.counts)


def load_philly(path: str | os.PathLike[str], seed: int = 0, *, model_mix: Mapping[str, float] | None = None,
                elastic_share: float = DEFAULT_ELASTIC_SHARE, known_models: Collection[str] | None = None
                ) -> ConvertedJobs:
    """Convert a Philly ``cluster_job_log`` JSON file (module docstring for the mapping).

    :param seed: seed of the model and elastic draws.
    :param model_mix: model key -> probability (default :func:`default_model_mix`).
    :param elastic_share: probability that a job is elastic, in [0, 1] (default 0.3).
    :param known_models: the profile's model keys (default: the built-in profile's).
    :raises TraceError: a malformed record (file, line, field).
    :raises ValueError: a bad ``model_mix`` or ``elastic_share``.
    """
    p = os.fspath(path)
    return _convert("philly", lambda s: _philly_raw(p, s), p, seed, model_mix, elastic_share, known_models)


def load_helios(path: str | os.PathLike[str], seed: int = 0, *, model_mix: Mapping[str, float] | None = None,
                elastic_share: float = DEFAULT_ELASTIC_SHARE, known_models: Collection[str] | None = None
                ) -> ConvertedJobs:
    """Convert a Helios ``cluster_log.csv`` (parameters as :func:`load_philly`)."""
    p = os.fspath(path)
    return _convert("helios", lambda s: _helios_raw(p, s), p, seed, model_mix, elastic_share, known_models)


def load_alibaba(job_table: str | os.PathLike[str], task_table: str | os.PathLike[str], seed: int = 0, *,
                 model_mix: Mapping[str, float] | None = None, elastic_share: float = DEFAULT_ELASTIC_SHARE,
                 known_models: Collection[str] | None = None) -> ConvertedJobs:
    """Convert Alibaba PAI 2020 ``pai_job_table.csv`` + ``pai_task_table.csv`` (parameters as :func:`load_philly`)."""
    j, t = os.fspath(job_table), os.fspath(task_table)
    return _convert("alibaba", lambda s: _alibaba_raw(j, t, s), f"{j} + {t}", seed, model_mix, elastic_share,
                    known_models)


def load_pollux(path: str | os.PathLike[str], *, profiles: Any = None,
                gpus_per_server: int = POLLUX_GPUS_PER_NODE) -> ConvertedJobs:
    """Convert a Pollux artifact workload CSV (``name,time,application,num_replicas,batch_size``).

    Deterministic: see the module docstring for the mapping and the work of each application.

    :param profiles: a :class:`~lyra_gym.profiles.ProfileSet` or a profile JSON path whose
        reference-GPU throughput turns work into ``duration`` (default: the built-in profile).
    :param gpus_per_server: reference-GPU servers the throughput packs ``num_replicas`` onto
        (default 4, the artifact's nodes; give the training servers' size of the cluster you
        simulate on, so the engine recovers the same work).
    :raises TraceError: a malformed row (file, line, field).
    """
    from lyra_gym.profiles import ProfileSet, builtin_profiles, load_profiles

    if isinstance(gpus_per_server, bool) or not isinstance(gpus_per_server, int) or gpus_per_server < 1:
        raise ValueError(f"gpus_per_server: must be an integer >= 1, got {gpus_per_server!r}")
    if profiles is None:
        profiles = builtin_profiles()
    elif not isinstance(profiles, ProfileSet):
        profiles = load_profiles(profiles)
    p = os.fspath(path)
    skips = _Skips()
    jobs, records = _pollux_jobs(p, profiles, gpus_per_server, skips)
    jobs.sort(key=lambda j: j.submit_time)  # stable: ties keep file order
    return ConvertedJobs(jobs, p, "pollux", records, skips.counts)


def load_real_trace(fmt: str, path: str | os.PathLike[str], path2: str | os.PathLike[str] | None = None,
                    seed: int = 0, **options: Any) -> ConvertedJobs:
    """Dispatch on ``fmt`` (``philly``, ``helios``, ``alibaba``, ``pollux``; ``alibaba`` needs ``path2`` = the
    task table; ``pollux`` ignores ``seed`` and takes :func:`load_pollux`'s options)."""
    if fmt == "pollux":
        if path2 is not None:
            raise ValueError("format 'pollux' reads one file (--in); --in2 is for alibaba only")
        return load_pollux(path, **options)
    if fmt == "philly":
        return load_philly(path, seed, **options)
    if fmt == "helios":
        return load_helios(path, seed, **options)
    if fmt in ("alibaba", "pai"):
        if path2 is None:
            raise ValueError("format 'alibaba' needs two files: the job table and the task table (--in2)")
        return load_alibaba(path, path2, seed, **options)
    raise ValueError(f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")


# --------------------------------------------------------------------------- command line


def _parse_mix(text: str) -> dict[str, float]:
    mix = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--model-mix: expected KEY=PROBABILITY, got {item.strip()!r}")
        try:
            mix[key.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--model-mix: not a number for {key.strip()!r}: {value.strip()!r}") from None
    return mix


def add_convert_parser(trace_subparsers: Any) -> argparse.ArgumentParser:
    """Register ``convert`` under ``lyra-gym trace``; it calls :func:`run_convert`."""
    c = trace_subparsers.add_parser(
        "convert", help="convert a downloaded public trace (Philly, Helios, Alibaba PAI) or a Pollux "
                        "artifact workload to a trace CSV",
        description="Convert a public production trace to this project's trace CSV. Traces do not name "
                    "models or elasticity: both are seeded draws (see lyra_gym/realtraces.py). A Pollux "
                    "workload (petuum/adaptdl osdi21-artifact, simulator/workloads/workload-N.csv) names "
                    "both and converts deterministically.")
    c.add_argument("--format", required=True, choices=FORMATS)
    c.add_argument("--in", dest="input", required=True,
                   help="Philly cluster_job_log, Helios cluster_log.csv, PAI pai_job_table.csv, or a Pollux "
                        "workload-N.csv")
    c.add_argument("--in2", dest="input2", default=None, help="PAI pai_task_table.csv (alibaba only)")
    c.add_argument("--out", required=True,
                   help="trace CSV to write (atomically); never one of the inputs, overwrite or not")
    c.add_argument("--overwrite", action="store_true", help="replace an existing --out file (default: refuse)")
    c.add_argument("--seed", type=int, default=0,
                   help="seed of the model and elastic draws (default 0; pollux has no draws)")
    c.add_argument("--elastic-share", type=float, default=None,
                   help=f"probability that a job is elastic (default {DEFAULT_ELASTIC_SHARE}; not for pollux)")
    c.add_argument("--model-mix", default=None,
                   help="KEY=P,KEY=P,... over the profile's model keys (default: the presets' mix; not for pollux)")
    c.add_argument("--profiles", default=None,
                   help="profile JSON whose model keys to draw from (default: built-in); for pollux, the "
                        "profile whose reference-GPU throughput sets the durations")
    c.add_argument("--gpus-per-server", type=int, default=None,
                   help=f"pollux only: GPUs per reference server the durations assume (default "
                        f"{POLLUX_GPUS_PER_NODE}, the artifact's nodes)")
    c.set_defaults(func=run_convert)
    return c


def run_convert(args: argparse.Namespace) -> int:
    """Convert ``args.input`` (and ``args.input2``) to ``args.out``; returns 0, or 2 on a bad option.

    ``--out`` follows the output rule (:mod:`lyra_gym.outputs`), checked after the options and
    before reading: an existing file needs ``--overwrite``, an input (symbolic links followed)
    is always refused, and the file is written atomically. Malformed input raises
    :class:`TraceError` (the ``lyra-gym`` entry point prints it).
    """
    from lyra_gym.outputs import atomic_path, check_out_file

    try:
        if args.seed < 0:
            raise ValueError(f"--seed {args.seed}: must be >= 0")
        if args.format != "pollux" and args.gpus_per_server is not None:
            raise ValueError(f"--gpus-per-server is only used with --format pollux, not {args.format}")
        if args.format not in ("alibaba", "pai") and args.input2:
            raise ValueError(f"--in2 is only used with --format alibaba, not {args.format}")
        if args.format == "pollux":
            for flag, value in (("--model-mix", args.model_mix), ("--elastic-share", args.elastic_share)):
                if value is not None:
                    raise ValueError(f"{flag} is not used with --format pollux: its workloads name the "
                                     f"application and every job's elasticity follows the artifact")
            gps = POLLUX_GPUS_PER_NODE if args.gpus_per_server is None else args.gpus_per_server
            if gps < 1:
                raise ValueError(f"--gpus-per-server {gps}: must be >= 1")
        else:
            mix = _parse_mix(args.model_mix) if args.model_mix else None
            share = DEFAULT_ELASTIC_SHARE if args.elastic_share is None else args.elastic_share
        out = check_out_file(args.out, getattr(args, "overwrite", False),
                             inputs={"--in": args.input, "--in2": args.input2, "--profiles": args.profiles})
        if args.format == "pollux":
            jobs = load_pollux(args.input, profiles=args.profiles, gpus_per_server=gps)
        else:
            known = None
            if args.profiles:
                from lyra_gym.profiles import load_profiles

                known = list(load_profiles(args.profiles).models)
            jobs = load_real_trace(args.format, args.input, args.input2, args.seed, model_mix=mix,
                                   elastic_share=share, known_models=known)
    except TraceError:
        raise
    except ValueError as err:
        print(f"lyra-gym: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    with atomic_path(out) as tmp:
        write_trace(jobs, tmp)
    print(jobs.summary())
    print(f"wrote {len(jobs)} jobs to {args.out}")
    return 0
