"""agents/members.py: a masked-PPO round in worker processes is the round in this process, bit for
bit; a worker's error or death is an error naming it; close leaves no process behind."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lyra_agents.config import TrainConfig
from lyra_agents.masked_ppo import MaskedPPO
from lyra_agents.members import GroupSpec, LocalMembers, ProcessMembers, make_member


def tiny(**changes) -> TrainConfig:
    base = dict(env_id="LyraGym/Cluster-v1", algo="masked_ppo", window_s=3 * 3600.0, num_job_slots=6,
                num_server_slots=3, n_envs=2, group_size=2, net_arch=[32], batch_size=64, n_epochs=2,
                total_timesteps=60, curriculum_start_s=1800.0, device="cpu", seed=5, learning_rate=1e-3,
                trace_seeds=[0, 1], bc_steps=32, bc_epochs=1)
    return TrainConfig(**{**base, **changes})


def run(cfg: TrainConfig) -> tuple[list, dict]:
    model = MaskedPPO(cfg)
    try:
        model.behaviour_clone()
        first = model.collect(model.policy_choice)
        model.learn(150)  # two more rounds and their updates, trace seeds 1 then 0 again
        spent = getattr(model.members(), "cpu_spent", None)
        if spent is not None:  # the workers' CPU is in the learner's env and reset times
            assert 0 < spent <= model.timing["env"] + model.timing["reset"]
        return first, {k: v.clone() for k, v in model.policy.state_dict().items()}
    finally:
        model.close()


def test_rounds_in_worker_processes_equal_the_rounds_here_bit_for_bit():
    here, weights_here = run(tiny(vec_env="dummy"))
    there, weights_there = run(tiny(vec_env="subproc"))
    assert len(here) == len(there) == 2 and all(len(g) == 2 for g in there)
    steps = 0
    for a, b in zip((t for g in here for t in g), (t for g in there for t in g)):
        steps += len(a.actions)
        assert len(a.actions) == len(b.actions) and a.end_s == b.end_s and a.metrics == b.metrics
        for name in ("obs", "masks", "actions"):
            assert all(np.array_equal(x, y) for x, y in zip(getattr(a, name), getattr(b, name))), name
        assert a.logp == b.logp and a.times == b.times and a.rewards == b.rewards
    assert steps > 0
    assert weights_here.keys() == weights_there.keys()
    assert all(torch.equal(weights_here[k], weights_there[k]) for k in weights_here)


def test_a_group_of_forks_plays_as_members_built_alone(monkeypatch):
    """``make_group`` (one member built, the others its forks: one trace, one warm start per
    reset) gives the same round and weights, bit for bit, as every member built and warmed alone."""
    from lyra_agents import masked_ppo

    cfg = tiny(vec_env="dummy", warmup_s=3600.0, group_size=3)
    forks, weights_forks = run(cfg)
    monkeypatch.setattr(masked_ppo, "make_group",
                        lambda cfg, kwargs: [make_member(cfg, kwargs) for _ in range(cfg.group_size)])
    alone, weights_alone = run(cfg)
    flat = [(a, b) for g, h in zip(forks, alone) for a, b in zip(g, h)]
    assert len(flat) == 6 and sum(len(a.actions) for a, _ in flat) > 0
    for a, b in flat:
        assert a.end_s == b.end_s and a.metrics == b.metrics and a.rewards == b.rewards and a.logp == b.logp
        assert all(np.array_equal(x, y) for x, y in zip(a.obs, b.obs))
    assert all(torch.equal(weights_forks[k], weights_alone[k]) for k in weights_forks)


@pytest.fixture
def workers():
    cfg = tiny()
    members = ProcessMembers(cfg, 2)
    yield cfg, members
    members.close()


def test_a_workers_error_comes_back_with_its_traceback(workers):
    cfg, members = workers
    starts = members.reset([GroupSpec(0, 0, {"window_s": cfg.window_s, "num_job_slots": 6,
                                             "num_server_slots": 3}, 7)])
    assert len(starts) == 2 and all(s.masks is not None for s in starts if not s.done)
    with pytest.raises(RuntimeError, match=r"(?s)env worker 1 failed:.*KeyError: 5"):
        members.step([(5, np.zeros(3, dtype=np.int64))])  # member 5 is no member of this round


def test_a_dead_worker_is_named_and_close_leaves_no_process(workers):
    _, members = workers
    processes = list(members._processes)
    processes[0].kill()
    processes[0].join(timeout=10)
    with pytest.raises(RuntimeError, match=r"env worker 0 \(pid \d+\) stopped"):
        members.step([(0, np.zeros(3, dtype=np.int64))])
    members.close()
    assert not any(p.is_alive() for p in processes)


def test_local_members_are_the_learners_own_envs():
    model = MaskedPPO(tiny(vec_env="dummy", n_envs=1, trace_seeds=[]))
    try:
        members = model.members()
        assert isinstance(members, LocalMembers)
        members.reset([GroupSpec(0, model.cfg.trace_seed, model.slot_kwargs()[0], 3)])
        assert members.envs([0, 1]) == model.group_members(0, model.cfg.trace_seed, model.slot_kwargs()[0])
    finally:
        model.close()


def test_env_processes_with_the_vine_are_refused_naming_the_key():
    from lyra_agents.config import TrainConfigError

    with pytest.raises(TrainConfigError, match="vec_env: subproc .env processes. serves baseline group or value"):
        tiny(baseline="vine", vec_env="subproc")
    assert tiny(baseline="vine", vec_env="dummy").vec_env == "dummy"
