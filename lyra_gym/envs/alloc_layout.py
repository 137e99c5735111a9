"""The sub-action space of ``LyraGym/Alloc-v1``: its phases, the meaning of each value, the worker
options of a job and the features the Alloc observation appends (see :mod:`lyra_gym.envs.alloc`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from lyra_gym.model.jobspec import JobSpec

PHASES = ("borrow", "return", "job", "place")
BORROW, RETURN, JOB, PLACE = range(len(PHASES))
POOLS = ("training", "loaned")
#: Worker options per pool in the ``place`` phase (L).
WORKER_LEVELS = 10
WAIT, PROPOSAL = 0, 1

#: Per-job features the Alloc observation appends to each job row.
ALLOC_JOB_FEATURES = (
    "picked",             # 1 once decided at this decision point
    "selected",           # 1 for the job being placed now
    "must_decide",        # 1 if it holds GPUs on a server being returned
    "plan_workers",       # workers in the working plan / 64
    "plan_on_loaned",     # share of those on loaned servers
    "proposal_workers",   # the heuristic's proposal / 64
    "proposal_on_loaned", # share of the proposal on loaned servers
)
#: Cluster features the Alloc observation appends to the cluster block.
ALLOC_CLUSTER_FEATURES = (
    "phase_borrow", "phase_return", "phase_job", "phase_place",
    "plan_free_training",  # free training GPUs in the working plan / training GPUs
    "plan_free_loaned",    # free loaned GPUs in the working plan / inference GPUs
    "borrowed_now",        # servers borrowed at this decision point / inference servers
    "returns_left",        # servers still to return / inference servers
    "proposal_changes",    # log1p(jobs the proposal changes that are not yet picked) / 6
)


def worker_options(spec: JobSpec, levels: int = WORKER_LEVELS) -> tuple[int, ...]:
    """Up to ``levels`` worker counts a job may run on, ascending: its minimum, requested size
    and maximum, the powers of two between, and (when that is too many) the named sizes plus
    an evenly spread pick of the others (each the centre of an equal share)."""
    lo, hi = spec.min_gpus, spec.max_gpus
    named = {lo, spec.num_gpus, hi}
    powers = {1 << e for e in range(hi.bit_length() + 1) if lo <= 1 << e <= hi}
    candidates = sorted(named | powers)
    if len(candidates) <= levels:
        return tuple(candidates)
    others = [c for c in candidates if c not in named]
    keep = levels - len(named)
    picks = [others[round((i + 0.5) * len(others) / keep - 0.5)] for i in range(max(keep, 0))]
    return tuple(sorted(named | set(picks)))


@dataclass(frozen=True)
class AllocLayout:
    """The sub-action space: K job slots, M loaned-server slots, B borrow levels, L worker options."""

    k: int
    m: int
    b: int
    levels: int = WORKER_LEVELS

    @property
    def n(self) -> int:
        """Size of the ``Discrete`` space: the widest phase."""
        return max(self.k + 2, self.b + 1, self.m + 1, 2 + len(POOLS) * self.levels)

    @property
    def stop(self) -> int:
        return self.k

    @property
    def auto(self) -> int:
        return self.k + 1

    def place_index(self, pool: int, level: int) -> int:
        return 2 + pool * self.levels + level


def same_allocation(a: Mapping[int, int] | None, b: Mapping[int, int] | None) -> bool:
    """Whether two allocations are equal, None and ``{}`` (no GPUs) alike."""
    return (a or {}) == (b or {})


__all__ = ["ALLOC_CLUSTER_FEATURES", "ALLOC_JOB_FEATURES", "AllocLayout", "BORROW", "JOB", "PHASES", "PLACE",
           "POOLS", "PROPOSAL", "RETURN", "WAIT", "WORKER_LEVELS", "same_allocation", "worker_options"]
