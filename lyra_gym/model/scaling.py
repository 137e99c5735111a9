"""What more workers buy: a job's progress rate (goodput) at an allocation and a batch size.

One ground truth for every policy, chosen by ``SimConfig.scaling`` and
recorded in ``config.json``. A job has an initial global batch ``B0`` (the
trace's ``batch_size``, else ``num_gpus x`` the profile's ``local_batch``) and
its work is counted in samples at ``B0``: ``work = duration x rate(num_gpus
reference GPUs, B0)``, so a job run at its requested size on the reference GPU
takes exactly its trace ``duration`` under every rule. On ``n`` workers with
global batch ``M`` (local batch ``m = M / n``)::

    rate = n * m / step(n, m) * E(M)          E(M) = (phi + B0) / (phi + M)

``step`` is the profile's step time at local batch ``m``
(:meth:`lyra_gym.model.profiles.ModelProfile.step_time`: a per-step part that does
not shrink with the batch plus compute proportional to it, plus all-reduce);
``E`` is Pollux's statistical efficiency (:mod:`lyra_gym.model.efficiency`) with the
job's own ``B0`` as reference, so ``E(B0) = 1`` and a sample at batch ``M`` is
worth ``E(M)`` samples at ``B0``. The rules differ in ``M``:

=================  =====================================================  ==========
rule               global batch on ``n`` workers                           ``E``
=================  =====================================================  ==========
``fixed-local``    ``M = n x B0 / num_gpus``: each worker keeps its local   charged
                   batch, the global batch grows with the workers (how
                   Horovod Elastic and TorchElastic jobs scale) -- default
``fixed-global``   ``M = B0``: the workers split a fixed batch, so each     1
                   does less per step and the per-step fixed part and the
                   all-reduce make speed-up sub-linear
``adaptive``       ``M`` = the batch the scheduler last chose for the job   charged
                   (``Plan.batch_sizes``; ``B0`` until it chooses): Pollux
``throughput``     the old semantics: samples/s at the profile's local      1
                   batch, no efficiency charged (scale-out nearly free)
=================  =====================================================  ==========

Why ``fixed-local`` is the default: it is how elastic jobs scale in the
frameworks Lyra and its peers target (the per-GPU batch is what fits in
memory and is tuned; more workers mean a larger global batch), and it charges
the statistical cost of that larger batch, which the ``throughput`` rule
ignores. A researcher comparing elastic policies should see that scale-out is
not free; ``throughput`` stays selectable to reproduce earlier results.

Noise scale ``phi`` grows over training (:mod:`lyra_gym.model.efficiency`, measured
by the Pollux artifact per model). A job's ``phi`` is the measured curve
scaled by ``B0 / M0`` (``M0`` the artifact's initial batch for the model): the
job's initial batch plays the role of the artifact's, so ``E`` depends on
``M / B0`` and on the model's curve only, whatever unit a profile counts its
samples in (the built-in profile counts tokens for ``transformer`` and
``deepspeech2``, the artifact utterances). ``noise_scale="absolute"`` uses the
measured ``phi`` as it is, with ``E(M) = (phi + M0) / (phi + M)``, for profiles
in the artifact's own units (the Pollux testbed, whose jobs start at batches
other than ``M0``): work is then counted in ``M0``-samples, ``E`` applies under
every rule but ``throughput`` (a job at ``B0 != M0`` pays ``E(B0)``, as in the
artifact), and a trace ``duration`` is the run time at the requested size at
perfect efficiency. Models without a measured curve (``transformer``) have no
efficiency loss (``E = 1``), an assumption.

Progress is cut into :data:`PROGRESS_BINS` equal parts; within one part
``phi`` is held at its value in the middle of the part, so a job's rate is
constant between events and completion times stay exact. A job whose batch
equals ``B0`` has ``E = 1`` whatever ``phi``, so it needs no such events.

Within one part the rate uses the part's **effective efficiency**: for a format-2
efficiency file (``phi`` measured per epoch and per batch, :mod:`lyra_gym.model.efficiency`),
the work-weighted harmonic mean of ``E`` over the epochs the part overlaps, so the time
to cross the part is the sum of the epochs' times at their own ``E`` (exact while the
allocation is unchanged), as the artifact's per-epoch ``get_grad_stats`` gives. ``phi``
is read at the batch the job actually runs (interpolated between measured runs).

**Batches above GPU memory** (``SimConfig.batch_limit``). ``"accumulate"`` (default)
is the Pollux artifact's rule (``simulator/simulator.py``, ``Job.update_local_bsz``):
``local = ceil(M / n)``, ``accum = ceil(local / max_local_batch) - 1`` gradient
accumulation steps (at least 1 for a 1-GPU job above its reference batch, as there),
micro-batch ``atomic = ceil(local / (accum + 1))`` (under ``noise_scale: absolute``
also at most ``max_batch / (n (accum + 1))``, ``max_batch`` the largest measured batch),
so the batch really run is ``n x atomic x (accum + 1)``. One optimizer step takes::

    step(n, atomic) + accum x compute(atomic)

the all-reduce once per optimizer step, each accumulation step a micro-batch's compute
(the artifact's ``step_time + (step_time - sync_time) x accum_steps``). Hand check, bert
at 384 on 6 T4s: local 64, accum 5, atomic 10, batch 360. ``"cut"`` is the old rule: a
local batch above ``max_local_batch`` is cut to it (global batch ``n x max_local_batch``,
an all-reduce per micro-batch, no accumulation). A profile without ``max_local_batch``
never accumulates.
"""

