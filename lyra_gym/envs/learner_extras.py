"""Opt-in observation extras for learners (issue 26 item 4): what a heuristic ignores.

:class:`LearnerExtras` appends, after an env's own observation (which stays bit for bit what it
was), two blocks computed from the engine at the decision point:

- per job slot (``K`` rows of :data:`SLOT_FEATURES`, in the env's slot order, zeros for empty
  slots): the duration history of the job's group, i.e. the jobs that *finished before now* with
  the same model and requested GPUs (falling back to the same model, then to every finished job,
  while a group has fewer than :data:`MIN_GROUP` completions): their mean duration, the share of
  them that ran longer than this job has run so far, and their mean remaining time beyond that
  point (``E[D - d | D > d]``, the quantity a size-based rule such as Gittins' index reads). ``d``
  is the job's work done in seconds at its requested size, visible under every knowledge mode.
- cluster (:data:`CLUSTER_EXTRAS`): completions so far, and the queue's composition: queued jobs
  and their requested GPUs by size class (:data:`SIZE_CLASSES`), jobs split elastic or not.

No look-ahead: a job counts in the history only once ``finish_time <= now`` (the engine's record
of a completion that happened); durations are the finished jobs' ``spec.duration`` (s at the
requested size), the statistic the ``history`` knowledge mode uses too
(:mod:`lyra_gym.model.knowledge`). Under ``oracle`` the heuristics see true remaining times
anyway; the extras are the same in every mode. Features are scaled into [0, 1] (logs of hours).

:class:`LearnerExtrasObservation` is the Gymnasium wrapper for training; a scheduler running a
trained model calls :meth:`LearnerExtras.extend` with the same view and slots, so both see the
same numbers.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lyra_gym.sim.view import ClusterView, JobView

__all__ = ["CLUSTER_EXTRAS", "LearnerExtras", "LearnerExtrasObservation", "MIN_GROUP", "SIZE_CLASSES",
           "SLOT_FEATURES", "extras_size", "reference_extras"]

SLOT_FEATURES = ("group_mean_duration", "group_survival", "group_mean_residual")
#: requested GPUs, upper bounds of the size classes (the last is open)
SIZE_CLASSES = (1, 4, 8)
CLUSTER_EXTRAS = (
    "finished_jobs",
    *(f"queued_{kind}_{size}" for kind in ("rigid", "elastic") for size in ("1", "2-4", "5-8", "9+")),
    *(f"queued_gpus_{size}" for size in ("1", "2-4", "5-8", "9+")),
)
#: completions a group needs before its own history is used (else the next coarser group)
MIN_GROUP = 3
_HOURS_CAP = math.log1p(14 * 24.0)  # log1p of 14 days in hours: the scale of duration features
_COUNT_CAP = math.log1p(1000.0)


def extras_size(k: int) -> int:
    """Entries :class:`LearnerExtras` appends for ``k`` job slots."""
    return k * len(SLOT_FEATURES) + len(CLUSTER_EXTRAS)


def _size_class(gpus: int) -> int:
    return bisect.bisect_left(SIZE_CLASSES, gpus)


def _hours(seconds: float) -> float:
    return min(1.0, math.log1p(max(0.0, seconds) / 3600.0) / _HOURS_CAP)


class _Group:
    """The finished durations of one group: sorted, with suffix sums once asked, and each
    ``done_s``'s features kept until the next duration (a queued job's ``done_s`` stays put)."""

    __slots__ = ("durations", "_suffix", "_seen")

    def __init__(self) -> None:
        self.durations: list[float] = []
        self._suffix: list[float] | None = None
        self._seen: dict[float, tuple[float, float, float]] = {}

    def add(self, duration: float) -> None:
        bisect.insort(self.durations, duration)
        self._suffix = None
        self._seen.clear()

    def features(self, done_s: float) -> tuple[float, float, float]:
        """(mean, share longer than ``done_s``, mean residual beyond ``done_s``), scaled."""
        seen = self._seen.get(done_s)
        if seen is not None:
            return seen
        durations = self.durations
        n = len(durations)
        if self._suffix is None:
            suffix = [0.0] * (n + 1)
            for i in range(n - 1, -1, -1):
                suffix[i] = suffix[i + 1] + durations[i]
            self._suffix = suffix
        first = bisect.bisect_right(durations, done_s)
        longer = n - first
        residual = (self._suffix[first] / longer - done_s) if longer else 0.0
        if len(self._seen) >= 4096:  # (a long run between completions: start again)
            self._seen.clear()
        seen = self._seen[done_s] = (_hours(self._suffix[0] / n), longer / n, _hours(residual))
        return seen


class LearnerExtras:
    """The extras of one run (module docstring); stateful: it reads each completion once.

    :param k: job slots of the env (its ``num_job_slots``).
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.size = extras_size(k)
        self._view: ClusterView | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the history (a new episode or run)."""
        self._view = None
        self._jobs: list[JobView] = []  # the run's jobs, by trace index (submit order)
        self._next = 0  # next job record (submit order) not yet seen submitted
        self._open: list[int] = []  # submitted, not yet seen finished
        self._groups: dict[tuple, _Group] = {}
        self._finished = 0
        self._resolved: dict[tuple[str, int], _Group | None] = {}  # _group's answers since the last completion
        self._last_now = -math.inf

    def _catch_up(self, view: ClusterView, now: float) -> None:
        """Read the completions up to ``now`` (jobs submitted by now, finished at or before now):
        the open jobs are walked only when the engine's count of finished jobs moved (a finished
        job's ``finish_time`` is the engine's clock then, never after ``now``)."""
        if view is not self._view or now < self._last_now:
            self.reset()
            self._view = view
            self._jobs = list(view.all_jobs())
        self._last_now = now
        jobs = self._jobs
        while self._next < len(jobs) and jobs[self._next].request.submit_time <= now:
            self._open.append(self._next)
            self._next += 1
        if view.num_finished == self._finished:
            return
        still = []
        for i in self._open:
            job = jobs[i]
            finish, duration = job.finish_time, job.completed_duration  # both None until it finishes
            if finish is not None and duration is not None and finish <= now:
                request = job.request
                for key in ((request.model, request.num_gpus), (request.model,), ()):
                    self._groups.setdefault(key, _Group()).add(duration)
                self._finished += 1
            else:
                still.append(i)
        self._open = still
        self._resolved.clear()

    def _group(self, job: JobView) -> _Group | None:
        """The finished jobs whose durations ``job``'s slot features read (module docstring), kept
        per (model, requested GPUs) until the next completion."""
        request = job.request
        key = (request.model, request.num_gpus)
        resolved = self._resolved
        if key in resolved:
            return resolved[key]
        group = None
        for k in (key, key[:1], ()):
            found = self._groups.get(k)
            if found is not None and (len(found.durations) >= MIN_GROUP or k == ()):
                group = found
                break
        resolved[key] = group
        return group

    def compute(self, view: ClusterView, slots: Sequence[JobView]) -> np.ndarray:
        """The extras at ``view`` for the env's job ``slots`` (at most ``k``), float32."""
        self._catch_up(view, view.now)
        out = np.zeros(self.size, dtype=np.float32)
        width = len(SLOT_FEATURES)
        rows: list[float] = []
        for job in slots[: self.k]:
            group = self._group(job)
            if group is None:
                rows += (0.0, 0.0, 0.0)
                continue
            total = job.total_work
            done_s = (total - job.remaining_work) / total * job.spec.duration if total > 0 else 0.0
            rows += group.features(done_s)
        out[:len(rows)] = rows
        base = self.k * width
        out[base] = math.log1p(self._finished) / _COUNT_CAP
        counts = np.zeros(8)
        gpus = np.zeros(4)
        for job in view.queued_jobs():
            request = job.request
            size = _size_class(request.num_gpus)
            counts[4 * int(bool(request.elastic)) + size] += 1
            gpus[size] += request.num_gpus
        out[base + 1:base + 9] = np.log1p(counts) / _COUNT_CAP
        out[base + 9:base + 13] = np.log1p(gpus) / math.log1p(10_000.0)
        np.clip(out, 0.0, 1.0, out=out)
        return out

    def extend(self, obs: np.ndarray, view: ClusterView, slots: Sequence[JobView]) -> np.ndarray:
        """``obs`` with the extras appended (a new float32 array)."""
        return np.concatenate([obs, self.compute(view, slots)]).astype(np.float32, copy=False)


