"""Run one simulation end to end and write its results (the library face of the CLI)."""

from __future__ import annotations

import csv
import json
import os
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


def write_result(result: SimResult, out_dir: str | os.PathLike) -> Path:
    """Write ``metrics.json``, ``jobs.csv``, the resolved ``config.json`` and ``policy.json``
    (name, seed, scheduler parameters) into ``out_dir``; also ``timeline.csv`` when the
    run recorded a timeline."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"policy": result.policy, "seed": result.seed, **result.metrics}
    (out / "metrics.json").write_text(json.dumps(meta, indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(config_to_dict(result.config), indent=2) + "\n")
    policy = {"policy": result.policy, "seed": result.seed, "params": result.policy_params}
    (out / "policy.json").write_text(json.dumps(policy, indent=2, default=str) + "\n")
    if result.timeline is not None:
        result.timeline.write_csv(out / "timeline.csv")
    with open(out / "jobs.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=JOB_COLUMNS)
        writer.writeheader()
        for row in result.jobs:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return out
