"""Which overhead a change of a job's allocation costs, and the migrations it counts.

Modelling choices (DESIGN.md "Model contract"):

- An overhead (start/restart, rescale) is time in which the job holds its GPUs and makes no
  progress; its end is folded into the completion time rather than being a decision point. A
  running job changed while inside an overhead (e.g. rescaled during its restart) stays stalled
  until max(old end, now + new overhead): a later change never shortens an overhead already paid
  for. A job stopped and started again pays a fresh start overhead.
- Suspend/resume (``Plan.suspend``): a suspended job's state waits in the host memory of the
  servers it ran on. Started again on exactly those servers (the same set of server ids) it pays
  ``overheads.resume_s``; on any other set its state must be copied over first, so it pays
  ``overheads.migrate_s`` and counts one migration. A job stopped without ``suspend``
  (preempted) pays the restart overhead wherever it starts again.
- Periodic checkpoints (``overheads.checkpoint_interval_s``, per model ``checkpoint_by_model``;
  ``docs/model.md`` "Preemption cost"): a job with interval I > 0 writes a checkpoint after every I
  seconds of *run time* (time making progress: not in an overhead) counted from the checkpoint
  clock's origin. The clock restarts (a checkpoint of the work done then) at every start or
  restart, resume, rescale and migration: those are checkpoint-restarts in the modelled frameworks
  (AdaptDL's rescale, whose 30 s ``rescale_s`` stands for it) or, for a resume, a state kept
  whole in host memory. A job stopped without ``suspend`` (preempted, or stopped by a reclaim)
  loses the work since its last checkpoint: ``work_done`` goes back to it, and the lost run time
  (s and GPU-s) is counted in ``Job.lost_run_s`` / ``Job.lost_gpu_s``. A job that keeps running
  (a scale-in, a move) loses nothing; a suspended one loses nothing. I = 0: no work is lost
  (the Pollux artifact's free preemption).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from lyra_gym.errors import ConfigError
from lyra_gym.model.config import OverheadConfig
from lyra_gym.model.jobs import Job
from lyra_gym.model.profiles import ProfileSet


class OverheadModel:
    """The overheads (s) of ``config`` (a restart overhead of None: each model's profile's),
    where the suspended jobs' states are, and the counters it bumps in ``counts``."""

    def __init__(self, config: OverheadConfig, profiles: ProfileSet, counts: dict[str, int]) -> None:
        self.config = config
        self.profiles = profiles
        self.counts = counts
        self.suspended_on: dict[int, frozenset[int]] = {}  # suspended job index -> the server ids it left
        self._restart_s: dict[str, float] = {}  # model -> its profile's restart overhead

    def set_checkpoints(self, jobs: Sequence[Job]) -> None:
        """Give every job its model's checkpoint interval; a ``checkpoint_by_model`` entry for a
        model the profile lacks is a :class:`ConfigError` (a typo would silently do nothing)."""
        config = self.config
        for i, entry in enumerate(config.checkpoint_by_model):
            if entry.model not in self.profiles.models:
                raise ConfigError(f"overheads.checkpoint_by_model[{i}].model: unknown model {entry.model!r} "
                                  f"(the profile has {', '.join(sorted(self.profiles.models))})")
        if not config.checkpoint_interval_s and not config.checkpoint_by_model:
            return
        for job in jobs:
            job.checkpoint_s = config.checkpoint_interval(job.spec.model)

    @staticmethod
    def restart_clock(job: Job) -> None:
        """``job`` (re)starts, resumes, is rescaled or moved: its work done now is checkpointed."""
        job.run_s = 0.0
        job.checkpoint_work = job.work_done

    @staticmethod
    def roll_back(job: Job) -> None:
        """``job`` (advanced to now, still holding its workers' count) is preempted: back to its
        last checkpoint; the lost run time is counted."""
        interval = job.checkpoint_s
        if not interval:
            return
        run = job.run_s
        lost_s = run - math.floor(run / interval) * interval
        if job.checkpoint_work < job.work_done:
            job.lost_work += job.work_done - job.checkpoint_work
            job.work_done = job.checkpoint_work
        job.lost_run_s += lost_s
        job.lost_gpu_s += job.workers * lost_s
        job.run_s = 0.0

    def suspend(self, job: Job, allocation: Mapping[int, int]) -> None:
        """``job`` is suspended: its state waits on the servers of ``allocation``."""
        self.suspended_on[job.index] = frozenset(allocation)

    def rescale(self, job: Job, workers: int, old_workers: int) -> float:
        """Changing running ``job`` from ``old_workers`` to ``workers``: a scale-out, a scale-in,
        or (same count) a migration."""
        counts = self.counts
        if workers > old_workers:
            job.scale_outs += 1
            counts["scale_outs"] += 1
        elif workers < old_workers:
            job.scale_ins += 1
            counts["scale_ins"] += 1
        else:
            job.migrations += 1
            counts["migrations"] += 1
            return self.config.migrate_s
        return self.config.rescale_s

    def start(self, job: Job, allocation: Mapping[int, int]) -> float:
        """Starting queued ``job`` on ``allocation``: a resume where its suspended state is, a
        migration elsewhere, the restart overhead after a preemption or at its first start."""
        config = self.config
        if job.suspended:  # resumed from host memory: cheap only where the state is
            job.suspended = False
            if self.suspended_on.pop(job.index) == frozenset(allocation):
                return config.resume_s
            job.migrations += 1
            self.counts["migrations"] += 1
            return config.migrate_s
        if config.restart_s is not None:
            return config.restart_s
        overhead = self._restart_s.get(job.spec.model)
        if overhead is None:
            overhead = self._restart_s[job.spec.model] = self.profiles.model(job.spec.model).restart_overhead_s
        return overhead
