"""Vine advantages for :mod:`lyra_agents.masked_ppo` (``baseline: vine``; issue 38 item 3).

The grouped baseline (``baseline: group``) credits one return to a whole episode of decisions:
with a policy close to its imitation start, the members of a group differ in a handful of
decisions out of thousands and each of those moves the return by job-hours either way (the fork
probe, :mod:`lyra_agents.fork_probe`), so the advantage of any one decision is buried. The
*vine* (Schulman et al., "Trust Region Policy Optimization", ICML'15, section 5.2) measures it
directly, with the same arrivals on every branch:

1. **Trunk.** Each slot (a scenario, or the config's env) plays one episode with the policy
   (sampled; cut at the curriculum cap), on trace seed ``trace_seeds[(update + slot) % len]``.
2. **Branch states.** ``vine_states`` of the trunk's decision steps, drawn without replacement.
3. **Branches.** At each, ``group_size`` actions: the trunk's own first, then ``group_size - 1``
   drawn from the policy (``vine_branch: draw``) or, with ``vine_branch: dimension``, each the
   trunk's action with one dimension moved (a dimension with a choice, drawn, to another valid
   value, drawn uniformly). Each distinct action is played on a fork of the env (:meth:`fork`,
   bit for bit the same state), then the env's guide heuristic (``expert_action()``;
   ``vine_rollout: guide``) or the policy's most likely action (``vine_rollout: policy``) plays
   to the episode's end. The return of each branch is its exact effect on total JCT from that
   state on (``jct`` reward, gamma = 1).
4. **Advantage.** ``draw``: each drawn action's branch return minus the mean over the drawn
   actions, its PPO ratio over the whole action. ``dimension``: per moved copy a pair of rows
   whose ratios read only the moved dimension (:attr:`VineBatch.dims`): the moved value with half
   its return's difference to the trunk's, the trunk's value with minus that half. A label then
   credits the one lever it scored; with a whole-action ratio the other dimensions' gradients
   cancel only until PPO's clipping stops one row of a group and not the others (in a run of that
   form the expert's whole action fell from 0.70 to 0.25 of the policy's probability in 213k
   steps). A state whose branches all return the same gives nothing and is dropped.
5. **Anchor** (``expert_coef`` > 0): every trunk state with the expert's action there; PPO's loss
   gains ``expert_coef`` x the expert's mean negative log-likelihood on a draw of them per
   minibatch (the demonstration term of DAPG, Rajeswaran et al., RSS'18), so the policy leaves
   its expert where the branches say so, not on the states around them.

With ``vine_rollout: guide`` the advantage is the guide's Q-value gap (one step of policy
iteration over the guide, Bertsekas' rollout algorithm): no network in the loop, but a deviation
is scored as if the guide took over after it, however often the policy repeats it. With
``vine_rollout: policy`` it is the Q-value gap of the current policy's deterministic form (what
an evaluation plays): approximate policy iteration on the policy itself, one forward pass per
branch step more. Both are exact on the trunk's arrivals. The env steps of the trunk, of the
replay to each branch state and of every branch count towards ``num_timesteps`` (the
simulator's work, which is what a budget pays for).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch

from lyra_agents.config import TrainConfig
from lyra_agents.fork_probe import move_one, rest_of_episode, valid_values
from lyra_agents.trajectory import RESET_SEED_STRIDE, Trajectory, action_masks, expert_action
from lyra_gym.envs.learner_extras import LearnerExtrasObservation


class Learner(Protocol):
    """What the vine reads and counts of its model (:class:`lyra_agents.masked_ppo.MaskedPPO`)."""

    cfg: TrainConfig
    stats: Any              # the running observation statistics (``update``)
    rng: np.random.Generator
    device: torch.device
    num_timesteps: int
    updates: int

    def episode_cap_s(self) -> float: ...
    def slot_kwargs(self) -> list[dict[str, Any]]: ...
    def group_members(self, slot: int, trace_seed: int, kwargs: dict[str, Any]) -> list[Any]: ...
    def policy_choice(self, raw: np.ndarray, masks: np.ndarray, envs: list[Any] | None) -> tuple: ...
    def act(self, obs: torch.Tensor, masks: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        ...
    def dimension_log_probs(self, obs: torch.Tensor, masks: torch.Tensor) -> torch.Tensor: ...


@dataclass
class VineBatch:
    """The branches of one update: per drawn action the normalised observation of its state, the
    masks, the action, its log-probability when drawn, its advantage and its branch return."""

    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)
    origins: list[tuple[int, int]] = field(default_factory=list)  # (slot, trunk step) of each row
    dims: list[int] = field(default_factory=list)  # the one dimension a row's ratio reads (-1: all of them)
    states: int = 0          # branch states played
    informative: int = 0     # of which some drawn action changed the return
    anchors: tuple[list, list, list] = field(default_factory=lambda: ([], [], []))  # trunk states: obs, masks, expert


def anchor_rows(batch: VineBatch, traj: Trajectory) -> None:
    """Every step of ``traj`` as an anchor row of ``batch``: its observation, masks and the
    expert's action there (``expert_coef``: the expert's log-likelihood kept on these states)."""
    obs, masks, experts = batch.anchors
    obs += traj.obs
    masks += traj.masks
    experts += traj.experts


def trunk(model: Learner, env: Any, reset_seed: int) -> Trajectory:
    """One episode of ``env`` from reset seed ``reset_seed`` with the policy (sampled), cut at
    the curriculum cap."""
    cap = model.episode_cap_s()
    obs, info = env.reset(seed=reset_seed)
    traj = Trajectory(end_s=info["time_s"])
    start_s = traj.end_s
    while not env.unwrapped.done:
        masks = action_masks(env)
        model.stats.update(obs[None, :])
        actions, logp, normed = model.policy_choice(obs[None, :], masks[None, :], [env])
        traj.obs.append(normed[0])
        traj.masks.append(masks)
        traj.actions.append(actions[0])
        traj.logp.append(float(logp[0]))
        traj.times.append(traj.end_s)
        if model.cfg.expert_coef > 0:
            traj.experts.append(expert_action(env))
        obs, reward, terminated, truncated, info = env.step(actions[0])
        traj.rewards.append(float(reward))
        traj.end_s = info["time_s"]
        model.num_timesteps += 1
        if terminated or truncated:
            traj.metrics = info.get("final_metrics")
            break
        if traj.end_s - start_s >= cap:
            break
    return traj


def draw(model: Learner, normed: np.ndarray, masks: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` actions drawn from the policy at one state, and their log-probabilities."""
    obs_t = torch.as_tensor(np.repeat(normed[None, :], count, axis=0), device=model.device)
    masks_t = torch.as_tensor(np.repeat(masks[None, :], count, axis=0), device=model.device)
    with torch.no_grad():
        actions, logp = model.act(obs_t, masks_t, deterministic=False)
    return actions.cpu().numpy(), logp.cpu().numpy()


