"""What the guided environments keep between steps and episodes gives the same numbers as
computing them afresh (issue 24's speed work on ``lyra_gym/envs``).

- The loaned-type rates an env's builder shares across its episodes: an episode run after
  others observes exactly what the same episode observes in a fresh env.
- ``SpanReward`` is ``reward(weights, StepOutcome(...), scale)`` to the bit, for every term mix.
- ``DemandAhead`` is ``DemandCurve.at`` at every time, going forward, back, and on the steps.
- ``ActionCodec.masks``/``decode`` against a plain per-dimension reading of the same layout.
- The job rows built from kept rows (a running job's allocation-derived part, a queued job's row)
  against the same rows built with nothing kept, at every step.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_gym.envs.actions import ActionCodec
from lyra_gym.envs.observation import JOB_FEATURES
from lyra_gym.envs.observation_state import DemandAhead, engine_constants
from lyra_gym.envs.rewards import REWARD_TERMS, SpanReward, StepOutcome, reward
from lyra_gym.model.demand import DemandCurve
from lyra_gym.sim.scheduler import JOB_LEVELS, NEUTRAL_JOB_LEVEL, NEUTRAL_RETURN_LEVEL, RETURN_LEVELS


def _episode(env, seed: int, steps: int, check=None) -> list[bytes]:
    """Observation and mask bytes and the reward of up to ``steps`` masked-random steps;
    ``check(env, obs)`` after every observation."""
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    nvec = env.action_space.nvec
    out = []
    for _ in range(steps):
        if check is not None:
            check(env.unwrapped, obs)
        masks = env.unwrapped.action_masks()
        out.append(obs.tobytes() + masks.tobytes())
        action = np.array([rng.choice(np.flatnonzero(p)) for p in np.split(masks, np.cumsum(nvec)[:-1])])
        obs, r, terminated, truncated, _ = env.step(action)
        out.append(repr(r).encode())
        if terminated or truncated:
            break
    return out


def _remaining_loaned_is_view_goodputs(env, obs) -> None:
    """Every shown job's ``remaining_loaned`` against ``view.goodput`` called afresh."""
    view = env.engine.view
    first = view.servers[view.inference_server_ids[0]]
    width, column = env.builder.job_width, JOB_FEATURES.index("remaining_loaned")
    for i, job in enumerate(env.slots):
        rate = view.goodput(job, job.spec.num_gpus, first.gpu_type, first.num_gpus)
        value = math.log1p(max(job.remaining_work / rate, 0.0) / 60.0) / 10.0 if rate > 0 else 1.0
        assert obs[i * width + column] == np.float32(min(value, 1.0)), (i, job)


NO_INFERENCE = {"training": [{"count": 11, "gpu_type": "v100", "gpus_per_server": 8}],
                "inference": {"count": 0, "gpu_type": "t4", "gpus_per_server": 8}}


def _rows_match_rows_built_afresh(env, obs) -> None:
    """The observation against one built with no kept job rows (and the kept rows rebuilt)."""
    view = env.engine.view
    constants = engine_constants(view)
    kept = len(constants.running_rows) + len(constants.queued_rows)
    constants.running_rows.clear()
    constants.queued_rows.clear()
    fresh = env.builder.build(view, env.slots, env.server_ids)
    assert fresh.tobytes() == obs.tobytes(), f"step {env.steps}: {kept} kept rows"


@pytest.mark.parametrize("env_id, config", [
    ("LyraGym/Cluster-v1", {}),
    ("LyraGym/Elastic-v1", {"scaling": "adaptive"}),
    ("LyraGym/Loaning-v1", {"knowledge": {"mode": "estimate"}}),
    ("LyraGym/Cluster-v1", {"knowledge": {"mode": "history"}, "cluster": NO_INFERENCE}),
])
def test_rows_built_from_kept_rows_are_the_rows_built_afresh(env_id, config):
    env = gym.make(env_id, config=config, num_job_slots=12, num_server_slots=4)
    checked = []
    _episode(env, 3, 150, check=lambda e, obs: (_rows_match_rows_built_afresh(e, obs), checked.append(1)))
    assert len(checked) > 20
    # the fast path ran: running jobs with kept rows were shown
    assert engine_constants(env.unwrapped.engine.view).running_rows


