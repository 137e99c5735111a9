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

Mapping to :class:`~lyra_gym.workloads.trace.JobSpec`
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
               profile's keys (``lyra_gym.workloads.tracegen``); uniform if none of those keys exist
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
:class:`~lyra_gym.workloads.trace.TraceError` naming the file.

Errors: a malformed record raises :class:`~lyra_gym.workloads.trace.TraceError` whose
message is ``<file>:<line>: field '<field>': <problem>`` (JSON records: the
line where the record starts).

Modules: :mod:`.common` (records, value parsing, file readers), :mod:`.assemble` (model and
elastic draws), one per format (:mod:`.philly`, :mod:`.helios`, :mod:`.alibaba`, :mod:`.pollux`,
whose docstring holds the Pollux mapping), :mod:`.dispatch` (:func:`load_real_trace`) and
:mod:`.cli` (``lyra-gym trace convert``).
"""

from __future__ import annotations

# The names in __all__, and the module-level constants of the former single module ("X as X": re-exported).
from lyra_gym.workloads.realtraces.alibaba import PAI_JOB_COLUMNS as PAI_JOB_COLUMNS
from lyra_gym.workloads.realtraces.alibaba import PAI_TASK_COLUMNS as PAI_TASK_COLUMNS
from lyra_gym.workloads.realtraces.alibaba import load_alibaba
from lyra_gym.workloads.realtraces.assemble import DEFAULT_ELASTIC_SHARE as DEFAULT_ELASTIC_SHARE
from lyra_gym.workloads.realtraces.assemble import default_model_mix
from lyra_gym.workloads.realtraces.cli import add_convert_parser, run_convert
from lyra_gym.workloads.realtraces.common import ConvertedJobs
from lyra_gym.workloads.realtraces.dispatch import FORMATS, load_real_trace
from lyra_gym.workloads.realtraces.helios import HELIOS_COLUMNS as HELIOS_COLUMNS
from lyra_gym.workloads.realtraces.helios import load_helios
from lyra_gym.workloads.realtraces.philly import load_philly
from lyra_gym.workloads.realtraces.pollux import POLLUX_APPLICATIONS, PolluxApplication, load_pollux
from lyra_gym.workloads.realtraces.pollux import POLLUX_COLUMNS as POLLUX_COLUMNS
from lyra_gym.workloads.realtraces.pollux import POLLUX_GPUS_PER_NODE as POLLUX_GPUS_PER_NODE

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
