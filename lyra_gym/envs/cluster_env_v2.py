"""The ``-v2`` guided environments (issue 38 items 1, 3 and 8): every lever Lyra's heuristic
rivals use, in the action space, and decision points that need no agent stepped through.

As ``-v1`` (:mod:`lyra_gym.envs.cluster_env`: observation, rewards, starting state, episode end,
arguments) except the action side (:mod:`lyra_gym.envs.levers`) and what a step shows; ``-v1``
is unchanged, bit for bit, for the agents trained on it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from gymnasium import spaces

from lyra_gym.envs.cluster_env import LyraClusterEnv
from lyra_gym.envs.episode import Episode
from lyra_gym.envs.levers import LeverCodec, lever_point
from lyra_gym.envs.observation import ObservationBuilder
from lyra_gym.sim.scheduler import Guidance

#: Job slots K of the ``-v2`` environments by default.
V2_JOB_SLOTS = 64


class LeverClusterEnv(LyraClusterEnv):
    """Base of the three ``-v2`` environments; see :class:`ClusterEnvV2` for the manual.

    ## Actions
    Job slot i: ``MultiDiscrete`` value 0..5 (``[6]*K``): 0-4 the ``-v1`` levels (0 hold: a queued
    job is not admitted now, a running elastic one gets no workers above its minimum; 1-4 admit in
    level order and weight extra workers by 0.5, 1, 2, 4; 2 is neutral); 5 = PREEMPT: a running job
    goes back to the queue now (the engine's restart cost and lost work, as any preemption), the
    heuristic does not restart it in this decision and gives its GPUs to its usual stages. Exact
    masks (``action_masks()``): a queued job 0-4; a running elastic job 0-5; a running inelastic
    job {2, 5}; an empty slot {0}. Borrow level (B+1 values): all when a server is loanable, else
    only B (nothing to borrow). Loaned-server slot j (3 return levels): all while a reclaim is
    pending, else only the neutral 1 (return levels are read only by a reclaim answer). A masked
    or out-of-range value becomes the neutral one and is counted in ``info["invalid_actions"]``.
    A PREEMPT stands for its own decision only: at the heuristic's ticks before the next step the
    levels stand, the preemption is not repeated.

    ## Slots
    K = 64 job slots by default (``num_job_slots``). Running jobs claim slots first (up to K:
    elastic ones, then inelastic ones, start order); queued jobs fill the rest in the heuristic's
    admission order. Laid out as queued jobs, running elastic jobs, running inelastic jobs.
    ``info["running_unseen"]`` / ``info["queued_unseen"]``: jobs without a slot at this decision.

    ## What a step shows (auto-commit)
    A decision point where the masks leave exactly one value in every dimension (no job in a
    slot, and, controlling loaning, no loanable server and no reclaim with a loaned server shown)
    is not shown: the only action there (the neutral one) is committed and the env runs on to the
    next decision point with a choice. Its reward is added to the step that ran through it (at
    reset: to the first step), so with gamma = 1 the return still sums to -(total JCT) / scale.
    ``info["auto_committed"]`` counts them for the step, ``info["auto_committed_total"]`` for the
    episode; ``max_steps`` counts shown steps only.

    The class attribute ``obs_version = 2`` tells the observation builder the ``-v2`` layout.
    """

    obs_version = 2
    action_version = 2
    codec: LeverCodec  # type: ignore[assignment]  # (-v1's is an ActionCodec)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The ``-v1`` arguments; ``num_job_slots`` defaults to 64 (:data:`V2_JOB_SLOTS`)."""
        kwargs.setdefault("num_job_slots", V2_JOB_SLOTS)
        super().__init__(*args, **kwargs)

    def _init_spaces(self) -> None:
        self.builder = ObservationBuilder(self.k, self.m, version=self.obs_version)
        self.observation_space = spaces.Box(-1.0, 1.0, (self.builder.size,), dtype=np.float32)
        self.codec = LeverCodec(self.k, self.m, self.b, self.controls_jobs, self.controls_loaning)
        self.action_space = spaces.MultiDiscrete(self.codec.nvec)
        self.obs = np.zeros(self.builder.size, dtype=np.float32)  # (set by the first shown decision point)
        self._single = False
        self._unseen = (0, 0)
        self._auto = self._auto_total = 0
        self._pending_r = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._auto = self._auto_total = 0
        self._pending_r = 0.0
        obs, info = super().reset(seed=seed, options=options)
        episode = self._current()
        if self._single and not episode.done:
            self._pending_r, self._auto = self._commit_until_shown(episode, 0.0)
            self._auto_total = self._auto
            obs, info = self.obs, self._info(0)
        return obs, info

    def step(self, action):
        episode = self._check_can_step()
        guidance, invalid = self.codec.decode(self.codec.check(action), self._masks, self.slots, self.server_ids)
        r = self._pending_r + self._advance(episode, guidance)
        self._pending_r = 0.0
        self._observe(episode)
        r, self._auto = self._commit_until_shown(episode, r)
        self._auto_total += self._auto
        return self._end_step(episode, r, invalid, observed=True)

    def _commit_until_shown(self, episode: Episode, r: float) -> tuple[float, int]:
        """Commit the one valid action at every decision point that offers no choice, from the
        current (observed) one on; (``r`` plus their rewards, how many)."""
        committed = 0
        while self._single and not episode.done:
            guidance, _ = self.codec.decode(self.codec.neutral(self.slots), self._masks, self.slots, self.server_ids)
            r += self._advance(episode, guidance)
            committed += 1
            self._observe(episode)
        return r, committed

    def _advance(self, episode: Episode, guidance: Guidance) -> float:
        """As ``-v1``; a preemption applies at the decision itself, not again at the ticks after it."""
        engine, decide = episode.engine, episode.heuristic.decide_guided
        r = episode.run(decide(engine.view, guidance))
        if guidance.preempt:
            guidance = replace(guidance, preempt=frozenset())
        while not episode.done and engine.tick_only:
            r += episode.run(decide(engine.view, guidance))
        return r

    def _observe(self, episode: Episode) -> None:
        view = episode.engine.view
        point = lever_point(view, self.codec)
        self.slots, self.server_ids = point.slots, point.server_ids
        self._masks, self._single = point.masks, point.single
        self._unseen = (point.running_unseen, point.queued_unseen)
        if not self._single or episode.done:  # (a decision point committed on its own is never shown)
            self.obs = self.builder.build(view, self.slots, self.server_ids, episode.window)

    def expert_action(self) -> np.ndarray:
        """The heuristic's own choice: neutral levels, no preemption, borrow as it would
        (:class:`~lyra_gym.envs.truncation.ResetNeeded` before the first reset)."""
        self._started("expert_action()")
        return self.codec.neutral(self.slots)

    def _info(self, invalid: int) -> dict[str, Any]:
        info = super()._info(invalid)
        info["auto_committed"] = self._auto
        info["auto_committed_total"] = self._auto_total
        info["running_unseen"], info["queued_unseen"] = self._unseen
        return info


class ClusterEnvV2(LeverClusterEnv):
    """``LyraGym/Cluster-v2``: ``Cluster-v1`` with preemption, K = 64 slots covering the running
    jobs, exact masks and auto-commit (:class:`LeverClusterEnv`).

    ## Action Space
    ``MultiDiscrete([6]*K + [B+1] + [3]*M)``: a value per job slot (0 hold, 1-4 admit and weight,
    2 neutral, 5 preempt), the borrow level, a return level per loaned-server slot.
    """


class LoaningEnvV2(LeverClusterEnv):
    """``LyraGym/Loaning-v2``: ``Loaning-v1`` with exact loaning masks and auto-commit.

    ## Action Space
    ``MultiDiscrete([B+1] + [3]*M)`` as ``Loaning-v1``; Lyra allocates jobs.
    """

    controls_jobs = False


class ElasticEnvV2(LeverClusterEnv):
    """``LyraGym/Elastic-v2``: ``Elastic-v1`` with preemption, K = 64 slots covering the running
    jobs, exact masks and auto-commit.

    ## Action Space
    ``MultiDiscrete([6]*K)``: a value per job slot (0 hold, 1-4 admit and weight, 2 neutral,
    5 preempt); Lyra borrows and reclaims.
    """

    controls_loaning = False


__all__ = ["ClusterEnvV2", "ElasticEnvV2", "LeverClusterEnv", "LoaningEnvV2", "V2_JOB_SLOTS"]