# "absolute": a job's rate on the loaned type changes with its progress part
@pytest.mark.parametrize("config", [{}, {"scaling": "adaptive"}, {"noise_scale": "absolute"}])
@pytest.mark.sample(1)
def test_an_episode_after_others_observes_what_it_does_in_a_fresh_env(config):
    kwargs = dict(config=config, window_s=4 * 3600.0, num_job_slots=12, num_server_slots=4)
    warm = gym.make("LyraGym/Cluster-v1", **kwargs)
    for seed in (11, 12, 13):  # fill the builder's shared rates with other windows' jobs
        _episode(warm, seed, 150)
    assert warm.unwrapped.builder._shared_goodput, "the episodes shared nothing"
    fresh = gym.make("LyraGym/Cluster-v1", **kwargs)
    assert _episode(warm, 14, 200, _remaining_loaned_is_view_goodputs) == _episode(fresh, 14, 200)


@settings(max_examples=200, deadline=None)
@given(
    weights=st.dictionaries(st.sampled_from(REWARD_TERMS), st.floats(-10, 10, allow_nan=False), min_size=1),
    elapsed=st.one_of(st.just(0.0), st.floats(0, 1e6, allow_nan=False)),
    in_system=st.integers(0, 500), queued=st.integers(0, 500),
    usage=st.floats(0, 1, allow_nan=False), preemptions=st.integers(0, 20),
    scale=st.sampled_from([1.0, 3600.0, 7.5]),
)
def test_span_reward_is_reward_on_a_step_outcome_to_the_bit(weights, elapsed, in_system, queued, usage,
                                                            preemptions, scale):
    expected = reward(weights, StepOutcome(elapsed, in_system, queued, usage, preemptions), scale)
    got = SpanReward(weights, scale)(elapsed, in_system, queued, usage, preemptions)
    assert repr(got) == repr(expected)  # repr: -0.0 and 0.0 differ


def test_demand_ahead_is_the_curves_value_at_every_time():
    curve = DemandCurve(np.array([0.0, 100.0, 250.0, 900.0]), np.array([3, 1, 4, 2]))
    ahead = DemandAhead(curve)
    times = [-5.0, 0.0, 50.0, 99.999, 100.0, 100.0, 249.0, 250.0, 3.0, 899.0, 900.0, 1e9, 0.0, 250.0, -1e9]
    assert [ahead.at(t) for t in times] == [curve.at(t) for t in times]
    with pytest.raises(ValueError):
        ahead.at(float("nan"))


class _Spec:
    def __init__(self, elastic):
        self.elastic = elastic


class _Slot:
    def __init__(self, job_id, running, elastic):
        from lyra_gym.model.jobs import JobState
        self.id = job_id
        self.state = JobState.RUNNING if running else JobState.QUEUED
        self.spec = _Spec(elastic)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), k=st.integers(1, 6), m=st.integers(0, 4), b=st.integers(1, 5),
       controls=st.sampled_from([(True, True), (True, False), (False, True)]))
def test_masks_and_decoding_read_the_layout_dimension_by_dimension(data, k, m, b, controls):
    codec = ActionCodec(k, m, b, *controls)
    slots = [_Slot(f"j{i}", data.draw(st.booleans()), data.draw(st.booleans()))
             for i in range(data.draw(st.integers(0, k)))]
    servers = list(range(100, 100 + data.draw(st.integers(0, m))))
    masks = codec.masks(slots, servers)
    # the plain reading: per dimension, its valid values and neutral value
    dims = []
    if controls[0]:
        for i in range(k):
            if i >= len(slots):
                dims.append(([0], 0))
            elif slots[i].state.value == "running" and not slots[i].spec.elastic:
                dims.append(([NEUTRAL_JOB_LEVEL], NEUTRAL_JOB_LEVEL))
            else:
                dims.append((list(range(JOB_LEVELS)), NEUTRAL_JOB_LEVEL))
    if controls[1]:
        dims.append((list(range(b + 1)), b))
        for j in range(m):
            levels = list(range(RETURN_LEVELS)) if j < len(servers) else [NEUTRAL_RETURN_LEVEL]
            dims.append((levels, NEUTRAL_RETURN_LEVEL))
    expected = np.concatenate([np.isin(np.arange(n), valid) for (valid, _), n in zip(dims, codec.nvec)])
    assert masks.dtype == bool and masks.flags.writeable and np.array_equal(masks, expected)
    action = np.array([data.draw(st.integers(-2, n + 1)) for n in codec.nvec], dtype=np.int64)
    guidance, invalid = codec.decode(action, masks, slots, servers)
    chosen = [int(a) if a in valid else neutral for a, (valid, neutral) in zip(action, dims)]
    assert invalid == sum(int(a) not in valid for a, (valid, _) in zip(action, dims))
    if controls[0]:
        assert guidance.job_levels == {s.id: chosen[i] for i, s in enumerate(slots)}
    if controls[1]:
        pos = k if controls[0] else 0
        assert guidance.borrow_fraction == chosen[pos] / b
        assert guidance.return_levels == {sid: chosen[pos + 1 + j] for j, sid in enumerate(servers)}
