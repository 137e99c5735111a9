"""Masked PPO with an input-dependent baseline, in one file (issue 38 item 4; CleanRL style).

What differs from SB3's MaskablePPO (``algo: maskable_ppo``), and why:

- **Masks as one tensor op.** The flat logits ``[batch, sum(nvec)]`` are gathered into
  ``[batch, dims, max_levels]`` (padding points at an extra column) and the invalid values are
  set to ``-inf`` by one ``masked_fill``; SB3 builds one masked distribution per dimension.
- **The objective itself.** The ``jct`` reward is -(jobs in system x seconds)/``reward_scale_s``,
  so with ``gamma = 1`` an episode's return is exactly -(total JCT)/scale. Returns here are
  undiscounted sums of the raw rewards (``gamma`` and ``gae_lambda`` are not used).
- **The network** (:mod:`lyra_agents.masked_policy`): an MLP from the whole observation to every
  dimension, or (``extractor: slots``, :mod:`lyra_agents.slot_policy`) one head shared by the job slots.
- **Grouped rollouts, input-dependent baseline** (Mao et al., "Variance Reduction for Reinforcement
  Learning in Input-Driven Environments", ICLR'19; Decima, SIGCOMM'19). Arrivals dominate a
  return. The ``group_size`` members of a group reset with one seed, so they play the same train
  window (same jobs, same warm start); a step's baseline is the group's mean return-to-go at the
  same *simulated time*, each member's return-to-go curve interpolated linearly between its
  decision times (exact for the ``jct`` reward, which accrues linearly within a span).
  ``baseline: value`` uses a learned value head instead (the fallback for ``group_size: 1``).
- **Vine advantages** (``baseline: vine``, :mod:`lyra_agents.vine`): per decision, from forks of
  the env with the same arrivals, instead of one return shared by a whole episode.
- **Curriculum.** An episode stops at its first decision past ``curriculum_start_s`` simulated
  seconds after its start, a cap that grows by ``curriculum_growth_s`` per update (0: whole
  episodes). Every member of a group is cut at the same time, so the baseline stays fair.
- **Many traces.** Update ``u`` runs slot ``i`` (a scenario, or the config's env) on trace seed
  ``trace_seeds[(u + i) % len]``.
- **Imitation warm start** (:meth:`MaskedPPO.behaviour_clone`): cross-entropy on the expert's
  actions (``bc_expert``, as the SB3 path), before any update.
- **Envs in processes** (``vec_env: subproc``, :mod:`lyra_agents.members`): a round's members are
  stepped by worker processes at the same time, the same run bit for bit (not with the vine).

Determinism: weights drawn from ``seed`` (torch's generator forked, nothing global changed),
actions sampled with the model's own ``torch.Generator``, minibatches from a numpy generator,
reset seeds ``seed + 1000 * update + slot``. Same config, same weights, bit for bit.

Saved as ``model.zip`` with ``policy.pth``, ``policy.optimizer.pth`` (``torch.save`` of state
dicts: loaded with ``weights_only=True``) and a ``data`` JSON of counters: the members an SB3
model file has, so :func:`lyra_agents.model_files.read_model_zip` reads it.
"""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.running_mean_std import RunningMeanStd
from torch import nn

from lyra_agents import vine
from lyra_agents.config import TrainConfig
from lyra_agents.masked_policy import MaskedPolicy
from lyra_agents.members import GroupSpec, LocalMembers, ProcessMembers, make_group
from lyra_agents.slot_policy import build_policy
from lyra_agents.spaces import model_spaces, observation_widths
from lyra_agents.trajectory import RESET_SEED_STRIDE, Trajectory, action_masks, expert_action
from lyra_gym.envs.observation import observation_layout

POLICY_MEMBER, OPTIMIZER_MEMBER, DATA_MEMBER = "policy.pth", "policy.optimizer.pth", "data"


