"""The LyraGym environments: API conformance, determinism, masks, and the heuristic equivalence."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import lyra_gym
from lyra_gym.envs import ActionMaskObservation
from lyra_gym.sim import scheduler as registry
from lyra_gym.run.simulate import simulate

IDS = lyra_gym.ENV_IDS
SMALL = dict(window_s=6 * 3600.0)  # shorter episodes keep the suite fast


def masked_random_action(env, rng):
    masks, action, pos = env.action_masks(), [], 0
    for n in env.action_space.nvec:
        action.append(int(rng.choice(np.flatnonzero(masks[pos:pos + n]))))
        pos += n
    return np.array(action)


def rollout(env, seed, policy, steps=None, options=None):
    obs, info = env.reset(seed=seed, options=options)
    out = [(obs.copy(), 0.0, dict(info))]
    rng = np.random.default_rng(seed)
    done, n = False, 0
    while not done and (steps is None or n < steps):
        obs, r, term, trunc, info = env.step(policy(env, rng))
        out.append((obs.copy(), r, info))
        done, n = term or trunc, n + 1
    return out


def same(a, b):
    assert len(a) == len(b)
    for (o1, r1, i1), (o2, r2, i2) in zip(a, b):
        assert np.array_equal(o1, o2) and r1 == r2
        assert {k: v for k, v in i1.items() if k != "final_metrics"} == {k: v for k, v in i2.items() if k != "final_metrics"}


@pytest.mark.parametrize("env_id", IDS)
def test_env_checker_passes(env_id):
    env = gym.make(env_id, **SMALL)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.observation_space.contains(env.reset(seed=0)[0])


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_rollout(env_id):
    a = rollout(gym.make(env_id, **SMALL).unwrapped, 5, masked_random_action, steps=150)
    b = rollout(gym.make(env_id, **SMALL).unwrapped, 5, masked_random_action, steps=150)
    same(a, b)


def test_env_pickles_mid_episode_and_continues_identically():
    env = gym.make("LyraGym/Cluster-v1", **SMALL).unwrapped
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(40):
        env.step(masked_random_action(env, rng))
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(40):
        action = masked_random_action(env, rng)
        o1, r1, *_ = env.step(action)
        o2, r2, *_ = clone.step(action)
        assert np.array_equal(o1, o2) and r1 == r2


@pytest.mark.parametrize("env_id", IDS)
def test_masked_random_actions_are_never_invalid(env_id):
    steps = rollout(gym.make(env_id, **SMALL).unwrapped, 2, masked_random_action)
    assert steps[-1][2]["invalid_actions_total"] == 0
    assert "final_metrics" in steps[-1][2]


@pytest.mark.parametrize("env_id", IDS)
def test_unmasked_random_actions_are_counted_noops(env_id):
    env = gym.make(env_id, **SMALL).unwrapped
    steps = rollout(env, 2, lambda e, rng: e.action_space.sample(), steps=200)
    assert sum(info["invalid_actions"] for _, _, info in steps) == steps[-1][2]["invalid_actions_total"] > 0


@pytest.mark.parametrize("env_id", IDS)
def test_expert_action_reproduces_the_lyra_heuristic(env_id):
    env = gym.make(env_id, **SMALL).unwrapped
    steps = rollout(env, 7, lambda e, rng: e.expert_action())
    final = steps[-1][2]["final_metrics"]
    reference = simulate(env.window.jobs(env.trace), "lyra", env.sim_config, seed=env.window.seed).metrics
    assert {k: v for k, v in final.items() if k != "sim_wall_s"} == \
        {k: v for k, v in reference.items() if k != "sim_wall_s"}


def test_the_agent_is_asked_at_events_and_lyras_rounds_keep_its_guidance():
    """Lyra's knapsack rounds (its tick) are not the agent's steps: an expert episode has one
    step per event decision point of the same run through the engine."""
    from lyra_gym.run.simulate import build_engine

    env = gym.make("LyraGym/Elastic-v1", **SMALL).unwrapped
    steps = rollout(env, 7, lambda e, rng: e.expert_action())
    engine = build_engine(env.window.jobs(env.trace), registry.make("lyra"), env.sim_config, env.window.seed,
                          env.profiles)
    engine.begin()
    events = ticks = 0
    while engine.next_decision():
        ticks += engine.tick_only
        events += not engine.tick_only
        engine.submit(engine.scheduler.decide(engine.view))
    assert ticks > 0 and len(steps) - 1 == events  # rollout() keeps the reset too


def test_jct_reward_sums_to_minus_total_jct():
    env = gym.make("LyraGym/Elastic-v1", **SMALL).unwrapped
    steps = rollout(env, 4, masked_random_action)
    final = steps[-1][2]["final_metrics"]
    assert final["jobs_unfinished"] == 0
    total_jct = final["jct_mean_s"] * final["jobs_total"]
    assert sum(r for _, r, _ in steps) == pytest.approx(-total_jct / 3600.0, rel=1e-9)


def test_test_windows_are_disjoint_from_train_windows_and_fixed():
    env = gym.make("LyraGym/Elastic-v1").unwrapped
    split = env.windows.split_s
    for seed in range(20):
        env.reset(seed=seed)
        assert env.window.start_s + env.window.length_s <= split
    starts = set()
    for i in range(env.windows.num_test):
        env.reset(options={"split": "test", "window": i})
        assert env.window.start_s >= split
        starts.add(env.window.start_s)
        first = env.window
        env.reset(seed=99, options={"split": "test", "window": i})
        assert env.window == first  # the same window and simulation seed for every policy
    assert len(starts) == env.windows.num_test


def test_named_rewards_and_their_combination():
    env = gym.make("LyraGym/Elastic-v1", reward="queue+0.5*preemption", **SMALL).unwrapped
    env.reset(seed=0)
    _, r, *_ = env.step(env.expert_action())
    assert r <= 0
    with pytest.raises(ValueError, match="reward: unknown term 'speed'"):
        gym.make("LyraGym/Elastic-v1", reward="speed")


def test_dict_observation_wrapper_carries_the_mask():
    env = ActionMaskObservation(gym.make("LyraGym/Cluster-v1", **SMALL))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert np.array_equal(obs["action_mask"].astype(bool), env.unwrapped.action_masks())


def test_dict_observation_wrapper_on_alloc_masks_its_discrete_action():
    """Alloc-v1's action is Discrete: the mask has one entry per choice and follows every sub-action."""
    env = ActionMaskObservation(gym.make("LyraGym/Alloc-v1", window_s=2 * 3600.0))
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].shape == (env.action_space.n,)
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert env.observation_space.contains(obs)
        mask = obs["action_mask"].astype(bool)
        assert np.array_equal(mask, env.unwrapped.action_masks())
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if terminated or truncated:
            break


