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

Faults: a task whose worker process dies (killed, out of memory) is run again, up to
``--ray-retries`` times (:func:`task_retries`, default :data:`DEFAULT_RETRIES`); any other
Ray failure (a node or the local Ray instance lost, an object lost, an error of Ray itself)
is a :class:`RunError` of one line, so the command's manifest says ``failed``. Ray ends a
driver process whose local instance is lost (the raylet or its dashboard agent killed)
without a Python exception, so a local instance that this module starts is driven from a
spawned child process (the *driver*), which sends each result here as it arrives: its
death is reported here as a one-line :class:`RunError`. Ray's own log lines go to its log
files (``/tmp/ray/session_latest/logs``), not to this command's output.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Generator, Iterator, Sequence

from lyra_gym.harness.runspec import CompareError, RunError, RunSpec, run_one
from lyra_gym.model.config import SimConfig
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import SimResult, write_result

INSTALL_HINT = "the Ray backend needs Ray: pip install lyra-gym[ray]"
DEFAULT_RETRIES = 2  # reruns of a task whose worker process died (--ray-retries)
_retries = DEFAULT_RETRIES


@contextmanager
def task_retries(n: int) -> Iterator[None]:
    """Within the block, a task whose worker process dies is rerun up to ``n`` times (``--ray-retries``)."""
    global _retries
    old, _retries = _retries, n
    try:
        yield
    finally:
        _retries = old


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
    ``out_dir`` is written here. A Ray instance already initialised in this process is
    used here; otherwise Ray is started, or ``address`` connected to, by a driver process
    (module docstring).
    """
    ray = import_ray()
    remote = [(replace(s, out_dir=None), jobs, config) for s, jobs, config in tasks]
    done = _run_here(ray, remote) if ray.is_initialized() else _run_in_driver(remote, address, num_cpus)
    results: list[SimResult | None] = [None] * len(tasks)
    try:
        for i, result in done:
            spec = tasks[i][0]
            if spec.out_dir is not None:
                write_result(result, Path(spec.out_dir), spec.run_info)
            results[i] = result
            if on_done:
                on_done(i)
    finally:
        done.close()  # the tasks still running are cancelled, the driver stopped
    return results  # type: ignore[return-value]


def _run_here(ray: Any, tasks: Sequence[tuple[RunSpec, Sequence[JobSpec], SimConfig]]
              ) -> Generator[tuple[int, SimResult], None, None]:
    """``(index, result)`` of each task as it finishes, with Ray initialised in this process;
    on any exception, or when closed early, the tasks still running are cancelled."""
    pending: dict[Any, int] = {}
    try:
        task = ray.remote(num_cpus=1, max_retries=_retries, retry_exceptions=False)(_run_task)
        refs: dict[int, Any] = {}

        def put(obj: Any) -> Any:
            if id(obj) not in refs:
                refs[id(obj)] = (ray.put(list(obj) if isinstance(obj, (list, tuple)) else obj), obj)
            return refs[id(obj)][0]

        for i, (spec, jobs, config) in enumerate(tasks):
            pending[task.remote(spec, put(jobs), put(config))] = i
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                yield i, _result(ray, ref, tasks[i][0])
    except ray.exceptions.RayError as err:
        raise RunError(f"Ray failed: {_ray_problem(err, ray)}", "") from None
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # Ray itself may be gone; the first error is the one to report
                pass


def _run_in_driver(tasks: Sequence[tuple[RunSpec, Sequence[JobSpec], SimConfig]], address: str | None,
                   num_cpus: int | None) -> Generator[tuple[int, SimResult], None, None]:
    """``(index, result)`` of each task as the driver process (:func:`_driver_main`) sends it; its
    error re-raised here, its death a one-line :class:`RunError`; stopped on any exit."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    driver = context.Process(target=_driver_main, args=(send, tasks, address, num_cpus, _retries), daemon=True)
    with _sigint_ignored():  # inherited: a Ctrl-C while it starts reaches only this process
        driver.start()
    send.close()
    try:
        while True:
            try:
                message = receive.recv()
            except EOFError:
                driver.join(timeout=5)
                raise RunError(f"Ray failed: its driver process ended (exit code {driver.exitcode}), so the "
                               f"Ray instance was lost; Ray's logs: /tmp/ray/session_latest/logs", "") from None
            if message[0] == "error":
                raise message[1]
            if message[0] == "end":
                return
            yield message[1], message[2]
    finally:
        _stop(driver)
        receive.close()


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored in the block (main thread; blocked first, so one sent meanwhile is delivered after)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _stop(driver: Any) -> None:
    """Stop the driver process: SIGTERM (it shuts Ray down), then SIGKILL if it lingers."""
    if driver.is_alive():
        driver.terminate()
    driver.join(timeout=5)
    if driver.is_alive():
        driver.kill()
        driver.join(timeout=5)


