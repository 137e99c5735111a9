"""What the observation builder keeps per engine (:mod:`lyra_gym.envs.observation`'s cost notes):
the engine's constants, each job's spec-derived features and loaned-type rates, the job rows kept
between steps, the cluster features read off the free GPUs, and the inference demand ahead.

Every value here is computed with the view's own calls, so observations built from what is kept
are the same bit for bit as built afresh (``tests/envs/test_env_kept_state.py``,
``tests/envs/test_env_step_kept_state.py``).
"""

from __future__ import annotations

import bisect
import math
import weakref
from typing import Mapping

from lyra_gym.model.scaling import PROGRESS_BINS
from lyra_gym.sim.cluster import Pool
from lyra_gym.sim.view import ClusterView, JobView


class DemandAhead:
    """``curve.at(t)`` for a time ``t`` that only grows (a fixed horizon ahead of the clock):
    the step of the curve found last is kept while ``t`` stays inside it, so most calls do
    two comparisons instead of a search. Same values as ``DemandCurve.at``."""

    __slots__ = ("_curve", "_times", "_lo", "_hi", "_value")

    def __init__(self, curve) -> None:
        self._curve = curve
        self._times = curve.times_s.tolist()
        self._lo = self._hi = 0.0  # empty interval: the first call searches
        self._value = 0

    def at(self, t: float) -> int:
        if self._lo <= t < self._hi:
            return self._value
        value = self._curve.at(t)  # raises on NaN as the curve does
        times = self._times
        index = bisect.bisect_right(times, t) - 1  # the curve's own search: searchsorted(side="right") - 1
        self._lo = times[index] if index >= 0 else -math.inf
        self._hi = times[index + 1] if index + 1 < len(times) else math.inf
        self._value = value
        return value


