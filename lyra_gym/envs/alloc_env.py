"""``LyraGym/Alloc-v1``: full control, the agent builds each decision from masked sub-actions."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from lyra_gym.envs.alloc import PHASES, AllocDecision, AllocLayout, AllocObserver, open_decision
from lyra_gym.envs.episode import Episode, check_number
from lyra_gym.envs.episode_env import EpisodeEnv

#: Default truncation in sub-actions (a 12 h window takes a few thousand).
ALLOC_MAX_STEPS = 200_000
_INT64_MIN, _INT64_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


class AllocEnv(EpisodeEnv):
    """``LyraGym/Alloc-v1``: the agent decides loaning and every job's pool and size itself.

    ## Description
    As ``Cluster-v1``, but no heuristic turns the action into the decision:
    each decision point is a short sequence of sub-actions (``lyra_gym/envs/alloc.py``
    has the phases): borrow a share of the loanable servers, pick the servers to
    return on a reclaim, then pick jobs one at a time and give each a pool
    (training or loaned GPUs) and a worker count, or make it wait, until *stop*
    (the rest keep what they have) or *auto* (the rest get the guided
    heuristic's proposal where it still fits). Placement inside the chosen pool
    is best fit. The heuristic's proposal is shown per job in the observation
    and is one of the place values, so the expert sequence
    (:meth:`expert_action`) reproduces ``lyra`` bit for bit.

    ## Action Space
    ``Discrete(n)``, ``n = max(K + 2, B + 1, M + 1, 2 + 2 L)`` (L worker options,
    ``worker_levels``); what a value means depends on the phase, which the
    observation shows (one-hot), and ``action_masks()`` gives the values valid
    now. A masked or out-of-range value becomes the phase's neutral value (the
    heuristic's choice: borrow all, its returns, *auto*, or the proposal) and
    is counted in ``info["invalid_actions"]``.

    ## Observation Space
    The other environments' layout with extra features appended to each job
    row (:data:`lyra_gym.envs.alloc.ALLOC_JOB_FEATURES`: picked, selected,
    must decide, workers and loaned share in the working plan and in the
    heuristic's proposal) and to the cluster block
    (:data:`lyra_gym.envs.alloc.ALLOC_CLUSTER_FEATURES`: phase one-hot, free
    GPUs in the working plan, servers borrowed and still to return, jobs the
    proposal changes that are not yet picked). Job slots: jobs holding GPUs on
    servers being returned first, then the other environments' order.

    ## Rewards
    As :class:`~lyra_gym.envs.cluster_env.LyraClusterEnv` (default ``"jct"``), paid on the sub-action that
    commits a decision point (0 on the others), so with gamma = 1 the return is
    still -(total JCT) / scale. (With gamma < 1 the discount also counts
    sub-actions.)

    ## Decision points
    Every event decision point (arrival, completion, demand change, reclaim).
    At the guided heuristic's own ticks (Lyra's knapsack rounds) the agent is
    asked only when the heuristic's proposal would change something; otherwise
    the proposal (a no-op) is submitted and time runs on. At ticks the loaning
    is not asked: servers are borrowed only if the agent's last borrow choice
    was "all" (the heuristic's own), and nothing is returned.

    ## Arguments
    Those of :class:`~lyra_gym.envs.cluster_env.LyraClusterEnv` (``borrow_levels`` = B, ``num_server_slots``
    = M, ``max_steps`` counted in sub-actions, default 200,000), plus
    ``worker_levels`` (L, 1..64, default 10).

    ## Version History
    - v1 (0.2.0): the behaviour of 0.2.0's changes (CHANGELOG); Lyra's proposals since 0.3.0 count every job on loaned
      GPUs as a move-back candidate (CHANGELOG, Fixed).
    - v0 (0.1.0): first release.
    """

    controls_jobs = True
    controls_loaning = True

    def __init__(self, *args: Any, worker_levels: int = 10, max_steps: int = ALLOC_MAX_STEPS,
                 **kwargs: Any) -> None:
        check_number("worker_levels", worker_levels, integer=True, lo=1, hi=64)
        self.worker_levels = int(worker_levels)
        self.decision: AllocDecision | None = None
        self._last_borrow: float | None = None  # the loaning the heuristic's ticks follow
        kwargs["max_steps"] = max_steps
        super().__init__(*args, **kwargs)

    def _init_spaces(self) -> None:
        self.layout = AllocLayout(self.k, self.m, self.b, self.worker_levels)
        self.observer = AllocObserver(self.k, self.m)
        self.builder = self.observer.builder
        self.observation_space = spaces.Box(-1.0, 1.0, (self.builder.size,), dtype=np.float32)
        self.action_space = spaces.Discrete(self.layout.n)

    @property
    def decisions(self) -> int:
        """Plans submitted in the current episode (decision points, skipped ticks included)."""
        return self.episode.plans if self.episode is not None else 0

    # ------------------------------------------------------------------ episode
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self.decision = None
        self._last_borrow = None
        return super().reset(seed=seed, options=options)

    def _start_decision(self, episode: Episode) -> float:
        """Open the next decision point that needs the agent; submit the heuristic's no-op ticks on
        the way. Returns the reward of the spans run meanwhile."""
        r = 0.0
        self.decision = None
        while not episode.done:
            decision, _ = open_decision(episode.engine.view, episode.heuristic, self.layout, self._last_borrow)
            if isinstance(decision, AllocDecision):  # not a skipped tick: the agent decides
                self.decision = decision
                break
            r += episode.run(decision.proposal)
        return r

    def step(self, action):
        episode = self._check_can_step()
        value = self._check(action)
        decision = self.decision
        masks = self._masks  # decision.masks(), as the last observation left them (nothing changed since)
        invalid = 0
        if not 0 <= value < len(masks) or not masks[value]:
            value, invalid = decision.neutral(), 1
        r = 0.0
        if decision.step(value):
            self._last_borrow = decision.borrow_fraction  # the loaning the ticks follow
            assert decision.plan is not None  # step() True: the plan is committed
            r = episode.run(decision.plan) + self._start_decision(episode)
        return self._end_step(episode, r, invalid)

    def _check(self, action: object) -> int:
        """``action`` as an int, or ``ValueError`` saying what was expected."""
        if isinstance(action, np.signedinteger) or (type(action) is int and _INT64_MIN <= action <= _INT64_MAX):
            return int(action)  # the common case: what the general path below gives it
        array = np.asarray(action)
        if array.dtype.kind not in "iu" or array.shape not in ((), (1,)):
            raise ValueError(f"action: must be one integer (Discrete({self.layout.n})), got {action!r}")
        return int(min(array.reshape(-1)[0], np.iinfo(np.int64).max))

    # ------------------------------------------------------------------ observation, masks, expert
    def _observe(self, episode: Episode) -> None:
        if self.decision is None and not episode.done:
            self._start_decision(episode)
        decision = self.decision
        if decision is None:  # the episode is over: an all-zero observation of the empty slots
            self.obs = np.zeros(self.builder.size, dtype=np.float32)
            self._masks = np.zeros(self.layout.n, dtype=bool)
            self._masks[self.layout.auto] = True
            return
        self.obs = self.observer.observe(episode.engine.view, decision)
        self._masks = decision.masks()

    def action_masks(self) -> np.ndarray:
        """Valid values of the current sub-action (sb3-contrib MaskablePPO);
        :class:`~lyra_gym.envs.truncation.ResetNeeded` before the first reset."""
        self._started("action_masks()")
        return self._masks.copy()

    def expert_action(self) -> np.ndarray:
        """The heuristic's own next sub-action (:meth:`AllocDecision.expert`);
        :class:`~lyra_gym.envs.truncation.ResetNeeded` before the first reset."""
        self._started("expert_action()")
        if self.decision is None:
            return np.int64(self.layout.auto)
        return np.int64(self.decision.expert())

    def _info(self, invalid: int) -> dict[str, Any]:
        info = super()._info(invalid)
        info["phase"] = PHASES[self.decision.phase] if self.decision is not None else "done"
        info["decisions"] = self.decisions
        return info


__all__ = ["AllocEnv", "ALLOC_MAX_STEPS"]
