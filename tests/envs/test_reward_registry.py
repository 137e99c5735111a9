"""The reward registry (lyra_gym/envs/rewards.py): built-in slowdown terms against hand-computed
values and against the episode's own job records, user terms, a callable as the reward, and the
errors. The default ``"jct"`` stays on the fast path, bit for bit (tests/envs/test_env_equivalence.py
holds the digests)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the ids)
from lyra_gym.envs import rewards
from lyra_gym.envs.rewards import (
    BOUNDED_SLOWDOWN_TAU_S,
    SpanReward,
    StepOutcome,
    TermReward,
    bounded_slowdown,
    register_reward_term,
    reward,
    reward_terms,
    span_reward,
    unregister_reward_term,
)
from lyra_gym.model.jobspec import JobSpec

SHORT = dict(window_s=1800.0)  # about a dozen jobs: episodes of a few hundred steps at most


def spec(job_id: str, duration: float) -> JobSpec:
    return JobSpec(job_id, 0.0, 1, duration, "resnet50", False, 1, 1)


@pytest.fixture
def user_terms():
    """Names registered by a test, removed after it (the registry is process-wide)."""
    names: list[str] = []
    yield names
    for name in names:
        if name in reward_terms():
            unregister_reward_term(name)


def hold_all(env) -> np.ndarray:
    return np.zeros(env.action_space.shape, dtype=np.int64)


# ---------------------------------------------------------------------------- hand-computed terms
def test_slowdown_terms_by_hand():
    jobs = (spec("a", 100.0), spec("b", 400.0), spec("c", 5.0))
    o = StepOutcome(50.0, 3, 1, 0.5, 0, 3600.0, jobs)
    # slowdown: -(50/100 + 50/400 + 50/5), not scaled
    assert reward({"slowdown": 1.0}, o) == pytest.approx(-(0.5 + 0.125 + 10.0), rel=1e-15)
    # bounded slowdown, tau = 10 s: the 5 s job counts as 10 s
    assert BOUNDED_SLOWDOWN_TAU_S == 10.0
    assert reward({"bounded_slowdown": 1.0}, o) == pytest.approx(-(0.5 + 0.125 + 5.0), rel=1e-15)
    assert bounded_slowdown(200.0)(o) == pytest.approx(-(50 / 200 + 50 / 400 + 50 / 200), rel=1e-15)
    # mixed with a counting term: -(3 x 50) / 3600 + 2 x slowdown
    assert reward({"jct": 1.0, "slowdown": 2.0}, o) == pytest.approx(-150 / 3600 - 2 * 10.625, rel=1e-15)


def test_a_term_that_needs_jobs_says_so_when_they_are_missing():
    with pytest.raises(ValueError, match="needs StepOutcome.jobs"):
        reward({"slowdown": 1.0}, StepOutcome(1.0, 1, 1, 0.0, 0))
    with pytest.raises(ValueError, match="tau_s: must be > 0"):
        bounded_slowdown(0.0)


def test_the_default_stays_on_the_fast_path_without_collecting_jobs(monkeypatch):
    assert type(span_reward("jct")) is SpanReward and type(span_reward("jct+0.5*preemption")) is SpanReward
    assert type(span_reward("slowdown")) is TermReward

    def boom(engine):
        raise AssertionError("jobs collected for a reward that does not read them")

    monkeypatch.setattr("lyra_gym.envs.episode.jobs_in_system", boom)
    env = gym.make("LyraGym/Elastic-v1", **SHORT).unwrapped
    assert env.reward_weights == {"jct": 1.0}
    env.reset(seed=0)
    for _ in range(5):
        env.step(env.expert_action())


# ---------------------------------------------------------------------------- episode sums
def _time_in_system(env) -> list[tuple[JobSpec, float]]:
    """(spec, seconds in the system since its submission up to now) of every submitted job."""
    engine = env.engine
    now = engine.now
    return [(j.spec, (now if j.finish_time is None else j.finish_time) - j.spec.submit_time)
            for j in engine.jobs if j.spec.submit_time <= now]


@pytest.mark.parametrize("env_id", ["LyraGym/Elastic-v1", "LyraGym/Alloc-v1"])
def test_returns_are_the_episode_totals_of_jct_and_slowdown(env_id):
    """With gamma = 1 the return so far is -(sum over jobs of time in the system / 3600) for jct,
    -(sum of time in the system / ideal run time) for slowdown (max(ideal, 10 s) bounded)."""
    specs = ("jct", "slowdown", "bounded_slowdown")
    envs = [gym.make(env_id, reward=s, **SHORT).unwrapped for s in specs]
    returns = [0.0] * len(envs)
    for env in envs:
        env.reset(seed=3)
    for _ in range(60):
        for i, env in enumerate(envs):
            _, r, terminated, truncated, _ = env.step(env.expert_action())
            returns[i] += r
        if terminated or truncated:
            break
    done = _time_in_system(envs[0])
    assert len(done) >= 2
    assert returns[0] == pytest.approx(-sum(t for _, t in done) / 3600.0, rel=1e-9)
    assert returns[1] == pytest.approx(-sum(t / j.duration for j, t in done), rel=1e-9)
    assert returns[2] == pytest.approx(-sum(t / max(j.duration, 10.0) for j, t in done), rel=1e-9)


@pytest.mark.parametrize("spec_", ["jct", "slowdown"])
def test_jobs_left_unfinished_are_charged_one_more_window(spec_):
    """All jobs held: the episode terminates with every job queued; the return is each job's time
    in the system plus one window, in the term's units."""
    env = gym.make("LyraGym/Elastic-v1", reward=spec_, **SHORT).unwrapped
    env.reset(seed=0)
    total, terminated = 0.0, False
    while not terminated:
        _, r, terminated, truncated, _ = env.step(hold_all(env))
        total += r
        assert not truncated
    engine, length = env.engine, env.window.length_s
    assert engine.finished == 0 and len(engine.jobs) > 1
    unit = (lambda j: 3600.0) if spec_ == "jct" else (lambda j: j.spec.duration)
    expected = -sum(((engine.now - j.spec.submit_time) + length) / unit(j) for j in engine.jobs)
    assert total == pytest.approx(expected, rel=1e-9)


