"""``TrainConfig.validate`` and ``_coerce`` messages, pinned word for word, and which of several faults
is reported (the first in the validation order): a refactoring of the checks must keep both."""

from __future__ import annotations

import pytest

from lyra_agents.config import TrainConfig, TrainConfigError, _coerce, resolve_config

LONG = "x" * 101

# (changes, message), one case per check, in validation order
CHECKS = [
    ({"name": ""}, "name: must be a non-empty text (one folder-name component), got ''"),
    ({"name": "a/b"}, "name: must be a single folder-name component without '/', '\\' or control characters, "
                      "got 'a/b'"),
    ({"name": ".."}, "name: must be a plain folder-name component (not '.', '..', no leading or trailing space), "
                     "got '..'"),
    ({"name": LONG}, "name: must be at most 100 characters, got 101"),
    ({"runs_dir": " "}, "runs_dir: must be a folder path, got ' '"),
    ({"runs_dir": 3}, "runs_dir: must be a folder path, got 3"),
    ({"runs_dir": "a\0b"}, "runs_dir: must be a folder path, got 'a\\x00b'"),
    ({"device": "gpu"}, "device: must be auto, cpu, cuda, cuda:N or mps, got 'gpu'"),
    ({"learning_rate": float("nan")}, "learning_rate: must be a finite number, got nan"),
    ({"target_kl": float("inf")}, "target_kl: must be a finite number, got inf"),
    ({"window_s": float("-inf")}, "window_s: must be a finite number, got -inf"),
    ({"seed": -1}, "seed: must be >= 0, got -1"),
    ({"trace_seed": -2}, "trace_seed: must be >= 0, got -2"),
    ({"seed": 2 ** 32 - 7}, "seed: must be at most 2**32 - n_envs = 4294967288, got 4294967289"),
    ({"window_s": 0}, "window_s: must be > 0, got 0"),
    ({"reward_scale_s": -1.0}, "reward_scale_s: must be > 0, got -1.0"),
    ({"clip_obs": 0}, "clip_obs: must be > 0, got 0"),
    ({"clip_range": 0}, "clip_range: must be > 0, got 0"),
    ({"max_grad_norm": 0}, "max_grad_norm: must be > 0, got 0"),
    ({"warmup_s": -1.0}, "warmup_s: must be >= 0, got -1.0"),
    ({"ent_coef": -0.1}, "ent_coef: must be >= 0, got -0.1"),
    ({"vf_coef": -1}, "vf_coef: must be >= 0, got -1"),
    ({"test_fraction": 0}, "test_fraction: must lie in (0, 1), got 0"),
    ({"test_fraction": 1.0}, "test_fraction: must lie in (0, 1), got 1.0"),
    ({"target_kl": 0}, "target_kl: must be > 0 or null, got 0"),
    ({"algo": "dqn"}, "algo: must be one of maskable_ppo, ppo, masked_ppo, got 'dqn'"),
    ({"vec_env": "x"}, "vec_env: must be one of auto, dummy, subproc, got 'x'"),
    ({"extractor": "x"}, "extractor: must be one of mlp, deepsets, slots, got 'x'"),
    ({"activation": "x"}, "activation: must be one of tanh, relu, got 'x'"),
    ({"lr_schedule": "x"}, "lr_schedule: must be one of constant, linear, got 'x'"),
    ({"heuristic": "model:x"}, "heuristic: must be a registered heuristic name, got 'model:x'"),
    ({"env_id": "CartPole-v1"}, "env_id: must be a LyraGym/ id, got 'CartPole-v1'"),
    ({"env_id": "LyraGym/Nope-v0"}, "env_id: 'LyraGym/Nope-v0' is not a registered id (known: LyraGym/Cluster-v1, "),
    *[({key: 0}, f"{key}: must be >= 1, got 0") for key in (
        "total_timesteps", "n_envs", "n_steps", "batch_size", "n_epochs", "num_job_slots", "borrow_levels",
        "eval_windows", "final_windows", "deepsets_hidden", "worker_levels", "bc_epochs",
        "bc_batch_size")],
    *[({key: -1}, f"{key}: must be >= 0, got -1") for key in (
        "num_server_slots", "eval_freq", "checkpoint_freq", "torch_threads", "deepsets_slot_dim", "bc_steps")],
    ({"max_steps": 0}, "max_steps: must be >= 1 (or null: the env's default), got 0"),
    ({"n_steps": 1, "n_envs": 1}, "n_steps * n_envs: must be >= 2 (PPO advantage normalisation)"),
    ({"gamma": 0}, "gamma/gae_lambda: must lie in (0, 1] / [0, 1], got 0/0.95"),
    ({"gamma": 1.5}, "gamma/gae_lambda: must lie in (0, 1] / [0, 1], got 1.5/0.95"),
    ({"gae_lambda": -0.1}, "gamma/gae_lambda: must lie in (0, 1] / [0, 1], got 0.995/-0.1"),
    ({"learning_rate": 0}, "learning_rate: must be > 0, got 0"),
    ({"bc_learning_rate": -1}, "bc_learning_rate: must be > 0, got -1"),
    ({"net_arch": []}, "net_arch: must be a non-empty list of widths >= 1, got []"),
    ({"net_arch": [4, 0]}, "net_arch: must be a non-empty list of widths >= 1, got [4, 0]"),
]


def _message(**changes) -> str:
    with pytest.raises(TrainConfigError) as info:
        TrainConfig().replace(**changes)
    return str(info.value)