class EngineConstants:
    """What stays fixed for one engine (one :class:`ClusterView`): the servers, the reference
    throughputs, each job's spec-derived features, and each job's rate on the loaned GPU type
    per (progress part, batch). Everything here is computed with the view's own calls, once, so
    the observation is the same bit for bit as computing it at every step. It holds the view
    weakly (:data:`CONSTANTS_BY_VIEW` is keyed by it).

    Kept between steps too: the row of a queued job (only its wait changes until it runs
    again), the allocation-derived part of a running job's row (until its allocation changes;
    a new rate updates its rate ratio), the cluster features read off the free GPUs (until
    ``topology.version`` changes), the inference demand ahead (until the clock leaves its
    step) and the running jobs' part of the job slots (until the running jobs change)."""

    __slots__ = ("_view", "ref", "jobs", "goodput", "training_ids", "inference_ids", "inference_set",
                 "training_gpus", "inference_gpus", "loaned_type", "adaptive", "queued_rows", "running_rows",
                 "demand_ahead", "shared_goodput", "training_cells", "inelastic", "occupancy", "running_slots",
                 "shared_parts", "submits", "models", "sizes", "server_rows", "__weakref__")

    def __init__(self, view: ClusterView) -> None:
        self._view = weakref.ref(view)
        servers = view.servers
        self.training_ids = view.training_server_ids
        self.inference_ids = view.inference_server_ids
        self.inference_set = frozenset(s for s in range(len(servers)) if servers[s].pool is Pool.INFERENCE)
        self.training_gpus = sum(servers[s].num_gpus for s in self.training_ids)
        topology = view.topology
        #: the topology cells of the training servers (their free GPUs: running totals and buckets)
        self.training_cells = tuple(c.index for c in topology.cells if c.pool is Pool.TRAINING)
        specs = [job.spec for job in view.all_jobs()]  # model, sizes and elasticity never change
        #: per job index, 1 if the job is inelastic
        self.inelastic = [0 if spec.elastic else 1 for spec in specs]
        #: per job index, its model and requested GPUs
        self.models = [spec.model for spec in specs]
        self.sizes = [spec.num_gpus for spec in specs]
        self.inference_gpus = sum(servers[s].num_gpus for s in self.inference_ids) or 1
        self.loaned_type: tuple[str, int] | None = None
        if self.inference_ids:
            first = servers[self.inference_ids[0]]
            self.loaned_type = (first.gpu_type, first.num_gpus)
        self.ref: dict[tuple[str, int], float] = {}
        self.jobs: dict[int, tuple] = {}
        self.goodput: dict[tuple[int, int, float | None], float] = {}
        # goodput reads the job's chosen batch only under the adaptive rule (lyra_gym.model.scaling.global_batch)
        self.adaptive = view.scaling == "adaptive"
        # job index -> ((remaining work, workers, attained GPU-s, batch), row before and after the wait)
        self.queued_rows: dict[int, tuple[tuple, tuple, tuple]] = {}
        # job index -> (allocation, rate, workers, any server loaned, the row's first 8 features,
        # scaling efficiency, reference throughput, on loaned, rate ratio, flexible workers, the
        # reference throughput of its workers: rate ratio = rate / it, its part_rates list or None)
        self.running_rows: dict[int, tuple[Mapping[int, int], float, int, bool, tuple[float, ...], float, float,
                                           float, float, float, float, list[float | None] | None]] = {}
        # inference demand 1 h, 3 h and 6 h ahead of the clock
        demand = view.demand_curve  # the curve view.inference_demand_at reads
        self.demand_ahead = tuple(DemandAhead(demand) for _ in range(3))
        # (model, GPUs, B0, progress part, batch) -> loaned-type rate, shared by the engines of one builder
        # and run context (ObservationBuilder._shared_goodput); None until a builder sets it
        self.shared_goodput: dict | None = None
        # (model, GPUs, B0) -> loaned-type rate per progress part (None: not asked yet), where the batch
        # plays no part (batch None): part_rates' lists, shared as shared_goodput is (None: per engine)
        self.shared_parts: dict[tuple[str, int, float], list[float | None]] | None = None
        # (topology.version, the cluster features read off the free GPUs alone): see ObservationBuilder.build
        self.occupancy: tuple[int, tuple] | None = None
        # (the running jobs' views in start order, the same: elastic ones then inelastic ones, how
        # many are elastic): job_slots' running part, kept while the running jobs stay these
        self.running_slots: tuple[list[JobView], list[JobView], int] | None = None
        # (topology.version, the loaned-server slots, their rows): ObservationBuilder._server_rows
        self.server_rows: tuple[int, list[int], list[float]] | None = None
        # the jobs' submit times, ascending (observation version 2's arrivals; None until asked)
        self.submits: list[float] | None = None

    def submit_times(self) -> list[float]:
        """The submit times of the engine's jobs, ascending (computed once)."""
        submits = self.submits
        if submits is None:
            view = self._view()
            assert view is not None  # the engine (and its view) own these constants
            submits = self.submits = sorted(job.spec.submit_time for job in view.all_jobs())
        return submits

    def reference(self, model: str, workers: int) -> float:
        """``view.reference_throughput(model, workers)``, cached."""
        key = (model, workers)
        rate = self.ref.get(key)
        if rate is None:
            view = self._view()
            assert view is not None  # the engine (and its view) own these constants
            rate = self.ref[key] = view.reference_throughput(model, workers)
        return rate

    def loaned_rate(self, job: JobView, index: int, part: int, batch: float | None) -> float:
        """``view.goodput(job, num_gpus, *loaned_type)``: it depends on the job (fixed), its progress
        part ``part`` (``progress_bin`` of its true work done now) and, under the adaptive rule only,
        its chosen batch ``batch`` (None otherwise); cached on those per engine in ``goodput``
        (callers look there first and call this on a miss), and per run context (the profiles and
        config the engine's scaling model is made of) on what the rate is a function of: the model,
        the requested GPUs, ``B0`` (the scaling model's own memo key, ``ScalingModel.rate``, plus
        the size ``global_batch`` reads), the part and the batch; so jobs of one model and size, in
        any engine of that context, share it."""
        shared = self.shared_goodput
        spec = job.spec
        wide = (spec.model, spec.num_gpus, job.init_batch, part, batch)
        rate = shared.get(wide) if shared is not None else None
        if rate is None:
            view, loaned_type = self._view(), self.loaned_type
            assert view is not None and loaned_type is not None  # asked only with loaned servers
            rate = view.goodput(job, spec.num_gpus, *loaned_type)
            if shared is not None:
                shared[wide] = rate
        self.goodput[(index, part, batch)] = rate
        return rate

    def part_rates(self, job: JobView) -> list[float | None]:
        """The job's :meth:`loaned_rate` per progress part with ``batch`` None (every rule but the
        adaptive one), entry ``part``; None where not asked yet (:meth:`loaned_rate_at` fills it). One list per
        (model, requested GPUs, ``B0``), what the rate is a function of, shared by the engines of a
        run context as ``loaned_rate``'s entries are."""
        shared = self.shared_parts
        if shared is None:
            shared = self.shared_parts = {}
        spec = job.spec
        key = (spec.model, spec.num_gpus, job.init_batch)
        rates = shared.get(key)
        if rates is None:
            rates = shared[key] = [None] * PROGRESS_BINS
        return rates

    def loaned_rate_at(self, job: JobView, index: int, part: int, batch: float | None,
                       rates: list[float | None] | None) -> float:
        """``view.goodput(job, num_gpus, *loaned_type)`` at progress part ``part``: from ``rates`` (the
        job's :meth:`part_rates`, where ``batch`` is None) or the per-engine ``goodput`` cache, else
        computed (:meth:`loaned_rate`) and kept there."""
        if rates is not None and part >= 0:
            rate = rates[part]
            if rate is None:
                rate = rates[part] = self.loaned_rate(job, index, part, None)
            return rate
        rate = self.goodput.get((index, part, batch))
        return rate if rate is not None else self.loaned_rate(job, index, part, batch)


#: Per engine (its view, held weakly: the entry goes with the engine).
CONSTANTS_BY_VIEW: "weakref.WeakKeyDictionary[ClusterView, EngineConstants]" = weakref.WeakKeyDictionary()


def engine_constants(view: ClusterView) -> EngineConstants:
    """The :class:`EngineConstants` of ``view``'s engine."""
    constants = CONSTANTS_BY_VIEW.get(view)
    if constants is None:
        constants = CONSTANTS_BY_VIEW[view] = EngineConstants(view)
    return constants


__all__ = ["CONSTANTS_BY_VIEW", "DemandAhead", "EngineConstants", "engine_constants"]
