"""agents/slot_policy.py: the shared slot head equals its slot-by-slot reference on real
observations and masks, is equivariant to the job slots' order, is checked in configs, and trains,
saves and runs as a scheduler like the whole-observation network."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lyra_agents.config import TrainConfig, TrainConfigError
from lyra_agents.masked_ppo import MaskedPPO
from lyra_agents.slot_policy import SlotPolicy, compared
from lyra_agents.trajectory import action_masks
from masked_model_files import assert_runs_as_a_scheduler


def tiny(**changes) -> TrainConfig:
    base = dict(env_id="LyraGym/Cluster-v2", algo="masked_ppo", extractor="slots", window_s=3 * 3600.0,
                num_job_slots=8, num_server_slots=3, n_envs=1, group_size=2, net_arch=[16], deepsets_hidden=8,
                batch_size=64, n_epochs=2, total_timesteps=60, curriculum_start_s=1800.0, device="cpu", seed=5,
                learning_rate=1e-3, trace_seed=3)
    return TrainConfig(**{**base, **changes})


def observed(model: MaskedPPO, steps: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(normalised observations, masks) of ``steps`` decision points under random valid actions."""
    env = model.group_members(0, model.cfg.trace_seed, model.slot_kwargs()[0])[0]
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows, masks = [], []
    for _ in range(steps):
        mask = action_masks(env)
        rows.append(obs)
        masks.append(mask)
        action = [rng.choice(np.flatnonzero(m)) for m in np.split(mask, np.cumsum(model.nvec)[:-1])]
        obs, _, terminated, truncated, _ = env.step(np.array(action))
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + 1)
    model.stats.update(np.stack(rows))
    return torch.as_tensor(model.stats.normalize_obs(np.stack(rows))), torch.as_tensor(np.stack(masks))


@pytest.mark.parametrize("extras, compare", [(False, False), (True, False), (True, True)])
def test_vectorised_logits_equal_the_slot_by_slot_reference_on_real_observations(extras, compare):
    model = MaskedPPO(tiny(observation_extras=extras, slot_compare=compare))
    assert isinstance(model.policy, SlotPolicy)
    if compare:
        with torch.no_grad():
            model.policy.log_g.fill_(1.5)  # g ~ 4.5: the comparison moves logits visibly
    obs, masks = observed(model, 40)
    queued_and_running = masks[:, :8 * 6].reshape(-1, 8, 6)[:, :, 5].any(1) & masks[:, :8 * 6].reshape(-1, 8, 6)[
        :, :, 1].any(1)
    assert queued_and_running.any()  # some decision points hold both kinds: the pools are not all empty
    with torch.no_grad():
        fast, plain = model.policy.logits(obs, masks), model.policy.logits_reference(obs, masks)
    assert fast.shape == (40, int(model.nvec.sum()))
    torch.testing.assert_close(fast, plain, rtol=1e-5, atol=1e-5)
    model.close()


@pytest.mark.parametrize("compare", [False, True])
def test_permuting_the_job_slots_permutes_their_logits_and_leaves_the_rest(compare):
    model = MaskedPPO(tiny(slot_compare=compare))
    obs, masks = observed(model, 12, seed=2)
    k, levels, width = 8, 6, model.policy.layout.job_width
    perm = torch.as_tensor(np.random.default_rng(0).permutation(k))
    p_obs, p_masks = obs.clone(), masks.clone()
    p_obs[:, :k * width] = obs[:, :k * width].reshape(-1, k, width)[:, perm].reshape(-1, k * width)
    p_masks[:, :k * levels] = masks[:, :k * levels].reshape(-1, k, levels)[:, perm].reshape(-1, k * levels)
    with torch.no_grad():
        base, moved = model.policy.logits(obs, masks), model.policy.logits(p_obs, p_masks)
    slots = base[:, :k * levels].reshape(-1, k, levels)[:, perm].reshape(-1, k * levels)
    torch.testing.assert_close(moved[:, :k * levels], slots, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(moved[:, k * levels:], base[:, k * levels:])
    model.close()


def test_the_comparison_keeps_the_best_candidate_and_lowers_the_others_by_hand():
    """Three running slots with PREEMPT - neutral preferences 2, 0.5, 2 and one queued slot, g = 2:
    the two tied best keep theirs; the middle one loses 2 * (2 - 0.5) = 3; the queued one nothing."""
    g = torch.tensor(2.0)
    out = torch.zeros(1, 4, 6)
    out[0, :, 5] = torch.tensor([2.0, 0.5, 2.0, 7.0])  # PREEMPT logits; the neutral level's (2) are 0
    running = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    got = compared(out, running, g)
    torch.testing.assert_close(got[0, :, 5], torch.tensor([2.0, 0.5 - 3.0, 2.0, 7.0]))
    torch.testing.assert_close(got[0, :, :5], out[0, :, :5])
    alone = compared(out[:, :1], running[:, :1], g)  # one running slot: nothing to compare with
    torch.testing.assert_close(alone, out[:, :1])


def test_slot_compare_needs_the_slot_head():
    with pytest.raises(TrainConfigError,
                       match="slot_compare: compares job slots of extractor: slots, got extractor: mlp"):
        tiny(extractor="mlp", slot_compare=True)


def test_configs_name_the_extractor_that_does_not_fit():
    with pytest.raises(TrainConfigError, match="extractor: slots is for algo masked_ppo, got maskable_ppo"):
        tiny(algo="maskable_ppo")
    with pytest.raises(TrainConfigError, match="extractor: deepsets is for algo maskable_ppo or ppo, got masked_ppo"):
        tiny(extractor="deepsets")
    for env_id in ("LyraGym/Loaning-v2", "LyraGym/Cluster-v1"):
        with pytest.raises(TrainConfigError, match=f"extractor: slots reads -v2 job slots .*, not {env_id}"):
            tiny(env_id=env_id)
    assert tiny(env_id="LyraGym/Elastic-v2").extractor == "slots"


def test_a_trained_slot_policy_saves_loads_and_runs_as_a_scheduler(tmp_path):
    cfg = tiny(bc_steps=32, bc_epochs=1, slot_compare=True)  # the comparison's scale is saved and loaded too
    model = MaskedPPO(cfg)
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    model.behaviour_clone()
    model.learn(60)
    assert any(not torch.equal(before[k], v) for k, v in model.policy.state_dict().items())
    loaded = assert_runs_as_a_scheduler(model, cfg, tmp_path)
    assert isinstance(loaded.model.policy, SlotPolicy)
    assert float(loaded.model.policy.log_g) == float(model.policy.log_g) != 0.0  # trained, then loaded