# ---------------------------------------------------------------------------- user terms and callables
def test_a_user_term_mixes_with_the_built_ins_by_weight(user_terms):
    seen: list[StepOutcome] = []

    def weighted(o: StepOutcome) -> float:
        seen.append(o)
        assert o.jobs is not None and len(o.jobs) == o.in_system
        return -o.elapsed_s * sum(s.num_gpus / s.duration for s in o.jobs)

    register_reward_term("gpu_slowdown", weighted)
    user_terms.append("gpu_slowdown")
    assert reward_terms()[:6] == ("jct", "queue", "usage", "preemption", "slowdown", "bounded_slowdown")
    assert reward_terms()[-1] == "gpu_slowdown"
    envs = [gym.make("LyraGym/Elastic-v1", reward=s, **SHORT).unwrapped
            for s in ("jct", "gpu_slowdown", "jct+0.25*gpu_slowdown", {"jct": 1, "gpu_slowdown": 0.25})]
    assert envs[2].reward_weights == envs[3].reward_weights == {"jct": 1.0, "gpu_slowdown": 0.25}
    for env in envs:
        env.reset(seed=1)
    for _ in range(20):
        steps = [env.step(env.expert_action()) for env in envs]
        r = [s[1] for s in steps]
        assert r[2] == r[3]
        assert r[2] == pytest.approx(r[0] + 0.25 * r[1], rel=1e-12, abs=1e-12)
        if steps[0][2] or steps[0][3]:
            break
    assert seen and all(o.scale_s == 3600.0 for o in seen)