# ---------------------------------------------------------------------- observation statistics
class ObsStats:
    """Running observation mean/variance (slot statistics tied per feature, as the SB3 path's
    ``VecNormalize``) and a running return statistic for the value head. The attributes
    :func:`lyra_agents.normalizer_stats.save_normalizer_stats` saves; ``normalize_obs`` as
    ``VecNormalize`` computes it."""

    def __init__(self, cfg: TrainConfig, size: int) -> None:
        from lyra_agents.vec_envs import TiedRunningMeanStd

        groups = []
        if cfg.tie_slot_stats:
            layout = observation_layout(cfg.num_job_slots, cfg.num_server_slots, *observation_widths(cfg))
            groups = [layout["jobs"], layout["servers"]]
        self.obs_rms = TiedRunningMeanStd((size,), groups)
        self.ret_rms = RunningMeanStd(shape=())
        self.norm_obs, self.norm_reward, self.training = cfg.normalize_obs, False, True
        self.clip_obs, self.clip_reward, self.gamma, self.epsilon = cfg.clip_obs, 10.0, 1.0, 1e-8

    def update(self, raw: np.ndarray) -> None:
        if self.norm_obs and self.training:
            self.obs_rms.update(raw)

    def normalize_obs(self, obs: np.ndarray) -> np.ndarray:
        if not self.norm_obs:
            return np.asarray(obs, dtype=np.float32)
        return np.clip((obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon),
                       -self.clip_obs, self.clip_obs).astype(np.float32)


# ---------------------------------------------------------------------- the envs
def group_baseline(group: list[Trajectory]) -> list[np.ndarray]:
    """Each member's baseline per step: the group's mean return-to-go at that step's simulated
    time, each member's curve (its decision times, and 0 at its end) interpolated linearly."""
    curves = [(np.append(t.times, t.end_s), np.append(t.returns_to_go(), 0.0)) for t in group]
    return [np.mean([np.interp(t.times, knots, values) for knots, values in curves], axis=0) for t in group]


