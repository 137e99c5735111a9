"""A hand-written ``LyraGym/Alloc-v1`` policy: each queued job, in the observation's order, runs at its
requested size on training GPUs when it fits there, else on loaned GPUs, else it waits.

It reads only what the env gives an agent (the observation and the action masks), so the same
object steps the env (``policy(obs, env.action_masks())``) and runs in the harness beside the
heuristics, from the repository root::

    lyra-gym compare --policies lyra,policy:examples.alloc_policy:make --seeds 0,1 --out /tmp/cmp
    lyra-gym compare --policies lyra,policy:examples/alloc_policy.py:make \\
        --policy-param policy:examples/alloc_policy.py:make.backfill=false --out /tmp/cmp

At a decision point: borrow every loanable server (``borrow=True``; else none), return servers
as the heuristic would, give a running job on a server being returned the heuristic's proposal,
place queued jobs one by one, then stop (running jobs keep what they have). ``backfill=False``
stops at the first queued job that does not fit (strict order). See ``docs/writing-a-policy.md``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from lyra_gym import (
    ALLOC_CLUSTER_FEATURES,
    ALLOC_JOB_FEATURES,
    CLUSTER_FEATURES,
    GPU_NORM,
    JOB_FEATURES,
    PHASES,
    PROPOSAL,
    WAIT,
    AllocLayout,
    worker_options,
)

JOB = JOB_FEATURES + ALLOC_JOB_FEATURES              # the columns of a job row
CLUSTER = CLUSTER_FEATURES + ALLOC_CLUSTER_FEATURES  # the cluster block after the job rows
PRESENT, QUEUED, PICKED, SELECTED, MUST, PLANNED = (
    JOB.index(name) for name in ("present", "queued", "picked", "selected", "must_decide", "plan_workers"))
TRAINING, LOANED = 0, 1                              # the pools of the place phase


class GreedyFit:
    """The policy: ``policy(obs, action_masks) -> int``, one sub-action of ``LyraGym/Alloc-v1``.

    :param backfill: after a queued job that must wait, still place the ones behind it (default True).
    :param borrow: borrow every loanable inference server when asked (default True), else none.
    :param num_job_slots: K of the env (its default, 32); ``borrow_levels`` B (4); ``worker_levels`` L (10).
    """

    env_id = "LyraGym/Alloc-v1"

    def __init__(self, backfill: bool = True, borrow: bool = True, num_job_slots: int = 32,
                 borrow_levels: int = 4, worker_levels: int = 10) -> None:
        self.backfill, self.borrow = backfill, borrow
        self.env_kwargs = {"num_job_slots": num_job_slots, "borrow_levels": borrow_levels,
                           "worker_levels": worker_levels}
        self.layout = AllocLayout(num_job_slots, 0, borrow_levels, worker_levels)  # M: not used here
        self.phase_at = num_job_slots * len(JOB) + CLUSTER.index("phase_borrow")

    def __call__(self, obs: np.ndarray, action_masks: np.ndarray) -> int:
        k = self.layout.k
        jobs = obs[:k * len(JOB)].reshape(k, len(JOB))
        phase = PHASES[int(np.argmax(obs[self.phase_at:self.phase_at + len(PHASES)]))]
        if phase == "borrow":
            return self.layout.b if self.borrow else 0
        if phase == "return":
            return 0  # the rest as the heuristic would return them
        if phase == "job":
            return self.pick(jobs, action_masks)
        return self.place(jobs[int(np.argmax(jobs[:, SELECTED]))], action_masks)

    def pick(self, jobs: np.ndarray, masks: np.ndarray) -> int:
        """The job slot to decide next, or stop."""
        unpicked = [i for i in range(self.layout.k) if masks[i] and jobs[i, PRESENT]]
        must = [i for i in unpicked if jobs[i, MUST]]
        if must:
            return must[0]
        waiting = (jobs[:, PRESENT] > 0) & (jobs[:, QUEUED] > 0) & (jobs[:, PICKED] > 0) & (jobs[:, PLANNED] == 0)
        queued = [i for i in unpicked if jobs[i, QUEUED]]
        if queued and (self.backfill or not waiting.any()):
            return queued[0]
        return self.layout.stop

    def place(self, row: np.ndarray, masks: np.ndarray) -> int:
        """Where the selected job goes: its requested size on training GPUs, else loaned ones, else wait."""
        if row[MUST]:
            return PROPOSAL
        sizes = SimpleNamespace(**{name: round(float(row[JOB.index(feature)]) * GPU_NORM) for name, feature in
                                   (("min_gpus", "min_gpus"), ("num_gpus", "requested_gpus"),
                                    ("max_gpus", "max_gpus"))})
        options = worker_options(sizes, self.layout.levels)  # type: ignore[arg-type] - the sizes are all it reads
        if sizes.num_gpus not in options:  # sizes beyond GPU_NORM are clipped in the observation
            return WAIT
        level = options.index(sizes.num_gpus)
        for pool in (TRAINING, LOANED):
            value = self.layout.place_index(pool, level)
            if masks[value]:
                return value
        return WAIT


def make(**params: Any) -> GreedyFit:
    """The factory ``policy:examples.alloc_policy:make`` names; ``params`` are :class:`GreedyFit`'s."""
    return GreedyFit(**params)
