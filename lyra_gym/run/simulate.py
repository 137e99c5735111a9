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
list of files) and, when recorded, ``timeline.csv`` and ``placements.csv``
(:mod:`lyra_gym.run.placements`).

:func:`check_out_dir` is the command line's check of a run folder before any
simulation (the output rule of :mod:`lyra_gym.outputs`: not a file, not under a file,
writable, never holding an input, empty unless overwriting, and holding nothing but a
run's own files, since the folder is replaced as a whole). Nothing is ever emptied.
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
from operator import itemgetter
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lyra_gym.sim import scheduler as registry
from lyra_gym.model.config import SimConfig, config_to_dict
from lyra_gym.model.demand import DEMAND_PRESETS, DemandCurve, DiurnalDemandConfig, diurnal_demand, load_demand_csv
from lyra_gym.sim.engine import Engine
from lyra_gym.run.metrics import JOB_COLUMNS, job_rows, summarize
from lyra_gym.provenance import provenance
from lyra_gym.outputs import TMP_MARK, Inputs, check_out_folder, owned_names, replace_folder
from lyra_gym.outputs import OutputError  # also for the older ``from lyra_gym.run.simulate import OutputError``
from lyra_gym.model.profiles import ProfileSet, builtin_profiles, load_profiles
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.run.placements import PlacementRecorder
from lyra_gym.run.timeline import Timeline, TimelineRecorder
from lyra_gym.model.jobspec import JobSpec


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
    curve's generator, the scheduler's generator and the duration estimates
    (:func:`build_engine`): same seed, same run.
    ``profiles`` and ``demand`` override the ones the config names.
    ``record_timeline`` samples the cluster after every decision
    (:mod:`lyra_gym.run.timeline`) into ``result.timeline``, with where every job ran in
    ``result.timeline.placements`` (:mod:`lyra_gym.run.placements`); it does not change the run.
    """
    config = config or SimConfig()
    scheduler = registry.make(policy, **(policy_params or {})) if isinstance(policy, str) else policy
    name = policy if isinstance(policy, str) else getattr(scheduler, "name", type(scheduler).__name__)
    engine = build_engine(jobs, scheduler, config, seed, profiles, demand, progress)
    timeline = None
    if record_timeline:  # Engine.run's loop, with a sample after every decision
        recorder, placed = TimelineRecorder(engine), PlacementRecorder(engine)
        engine.begin()
        while engine.next_decision():
            engine.submit(scheduler.decide(engine.view))
            recorder.record()
            placed.record()
        engine.finish()
        timeline = recorder.timeline()
        timeline.placements = placed.placements()
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
    """The engine of one run: the seed feeds ``SeedSequence(seed).spawn(3)`` = (demand noise,
    scheduler generator, duration estimates of ``config.knowledge``; the first two are what
    ``spawn(2)`` gave before the third existed). The estimates have a stream of their own, so
    every policy of one seed sees the same ones. The environments build theirs here too, so an
    episode and a ``simulate`` call with the same jobs, config and seed start from the same state."""
    demand_seq, policy_seq, knowledge_seq = np.random.SeedSequence(seed).spawn(3)
    if demand is None:
        demand = build_demand(config, jobs, np.random.default_rng(demand_seq))
    return Engine(
        jobs, scheduler, config, profiles or load_profile_set(config), demand,
        np.random.default_rng(policy_seq), progress=progress, knowledge_seed=knowledge_seq,
    )


RUN_FILES = ("metrics.json", "config.json", "policy.json", "jobs.csv", "run.json", "timeline.csv",
             "placements.csv")  # every name


def _run_files(result: SimResult) -> list[str]:
    files = ["metrics.json", "config.json", "policy.json", "jobs.csv", "run.json"]
    return files + (["timeline.csv", "placements.csv"] if result.timeline is not None else [])


def write_result(result: SimResult, out_dir: str | os.PathLike, run_info: Mapping[str, Any] | None = None) -> Path:
    """Write ``metrics.json``, ``jobs.csv``, the resolved ``config.json``, ``policy.json``
    (name, seed, scheduler parameters) and ``run.json`` (``run_info``: e.g. the trace's path
    and SHA-256, plus policy, seed, config and the file list) into ``out_dir``; also
    ``timeline.csv`` and ``placements.csv`` when the run recorded a timeline. Atomic (module docstring): the folder
    appears complete or not at all, and replaces any older folder of that name (a symbolic
    link is followed: the folder it points to is replaced, the link kept)."""
    out = Path(out_dir)
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    elif not out.name:  # "." or "..": a folder needs a name to be renamed into place
        out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}{TMP_MARK}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.mkdir(tmp)  # inside the try: an interrupt as it returns still removes it
        _write_files(result, tmp, run_info or {})
        replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Path(out_dir)


def _write_files(result: SimResult, out: Path, run_info: Mapping[str, Any]) -> None:
    meta = {"policy": result.policy, "seed": result.seed, **result.metrics, **provenance()}
    (out / "metrics.json").write_text(json.dumps(meta, indent=2) + "\n")
    config = config_to_dict(result.config)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    policy = {"policy": result.policy, "seed": result.seed, "params": result.policy_params}
    (out / "policy.json").write_text(json.dumps(policy, indent=2, default=str) + "\n")
    if result.timeline is not None:
        result.timeline.write_csv(out / "timeline.csv")
        if result.timeline.placements is not None:
            result.timeline.placements.write_csv(out / "placements.csv")
    with open(out / "jobs.csv", "w", newline="") as fh:
        writer = csv.writer(fh)  # None is written as "" (the csv module's rule)
        writer.writerow(JOB_COLUMNS)
        writer.writerows(map(itemgetter(*JOB_COLUMNS), result.jobs))
    run = {"policy": result.policy, "seed": result.seed, "policy_params": result.policy_params, **run_info,
           "config": config, **provenance(), "files": _run_files(result)}
    (out / "run.json").write_text(json.dumps(run, indent=2, default=str) + "\n")


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
    CSV :func:`lyra_gym.workloads.trace.write_trace` writes for it."""
    from lyra_gym.workloads.trace import write_trace

    info: dict[str, Any] = {"path": None if path is None else os.fspath(path), "jobs": len(jobs)}
    if generated is None and path is not None and Path(path).is_file():
        info["sha256"] = file_sha256(path)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            write_trace(jobs, Path(tmp) / "trace.csv")
            info["sha256"] = file_sha256(Path(tmp) / "trace.csv")
        info["generated"] = generated
    return info


def check_out_dir(path: str | os.PathLike, overwrite: bool = False, what: str = "--out", *,
                  inputs: Inputs | None = None) -> Path:
    """Check a run folder before any simulation; returns it, creates nothing
    (:func:`lyra_gym.outputs.check_out_folder` with ``owned`` = a run's own files, since
    :func:`write_result` replaces the folder as a whole). ``inputs``: ``{option: path}`` of
    what the run reads, which the folder must neither be nor hold. The working folder (or one
    holding it) is refused too."""
    out = check_out_folder(path, overwrite, inputs=inputs, owned=owned_names(*RUN_FILES), what=what)
    real, cwd = Path(os.path.realpath(out)), Path(os.path.realpath(os.getcwd()))
    if real == cwd or real in cwd.parents:
        raise OutputError(f"{what} {path}: is the working folder or holds it; a run folder is replaced as a "
                          f"whole, so choose a folder of its own")
    return out

