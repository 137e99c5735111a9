"""Jobs that can never run on a cluster: found when a trace is loaded against a config.

A job larger than the whole cluster is never started; ``fifo``, ``sjf`` and the
Lyra family keep it at the head of their queue, so nothing queued behind it
starts either. The command line therefore checks every trace against the run's
:class:`~lyra_gym.model.config.SimConfig` before any simulation, and refuses the trace
(naming the first such job and the sizes) unless ``--skip-infeasible`` is given,
in which case those jobs are dropped, a warning is printed and every run's
``metrics.json`` records ``jobs_skipped_infeasible``.

The rule
--------
A job's *base demand* is the fewest GPUs it may run on: ``min_gpus`` (for an
inelastic job that is ``num_gpus``). The job is *feasible* when that many GPUs
exist in the largest pool one job may span:

- ``allow_mixed_gpu_types: true``: every training GPU plus every GPU
  of the inference pool (the inference servers can all be loaned to training
  when the inference demand is zero, so a policy that borrows could place it);
- ``allow_mixed_gpu_types: false`` (default): per GPU type, the training GPUs of that
  type plus the inference GPUs if the inference servers are of that type; the
  largest of these.

The check is optimistic in two ways, on purpose (it rejects only what can
*never* run): a job that fits only with loaned inference servers is accepted
(:attr:`Feasibility.needs_loan` lists them; policies that never borrow, such as
``fifo``, still cannot run it, and the command line warns), and the throughput
profiles are not consulted (a model is assumed to run on every GPU type).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from lyra_gym.errors import ConfigError, LyraGymError, shown
from lyra_gym.model.config import SimConfig
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import ProfileSet

__all__ = ["InfeasibleJobError", "Infeasible", "Feasibility", "capacity", "check_feasibility", "check_gpu_types",
           "drop_infeasible"]


class InfeasibleJobError(LyraGymError):
    """A trace holds jobs that can never run on the configured cluster (message: one line)."""


@dataclass(frozen=True)
class Infeasible:
    """A job whose base demand exceeds the largest pool it could span."""

    job_id: str
    need: int        # its base demand (min_gpus)
    capacity: int    # GPUs in the largest pool one job may span

    def describe(self) -> str:
        return f"job {self.job_id!r} needs at least {self.need} GPUs, the cluster has at most {self.capacity} for one job"


@dataclass(frozen=True)
class Feasibility:
    """The outcome of :func:`check_feasibility`."""

    capacity: int                   # GPUs one job may span at most (loans included)
    training_capacity: int          # the same, training servers only
    infeasible: tuple[Infeasible, ...] = ()
    needs_loan: tuple[str, ...] = field(default=())   # feasible only with loaned inference servers

    @property
    def ok(self) -> bool:
        return not self.infeasible


def capacity(config: SimConfig) -> tuple[int, int]:
    """``(with loans, training only)``: the most GPUs one job may span (the module's rule)."""
    inf = config.cluster.inference
    inf_gpus = inf.count * inf.gpus_per_server
    if config.allow_mixed_gpu_types:
        training = config.cluster.training_gpus
        return training + inf_gpus, training
    per_type: dict[str, int] = {}
    for group in config.cluster.training:
        per_type[group.gpu_type] = per_type.get(group.gpu_type, 0) + group.count * group.gpus_per_server
    training = max(per_type.values(), default=0)
    with_loans = dict(per_type)
    if inf_gpus:
        with_loans[inf.gpu_type] = with_loans.get(inf.gpu_type, 0) + inf_gpus
    return max(with_loans.values(), default=0), training


def check_feasibility(jobs: Sequence[JobSpec], config: SimConfig) -> Feasibility:
    """Which of ``jobs`` can never run on ``config``'s cluster, and which need loaned servers."""
    total, training = capacity(config)
    bad = tuple(Infeasible(j.job_id, j.min_gpus, total) for j in jobs if j.min_gpus > total)
    loan = tuple(j.job_id for j in jobs if training < j.min_gpus <= total)
    return Feasibility(total, training, bad, loan)


def drop_infeasible(jobs: Sequence[JobSpec], config: SimConfig, skip: bool, source: str = "trace"
                    ) -> tuple[list[JobSpec], Feasibility]:
    """``jobs`` without the infeasible ones, and the check's outcome.

    Without ``skip`` any infeasible job raises :class:`InfeasibleJobError` naming the first
    one, its size, the capacity and how many there are; ``source`` names the trace.
    """
    result = check_feasibility(jobs, config)
    if result.infeasible and not skip:
        first, n = result.infeasible[0], len(result.infeasible)
        more = f" ({n} such jobs)" if n > 1 else ""
        raise InfeasibleJobError(
            f"{source}: {first.describe()} (min_gpus {first.need} > {first.capacity} GPUs){more}: it could never "
            f"start and would block the queue; use a larger cluster or pass --skip-infeasible to drop such jobs")
    dropped = {i.job_id for i in result.infeasible}
    return [j for j in jobs if j.job_id not in dropped], result


def check_gpu_types(config: SimConfig, profiles: ProfileSet) -> None:
    """Refuse a server group whose GPU type no model of ``profiles`` is profiled on (an unknown
    inference type went unnoticed until a policy borrowed a server), naming the config field."""
    known = profiles.gpu_types()
    groups = [(f"cluster.training[{i}].gpu_type", g.gpu_type) for i, g in enumerate(config.cluster.training)]
    if config.cluster.inference.count:
        groups.append(("cluster.inference.gpu_type", config.cluster.inference.gpu_type))
    for where, gpu_type in groups:
        if gpu_type not in known:
            raise ConfigError(f"{where}: unknown GPU type {shown(gpu_type)} (the profile knows "
                              f"{', '.join(sorted(known))})")
