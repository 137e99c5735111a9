"""The comparison harness: every (policy, seed) run of a comparison, serial or in parallel.

Every run is independent: it builds its scheduler from the registry by name
with its parameters, and takes all randomness from its seed
(:func:`lyra_gym.run.simulate.build_engine`), so running it in this process or in a
worker process gives the same result bit for bit (only ``sim_wall_s``, a wall
clock, differs). Workers are started with the ``spawn`` method on every
platform: a clean interpreter per worker (no forked threads or locks), the same
behaviour on Linux, macOS and Windows. Each worker receives the trace and the
configuration once, at start-up, then runs :func:`run_one` on the tasks it is
given; the result comes back to this process, which writes the run's folder
(atomically: :func:`lyra_gym.run.simulate.write_result`).

Interrupts (Ctrl-C): worker processes ignore SIGINT (they inherit it ignored
and keep it so), so a Ctrl-C reaches only this process, which
terminates every worker at once, removes any run folder it was writing and
re-raises :class:`KeyboardInterrupt`; the command line turns that into one line
and exit code 130. Every worker talks to this process over its own pipe (no
shared queue, no executor thread), so terminating workers can never leave
anything blocked. A worker that dies (killed, out of memory) fails the
comparison with a :class:`RunError` naming the run.

Schedulers are looked up by name in each worker, so a scheduler must be
findable through the entry-point groups there; one registered with
:func:`lyra_gym.sim.scheduler.register` in the parent process alone is only
available with ``jobs=1``.

Policy parameters (``--policy-param NAME.KEY=VALUE``): ``NAME`` is a policy of
the comparison (it may contain ``.``, ``:`` and ``/``, e.g.
``model:runs/x/model.zip``: the key is what follows the *last* dot), ``KEY`` a
constructor parameter of that scheduler, ``VALUE`` a YAML scalar (``true``,
``30``, ``0.5``, ``1e5``, ``random``, ``null``; unlike plain YAML 1.1, ``1e5`` is a float).
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import threading
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection, wait as wait_ready
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, cast

import yaml

from lyra_gym.harness import ray_backend
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.import_spec import SchedulerSpecError
from lyra_gym.sim.params import ParamError, shown as short
from lyra_gym.model.config import ConfigError, SimConfig, load_config
from lyra_gym.harness.runspec import CompareError, RunError, RunSpec, init_worker, run_one
from lyra_gym.run.simulate import SimResult, write_result
from lyra_gym.model.jobspec import JobSpec


BACKENDS = ("local", "ray")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # YAML 1.1 reads "1e5" as a string


def parse_policy_param(item: str) -> tuple[str, str, Any]:
    """``"NAME.KEY=VALUE"`` -> ``(NAME, KEY, value)``; VALUE is parsed as a YAML scalar."""
    left, eq, raw = item.partition("=")
    name, dot, key = left.strip().rpartition(".")
    if not eq or not dot or not name or not _KEY.fullmatch(key):
        raise CompareError(f"--policy-param {short(item)}: expected NAME.KEY=VALUE, e.g. lyra.reclaim_rule=random")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or "not valid YAML"  # the message, not the value quoted
        raise CompareError(f"--policy-param {short(item)}: VALUE is not a YAML scalar ({problem})") from None
    except ValueError:  # an integer of more digits than Python converts
        raise CompareError(f"--policy-param {short(item)}: VALUE is not a usable number") from None
    if isinstance(value, str) and _EXPONENT.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, (dict, list)):
        raise CompareError(f"--policy-param {short(item)}: VALUE must be a scalar, got a {type(value).__name__}")
    return name, key, value


def parse_policy_params(items: Sequence[str], policies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Every policy's parameters from repeated ``NAME.KEY=VALUE`` items (later ones win);
    a NAME that is not among ``policies`` is an error."""
    params: dict[str, dict[str, Any]] = {p: {} for p in policies}
    for item in items:
        name, key, value = parse_policy_param(item)
        if name not in params:
            raise CompareError(
                f"--policy-param {short(item)}: policy {name!r} is not among the policies run ({', '.join(policies)})")
        params[name][key] = value
    return params


def check_policies(policies: Sequence[str], params: Mapping[str, Mapping[str, Any]]) -> None:
    """Fail before any run: unknown names, repeated names, names that share a results folder,
    parameters a scheduler rejects (type and range: :mod:`lyra_gym.sim.params`, the same check for
    values typed on the command line and read from a sweep file), model files that cannot be loaded.

    Schedulers with parameters are built once here to check them. A ``PREFIX:ARG`` name
    needs a known loader prefix; a loader with a ``check`` attribute (``model:``, ``rllib:``,
    ``policy:``: it opens and validates the files, or imports the policy) has ``check(ARG, **params)``
    run here, and any error becomes one :class:`CompareError` line (the loader's message names the
    file). A ``MODULE:ATTRIBUTE`` scheduler is always built once here (its import and its type checked)."""
    seen: set[str] = set()
    known = set(registry.available())
    for p in policies:
        if p in seen:
            raise CompareError(f"policy {p!r} is listed twice")
        seen.add(p)
        if p not in known and not registry.is_import_spec(p):
            if ":" not in p or p.partition(":")[0] not in registry.loader_names():
                raise registry.unknown_error(p)
    folders: dict[str, str] = {}
    for p in policies:
        other = folders.setdefault(run_dirname(p), p)
        if other != p:
            raise CompareError(f"policies {other!r} and {p!r} would share the results folder {run_dirname(p)!r}")
    for p in policies:
        _check_policy(p, params.get(p, {}), p in known)


