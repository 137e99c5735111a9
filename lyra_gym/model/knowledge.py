"""What schedulers and observations may know of a job's duration (issue 26 item 1).

The engine always keeps the truth (a job's total work, in samples; :class:`~lyra_gym.model.jobs.Job`).
:class:`KnowledgeConfig` (``SimConfig.knowledge``) sets what a scheduler's
:class:`~lyra_gym.sim.view.JobView` and the environments' observation answer instead:

- ``oracle`` (default; the paper's headline): the truth. No estimator exists, the views are the
  plain ones: results are those of a run without this module, bit for bit.
- ``estimate``: each job gets one believed total ``E0 = r x total``, with
  ``ln r ~ Normal(ln bias, sigma^2)``: lognormal error, median ``bias`` (1 = unbiased median;
  the mean is ``bias x exp(sigma^2 / 2)``). The ``r`` are drawn once per run, one per job in
  submit order, from a stream of their own (:func:`build_knowledge`: a ``SeedSequence`` child of
  the run's seed, never the scheduler's generator), so every policy of one seed sees the same
  estimates. Sigma and bias are settings, not fitted to a trace (an assumption; issue 26 studies
  sigma 1).
- ``history``: ``E0`` is the mean duration of the jobs that finished before now with the same
  model and requested GPUs; falling back to the same model, then to every finished job, then to
  ``prior_s``. Our reading of Helios's QSSF (Hu et al., SC '21), which predicts a job's GPU time
  from earlier jobs of the same user and job name; traces here carry no user or name, so the
  groups are (model, GPUs); the mean as the statistic is an assumption. The engine tells the
  predictor of each completion as it happens (:meth:`HistoryKnowledge.finished`): no look-ahead.

Growth rule (both ``estimate`` and ``history``): a job that outlives its estimate (work done
reaches ``E0``) is believed to need ``E0 x growth^k``, ``k`` the smallest integer with
``E0 x growth^k > work done``: doubling by default. A pure function of the work done, so the
answer never depends on when a scheduler asked. The rule is an assumption, in the spirit of the
corrections of too-short runtime predictions in backfilling schedulers (Tsafrir, Etsion and
Feitelson, TPDS 2007), whose exact rule differs.

What stays visible: the work done so far (``total_work - remaining_work`` is the work done in
every mode, to the believed total's rounding), attained GPU-seconds, the rate, and the progress
*part* (the 1/20 of training progress the statistical efficiency is held over,
:data:`lyra_gym.model.scaling.PROGRESS_BINS`), which the rate depends on and a live measurement of
the gradient noise scale would reveal (Pollux measures it online). The exact progress fraction is
not shown: with the work done it would give the true total.

No side channel (issue 39 item 2): a belief is computed only from what the policy may know, never
through the true duration's arithmetic. ``E0`` is in samples (``estimate``: the one draw ``r x
total``; ``history``: the prediction in seconds times the job's reference rate,
:attr:`~lyra_gym.model.jobs.Job.reference_rate`, samples/s at its requested size from the
profile, a function of its model, size and batch alone); the believed duration is the believed
total over that rate; the work done a belief is measured against is
:meth:`~lyra_gym.model.jobs.Job.work_done_at` (work done at the last update plus rate x busy
time), not ``total - (total - done)``. So jobs of one (model, GPUs) are believed alike to the bit
under ``history``, ties between them are broken by the policy and not by each job's own rounding
of its true duration, and lengthening jobs that have not finished by ``T`` changes nothing a
policy does before ``T`` (``tests/model/test_knowledge_causality.py``, every built-in policy under
``history`` and ``estimate``, ``scaling: throughput``: under the goodput rules the rate itself
follows the true progress part).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from lyra_gym.errors import ConfigError, number_problem
from lyra_gym.model.jobs import Job
from lyra_gym.model.jobspec import MAX_DURATION_S
from lyra_gym.model.userfiles import shown

__all__ = ["KNOWLEDGE_MODES", "EstimateKnowledge", "HistoryKnowledge", "Knowledge", "KnowledgeConfig",
           "build_knowledge", "grown"]

KNOWLEDGE_MODES = ("oracle", "estimate", "history")


@dataclass(frozen=True)
class KnowledgeConfig:
    """``SimConfig.knowledge``: what schedulers may know of durations (module docstring).

    - ``mode``: ``"oracle"`` (default), ``"estimate"`` or ``"history"``.
    - ``sigma``: standard deviation of ``ln(estimate / truth)`` (``estimate``), in [0, 4].
    - ``bias``: median of ``estimate / truth`` (``estimate``), in (0, 100]; 1 = unbiased.
    - ``growth``: factor an outlived estimate grows by (``estimate`` and ``history``), in (1, 100].
    - ``prior_s``: the ``history`` prediction (s at the requested size) before any job finished.
    """

    mode: str = "oracle"
    sigma: float = 1.0
    bias: float = 1.0
    growth: float = 2.0
    prior_s: float = 3600.0

    RULES: ClassVar[dict[str, dict[str, Any]]] = {
        "sigma": {"lo": 0.0, "hi": 4.0},
        "bias": {"lo": 0.0, "lo_open": True, "hi": 100.0},
        "growth": {"lo": 1.0, "lo_open": True, "hi": 100.0},
        "prior_s": {"lo": 0.0, "lo_open": True, "hi": MAX_DURATION_S},
    }

    def __post_init__(self) -> None:
        if not isinstance(self.mode, str) or self.mode not in KNOWLEDGE_MODES:
            raise ConfigError(f"KnowledgeConfig.mode: must be one of {', '.join(KNOWLEDGE_MODES)}, "
                              f"got {shown(self.mode)}")
        for name, rule in self.RULES.items():
            problem = number_problem(getattr(self, name), **rule)
            if problem:
                raise ConfigError(f"KnowledgeConfig.{name}: {problem}")
            object.__setattr__(self, name, float(getattr(self, name)))


def grown(estimate: float, done: float, growth: float) -> float:
    """The growth rule: ``estimate x growth^k`` for the smallest ``k >= 0`` that exceeds ``done``
    (samples), by repeated multiplication (the same floats whatever was asked before)."""
    while estimate <= done:
        estimate *= growth
    return estimate


class Knowledge:
    """What a scheduler believes of a job's total work (samples). Subclasses give :meth:`initial`."""

    mode: str = "oracle"

    def __init__(self, jobs: Sequence[Job], growth: float) -> None:
        self.growth = growth
        # job index -> (E0 it was grown from, the grown estimate): grown() continued from the last
        # answer gives the same float as from E0, since the work done never decreases (but at a priced
        # preemption, lyra_gym.sim.overheads: the grown estimate, above the work done before, then stays)
        self._grown: dict[int, tuple[float, float]] = {}
        #: counts every change of state an answer depends on (a growth kept, a finished job heard):
        #: an answer for the same job and work done at the same version is the same float
        self.version = 0

    def initial(self, job: Job) -> float:
        """``E0``: the believed total work before any growth, samples."""
        raise NotImplementedError

    def total_work(self, job: Job, done: float) -> float:
        """The believed total work of ``job`` once ``done`` samples are done (> ``done``)."""
        start = self.initial(job)
        last = self._grown.get(job.index)
        estimate = last[1] if last is not None and last[0] == start else start
        if estimate <= done:
            estimate = grown(estimate, done, self.growth)
            self._grown[job.index] = (start, estimate)
            self.version += 1
        return estimate

    def remaining_work(self, job: Job, now: float) -> float:
        """Believed samples left at ``now``: the believed total less the work done
        (:meth:`~lyra_gym.model.jobs.Job.work_done_at`, the engine's, never through the true total)."""
        done = job.work_done_at(now)
        return self.total_work(job, done) - done

    def duration(self, job: Job, done: float) -> float:
        """The believed ``spec.duration`` (s at the requested size), capped at ``MAX_DURATION_S``:
        the believed total over the job's reference rate (samples/s at its requested size, a
        function of its model, size and batch: never of its true duration)."""
        return min(MAX_DURATION_S, self.total_work(job, done) / job.reference_rate)

    def finished(self, job: Job) -> None:  # only the history predictor listens
        """The engine's word that ``job`` finished now (completions come in time order)."""


