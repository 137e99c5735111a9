"""One run of the comparison harness: its :class:`RunSpec`, :func:`run_one` that runs it (in this
process, a spawned worker or a Ray task) and the harness's errors.

Shared by :mod:`lyra_gym.harness.compare` (local and worker-process runs, which chooses the backend) and
:mod:`lyra_gym.harness.ray_backend` (Ray tasks), so neither imports the other for them; both modules
still export these names.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from lyra_gym.errors import LyraGymError
from lyra_gym.model.config import SimConfig
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import SimResult, simulate, write_result


class CompareError(LyraGymError):
    """A comparison asked for something impossible (a bad policy parameter, a repeated policy)."""


class RunError(RuntimeError):
    """One run of a comparison failed; ``remote_traceback`` is the traceback where it ran."""

    def __init__(self, message: str, remote_traceback: str = "") -> None:
        super().__init__(message, remote_traceback)

    @property
    def remote_traceback(self) -> str:
        return self.args[1]

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class RunSpec:
    """One run of a comparison; ``out_dir`` (if set) receives :func:`write_result`'s files."""

    policy: str
    seed: int
    params: Mapping[str, Any] = field(default_factory=dict)
    out_dir: str | None = None
    record_timeline: bool = False
    run_info: Mapping[str, Any] = field(default_factory=dict)   # extra run.json entries (e.g. the trace)
    extra_metrics: Mapping[str, Any] = field(default_factory=dict)  # added to metrics.json after summarize


_worker_inputs: dict[str, Any] = {}  # set once per worker process by init_worker


def init_worker(jobs: Sequence[JobSpec], config: SimConfig) -> None:
    """Keep ``jobs`` and ``config`` in this worker process, so :func:`run_one` need not be sent them."""
    _worker_inputs["jobs"], _worker_inputs["config"] = jobs, config


def run_one(spec: RunSpec, jobs: Sequence[JobSpec] | None = None, config: SimConfig | None = None) -> SimResult:
    """Run ``spec`` (top-level, so a spawned worker can unpickle it); ``jobs`` and ``config``
    default to the worker's. Any failure becomes a picklable :class:`RunError`."""
    jobs = _worker_inputs["jobs"] if jobs is None else jobs
    config = _worker_inputs["config"] if config is None else config
    try:
        result = simulate(jobs, spec.policy, config, seed=spec.seed, policy_params=dict(spec.params),
                          record_timeline=spec.record_timeline)
        result.metrics.update(spec.extra_metrics)
        if spec.out_dir is not None:
            write_result(result, spec.out_dir, spec.run_info)
        return result
    except Exception as err:  # reported with its traceback, in the parent
        raise RunError(f"run {spec.policy!r} seed {spec.seed} failed: {type(err).__name__}: {err}",
                       traceback.format_exc()) from None
