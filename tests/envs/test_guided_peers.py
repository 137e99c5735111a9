"""Pollux and Tiresias (and their +loan variants; lyra-backfill too) as the guided heuristic of the LyraGym envs and as
the imitation expert (issue 38 item 2): the neutral action reproduces each heuristic's own run bit
for bit, and each lever of :class:`~lyra_gym.sim.scheduler.Guidance` acts."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401 (registers the envs)
from lyra_baselines.guided import Classes, Levels, preempt_jobs
from lyra_baselines.pollux import PolluxLoanScheduler, PolluxScheduler
from lyra_baselines.pollux_optimizer import best_sizes
from lyra_baselines.tiresias import TiresiasLoanScheduler, TiresiasScheduler
from lyra_gym.model.demand import DemandCurve
from lyra_gym.model.jobs import JobState
from lyra_gym.run.simulate import build_engine, simulate
from lyra_gym.sim.scheduler import Guidance
from toy import TOY, config, job

PEERS = ("pollux", "pollux+loan", "tiresias", "tiresias+loan")
SMALL = dict(window_s=6 * 3600.0)


def expert_episode(env, seed=None, options=None):
    """Run one episode under ``expert_action()``; the final metrics without the wall time."""
    env.reset(seed=seed, options=options)
    while True:
        *_, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            return {k: v for k, v in info["final_metrics"].items() if k != "sim_wall_s"}


@pytest.mark.parametrize("env_id", ["LyraGym/Cluster-v1", "LyraGym/Cluster-v2"])
@pytest.mark.parametrize("heuristic", (*PEERS, "lyra-backfill"))
@pytest.mark.parametrize("seed, options", [(7, None), (None, {"split": "test", "window": 0})])
@pytest.mark.sample(4)
def test_expert_action_reproduces_the_heuristic(env_id, heuristic, seed, options):
    env = gym.make(env_id, heuristic=heuristic, **SMALL).unwrapped
    guided = expert_episode(env, seed, options)
    reference = simulate(env.window.jobs(env.trace), heuristic, env.sim_config, seed=env.window.seed).metrics
    assert guided == {k: v for k, v in reference.items() if k != "sim_wall_s"}
    assert guided["jobs_finished"] > 0


# --- each lever acts (toy cluster: one 4-GPU V100 training server, 4-GPU T4 inference servers) ----
SCHEDULERS = {
    "pollux": lambda: PolluxScheduler(tick_interval=None),
    "pollux+loan": lambda: PolluxLoanScheduler(tick_interval=None),
    "tiresias": lambda: TiresiasScheduler(tick_interval=None),
    "tiresias+loan": lambda: TiresiasLoanScheduler(tick_interval=None),
    "pollux preempt=false": lambda: PolluxScheduler(tick_interval=None, preempt=False),
    "tiresias mode=artifact": lambda: TiresiasScheduler(tick_interval=None, mode="artifact"),
}
VARIANTS = (*PEERS, "pollux preempt=false", "tiresias mode=artifact")


def first_decision(name, jobs, inference=0, demand=None):
    """The engine of ``jobs`` under the scheduler ``name``, at its first decision point."""
    cfg = config(gpus=4, inference=inference, rescale=0.0)
    engine = build_engine(jobs, SCHEDULERS[name](), cfg, 0, TOY, demand or DemandCurve.constant(0))
    engine.begin()
    assert engine.next_decision()
    return engine


def guided(engine, **guidance):
    """Submit the scheduler's decision under ``guidance``; the plan."""
    plan = engine.scheduler.decide_guided(engine.view, Guidance(**guidance))
    engine.submit(plan)
    return plan


@pytest.mark.parametrize("name", VARIANTS)
def test_a_held_queued_job_is_not_admitted(name):
    # a and b (2 GPUs each) fit together on the 4-GPU server; the agent holds a
    engine = first_decision(name, [job("a", 0.0, 2, 100.0), job("b", 0.0, 2, 100.0)])
    plan = guided(engine, job_levels={"a": 0, "b": 2})
    assert set(plan.allocations) == {"b"}
    assert engine.job_by_id("a").state is JobState.QUEUED
    assert engine.next_decision()  # a neutral decision then admits it
    assert "a" in guided(engine).allocations


