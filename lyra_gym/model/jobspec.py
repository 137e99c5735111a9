"""The job record: :class:`JobSpec`, one job of a trace as the simulator reads it, and the bounds
its fields must respect (checked when a record is built, whatever built it: a trace file, a
generator, a user's script). The CSV format is :mod:`lyra_gym.workloads.trace`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import NamedTuple

from lyra_gym.errors import LyraGymError, shown

__all__ = ["MAX_BATCH_SIZE", "MAX_DURATION_S", "MAX_SUBMIT_TIME_S", "JobSpec", "JobSpecError"]

#: Longest job duration accepted, seconds: 10 years (365-day years). Published cluster traces
#: span weeks to months (Philly about 75 days, Alibaba PAI 2020 two months, Helios six months), so
#: no job in them comes near it; a larger value is a typo or a unit mix-up (milliseconds read as
#: seconds). The bound also keeps a job's run time where float64 still resolves better than a
#: microsecond (its spacing at 3.2e8 s is 6e-8 s), instead of letting 1e300 s reach the engine.
MAX_DURATION_S = 10 * 365 * 86400.0
#: Latest submit time accepted, seconds from the trace's start: the same 10 years and the same
#: reasons (a far submit time would otherwise fail much later, sizing the demand curve, without
#: naming the trace line).
MAX_SUBMIT_TIME_S = MAX_DURATION_S

#: Largest global batch accepted, samples per step: 2**24 = 16,777,216. The largest published
#: data-parallel batches are tens of thousands of samples (81,920 images for ResNet-50 on
#: ImageNet, Yamazaki et al. 2019; 65,536 sequences for BERT with LAMB, You et al. 2020), and
#: 2**24 still holds a batch counted in tokens (GPT-3's 3.2M); a larger value is a typo. Every
#: integer up to it is exact in float32 as well as float64, which the batch arithmetic uses.
MAX_BATCH_SIZE = 2**24


class JobSpecError(LyraGymError):
    """A :class:`JobSpec` was built with an invalid value.

    Attributes:
        field: name of the offending field.
        problem: the bare description of what is wrong.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"JobSpec.{field}: {problem}")


def _as_float(spec: "JobSpec", name: str) -> float:
    """Return field ``name`` as a plain float, converting it in place if needed."""
    x = getattr(spec, name)
    if type(x) is float:
        return x
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise JobSpecError(name, f"must be a number, got {shown(x)}")
    x = float(x)
    object.__setattr__(spec, name, x)
    return x