@pytest.mark.parametrize("changes, message", CHECKS, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(CHECKS)])
def test_each_check_names_its_field(changes, message):
    text = _message(**changes)
    assert text == message or message.endswith(", ") and text.startswith(message)


# one fault per check group, in validation order; with every fault from one on, that one is reported
ORDERED = [
    ({"name": ".."}, "name:"), ({"runs_dir": ""}, "runs_dir:"), ({"device": "tpu"}, "device:"),
    ({"clip_obs": float("nan")}, "clip_obs: must be a finite"), ({"trace_seed": -1}, "trace_seed:"),
    ({"window_s": 0}, "window_s:"), ({"vf_coef": -1}, "vf_coef:"), ({"test_fraction": 2}, "test_fraction:"),
    ({"target_kl": -1}, "target_kl:"), ({"lr_schedule": "cosine"}, "lr_schedule:"),
    ({"heuristic": "a:b"}, "heuristic:"), ({"env_id": "Nope-v0"}, "env_id:"), ({"max_steps": 0}, "max_steps:"),
    ({"eval_freq": -1}, "eval_freq:"), ({"n_steps": 1, "n_envs": 1}, "n_steps * n_envs:"),
    ({"gae_lambda": 2}, "gamma/gae_lambda:"), ({"bc_learning_rate": 0}, "bc_learning_rate:"),
    ({"net_arch": []}, "net_arch:"),
]


@pytest.mark.parametrize("first", range(len(ORDERED)))
def test_the_first_invalid_field_in_validation_order_is_reported(first):
    changes = {k: v for faults, _ in ORDERED[first:] for k, v in faults.items()}
    assert _message(**changes).startswith(ORDERED[first][1])


def test_the_seed_bound_counts_the_vector_envs():
    assert TrainConfig(seed=2 ** 32 - 8, n_envs=8).seed == 2 ** 32 - 8
    assert _message(seed=2 ** 32 - 8, n_envs=9) == "seed: must be at most 2**32 - n_envs = 4294967287, got 4294967288"


@pytest.mark.parametrize("key, value, message", [
    ("n_envs", "four", "src: n_envs: expected int, got 'four'"),
    ("n_envs", "2.5", "src: n_envs: expected int, got 2.5"),
    ("n_envs", 2.5, "src: n_envs: expected int, got 2.5"),
    ("n_envs", True, "src: n_envs: expected int, got True"),
    ("n_envs", "null", "src: n_envs: may not be null"),
    ("n_envs", None, "src: n_envs: may not be null"),
    ("name", None, "src: name: may not be null"),
    ("normalize_obs", "maybe", "src: normalize_obs: expected bool, got 'maybe'"),
    ("normalize_obs", 1, "src: normalize_obs: expected bool, got 1"),
    ("learning_rate", "abc", "src: learning_rate: expected float, got 'abc'"),
    ("learning_rate", True, "src: learning_rate: expected float, got True"),
    ("target_kl", "x", "src: target_kl: expected float | None, got 'x'"),
    ("net_arch", "5", "src: net_arch: expected list, got 5"),
    ("net_arch", ["a"], "src: net_arch: expected list, got ['a']"),
    ("net_arch", "[1, x", "src: net_arch: expected list, got '[1, x'"),
])
def test_coerce_errors_name_source_and_field(key, value, message):
    with pytest.raises(TrainConfigError) as info:
        _coerce(key, value, "src")
    assert str(info.value) == message


@pytest.mark.parametrize("key, value, expected", [
    ("normalize_obs", "yes", True), ("normalize_obs", False, False), ("learning_rate", "1e5", 100000.0),
    ("learning_rate", 3, 3.0), ("target_kl", "none", None), ("target_kl", "~", None), ("target_kl", "", None),
    ("target_kl", "NULL", None), ("target_kl", None, None), ("sim_config", "null", None), ("sim_config", 5, "5"),
    ("net_arch", "[1, 2]", [1, 2]), ("net_arch", (3,), [3]), ("net_arch", [1.5], [1]), ("name", 5, "5"),
    ("reward", "{jct: 1}", {"jct": 1}), ("reward", [1], [1]), ("seed", "1e3", 1000), ("seed", 3.0, 3),
    ("seed", "7", 7), ("trace", "null", "null"), ("trace", "[a]", "[a]"),
])
def test_coerce_converts_to_the_field_type(key, value, expected):
    got = _coerce(key, value, "src")
    assert got == expected and type(got) is type(expected)


def test_set_errors_name_the_source():
    with pytest.raises(TrainConfigError, match=r"^--set: n_envs: must be >= 1, got 0$"):
        resolve_config(overrides=["n_envs=0"])
    with pytest.raises(TrainConfigError, match=r"^--set: n_envs: expected int, got 'x'$"):
        resolve_config(overrides=["n_envs=x"])


def test_env_defaults_come_from_the_env_unless_a_config_sets_them():
    """Issue 41 item 7: ``max_steps`` unset leaves the env's own default (Cluster 5,000, Alloc 200,000)."""
    import gymnasium as gym

    from lyra_gym.envs.alloc_env import ALLOC_MAX_STEPS

    for env_id, expected in (("LyraGym/Cluster-v1", 5000), ("LyraGym/Alloc-v1", ALLOC_MAX_STEPS)):
        cfg = TrainConfig(env_id=env_id)
        assert cfg.max_steps is None and "max_steps" not in cfg.env_kwargs()
        env = gym.make(env_id, **cfg.env_kwargs())
        assert env.unwrapped.max_steps == expected
        env.close()
    assert TrainConfig(max_steps=7).env_kwargs()["max_steps"] == 7
