"""Shared pieces of the asv suite: paths, the clusters, the scaled lyra-15d trace, masked actions.

Written against the public API that older commits also have (``ClusterConfig``, ``generate_trace``,
``dataclasses.replace`` on a preset; the flat import paths before the wings layout), so
``asv continuous OLD NEW`` can run them on both sides.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

try:  # the wings layout (issue 28)
    from lyra_gym.model.config import ClusterConfig, ServerGroup, SimConfig
    from lyra_gym.model.jobspec import JobSpec
    from lyra_gym.run.simulate import build_engine, simulate
    from lyra_gym.sim import scheduler as registry
    from lyra_gym.workloads.tracegen import PRESETS, generate_trace
except ImportError:  # commits before it: the flat modules
    from lyra_gym import scheduler as registry  # type: ignore[no-redef]
    from lyra_gym.config import ClusterConfig, ServerGroup, SimConfig  # type: ignore[no-redef]
    from lyra_gym.simulate import build_engine, simulate  # type: ignore[no-redef]
    from lyra_gym.trace import JobSpec  # type: ignore[no-redef]
    from lyra_gym.tracegen import PRESETS, generate_trace  # type: ignore[no-redef]

__all__ = ["build_engine", "registry", "simulate"]  # re-exported for engine.py, from whichever layout

#: The repository root (this file is benchmarks/asv_bench/_common.py); asv runs the benchmarks of
#: the working tree against each commit's installed package, so data files come from here.
ROOT = Path(__file__).resolve().parents[2]

#: The benchmark cluster: 128 x 8 V100 = 1,024 training GPUs, 32 x 8 T4 inference servers
#: (assumption; benchmarks/bench_cluster.yaml, the same as lyra-15d's loan-scarce cluster).
BENCH_CLUSTER = ClusterConfig(training=(ServerGroup(128, "v100", 8),), inference=ServerGroup(32, "t4", 8))


def paper_cluster(scale: int) -> ClusterConfig:
    """lyra-15d's "paper" cluster (128 x 8 V100 training, 160 x 8 T4 inference) ``scale`` times over
    (``lyra_gym.workloads.presets_calibrated.lyra_15d_cluster(paper=True, scale=...)``): x10 is 1,280 x 8 V100
    (10,240 GPUs) and 1,600 x 8 T4 (12,800 GPUs)."""
    return ClusterConfig(training=(ServerGroup(128 * scale, "v100", 8),), inference=ServerGroup(160 * scale, "t4", 8))


@cache
def bench_15d(days: float | None = None) -> tuple[JobSpec, ...]:
    """``generate_trace('bench-15d', 0)``; with ``days``, only the jobs submitted in the first ``days``."""
    jobs = generate_trace("bench-15d", 0)
    return tuple(jobs if days is None else [j for j in jobs if j.submit_time < days * 86_400])


def lyra_15d_preset(scale: int, days: float):
    """``scaled_preset('lyra-15d', scale, days)``: the lyra-15d shape at ``scale`` x the jobs and the
    reference cluster over its first ``days`` days (floor(50,000 x scale x days / 15) jobs). Built with
    ``replace`` where the commit under test predates ``scaled_preset`` (same jobs: name and
    description do not enter the generator)."""
    scaled_preset = getattr(sys.modules[generate_trace.__module__], "scaled_preset", None)  # either layout
    if scaled_preset is None:
        return _replaced_preset(scale, days)
    return scaled_preset("lyra-15d", scale, days)


def _replaced_preset(scale: int, days: float):
    """:func:`lyra_15d_preset` where ``scaled_preset`` does not exist yet."""
    base = PRESETS["lyra-15d"]
    return replace(base, days=float(days), num_jobs=math.floor(base.num_jobs * scale * days / base.days),
                   reference_gpus=base.reference_gpus * scale)


@cache
def lyra_15d(scale: int, days: float) -> tuple[JobSpec, ...]:
    """The jobs of :func:`lyra_15d_preset` at seed 0."""
    return tuple(generate_trace(lyra_15d_preset(scale, days), 0))


def paper_config(scale: int) -> SimConfig:
    return SimConfig(cluster=paper_cluster(scale))


def masked_action(env, rng: np.random.Generator) -> np.ndarray:
    """Uniform over each dimension's valid values of a MultiDiscrete env (vectorised; a loop only
    for partial masks)."""
    nvec, masks = env.action_space.nvec, env.action_masks()
    offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
    counts = np.add.reduceat(masks.astype(np.int64), offsets)
    local = np.arange(len(masks)) - np.repeat(offsets, nvec)
    first = np.minimum.reduceat(np.where(masks, local, np.iinfo(np.int64).max), offsets)
    action = np.where(counts == nvec, rng.integers(nvec), first)
    for d in np.flatnonzero((counts > 1) & (counts < nvec)):
        action[d] = rng.choice(np.flatnonzero(masks[offsets[d]:offsets[d] + nvec[d]]))
    return action