def _as_int(spec: "JobSpec", name: str) -> int:
    """Return field ``name`` as a plain int, converting it in place if needed."""
    x = getattr(spec, name)
    if type(x) is int:
        return x
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise JobSpecError(name, f"must be an integer, got {shown(x)}")
    x = int(x)
    object.__setattr__(spec, name, x)
    return x


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job of a trace (immutable). Times in seconds, sizes in GPUs.

    Attributes:
        job_id: unique, non-empty identifier without leading/trailing spaces.
        submit_time: seconds from trace start at which the job arrives, finite, >= 0.
        num_gpus: GPUs the job requests, >= 1.
        duration: seconds the job runs at ``num_gpus`` on the reference GPU
            type (the simulator turns it into work with the throughput
            profile), > 0 and <= :data:`MAX_DURATION_S`.
        model: key into the throughput profiles, non-empty.
        elastic: whether the job may be scaled between ``min_gpus`` and
            ``max_gpus`` while it runs.
        min_gpus: fewest GPUs the job may run on; ``== num_gpus`` if inelastic.
        max_gpus: most GPUs the job may run on; ``== num_gpus`` if inelastic.
        batch_size: global batch at ``num_gpus`` (samples per step, in
            ``[num_gpus, MAX_BATCH_SIZE]``: at least one sample per worker), or None for
            ``num_gpus`` x the profile's local batch (:mod:`lyra_gym.model.scaling`).

    Raises:
        JobSpecError: (a ``ValueError``) naming the first invalid field.
    """

    job_id: str
    submit_time: float
    num_gpus: int
    duration: float
    model: str
    elastic: bool
    min_gpus: int
    max_gpus: int
    batch_size: int | None = None

    def __post_init__(self) -> None:
        # Every field is read once into a local (this runs once per job of every trace).
        job_id = self.job_id
        if not isinstance(job_id, str) or not job_id:
            raise JobSpecError("job_id", f"must be a non-empty string, got {shown(job_id)}")
        if job_id != job_id.strip():
            raise JobSpecError("job_id", f"must not start or end with whitespace, got {shown(job_id)}")
        # Numbers are normalised to plain float / int (numpy scalars are
        # accepted and converted), so equality and CSV output do not depend
        # on where the values came from.
        st = self.submit_time
        if type(st) is not float:
            st = _as_float(self, "submit_time")
        if not math.isfinite(st) or st < 0:
            raise JobSpecError("submit_time", f"must be a finite number >= 0, got {shown(st)}")
        if st > MAX_SUBMIT_TIME_S:
            raise JobSpecError("submit_time", f"must be at most MAX_SUBMIT_TIME_S = {MAX_SUBMIT_TIME_S:.0f} s "
                                              f"(10 years), got {shown(st)}")
        ng = self.num_gpus
        if type(ng) is not int:
            ng = _as_int(self, "num_gpus")
        if ng < 1:
            raise JobSpecError("num_gpus", f"must be an integer >= 1, got {shown(ng)}")
        d = self.duration
        if type(d) is not float:
            d = _as_float(self, "duration")
        if not math.isfinite(d) or d <= 0:
            raise JobSpecError("duration", f"must be a finite number > 0, got {shown(d)}")
        if d > MAX_DURATION_S:
            raise JobSpecError("duration", f"must be at most MAX_DURATION_S = {MAX_DURATION_S:.0f} s (10 years), "
                                           f"got {shown(d)} s (a unit mix-up?)")
        model = self.model
        if not isinstance(model, str) or not model or model != model.strip():
            raise JobSpecError(
                "model", f"must be a non-empty string without surrounding whitespace, got {shown(model)}"
            )
        el = self.elastic
        if type(el) is not bool:
            # numpy booleans are accepted and converted; ints (0/1) are not.
            if getattr(getattr(el, "dtype", None), "kind", None) != "b" or getattr(el, "ndim", 1) != 0:
                raise JobSpecError("elastic", f"must be a bool, got {shown(el)}")
            el = bool(el)
            object.__setattr__(self, "elastic", el)
        lo = self.min_gpus
        if type(lo) is not int:
            lo = _as_int(self, "min_gpus")
        if lo < 1:
            raise JobSpecError("min_gpus", f"must be an integer >= 1, got {shown(lo)}")
        hi = self.max_gpus
        if type(hi) is not int:
            hi = _as_int(self, "max_gpus")
        if hi < 1:
            raise JobSpecError("max_gpus", f"must be an integer >= 1, got {shown(hi)}")
        if not el:
            for name, value in (("min_gpus", lo), ("max_gpus", hi)):
                if value != ng:
                    raise JobSpecError(
                        name, f"an inelastic job must have {name} == num_gpus ({ng}), got {value}"
                    )
        if lo > hi:
            raise JobSpecError("min_gpus", f"min_gpus ({lo}) is greater than max_gpus ({hi})")
        if not lo <= ng <= hi:
            raise JobSpecError("num_gpus", f"num_gpus ({ng}) is outside [min_gpus, max_gpus] = [{lo}, {hi}]")
        if self.batch_size is not None:
            b = _as_int(self, "batch_size")
            if b < 1:
                raise JobSpecError("batch_size", f"must be an integer >= 1, got {shown(b)}")
            if b > MAX_BATCH_SIZE:
                raise JobSpecError("batch_size", f"must be at most MAX_BATCH_SIZE = {MAX_BATCH_SIZE:,} samples, "
                                                 f"got {b:.6g}")
            if b < ng:
                raise JobSpecError("batch_size", f"{b} samples is fewer than num_gpus ({ng}): each of "
                                                 f"the job's workers needs at least one sample per step")

    def request(self) -> JobRequest:
        """What the job asks for, without its duration (:class:`JobRequest`)."""
        return JobRequest(self.job_id, self.submit_time, self.num_gpus, self.model, self.elastic,
                          self.min_gpus, self.max_gpus, self.batch_size)


class JobRequest(NamedTuple):
    """A :class:`JobSpec`'s fields but ``duration``: what a scheduler may read of a job under every
    knowledge mode without asking the knowledge (``JobView.request``)."""

    job_id: str
    submit_time: float
    num_gpus: int
    model: str
    elastic: bool
    min_gpus: int
    max_gpus: int
    batch_size: int | None


# --------------------------------------------------------------------------- loading