from __future__ import annotations

import math
from lyra_gym.model.efficiency import EfficiencyTable
from lyra_gym.model.profiles import ProfileSet
from lyra_gym.model.jobspec import JobSpec

#: The scaling rules (``SimConfig.scaling``); the first is the default.
SCALING_RULES = ("fixed-local", "fixed-global", "adaptive", "throughput")
#: How a model's measured noise scale maps onto a job (``SimConfig.noise_scale``).
NOISE_SCALE_RULES = ("relative", "absolute")
#: What happens to a batch above workers x max_local_batch (``SimConfig.batch_limit``).
BATCH_LIMITS = ("accumulate", "cut")
#: Equal parts of training progress within which ``phi`` is held constant.
PROGRESS_BINS = 20
#: Most entries each of a ScalingModel's memos keeps; a full memo is emptied and refilled (its
#: results are pure, so only time is lost). A 50,000-job lyra run fills about 63,000.
MEMO_ENTRIES = 1 << 17


def _remember(memo: dict, key: object, value):
    """``memo[key] = value`` (emptying ``memo`` first when it holds :data:`MEMO_ENTRIES`); ``value``."""
    if len(memo) >= MEMO_ENTRIES:
        memo.clear()
    memo[key] = value
    return value


class ScalingModel:
    """A job's rate under one scaling rule (module docstring).

    :param profiles: throughput profiles.
    :param efficiency: noise-scale curves by model key (None: no efficiency loss anywhere).
    :param rule: one of :data:`SCALING_RULES`.
    :param noise_scale: one of :data:`NOISE_SCALE_RULES`.
    :param batch_limit: one of :data:`BATCH_LIMITS`.
    """

    def __init__(self, profiles: ProfileSet, efficiency: EfficiencyTable | None, rule: str = "fixed-local",
                 noise_scale: str = "relative", batch_limit: str = "accumulate") -> None:
        if batch_limit not in BATCH_LIMITS:
            raise ValueError(f"batch_limit: must be one of {', '.join(BATCH_LIMITS)}, got {batch_limit!r}")
        self.batch_limit = batch_limit
        if rule not in SCALING_RULES:
            raise ValueError(f"scaling: must be one of {', '.join(SCALING_RULES)}, got {rule!r}")
        if noise_scale not in NOISE_SCALE_RULES:
            raise ValueError(f"noise_scale: must be one of {', '.join(NOISE_SCALE_RULES)}, got {noise_scale!r}")
        self.profiles = profiles
        self.efficiency = efficiency
        self.rule = rule
        self.noise_scale_rule = noise_scale
        self.charges_efficiency = rule != "throughput" and efficiency is not None
        # noise_terms(), efficiency_factor(), rate(), needs_bins() and rate_for() are pure functions
        # of their keys given the profiles, the efficiency curves and the three rules: memoised (the
        # engine calls them at every start, rescale and progress part, schedulers for every option
        # they value) in dicts kept on the profile set, so every ScalingModel of the same profiles,
        # curves and rules shares them (an env reset builds a new engine, and with it a new model)
        #: What every rate is a pure function of besides the profiles and its arguments (the key
        #: of the shared memos below; equal for two models that give the same rates).
        self.memo_key = ("scaling", None if efficiency is None else efficiency.content_key, rule, noise_scale,
                         batch_limit)
        memos = profiles.memo(self.memo_key)
        self._terms: dict[tuple[str, float, int], tuple[float, float] | None] = memos.setdefault("terms", {})
        self._factors: dict[tuple[str, float, float, int], float] = memos.setdefault("factors", {})
        # format-2 curves: E over a progress part by (model, batch in the curve's units, part)
        self._parts: dict[tuple[str, float, int], float] = memos.setdefault("parts", {})
        self._rates: dict[tuple, float] = memos.setdefault("rates", {})
        self._bins: dict[tuple, bool] = memos.setdefault("bins", {})
        self._rate_for: dict[tuple, tuple[float, float, bool]] = memos.setdefault("rate_for", {})
        self._packed: dict[tuple, float] = memos.setdefault("packed", {})

    # ------------------------------------------------------------------ batches
    def initial_batch(self, spec: JobSpec) -> float:
        """``B0``: the trace's batch size, else ``num_gpus x`` the profile's local batch (samples)."""
        if spec.batch_size is not None:
            return float(spec.batch_size)
        return spec.num_gpus * self.profiles.model(spec.model).local_batch

    def global_batch(self, spec: JobSpec, b0: float, workers: int, chosen: float) -> float:
        """The global batch ``M`` on ``workers`` workers (``chosen``: the adaptive rule's choice),
        before the memory cap."""
        if self.rule == "fixed-local":
            return workers * b0 / spec.num_gpus
        if self.rule == "adaptive":
            return chosen
        return b0  # fixed-global (and throughput, where the batch plays no part)

    # ------------------------------------------------------------------ noise scale
    def has_curve(self, model: str) -> bool:
        return self.charges_efficiency and model in self.efficiency  # type: ignore[operator]

    def noise_terms(self, model: str, b0: float, progress_bin: int) -> tuple[float, float] | None:
        """``(phi, R)`` with ``E(M) = (phi + R) / (phi + M)`` in the middle of part ``progress_bin``:
        relative rule ``(phi x B0 / M0, B0)``, absolute ``(phi, M0)``; None without a curve."""
        key = (model, b0, progress_bin)
        terms = self._terms.get(key)
        if terms is None and key not in self._terms:
            if self.has_curve(model):
                curve = self.efficiency.model(model)  # type: ignore[union-attr]
                phi = curve.noise_scale_at((progress_bin + 0.5) / PROGRESS_BINS)
                if self.noise_scale_rule == "relative":
                    terms = (phi * b0 / curve.init_batch, b0)
                else:
                    terms = (phi, curve.init_batch)
            _remember(self._terms, key, terms)
        return terms

    def reference_batch(self, model: str, b0: float) -> float:
        """The batch at which ``E = 1``: ``B0`` (relative rule) or the model's measured ``M0`` (absolute)."""
        if self.noise_scale_rule == "absolute" and self.has_curve(model):
            return self.efficiency.model(model).init_batch  # type: ignore[union-attr]
        return b0

    def batch_range(self, spec: JobSpec, b0: float) -> tuple[float, float] | None:
        """The application's batch range ``(reference, largest measured)`` in the job's units: the
        artifact's ``(init_batch_size, max_batch_size)`` under the absolute rule, ``(B0, B0 x
        max / M0)`` under the relative one; None without a measured per-batch curve or with no
        efficiency charged (a batch-adaptive scheduler then has no range to search)."""
        if not self.has_curve(spec.model):
            return None
        curve = self.efficiency.model(spec.model)  # type: ignore[union-attr]
        top = curve.max_batch
        if top is None:
            return None
        if self.noise_scale_rule == "absolute":
            return curve.init_batch, top
        return b0, b0 * top / curve.init_batch

    def efficiency_factor(self, model: str, b0: float, batch: float, progress_bin: int) -> float:
        """``E`` of global batch ``batch`` in progress part ``progress_bin`` (module docstring): a
        format-2 curve's work-weighted harmonic mean over the part's epochs with ``phi`` at the
        batch; a format-1 curve's ``(phi + R) / (phi + M)`` at the part's middle."""
        key = (model, b0, batch, progress_bin)
        factor = self._factors.get(key)
        if factor is None:
            curve = self.efficiency.model(model)  # type: ignore[union-attr]
            if not curve.batches:
                phi, ref = self.noise_terms(model, b0, progress_bin)  # type: ignore[misc]
                factor = (phi + ref) / (phi + batch)
            else:
                # in the curve's own units: the artifact batch is batch x M0 / B0 under the relative rule
                m = batch * curve.init_batch / b0 if self.noise_scale_rule == "relative" else batch
                part = (model, m, progress_bin)
                factor = self._parts.get(part)
                if factor is None:
                    factor = _remember(self._parts, part, curve.part_efficiency(
                        m, progress_bin / PROGRESS_BINS, (progress_bin + 1) / PROGRESS_BINS))
            _remember(self._factors, key, factor)
        return factor

    # ------------------------------------------------------------------ rates
    def split(self, spec: JobSpec, b0: float, workers: int, batch: float) -> tuple[float, int, float]:
        """``(atomic, accum_steps, effective)``: the micro-batch per worker, the gradient accumulation
        steps and the global batch really run, for global batch ``batch`` on ``workers`` workers
        (``batch_limit`` rule, module docstring)."""
        cap = self.profiles.model(spec.model).max_local_batch
        if self.batch_limit == "cut" or cap is None:
            effective = batch if cap is None or batch <= cap * workers else cap * workers
            return effective / workers, 0, effective
        local = math.ceil(batch / workers - 1e-8)
        accum = math.ceil(local / cap - 1e-8) - 1
        if workers == 1 and batch > self.reference_batch(spec.model, b0):
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        if self.noise_scale_rule == "absolute" and self.has_curve(spec.model):
            top = self.efficiency.model(spec.model).max_batch  # type: ignore[union-attr]
            if top is not None:
                atomic = max(1, min(atomic, int(top / (workers * (accum + 1)))))
        return float(atomic), accum, float(workers * atomic * (accum + 1))

    def samples_per_s(self, spec: JobSpec, workers: int, servers: int, gpu_types: frozenset[str],
                      batch: float, b0: float | None = None) -> float:
        """Samples/s of ``workers`` workers at global batch ``batch`` (:meth:`split` first: with
        accumulation, ``effective / (step(n, atomic) + accum x compute(atomic))``), no efficiency;
        the profile's own local batch under ``throughput``."""
        profiles = self.profiles
        if self.rule == "throughput":
            return profiles.throughput(spec.model, workers, servers, gpu_types)
        atomic, accum, effective = self.split(spec, self.initial_batch(spec) if b0 is None else b0, workers, batch)
        model = profiles.model(spec.model)
        local = None if atomic == model.local_batch else atomic
        samples = profiles.throughput(spec.model, workers, servers, gpu_types, local)
        if accum == 0:
            return samples
        step = workers * atomic / samples
        return effective / (step + accum * model.step_time(1, 1, gpu_types, local))

    def rate(self, spec: JobSpec, b0: float, workers: int, servers: int, gpu_types: frozenset[str],
             batch: float, progress_bin: int = 0) -> float:
        """Progress per second (samples at the reference batch: what work is counted in) of ``workers``
        workers over ``servers`` servers of ``gpu_types`` at global batch ``batch`` (already
        :meth:`global_batch`), in progress part ``progress_bin``."""
        if workers < 1:
            return 0.0
        key = (spec.model, b0, workers, servers, gpu_types, batch, progress_bin)
        rate = self._rates.get(key)
        if rate is None:
            rate = _remember(self._rates, key, self._rate(spec, b0, workers, servers, gpu_types, batch, progress_bin))
        return rate

    def packed_rate(self, spec: JobSpec, b0: float, workers: int, gpu_type: str, gpus_per_server: int,
                    batch: float, progress_bin: int = 0) -> float:
        """:meth:`rate` of ``workers`` GPUs of ``gpu_type`` packed on as few servers of
        ``gpus_per_server`` GPUs as can hold them (what a scheduler asks of each option it values)."""
        key = (spec.model, b0, workers, gpu_type, gpus_per_server, batch, progress_bin)
        rate = self._packed.get(key)
        if rate is None:
            servers = -(-workers // gpus_per_server)
            rate = _remember(self._packed, key, self.rate(spec, b0, workers, servers, frozenset((gpu_type,)),
                                                          batch, progress_bin))
        return rate

    def packed_rates(self, spec: JobSpec, b0: float, low: int, high: int, gpu_type: str, gpus_per_server: int,
                     chosen: float, progress_bin: int = 0) -> list[float]:
        """:meth:`packed_rate` of ``low`` .. ``high - 1`` workers (each >= 1) at the rule's global batch
        for that many (:meth:`global_batch` with ``chosen``), in one call."""
        global_batch, packed_rate = self.global_batch, self.packed_rate
        return [packed_rate(spec, b0, w, gpu_type, gpus_per_server, global_batch(spec, b0, w, chosen), progress_bin)
                for w in range(low, high)]

    def _rate(self, spec: JobSpec, b0: float, workers: int, servers: int, gpu_types: frozenset[str],
              batch: float, progress_bin: int) -> float:
        samples = self.samples_per_s(spec, workers, servers, gpu_types, batch, b0)
        if self.rule == "throughput" or not self.has_curve(spec.model):
            return samples
        effective = self.split(spec, b0, workers, batch)[2]
        if effective == self.reference_batch(spec.model, b0):
            return samples
        return samples * self.efficiency_factor(spec.model, b0, effective, progress_bin)

    def statistical_efficiency(self, spec: JobSpec, b0: float, workers: int, batch: float,
                               progress_bin: int = 0) -> float:
        """The statistical efficiency :meth:`rate` charges (1 where it charges none): what each
        sample of the batch really run is worth in samples at the reference batch."""
        if workers < 1 or self.rule == "throughput" or not self.has_curve(spec.model):
            return 1.0
        effective = self.split(spec, b0, workers, batch)[2]
        if effective == self.reference_batch(spec.model, b0):
            return 1.0
        return self.efficiency_factor(spec.model, b0, effective, progress_bin)

    def reference_rate(self, spec: JobSpec, b0: float, gpu_type: str, gpus_per_server: int) -> float:
        """Samples/s at the requested size packed on ``gpu_type`` servers at ``B0``, efficiency not
        applied: ``work = duration x`` this (under the relative rule ``E(B0) = 1`` anyway)."""
        servers = math.ceil(spec.num_gpus / gpus_per_server)
        return self.samples_per_s(spec, spec.num_gpus, servers, frozenset((gpu_type,)), b0, b0)

    def rate_for(self, spec: JobSpec, b0: float, workers: int, servers: int, gpu_types: frozenset[str],
                 chosen: float, progress_bin: int) -> tuple[float, float, bool]:
        """``(rate, efficiency, needs_bins)`` at the rule's global batch (:meth:`global_batch` with
        ``chosen``): :meth:`rate`, :meth:`statistical_efficiency` and :meth:`needs_bins` (on
        ``workers`` workers), what the engine needs at each start, rescale and progress part,
        memoised in one look-up."""
        key = (spec.model, spec.num_gpus, b0, workers, servers, gpu_types,
               chosen if self.rule == "adaptive" else None, progress_bin)
        hit = self._rate_for.get(key)
        if hit is None:
            batch = self.global_batch(spec, b0, workers, chosen)
            hit = _remember(self._rate_for, key, (
                self.rate(spec, b0, workers, servers, gpu_types, batch, progress_bin),
                self.statistical_efficiency(spec, b0, workers, batch, progress_bin),
                self.needs_bins(spec, b0, batch, workers)))
        return hit

    def needs_bins(self, spec: JobSpec, b0: float, batch: float, workers: int | None = None) -> bool:
        """Does the rate depend on progress (a measured curve and a batch really run, on ``workers``
        workers if given, other than the reference)?"""
        key = (spec.model, b0, batch, workers)
        needs = self._bins.get(key)
        if needs is None:
            needs = _remember(self._bins, key, self._needs_bins(spec, b0, batch, workers))
        return needs

    def _needs_bins(self, spec: JobSpec, b0: float, batch: float, workers: int | None) -> bool:
        if not self.has_curve(spec.model):
            return False
        if workers is not None and workers >= 1:
            batch = self.split(spec, b0, workers, batch)[2]
        return batch != self.reference_batch(spec.model, b0)


_LAST_BIN = PROGRESS_BINS - 1


def progress_bin(work_done: float, total_work: float) -> int:
    """The part of training progress ``work_done / total_work`` falls in (0 .. PROGRESS_BINS - 1)."""
    if total_work <= 0:
        return _LAST_BIN
    part = int(work_done / total_work * PROGRESS_BINS)
    return part if part < _LAST_BIN else _LAST_BIN  # min(_LAST_BIN, part), without the call


def bin_end_work(progress_part: int, total_work: float) -> float:
    """Work (samples) at which part ``progress_part`` ends (``total_work`` for the last part)."""
    if progress_part >= PROGRESS_BINS - 1:
        return total_work
    return total_work * (progress_part + 1) / PROGRESS_BINS

