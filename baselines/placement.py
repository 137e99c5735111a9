"""Placement helpers of the baseline policies, and the placement rules they share with the env.

The rules themselves -- best fit (``spread``) and ``consolidated``, :func:`place`,
:func:`groups_by_type`, ... -- live in :mod:`lyra_gym.sim.placement` (the allocation env uses them
too, and ``lyra_gym`` never imports ``baselines``); they are re-exported here, so
``from lyra_baselines.placement import best_fit`` works as before. Defined here: what only the
policies need -- :func:`spanning_group` (a job too large for every one-type group, as ``lyra``
lets it span) and :func:`warn_unrunnable` with its :class:`UnrunnableJobWarning`.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from lyra_gym.sim.placement import (
    best_fit,
    best_fit_in_groups,
    capacities,
    consolidated_fit,
    groups_by_type,
    place,
    place_in_groups,
    placer,
    take,
)

__all__ = ["UnrunnableJobWarning", "best_fit", "best_fit_in_groups", "capacities", "consolidated_fit",
           "groups_by_type", "place", "place_in_groups", "placer", "spanning_group", "take", "warn_unrunnable"]


def spanning_group(view, loaned: Sequence[int], need: int) -> list[int] | None:
    """Servers a job too large for every one-type group may span, as ``lyra`` lets it
    (``baselines/lyra.py``, phase 1): only with ``allow_mixed_gpu_types``; all training servers
    if they have ``need`` GPUs, else the training and ``loaned`` servers together if they have;
    else None. The caller decides that no one-type group can hold the job."""
    if not view.allow_mixed_gpu_types:
        return None
    servers = view.servers
    training = list(view.training_server_ids)
    held = sum(servers[s].num_gpus for s in training)
    if need <= held:
        return training
    if need <= held + sum(servers[s].num_gpus for s in loaned):
        return [*training, *loaned]
    return None


def warn_unrunnable(view, policy: str, limit: int, need: Callable[[Any], int], checked: set[str]) -> None:
    """Warn once per queued job (naming it) that needs more than ``limit`` GPUs, the most
    ``policy`` can ever give one job on this cluster (every inference server loaned, if it
    borrows): such a job never starts and is reported unfinished. ``need`` reads only a job's
    fixed sizes, so each job is checked once; ``checked``: the ids checked already (updated)."""
    for job in view.queued_jobs():
        if job.id in checked:
            continue
        checked.add(job.id)
        n = need(job)
        if n > limit:
            warnings.warn(f"{policy}: job {job.id!r} needs {n} GPUs, more than the {limit} this policy can ever "
                          "give one job on this cluster: it will never start", UnrunnableJobWarning, stacklevel=2)


class UnrunnableJobWarning(UserWarning):
    """A job the policy can never start on the run's cluster (see :func:`warn_unrunnable`)."""