def test_dict_observation_wrapper_refuses_other_action_spaces():
    class BoxActions(gym.Env):
        observation_space = gym.spaces.Box(0.0, 1.0, (1,))
        action_space = gym.spaces.Box(0.0, 1.0, (2,))

    with pytest.raises(TypeError, match="Discrete or MultiDiscrete action space expected, got Box"):
        ActionMaskObservation(BoxActions())


def test_ansi_render_shows_the_cluster():
    env = gym.make("LyraGym/Loaning-v1", render_mode="ansi", **SMALL)
    env.reset(seed=0)
    text = env.render()
    assert "queued=" in text and "train:" in text and "infer:" in text


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="window_s"):
        gym.make("LyraGym/Elastic-v1", window_s=30 * 86400.0)
    with pytest.raises(ValueError, match="render_mode"):  # "human" and "rgb_array" are supported now
        gym.make("LyraGym/Elastic-v1", render_mode="depth_array")


def test_holding_every_job_cannot_end_an_episode_for_free():
    # Hold (level 0) every queued job (enough slots for all of them): nothing ever runs, the
    # episode ends when the arrivals and the demand curve are exhausted, and the unfinished jobs
    # are charged one more window each.
    env = gym.make("LyraGym/Elastic-v1", num_job_slots=256, **SMALL).unwrapped
    env.reset(seed=0)
    done, last = False, 0.0
    while not done:
        _, last, term, trunc, info = env.step(np.zeros(env.action_space.shape, dtype=np.int64))
        done = term or trunc
    final = info["final_metrics"]
    assert term and final["jobs_finished"] == 0 and final["jobs_unfinished"] == final["jobs_total"] > 0
    assert last <= -final["jobs_unfinished"] * env.windows.length_s / 3600.0