def _check_policy(p: str, params: Mapping[str, Any], known: bool) -> None:
    """Build (or ``check``) policy ``p`` (``known``: a registry name) with ``params`` when that can
    fail; one line if it does."""
    shown = ", ".join(f"{k}={short(v)}" for k, v in params.items())
    imported = not known and registry.is_import_spec(p)
    check = None if imported or known else _loader_check(p)
    try:
        if check is not None:
            check(p.partition(":")[2], **params)
        elif params or imported:
            registry.make(p, **params)
    except SchedulerSpecError:
        raise  # names the policy already
    except ParamError as err:  # names the policy and the parameter
        raise CompareError(str(err)) from None
    except TypeError as err:
        where = f"--policy-param for {p!r} ({shown})" if params else f"policy {p!r}"
        raise CompareError(f"{where}: {err}") from None
    except (ValueError, OSError) as err:
        where = f"--policy-param for {p!r} ({shown})" if check is None else f"policy {p!r}"
        raise CompareError(f"{where}: {' '.join(str(err).split())}") from None


def _loader_check(policy: str) -> Callable[..., None] | None:
    """The ``check`` of ``policy``'s loader (``PREFIX:ARG``), or None when the loader has none."""
    prefix = policy.partition(":")[0]
    entry = next(ep for ep in entry_points(group=registry.PREFIX_ENTRY_POINT_GROUP) if ep.name == prefix)
    try:
        return getattr(entry.load(), "check", None)
    except ImportError as err:
        raise CompareError(f"policy {policy!r}: the {prefix}: loader cannot be imported ({err})") from None


def read_config(path: str | os.PathLike | None) -> SimConfig:
    """:func:`lyra_gym.model.config.load_config`, with every way a file can be unreadable (a folder,
    not UTF-8, not valid YAML/TOML) turned into a one-line :class:`ConfigError` naming it;
    ``None`` gives the default config."""
    if path is None:
        return SimConfig()
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a directory, not a config file")
    try:
        return load_config(path)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as err:
        problem = " ".join(str(err).split())
        raise ConfigError(f"{path}: not valid YAML ({problem})") from None
    except ValueError as err:  # tomllib.TOMLDecodeError, or a value the dataclasses reject
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"{path}: {' '.join(str(err).split())}") from None
    except TypeError as err:
        raise ConfigError(f"{path}: {err}") from None


def run_dirname(policy: str) -> str:
    """The folder of a policy's runs: the name, with characters other than letters, digits and
    ``.+-_=,`` replaced by ``_`` (``model:runs/x/model.zip`` -> ``model_runs_x_model.zip``)."""
    return re.sub(r"[^A-Za-z0-9.+\-_=,]", "_", policy).strip(".") or "_"