def moved(model: Learner, env: Any, masks: np.ndarray, action: np.ndarray, count: int) -> tuple[np.ndarray, list[int]]:
    """``count`` copies of ``action``, each with one dimension moved (:func:`fork_probe.move_one`;
    ``vine_branch: dimension``), and the dimension each moved; none where no dimension has a choice."""
    valid = valid_values(np.asarray(env.action_space.nvec, dtype=np.int64), masks)
    copies = [move_one(action, valid, model.rng) for _ in range(count if any(len(v) > 1 for v in valid) else 0)]
    return np.array([a for a, _ in copies], dtype=np.int64).reshape(len(copies), len(valid)), [d for _, d in copies]


def policy_argmax(model: Learner, env: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The policy's most likely action for an observation of ``env`` (normalised with the current
    statistics, which it does not update)."""
    def choose(obs: np.ndarray) -> np.ndarray:
        normed = model.stats.normalize_obs(obs[None, :])
        masks = torch.as_tensor(action_masks(env)[None, :], device=model.device)
        with torch.no_grad():
            chosen, _ = model.act(torch.as_tensor(normed, device=model.device), masks, deterministic=True)
        return chosen[0].cpu().numpy()
    return choose


def branch_returns(model: Learner, env: Any, actions: np.ndarray) -> np.ndarray:
    """The return of each action (played on a fork of ``env``, then the guide or the policy to
    the end, ``vine_rollout``); identical actions share one branch."""
    played: dict[bytes, float] = {}
    out = np.empty(len(actions))
    for k, action in enumerate(actions):
        key = np.asarray(action, dtype=np.int64).tobytes()
        if key not in played:
            fork = env.unwrapped.fork()
            if model.cfg.vine_rollout == "policy":  # the policy reads the trunk's observation: same extras
                observed = LearnerExtrasObservation(fork) if model.cfg.observation_extras else fork
                total, steps = rest_of_episode(observed, action, policy_argmax(model, observed))
            else:
                total, steps = rest_of_episode(fork, action)
            played[key] = total
            model.num_timesteps += steps
        out[k] = played[key]
    return out


def label(model: Learner, env: Any, batch: VineBatch, traj: Trajectory, slot: int, step: int) -> None:
    """Branch the trunk's state ``step`` (``env`` is in it) and add its rows to ``batch``:
    ``vine_branch: draw``: each drawn action, its advantage its return minus the draws' mean;
    ``dimension``: per moved copy a pair of rows reading only the moved dimension, the moved value
    and the trunk's, their advantages plus and minus half the difference of their returns."""
    cfg, action = model.cfg, traj.actions[step]
    if cfg.vine_branch == "dimension":
        copies, dims = moved(model, env, traj.masks[step], action, cfg.group_size - 1)
    else:
        copies, logp = draw(model, traj.obs[step], traj.masks[step], cfg.group_size - 1)
    drawn = np.concatenate([action[None, :], copies])
    returns = branch_returns(model, env, drawn)
    batch.states += 1
    if returns.max() == returns.min():
        return
    batch.informative += 1
    if cfg.vine_branch == "draw":
        rows = [(drawn[k], float(lp), float(returns[k] - returns.mean()), float(returns[k]), -1)
                for k, lp in enumerate(np.concatenate([[traj.logp[step]], logp]))]
    else:
        with torch.no_grad():
            per_dim = model.dimension_log_probs(torch.as_tensor(traj.obs[step][None, :], device=model.device),
                                                torch.as_tensor(traj.masks[step][None, :], device=model.device))[0]
        rows = []
        for k, d in enumerate(dims, start=1):
            half = float(returns[k] - returns[0]) / 2
            for act, adv, ret in ((drawn[k], half, returns[k]), (action, -half, returns[0])):
                rows.append((act, float(per_dim[d, act[d]]), adv, float(ret), d))
    for act, lp, adv, ret, d in rows:
        batch.obs.append(traj.obs[step])
        batch.masks.append(traj.masks[step])
        batch.actions.append(act)
        batch.logp.append(lp)
        batch.advantages.append(adv)
        batch.returns.append(ret)
        batch.origins.append((slot, step))
        batch.dims.append(d)


def collect(model: Learner) -> tuple[VineBatch, list[Trajectory]]:
    """One update's branches over every slot (module docstring), and the trunks."""
    cfg = model.cfg
    seeds = cfg.trace_seeds or [cfg.trace_seed]
    batch, trunks = VineBatch(), []
    for slot, kwargs in enumerate(model.slot_kwargs()):
        env = model.group_members(slot, seeds[(model.updates + slot) % len(seeds)], kwargs)[0]
        reset_seed = cfg.seed + RESET_SEED_STRIDE * model.updates + slot
        traj = trunk(model, env, reset_seed)
        trunks.append(traj)
        if cfg.expert_coef > 0:
            anchor_rows(batch, traj)
        chosen = set(model.rng.choice(len(traj.actions), size=min(cfg.vine_states, len(traj.actions)),
                                      replace=False).tolist())
        last = max(chosen, default=-1)  # the replay stops after the last branch state
        env.reset(seed=reset_seed)  # replay the trunk's actions (deterministic) up to each branch state
        for step, action in enumerate(traj.actions):
            if step in chosen:
                label(model, env, batch, traj, slot, step)
            if step >= last:
                break
            env.step(action)
            model.num_timesteps += 1
    return batch, trunks