@pytest.mark.parametrize("name", VARIANTS)
def test_a_higher_level_is_admitted_first(name):
    # a and b (4 GPUs each) arrive together; only one fits: a (first in trace order) unless b ranks higher
    jobs = [job("a", 0.0, 4, 100.0), job("b", 0.0, 4, 100.0)]
    assert set(first_decision(name, jobs).scheduler.decide(first_decision(name, jobs).view).allocations) == {"a"}
    engine = first_decision(name, jobs)
    assert set(guided(engine, job_levels={"b": 3}).allocations) == {"b"}


@pytest.mark.parametrize("name", (*PEERS, "tiresias mode=artifact"))
def test_a_higher_level_arrival_displaces_a_neutral_running_job(name):
    # a (4 GPUs) runs; b (4 GPUs) arrives at t=10. Neutral: b waits (same queue for Tiresias; Pollux
    # keeps the most running jobs). At level 3 it takes a's GPUs.
    for levels, running in (({}, "a"), ({"b": 3}, "b")):
        engine = first_decision(name, [job("a", 0.0, 4, 100.0), job("b", 10.0, 4, 100.0)])
        guided(engine)
        assert engine.next_decision() and engine.now == 10.0
        plan = guided(engine, job_levels=levels)
        assert set(plan.allocations) == {running}


@pytest.mark.parametrize("name", VARIANTS)
def test_a_preempted_job_goes_back_to_the_queue_and_waits_one_decision(name):
    engine = first_decision(name, [job("a", 0.0, 2, 100.0), job("b", 10.0, 2, 100.0)])
    guided(engine)
    assert engine.next_decision() and engine.now == 10.0
    plan = guided(engine, preempt=frozenset({"a", "b", "nobody"}))  # b is queued, nobody unknown: ignored
    assert set(plan.allocations) == {"b"}  # a's GPUs are free, yet it is not restarted now
    a = engine.job_by_id("a")
    assert a.state is JobState.QUEUED and engine.counts["preemptions"] == 1
    assert engine.next_decision()  # b's completion
    assert "a" in guided(engine).allocations and a.state is JobState.RUNNING  # the next decision restarts it


@pytest.mark.parametrize("name", ["pollux+loan", "tiresias+loan"])
def test_borrow_fraction_sets_how_many_servers_are_borrowed(name):
    jobs = [job("a", 0.0, 4, 100.0)]
    borrowed = {}
    for fraction in (None, 0.0, 0.5, 1.0):
        engine = first_decision(name, jobs, inference=4)
        borrowed[fraction] = len(engine.scheduler.decide_guided(engine.view, Guidance(borrow_fraction=fraction)).borrow)
    assert borrowed == {None: 4, 0.0: 0, 0.5: 2, 1.0: 4}


@pytest.mark.parametrize("name", ["pollux+loan", "tiresias+loan"])
def test_return_levels_choose_the_server_given_back(name):
    # a runs on the training server, b and c on one loaned server each; at t=10 inference wants
    # one server back: the one the agent ranks higher goes, whichever it is
    demand = DemandCurve(np.array([0.0, 10.0]), np.array([0, 1]))
    jobs = [job("a", 0.0, 4, 100.0), job("b", 0.0, 4, 100.0), job("c", 0.0, 4, 100.0)]
    for pick in (0, 1):
        engine = first_decision(name, jobs, inference=2, demand=demand)
        guided(engine)
        assert engine.next_decision() and engine.view.reclaim_pending == 1
        loaned = sorted(engine.view.loaned_servers())
        assert len(loaned) == 2 and all(engine.view.running_jobs())
        plan = guided(engine, return_levels={loaned[pick]: 2, loaned[1 - pick]: 0})
        assert tuple(plan.give_back) == (loaned[pick],)


@pytest.mark.parametrize("name", ["pollux", "pollux+loan"])
def test_pollux_holds_a_running_elastic_job_at_level_0_at_its_minimum(name):
    engine = first_decision(name, [job("x", 0.0, 4, 1000.0, elastic=True, lo=1, hi=4), job("y", 10.0, 1, 1.0)])
    guided(engine)
    assert engine.job_by_id("x").workers == 4
    assert engine.next_decision()
    guided(engine, job_levels={"x": 0})
    assert engine.job_by_id("x").workers == 1


