"""Observation version 2 inside a guided environment (a ``Cluster-v1`` built with ``version=2``, as
the ``-v2`` envs are wired): version 1's entries stay bit for bit those of ``Cluster-v1`` along an
expert run, and the version 2 entries agree with the engine's own records at every step."""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from lyra_gym.envs.cluster_env import ClusterEnv
from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, ObservationBuilder
from lyra_gym.envs.observation_v2 import V2_CLUSTER_FEATURES, V2_JOB_FEATURES
from lyra_gym.model.jobs import JobState

KWARGS = dict(window_s=4 * 3600.0, warmup_s=3600.0, num_job_slots=8, num_server_slots=4, max_steps=40)


class ClusterEnvV2(ClusterEnv):
    """``Cluster-v1`` observing with version 2 (what the lead wires into the ``-v2`` ids)."""

    def _init_spaces(self) -> None:
        super()._init_spaces()
        self.builder = ObservationBuilder(self.k, self.m, version=2)
        self.observation_space = spaces.Box(-1.0, 1.0, (self.builder.size,), dtype=np.float32)

    def _observe(self, episode) -> None:
        super()._observe(episode)
        self.obs = self.builder.build(episode.engine.view, self.slots, self.server_ids, episode.window)


def split(obs, k, m):
    """(job rows, cluster block, server rows) of a version 2 observation."""
    width, cluster = len(JOB_FEATURES) + len(V2_JOB_FEATURES), len(CLUSTER_FEATURES) + len(V2_CLUSTER_FEATURES)
    return obs[:k * width].reshape(k, width), obs[k * width:k * width + cluster], obs[k * width + cluster:]


def test_version_1_entries_match_cluster_v1_and_version_2_entries_match_the_engine():
    one, two = ClusterEnv(**KWARGS), ClusterEnvV2(**KWARGS)
    k, m, w1 = 8, 4, len(JOB_FEATURES)
    obs1, _ = one.reset(seed=3)
    obs2, _ = two.reset(seed=3)
    assert two.observation_space.shape == (two.builder.size,) and len(two.observation_names) == two.builder.size
    elapsed, shares, efficiencies = [], [], []
    for _ in range(40):
        jobs, cluster, servers = split(obs2, k, m)
        assert np.array_equal(jobs[:, :w1].ravel(), obs1[:k * w1])
        assert np.array_equal(cluster[:len(CLUSTER_FEATURES)], obs1[k * w1:k * w1 + len(CLUSTER_FEATURES)])
        assert np.array_equal(servers, obs1[k * w1 + len(CLUSTER_FEATURES):])
        engine, window = two.engine, two.window
        c = dict(zip(V2_CLUSTER_FEATURES, cluster[len(CLUSTER_FEATURES):]))
        assert c["window_elapsed"] == np.float32(min(1.0, max(0.0, (engine.now - window.start_s) / window.length_s)))
        left = sum(j.spec.submit_time > engine.now for j in engine.jobs)
        in_window = sum(j.spec.submit_time >= window.start_s for j in engine.jobs)
        assert c["arrivals_left"] == np.float32(math.log1p(left) / 6)
        assert c["arrivals_left_share"] == np.float32(left / in_window)
        elapsed.append(c["window_elapsed"])
        shares.append(c["arrivals_left_share"])
        for row, job in zip(jobs, two.slots):
            f = dict(zip(V2_JOB_FEATURES, row[w1:]))
            assert f["attained_service"] == np.float32(min(1.0, job.attained_gpu_s / 36000))
            assert f["preemptions"] == np.float32(min(job.preemptions, 8) / 8)
            if job.state is JobState.RUNNING:
                record = job._job
                scaling = engine.scaling
                part = job.progress_part
                expected = scaling.statistical_efficiency(job.spec, record.init_batch, record.workers, job.batch_size,
                                                          part)
                assert f["statistical_efficiency"] == np.float32(expected)
                efficiencies.append(expected)
                assert f["speedup"] == np.float32(min(1.0, math.log2(1 + job.rate / record.reference_rate) / 4))
                assert f["preempt_cost"] > 0  # the built-in profiles' restart overheads
        action = two.expert_action()
        obs1, r1, done, trunc, _ = one.step(action)
        obs2, r2, done2, trunc2, _ = two.step(action)
        assert (r1, done, trunc) == (r2, done2, trunc2)
        if done or trunc:
            break
    assert elapsed == sorted(elapsed) and shares == sorted(shares, reverse=True)
    assert elapsed[-1] > 0 and shares[-1] < 1 and min(efficiencies) < 1  # they move, and E is charged


def test_a_fork_observes_version_2_identically():
    env = ClusterEnvV2(**KWARGS)
    env.reset(seed=5)
    for _ in range(5):
        env.step(env.expert_action())
    fork = env.fork()
    for _ in range(5):
        action = env.expert_action()
        assert np.array_equal(env.step(action)[0], fork.step(action)[0])
