"""Lyra's rates and times, cached across decisions: a job's rate on k workers of a GPU type, its
time there, its remaining time for the shortest-first line, and the knapsack's value rows.

Rates follow ``value_rate`` (``baselines/lyra.py``, "Rate model"): ``"goodput"`` is the rate the
engine charges (``ClusterView.goodput``), ``"throughput"`` the profile's samples/s.

Goodputs are kept by the progress part they are computed at: the job's true part
(``JobView.progress_part``, visible under every knowledge mode), never the part of a knowledge
mode's believed work (:class:`~lyra_gym.sim.view.KnownJobView`), which would hand one job another
job's rate. Under oracle (plain views) the part is computed from the work already read: the same.
"""

from __future__ import annotations

import copy
import math
import weakref
from typing import Callable, Iterable

import numpy as np

from lyra_gym.model.profiles import ProfileSet
from lyra_gym.model.scaling import progress_bin
from lyra_gym.sim.view import ClusterView, JobView, KnownJobView

QUEUED_CACHE_SIZE = 50_000  # queued jobs whose time-on answers time_on keeps (then starts afresh)
REFERENCE_CACHE_SIZE = 200_000  # (job, workers, progress part) reference rates remaining_at keeps (then afresh)
SHARED_ENTRIES = 100_000  # most rate, goodput and value rows kept for one profile set and settings (then afresh)
SHARED_SETTINGS = 16  # most settings whose rows are kept per profile set (all dropped beyond)

#: profile set -> {settings: {"packed" | "goodputs" | "rows": rows}}: Lyra's pure caches, shared by
#: every run on one profile set object (:meth:`LyraRates.settle`); weakly keyed, so gone with it
SHARED: weakref.WeakKeyDictionary[ProfileSet, dict[tuple, dict[str, dict]]] = weakref.WeakKeyDictionary()


def shared_caches(profiles: ProfileSet, settings: tuple) -> dict[str, dict]:
    """The dict of Lyra's pure caches for runs on ``profiles`` with ``settings`` (the same dict for
    every equal ``settings``; at most :data:`SHARED_SETTINGS` per profile set, all dropped beyond)."""
    by_settings = SHARED.get(profiles)
    if by_settings is None:
        by_settings = SHARED[profiles] = {}
    found = by_settings.get(settings)
    if found is None:
        if len(by_settings) >= SHARED_SETTINGS:
            by_settings.clear()
        found = by_settings[settings] = {}
    return found