def reference_extras(view: ClusterView, slots: Sequence[JobView], k: int) -> np.ndarray:
    """:meth:`LearnerExtras.compute` from scratch, the plain reading of the module docstring (no
    state, no caches): the same float32 array (tests compare the two along whole episodes). Sums
    run from the longest duration down, as the fast path's suffix sums do."""
    now = view.now
    finished = [(job.request, duration) for job in view.all_jobs()  # (request, true duration s)
                if job.finish_time is not None and job.finish_time <= now
                and (duration := job.completed_duration) is not None]

    def durations(match) -> list[float]:
        return sorted(duration for request, duration in finished if match(request))

    out = np.zeros(extras_size(k), dtype=np.float32)
    width = len(SLOT_FEATURES)
    for row, job in enumerate(slots[:k]):
        model, gpus = job.request.model, job.request.num_gpus
        history = durations(lambda r: r.model == model and r.num_gpus == gpus)
        if len(history) < MIN_GROUP:
            history = durations(lambda r: r.model == model)
        if len(history) < MIN_GROUP:
            history = durations(lambda r: True)
        if not history:
            continue
        total = job.total_work
        done_s = (total - job.remaining_work) / total * job.spec.duration if total > 0 else 0.0
        longer = [d for d in history if d > done_s]
        mean = sum(reversed(history), 0.0) / len(history)
        residual = sum(reversed(longer), 0.0) / len(longer) - done_s if longer else 0.0
        out[row * width:(row + 1) * width] = (_hours(mean), len(longer) / len(history), _hours(residual))
    base = k * width
    out[base] = math.log1p(len(finished)) / _COUNT_CAP
    counts, gpus_queued = np.zeros(8), np.zeros(4)
    for job in view.queued_jobs():
        size = _size_class(job.request.num_gpus)
        counts[4 * int(bool(job.request.elastic)) + size] += 1
        gpus_queued[size] += job.request.num_gpus
    out[base + 1:base + 9] = np.log1p(counts) / _COUNT_CAP
    out[base + 9:base + 13] = np.log1p(gpus_queued) / math.log1p(10_000.0)
    return np.clip(out, 0.0, 1.0)


class LearnerExtrasObservation(gym.ObservationWrapper):
    """A LyraGym env's observation with :class:`LearnerExtras` appended. The slots are the env's
    own: ``decision.slots`` on ``LyraGym/Alloc-v1``, ``slots`` on the guided envs; an episode
    that is over gets zeros."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.extras = LearnerExtras(int(base.k))  # type: ignore[attr-defined]
        inner = env.observation_space
        assert isinstance(inner, spaces.Box)
        size = int(inner.shape[0]) + self.extras.size
        self.observation_space = spaces.Box(-1.0, 1.0, (size,), dtype=np.float32)

    def reset(self, **kwargs: Any) -> Any:
        self.extras.reset()
        return super().reset(**kwargs)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        base: Any = self.env.unwrapped
        episode = getattr(base, "episode", None)
        decision = getattr(base, "decision", None)
        slots = decision.slots if decision is not None else getattr(base, "slots", None)
        if episode is None or episode.done or slots is None:
            return np.concatenate([observation, np.zeros(self.extras.size, dtype=np.float32)])
        return self.extras.extend(observation, episode.engine.view, slots)
