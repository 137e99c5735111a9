"""The RL side's building blocks: DeepSets extractor, PolicyScheduler, training config, normalisation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import lyra_gym
from lyra_agents.config import CONFIG_DIR, TrainConfig, TrainConfigError, load_train_config, resolve_config
from lyra_agents.evaluate import evaluate_model, evaluate_scheduler
from lyra_agents.extractors import JobSetExtractor
from lyra_agents.factory import (
    TiedRunningMeanStd, UntrustedModelFileError, build_training_envs, find_artifacts, make_eval_env, make_model,
)
from lyra_agents.policy_scheduler import PolicyScheduler
from lyra_gym.envs import ALLOC_ENV_ID
from lyra_gym.envs.observation import CLUSTER_FEATURES, JOB_FEATURES, SERVER_FEATURES
from lyra_gym.run.simulate import simulate

K, M = 6, 3


def small_config(env_id: str = "LyraGym/Cluster-v1", **changes) -> TrainConfig:
    base = dict(env_id=env_id, window_s=6 * 3600.0, num_job_slots=K, num_server_slots=M, n_envs=1,
                vec_env="dummy", n_steps=64, batch_size=64, net_arch=[32, 32], device="cpu")
    return TrainConfig(**{**base, **changes})


# ---------------------------------------------------------------------- DeepSets extractor
def _permute_slots(obs: torch.Tensor, job_perm: np.ndarray, server_perm: np.ndarray) -> torch.Tensor:
    nj, nc, ns = len(JOB_FEATURES), len(CLUSTER_FEATURES), len(SERVER_FEATURES)
    b = obs.shape[0]
    jobs = obs[:, :K * nj].reshape(b, K, nj)[:, job_perm].reshape(b, -1)
    cluster = obs[:, K * nj:K * nj + nc]
    servers = obs[:, K * nj + nc:].reshape(b, M, ns)[:, server_perm].reshape(b, -1)
    return torch.cat([jobs, cluster, servers], dim=1)


def _extractor(slot_dim: int) -> JobSetExtractor:
    size = K * len(JOB_FEATURES) + len(CLUSTER_FEATURES) + M * len(SERVER_FEATURES)
    torch.manual_seed(0)
    return JobSetExtractor(gym.spaces.Box(-1, 1, (size,), np.float32), K, M, hidden=16, slot_dim=slot_dim)


def test_deepsets_features_are_invariant_to_permuting_the_job_slots():
    extractor = _extractor(slot_dim=0)
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.uniform(-1, 1, (5, extractor._observation_space.shape[0])), dtype=torch.float32)
    with torch.no_grad():
        reference = extractor(obs)
        for _ in range(5):
            permuted = _permute_slots(obs, rng.permutation(K), rng.permutation(M))
            torch.testing.assert_close(extractor(permuted), reference, rtol=1e-5, atol=1e-6)
        # and it is not blind: changing one slot's content changes the features
        changed = obs.clone()
        changed[:, 3] += 0.5
        assert not torch.allclose(extractor(changed), reference)


def test_deepsets_slot_codes_permute_with_the_slots_and_the_pooled_part_stays_invariant():
    slot_dim = 4
    extractor = _extractor(slot_dim)
    rng = np.random.default_rng(1)
    obs = torch.as_tensor(rng.uniform(-1, 1, (3, extractor._observation_space.shape[0])), dtype=torch.float32)
    job_perm, server_perm = rng.permutation(K), rng.permutation(M)
    with torch.no_grad():
        ref, out = extractor(obs), extractor(_permute_slots(obs, job_perm, server_perm))
    pooled = extractor.features_dim - slot_dim * (K + M)
    torch.testing.assert_close(out[:, :pooled], ref[:, :pooled], rtol=1e-5, atol=1e-6)
    codes_ref = ref[:, pooled:pooled + K * slot_dim].reshape(3, K, slot_dim)
    codes_out = out[:, pooled:pooled + K * slot_dim].reshape(3, K, slot_dim)
    torch.testing.assert_close(codes_out, codes_ref[:, job_perm], rtol=1e-5, atol=1e-6)


def test_deepsets_rejects_an_observation_of_another_layout():
    with pytest.raises(ValueError, match="does not match"):
        JobSetExtractor(gym.spaces.Box(-1, 1, (50,), np.float32), K, M)


def test_deepsets_extractor_trains_inside_maskable_ppo():
    cfg = small_config(extractor="deepsets", deepsets_hidden=16, deepsets_slot_dim=2)
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    assert isinstance(model.policy.features_extractor, JobSetExtractor)
    model.learn(64)
    venv.close()


# ---------------------------------------------------------------------- observation normalisation
def test_tied_statistics_pool_every_slot_of_a_feature():
    groups = [(0, 3, 2)]  # 3 slots x 2 features, then 1 free entry
    rms = TiedRunningMeanStd((7,), groups)
    rng = np.random.default_rng(0)
    data = np.concatenate([rng.normal([0, 10, 1, 20, 2, 30], 1.0, (500, 6)), rng.normal(5, 2, (500, 1))], axis=1)
    for chunk in np.array_split(data, 7):
        rms.update(chunk)
    pooled = data[:, :6].reshape(-1, 3, 2).reshape(-1, 2)  # every slot's rows as samples of 2 features
    np.testing.assert_allclose(rms.mean[:6].reshape(3, 2), np.tile(pooled.mean(axis=0), (3, 1)), rtol=1e-6)
    np.testing.assert_allclose(rms.var[:6].reshape(3, 2), np.tile(pooled.var(axis=0), (3, 1)), rtol=1e-4)
    np.testing.assert_allclose(rms.mean[6], data[:, 6].mean(), rtol=1e-6)  # outside a group: untouched


# ---------------------------------------------------------------------- PolicyScheduler
@pytest.mark.parametrize("env_id", lyra_gym.ENV_IDS)
@pytest.mark.sample(1)
def test_policy_scheduler_with_an_untrained_model_produces_valid_plans(env_id):
    cfg = small_config(env_id)
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    env = make_eval_env(cfg)
    scheduler = PolicyScheduler(model, cfg, venv, deterministic=False)
    window = env.windows.test(0)
    jobs = window.jobs(env.trace)
    # the engine validates every Plan and raises PlanError on the first violated rule
    result = simulate(jobs, scheduler, env.sim_config, seed=window.seed)
    assert result.metrics["jobs_total"] == len(jobs)
    assert result.metrics["jobs_finished"] + result.metrics["jobs_unfinished"] == len(jobs)
    assert scheduler.invalid_actions == 0  # masks respected
    venv.close()


def test_policy_scheduler_sees_the_env_observation_and_masks_and_reproduces_its_episode():
    cfg = small_config()
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    model.learn(128)  # non-trivial normalisation statistics
    env = make_eval_env(cfg)
    scheduler = PolicyScheduler(model, cfg, venv)
    # step by step: same observation and masks as the env
    env.reset(options={"split": "test", "window": 1})
    for _ in range(60):
        obs, masks, _, _ = scheduler.observe(env.engine.view)
        np.testing.assert_array_equal(obs, env.obs)
        np.testing.assert_array_equal(masks, env.action_masks())
        _, _, terminated, truncated, _ = env.step(scheduler.act(obs, masks))
        if terminated or truncated:
            break
    # whole episode: the env rollout and simulate() with the scheduler give the same metrics
    in_env = evaluate_model(model, env, [1], venv)[0]
    in_engine = evaluate_scheduler(scheduler, env, [1])[0]
    for key in ("jct_mean_s", "queue_mean_s", "preemptions", "servers_borrowed", "scale_events", "makespan_s"):
        assert in_env[key] == in_engine[key], key
    venv.close()


def test_policy_scheduler_rejects_a_model_trained_with_other_slots():
    cfg = small_config()
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    with pytest.raises(ValueError, match="does not match"):
        PolicyScheduler(model, cfg.replace(num_job_slots=K + 1), venv)
    venv.close()


def test_find_artifacts_locates_a_checkpoints_statistics_and_run_config(tmp_path):
    (tmp_path / "config.yaml").write_text("name: x\n")
    ckpt = tmp_path / "checkpoints"
    ckpt.mkdir()
    (ckpt / "model_2048_steps.zip").write_bytes(b"")
    (ckpt / "model_vecnormalize_2048_steps.pkl").write_bytes(b"")
    files = find_artifacts(ckpt / "model_2048_steps.zip")
    assert files.vecnormalize is None  # only SB3's pickle: not loaded unless trusted
    assert files.vecnormalize_pickle == ckpt / "model_vecnormalize_2048_steps.pkl"
    with pytest.raises(UntrustedModelFileError, match="convert"):
        files.normalizer_file()
    assert files.normalizer_file(trust=True) == files.vecnormalize_pickle
    (ckpt / "model_vecnormalize_2048_steps.npz").write_bytes(b"")
    files = find_artifacts(ckpt / "model_2048_steps.zip")
    assert files.vecnormalize == files.normalizer_file() == ckpt / "model_vecnormalize_2048_steps.npz"
    assert files.config == tmp_path / "config.yaml"
    with pytest.raises(FileNotFoundError, match="no such model file"):
        find_artifacts(tmp_path / "missing.zip")


# ---------------------------------------------------------------------- config
def test_config_yaml_round_trip(tmp_path):
    cfg = TrainConfig(net_arch=[17, 5], reward={"jct": 1.0, "preemption": 0.5}, target_kl=None, seed=9)
    path = tmp_path / "config.yaml"
    path.write_text(cfg.to_yaml())
    assert load_train_config(path) == cfg


@pytest.mark.parametrize("env_id", (*lyra_gym.ENV_IDS, ALLOC_ENV_ID))
def test_shipped_configs_state_every_key_and_name_their_env(env_id):
    cfg = resolve_config(env_id=env_id)
    assert cfg.env_id == env_id
    name = env_id.split("/")[1].split("-")[0].lower()
    text = (CONFIG_DIR / f"{name}.yaml").read_text()
    for key in TrainConfig.__dataclass_fields__:
        if key != "resume_from":
            assert f"\n{key}:" in text, f"{name}.yaml does not state {key}"
    quick = resolve_config(env_id=env_id, quick=True)
    assert quick.env_id == env_id and quick.name == "quick" and quick.total_timesteps < cfg.total_timesteps


def test_set_overrides_are_typed_by_the_field():
    cfg = resolve_config(overrides=["n_envs=4", "learning_rate=1e-4", "net_arch=[32, 16]", "target_kl=null",
                                    "normalize_reward=false", "reward=usage", "total_timesteps=2e5",
                                    "sim_config=none"])
    assert cfg.n_envs == 4 and isinstance(cfg.n_envs, int)
    assert cfg.learning_rate == 1e-4
    assert cfg.net_arch == [32, 16]
    assert cfg.target_kl is None and cfg.sim_config is None
    assert cfg.normalize_reward is False
    assert cfg.reward == "usage"
    assert cfg.total_timesteps == 200_000


def test_set_with_an_unknown_key_names_it_and_suggests_the_closest():
    with pytest.raises(TrainConfigError, match=r"unknown key 'lerning_rate'; did you mean 'learning_rate'"):
        resolve_config(overrides=["lerning_rate=0.1"])


@pytest.mark.parametrize("item, message", [
    ("n_envs=four", "n_envs: expected int"),
    ("n_envs=2.5", "n_envs: expected int"),
    ("normalize_obs=maybe", "normalize_obs: expected bool"),
    ("algo=dqn", "algo: must be one of"),
    ("n_envs=0", "n_envs: must be >= 1"),
    ("n_envs", "expected key=value"),
])
def test_set_with_a_bad_value_raises_a_clear_error(item, message):
    with pytest.raises(TrainConfigError, match=message):
        resolve_config(overrides=[item])


def test_unknown_key_in_a_yaml_file_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("n_envs: 2\nbatchsize: 64\n")
    with pytest.raises(TrainConfigError, match=r"bad\.yaml: unknown key 'batchsize'; did you mean 'batch_size'"):
        load_train_config(path)


def test_policy_scheduler_runs_a_plain_ppo_model_and_counts_its_masked_choices():
    cfg = small_config(algo="ppo")
    venv = build_training_envs(cfg)
    model = make_model(cfg, venv)
    env = make_eval_env(cfg)
    scheduler = PolicyScheduler(model, cfg, venv, deterministic=False)
    assert not scheduler.use_masks
    window = env.windows.test(0)
    result = simulate(window.jobs(env.trace), scheduler, env.sim_config, seed=window.seed)
    assert result.metrics["jobs_total"] == len(window.jobs(env.trace))
    assert scheduler.invalid_actions > 0  # an unmasked random policy picks masked values; they become neutral
    venv.close()