class EstimateKnowledge(Knowledge):
    """Per-job lognormal estimates, drawn once (module docstring)."""

    mode = "estimate"

    def __init__(self, jobs: Sequence[Job], config: KnowledgeConfig, seed: np.random.SeedSequence) -> None:
        super().__init__(jobs, config.growth)
        draws = np.random.default_rng(seed).standard_normal(len(jobs))
        #: estimate / truth per job index (submit order)
        self.ratios: list[float] = (config.bias * np.exp(config.sigma * draws)).tolist()
        self._initial = [r * job.total_work for r, job in zip(self.ratios, jobs)]

    def initial(self, job: Job) -> float:
        return self._initial[job.index]


class HistoryKnowledge(Knowledge):
    """Mean duration of the finished jobs of the same (model, GPUs), with fallbacks (module docstring)."""

    mode = "history"

    def __init__(self, jobs: Sequence[Job], config: KnowledgeConfig) -> None:
        super().__init__(jobs, config.growth)
        self.prior_s = config.prior_s
        # key -> [sum of durations s, count]; keys (model, GPUs), (model,) and ()
        self._sums: dict[tuple, list[float]] = {}
        # job index -> its E0 since the last completion heard (E0 changes only with the sums)
        self._initial: dict[int, float] = {}

    def predicted_duration(self, model: str, num_gpus: int) -> float:
        """Seconds at the requested size predicted from the jobs finished so far."""
        sums = self._sums
        for key in ((model, num_gpus), (model,), ()):
            entry = sums.get(key)
            if entry is not None:
                return entry[0] / entry[1]
        return self.prior_s

    def initial(self, job: Job) -> float:
        """The predicted duration times the job's reference rate: the same float for every job of
        one (model, GPUs, batch) at one moment, whatever their true durations."""
        start = self._initial.get(job.index)
        if start is None:
            spec = job.spec
            start = self._initial[job.index] = self.predicted_duration(spec.model, spec.num_gpus) * job.reference_rate
        return start

    def finished(self, job: Job) -> None:
        spec = job.spec
        for key in ((spec.model, spec.num_gpus), (spec.model,), ()):
            entry = self._sums.setdefault(key, [0.0, 0])
            entry[0] += spec.duration
            entry[1] += 1
        self._initial.clear()
        self.version += 1


def build_knowledge(config: KnowledgeConfig, jobs: Sequence[Job],
                    seed: np.random.SeedSequence | None) -> Knowledge | None:
    """The estimator of a run (None under ``oracle``: the truth is read directly). ``seed``: the
    run's knowledge stream (``lyra_gym.run.simulate.build_engine`` spawns it from the run's seed);
    required by ``estimate``."""
    if config.mode == "oracle":
        return None
    if config.mode == "estimate":
        if seed is None:
            raise ConfigError("knowledge.mode: 'estimate' needs the run's knowledge seed (build the engine with "
                              "lyra_gym.run.simulate.build_engine, or pass Engine(knowledge_seed=...))")
        return EstimateKnowledge(jobs, config, seed)
    return HistoryKnowledge(jobs, config)