def test_a_callable_reward_sees_the_outcome_and_can_reproduce_jct_bit_for_bit():
    seen: list[StepOutcome] = []

    def my_jct(o: StepOutcome) -> float:
        seen.append(o)
        return -o.in_system * o.elapsed_s / o.scale_s

    ref = gym.make("LyraGym/Elastic-v1", reward_scale_s=600.0, **SHORT).unwrapped
    env = gym.make("LyraGym/Elastic-v1", reward=my_jct, reward_scale_s=600.0, **SHORT).unwrapped
    assert list(env.reward_weights) == ["<callable test_a_callable_reward_sees_the_outcome_and_can_reproduce_jct_"
                                        "bit_for_bit.<locals>.my_jct>"]
    for e in (ref, env):
        e.reset(seed=2)
    for _ in range(25):
        a = ref.expert_action()
        step = ref.step(a)
        assert repr(step[1]) == repr(env.step(a)[1])
        if step[2] or step[3]:
            break
    assert seen and all(o.scale_s == 600.0 and o.jobs is not None and len(o.jobs) == o.in_system for o in seen)
    assert all(isinstance(j, JobSpec) for o in seen for j in o.jobs or ())


def test_a_term_returning_no_finite_number_is_an_error_naming_it(user_terms):
    register_reward_term("broken", lambda o: math.nan, needs_jobs=False)
    user_terms.append("broken")
    env = gym.make("LyraGym/Elastic-v1", reward="jct+broken", **SHORT).unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match="reward: term 'broken' returned a value that must be a finite number"):
        env.step(env.expert_action())
    env = gym.make("LyraGym/Elastic-v1", reward=lambda o: "lots", **SHORT).unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match="returned a value that must be a finite number, got 'lots'"):
        env.step(env.expert_action())


# ---------------------------------------------------------------------------- errors and config paths
def test_an_unknown_term_names_it_and_lists_the_known_ones(user_terms):
    register_reward_term("mine", lambda o: 0.0, needs_jobs=False)
    user_terms.append("mine")
    with pytest.raises(ValueError, match=r"reward: unknown term 'speed' \(known: jct, queue, usage, preemption, "
                                         r"slowdown, bounded_slowdown, mine\)"):
        gym.make("LyraGym/Elastic-v1", reward="jct+speed")
    with pytest.raises(ValueError, match="reward: must be a term name, a 'w\\*term\\+...' string, a mapping or a "
                                         "callable, got 3"):
        gym.make("LyraGym/Elastic-v1", reward=3)


def test_registering_checks_the_name_and_protects_the_built_ins(user_terms):
    with pytest.raises(ValueError, match="reward term name"):
        register_reward_term("2fast", lambda o: 0.0)
    with pytest.raises(ValueError, match="reward term name"):
        register_reward_term("a+b", lambda o: 0.0)
    with pytest.raises(ValueError, match="fn must be callable"):
        register_reward_term("ok", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'slowdown': a built-in term"):
        register_reward_term("slowdown", lambda o: 0.0, replace=True)
    register_reward_term("mine", lambda o: 1.0, needs_jobs=False)
    user_terms.append("mine")
    with pytest.raises(ValueError, match="already registered"):
        register_reward_term("mine", lambda o: 2.0)
    register_reward_term("mine", lambda o: 2.0, needs_jobs=False, replace=True)
    assert reward({"mine": 1.0}, StepOutcome(1.0, 0, 0, 0.0, 0)) == 2.0
    with pytest.raises(ValueError, match="'jct': a built-in term"):
        unregister_reward_term("jct")
    with pytest.raises(ValueError, match="'nope': not registered"):
        unregister_reward_term("nope")
    assert rewards.parse_reward("0.5*mine+jct") == {"mine": 0.5, "jct": 1.0}


def test_train_config_set_reward_reaches_the_env():
    from lyra_agents.config import resolve_config

    cfg = resolve_config(env_id="LyraGym/Elastic-v1", overrides=["reward=jct+0.1*bounded_slowdown",
                                                                  "window_s=1800"])
    env = gym.make(cfg.env_id, **cfg.env_kwargs()).unwrapped
    assert env.reward_weights == {"jct": 1.0, "bounded_slowdown": 0.1}
    cfg = resolve_config(env_id="LyraGym/Elastic-v1", overrides=["reward={slowdown: 2}", "window_s=1800"])
    assert gym.make(cfg.env_id, **cfg.env_kwargs()).unwrapped.reward_weights == {"slowdown": 2.0}
