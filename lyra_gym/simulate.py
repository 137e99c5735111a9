"""Run one simulation end to end and write its results (the library face of the CLI).

Outputs
-------
:func:`write_result` writes a run folder *atomically*: into a hidden sibling
``.<name>.tmp-<pid>-<random>`` first, renamed to its final name once every file is
complete (an existing folder of that name is replaced as a whole, so no file of
an older run survives beside a newer one). An interrupted write removes its
temporary folder; a killed process may leave one behind, never a half-written
run folder. Each run folder holds ``metrics.json``, ``jobs.csv``, ``config.json``,
``policy.json``, ``run.json`` (what produced it: policy and parameters, seed,
trace path and SHA-256 of its content, config file and resolved config, and the
list of files) and, when recorded, ``timeline.csv``.

:func:`check_out_dir` is the command line's check of an output folder before any
simulation (not a file, not under a file, writable, empty unless overwriting);
:func:`clear_out_dir` empties it for ``--overwrite``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lyra_gym import scheduler as registry
from lyra_gym.config import SimConfig, config_to_dict
from lyra_gym.demand import DEMAND_PRESETS, DemandCurve, DiurnalDemandConfig, diurnal_demand, load_demand_csv
from lyra_gym.engine import Engine
from lyra_gym.metrics import JOB_COLUMNS, job_rows, summarize
from lyra_gym.profiles import ProfileSet, builtin_profiles, load_profiles
from lyra_gym.scheduler import Scheduler
from lyra_gym.timeline import Timeline, TimelineRecorder
from lyra_gym.trace import JobSpec


@dataclass
class SimResult:
    """Metrics (``metrics.json`` keys), per-job rows, and what produced them.

    ``timeline`` is the cluster over time when the run recorded one
    (``simulate(..., record_timeline=True)``), else None; ``policy_params`` are the
    parameters the scheduler was built with (empty: its defaults).
    """

    policy: str
    seed: int
    metrics: dict[str, Any]
    jobs: list[dict[str, Any]]
    config: SimConfig
    timeline: Timeline | None = None
    policy_params: dict[str, Any] = field(default_factory=dict)


def load_profile_set(config: SimConfig) -> ProfileSet:
    return load_profiles(config.profiles) if config.profiles else builtin_profiles()


def build_demand(config: SimConfig, jobs: Sequence[JobSpec], rng: np.random.Generator) -> DemandCurve:
    """The inference demand of a run: the CSV if configured, else the synthetic diurnal curve."""
    if config.demand_csv:
        return load_demand_csv(config.demand_csv)
    if config.cluster.inference.count == 0:
        return DemandCurve.constant(0)
    shape = config.demand
    if config.demand_preset:  # the preset's own settings override the demand block's
        preset, default = DEMAND_PRESETS[config.demand_preset], DiurnalDemandConfig()
        shape = replace(shape, **{f.name: getattr(preset, f.name) for f in fields(preset)
                                  if getattr(preset, f.name) != getattr(default, f.name)})
    demand = replace(shape, num_servers=config.cluster.inference.count)
    last_submit = max((j.submit_time for j in jobs), default=0.0)
    return diurnal_demand(demand, last_submit + config.demand_horizon_pad_s, rng)


def simulate(
    jobs: Sequence[JobSpec],
    policy: str | Scheduler,
    config: SimConfig | None = None,
    seed: int = 0,
    policy_params: Mapping[str, Any] | None = None,
    profiles: ProfileSet | None = None,
    progress: bool = False,
    demand: DemandCurve | None = None,
    record_timeline: bool = False,
) -> SimResult:
    """Simulate ``jobs`` under ``policy`` (a registry name or a Scheduler instance).

    The seed feeds one ``numpy.random.SeedSequence``, split into the demand
    curve's generator and the scheduler's generator: same seed, same run.
    ``profiles`` and ``demand`` override the ones the config names.
    ``record_timeline`` samples the cluster after every decision
    (:mod:`lyra_gym.timeline`) into ``result.timeline``; it does not change the run.
    """
    config = config or SimConfig()
    scheduler = registry.make(policy, **(policy_params or {})) if isinstance(policy, str) else policy
    name = policy if isinstance(policy, str) else getattr(scheduler, "name", type(scheduler).__name__)
    engine = build_engine(jobs, scheduler, config, seed, profiles, demand, progress)
    timeline = None
    if record_timeline:  # Engine.run's loop, with a sample after every decision
        recorder = TimelineRecorder(engine)
        engine.begin()
        while engine.next_decision():
            engine.submit(scheduler.decide(engine.view))
            recorder.record()
        engine.finish()
        timeline = recorder.timeline()
    else:
        engine.run()
    return SimResult(name, seed, summarize(engine), job_rows(engine), config, timeline, dict(policy_params or {}))


def build_engine(
    jobs: Sequence[JobSpec],
    scheduler: Scheduler,
    config: SimConfig,
    seed: int,
    profiles: ProfileSet | None = None,
    demand: DemandCurve | None = None,
    progress: bool = False,
) -> Engine:
    """The engine of one run: the seed feeds ``SeedSequence(seed).spawn(2)`` = (demand noise,
    scheduler generator). The environments build theirs here too, so an episode and a
    ``simulate`` call with the same jobs, config and seed start from the same state."""
    demand_seq, policy_seq = np.random.SeedSequence(seed).spawn(2)
    if demand is None:
        demand = build_demand(config, jobs, np.random.default_rng(demand_seq))
    return Engine(
        jobs, scheduler, config, profiles or load_profile_set(config), demand,
        np.random.default_rng(policy_seq), progress=progress,
    )


TMP_MARK = ".tmp-"  # in the name of a run folder being written (see the module docstring)


def _run_files(result: SimResult) -> list[str]:
    files = ["metrics.json", "config.json", "policy.json", "jobs.csv", "run.json"]
    return files + (["timeline.csv"] if result.timeline is not None else [])


def write_result(result: SimResult, out_dir: str | os.PathLike, run_info: Mapping[str, Any] | None = None) -> Path:
    """Write ``metrics.json``, ``jobs.csv``, the resolved ``config.json``, ``policy.json``
    (name, seed, scheduler parameters) and ``run.json`` (``run_info``: e.g. the trace's path
    and SHA-256, plus policy, seed, config and the file list) into ``out_dir``; also
    ``timeline.csv`` when the run recorded a timeline. Atomic (module docstring): the folder
    appears complete or not at all, and replaces any older folder of that name."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(tmp)
    try:
        _write_files(result, tmp, run_info or {})
        if out.exists() or out.is_symlink():
            old = out.parent / f".{out.name}.old{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write_files(result: SimResult, out: Path, run_info: Mapping[str, Any]) -> None:
    meta = {"policy": result.policy, "seed": result.seed, **result.metrics}
    (out / "metrics.json").write_text(json.dumps(meta, indent=2) + "\n")
    config = config_to_dict(result.config)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    policy = {"policy": result.policy, "seed": result.seed, "params": result.policy_params}
    (out / "policy.json").write_text(json.dumps(policy, indent=2, default=str) + "\n")
    if result.timeline is not None:
        result.timeline.write_csv(out / "timeline.csv")
    with open(out / "jobs.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=JOB_COLUMNS)
        writer.writeheader()
        for row in result.jobs:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    run = {"policy": result.policy, "seed": result.seed, "policy_params": result.policy_params, **run_info,
           "config": config, "lyra_gym_version": _version(), "files": _run_files(result)}
    (out / "run.json").write_text(json.dumps(run, indent=2, default=str) + "\n")


def _version() -> str | None:
    try:
        from importlib.metadata import version

        return version("lyra-gym")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return None


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trace_info(path: str | os.PathLike | None, jobs: Sequence[JobSpec], generated: str | None = None) -> dict[str, Any]:
    """The ``trace`` entry of ``run.json``: path, SHA-256 of the file's content, job count.

    A trace that was generated rather than read (``generated`` says how) is hashed as the
    CSV :func:`lyra_gym.trace.write_trace` writes for it."""
    from lyra_gym.trace import write_trace

    info: dict[str, Any] = {"path": None if path is None else os.fspath(path), "jobs": len(jobs)}
    if generated is None and path is not None and Path(path).is_file():
        info["sha256"] = file_sha256(path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            write_trace(jobs, Path(tmp) / "trace.csv")
            info["sha256"] = file_sha256(Path(tmp) / "trace.csv")
        info["generated"] = generated
    return info


class OutputError(ValueError):
    """An output folder cannot be used (a file, under a file, not writable, not empty); one line."""


def check_out_dir(path: str | os.PathLike, overwrite: bool = False, what: str = "--out") -> Path:
    """Check an output folder before any simulation; returns it. Creates nothing.

    Refused: a path that is a file or lies under a file, a folder whose nearest existing
    ancestor is not writable (probed by creating and removing a temporary file, so read-only
    file systems are caught too), and an existing non-empty folder unless ``overwrite``.
    """
    out = Path(path)
    if not os.fspath(path):
        raise OutputError(f"{what}: empty path")
    if out.exists() and not out.is_dir():
        raise OutputError(f"{what} {path}: is a file, not a folder")
    probe = out
    while not probe.exists():
        if probe.is_symlink():
            raise OutputError(f"{what} {path}: {probe} is a broken symbolic link")
        parent = probe.parent
        if parent == probe:
            break
        probe = parent
    if probe.exists() and not probe.is_dir():
        raise OutputError(f"{what} {path}: {probe} is a file, so no folder can be made under it")
    try:
        fd, name = tempfile.mkstemp(prefix=".lyra-gym-write-test-", dir=probe)
        os.close(fd)
        os.unlink(name)
    except OSError as err:
        raise OutputError(f"{what} {path}: cannot write in {probe} ({err.strerror or err})") from None
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise OutputError(f"{what} {path}: exists and is not empty; pass --overwrite to replace its contents, "
                          f"or choose another folder")
    return out


def clear_out_dir(path: str | os.PathLike, what: str = "--out") -> None:
    """Empty an output folder for ``--overwrite`` (the folder itself is kept). Refuses the
    root, the home folder, the working folder or one of its ancestors, and a git checkout."""
    out = Path(path)
    if not out.is_dir():
        return
    real = out.resolve()
    cwd = Path.cwd().resolve()
    if real == Path(real.anchor) or real == Path.home().resolve() or real == cwd or real in cwd.parents \
            or (real / ".git").exists():
        raise OutputError(f"{what} {path}: refusing to clear {real} with --overwrite "
                          f"(the root, home or working folder, or a git checkout); choose a dedicated folder")
    for child in out.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
