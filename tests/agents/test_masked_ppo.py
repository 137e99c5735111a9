"""agents/masked_ppo.py: masks as one tensor op, the grouped (input-dependent) baseline by hand,
gamma = 1 returns equal to -total JCT / scale, determinism, and the saved model as a scheduler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lyra_agents.config import TrainConfig, TrainConfigError
from lyra_agents.masked_ppo import MaskedPolicy, MaskedPPO, Trajectory, expert_action, group_baseline
from lyra_agents.policy_scheduler import PolicyScheduler
from lyra_agents.trajectory import action_masks
from masked_model_files import assert_runs_as_a_scheduler


def tiny(**changes) -> TrainConfig:
    base = dict(env_id="LyraGym/Cluster-v1", algo="masked_ppo", window_s=3 * 3600.0, num_job_slots=6,
                num_server_slots=3, n_envs=1, group_size=2, net_arch=[32], batch_size=64, n_epochs=2,
                total_timesteps=60, curriculum_start_s=1800.0, device="cpu", seed=5, learning_rate=1e-3)
    return TrainConfig(**{**base, **changes})


def test_masked_values_are_never_sampled_and_their_log_prob_is_minus_inf_with_finite_gradients():
    nvec = np.array([5, 3, 4])
    policy = MaskedPolicy(7, nvec, [16], "tanh")
    gen = torch.Generator().manual_seed(0)
    obs = torch.randn(200, 7, generator=gen)
    masks = torch.rand(200, int(nvec.sum()), generator=gen) < 0.5
    masks[:, [0, 5, 8]] = True  # level 0 of every dimension always valid
    logp = policy.log_probs(obs, masks)
    assert logp.shape == (200, 3, 5)
    assert torch.isinf(logp[:, 1, 3:]).all() and torch.isinf(logp[:, 2, 4:]).all()  # padding
    samples = torch.multinomial(logp.exp().reshape(-1, 5), 50, replacement=True, generator=gen).reshape(200, 3, 50)
    starts = [0, 5, 8]
    for d in range(3):
        flat = samples[:, d, :] + starts[d]
        assert masks.gather(1, flat).all(), d  # only valid values drawn
    masked_action = torch.zeros(200, 3, dtype=torch.long)
    masked_action[:, 0] = 1
    rows = ~masks[:, 1]
    assert torch.isneginf(MaskedPolicy.chosen(logp, masked_action)[rows]).all()
    # entropy and the log-prob of valid actions backpropagate without NaN through the -inf entries
    loss = MaskedPolicy.entropy(logp).mean() + MaskedPolicy.chosen(logp, torch.zeros(200, 3, dtype=torch.long)).mean()
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in policy.pi.parameters())
    # a dimension's probabilities sum to 1 over its valid values
    assert torch.allclose(logp.exp().sum(dim=2), torch.ones(200, 3))


def test_group_baseline_is_the_mean_return_to_go_at_equal_simulated_time_by_hand():
    a = Trajectory(times=[0.0, 10.0], rewards=[-2.0, -1.0], end_s=20.0)   # rtg: 0 s -> -3, 10 s -> -1, 20 s -> 0
    b = Trajectory(times=[0.0, 5.0, 15.0], rewards=[-1.0, -2.0, -3.0], end_s=30.0)  # -6, -5, -3, 30 s -> 0
    c = Trajectory(times=[0.0], rewards=[-4.0], end_s=40.0)                # -4, 40 s -> 0
    base_a, base_b, base_c = group_baseline([a, b, c])
    # at 10 s: a -1; b between 5 s (-5) and 15 s (-3): -4; c between 0 (-4) and 40 (0): -3
    assert base_a == pytest.approx([(-3 - 6 - 4) / 3, (-1 - 4 - 3) / 3])
    # at 5 s: a -2 (between -3 and -1); b -5; c -3.5. At 15 s: a -0.5; b -3; c -2.5
    assert base_b == pytest.approx([(-3 - 6 - 4) / 3, (-2 - 5 - 3.5) / 3, (-0.5 - 3 - 2.5) / 3])
    assert base_c == pytest.approx([(-3 - 6 - 4) / 3])
    assert np.array_equal(b.returns_to_go(), [-6.0, -5.0, -3.0])


def test_group_members_see_one_window_and_returns_at_gamma_1_are_minus_total_jct_over_scale():
    cfg = tiny(curriculum_start_s=0.0, bc_expert="heuristic")
    model = MaskedPPO(cfg)
    groups = model.collect(lambda raw, masks, envs: (np.stack([expert_action(e) for e in envs]),
                                                     np.zeros(len(envs)), raw))
    first, second = groups[0]
    assert first.times == second.times and first.rewards == second.rewards  # same arrivals, same expert
    metrics = first.metrics
    assert metrics is not None and metrics["jobs_unfinished"] == 0
    env = model._envs[(0, cfg.trace_seed)][0].unwrapped
    jobs = env.engine.jobs
    total_jct_s = sum(job.finish_time - job.spec.submit_time for job in jobs)
    assert first.returns_to_go()[0] == pytest.approx(-total_jct_s / cfg.reward_scale_s, rel=1e-9)
    model.close()


def test_curriculum_cuts_episodes_at_the_first_decision_past_the_cap():
    model = MaskedPPO(tiny(curriculum_start_s=1800.0, curriculum_growth_s=600.0))
    traj = model.collect(model.policy_choice)[0][0]
    assert traj.times[-1] - traj.times[0] < 1800.0 <= traj.end_s - traj.times[0]
    model.updates = 2
    assert model.episode_cap_s() == 3000.0
    model.close()


def test_same_seed_same_weights_bit_for_bit_after_a_tiny_run():
    states = []
    for _ in range(2):
        model = MaskedPPO(tiny(bc_steps=32, bc_epochs=1))
        model.behaviour_clone()
        model.learn(60)
        states.append({k: v.clone() for k, v in model.policy.state_dict().items()})
        model.close()
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    other = MaskedPPO(tiny(seed=6))
    assert not torch.equal(other.policy.state_dict()["pi.0.weight"], states[0]["pi.0.weight"])


def test_saved_model_runs_as_a_scheduler_with_the_env_episode(tmp_path):
    cfg = tiny()
    model = MaskedPPO(cfg)
    model.learn(60)
    loaded = assert_runs_as_a_scheduler(model, cfg, tmp_path)
    assert isinstance(loaded, PolicyScheduler)
    assert all(torch.equal(a, b) for a, b in zip(loaded.model.policy.state_dict().values(),
                                                   model.policy.state_dict().values()))


def test_config_keys_are_checked_and_expert_sets_guide_and_bc_expert():
    with pytest.raises(TrainConfigError, match="group_size: baseline 'group' needs at least 2"):
        tiny(group_size=1)
    assert tiny(group_size=1, baseline="value").baseline == "value"
    with pytest.raises(TrainConfigError, match="baseline: must be one of group, value"):
        tiny(baseline="mean")
    with pytest.raises(TrainConfigError, match="trace_seeds: must be seeds >= 0"):
        tiny(trace_seeds=[0, -1])
    with pytest.raises(TrainConfigError, match="curriculum_growth_s: must be >= 0"):
        tiny(curriculum_growth_s=-1.0)
    cfg = tiny(bc_expert="small_first").updated({"expert": "lyra"})
    assert (cfg.heuristic, cfg.bc_expert) == ("lyra", "heuristic")
    assert TrainConfig().lr_schedule == "constant"


def test_value_baseline_trains_the_value_head():
    model = MaskedPPO(tiny(group_size=1, baseline="value"))
    before = model.policy.state_dict()["vf.0.weight"].clone()
    model.learn(30)
    assert not torch.equal(before, model.policy.state_dict()["vf.0.weight"])
    model.close()


def test_bc_smoothing_keeps_the_sampled_policy_off_the_expert_while_its_argmax_stays_on_it():
    """eps = 0 drives a clone towards sampling the expert every time (a group's members then run one
    episode and every grouped advantage is 0); eps > 0 leaves about eps of each choice to the other
    valid values, with the expert's value still the most likely."""
    def clone(eps):
        model = MaskedPPO(tiny(bc_steps=64, bc_epochs=60, bc_batch_size=32, bc_smoothing=eps, n_envs=1), "cpu")
        history = model.behaviour_clone()
        env = model.group_members(0, 0, model.slot_kwargs()[0])[0]
        obs, _ = env.reset(seed=11)
        probs = []
        for _ in range(10):
            expert = expert_action(env)
            masks = torch.as_tensor(env.unwrapped.action_masks())[None]
            normalized = model.stats.normalize_obs(obs[None].astype(np.float32))
            logp = model.policy.log_probs(torch.as_tensor(normalized), masks)
            choice = masks.reshape(-1).sum() > len(expert)  # any dimension with a choice
            if choice:
                probs.append(float(MaskedPolicy.chosen(logp, torch.as_tensor(expert)[None]).detach().exp()))
            obs, *_ = env.step(expert)
        model.close()
        return history[-1], probs

    sharp, sharp_probs = clone(0.0)
    soft, soft_probs = clone(0.2)
    assert sharp["agreement"] == 1.0 and soft["agreement"] == 1.0  # argmax = the expert either way
    assert min(sharp_probs) > max(soft_probs)  # the whole expert action is sampled less often with eps
    with pytest.raises(TrainConfigError, match="bc_smoothing"):
        tiny(bc_smoothing=1.0).validate()