# ---------------------------------------------------------------- inputs (issue 15, item 8)


@pytest.mark.parametrize("make_action", [
    lambda n: np.full(n, 2.9),                      # used to be truncated to 2
    lambda n: np.full(n, 2.0),                      # whole floats too: cast with .astype(np.int64)
    lambda n: np.ones(n, dtype=bool),
    lambda n: np.full((1, n), 2, dtype=np.int64),   # a batch of one
    lambda n: np.full((n, 1), 2, dtype=np.int64),
    lambda n: np.full(n + 1, 2, dtype=np.int64),
    lambda n: np.int64(2),
    lambda n: [2] * (n - 1) + ["2"],
    lambda n: [[2]] * (n - 1) + [[2, 2]],
    lambda n: None,
])
def test_actions_must_be_integer_arrays_of_the_space_shape(make_action):
    env = gym.make("LyraGym/Elastic-v1", **SMALL).unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"^action: must be an integer array of shape \(32,\)"):
        env.step(make_action(32))
    _, _, _, _, info = env.step(env.expert_action())  # the episode goes on
    assert info["invalid_actions"] == 0


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint64, np.int64])
def test_any_integer_dtype_and_lists_of_ints_are_actions(dtype):
    env = gym.make("LyraGym/Elastic-v1", **SMALL).unwrapped
    env.reset(seed=0)
    env.step(env.expert_action().astype(dtype))
    env.step(env.expert_action().tolist())


def test_out_of_range_values_stay_counted_noops():
    env = gym.make("LyraGym/Cluster-v1", **SMALL).unwrapped
    env.reset(seed=0)
    action = env.expert_action()
    action[:3] = [-1, 5, 2**62]
    _, _, _, _, info = env.step(action)
    assert info["invalid_actions"] == 3
    huge = np.full(env.action_space.shape, np.iinfo(np.uint64).max, dtype=np.uint64)
    _, _, _, _, info = env.step(huge)  # not wrapped round to a valid value
    assert info["invalid_actions"] == env.action_space.shape[0]


def test_test_windows_are_checked_not_wrapped():
    env = gym.make("LyraGym/Elastic-v1", **SMALL).unwrapped
    n = env.windows.num_test
    _, info = env.reset(options={"split": "test", "window": n - 1})
    assert info["window"] == n - 1 and env.window.seed == 1_000_000 + n - 1
    _, info = env.reset(options={"split": "test", "window": np.int64(1)})
    assert info["window"] == 1
    for bad in (n, -1, 10**9, 1.9, 1.0, True, "1", None):
        with pytest.raises(ValueError, match=rf"^options\['window'\]: must be an integer in \[0, {n - 1}\]"):
            env.reset(options={"split": "test", "window": bad})
    with pytest.raises(ValueError, match="window: must be an integer"):
        env.windows.test(n)


@pytest.mark.parametrize("options, message", [
    ({"windw": 2}, r"options\['windw'\]: unknown reset option \(known: split, window\)"),
    ({"split": "test", "seed": 1}, r"options\['seed'\]: unknown reset option"),
    ({"split": "val"}, r"options\['split'\]: must be 'train' or 'test', got 'val'"),
    ({"split": ["test"]}, r"options\['split'\]: must be 'train' or 'test'"),
    ({"window": 2}, r"options\['window'\]: only with options\['split'\] = 'test'"),
    ("test", r"options: must be a dict"),
])
def test_reset_options_are_checked(options, message):
    env = gym.make("LyraGym/Elastic-v1", **SMALL).unwrapped
    with pytest.raises(ValueError, match=message):
        env.reset(options=options)


