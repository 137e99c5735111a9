"""The comparison harness: every (policy, seed) run of a comparison, serial or in parallel.

Every run is independent: it builds its scheduler from the registry by name
with its parameters, and takes all randomness from its seed
(:func:`lyra_gym.simulate.build_engine`), so running it in this process or in a
worker process gives the same result bit for bit (only ``sim_wall_s``, a wall
clock, differs). Workers are started with the ``spawn`` method on every
platform: a clean interpreter per worker (no forked threads or locks), the same
behaviour on Linux, macOS and Windows. Each worker receives the trace and the
configuration once, at start-up, then runs :func:`run_one` on the tasks it is
given and writes that run's result folder itself.

Schedulers are looked up by name in each worker, so a scheduler must be
findable through the entry-point groups there; one registered with
:func:`lyra_gym.scheduler.register` in the parent process alone is only
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
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import yaml

from lyra_gym import scheduler as registry
from lyra_gym.config import SimConfig
from lyra_gym.simulate import SimResult, simulate, write_result
from lyra_gym.trace import JobSpec


class CompareError(ValueError):
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


BACKENDS = ("local", "ray")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPONENT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # YAML 1.1 reads "1e5" as a string


def parse_policy_param(item: str) -> tuple[str, str, Any]:
    """``"NAME.KEY=VALUE"`` -> ``(NAME, KEY, value)``; VALUE is parsed as a YAML scalar."""
    left, eq, raw = item.partition("=")
    name, dot, key = left.strip().rpartition(".")
    if not eq or not dot or not name or not _KEY.fullmatch(key):
        raise CompareError(f"--policy-param {item!r}: expected NAME.KEY=VALUE, e.g. lyra.reclaim_rule=random")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise CompareError(f"--policy-param {item!r}: VALUE is not a YAML scalar ({err})") from None
    if isinstance(value, str) and _EXPONENT.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, (dict, list)):
        raise CompareError(f"--policy-param {item!r}: VALUE must be a scalar, got a {type(value).__name__}")
    return name, key, value


def parse_policy_params(items: Sequence[str], policies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Every policy's parameters from repeated ``NAME.KEY=VALUE`` items (later ones win);
    a NAME that is not among ``policies`` is an error."""
    params: dict[str, dict[str, Any]] = {p: {} for p in policies}
    for item in items:
        name, key, value = parse_policy_param(item)
        if name not in params:
            raise CompareError(
                f"--policy-param {item!r}: policy {name!r} is not among the policies run ({', '.join(policies)})")
        params[name][key] = value
    return params


def check_policies(policies: Sequence[str], params: Mapping[str, Mapping[str, Any]]) -> None:
    """Fail before any run: unknown names, repeated names, parameters a scheduler rejects.

    Schedulers with parameters are built once here to check them. A ``PREFIX:ARG`` name
    needs a known loader prefix; without parameters, its loader runs only in the run."""
    seen: set[str] = set()
    for p in policies:
        if p in seen:
            raise CompareError(f"policy {p!r} is listed twice")
        seen.add(p)
        if p in registry.available():
            continue
        prefix, sep, _ = p.partition(":")
        if not sep:
            raise registry.UnknownSchedulerError(
                f"unknown scheduler {p!r} (available: {', '.join(registry.available())})")
        loaders = sorted(ep.name for ep in entry_points(group=registry.PREFIX_ENTRY_POINT_GROUP))
        if prefix not in loaders:
            raise registry.UnknownSchedulerError(
                f"unknown scheduler loader {prefix!r} in {p!r} (available: {', '.join(loaders) or 'none'})")
    for p in policies:
        if params.get(p):
            try:
                registry.make(p, **params[p])
            except (TypeError, ValueError) as err:
                shown = ", ".join(f"{k}={v!r}" for k, v in params[p].items())
                raise CompareError(f"--policy-param for {p!r} ({shown}): {err}") from None