def test_weights_move_gpus_to_the_heavier_job_in_the_power_mean():
    # two jobs of 1..3 GPUs with speed-up x at x GPUs, 4 GPUs, p = -1: sum of -w / x.
    # equal weights: (2, 2) -> -1 beats (3, 1) -> -1.33; weights (4, 1): (3, 1) -> -2.33 beats (2, 2) -> -2.5
    jobs = [(1, np.array([1.0, 2.0, 3.0])), (1, np.array([1.0, 2.0, 3.0]))]
    assert best_sizes(jobs, 4, -1.0) == best_sizes(jobs, 4, -1.0, [1.0, 1.0]) == [2, 2]
    assert best_sizes(jobs, 4, -1.0, [4.0, 1.0]) == [3, 1]
    assert best_sizes(jobs, 4, -1.0, [1.0, 4.0]) == [1, 3]


def test_neutral_guidance_is_inactive_and_keeps_tiresias_queues():
    keys = {"a": (0, 0.0, 0), "b": (2, 5.0, 1)}
    neutral = Levels({"a": 2, "b": 2})
    assert not neutral.active and not neutral.tiered
    classes = Classes(keys, 3, neutral)
    assert (classes.of("a"), classes.of("b"), classes.count) == (0, 2, 3)
    # b at level 4 (tier 0) ranks above a, neutral (tier 2): classes 2 and 6 of 15
    shifted = Classes(keys, 3, Levels({"b": 4}))
    assert (shifted.of("b"), shifted.of("a"), shifted.count) == (2, 6, 15)
    allocations = {"a": {0: 1}, "b": {0: 1}}
    assert preempt_jobs(allocations, {"b", "queued"}) == {"b"} and set(allocations) == {"a"}


@pytest.mark.parametrize("heuristic", ["pollux+loan", "tiresias+loan"])
def test_masked_random_guidance_gives_valid_plans_and_the_same_run_twice(heuristic):
    """Every lever at random (levels 0-4, borrow and return levels) through the engine's plan checks."""
    def run():
        env = gym.make("LyraGym/Cluster-v1", heuristic=heuristic, **SMALL).unwrapped
        env.reset(seed=3)
        rng = np.random.default_rng(3)
        bounds = np.cumsum(env.action_space.nvec)[:-1]
        rewards = []
        for _ in range(120):
            masks = np.split(np.asarray(env.action_masks(), dtype=bool), bounds)
            _, r, terminated, truncated, info = env.step(np.array([rng.choice(np.flatnonzero(m)) for m in masks]))
            rewards.append(r)
            if terminated or truncated:
                break
        return rewards, info["invalid_actions_total"], info["preemptions"]

    first = run()
    assert first == run() and first[1] == 0


@pytest.mark.parametrize("heuristic", ["pollux+loan", "tiresias+loan"])
def test_behaviour_cloning_imitates_the_guided_heuristic(heuristic):
    """``bc_expert: heuristic`` with ``heuristic: pollux+loan`` (or tiresias+loan): the demonstrations
    are the env's neutral actions (that heuristic's own run) and cloning fits them."""
    from lyra_agents.config import TrainConfig
    from lyra_agents.factory import build_training_envs, make_model
    from lyra_agents.imitation import behaviour_clone, collect_demonstrations

    cfg = TrainConfig(env_id="LyraGym/Cluster-v1", heuristic=heuristic, window_s=6 * 3600.0, num_job_slots=4,
                      num_server_slots=2, n_envs=1, vec_env="dummy", n_steps=32, batch_size=32,
                      net_arch=[16], device="cpu", seed=1)
    venv = build_training_envs(cfg)
    assert venv.get_attr("heuristic_name") == [heuristic]
    model = make_model(cfg, venv)
    demos = collect_demonstrations(venv, 64, cfg.gamma)
    neutral = venv.env_method("expert_action")[0]  # the expert's action is the neutral one ...
    k = cfg.num_job_slots
    assert (demos.actions[:, k:] == neutral[k:]).all()  # ... borrow all, return levels neutral
    assert set(demos.actions[:, :k].ravel()) <= {0, 2}  # job slots: neutral, or 0 where no job is
    history = behaviour_clone(model, demos, epochs=3, batch_size=32, learning_rate=1e-3, seed=0, normalizer=venv)
    assert history[-1]["nll"] < history[0]["nll"]
    venv.close()
