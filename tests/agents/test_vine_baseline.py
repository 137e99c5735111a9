"""agents/vine.py (``baseline: vine``): each branch return recomputed by hand on a fresh env,
advantages centred per state, the trunk's own action first, determinism, and train.py end to end."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import torch

from lyra_agents import vine
from lyra_agents.config import TrainConfig, TrainConfigError
from lyra_agents.fork_probe import rest_of_episode
from lyra_agents.masked_ppo import MaskedPolicy, MaskedPPO
from lyra_agents.members import make_member
from lyra_agents.trajectory import action_masks


def tiny(**changes) -> TrainConfig:
    base = dict(env_id="LyraGym/Cluster-v2", algo="masked_ppo", window_s=3 * 3600.0, num_job_slots=8,
                num_server_slots=3, n_envs=1, group_size=3, net_arch=[32], batch_size=64, n_epochs=2,
                total_timesteps=60, device="cpu", seed=5, learning_rate=1e-3, baseline="vine", vine_states=3,
                expert="pollux+loan")
    return TrainConfig(**{**base, **changes})


@pytest.fixture(scope="module")
def collected():
    torch.set_num_threads(1)
    model = MaskedPPO(tiny())
    batch, trunks = vine.collect(model)
    yield model, batch, trunks
    model.close()


@pytest.mark.sample(1)
def test_each_branch_return_is_the_action_then_the_guide_to_the_end_on_a_fresh_env(collected):
    model, batch, trunks = collected
    assert batch.states == 3 and batch.informative >= 1 and batch.actions
    kwargs = {**model.slot_kwargs()[0], "trace_seed": model.cfg.trace_seed}
    for row, (slot, step) in enumerate(batch.origins):
        env = make_member(model.cfg, kwargs)
        env.reset(seed=model.cfg.seed + slot)  # update 0, slot 0: the trunk's reset seed
        for action in trunks[slot].actions[:step]:
            env.step(action)
        total, _ = rest_of_episode(env.unwrapped, batch.actions[row])
        assert total == batch.returns[row]  # bit for bit: the fork is the state itself
        env.close()


@pytest.mark.sample(1)
@pytest.mark.parametrize("extras", [False, True])
def test_a_policy_rollout_branch_is_the_action_then_the_policys_argmax_on_a_fresh_env(extras):
    """``vine_rollout: policy``: each branch return recomputed on a fresh (wrapped) env, the policy's
    most likely action at every step after the drawn one; the fork's fresh extras wrapper must
    observe what the trunk's own would have."""
    torch.set_num_threads(1)
    model = MaskedPPO(tiny(vine_rollout="policy", observation_extras=extras))
    batch, trunks = vine.collect(model)
    assert batch.states == 3 and batch.informative >= 1
    kwargs = {**model.slot_kwargs()[0], "trace_seed": model.cfg.trace_seed}
    for row, (slot, step) in enumerate(batch.origins):
        env = make_member(model.cfg, kwargs)
        env.reset(seed=model.cfg.seed + slot)
        for action in trunks[slot].actions[:step]:
            env.step(action)
        total, action = 0.0, batch.actions[row]
        while True:
            obs, r, done, truncated, _ = env.step(action)
            total += float(r)
            if done or truncated:
                break
            normed = model.stats.normalize_obs(obs[None, :])
            action = model.predict(normed, action_masks=action_masks(env)[None, :])[0][0]
        assert total == batch.returns[row]
        env.close()
    model.close()