class LyraRates:
    """Rates and times by ``value_rate`` (``"goodput"`` or ``"throughput"``), cached: per run, and the
    pure ones shared by the runs on one profile set (:meth:`settle`, :data:`SHARED`)."""

    def __init__(self, value_rate: str) -> None:
        self.value_rate = value_rate
        self.per_server: dict[str, int] = {}  # GPU type -> GPUs per server (ClusterFacts fills it)
        # job id -> (preemptions, or (preemptions, believed remaining work) under a knowledge mode; est. remaining s)
        self._sjf_keys: dict[str, tuple[int | tuple[int, float], float]] = {}
        self._rates: dict[tuple[str, str, int], np.ndarray] = {}
        self._goodputs: dict[tuple, tuple[np.ndarray, int]] = {}  # (rates, least w computed): see job_rates
        self._rows: dict[tuple, tuple] = {}  # value-row rates, gains (value_row): lists, or arrays with a rate of 0
        self._queued_times: dict[str, tuple[float, dict[tuple[int, str], float]]] = {}  # see time_on
        self._fixed_batch: bool | None = None  # the batch at w workers is fixed (not "adaptive"): see job_rates
        self._reference: tuple[str, int] | tuple[()] | None = None  # (GPU type, per server); () under "adaptive"
        self._reference_rates: dict[tuple[str, int, int], float] = {}  # see remaining_at
        # job id -> (workers, total work, least and most remaining work, reference rate, progress
        # part): remaining work in [least, most] is in that part (running_line)
        self._part_spans: dict[str, tuple[int, float, float, float, float, int]] = {}
        # the key of _rates, _goodputs and _rows in SHARED besides the profile set (the scaling settings,
        # GPUs per server, value_rate), recorded by settle at the first decision; () where they are not
        # pure functions of their keys and those settings (this run's own); None before settle
        self._token: tuple | None = None

    def __deepcopy__(self, memo: dict) -> LyraRates:
        """A copy (an env's fork) that shares the caches :meth:`settle` took from :data:`SHARED`
        (pure functions of their keys and the settings: entries are only ever added, never
        changed, so sharing them changes no answer and spares copying thousands of rows per fork).
        Everything else is copied."""
        clone = object.__new__(LyraRates)
        memo[id(self)] = clone
        shared = ("_rates", "_goodputs", "_rows") if self._token else ()
        for name, value in self.__dict__.items():
            clone.__dict__[name] = value if name in shared else copy.deepcopy(value, memo)
        return clone

    @property
    def settled(self) -> bool:
        """Has :meth:`settle` run (the run's first decision)?"""
        return self._token is not None

    @property
    def pure_caches(self) -> dict[str, dict]:
        """The caches that are pure functions of their keys and the settings (name -> cache): in
        :data:`SHARED` after :meth:`settle` where :attr:`shared`, else this run's own."""
        return {"packed": self._rates, "goodputs": self._goodputs, "rows": self._rows}

    @property
    def shared(self) -> bool:
        """Are :attr:`pure_caches` shared with the runs on the same profile set and settings?"""
        return bool(self._token)

    @property
    def job_caches(self) -> dict[str, dict]:
        """The caches by job id (name -> cache): this run's own, never shared (a job id's remaining
        work differs between runs)."""
        return {"sjf_keys": self._sjf_keys, "queued_times": self._queued_times,
                "reference_rates": self._reference_rates, "part_spans": self._part_spans}

    def settle(self, view: ClusterView) -> None:
        """Choose where the packed rates, goodput rows and value rows are kept (``LyraMemory.start``
        calls it at the run's first decision, once ``per_server`` is known, before any rate is
        cached): where they are pure functions of their keys, the profiles, the scaling settings,
        the GPUs per server and ``value_rate``, in :data:`SHARED` under the profile set and those
        settings (:func:`shared_caches`), shared by every run on the same profile set object with
        the same settings (an env's next episodes; simulations handed one
        ``profiles``, as the benchmark's and a sweep's are); else (a
        knowledge mode, the adaptive rule: ``view.rate_settings`` None) this run's own."""
        settings = view.rate_settings
        if settings is None:
            self._token = ()
            return
        profiles, scaling = settings
        self._token = (scaling, tuple(sorted(self.per_server.items())), self.value_rate)
        kept = shared_caches(profiles, self._token)
        if sum(map(len, kept.values())) > SHARED_ENTRIES:
            kept.clear()  # rows of runs long gone: afresh
        self._rates = kept.setdefault("packed", {})
        self._goodputs = kept.setdefault("goodputs", {})
        self._rows = kept.setdefault("rows", {})

    def remaining_estimate(self, view: ClusterView, job: JobView) -> float:
        """Seconds a queued job has left at its requested size on the reference GPU (cached: its
        remaining work only changes by running, so the key is the preemption count; under a
        knowledge mode also its believed remaining work, which ``history`` moves as jobs finish)."""
        cached = self._sjf_keys.get(job.id)
        stamp = job.preemptions if type(job) is not KnownJobView else (job.preemptions, job.remaining_work)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        estimate = self.remaining_at(view, job, job.spec.num_gpus)
        self._sjf_keys[job.id] = (stamp, estimate)
        return estimate

    def queued_line(self, view: ClusterView, jobs: Iterable[JobView]) -> list[tuple[float, int, JobView]]:
        """(``remaining_estimate``, index, job) of each of ``jobs`` (queued): the kept estimates read
        in one pass, the others asked as before."""
        kept, estimate, line = self._sjf_keys.get, self.remaining_estimate, []
        for job in jobs:
            cached = kept(job.id)
            if cached is None or cached[0] != job.preemptions:  # (a believed view's stamp, a tuple, never equals it)
                line.append((estimate(view, job), job.index, job))
            else:
                line.append((cached[1], job.index, job))
        return line

    def remaining_at(self, view: ClusterView, job: JobView, workers: int) -> float:
        """Seconds left on ``workers`` reference GPUs packed, by ``value_rate``."""
        if self.value_rate == "goodput":
            reference = self._reference
            if reference is None:
                reference = self._reference = view.reference_server() if view.scaling != "adaptive" else ()
            if not reference or workers < 1:  # the adaptive rule's batch changes as the job runs
                return job.remaining_time_at(workers)
            # job.remaining_time_at(workers) with the rate kept per job, size and progress part
            # (the rate is a function of them but for the adaptive rule's batch)
            remaining = job.remaining_work
            key = (job.id, workers, job.progress_part_at(remaining))
            rate = self._reference_rates.get(key)
            if rate is None:
                if len(self._reference_rates) > REFERENCE_CACHE_SIZE:
                    self._reference_rates.clear()
                rate = self._reference_rates[key] = view.goodput(job, workers, *reference)
            return remaining / rate
        return job.remaining_work / view.reference_throughput(job.spec.model, workers)

    def running_line(self, view: ClusterView, jobs: Iterable[JobView]) -> list[tuple[float, int, JobView]]:
        """(``remaining_at`` at the requested size, index, job) of each of ``jobs``: the same
        values in one pass (no call per job), for the running jobs of the admission line."""
        if self.value_rate != "goodput":
            return [(self.remaining_at(view, j, j.spec.num_gpus), j.index, j) for j in jobs]
        reference = self._reference
        if reference is None:
            reference = self._reference = view.reference_server() if view.scaling != "adaptive" else ()
        if not reference:
            return [(j.remaining_time_at(j.spec.num_gpus), j.index, j) for j in jobs]
        cached, spans, line = self._reference_rates, self._part_spans, []
        if len(spans) > REFERENCE_CACHE_SIZE:
            spans.clear()
        for job in jobs:
            workers = job.spec.num_gpus
            if workers < 1:
                line.append((job.remaining_time_at(workers), job.index, job))
                continue
            if type(job) is KnownJobView:  # spans prove the believed part, not the rate's: none
                line.append((self.remaining_at(view, job, workers), job.index, job))
                continue
            remaining, total = job.remaining_work, job.total_work  # as remaining_at, inlined
            span = spans.get(job.id)
            if span is not None and span[2] <= remaining <= span[3] and span[1] == total and span[0] == workers:
                line.append((remaining / span[4], job.index, job))  # in the same progress part
                continue
            part = progress_bin(total - remaining, total)
            key = (job.id, workers, part)
            rate = cached.get(key)
            if rate is None:
                if len(cached) > REFERENCE_CACHE_SIZE:
                    cached.clear()
                rate = cached[key] = view.goodput(job, workers, *reference)
            if span is not None and span[5] == part and span[1] == total and span[0] == workers:
                # the part held over two decisions: from now on know all of it (found once)
                low = part_floor(total, part, remaining)
                spans[job.id] = (workers, total, low, max(span[3], remaining), rate, part)
            else:
                spans[job.id] = (workers, total, remaining, remaining, rate, part)
            line.append((remaining / rate, job.index, job))
        return line

    def packed_rates(self, view: ClusterView, model: str, gpu_type: str, per_server: int, top: int) -> np.ndarray:
        """Samples/s of 0..top workers packed on ``gpu_type`` servers (index = workers; cached)."""
        key = (model, gpu_type, per_server)
        rates = self._rates.get(key)
        if rates is None or len(rates) <= top:
            size = max(top + 1, 2 * len(rates) if rates is not None else 65)
            rates = np.array([0.0] + [view.profiles.packed_throughput(model, w, gpu_type, per_server)
                                      for w in range(1, size)])
            self._rates[key] = rates
        return rates

    def job_rates(self, view: ClusterView, job: JobView, gpu_type: str, top: int, low: int = 1) -> np.ndarray:
        """The job's rate on 0..top workers packed on ``gpu_type`` servers by ``value_rate``: goodput
        (cached per model, initial batch, requested size and progress part) or samples/s. Goodputs
        of fewer than ``low`` workers (but 0) may be nan until asked for: the value rows read
        min_gpus workers and up, so a new progress part asks only for those."""
        per_server = self.per_server[gpu_type]
        if self.value_rate == "throughput":
            return self.packed_rates(view, job.spec.model, gpu_type, per_server, top)
        spec = job.spec
        part = job.progress_part
        key = (spec.model, job.init_batch, spec.num_gpus, part, gpu_type, per_server)
        kept = self._goodputs.get(key)
        if kept is not None and len(kept[0]) > top and kept[1] <= low:
            return kept[0]
        if self._fixed_batch is None:
            self._fixed_batch = view.scaling != "adaptive"
        if self._fixed_batch:  # each rate a function of the key and w: compute only the new ones
            self._goodputs[key] = kept = _grown(kept, top, max(low, 1), lambda first, end: view.goodputs(
                job, first, end, gpu_type, per_server))
            return kept[0]
        # the adaptive rule's batch moves as the job runs: every rate from now, as always
        rates = kept[0] if kept is not None else None
        size = max(top + 1, 2 * len(rates) if rates is not None else 9)
        rates = np.array([0.0] + view.goodputs(job, 1, size, gpu_type, per_server))
        self._goodputs[key] = (rates, 1)
        return rates

    def time_on(self, view: ClusterView, job: JobView, workers: int, gpu_type: str) -> float:
        """Seconds ``job`` needs on ``workers`` packed GPUs of ``gpu_type`` (no overhead). A queued
        job's answers are kept while its remaining work stays the same (a pure function of it)."""
        remaining = job.remaining_work
        if job.workers:
            rate = self.job_rates(view, job, gpu_type, workers, workers)[workers]
            return remaining / rate if rate > 0 else math.inf
        cache = self._queued_times
        entry = cache.get(job.id)
        if entry is None or entry[0] != remaining:
            if len(cache) > QUEUED_CACHE_SIZE:
                cache.clear()  # entries of jobs that started or finished long ago
            entry = cache[job.id] = (remaining, {})
        times = entry[1]
        key = (workers, gpu_type)
        seconds = times.get(key)
        if seconds is None:
            rate = self.job_rates(view, job, gpu_type, workers, workers)[workers]
            seconds = times[key] = remaining / rate if rate > 0 else math.inf
        return seconds

    def _row_rates(self, view: ClusterView, job: JobView, gpu_type: str, top: int,
                   remaining: float) -> tuple:
        """(rates r_0..r_top on min_gpus + k workers, gains r_k / r_0 - 1) for :meth:`value_row`:
        Python lists, or arrays where a rate is 0 (numpy's inf and nan then, as before)."""
        spec = job.spec
        key: tuple
        # cached by everything job_rates depends on: the model alone under value_rate="throughput";
        # under "goodput" also the job's initial batch, requested size and progress part (its key)
        if self.value_rate == "throughput":
            key = (spec.model, gpu_type, spec.min_gpus, top)
        else:
            key = (spec.model, job.init_batch, spec.num_gpus, job.progress_part_at(remaining), gpu_type,
                   spec.min_gpus, top)
        cached = self._rows.get(key)
        if cached is None:
            rates = self.job_rates(view, job, gpu_type, spec.min_gpus + top, spec.min_gpus)
            rates = rates[spec.min_gpus: spec.min_gpus + top + 1]
            gain = rates / rates[0] - 1.0
            if (rates > 0).all():  # as Python floats: the same doubles, faster for short rows
                cached = self._rows[key] = (rates.tolist(), gain.tolist())
            else:
                cached = self._rows[key] = (rates, gain)
        return cached

    def value_row(self, view: ClusterView, job: JobView, gpu_type: str, top: int, horizon: float) -> list[float]:
        """Value in seconds of the job's JCT of k = 0..top extra workers of ``gpu_type``: held for
        h = min(horizon, T(k)) they save h * (r_k / r_0 - 1); extras taken back before the job
        finishes (h < T(k)) cost a rescale then. (A running job's rescale now is charged by the caller.)"""
        remaining = job.remaining_work
        rates, gain = self._row_rates(view, job, gpu_type, top, remaining)
        if type(rates) is not list:  # a rate of 0: numpy's inf and nan, as before
            times = remaining / rates
            if math.isinf(horizon):
                return times[0] - times
            held = np.minimum(horizon, times)
            row = held * gain
            row[1:] -= np.where(held[1:] < times[1:], view.overheads.rescale_s, 0.0)
            return list(row)
        if math.isinf(horizon):
            first = remaining / rates[0]
            return [first - remaining / r for r in rates]
        rescale = view.overheads.rescale_s
        # h = min(horizon, T(k)) (np.minimum: T is never nan here, rates > 0); h < T(k) iff horizon < T(k)
        row = [horizon * g - rescale if horizon < (t := remaining / r) else t * g for r, g in zip(rates, gain)]
        first = remaining / rates[0]
        row[0] = (horizon if horizon < first else first) * gain[0]  # k = 0: no extras to take back
        return row

    def charged_row(self, view: ClusterView, job: JobView, gpu_type: str, top: int, horizon: float,
                    current: int) -> list[float]:
        """:meth:`value_row` of a running job less ``rescale_s`` now for every k but ``current`` (its
        extra workers now; the change costs a rescale): ``v - rescale`` of each value, the same
        doubles, in one pass where the rates are positive and the horizon finite."""
        remaining = job.remaining_work
        rates, gain = self._row_rates(view, job, gpu_type, top, remaining)
        rescale = view.overheads.rescale_s
        if type(rates) is not list or math.isinf(horizon):
            row = self.value_row(view, job, gpu_type, top, horizon)
            same = row[current] if current <= top else None
            row = [v - rescale for v in row]
            if same is not None:
                row[current] = same
            return row
        row = [(horizon * g - rescale if horizon < (t := remaining / r) else t * g) - rescale
               for r, g in zip(rates, gain)]
        first = remaining / rates[0]
        row[0] = (horizon if horizon < first else first) * gain[0] - rescale
        if current <= top:  # staying as it is costs nothing now: value_row's value there
            t = remaining / rates[current]
            held = horizon if horizon < t else t
            row[current] = held * gain[current] - rescale if current and horizon < t else held * gain[current]
        return row