# ---------------------------------------------------------------------- the algorithm
class MaskedPPO:
    """Masked PPO on grouped rollouts. The parts train.py and the evaluation use: ``predict``,
    ``get_vec_normalize_env``, ``save``, ``num_timesteps``, ``logger`` (an SB3 logger),
    ``observation_space`` / ``action_space``; :meth:`learn` for the updates."""

    def __init__(self, cfg: TrainConfig, device: str = "cpu") -> None:
        self.cfg, self.device = cfg, torch.device(device)
        self.observation_space, self.action_space = model_spaces(cfg)
        self.nvec = np.asarray(self.action_space.nvec)  # type: ignore[attr-defined]
        with torch.random.fork_rng(devices=[]):  # initial weights from the seed, global generator untouched
            torch.manual_seed(cfg.seed)
            self.policy = build_policy(cfg, self.observation_space.shape[0], self.nvec).to(self.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.learning_rate, eps=1e-5)
        self.generator = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.stats = ObsStats(cfg, self.observation_space.shape[0])
        self.num_timesteps = self.updates = 0
        self.logger: Any = None
        self._envs: dict[tuple[int, int], list[gym.Env]] = {}
        self._members: LocalMembers | ProcessMembers | None = None
        self.timing = {"reset": 0.0, "env": 0.0, "policy": 0.0, "update": 0.0}  # process time (s) per part
        if cfg.baseline == "vine":  # trunks, replays and branches: env and policy in one
            self.timing["vine"] = 0.0

    # ----------------------------------------------------------- what the evaluation asks
    def get_vec_normalize_env(self) -> ObsStats:
        return self.stats

    def get_env(self) -> None:  # SB3 callbacks ask for it
        return None

    def predict(self, obs: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True,
                action_masks: np.ndarray | None = None) -> tuple[np.ndarray, None]:
        """The action for one (already normalised) observation: each dimension's most likely valid
        level (``deterministic``) or a sample."""
        single = np.ndim(obs) == 1
        obs_t = torch.as_tensor(np.asarray(obs, dtype=np.float32).reshape(-1, self.observation_space.shape[0]))
        masks = np.ones((len(obs_t), int(self.nvec.sum())), bool) if action_masks is None else action_masks
        masks_t = torch.as_tensor(np.asarray(masks, dtype=bool).reshape(len(obs_t), -1))
        with torch.no_grad():
            actions, _ = self.act(obs_t.to(self.device), masks_t.to(self.device), deterministic)
        out = actions.cpu().numpy()
        return (out[0] if single else out), None

    def act(self, obs: torch.Tensor, masks: torch.Tensor, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
        logp = self.policy.log_probs(obs, masks)
        if deterministic:
            actions = logp.argmax(dim=2)
        else:
            flat = logp.exp().reshape(-1, logp.shape[2])
            actions = torch.multinomial(flat, 1, generator=self.generator).reshape(logp.shape[:2])
        return actions, MaskedPolicy.chosen(logp, actions)

    def dimension_log_probs(self, obs: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        """The policy's log-probabilities ``[batch, dims, values]`` (-inf where masked)."""
        return self.policy.log_probs(obs, masks)

    # ----------------------------------------------------------- envs and rollouts
    def slot_kwargs(self) -> list[dict[str, Any]]:
        from lyra_agents.vec_envs import env_kwargs_of

        return env_kwargs_of(self.cfg)

    def group_members(self, slot: int, trace_seed: int, kwargs: dict[str, Any]) -> list[gym.Env]:
        """The ``group_size`` envs of ``slot`` on ``trace_seed`` (built once, then reused)."""
        key = (slot, trace_seed)
        if key not in self._envs:
            self._envs[key] = make_group(self.cfg, {**kwargs, "trace_seed": trace_seed})
        return self._envs[key]

    def episode_cap_s(self) -> float:
        """Simulated seconds after which this update's episodes stop (inf: no curriculum)."""
        if not self.cfg.curriculum_start_s:
            return np.inf
        return self.cfg.curriculum_start_s + self.cfg.curriculum_growth_s * self.updates

    def members(self) -> LocalMembers | ProcessMembers:
        """Where the rounds' envs run (:mod:`lyra_agents.members`): worker processes with
        ``vec_env: subproc`` (one per CPU, at most one per member), else this process."""
        if self._members is None:
            cfg = self.cfg
            if cfg.vec_env == "subproc":
                self._members = ProcessMembers(cfg, min(os.cpu_count() or 1, len(self.slot_kwargs()) * cfg.group_size))
            else:
                self._members = LocalMembers(cfg, self.group_members)
        return self._members

    def collect(self, choose: Callable[[np.ndarray, np.ndarray, list[gym.Env] | None], tuple]
                ) -> list[list[Trajectory]]:
        """One episode per member of every group, all members stepped together. ``choose(raw_obs,
        masks, envs)`` gives the active members' (actions, log-probabilities, normalised
        observations); ``envs`` are their envs in this process (None with worker processes).
        Returns ``[group][member]``."""
        cfg, cap, members = self.cfg, self.episode_cap_s(), self.members()
        seeds = cfg.trace_seeds or [cfg.trace_seed]
        t_reset = time.process_time()
        begun = members.reset([GroupSpec(slot, seeds[(self.updates + slot) % len(seeds)], kwargs,
                                         cfg.seed + RESET_SEED_STRIDE * self.updates + slot)
                               for slot, kwargs in enumerate(self.slot_kwargs())])
        trajs = [Trajectory(end_s=b.time_s) for b in begun]
        obs, masks_of, starts = [b.obs for b in begun], [b.masks for b in begun], [b.time_s for b in begun]
        active = [i for i, b in enumerate(begun) if not b.done]
        self.timing["reset"] += time.process_time() - t_reset + members.cpu_last
        while active:
            raw = np.stack([obs[i] for i in active])
            masks = np.stack([masks_of[i] for i in active])  # type: ignore[misc]  # None only once over
            self.stats.update(raw)
            t0 = time.process_time()
            actions, logp, normed = choose(raw, masks, members.envs(active))
            t1 = time.process_time()
            for row, i in enumerate(active):
                traj = trajs[i]
                traj.obs.append(normed[row])
                traj.masks.append(masks[row])
                traj.actions.append(actions[row])
                traj.logp.append(float(logp[row]))
                traj.times.append(traj.end_s)
            still, outcomes = [], members.step([(i, actions[row]) for row, i in enumerate(active)])
            self.timing["env"] += members.cpu_last  # the worker processes' (0 here)
            for i, out in zip(active, outcomes):
                traj, obs[i], masks_of[i] = trajs[i], out.obs, out.masks
                traj.rewards.append(out.reward)
                traj.end_s = out.time_s
                if out.terminated or out.truncated:
                    traj.metrics = out.metrics
                elif traj.end_s - starts[i] < cap:
                    still.append(i)
            self.timing["policy"] += t1 - t0
            self.timing["env"] += time.process_time() - t1
            self.num_timesteps += len(active)
            active = still
        size = cfg.group_size
        return [trajs[g:g + size] for g in range(0, len(trajs), size)]

    def policy_choice(self, raw: np.ndarray, masks: np.ndarray, envs: list[gym.Env] | None) -> tuple:
        normed = self.stats.normalize_obs(raw)
        with torch.no_grad():
            actions, logp = self.act(torch.as_tensor(normed, device=self.device),
                                      torch.as_tensor(masks, device=self.device), deterministic=False)
        return actions.cpu().numpy(), logp.cpu().numpy(), normed

    # ----------------------------------------------------------- imitation warm start
    def behaviour_clone(self, report: Callable[[list[dict[str, float]]], None] | None = None
                        ) -> list[dict[str, float]]:
        """Collect about ``bc_steps`` expert steps (one member per group, whole episodes cut at the
        count), then ``bc_epochs`` of cross-entropy on the expert's actions under the masks
        (``bc_smoothing`` = eps: the target puts 1 - eps on the expert's value and eps spread evenly
        over each dimension's valid values, so the sampled policy keeps exploring around the expert
        while its most likely action stays the expert's; with eps = 0 a perfect clone samples the
        expert every time, every member of a group then runs the same episode and every grouped
        advantage is 0).
        Then ``dagger_rounds`` rounds of DAgger (Ross, Gordon and Bagnell, AISTATS 2011): the clone
        drives (its most likely valid action) for about ``bc_steps`` more steps on fresh windows, the
        expert labels every state it visits, and ``bc_epochs`` more on all states so far, so the
        clone also learns what the expert does where its own mistakes lead. The observation
        statistics stay those of the expert's states.
        Per epoch: mean negative log-likelihood, the share of steps whose most likely valid
        action is the expert's, the steps fitted and the round (0: the expert's own states);
        ``report`` is given each round's epochs as the round ends."""
        resets = [self.cfg.seed + slot for slot in range(len(self.slot_kwargs()))]
        raw, masks, actions = self.labelled_states(resets, drive=None)
        self.stats.update(raw)
        history = []
        for round_ in range(self.cfg.dagger_rounds + 1):
            if round_:
                more = self.labelled_states(resets, drive=lambda obs, masks: self.predict(  # the clone's argmax
                    self.stats.normalize_obs(obs.astype(np.float32)), action_masks=masks)[0])
                raw, masks, actions = (np.concatenate(pair) for pair in zip((raw, masks, actions), more))
            rows = [{**row, "round": float(round_)} for row in self.fit_clone(raw, masks, actions)]
            history += rows
            if report is not None:
                report(rows)
        return history

    def labelled_states(self, resets: list[int], drive: Callable[[np.ndarray, np.ndarray], np.ndarray] | None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """About ``bc_steps`` states (slot i: scenario i on the config's trace seed, reset seeds from
        ``resets[i]`` on, advanced in place) with the expert's action at each: raw observations,
        masks, actions. The expert plays (``drive`` None) or ``drive(raw_obs, masks)`` does."""
        cfg = self.cfg
        raws, masks_all, actions_all = [], [], []
        quota = -(-cfg.bc_steps // cfg.n_envs)
        for slot, kwargs in enumerate(self.slot_kwargs()):
            env = self.group_members(slot, cfg.trace_seed, kwargs)[0]
            obs, _ = env.reset(seed=resets[slot])
            for _ in range(quota):
                if env.unwrapped.done:  # type: ignore[attr-defined]
                    resets[slot] += RESET_SEED_STRIDE
                    obs, _ = env.reset(seed=resets[slot])
                    continue
                expert, masks = expert_action(env), action_masks(env)
                raws.append(obs)
                masks_all.append(masks)
                actions_all.append(expert)
                obs, _, terminated, truncated, _ = env.step(expert if drive is None else drive(obs, masks))
                if terminated or truncated:
                    resets[slot] += RESET_SEED_STRIDE
                    obs, _ = env.reset(seed=resets[slot])
            resets[slot] += RESET_SEED_STRIDE  # the next round starts on a fresh window
        return (np.stack(raws).astype(np.float32), np.stack(masks_all),
                np.stack(actions_all).astype(np.int64))

    def fit_clone(self, raw: np.ndarray, masks: np.ndarray, actions: np.ndarray) -> list[dict[str, float]]:
        """``bc_epochs`` of the (smoothed) cross-entropy of :meth:`behaviour_clone` on these states."""
        cfg = self.cfg
        obs_t = torch.as_tensor(self.stats.normalize_obs(raw), device=self.device)
        masks_t = torch.as_tensor(masks, device=self.device)
        act_t = torch.as_tensor(actions, device=self.device)
        optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.bc_learning_rate)
        history = []
        for _ in range(cfg.bc_epochs):
            order = self.rng.permutation(len(obs_t))
            nll = agree = 0.0
            for start in range(0, len(order), cfg.bc_batch_size):
                idx = torch.as_tensor(order[start:start + cfg.bc_batch_size])
                logp = self.policy.log_probs(obs_t[idx], masks_t[idx])
                loss = -MaskedPolicy.chosen(logp, act_t[idx]).mean()
                if cfg.bc_smoothing:  # (1 - eps) on the expert's value, eps spread over each dimension's valid values
                    valid = torch.isfinite(logp)
                    uniform = (logp.masked_fill(~valid, 0.0).sum(dim=2) / valid.sum(dim=2)).sum(dim=1)
                    loss = (1 - cfg.bc_smoothing) * loss - cfg.bc_smoothing * uniform.mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                optimizer.step()
                nll += float(loss.detach()) * len(idx)
                agree += float((logp.argmax(dim=2) == act_t[idx]).all(dim=1).sum())
            history.append({"nll": nll / len(order), "agreement": agree / len(order), "steps": float(len(order))})
        return history

    # ----------------------------------------------------------- the update
    def advantages(self, groups: list[list[Trajectory]]) -> tuple[np.ndarray, np.ndarray]:
        """(advantages, returns-to-go) of every step, in collection order (group, member, step):
        return-to-go minus the group baseline, or minus the value head (``baseline: value``)."""
        returns, baselines = [], []
        for group in groups:
            for traj in group:
                returns.append(traj.returns_to_go())
            if self.cfg.baseline == "group":
                baselines += group_baseline(group)
        ret = np.concatenate(returns)
        if self.cfg.baseline == "group":
            return ret - np.concatenate(baselines), ret
        obs = torch.as_tensor(np.stack([o for g in groups for t in g for o in t.obs]), device=self.device)
        with torch.no_grad():
            value = self.policy.value(obs).cpu().numpy().astype(np.float64)
        rms = self.stats.ret_rms
        return ret - (value * np.sqrt(rms.var + 1e-8) + rms.mean), ret

    def learning_rate(self, total_timesteps: int) -> float:
        if self.cfg.lr_schedule == "linear":
            return self.cfg.learning_rate * max(0.0, 1.0 - self.num_timesteps / total_timesteps)
        return self.cfg.learning_rate

    def update(self, groups: list[list[Trajectory]], total_timesteps: int) -> dict[str, float]:
        """PPO's clipped objective over the steps of ``groups`` (``n_epochs`` x minibatches of
        ``batch_size``; stops an update's epochs past ``target_kl``). Advantages are divided by
        their standard deviation (not centred: the baseline already did)."""
        adv, ret = self.advantages(groups)
        steps = [(o, m, a, lp) for g in groups for t in g for o, m, a, lp in zip(t.obs, t.masks, t.actions, t.logp)]
        return self.optimise([s[0] for s in steps], [s[1] for s in steps], [s[2] for s in steps],
                             [s[3] for s in steps], adv, ret, total_timesteps)

    def optimise(self, obs_rows: list[np.ndarray], mask_rows: list[np.ndarray], action_rows: list[np.ndarray],
                 logp_rows: list[float], adv: np.ndarray, ret: np.ndarray, total_timesteps: int,
                 anchors: tuple[list, list, list] | None = None, dim_rows: list[int] | None = None) -> dict[str, float]:
        """PPO's epochs over steps given row by row (normalised observation, masks, action, its
        log-probability when drawn) with their advantages and returns (:meth:`update`, or the vine's
        branches, :mod:`lyra_agents.vine`). ``anchors`` (observations, masks, expert actions): each
        minibatch adds ``expert_coef`` x the expert's NLL on as many of them, drawn. ``dim_rows``:
        per row the one dimension its ratio reads (-1: the whole action; None: all rows whole)."""
        cfg = self.cfg
        anchor = None
        if anchors is not None and anchors[0] and cfg.expert_coef > 0:
            anchor = tuple(torch.as_tensor(np.stack(rows).astype(dtype), device=self.device)
                           for rows, dtype in zip(anchors, (np.float32, bool, np.int64)))
        obs = torch.as_tensor(np.stack(obs_rows), device=self.device)
        masks = torch.as_tensor(np.stack(mask_rows), device=self.device)
        actions = torch.as_tensor(np.stack(action_rows).astype(np.int64), device=self.device)
        old_logp = torch.as_tensor(np.array(logp_rows, dtype=np.float32), device=self.device)
        dims = None
        if dim_rows is not None and any(d >= 0 for d in dim_rows):
            read = np.ones((len(dim_rows), len(self.nvec)), dtype=np.float32)
            for row, d in enumerate(dim_rows):
                if d >= 0:
                    read[row] = 0.0
                    read[row, d] = 1.0
            dims = torch.as_tensor(read, device=self.device)
        adv_t = torch.as_tensor((adv / (adv.std() + 1e-8)).astype(np.float32), device=self.device)
        self.stats.ret_rms.update(ret)
        rms = self.stats.ret_rms
        target = torch.as_tensor(((ret - rms.mean) / np.sqrt(rms.var + 1e-8)).astype(np.float32), device=self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = lr = self.learning_rate(total_timesteps)
        sums = {"policy_loss": 0.0, "value_loss": 0.0, "entropy_loss": 0.0, "approx_kl": 0.0, "clip_fraction": 0.0}
        if anchor is not None:
            sums["expert_nll"] = 0.0
        batches = 0
        for _ in range(cfg.n_epochs):
            order = self.rng.permutation(len(obs_rows))
            kls = []
            for start in range(0, len(order), cfg.batch_size):
                idx = torch.as_tensor(order[start:start + cfg.batch_size])
                logp_all = self.policy.log_probs(obs[idx], masks[idx])
                logp = MaskedPolicy.chosen(logp_all, actions[idx], None if dims is None else dims[idx])
                log_ratio = logp - old_logp[idx]
                ratio = log_ratio.exp()
                clipped = ratio.clamp(1 - cfg.clip_range, 1 + cfg.clip_range)
                policy_loss = -torch.min(ratio * adv_t[idx], clipped * adv_t[idx]).mean()
                entropy = MaskedPolicy.entropy(logp_all).mean()
                loss = policy_loss - cfg.ent_coef * entropy
                value_loss = torch.zeros(())
                if cfg.baseline == "value":
                    value_loss = nn.functional.mse_loss(self.policy.value(obs[idx]), target[idx])
                    loss = loss + cfg.vf_coef * value_loss
                expert_nll = torch.zeros(())
                if anchor is not None:
                    rows = torch.as_tensor(self.rng.integers(len(anchor[0]), size=len(idx)))
                    a_obs, a_masks, a_actions = (t[rows] for t in anchor)
                    expert_nll = -MaskedPolicy.chosen(self.policy.log_probs(a_obs, a_masks), a_actions).mean()
                    loss = loss + cfg.expert_coef * expert_nll
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                with torch.no_grad():
                    kl = float(((ratio - 1) - log_ratio).mean())
                kls.append(kl)
                batches += 1
                clip_fraction = ((ratio - 1).abs() > cfg.clip_range).float().mean()
                values = {"policy_loss": policy_loss, "value_loss": value_loss, "entropy_loss": -entropy,
                          "clip_fraction": clip_fraction, "expert_nll": expert_nll}
                for key in sums:
                    sums[key] += kl if key == "approx_kl" else float(values[key].detach())
            if cfg.target_kl is not None and np.mean(kls) > 1.5 * cfg.target_kl:
                break
        self.updates += 1
        return {**{k: v / max(batches, 1) for k, v in sums.items()}, "learning_rate": lr,
                "n_updates": float(self.updates), "advantage_std": float(adv.std())}

    def learn(self, total_timesteps: int, callback: Any = None) -> None:
        """Collect and update until ``num_timesteps`` reaches ``total_timesteps``. ``callback``:
        an SB3 ``CallbackList`` (told of the training start, each rollout start and end, each
        collection round as one step with the finished episodes' infos, and the training end)."""
        if callback is not None:
            callback.init_callback(self)
            callback.on_training_start(locals(), globals())
        started = time.perf_counter()
        while self.num_timesteps < total_timesteps:
            if callback is not None:
                callback.on_rollout_start()
            if self.cfg.baseline == "vine":
                t0 = time.process_time()
                batch, episodes = vine.collect(self)
                self.timing["vine"] += time.process_time() - t0
            else:
                groups = self.collect(self.policy_choice)
                episodes = [t for g in groups for t in g]
            if callback is not None:
                callback.update_locals({"infos": [{"final_metrics": t.metrics} for t in episodes if t.metrics]})
                callback.on_step()
                callback.on_rollout_end()
            t0 = time.process_time()
            if self.cfg.baseline != "vine":
                row = self.update(groups, total_timesteps)
            elif batch.advantages:
                row = self.optimise(batch.obs, batch.masks, batch.actions, batch.logp, np.asarray(batch.advantages),
                                    np.asarray(batch.returns), total_timesteps, batch.anchors, batch.dims)
                row.update(vine_states=float(batch.states), vine_informative=float(batch.informative))
            else:  # no drawn action changed any return: nothing to learn from this round
                self.updates += 1
                row = {"n_updates": float(self.updates), "vine_states": float(batch.states), "vine_informative": 0.0}
            self.timing["update"] += time.process_time() - t0
            self.record(row, episodes, started)
        if callback is not None:
            callback.on_training_end()

    def record(self, row: dict[str, float], episodes: list[Trajectory], started: float) -> None:
        """One update's scalars (``rollout/*``, ``train/*``, ``time/*``) into the logger, dumped."""
        if self.logger is None:
            return
        self.logger.record("rollout/ep_rew_mean", float(np.mean([sum(t.rewards) for t in episodes])))
        self.logger.record("rollout/ep_len_mean", float(np.mean([len(t.rewards) for t in episodes])))
        self.logger.record("rollout/episode_cap_s", float(min(self.episode_cap_s(), 1e12)))
        for key, value in row.items():
            self.logger.record(f"train/{key}", value)
        self.logger.record("time/total_timesteps", self.num_timesteps)
        self.logger.record("time/fps", int(self.num_timesteps / max(time.perf_counter() - started, 1e-9)))
        for key, value in self.timing.items():
            self.logger.record(f"time/{key}_cpu_s", value)
        self.logger.dump(self.num_timesteps)

    def close(self) -> None:
        if self._members is not None:
            self._members.close()
            self._members = None
        for members in self._envs.values():
            for env in members:
                env.close()
        self._envs.clear()

    # ----------------------------------------------------------- files
    def save(self, fh: Any) -> None:
        """Write ``model.zip``'s members into the open binary file ``fh``."""
        with zipfile.ZipFile(fh, "w") as archive:
            for member, state in ((POLICY_MEMBER, self.policy.state_dict()),
                                  (OPTIMIZER_MEMBER, self.optimizer.state_dict())):
                buffer = io.BytesIO()
                torch.save(state, buffer)
                archive.writestr(member, buffer.getvalue())
            archive.writestr(DATA_MEMBER, json.dumps({"num_timesteps": self.num_timesteps, "_n_updates": self.updates}))

    def load_states(self, states: dict[str, Any], counters: dict[str, Any]) -> None:
        """Weights (and, when given, optimizer state) read by :func:`read_model_zip`; strict keys."""
        self.policy.load_state_dict(states["policy"], strict=True)
        if "policy.optimizer" in states:
            self.optimizer.load_state_dict(states["policy.optimizer"])
        self.num_timesteps = int(counters.get("num_timesteps", 0))
        self.updates = int(counters.get("_n_updates", 0))
