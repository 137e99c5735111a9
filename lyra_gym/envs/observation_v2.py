"""Version 2 of the observation (issue 38 item 1): what the best heuristics rank by and what
the return depends on, appended to version 1's features (which stay bit for bit what they were).

Per job slot, after :data:`~lyra_gym.envs.observation.JOB_FEATURES` (:data:`V2_JOB_FEATURES`):

- ``attained_service``: GPU-seconds held so far / :data:`ATTAINED_SCALE_S` (10 GPU-hours),
  clipped at 1; linear where Tiresias' default thresholds sit (3,250 and 7,200 GPU-s: 0.09,
  0.2), beside version 1's ``attained`` (log scale, for the long jobs).
- ``statistical_efficiency``: the statistical efficiency of the batch the job runs now, the
  factor the engine charges (Pollux's ``E``; 1 where none is charged, and while queued).
- ``speedup``: ``log2(1 + rate / r0) / 4``, ``r0`` the job's rate at its requested size on
  the reference GPU at its initial batch (what its work was counted with): Pollux's speed-up,
  placement, GPU type and statistical efficiency included; 1x is 0.25, 3x 0.5, 15x 1 (0 while
  queued).
- ``preemptions``: times the job was preempted so far / :data:`PREEMPTIONS_CAP` (8), clipped.
- ``preempt_cost``: log-time of what a preemption now would cost the job: the restart
  overhead it pays when started again (``overheads.restart_s``, else its model's profile
  ``restart_overhead_s``) plus the run time since its last checkpoint that it would lose
  (``overheads.checkpoint_interval_s``; :mod:`lyra_gym.sim.overheads`); 0 while queued.

Cluster, after :data:`~lyra_gym.envs.observation.CLUSTER_FEATURES` (:data:`V2_CLUSTER_FEATURES`):

- ``window_elapsed``: (now - the window's start) / its length, clipped to [0, 1]: arrivals stop
  at 1. 0 with no window (a run over a whole trace).
- ``arrivals_left``: ``log1p(jobs not yet submitted) / 6`` (the scale of ``queued_jobs``).
- ``arrivals_left_share``: jobs not yet submitted / the window's jobs (submitted at or after its
  start; warm-up jobs not counted); with no window, / the run's jobs.

"Not yet submitted": the run's jobs with a submit time after now (a job arriving now is in the
queue already). Everything is read from the job views and the engine's own job records, as the
version 1 rows are (no look-ahead beyond the submit times the engine already holds), through the
public view only.
"""

from __future__ import annotations

import bisect
import math
from typing import Protocol, Sequence

from lyra_gym.model.jobs import JobState
from lyra_gym.sim.snapshots import JobSnapshot
from lyra_gym.sim.view import ClusterView, JobView

V2_JOB_FEATURES = (
    "attained_service",        # attained GPU-s / 36,000, clipped
    "statistical_efficiency",  # E of the batch run now (1 queued or none charged)
    "speedup",                 # log2(1 + rate / rate at requested size, reference GPU, B0) / 4 (0 queued)
    "preemptions",             # preemptions so far / 8, clipped
    "preempt_cost",            # log-time: restart overhead + run time since the last checkpoint (0 queued)
)
V2_CLUSTER_FEATURES = (
    "window_elapsed",          # (now - window start) / window length, 0-1
    "arrivals_left",           # log1p(jobs not yet submitted) / 6
    "arrivals_left_share",     # jobs not yet submitted / the window's jobs
)
#: GPU-seconds at which ``attained_service`` reaches 1 (10 GPU-hours)
ATTAINED_SCALE_S = 36_000.0
#: preemptions at which ``preemptions`` reaches 1
PREEMPTIONS_CAP = 8


class WindowLike(Protocol):
    """What the cluster features read of an episode's window (:class:`lyra_gym.envs.windows.Window`)."""

    @property
    def start_s(self) -> float: ...

    @property
    def length_s(self) -> float: ...


def _log_time(seconds: float) -> float:
    return math.log1p(max(seconds, 0.0) / 60.0) / 10.0


def restart_overhead_s(view: ClusterView, model: str) -> float:
    """Seconds of restart overhead a job of ``model`` pays when started again after a preemption."""
    restart = view.overheads.restart_s
    return restart if restart is not None else view.profiles.model(model).restart_overhead_s


def job_features(view: ClusterView, job: JobView, snapshot: JobSnapshot, model: str,
                 restart_s: dict[str, float] | None = None) -> tuple[float, ...]:
    """:data:`V2_JOB_FEATURES` of ``job`` now (unclipped: the builder clips); ``snapshot``: its
    ``job.snapshot()``; ``model``: its ``spec.model``; ``restart_s``: :func:`restart_overhead_s`
    by model, kept by the caller (filled here)."""
    state, _, workers, rate, _, _, attained, _ = snapshot
    service = attained / ATTAINED_SCALE_S
    preemptions = job.preemptions
    preempted = (preemptions if preemptions < PREEMPTIONS_CAP else PREEMPTIONS_CAP) / PREEMPTIONS_CAP
    if state is not JobState.RUNNING or not workers:
        return service, 1.0, 0.0, preempted, 0.0
    speedup = math.log2(1.0 + rate / job.reference_rate) / 4.0
    restart = restart_s.get(model) if restart_s is not None else None
    if restart is None:
        restart = restart_overhead_s(view, model)
        if restart_s is not None:
            restart_s[model] = restart
    return service, job.statistical_efficiency, speedup, preempted, _log_time(restart + job.lost_run_s)


def cluster_features(submits: list[float], now: float, window: WindowLike | None) -> tuple[float, float, float]:
    """:data:`V2_CLUSTER_FEATURES` at ``now``; ``submits``: the submit times of the run's jobs,
    ascending (``EngineConstants.submit_times``)."""
    left = len(submits) - bisect.bisect_right(submits, now)
    if window is None:
        return 0.0, math.log1p(left) / 6.0, left / len(submits) if submits else 0.0
    elapsed = (now - window.start_s) / window.length_s
    in_window = len(submits) - bisect.bisect_left(submits, window.start_s)
    return (min(1.0, max(0.0, elapsed)), math.log1p(left) / 6.0, left / in_window if in_window else 0.0)


def splice_job_rows(values: list[float], view: ClusterView, jobs: list[JobView], snapshots: list[JobSnapshot],
                    models: Sequence[str], width: int, pad: tuple[float, ...]) -> list[float]:
    """``values`` (``len(jobs)`` version 1 rows of ``width`` entries) with each row's
    :data:`V2_JOB_FEATURES` and then ``pad`` (an environment's own features, 0) appended;
    ``snapshots``: ``view.snapshots(jobs)``; ``models``: ``spec.model`` by job index."""
    out: list[float] = []
    restart_s: dict[str, float] = {}
    for row, (job, snapshot) in enumerate(zip(jobs, snapshots)):
        out += values[row * width:(row + 1) * width]
        out += job_features(view, job, snapshot, models[job.index], restart_s)
        if pad:
            out += pad
    return out


__all__ = ["ATTAINED_SCALE_S", "PREEMPTIONS_CAP", "V2_CLUSTER_FEATURES", "V2_JOB_FEATURES", "WindowLike",
           "cluster_features", "job_features", "restart_overhead_s",
           "splice_job_rows"]