def run_dirname(policy: str) -> str:
    """The folder of a policy's runs: the name, with characters other than letters, digits and
    ``.+-_=,`` replaced by ``_`` (``model:runs/x/model.zip`` -> ``model_runs_x_model.zip``)."""
    return re.sub(r"[^A-Za-z0-9.+\-_=,]", "_", policy).strip(".") or "_"


@dataclass(frozen=True)
class RunSpec:
    """One run of a comparison; ``out_dir`` (if set) receives :func:`write_result`'s files."""

    policy: str
    seed: int
    params: Mapping[str, Any] = field(default_factory=dict)
    out_dir: str | None = None
    record_timeline: bool = False


_worker_inputs: dict[str, Any] = {}  # set once per worker process by _init_worker


def _init_worker(jobs: Sequence[JobSpec], config: SimConfig) -> None:
    _worker_inputs["jobs"], _worker_inputs["config"] = jobs, config


def run_one(spec: RunSpec, jobs: Sequence[JobSpec] | None = None, config: SimConfig | None = None) -> SimResult:
    """Run ``spec`` (top-level, so a spawned worker can unpickle it); ``jobs`` and ``config``
    default to the worker's. Any failure becomes a picklable :class:`RunError`."""
    jobs = _worker_inputs["jobs"] if jobs is None else jobs
    config = _worker_inputs["config"] if config is None else config
    try:
        result = simulate(jobs, spec.policy, config, seed=spec.seed, policy_params=dict(spec.params),
                          record_timeline=spec.record_timeline)
        if spec.out_dir is not None:
            write_result(result, spec.out_dir)
        return result
    except Exception as err:  # noqa: BLE001 - reported with its traceback, in the parent
        raise RunError(f"run {spec.policy!r} seed {spec.seed} failed: {type(err).__name__}: {err}",
                       traceback.format_exc()) from None


def run_grid(
    jobs: Sequence[JobSpec],
    config: SimConfig,
    policies: Sequence[str],
    seeds: Sequence[int],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    out: str | os.PathLike | None = None,
    n_jobs: int = 1,
    record_timeline: bool = False,
    on_done: Callable[[RunSpec], None] | None = None,
    backend: str = "local",
    address: str | None = None,
) -> dict[str, list[SimResult]]:
    """Run every policy on every seed; returns policy -> results in ``seeds`` order.

    ``n_jobs`` = 1 runs in this process; more uses that many spawned worker processes
    (never more than there are runs). Results are identical either way. With ``out``,
    run ``(p, s)`` writes into ``out/<run_dirname(p)>/seed<s>``. ``on_done`` is called
    after each run (in completion order), e.g. to advance a progress bar.

    ``backend="ray"`` runs each (policy, seed) as a Ray task instead
    (:mod:`lyra_gym.ray_backend`; ``address`` = a Ray cluster to connect to, default a
    local instance with ``n_jobs`` CPUs); the results are the same.
    """
    if backend not in BACKENDS:
        raise CompareError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    if address and backend != "ray":
        raise CompareError("an address is only used with the ray backend")
    params = params or {}
    specs = [
        RunSpec(p, s, dict(params.get(p, {})),
                None if out is None else str(Path(out) / run_dirname(p) / f"seed{s}"), record_timeline)
        for p in policies for s in seeds
    ]
    done: dict[tuple[str, int], SimResult] = {}
    workers = min(max(1, n_jobs), len(specs))
    if backend == "ray":
        from lyra_gym.ray_backend import run_specs_ray

        done = run_specs_ray(specs, jobs, config, address, workers, on_done)
    elif workers == 1:
        for spec in specs:
            done[spec.policy, spec.seed] = run_one(spec, jobs, config)
            if on_done:
                on_done(spec)
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                 initargs=(list(jobs), config)) as pool:
            futures = {pool.submit(run_one, spec): spec for spec in specs}
            try:
                for future in as_completed(futures):
                    spec = futures[future]
                    done[spec.policy, spec.seed] = future.result()
                    if on_done:
                        on_done(spec)
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    return {p: [done[p, s] for s in seeds] for p in policies}