def _worker_main(conn: Any, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    """A worker process: SIGINT ignored; then ``(index, fn, args)`` tasks from ``conn``, each answered
    with ``(index, True, result)`` or ``(index, False, error)``, until ``None`` or the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # where a platform passes the parent's mask on
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if task is None:
            return
        index, fn, args = task
        try:
            reply = (index, True, fn(*args))
        except BaseException as err:  # reported in the parent
            if not isinstance(err, RunError):
                err = RunError(f"{type(err).__name__}: {err}", traceback.format_exc())
            reply = (index, False, err)
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


def run_in_workers(
    fn: Callable[..., Any],
    tasks: Sequence[tuple],
    n_workers: int,
    on_result: Callable[[int, Any], None],
    initializer: Callable[..., None] | None = None,
    initargs: tuple = (),
    describe: Callable[[int], str] = lambda i: f"task {i}",
) -> None:
    """Run ``fn(*tasks[i])`` in ``n_workers`` spawned processes; ``on_result(i, result)`` is called
    here, in completion order. The first failure is re-raised (a :class:`RunError`), after every
    worker is stopped. On any exception here, :class:`KeyboardInterrupt` included, the workers
    are terminated at once (module docstring)."""
    context = multiprocessing.get_context("spawn")
    workers: list[tuple[Any, Any]] = []  # (process, parent end of its pipe)
    busy: dict[Any, int] = {}             # connection -> task index
    next_task = 0
    try:
        main_thread = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
        if main_thread:
            # A Ctrl-C while a worker starts must not reach it. A spawned child does not inherit
            # the signal mask (the exec resets it) but does inherit an ignored SIGINT, which its
            # interpreter keeps ignored: so SIGINT is ignored while workers start. Blocked first,
            # a Ctrl-C in that window stays pending here and is delivered once the handler is back.
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            old_handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for _ in range(min(n_workers, len(tasks))):
                parent_end, child_end = context.Pipe()
                proc = context.Process(target=_worker_main, args=(child_end, initializer, initargs), daemon=True)
                proc.start()
                child_end.close()
                workers.append((proc, parent_end))
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, old_handler)
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for proc, conn in workers:
            if next_task < len(tasks):
                conn.send((next_task, fn, tuple(tasks[next_task])))
                busy[conn] = next_task
                next_task += 1
        by_sentinel = {proc.sentinel: (proc, conn) for proc, conn in workers}
        while busy:
            ready = wait_ready([*busy, *(p.sentinel for p, c in workers if c in busy)])
            for item in ready:
                conn = by_sentinel[item][1] if item in by_sentinel else cast(Connection, item)  # else a pipe end
                if conn not in busy:
                    continue
                index = busy[conn]
                try:
                    got, ok, value = conn.recv()
                except (EOFError, OSError):
                    proc = next(p for p, c in workers if c is conn)
                    proc.join(timeout=1)
                    raise RunError(f"{describe(index)} failed: its worker process died (exit code {proc.exitcode})",
                                   "") from None
                del busy[conn]
                if not ok:
                    raise value
                on_result(got, value)
                if next_task < len(tasks):
                    conn.send((next_task, fn, tuple(tasks[next_task])))
                    busy[conn] = next_task
                    next_task += 1
        for proc, conn in workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for proc, conn in workers:
            proc.join(timeout=5)
    finally:
        stop_workers(workers)


def stop_workers(workers: Sequence[tuple[Any, Any]]) -> None:
    """Terminate every worker still alive and close the pipes (no waiting on a busy worker)."""
    for proc, _ in workers:
        if proc.is_alive():
            proc.terminate()
    for proc, conn in workers:
        proc.join(timeout=0.5)  # a worker outliving the command holds its terminal and files
        if proc.is_alive():  # pragma: no cover - SIGTERM ignored
            proc.kill()
            proc.join(timeout=5)
        conn.close()


def run_grid(
    jobs: Sequence[JobSpec],
    config: SimConfig,
    policies: Sequence[str],
    seeds: Sequence[int],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    out: str | os.PathLike | None = None,
    n_jobs: int = 1,
    record_timeline: bool = False,
    on_done: Callable[[RunSpec], object] | None = None,
    backend: str = "local",
    address: str | None = None,
    run_info: Mapping[str, Any] | None = None,
    extra_metrics: Mapping[str, Any] | None = None,
    completed: list[RunSpec] | None = None,
) -> dict[str, list[SimResult]]:
    """Run every policy on every seed; returns policy -> results in ``seeds`` order.

    ``n_jobs`` = 1 runs in this process; more uses that many spawned worker processes
    (never more than there are runs). Results are identical either way. With ``out``,
    run ``(p, s)`` is written (atomically, by this process) into ``out/<run_dirname(p)>/seed<s>``,
    with ``run_info`` in its ``run.json``; ``extra_metrics`` are added to every run's metrics.
    ``on_done`` is called after each run (in completion order), e.g. to advance a progress
    bar; ``completed``, if given, receives each finished run's spec as it completes (so a
    caller that is interrupted knows which run folders are complete).

    ``backend="ray"`` runs each (policy, seed) as a Ray task instead
    (:mod:`lyra_gym.harness.ray_backend`; ``address`` = a Ray cluster to connect to, default a
    local instance with ``n_jobs`` CPUs); the results are the same.
    """
    if backend not in BACKENDS:
        raise CompareError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if address and backend != "ray":
        raise CompareError("an address is only used with the ray backend")
    params = params or {}
    specs = [
        RunSpec(p, s, dict(params.get(p, {})),
                None if out is None else str(Path(out) / run_dirname(p) / f"seed{s}"), record_timeline,
                dict(run_info or {}), dict(extra_metrics or {}))
        for p in policies for s in seeds
    ]
    done: dict[tuple[str, int], SimResult] = {}

    def finished(spec: RunSpec) -> None:
        if completed is not None:
            completed.append(spec)
        if on_done:
            on_done(spec)

    workers = min(max(1, n_jobs), len(specs))
    if backend == "ray":
        done = ray_backend.run_specs_ray(specs, jobs, config, address, workers, finished)
    elif workers == 1:
        for spec in specs:
            done[spec.policy, spec.seed] = run_one(spec, jobs, config)
            finished(spec)
    else:
        def on_result(i: int, result: SimResult) -> None:
            spec = specs[i]
            if spec.out_dir is not None:
                write_result(result, spec.out_dir, spec.run_info)
            done[spec.policy, spec.seed] = result
            finished(spec)

        run_in_workers(run_one, [(replace(s, out_dir=None),) for s in specs], workers, on_result,
                       init_worker, (list(jobs), config),
                       describe=lambda i: f"run {specs[i].policy!r} seed {specs[i].seed}")
    return {p: [done[p, s] for s in seeds] for p in policies}