def test_dagger_labels_the_states_the_driver_visits_with_the_experts_actions():
    """A DAgger round's states are those the driving policy reaches (here: every dimension's first
    valid value), each labelled with what the expert would do there (checked by replaying the drive)."""
    model = MaskedPPO(tiny(bc_steps=40, n_envs=1))

    def first_valid(obs, masks):
        return np.array([int(np.argmax(part)) for part in np.split(masks, np.cumsum(model.nvec)[:-1])])

    resets = [17]
    raw, masks, labels = model.labelled_states(resets, drive=first_valid)
    assert len(raw) == 40 and resets[0] > 17  # the next round starts on a fresh window
    env = model.group_members(0, model.cfg.trace_seed, model.slot_kwargs()[0])[0]
    obs, _ = env.reset(seed=17)
    drove_elsewhere = False
    for row in range(len(raw)):
        assert np.array_equal(obs.astype(np.float32), raw[row]) and np.array_equal(action_masks(env), masks[row])
        assert np.array_equal(expert_action(env), labels[row])
        action = first_valid(obs, masks[row])
        drove_elsewhere |= not np.array_equal(action, labels[row])
        obs, _, terminated, truncated, _ = env.step(action)
        assert not (terminated or truncated)
    assert drove_elsewhere  # the driver left the expert's path, so these are states the expert never shows
    expert_raw, _, _ = model.labelled_states([17], drive=None)
    assert not np.array_equal(expert_raw, raw)
    model.close()