def test_the_anchor_is_every_trunk_state_with_the_experts_action_and_pulls_the_policy_to_it():
    """``expert_coef``: each trunk step is an anchor row (its observation, masks and the expert's
    action, recomputed on a fresh env), and an update with no advantage signal moves the policy
    towards the expert on them."""
    torch.set_num_threads(1)
    model = MaskedPPO(tiny(expert_coef=1.0, vine_states=1))
    batch, trunks = vine.collect(model)
    obs, masks, experts = batch.anchors
    assert len(obs) == len(masks) == len(experts) == len(trunks[0].actions) > 0
    env = make_member(model.cfg, {**model.slot_kwargs()[0], "trace_seed": model.cfg.trace_seed})
    env.reset(seed=model.cfg.seed)
    for step, action in enumerate(trunks[0].actions):
        assert np.array_equal(experts[step], env.unwrapped.expert_action())
        assert np.array_equal(masks[step], action_masks(env))
        assert obs[step] is trunks[0].obs[step]
        env.step(action)
    env.close()

    def nll() -> float:
        with torch.no_grad():
            logp = model.policy.log_probs(torch.as_tensor(np.stack(obs)), torch.as_tensor(np.stack(masks)))
            return float(-MaskedPolicy.chosen(logp, torch.as_tensor(np.stack(experts))).mean())

    before = nll()
    zero = np.zeros(len(batch.actions))  # no signal from the branches: only the anchor moves the policy
    row = model.optimise(batch.obs, batch.masks, batch.actions, batch.logp, zero, zero, 1, batch.anchors)
    assert nll() < before and row["expert_nll"] > 0
    model.close()


def test_without_expert_coef_there_are_no_anchor_rows(collected):
    _, batch, trunks = collected
    assert batch.anchors == ([], [], []) and not trunks[0].experts


def test_advantages_are_centred_per_state_and_the_trunk_action_comes_first(collected):
    _, batch, trunks = collected
    rows = defaultdict(list)
    for row, origin in enumerate(batch.origins):
        rows[origin].append(row)
    for (slot, step), members in rows.items():
        assert len(members) == 3  # group_size draws per state, duplicates included
        assert sum(batch.advantages[r] for r in members) == pytest.approx(0.0, abs=1e-9)
        returns = [batch.returns[r] for r in members]
        assert max(returns) > min(returns)  # states where nothing changed are dropped
        first = members[0]
        assert np.array_equal(batch.actions[first], trunks[slot].actions[step])
        assert batch.logp[first] == trunks[slot].logp[step]
        for r in members:  # equal actions, equal returns (one shared branch)
            same = [q for q in members if np.array_equal(batch.actions[q], batch.actions[r])]
            assert {batch.returns[q] for q in same} == {batch.returns[r]}


@pytest.mark.slow
def test_same_seed_same_branches_bit_for_bit(collected):
    _, batch, _ = collected
    other = MaskedPPO(tiny())
    again, _ = vine.collect(other)
    other.close()
    assert again.origins == batch.origins and again.returns == batch.returns and again.logp == batch.logp
    assert all(np.array_equal(a, b) for a, b in zip(again.actions, batch.actions))


@pytest.mark.slow
def test_learn_with_vine_updates_the_policy_and_counts_every_env_step():
    model = MaskedPPO(tiny(total_timesteps=1))
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(1)
    assert model.updates == 1 and model.num_timesteps > 100  # trunk + replays + branches
    # the process time of that collection is logged (time/vine_cpu_s), not lost from the parts
    assert model.timing["vine"] > model.timing["update"] > 0 and model.timing["env"] == 0.0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters()))
    model.close()


def test_vine_needs_two_draws_per_state():
    with pytest.raises(TrainConfigError, match="group_size: baseline 'vine' needs at least 2, got 1"):
        tiny(group_size=1)
    with pytest.raises(TrainConfigError, match="vine_states: must be >= 1, got 0"):
        tiny(vine_states=0)
    with pytest.raises(TrainConfigError, match="vine_rollout: must be one of guide, policy, got 'expert'"):
        tiny(vine_rollout="expert")
    with pytest.raises(TrainConfigError, match="expert_coef: only with baseline: vine"):
        tiny(expert_coef=0.5, baseline="group")
    with pytest.raises(TrainConfigError, match="expert_coef: must be >= 0, got -1"):
        tiny(expert_coef=-1.0)


@pytest.fixture(scope="module")
def moved_batch():
    torch.set_num_threads(1)
    model = MaskedPPO(tiny(vine_branch="dimension", group_size=4))
    batch, trunks = vine.collect(model)
    yield model, batch, trunks
    model.close()


