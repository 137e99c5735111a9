"""The Ray backend of the comparison harness: every (policy, seed) run as a Ray task.

``run_grid(..., backend="ray", address=None)`` (``lyra-gym compare --backend ray
[--address ADDR]``) sends each :class:`~lyra_gym.harness.runspec.RunSpec` to
:func:`lyra_gym.harness.runspec.run_one` as a Ray task. The trace and the configuration
are put into Ray's object store once and shared by every task. Results are the
same as with the local backend, bit for bit (only ``sim_wall_s`` differs): each
run takes all its randomness from its seed.

Each task returns its :class:`~lyra_gym.run.simulate.SimResult`, and *this* process
writes the run's folder (atomically, with its ``run.json``), so ``--out`` is on the machine that runs the command
even when the tasks run on other machines of a Ray cluster. The workers must
have ``lyra-gym`` (and any scheduler plug-in package) installed.

Ray is optional: ``pip install lyra-gym[ray]``. Without ``address`` a local Ray
instance is started with ``num_cpus`` CPUs and shut down afterwards; with an
``address`` (``auto``, ``ray://host:10001``, ``host:6379``) this process
connects to that cluster. A Ray instance that is already initialised in this
process (``ray.init`` called by the caller) is used as it is and left running.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from lyra_gym.harness.runspec import CompareError, RunError, RunSpec, run_one
from lyra_gym.model.config import SimConfig
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import SimResult, write_result

INSTALL_HINT = "the Ray backend needs Ray: pip install lyra-gym[ray]"


def import_ray() -> Any:
    """``import ray``, or a :class:`CompareError` that says how to install it."""
    try:
        import ray
    except ImportError as err:
        raise CompareError(f"{INSTALL_HINT} ({err})") from None
    return ray


def _run_task(spec: RunSpec, jobs: Sequence[JobSpec], config: SimConfig) -> tuple[SimResult | None, RunError | None]:
    """The body of one Ray task. A failed run comes back as a value (not a Ray task error)
    so the caller re-raises the same :class:`RunError`, traceback included, as the local backend."""
    try:
        return run_one(spec, jobs, config), None
    except RunError as err:
        return None, err


def run_specs_ray(
    specs: Sequence[RunSpec],
    jobs: Sequence[JobSpec],
    config: SimConfig,
    address: str | None = None,
    num_cpus: int | None = None,
    on_done: Callable[[RunSpec], object] | None = None,
) -> dict[tuple[str, int], SimResult]:
    """Run ``specs`` (all on ``jobs`` and ``config``) as Ray tasks; returns ``(policy, seed) -> result``.

    ``spec.out_dir`` is written here, by this process, as each result arrives.
    ``num_cpus`` sizes a local instance (ignored when connecting to ``address``).
    """
    results = run_tasks_ray([(s, jobs, config) for s in specs], address, num_cpus,
                            None if on_done is None else (lambda i: on_done(specs[i])))
    return {(s.policy, s.seed): r for s, r in zip(specs, results)}


def run_tasks_ray(
    tasks: Sequence[tuple[RunSpec, Sequence[JobSpec], SimConfig]],
    address: str | None = None,
    num_cpus: int | None = None,
    on_done: Callable[[int], object] | None = None,
) -> list[SimResult]:
    """Run ``(spec, jobs, config)`` tasks as Ray tasks; results in ``tasks`` order.

    Each distinct ``jobs`` and ``config`` object is put into the object store once.
    ``on_done(i)`` is called as task ``i`` finishes (completion order), after its
    ``out_dir`` is written here.
    """
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": address or None, "include_dashboard": False}
        if not address:
            kwargs["num_cpus"] = num_cpus
        try:
            ray.init(**kwargs)
        except ConnectionError as err:
            raise CompareError(f"--address {address!r}: cannot connect to a Ray cluster ({err})") from None
        started = True
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(_run_task)
        refs: dict[int, Any] = {}

        def put(obj: Any) -> Any:
            if id(obj) not in refs:
                refs[id(obj)] = (ray.put(list(obj) if isinstance(obj, (list, tuple)) else obj), obj)
            return refs[id(obj)][0]

        pending = {}
        for i, (s, jobs, config) in enumerate(tasks):
            remote_spec = replace(s, out_dir=None)
            pending[task.remote(remote_spec, put(jobs), put(config))] = i
        results: list[SimResult | None] = [None] * len(tasks)
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i = pending.pop(ref)
                    result, error = ray.get(ref)
                    if error is not None:
                        raise error
                    spec = tasks[i][0]
                    if spec.out_dir is not None:
                        write_result(result, Path(spec.out_dir), spec.run_info)
                    results[i] = result
                    if on_done:
                        on_done(i)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return results  # type: ignore[return-value]
    finally:
        if started:
            ray.shutdown()
