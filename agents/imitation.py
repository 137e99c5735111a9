"""Behaviour cloning from the environment's expert before PPO (the imitation warm start).

DL2 (Peng et al., "DL2: A Deep Learning-driven Scheduler for Deep Learning
Clusters", 2019) first trains its network on the existing scheduler's decisions,
then improves it by RL. Here the expert is the env's ``expert_action()``: the
guided heuristic's own choice (``lyra`` by default; ``pollux+loan`` or ``tiresias+loan``
with ``heuristic:`` in the config), which in every LyraGym env reproduces the heuristic
exactly.

1. :func:`collect_demonstrations` runs the training vector env under the
   expert for ``steps`` transitions, recording the raw observations, the
   action masks, the expert's actions and the rewards. The observation
   statistics of ``VecNormalize`` are updated meanwhile, so PPO starts with
   statistics of states the expert visits.
2. :func:`behaviour_clone` fits the policy by maximum likelihood of the
   expert's actions under the masked distribution (the masks exactly as PPO
   applies them), and the value head to the discounted returns (normalised as
   PPO sees them), so the first PPO updates do not start from a random critic.

Why hand-written: the ``imitation`` package's BC trains SB3 policies but does
not pass sb3-contrib's action masks to the distribution, and the masked
log-likelihood is a few lines with ``policy.evaluate_actions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from stable_baselines3.common.vec_env import VecEnv, VecNormalize


@dataclass
class Demonstrations:
    """Expert transitions: raw observations ``(N, obs)``, actions ``(N, dims)``, masks ``(N, sum n)``,
    discounted returns ``(N,)`` of the (PPO-normalised) rewards."""

    obs: np.ndarray
    actions: np.ndarray
    masks: np.ndarray
    returns: np.ndarray
    episodes: int


def _env_masks(venv: VecEnv) -> np.ndarray:
    return np.stack(venv.env_method("action_masks"))


def collect_demonstrations(venv: VecEnv, steps: int, gamma: float) -> Demonstrations:
    """Run ``venv`` (a ``VecNormalize`` or a plain ``VecEnv``) under the expert for about ``steps``
    transitions (rounded up to whole vector steps). Returns are discounted within each env's
    stream and cut (not bootstrapped) at the end of the collection."""
    n = venv.num_envs
    rounds = max(1, -(-steps // n))
    norm = venv if isinstance(venv, VecNormalize) else None
    obs = venv.reset()
    obs_raw: list[np.ndarray] = []
    actions, masks, rewards, dones = [], [], [], []
    for _ in range(rounds):
        obs_raw.append(cast(np.ndarray, norm.get_original_obs() if norm is not None else obs))  # Box observations
        masks.append(_env_masks(venv))
        act = np.stack([np.asarray(a) for a in venv.env_method("expert_action")])
        actions.append(act.reshape(n, -1))
        obs, reward, done, _ = venv.step(act)
        if norm is not None:
            reward = norm.get_original_reward()
            reward = norm.normalize_reward(reward) if norm.norm_reward else reward
        rewards.append(reward)
        dones.append(done)
    r, d = np.array(rewards, dtype=np.float64), np.array(dones, dtype=bool)
    returns = np.zeros_like(r)
    running = np.zeros(n)
    for t in range(rounds - 1, -1, -1):
        running = r[t] + gamma * running * ~d[t]
        returns[t] = running
    return Demonstrations(
        obs=np.concatenate(obs_raw).astype(np.float32), actions=np.concatenate(actions),
        masks=np.concatenate(masks), returns=returns.reshape(-1).astype(np.float32), episodes=int(d.sum()))


def behaviour_clone(model, demos: Demonstrations, epochs: int, batch_size: int, learning_rate: float,
                    seed: int, normalizer: VecNormalize | None = None, value_coef: float = 0.5) -> list[dict[str, float]]:
    """Fit ``model.policy`` to ``demos``: per epoch the mean masked negative log-likelihood, the
    value loss and the share of samples whose most likely valid action is the expert's."""
    policy = model.policy
    device = policy.device
    obs = normalizer.normalize_obs(demos.obs) if normalizer is not None else demos.obs
    obs_t = torch.as_tensor(obs, dtype=torch.float32, device=device)
    act_t = torch.as_tensor(demos.actions, device=device)
    if act_t.shape[1] == 1:
        act_t = act_t[:, 0]
    ret_t = torch.as_tensor(demos.returns, device=device)
    masks = demos.masks
    maskable = "action_masks" in policy.evaluate_actions.__code__.co_varnames
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    history = []
    policy.set_training_mode(True)
    for _ in range(epochs):
        order = rng.permutation(len(obs))
        nll = vloss = agree = 0.0
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            kwargs = {"action_masks": masks[idx]} if maskable else {}
            values, log_prob, _ = policy.evaluate_actions(obs_t[idx], act_t[idx], **kwargs)
            value_loss = torch.nn.functional.mse_loss(values.flatten(), ret_t[idx])
            loss = -log_prob.mean() + value_coef * value_loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimizer.step()
            nll += float(-log_prob.detach().sum())
            vloss += float(value_loss.detach()) * len(idx)
            with torch.no_grad():
                dist = policy.get_distribution(obs_t[idx], **kwargs) if maskable else policy.get_distribution(obs_t[idx])
                mode = dist.mode().reshape(act_t[idx].shape)
                same = (mode == act_t[idx]).reshape(len(idx), -1).all(dim=1)
                agree += float(same.sum())
        history.append({"nll": nll / len(order), "value_loss": vloss / len(order), "agreement": agree / len(order)})
    policy.set_training_mode(False)
    return history