def _grown(kept: tuple[np.ndarray, int] | None, top: int, low: int,
           goodputs: Callable[[int, int], list[float]]) -> tuple[np.ndarray, int]:
    """A kept goodput row (rates by workers, the least w computed) that holds w = low..top: longer
    by the new w's (to twice its length at least, as before), and down to ``low`` (``low`` >= 1).
    ``goodputs(first, end)``: the rates of w = first .. end - 1. Entries not computed are nan; 0
    workers is 0.0."""
    if kept is None:
        rates = np.full(top + 1, np.nan)
        rates[0] = 0.0
        rates[low:] = goodputs(low, top + 1)
        return rates, low
    rates, first = kept
    have = len(rates)
    if have <= top:
        size = max(top + 1, 2 * have)
        grown = np.empty(size)
        grown[:have] = rates
        grown[have:] = goodputs(have, size)
        rates = grown
    if low < first:
        if rates is kept[0]:
            rates = rates.copy()  # (a value row may hold a view of the kept array)
        rates[low:first] = goodputs(low, first)
        first = low
    return rates, first


def part_floor(total: float, part: int, remaining: float) -> float:
    """The least remaining work (samples, >= 0) whose progress part of ``total`` is ``part``, given
    that ``remaining`` is in it: the part falls as remaining work grows (``progress_bin`` of
    ``total - remaining`` is monotone), so it is found by bisection over the doubles."""
    if progress_bin(total, total) == part:  # no work left is in it
        return 0.0
    low, high = 0.0, remaining  # low is in a later part, high in this one
    while True:
        mid = (low + high) / 2
        if mid <= low or mid >= high:
            return high
        if progress_bin(total - mid, total) == part:
            high = mid
        else:
            low = mid