@pytest.mark.parametrize("kwargs, message", [
    ({"reward_scale_s": 0}, "reward_scale_s: must be a finite number > 0, got 0"),  # used to fail at step 1
    ({"reward_scale_s": -1.0}, "reward_scale_s"),
    ({"reward_scale_s": float("nan")}, "reward_scale_s"),
    ({"reward_scale_s": float("inf")}, "reward_scale_s"),
    ({"reward_scale_s": "3600"}, "reward_scale_s"),
    ({"window_s": float("nan")}, "window_s"),
    ({"window_s": 1e-3}, "window_s: .* more than MAX_WINDOWS"),
    ({"test_fraction": 1.0}, "test_fraction"),
    ({"test_fraction": float("nan")}, "test_fraction"),
    ({"num_job_slots": 1.5}, r"num_job_slots: must be an integer in \[1, 4096\]"),
    ({"num_job_slots": True}, "num_job_slots"),
    ({"num_job_slots": 10**9}, "num_job_slots"),
    ({"num_server_slots": -1}, "num_server_slots"),
    ({"borrow_levels": 0}, "borrow_levels"),
    ({"max_steps": 0}, "max_steps"),
    ({"trace_seed": -1}, "trace_seed"),
    ({"trace": 5}, "trace: must be a preset name"),
    ({"heuristic": "fifo"}, "heuristic: scheduler 'fifo' cannot be guided"),
    ({"heuristic": "nope"}, "heuristic: unknown scheduler 'nope'"),
    ({"heuristic": None}, "heuristic"),
    ({"reward": "abc*jct"}, "reward: weight of 'jct' must be a finite number, got 'abc'"),
    ({"reward": {"jct": float("nan")}}, "reward: weight of 'jct'"),
    ({"reward": 5}, "reward: must be"),
    ({"config": 5}, "config: must be a SimConfig"),
    ({"config": {"reclaim_grace_s": float("nan")}}, "reclaim_grace_s: must be a finite number"),
    ({"profiles": 3}, "profiles"),
])
def test_constructor_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make("LyraGym/Elastic-v1", **kwargs)


# --- warm-started windows ---------------------------------------------------------------------
def test_warm_start_runs_the_heuristic_first_and_the_expert_still_reproduces_lyra():
    from lyra_agents.evaluate import evaluate_scheduler
    from lyra_agents.policy_scheduler import PolicyScheduler

    env = gym.make("LyraGym/Elastic-v1", window_s=6 * 3600.0, warmup_s=3 * 3600.0).unwrapped
    obs, info = env.reset(options={"split": "test", "window": 1})
    window = env.window
    assert window.warmup_s == 3 * 3600.0 and env.engine.now >= window.start_s
    jobs = window.jobs(env.trace)
    warm = [j for j in jobs if j.submit_time < window.start_s]
    assert warm and all(j.submit_time >= window.start_s - 3 * 3600.0 for j in warm)
    assert env.engine.view.num_running > 0  # the agent starts on a loaded cluster
    total, done = 0.0, False
    while not done:
        _, r, term, trunc, info = env.step(env.expert_action())
        total, done = total + r, term or trunc
    expected = simulate(jobs, "lyra", env.sim_config, seed=window.seed, profiles=env.profiles).metrics
    assert info["final_metrics"]["jct_mean_s"] == expected["jct_mean_s"]
    assert info["final_metrics"]["jobs_total"] == len(jobs)
    # an agent scheduler hands over at the window's start (before it, its heuristic decides alone):
    # a fixed rule of the masks gives the same run in the env and through simulate
    obs, info = env.reset(options={"split": "test", "window": 1})
    done = False
    while not done:
        _, r, term, trunc, info = env.step(_highest_valid(env.action_masks(), env.codec.nvec))
        done = term or trunc
    rows = evaluate_scheduler(_HighestAgent(), env, [1])
    assert rows[0]["jct_mean_s"] == info["final_metrics"]["jct_mean_s"]
    assert rows[0]["jct_mean_s"] != expected["jct_mean_s"]  # the rule is not lyra's own choice


def _highest_valid(masks, nvec):
    """The highest valid level of every action dimension."""
    out, start = [], 0
    for n in nvec:
        out.append(int(np.flatnonzero(masks[start:start + n])[-1]))
        start += n
    return np.array(out)


class _HighestAgent:
    """Built lazily (agents import torch): a guided agent taking :func:`_highest_valid`."""

    def __new__(cls):
        from lyra_agents.config import TrainConfig
        from lyra_agents.policy_scheduler import GuidedAgentScheduler

        class Highest(GuidedAgentScheduler):
            def act(self, obs, masks):
                return _highest_valid(masks, self.codec.nvec)

        return Highest(TrainConfig(env_id="LyraGym/Elastic-v1", window_s=6 * 3600.0, warmup_s=3 * 3600.0))


def test_warmup_must_be_a_non_negative_number():
    with pytest.raises(ValueError, match="warmup_s"):
        gym.make("LyraGym/Cluster-v1", warmup_s=-1.0)
