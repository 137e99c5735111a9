"""Shared helpers for hand-computed tests.

The toy profile makes arithmetic easy: model ``toy`` trains 1 sample/s per V100
and 0.5 samples/s per T4, with free all-reduce, so n workers give n (or n/2)
samples/s and a job's work is duration x requested GPUs. Model ``flat`` does
not scale: more than one worker is slower than one.
"""

from __future__ import annotations

from lyra_baselines.lyra import LyraScheduler
from lyra_gym.model.config import ClusterConfig, OverheadConfig, ServerGroup, SimConfig
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import parse_profiles
from lyra_gym.run.simulate import SimResult, build_engine, simulate
from lyra_gym.sim.engine import Engine

TOY = parse_profiles({
    "format": "lyra-gym-profiles/1",
    "metadata": {"reference_gpu": "v100"},
    "models": {
        "toy": {"local_batch": 1, "restart_overhead_s": 0, "gpus": {
            "v100": {"step_compute_s": 1.0, "allreduce_intra_s": 0.0, "allreduce_inter_s": 0.0},
            "t4": {"step_compute_s": 2.0, "allreduce_intra_s": 0.0, "allreduce_inter_s": 0.0},
        }},
        # all-reduce of 1e6 s: any second worker makes the job slower than one worker alone
        "flat": {"local_batch": 1, "restart_overhead_s": 0, "gpus": {
            "v100": {"step_compute_s": 1.0, "allreduce_intra_s": 1e6, "allreduce_inter_s": 1e6},
            "t4": {"step_compute_s": 2.0, "allreduce_intra_s": 1e6, "allreduce_inter_s": 1e6},
        }},
    },
})


def job(job_id: str, submit: float, gpus: int, duration: float, elastic: bool = False,
        lo: int | None = None, hi: int | None = None, model: str = "toy") -> JobSpec:
    """A toy-profile job; ``lo``/``hi`` default to ``gpus``."""
    return JobSpec(job_id, submit, gpus, duration, model, elastic, lo or gpus, hi or gpus)


def config(training: int = 1, gpus: int = 8, inference: int = 0, restart: float = 0.0,
           rescale: float = 30.0, grace: float = 0.0, inference_gpu: str = "t4", **overheads) -> SimConfig:
    """One V100 training group and one inference group of ``gpus``-GPU servers."""
    return SimConfig(
        cluster=ClusterConfig(training=(ServerGroup(training, "v100", gpus),),
                              inference=ServerGroup(inference, inference_gpu, gpus)),
        overheads=OverheadConfig(rescale_s=rescale, restart_s=restart, **overheads),
        reclaim_grace_s=grace,
    )


def run(jobs, policy, cfg: SimConfig, demand: DemandCurve | None = None, seed: int = 0) -> SimResult:
    """simulate() with the toy profile and (default) no inference demand at all."""
    return simulate(jobs, policy, cfg, seed=seed, profiles=TOY, demand=demand or DemandCurve.constant(0))


def jct(result: SimResult, job_id: str) -> float:
    return next(r for r in result.jobs if r["job_id"] == job_id)["jct_s"]


def engine_at_first_decision(jobs, training=1, gpus=4, inference=0, demand=None) -> Engine:
    """A Lyra engine on ``training`` V100 servers of ``gpus`` GPUs (and ``inference`` 8-GPU T4 servers),
    no overheads, no demand unless given, stopped at its first decision point."""
    cfg = SimConfig(cluster=ClusterConfig(training=(ServerGroup(training, "v100", gpus),),
                                          inference=ServerGroup(inference, "t4", 8)),
                    overheads=OverheadConfig(rescale_s=0.0, restart_s=0.0, migrate_s=0.0))
    engine = build_engine(jobs, LyraScheduler(), cfg, 0, TOY, demand=demand or DemandCurve.constant(0))
    engine.begin()
    assert engine.next_decision()
    return engine


def one_running_one_queued() -> Engine:
    """Two jobs on one 4-GPU server: ``a`` (2 GPUs) running, ``b`` (2 GPUs) queued."""
    engine = engine_at_first_decision([job("a", 0.0, 2, 100.0), job("b", 0.0, 2, 100.0)])
    plan = engine.view.current_plan()
    plan.assign("a", {0: 2})
    assert engine.submit(plan)
    return engine


def masked_random_rollout(env_id: str, steps: int, seed: int) -> None:
    """``steps`` uniformly random valid actions (``action_masks()``) in a fresh ``env_id`` reset with
    ``seed``, resetting at each episode's end (what the tests that watch a guided env's decisions run)."""
    import gymnasium as gym
    import numpy as np

    import lyra_gym  # noqa: F401  (registers the envs)

    env = gym.make(env_id)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    bounds = np.cumsum(env.action_space.nvec)[:-1]
    for _ in range(steps):
        masks = np.split(np.asarray(env.unwrapped.action_masks(), dtype=bool), bounds)
        _, _, terminated, truncated, _ = env.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
        if terminated or truncated:
            env.reset()