def test_dagger_rounds_refit_on_all_states_so_far_and_keep_round_zero_as_plain_cloning():
    def clone(rounds):
        model = MaskedPPO(tiny(bc_steps=32, bc_epochs=2, n_envs=1, dagger_rounds=rounds))
        history = model.behaviour_clone()
        weights = model.policy.state_dict()["pi.0.weight"].clone()
        model.close()
        return history, weights

    plain, plain_weights = clone(0)
    dagger, dagger_weights = clone(2)
    assert [row["round"] for row in dagger] == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert [row["steps"] for row in dagger] == [32.0, 32.0, 64.0, 64.0, 96.0, 96.0]
    assert dagger[:2] == plain  # round 0 is behaviour cloning as before
    assert not torch.equal(plain_weights, dagger_weights)
    assert torch.equal(clone(2)[1], dagger_weights)  # same seed, same weights
    with pytest.raises(TrainConfigError, match="dagger_rounds: follow behaviour cloning"):
        tiny(dagger_rounds=1)
    with pytest.raises(TrainConfigError, match="dagger_rounds: must be >= 0"):
        tiny(bc_steps=8, dagger_rounds=-1)


def test_train_py_runs_dagger_rounds_and_logs_each_round(tmp_path, capsys):
    import csv

    from train_script import TRAIN, load_train_script

    config = TRAIN.parent / "agents" / "configs" / "quick-mppo.yaml"
    assert load_train_script().main(["--config", str(config), "--no-compare", "--set", f"runs_dir={tmp_path}",
                                     "bc_steps=24", "bc_epochs=1", "dagger_rounds=2", "total_timesteps=8",
                                     "n_envs=1"]) == 0
    out = capsys.readouterr().out
    assert "behaviour cloning of heuristic: 72 expert steps (2 DAgger rounds)" in out
    assert "  round 1: 48 states, agreement " in out  # each round reported as it ends
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [row for row in csv.DictReader((run / "progress.csv").open()) if row.get("bc/round")]
    assert [(float(r["bc/round"]), float(r["bc/steps"])) for r in rows] == [(0.0, 24.0), (1.0, 48.0), (2.0, 72.0)]
