"""The environments and the agent schedulers, bit for bit, against stored digests.

Speed work on the environments (``lyra_gym/envs``) and on a trained agent's inference
(``agents/policy_scheduler.py``) must not change a single observation, mask, reward, info
or episode outcome. Each env case is a fixed seeded rollout: actions drawn from a seeded
``numpy`` Generator over the mask (a few unmasked draws too, so the counted no-op path is
covered; or the expert's sub-actions), resetting with the next seed when an episode ends.
Every step's observation bytes, mask bytes, ``repr`` of the reward, terminated / truncated
and the info items (``final_metrics`` flattened, wall-clock time left out) go into one
SHA-256. The scheduler cases hash ``simulate``'s metrics and job rows as
``tests/run/test_golden_results.py`` does.

The digests live in ``tests/fixtures/env_digests.json``; a change that is *meant* to change
results regenerates them (``python -m tests.envs.test_env_equivalence --update``) and says why.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tests.digests import ROOT, WALL_CLOCK, result_digest, stored, update_main

DIGESTS = ROOT / "tests" / "fixtures" / "env_digests.json"
CONTENDED = str(ROOT / "traces" / "contended.yaml")
STEPS = 300
UNMASKED_SHARE = 0.05  # share of steps whose action ignores the mask (counted no-ops)

#: case name -> (env id, constructor keywords, policy, reset options)
ENV_CASES: dict[str, tuple[str, dict, str, dict | None]] = {
    "cluster": ("LyraGym/Cluster-v1", {}, "random", None),
    "loaning": ("LyraGym/Loaning-v1", {}, "random", None),
    "elastic": ("LyraGym/Elastic-v1", {}, "random", None),
    "alloc": ("LyraGym/Alloc-v1", {}, "random", None),
    "cluster-contended-short": ("LyraGym/Cluster-v1", dict(config=CONTENDED, window_s=2 * 3600.0,
                                                           num_server_slots=4), "random", None),
    "loaning-contended-test": ("LyraGym/Loaning-v1", dict(config=CONTENDED), "random",
                               {"split": "test", "window": 1}),
    "elastic-warm-k8": ("LyraGym/Elastic-v1", dict(num_job_slots=8, window_s=4 * 3600.0,
                                                   warmup_s=3 * 3600.0), "random", None),
    "cluster-expert": ("LyraGym/Cluster-v1", dict(config=CONTENDED, window_s=3 * 3600.0), "expert", None),
    "alloc-contended-k64": ("LyraGym/Alloc-v1", dict(config=CONTENDED, num_job_slots=64), "random", None),
    "alloc-contended-expert": ("LyraGym/Alloc-v1", dict(config=CONTENDED, num_job_slots=64, window_s=3 * 3600.0),
                               "expert", None),
    "alloc-short-b2-l4": ("LyraGym/Alloc-v1", dict(config=CONTENDED, window_s=2 * 3600.0, borrow_levels=2,
                                                   worker_levels=4, num_job_slots=12, num_server_slots=3),
                          "random", None),
    "alloc-1h-expert": ("LyraGym/Alloc-v1", dict(window_s=3600.0, num_job_slots=16), "expert", None),
    "elastic-adaptive": ("LyraGym/Elastic-v1", dict(config={"scaling": "adaptive"}, num_job_slots=16), "random",
                         None),
    "alloc-fixed-global": ("LyraGym/Alloc-v1", dict(config={"scaling": "fixed-global"}, num_job_slots=16),
                           "random", None),
}
SCHEDULER_CASES = ("alloc-contended-agent", "guided-untrained-agent")


def _action(env, rng: np.random.Generator):
    """A masked-random action (per dimension for MultiDiscrete), or now and then an unmasked one."""
    masks = env.action_masks()
    nvec = getattr(env.action_space, "nvec", None)
    unmasked = rng.random() < UNMASKED_SHARE
    if nvec is None:
        n = env.action_space.n
        return np.int64(rng.integers(n) if unmasked else rng.choice(np.flatnonzero(masks)))
    if unmasked:
        return rng.integers(nvec).astype(np.int64)
    action, start = np.zeros(len(nvec), dtype=np.int64), 0
    for d, n in enumerate(nvec.tolist()):
        action[d] = rng.choice(np.flatnonzero(masks[start:start + n]))
        start += n
    return action


def _info_items(info: dict) -> list:
    items = []
    for key in sorted(info):
        value = info[key]
        if key == "final_metrics":
            items += [(f"final.{k}", repr(v)) for k, v in sorted(value.items()) if k not in WALL_CLOCK]
        else:
            items.append((key, repr(value)))
    return items


def env_digest(case: str, steps: int = STEPS) -> str:
    """SHA-256 of one seeded rollout (see the module docstring)."""
    import gymnasium as gym

    import lyra_gym  # noqa: F401  (registers the ids)

    env_id, kwargs, policy, options = ENV_CASES[case]
    env = gym.make(env_id, **kwargs).unwrapped
    rng = np.random.default_rng(12345)
    h = hashlib.sha256()
    seed = 0

    def record(obs, info) -> None:
        h.update(np.ascontiguousarray(obs).tobytes())
        h.update(env.action_masks().tobytes())
        h.update(repr(_info_items(info)).encode())

    obs, info = env.reset(seed=seed, options=options)
    record(obs, info)
    for _ in range(steps):
        action = env.expert_action() if policy == "expert" else _action(env, rng)
        obs, reward, terminated, truncated, info = env.step(action)
        h.update(f"{reward!r} {terminated} {truncated}\n".encode())
        record(obs, info)
        if terminated or truncated:
            seed += 1
            obs, info = env.reset(seed=seed, options=options)
            record(obs, info)
    return h.hexdigest()


def scheduler_digest(case: str) -> str:
    """SHA-256 of ``simulate`` with an agent as the scheduler (metrics and job rows)."""
    from lyra_gym.model.config import load_config
    from lyra_gym.run.simulate import simulate
    from lyra_gym.workloads.trace import load_trace

    if case == "alloc-contended-agent":
        # the shipped agent on the first 60 jobs of the default trace, on its own (contended) cluster
        jobs = load_trace(ROOT / "traces" / "default.csv")[:60]
        result = simulate(jobs, f"model:{ROOT / 'agents' / 'pretrained' / 'alloc-contended'}",
                          load_config(CONTENDED), seed=0)
        return result_digest(result)
    if case == "guided-untrained-agent":
        # a freshly initialised (seeded) DeepSets model on Cluster-v1 with its VecNormalize, on a test window
        import torch

        from lyra_agents.config import TrainConfig
        from lyra_agents.factory import build_training_envs, make_eval_env, make_model
        from lyra_agents.policy_scheduler import PolicyScheduler

        torch.manual_seed(0)
        cfg = TrainConfig(env_id="LyraGym/Cluster-v1", window_s=6 * 3600.0, num_job_slots=16, num_server_slots=4,
                          n_envs=1, vec_env="dummy", n_steps=64, batch_size=64, net_arch=[32, 32], device="cpu",
                          extractor="deepsets", deepsets_slot_dim=4, seed=3, sim_config=CONTENDED)
        venv = build_training_envs(cfg)
        try:
            model = make_model(cfg, venv)
            env = make_eval_env(cfg)
            window = env.windows.test(0)
            jobs = window.jobs(env.trace)
            result = simulate(jobs, PolicyScheduler(model, cfg, venv), env.sim_config, seed=window.seed)
        finally:
            venv.close()
        return result_digest(result)
    raise KeyError(case)


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the shipped configs name their profiles relative to the root


def _stored() -> dict[str, dict[str, str]]:
    return stored(DIGESTS)


def test_every_case_is_covered():
    stored = _stored()
    assert sorted(stored.get("envs", {})) == sorted(ENV_CASES), \
        "env digests out of date: run python -m tests.envs.test_env_equivalence --update"
    assert sorted(stored.get("schedulers", {})) == sorted(SCHEDULER_CASES)


@pytest.mark.parametrize("case", list(ENV_CASES))
@pytest.mark.sample(4)
def test_env_rollout_is_unchanged_bit_for_bit(case):
    assert env_digest(case) == _stored()["envs"][case]


@pytest.mark.parametrize("case", SCHEDULER_CASES)
def test_agent_as_scheduler_is_unchanged_bit_for_bit(case):
    assert scheduler_digest(case) == _stored()["schedulers"][case]


if __name__ == "__main__":
    update_main(DIGESTS, lambda: {"envs": {case: env_digest(case) for case in ENV_CASES},
                                  "schedulers": {case: scheduler_digest(case) for case in SCHEDULER_CASES}},
                "-m tests.envs.test_env_equivalence")