def test_a_dimension_label_is_a_pair_the_moved_value_against_the_trunks_in_one_dimension(moved_batch):
    """``vine_branch: dimension``: rows come in pairs (the trunk's action with one dimension moved to
    another valid value, then the trunk's own action), both reading only that dimension, their
    advantages plus and minus half the difference of their branch returns, their log-probabilities
    the policy's of that one value."""
    model, batch, trunks = moved_batch
    assert batch.informative >= 1 and len(batch.actions) % 2 == 0 and len(batch.dims) == len(batch.actions)
    starts = np.concatenate([[0], np.cumsum(model.nvec)[:-1]])
    for row in range(0, len(batch.actions), 2):
        slot, step = batch.origins[row]
        trunk_action, moved_action, d = trunks[slot].actions[step], batch.actions[row], batch.dims[row]
        assert batch.origins[row + 1] == (slot, step) and batch.dims[row + 1] == d >= 0
        assert np.array_equal(batch.actions[row + 1], trunk_action)
        assert np.flatnonzero(moved_action != trunk_action).tolist() == [d]
        assert batch.masks[row][starts[d] + moved_action[d]]  # a valid value
        half = (batch.returns[row] - batch.returns[row + 1]) / 2
        assert batch.advantages[row] == half and batch.advantages[row + 1] == -half
        with torch.no_grad():
            per_dim = model.policy.log_probs(torch.as_tensor(batch.obs[row][None, :]),
                                             torch.as_tensor(batch.masks[row][None, :]))[0]
        assert batch.logp[row] == float(per_dim[d, moved_action[d]])
        assert batch.logp[row + 1] == float(per_dim[d, trunk_action[d]])


def test_dimension_branches_return_the_action_then_the_guide_on_a_fresh_env(moved_batch):
    model, batch, trunks = moved_batch
    kwargs = {**model.slot_kwargs()[0], "trace_seed": model.cfg.trace_seed}
    for row, (slot, step) in enumerate(batch.origins[:4]):
        env = make_member(model.cfg, kwargs)
        env.reset(seed=model.cfg.seed + slot)
        for action in trunks[slot].actions[:step]:
            env.step(action)
        assert rest_of_episode(env.unwrapped, batch.actions[row])[0] == batch.returns[row]
        env.close()


def test_a_dimension_rows_ratio_reads_its_dimension_alone():
    """``MaskedPolicy.chosen`` with ``dims``: the gradient of a row's log-probability reaches only
    the marked dimension; without it, every dimension (hand-made log-probabilities)."""
    logp = torch.log(torch.tensor([[[0.5, 0.5], [0.25, 0.75], [0.9, 0.1]]])).requires_grad_(True)
    actions = torch.tensor([[1, 0, 0]])
    assert float(MaskedPolicy.chosen(logp.detach(), actions)) == pytest.approx(float(np.log(0.5 * 0.25 * 0.9)))
    picked = MaskedPolicy.chosen(logp, actions, torch.tensor([[0.0, 1.0, 0.0]]))
    assert float(picked) == pytest.approx(float(np.log(0.25)))
    picked.backward()
    assert logp.grad.tolist() == [[[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]]


def test_an_update_on_dimension_pairs_moves_only_the_scored_dimensions_logits(moved_batch):
    """One optimiser step on the pairs (no entropy term, one minibatch): the output layer's bias
    moves for the scored dimensions' values and for no other dimension (Adam leaves a parameter
    with zero gradient where it was)."""
    model, batch, _ = moved_batch
    other = MaskedPPO(tiny(vine_branch="dimension", group_size=4, n_epochs=1, batch_size=10_000, ent_coef=0.0))
    other.policy.load_state_dict(model.policy.state_dict())
    bias = other.policy.pi[-1].bias
    before = bias.detach().clone()
    other.optimise(batch.obs, batch.masks, batch.actions, batch.logp, np.asarray(batch.advantages),
                   np.asarray(batch.returns), 1, None, batch.dims)
    starts = np.concatenate([[0], np.cumsum(other.nvec)]).tolist()
    moved = {d for d in range(len(other.nvec)) if not torch.equal(bias[starts[d]:starts[d + 1]],
                                                                   before[starts[d]:starts[d + 1]])}
    assert moved and moved <= set(batch.dims)
    other.close()


def test_vine_branch_is_checked():
    with pytest.raises(TrainConfigError, match="vine_branch: must be one of draw, dimension, got 'one'"):
        tiny(vine_branch="one")
    with pytest.raises(TrainConfigError, match="vine_branch: only with baseline: vine"):
        tiny(vine_branch="dimension", baseline="value")
