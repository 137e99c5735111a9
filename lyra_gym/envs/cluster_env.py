"""Gymnasium environments over the co-simulator: the agent guides a heuristic scheduler.

Design (DESIGN.md "Environment", design 2): one step per event decision point
(arrival, completion, demand change, reclaim; at the guided heuristic's own
ticks, e.g. Lyra's knapsack rounds, the agent's last guidance stands). The
action gives a level per job slot and per loaned-server slot plus a borrow
level; a guided heuristic (Lyra by default, found by name in the scheduler
registry) turns them into a feasible Plan: its own admission order, knapsack
and placement, with the agent's levels as priorities and value weights. The
all-neutral action (:meth:`LyraClusterEnv.expert_action`) therefore reproduces
the heuristic exactly, and every action is executable, so per-dimension masks
are exact.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from lyra_gym.envs.actions import ActionCodec
from lyra_gym.envs.episode import RESET_OPTIONS, Episode, check_number, resolve_config
from lyra_gym.envs.episode_env import MAX_BORROW_LEVELS, MAX_SLOTS, EpisodeEnv
from lyra_gym.envs.observation import ObservationBuilder, job_slots_counted, server_slots
from lyra_gym.sim.scheduler import Guidance

# the names this module had before the episode runner (lyra_gym/envs/episode.py) took them
_check_number, _resolve_config = check_number, resolve_config


class LyraClusterEnv(EpisodeEnv):
    """Base of the three environments; see each subclass for its manual.

    ## Observation Space
    ``Box(-1, 1, (K*17 + 22 + M*4,), float32)`` (630 entries with the default
    K = 32, M = 16): K job slots x 17 features, 22 cluster features, M
    loaned-server slots x 4 features, all normalised (formulas in
    ``lyra_gym/envs/observation.py``; meaning and scale of each in
    ``docs/observations.md``, written by ``python -m
    lyra_gym.envs.observation_docs``). ``env.unwrapped.observation_names``
    names every entry in order:

    | index | names |
    |---|---|
    | 17*i + 0..16 | ``job[i].``: present, queued, elastic, requested_gpus, min_gpus, max_gpus, workers, waiting, attained, remaining_est, scaling_efficiency, in_overhead, on_loaned, rate_ratio, flexible_workers, remaining_now, remaining_loaned |
    | 17*K + 0..21 | ``cluster.``: free_training, free_loaned, loaned, loanable, demand_now, demand_1h, demand_3h, demand_6h, reclaim_pending, time_of_day_sin, time_of_day_cos, weekend, queued_jobs, running_jobs, servers_free_0, servers_free_1, servers_free_2_3, servers_free_4_7, servers_free_8, queue_head_wait, queue_tail_gpus, running_unseen |
    | 17*K + 22 + 4*j + 0..3 | ``server[j].``: present, used, jobs, inelastic_jobs |

    Job slots hold queued jobs in the heuristic's admission order, then running
    elastic jobs, then running inelastic jobs. Min 0 (or -1 for the sine and
    cosine), max 1.

    ## Rewards
    Named and swappable (``reward=``, ``lyra_gym/envs/rewards.py``). Default
    ``"jct"``: -(jobs in the system x seconds to the agent's next decision point) /
    ``reward_scale_s``; with gamma = 1 an episode's return is -(total JCT of the
    window's jobs) / scale. Jobs still unfinished when the episode terminates
    (nothing more can happen, e.g. the agent held them) are charged once more
    as if they waited one more window (``window_s``).

    ## Actions
    An action must be an integer array (any NumPy integer dtype, or a list of
    ints) of exactly the action space's shape; anything else (floats, even
    whole ones like ``2.0``; booleans; another shape, e.g. a batch ``(1, n)``)
    raises ``ValueError`` saying what was expected (cast with
    ``.astype(np.int64)``). Values out of a dimension's range or masked by
    ``action_masks()`` are not errors: each becomes that dimension's neutral
    value (a no-op) and is counted in ``info["invalid_actions"]`` and
    ``info["invalid_actions_total"]``.

    ## Starting State
    ``reset`` picks a window of the trace (``window_s`` long) from the train
    part (by the reset seed), or test window ``options["window"]`` with
    ``options={"split": "test"}``; the cluster starts empty at the window's
    first submission and the first step is its first decision point.
    ``options`` may hold only ``"split"`` (``"train"``, the default, or
    ``"test"``) and, with ``"test"``, ``"window"``: an integer in
    ``[0, windows.num_test)`` (default 0). Any other key or value raises
    ``ValueError`` naming the key and the valid values.

    Warm start (``warmup_s > 0``): the episode's jobs also include those
    submitted in the ``warmup_s`` before the window; the heuristic itself runs
    them (every decision point before the window's start, no agent) and the
    agent's first decision is the first one at or after the start, on the
    cluster as the heuristic left it. From then on the agent is charged (the
    reward) for every job in the system, warm-up jobs included, since its
    decisions delay them too; ``final_metrics`` cover all the episode's jobs,
    as ``simulate`` does on the same job set (so the expert still reproduces
    ``lyra`` on ``Window.jobs``, warm-up jobs included).

    ## Episode End
    1. Termination: every job of the window has finished, or nothing more can
       happen (no job runs, no arrival or demand change is ahead, and the last
       decision changed nothing; e.g. jobs too large for the cluster, or jobs
       the agent holds).
    2. Truncation: ``max_steps`` steps.
    A step runs to the next event decision point: the guided heuristic's own
    ticks (Lyra's knapsack rounds every ``round_s``) apply the same guidance
    again without asking the agent, and the reward sums the sub-spans (so
    ``lyra-gym compare`` with a saved model, ``agents/policy_scheduler.py``,
    makes the same decisions). At the end, ``info["final_metrics"]`` holds the metrics in the keys of
    ``metrics.json``.

    ## Arguments
    | keyword | type | default | meaning |
    |---|---|---|---|
    | trace | str | "env-14d" | a trace preset name or a trace CSV path |
    | trace_seed | int | 0 | seed of a preset trace |
    | config | SimConfig, dict or path | None | cluster and engine settings (defaults: 16x8 V100, 16x8 T4) |
    | profiles | str | None | profile JSON path (built-in when None) |
    | window_s | float | 43200 | episode window length, s |
    | test_fraction | float | 0.2 | last share of the trace kept for test windows |
    | reward | str, dict or callable | "jct" | a term name, weights or fn(StepOutcome) (docs/rewards-and-forking.md) |
    | reward_scale_s | float | 3600 | seconds per unit of reward (finite, > 0) |
    | num_job_slots | int | 32 | K (1..4096) |
    | num_server_slots | int | 16 | M (0..4096) |
    | borrow_levels | int | 4 | B: borrow b/B of the loanable servers (1..1024) |
    | heuristic | str | "lyra" | guided scheduler by registry name (one with ``decide_guided``) |
    | max_steps | int | 5000 | truncation (>= 1) |
    | warmup_s | float | 0 | warm start: seconds of jobs before the window run by the heuristic first (>= 0) |
    | render_mode | str | None | None, "ansi" (text), "rgb_array" (H x W x 3 uint8 Gantt picture) or "human" (the picture in a window, else text, on every reset and step) |

    Every argument is checked in the constructor; a bad one raises
    ``ValueError`` naming it (or the config's ``ConfigError``, naming the
    config field).

    ## Rendering
    ``"ansi"``: ``render()`` returns one line of counts plus a line per pool
    (``used/GPUs`` per server, ``L`` marks a loaned one). ``"rgb_array"``:
    ``render()`` returns the episode so far as a labelled Gantt picture
    (:mod:`lyra_gym.envs.render`, docs/rendering.md: a lane per GPU by pool,
    loaned inference servers shaded, a bar per job with its id, jobs queued,
    hours), 720 x 1200 x 3 for every frame (an empty one before ``reset``);
    stable-baselines3's ``make_vec_env`` asks for this mode, which samples
    placements after every step. ``"human"``: the picture in a matplotlib
    window on every ``reset`` and ``step`` (the ``"ansi"`` text on stdout where
    the backend is not interactive); ``render()`` returns None.

    ## Vectorized environment
    Any Gymnasium vector wrapper; instances share nothing.

    ## Version History
    - v2 (0.3.0): PREEMPT per running job's slot, K = 64 with running jobs first, exact masks,
      auto-commit, observation version 2 (:mod:`lyra_gym.envs.cluster_env_v2`).
    - v1 (0.2.0): the behaviour of 0.2.0's changes (CHANGELOG); ``-v0`` numbers are not comparable.
    - v0 (0.1.0): first release.
    """

    controls_jobs = True
    controls_loaning = True
    obs_version = 1  # the observation layout (``-v2`` ids: 2)
    action_version = 1  # the action layout: 1 ``ActionCodec``, 2 ``lyra_gym.envs.levers.LeverCodec``

    def _init_spaces(self) -> None:
        self.builder = ObservationBuilder(self.k, self.m)
        self.observation_space = spaces.Box(-1.0, 1.0, (self.builder.size,), dtype=np.float32)
        self.codec = ActionCodec(self.k, self.m, self.b, self.controls_jobs, self.controls_loaning)
        self.action_space = spaces.MultiDiscrete(self.codec.nvec)

    def step(self, action):
        episode = self._check_can_step()
        guidance, invalid = self._decode(self.codec.check(action))
        return self._end_step(episode, self._advance(episode, guidance), invalid)

    def _advance(self, episode: Episode, guidance: Guidance) -> float:
        """Apply ``guidance`` and run to the agent's next decision point; the reward over the span.

        The guided heuristic's own ticks (Lyra's knapsack rounds) are not the agent's decision
        points: there the agent's last guidance stands, and the reward sums every sub-span."""
        engine, decide, r = episode.engine, episode.heuristic.decide_guided, 0.0
        while True:
            r += episode.run(decide(engine.view, guidance))
            if episode.done or not engine.tick_only:
                return r

    # ------------------------------------------------------------------ observation and actions
    def _observe(self, episode: Episode) -> None:
        view = episode.engine.view
        self.slots, inelastic = job_slots_counted(view, self.k)
        self.server_ids = server_slots(view, self.m)
        self.obs = self.builder.build(view, self.slots, self.server_ids)
        # codec.masks(slots, server_ids), from the counts job_slots_counted gives (a kept read-only array)
        self._mask_counts = (len(self.slots), inelastic, len(self.server_ids))
        self._masks = self.codec.masks_counted(*self._mask_counts)

    def expert_action(self) -> np.ndarray:
        """The heuristic's own choice: neutral levels everywhere, borrow as it would
        (:class:`~lyra_gym.envs.truncation.ResetNeeded` before the first reset)."""
        self._started("expert_action()")
        return self.codec.neutral(self.slots)

    def _decode(self, action: np.ndarray) -> tuple[Guidance, int]:
        """Action -> Guidance; a masked value becomes that dimension's neutral value and is counted."""
        return self.codec.decode(action, self._masks, self.slots, self.server_ids, self._mask_counts)


class ClusterEnv(LyraClusterEnv):
    """``LyraGym/Cluster-v1``: the agent guides job allocation and loaning.

    ## Description
    Training and inference clusters co-simulated (Lyra, EuroSys 2023). At each
    decision point (arrival, completion, demand change, reclaim) the agent sets
    a level per job slot, a borrow level and a return level per loaned server;
    the Lyra heuristic turns them into a feasible allocation.

    ## Action Space
    ``MultiDiscrete([5]*K + [B+1] + [3]*M)``:
    - job slot i (5 levels): 0 hold (queued: not admitted now; running elastic:
      no workers above its minimum); 1-4 admit, higher levels first, and weight
      the job's value for extra workers by 0.5, 1 (neutral = 2), 2, 4.
    - borrow (B+1 levels): borrow b/B of the loanable inference servers.
    - loaned-server slot j (3 levels): on a reclaim, return higher levels first
      (0 protect, 1 neutral, 2 return first); ties by Lyra's preemption cost.
    ``action_masks()`` gives the valid values per dimension; a masked value is
    replaced by the neutral one and counted in ``info["invalid_actions"]``.

    Observation, rewards, starting state, episode end and arguments: see
    :class:`LyraClusterEnv`.
    """


class LoaningEnv(LyraClusterEnv):
    """``LyraGym/Loaning-v1``: the agent decides borrowing and returning; Lyra allocates jobs.

    ## Description
    As ``Cluster-v1`` without the job slots' actions: admission and elastic
    scaling are Lyra's own.

    ## Action Space
    ``MultiDiscrete([B+1] + [3]*M)``: the borrow level (b/B of the loanable
    servers) and a return level per loaned-server slot (0 protect, 1 neutral,
    2 return first).

    Observation, rewards, starting state, episode end and arguments: see
    :class:`LyraClusterEnv`.
    """

    controls_jobs = False


class ElasticEnv(LyraClusterEnv):
    """``LyraGym/Elastic-v1``: the agent guides job allocation; Lyra borrows and reclaims.

    ## Description
    As ``Cluster-v1`` without the loaning actions: borrowing (all loanable
    servers) and reclaiming (by preemption cost) are Lyra's own.

    ## Action Space
    ``MultiDiscrete([5]*K)``: a level per job slot (0 hold; 1-4 admit in level
    order and weight extra workers by 0.5, 1, 2, 4; 2 is neutral).

    Observation, rewards, starting state, episode end and arguments: see
    :class:`LyraClusterEnv`.
    """

    controls_loaning = False


__all__ = ["ClusterEnv", "ElasticEnv", "LoaningEnv", "LyraClusterEnv", "MAX_BORROW_LEVELS", "MAX_SLOTS",
           "RESET_OPTIONS"]
