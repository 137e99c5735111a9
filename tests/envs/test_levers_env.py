"""The ``-v2`` guided environments (issue 38 items 1, 3 and 8): preemption in the action space,
slots over the running jobs, exact masks, auto-commit; the neutral action is still the heuristic.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from lyra_gym.envs.levers import PREEMPT
from lyra_gym.model.jobs import JobState
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.scheduler import NEUTRAL_JOB_LEVEL

ROOT = Path(__file__).resolve().parents[2]
CONTENDED = str(ROOT / "traces" / "contended.yaml")
SHORT = dict(window_s=4 * 3600.0)
V2_IDS = ("LyraGym/Cluster-v2", "LyraGym/Loaning-v2", "LyraGym/Elastic-v2")


def random_action(env, rng, preempt_share=0.05):
    """A masked random action that preempts rarely (a job slot draws PREEMPT with ``preempt_share``)."""
    masks, codec = env.action_masks(), env.codec
    action = []
    for offset, size in zip(codec.offsets, codec.nvec):
        valid = np.flatnonzero(masks[offset:offset + size])
        if size == PREEMPT + 1 and PREEMPT in valid and rng.random() >= preempt_share:
            valid = valid[valid != PREEMPT]
        action.append(int(rng.choice(valid)))
    return np.array(action)


def play(env, seed, policy, options=None):
    obs, info = env.reset(seed=seed, options=options)
    rng = np.random.default_rng(seed)
    rewards, infos, done = [], [info], False
    while not done:
        obs, r, term, trunc, info = env.step(policy(env, rng))
        rewards.append(r)
        infos.append(info)
        done = term or trunc
    return rewards, infos


def metrics(final):
    return {k: v for k, v in final.items() if k != "sim_wall_s"}


@pytest.mark.parametrize("env_id, kwargs", [
    ("LyraGym/Cluster-v2", dict(config=CONTENDED, **SHORT)),
    ("LyraGym/Loaning-v2", dict(config=CONTENDED, **SHORT)),
    ("LyraGym/Elastic-v2", dict(num_job_slots=8, window_s=4 * 3600.0, warmup_s=2 * 3600.0)),
])
def test_expert_action_reproduces_the_heuristic_bit_for_bit(env_id, kwargs):
    env = gym.make(env_id, **kwargs).unwrapped
    _, infos = play(env, 3, lambda e, rng: e.expert_action())
    reference = simulate(env.window.jobs(env.trace), "lyra", env.sim_config, seed=env.window.seed).metrics
    assert metrics(infos[-1]["final_metrics"]) == metrics(reference)


@pytest.mark.parametrize("v2, v1", [("LyraGym/Cluster-v2", "LyraGym/Cluster-v1"),
                                    ("LyraGym/Loaning-v2", "LyraGym/Loaning-v1")])
def test_auto_commit_skips_only_choiceless_points_and_keeps_the_return(v2, v1):
    """Under the expert both see the same decision points: v1 shows all of them, v2 all but the
    auto-committed ones; the returns (gamma = 1) are equal, i.e. -(total JCT) / scale."""
    new = gym.make(v2, config=CONTENDED, **SHORT).unwrapped
    old = gym.make(v1, config=CONTENDED, **SHORT).unwrapped
    new_rewards, new_infos = play(new, 5, lambda e, rng: e.expert_action())
    old_rewards, _ = play(old, 5, lambda e, rng: e.expert_action())
    auto = new_infos[-1]["auto_committed_total"]
    assert auto == sum(info["auto_committed"] for info in new_infos)
    assert len(new_rewards) + auto == len(old_rewards)
    assert sum(new_rewards) == pytest.approx(sum(old_rewards), rel=1e-12)
    if v2 == "LyraGym/Loaning-v2":
        assert auto > 0  # arrivals and completions with nothing to borrow or return


def test_masks_are_exact_and_running_jobs_have_slots():
    """At every step of a random rollout: the mask follows the rule from each slot's job, the
    running jobs all have a slot when K allows, and info counts the others."""
    env = gym.make("LyraGym/Cluster-v2", config=CONTENDED, num_job_slots=12, **SHORT).unwrapped
    env.reset(seed=2)
    rng = np.random.default_rng(2)
    k, codec, cut = env.k, env.codec, 0
    for _ in range(150):
        masks, engine = env.action_masks(), env.engine
        running = [engine.jobs[i].spec.job_id for i in engine.running]
        shown = [job.id for job in env.slots]
        assert set(running[:k]) <= set(shown) or len(running) > k
        assert set(shown) >= set(running) or len(set(shown) & set(running)) == k
        info = env._info(0)
        assert info["running_unseen"] == max(0, len(running) - k)
        assert info["queued_unseen"] == len(engine.queue) - (len(shown) - min(len(running), k))
        cut += len(running) > k
        for i in range(k):
            valid = set(np.flatnonzero(masks[codec.offsets[i]:codec.offsets[i] + codec.nvec[i]]).tolist())
            if i >= len(env.slots):
                assert valid == {0}
            elif env.slots[i].state is not JobState.RUNNING:
                assert valid == {0, 1, 2, 3, 4}
            elif env.slots[i].spec.elastic:
                assert valid == {0, 1, 2, 3, 4, PREEMPT}
            else:
                assert valid == {NEUTRAL_JOB_LEVEL, PREEMPT}
        borrow = set(np.flatnonzero(masks[codec.offsets[k]:codec.offsets[k] + codec.nvec[k]]).tolist())
        assert borrow == (set(range(env.b + 1)) if engine.num_loanable() else {env.b})
        for j in range(env.m):
            d = k + 1 + j
            valid = set(np.flatnonzero(masks[codec.offsets[d]:codec.offsets[d] + 3]).tolist())
            assert valid == ({0, 1, 2} if j < len(env.server_ids) and engine.reclaim_owed() else {1})
        _, _, term, trunc, _ = env.step(random_action(env, rng))
        if term or trunc:
            break
    assert cut > 0  # K = 12 is exceeded at some point: the cut-off path is covered too


def test_preempt_stops_the_job_once_and_a_masked_preempt_is_a_counted_no_op():
    """A PREEMPT on a running job stops it exactly once over the step (not again at the heuristic's
    ticks, where it may have restarted); PREEMPT on a queued job is masked: a counted no-op."""
    env = gym.make("LyraGym/Cluster-v2", config=CONTENDED, **SHORT).unwrapped
    env.reset(seed=4)
    rng = np.random.default_rng(4)
    preempted = queued_tries = 0
    for _ in range(300):
        engine = env.engine
        action = random_action(env, rng, preempt_share=0.0)
        chosen = [i for i, job in enumerate(env.slots) if job.state is JobState.RUNNING and rng.random() < 0.05]
        queued = [i for i, job in enumerate(env.slots) if job.state is JobState.QUEUED]
        for i in chosen:
            action[i] = PREEMPT
        if queued and rng.random() < 0.1:
            action[queued[0]] = PREEMPT
            queued_tries += 1
            expected_invalid = 1
        else:
            expected_invalid = 0
        before = {env.slots[i].id: engine.job_by_id(env.slots[i].id).preemptions for i in chosen}
        _, _, term, trunc, info = env.step(action)
        assert info["invalid_actions"] == expected_invalid
        for job_id, count in before.items():
            assert engine.job_by_id(job_id).preemptions == count + 1
        preempted += len(chosen)
        if term or trunc:
            break
    assert preempted > 10 and queued_tries > 0


@pytest.mark.parametrize("env_id", V2_IDS)
def test_v2_same_seed_same_rollout(env_id):
    runs = []
    for _ in range(2):
        rewards, infos = play(gym.make(env_id, config=CONTENDED, window_s=2 * 3600.0).unwrapped, 6, random_action)
        infos[-1]["final_metrics"] = metrics(infos[-1]["final_metrics"])  # (wall-clock time left out)
        runs.append((rewards, infos))
    assert runs[0] == runs[1]


def test_v2_defaults_and_versions():
    env = gym.make("LyraGym/Cluster-v2").unwrapped
    old = gym.make("LyraGym/Cluster-v1").unwrapped
    assert env.k == 64 and old.k == 32
    assert env.obs_version == 2 and env.action_version == 2
    assert list(env.action_space.nvec[:64]) == [6] * 64
    assert list(env.action_space.nvec[64:]) == [env.b + 1] + [3] * env.m


@pytest.mark.slow
def test_a_v2_model_as_scheduler_reproduces_its_env_episode():
    """``agents/policy_scheduler.py`` decodes -v2 actions (PREEMPT, the -v2 slots and masks,
    auto-commit without asking the model) as the env does: the same metrics on a test window."""
    from lyra_agents.evaluate import evaluate_model, evaluate_scheduler
    from lyra_agents.factory import build_training_envs, make_eval_env, make_model
    from lyra_agents.policy_scheduler import PolicyScheduler
    from tests.agents.test_policy_building_blocks import small_config

    cfg = small_config("LyraGym/Cluster-v2", num_job_slots=12)
    venv = build_training_envs(cfg)
    try:
        model = make_model(cfg, venv)
        env = make_eval_env(cfg)
        scheduler = PolicyScheduler(model, cfg, venv)
        in_env = evaluate_model(model, env, [1], venv)[0]
        in_engine = evaluate_scheduler(scheduler, env, [1])[0]
    finally:
        venv.close()
    assert in_env["preemptions"] > 0 and scheduler.invalid_actions == 0  # (the untrained policy preempts often)
    for key in ("jct_mean_s", "queue_mean_s", "preemptions", "servers_borrowed", "scale_events", "makespan_s"):
        assert in_env[key] == in_engine[key], key
