"""Pollux artifact workloads to jobs, deterministically (no seed, no draws).

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
cut to the profile's ``max_local_batch``; :meth:`lyra_gym.model.scaling.ScalingModel.reference_rate`),
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
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.scaling import ScalingModel
from lyra_gym.model.userfiles import shown
from lyra_gym.workloads.realtraces.common import ConvertedJobs, SkipCounts, csv_rows, parse_job_id, parse_number
from lyra_gym.workloads.trace import TraceError

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
#: GPUs per node of the Pollux artifact's cluster (``simulator.py --num-gpus`` default 4; AWS g4dn.12xlarge).
POLLUX_GPUS_PER_NODE = 4


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
    value = parse_number(text, path, line, field)
    if not value.is_integer():
        raise TraceError(path, line, field, f"not a whole number of {what}: {shown(text.strip())}")
    if value < 1:
        raise TraceError(path, line, field, f"must be >= 1, got {shown(text.strip())}")
    return int(value)


def _pollux_jobs(path: str, profiles: Any, gpus_per_server: int, skips: SkipCounts) -> tuple[list[JobSpec], int]:
    jobs: list[JobSpec] = []
    records = 0
    reference = profiles.reference_gpu
    # samples/s at a batch, as the engine counts work under the artifact's ground truth
    # (noise_scale: absolute, traces/pollux-testbed-t4.yaml): a 1-GPU job above its application's
    # initial batch M0 (ncf at 32,768) runs at least one accumulation step there, as in the artifact
    # (Job.update_local_bsz), so its duration must be converted at that rate for the engine to
    # recover P* x b0 (with no noise scale the engine took ncf's work 25 % short: 35 s alone
    # against the artifact's 46 s).
    from lyra_gym.model.efficiency import builtin_efficiency

    scaling = ScalingModel(profiles, builtin_efficiency(), "fixed-local", "absolute")
    for line, row in csv_rows(path, POLLUX_COLUMNS, POLLUX_COLUMNS, header_optional=False):
        records += 1
        name = skips.first_seen(parse_job_id(row["name"], path, line, "name"), path, line, "name")
        submit = parse_number(row["time"], path, line, "time")
        app_name = row["application"]
        app = POLLUX_APPLICATIONS.get(app_name)
        if app is None:
            raise TraceError(path, line, "application", f"unknown application {shown(app_name)} "
                             f"(expected one of {', '.join(sorted(POLLUX_APPLICATIONS))})")
        gpus = _whole(row["num_replicas"], path, line, "num_replicas", "replicas")
        batch = _whole(row["batch_size"], path, line, "batch_size", "samples")
        if app.model not in profiles:
            raise TraceError(path, line, "application",
                             f"{shown(app_name)} maps to model {shown(app.model)}, which the profile "
                             f"{profiles.source or ''} lacks (known: {', '.join(sorted(profiles.models))})")
        if app.elastic:
            elastic, lo, hi = True, 1, max(app.max_gpus, gpus)
        else:
            elastic, lo, hi = False, gpus, gpus
        spec = JobSpec(name, submit, gpus, 1.0, app.model, elastic, lo, hi, batch)
        speed = scaling.reference_rate(spec, float(batch), reference, gpus_per_server)
        jobs.append(replace(spec, duration=app.work_samples / speed))
    return jobs, records


def load_pollux(path: str | os.PathLike[str], *, profiles: Any = None,
                gpus_per_server: int = POLLUX_GPUS_PER_NODE) -> ConvertedJobs:
    """Convert a Pollux artifact workload CSV (``name,time,application,num_replicas,batch_size``).

    Deterministic: see the module docstring for the mapping and the work of each application.

    :param profiles: a :class:`~lyra_gym.model.profiles.ProfileSet` or a profile JSON path whose
        reference-GPU throughput turns work into ``duration`` (default: the built-in profile).
    :param gpus_per_server: reference-GPU servers the throughput packs ``num_replicas`` onto
        (default 4, the artifact's nodes; give the training servers' size of the cluster you
        simulate on, so the engine recovers the same work).
    :raises TraceError: a malformed row (file, line, field).
    """
    from lyra_gym.model.profiles import ProfileSet, builtin_profiles, load_profiles

    if isinstance(gpus_per_server, bool) or not isinstance(gpus_per_server, int) or gpus_per_server < 1:
        raise ValueError(f"gpus_per_server: must be an integer >= 1, got {shown(gpus_per_server)}")
    if profiles is None:
        profiles = builtin_profiles()
    elif not isinstance(profiles, ProfileSet):
        profiles = load_profiles(profiles)
    p = os.fspath(path)
    skips = SkipCounts()
    jobs, records = _pollux_jobs(p, profiles, gpus_per_server, skips)
    jobs.sort(key=lambda j: j.submit_time)  # stable: ties keep file order
    return ConvertedJobs(jobs, p, "pollux", records, skips.counts)
