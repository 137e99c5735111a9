"""A trace's jobs as the engine's job records: sorted, made elastic where asked, checked, sized."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from lyra_gym.model.jobs import Job
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import ProfileError, ProfileSet
from lyra_gym.model.scaling import ScalingModel

#: Most GPUs an inelastic job made elastic by ``all_jobs_elastic`` may grow to (adaptdl simulator).
ELASTIC_CAP_GPUS = 64


def as_elastic(spec: JobSpec) -> JobSpec:
    """``spec`` as an elastic job (``SimConfig.all_jobs_elastic``): an inelastic one may run on
    1 to ``max(num_gpus, min(ELASTIC_CAP_GPUS, 2 x num_gpus))`` GPUs; an elastic one is unchanged."""
    if spec.elastic:
        return spec
    top = max(spec.num_gpus, min(ELASTIC_CAP_GPUS, 2 * spec.num_gpus))
    return dataclasses.replace(spec, elastic=True, min_gpus=1, max_gpus=top)


def build_jobs(specs: Sequence[JobSpec], profiles: ProfileSet, scaling: ScalingModel, reference_gpu: str,
               reference_gpus_per_server: int, all_elastic: bool = False) -> list[Job]:
    """One :class:`Job` per spec in submit order (stable: ties keep trace order), indexed from 0.

    A job's work (samples) is its duration (s) at its requested size on reference GPUs packed onto
    reference servers, at its initial batch. ProfileError for a model the profiles lack,
    ValueError for a duplicate job id."""
    ordered = sorted(specs, key=lambda j: j.submit_time)
    if all_elastic:
        ordered = [as_elastic(spec) for spec in ordered]
    jobs: list[Job] = []
    seen: set[str] = set()
    for index, spec in enumerate(ordered):
        if spec.model not in profiles:
            raise ProfileError(
                f"job {spec.job_id!r}: unknown model key {spec.model!r} (known: {', '.join(sorted(profiles.models))})"
            )
        if spec.job_id in seen:
            raise ValueError(f"job_id {spec.job_id!r}: duplicate job id")
        seen.add(spec.job_id)
        b0 = scaling.initial_batch(spec)
        rate = scaling.reference_rate(spec, b0, reference_gpu, reference_gpus_per_server)
        job = Job(index, spec, spec.duration * rate, rate)
        job.init_batch = job.batch = b0
        jobs.append(job)
    return jobs