def _driver_main(send: Any, tasks: Sequence[tuple[RunSpec, Sequence[JobSpec], SimConfig]], address: str | None,
                 num_cpus: int | None, retries: int) -> None:
    """The driver process: start (or connect to) Ray, run ``tasks``, send ``("done", i, result)`` for
    each, then ``("end",)``, or ``("error", err)``. SIGINT is left to the parent; SIGTERM shuts Ray down."""
    global _retries
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _retries = retries
    for fd in (1, 2):  # Ray's C++ log lines: in its log files only
        os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
    try:
        ray = import_ray()
        _init(ray, address, num_cpus)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            for i, result in _run_here(ray, tasks):
                send.send(("done", i, result))
        finally:
            ray.shutdown()
        send.send(("end",))
    except BaseException as err:  # reported in the parent
        if not isinstance(err, (RunError, CompareError)):
            err = RunError(f"Ray failed: {type(err).__name__}: {_one_line(err)}", "")
        try:
            send.send(("error", err))
        except OSError:
            pass  # the parent is gone


def _init(ray: Any, address: str | None, num_cpus: int | None) -> None:
    """``ray.init`` for this command: a local instance of ``num_cpus`` CPUs, or the cluster at
    ``address``; Ray's log lines kept to errors."""
    kwargs: dict[str, Any] = {"address": address or None, "include_dashboard": False,
                              "logging_level": logging.ERROR, "log_to_driver": False}
    if not address:
        kwargs["num_cpus"] = num_cpus
    try:
        ray.init(**kwargs)
    except ConnectionError as err:
        raise CompareError(f"--address {address!r}: cannot connect to a Ray cluster ({_one_line(err)})") from None
    except (RuntimeError, ValueError, ray.exceptions.RayError) as err:
        raise CompareError(f"cannot start Ray{f' at --address {address!r}' if address else ''}: "
                           f"{_one_line(err)}") from None


def _one_line(err: object, limit: int = 200) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _ray_problem(err: BaseException, ray: Any) -> str:
    """One line for a Ray failure: its type and the first line of its message (the last, the
    error itself, for an error raised in a task, whose message is a traceback)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    return f"{type(err).__name__}: {_one_line(lines[-1] if isinstance(err, ray.exceptions.RayTaskError) else lines[0])}"


def _result(ray: Any, ref: Any, spec: RunSpec) -> SimResult:
    """Task ``ref``'s result; a failed run re-raised as its :class:`RunError`, a Ray failure
    (a worker that died more than the retries allow, ...) as a one-line one naming the run."""
    try:
        result, error = ray.get(ref)
    except ray.exceptions.RayError as err:
        n = _retries + 1
        tries = f" (tried {n} time{'s' if n > 1 else ''})" if isinstance(err, ray.exceptions.WorkerCrashedError) else ""
        raise RunError(f"run {spec.policy!r} seed {spec.seed} failed on Ray{tries}: {_ray_problem(err, ray)}",
                       "") from None
    if error is not None:
        raise error
    return result
