"""lyra_gym.envs.learner_extras: the opt-in observation extras of issue 26 item 4.

Hand-computed values on the toy profile (work = duration x GPUs, 1 sample/s per V100), the
no-look-ahead property (a job finishing after now changes nothing before it finishes), and the
spaces of the wrapper and of the trained-model scheduler path."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the LyraGym/ ids)
from lyra_gym.envs.learner_extras import (
    CLUSTER_EXTRAS,
    SLOT_FEATURES,
    LearnerExtras,
    LearnerExtrasObservation,
    extras_size,
)
from lyra_gym.envs.observation import job_slots
from tests.toy import engine_at_first_decision, job

W = len(SLOT_FEATURES)
HOURS_CAP = math.log1p(14 * 24.0)


def hours(seconds: float) -> float:
    return math.log1p(seconds / 3600.0) / HOURS_CAP


def trace(b_duration: float) -> list:
    """a (100 s) and b (``b_duration``) start at 0 on 1 GPU each; c (2 GPUs) arrives at 150 and
    d at 400; 4 GPUs, so nothing waits except by Lyra's choice."""
    return [job("a", 0.0, 1, 100.0), job("b", 0.0, 1, b_duration),
            job("c", 150.0, 2, 500.0), job("d", 400.0, 1, 50.0)]


def extras_by_time(b_duration: float) -> dict[float, np.ndarray]:
    """The extras (slots in the observation's order) at every decision point of a Lyra run."""
    engine = engine_at_first_decision(trace(b_duration))
    extras = LearnerExtras(4)
    seen = {}
    while True:
        view = engine.view
        seen[view.now] = extras.compute(view, job_slots(view, 4))
        engine.submit(engine.scheduler.decide(view))
        if not engine.next_decision():
            return seen


def test_hand_computed_at_c_arrival():
    seen = extras_by_time(3000.0)
    at = seen[150.0]
    # only a finished (at 100 s): every group falls back to all finished jobs, durations [100]
    engine = engine_at_first_decision(trace(3000.0))
    while engine.view.now < 150.0:
        engine.submit(engine.scheduler.decide(engine.view))
        assert engine.next_decision()
    slots = [j.id for j in job_slots(engine.view, 4)]
    assert {"b", "c"} <= set(slots)
    for row, job_id in enumerate(slots):
        feats = at[row * W:(row + 1) * W]
        if job_id == "c":  # queued, nothing done: every history duration is longer
            assert feats == pytest.approx([hours(100.0), 1.0, hours(100.0)], abs=1e-6)
        if job_id == "b":  # 150 s done, past the only finished duration
            assert feats == pytest.approx([hours(100.0), 0.0, 0.0], abs=1e-6)
    base = 4 * W
    assert at[base] == pytest.approx(math.log1p(1) / math.log1p(1000.0), abs=1e-6)


def test_no_look_ahead():
    """b's duration (300 s or 3000 s) changes nothing before b finishes at 300 s."""
    short, long = extras_by_time(300.0), extras_by_time(3000.0)
    early = [t for t in short if t < 300.0]
    assert early == [t for t in long if t < 300.0] and 150.0 in early
    for t in early:
        np.testing.assert_array_equal(short[t], long[t])
    # after b finished (d arrives at 400 s) the history has two jobs in the short run, one in the long
    base = 4 * W
    assert short[400.0][base] > long[400.0][base]


def test_queue_composition():
    engine = engine_at_first_decision([job("x", 0.0, 4, 1000.0), job("y", 0.0, 2, 10.0, elastic=True, lo=1, hi=2),
                                       job("z", 0.0, 1, 10.0)], gpus=4)
    view = engine.view
    out = LearnerExtras(2).compute(view, job_slots(view, 2))
    queued = list(view.queued_jobs())
    assert len(queued) == 3  # nothing started yet at the first decision point
    counts = out[2 * W + 1:2 * W + 9] * math.log1p(1000.0)
    gpus = out[2 * W + 9:2 * W + 13] * math.log1p(10_000.0)
    expected = np.log1p([1, 1, 0, 0, 0, 1, 0, 0])  # rigid 1, rigid 2-4 (x), elastic 2-4 (y)
    np.testing.assert_allclose(counts, expected, atol=1e-5)
    np.testing.assert_allclose(gpus, np.log1p([1, 6, 0, 0]), atol=1e-5)


def test_wrapper_space_and_reset():
    env = gym.make("LyraGym/Alloc-v1", trace="env-14d", window_s=3600.0, num_job_slots=8,
                   num_server_slots=2).unwrapped
    wrapped = LearnerExtrasObservation(env)
    assert extras_size(8) == 8 * W + len(CLUSTER_EXTRAS)
    assert wrapped.observation_space.shape == (env.observation_space.shape[0] + extras_size(8),)
    obs, _ = wrapped.reset(seed=3)
    assert wrapped.observation_space.contains(obs)
    np.testing.assert_array_equal(obs[:env.observation_space.shape[0]], env.obs)  # the env's own, unchanged
    for _ in range(50):
        obs, _, terminated, truncated, _ = wrapped.step(env.expert_action())
        assert wrapped.observation_space.contains(obs)
        if terminated or truncated:
            break
    again, _ = wrapped.reset(seed=3)
    first, _ = LearnerExtrasObservation(gym.make("LyraGym/Alloc-v1", trace="env-14d", window_s=3600.0,
                                                 num_job_slots=8, num_server_slots=2).unwrapped).reset(seed=3)
    np.testing.assert_array_equal(again, first)  # reset forgets the history
