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

import os
from dataclasses import replace
from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from lyra_gym import scheduler as registry
from lyra_gym.model.config import SimConfig, config_from_dict, load_config
from lyra_gym.model.demand import number_problem
from lyra_gym.envs.actions import ActionCodec
from lyra_gym.envs.observation import ObservationBuilder, job_slots, server_slots
from lyra_gym.envs.render import blank_frame, cluster_frame
from lyra_gym.envs.rewards import SpanReward, StepOutcome, parse_reward, reward
from lyra_gym.envs.windows import Window, WindowSampler
from lyra_gym.run.metrics import summarize
from lyra_gym.plan import Plan
from lyra_gym.model.profiles import ProfileSet, builtin_profiles, load_profiles
from lyra_gym.scheduler import Guidance, Scheduler
from lyra_gym.run.simulate import build_engine
from lyra_gym.workloads.trace import load_trace
from lyra_gym.workloads.tracegen import PRESETS, generate_trace


#: Largest number of job slots K and loaned-server slots M (the observation grows with both).
MAX_SLOTS = 4096
#: Largest number of borrow levels B.
MAX_BORROW_LEVELS = 1024
#: The keys ``reset(options=...)`` understands.
RESET_OPTIONS = ("split", "window")


def _resolve_config(config: SimConfig | Mapping | str | os.PathLike | None) -> SimConfig:
    if config is None:
        return SimConfig()
    if isinstance(config, SimConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        return load_config(config)
    if not isinstance(config, Mapping):
        raise ValueError(f"config: must be a SimConfig, a mapping or a file path, got {type(config).__name__}")
    return config_from_dict(config)


def _check_number(name: str, value: object, **rule: Any) -> None:
    """``ValueError`` naming the constructor argument if ``value`` breaks ``rule``
    (:func:`lyra_gym.model.demand.number_problem`'s keywords)."""
    problem = number_problem(value, **rule)
    if problem is not None:
        raise ValueError(f"{name}: {problem}")


class LyraClusterEnv(gym.Env[np.ndarray, np.ndarray]):
    """Base of the three environments; see each subclass for its manual.

    ## Observation Space
    ``Box(-1, 1, (K*12 + 14 + M*4,), float32)``: K job slots x 12 features, 14
    cluster features, M loaned-server slots x 4 features (all normalised; see
    ``lyra_gym/envs/observation.py`` for the formula of each):

    | index | meaning |
    |---|---|
    | 12*i + 0..11 | job slot i: present, queued, elastic, requested/64, min/64, max/64, workers/64, waiting (log-time), attained GPU-h (log), estimated remaining time (log-time), scaling efficiency max vs min, in overhead |
    | 12*K + 0..13 | free training GPUs share, free loaned GPUs share, loaned servers, loanable servers, inference demand now, +1 h, +3 h, +6 h, reclaim pending, time of day sin, cos, weekend, log queued, log running |
    | 12*K + 14 + 4*j + 0..3 | loaned-server slot j: present, GPUs used share, jobs/8, inelastic jobs/8 |

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
    | reward | str or dict | "jct" | reward name or weights |
    | reward_scale_s | float | 3600 | seconds per unit of reward (finite, > 0) |
    | num_job_slots | int | 32 | K (1..4096) |
    | num_server_slots | int | 16 | M (0..4096) |
    | borrow_levels | int | 4 | B: borrow b/B of the loanable servers (1..1024) |
    | heuristic | str | "lyra" | guided scheduler by registry name (one with ``decide_guided``) |
    | max_steps | int | 5000 | truncation (>= 1) |
    | warmup_s | float | 0 | warm start: seconds of jobs before the window run by the heuristic first (>= 0) |
    | render_mode | str | None | None, "ansi" (text), "rgb_array" (H x W x 3 uint8 picture) or "human" (text printed on every reset and step) |

    Every argument is checked in the constructor; a bad one raises
    ``ValueError`` naming it (or the config's ``ConfigError``, naming the
    config field).

    ## Rendering
    ``"ansi"``: ``render()`` returns one line of counts plus a line per pool
    (``used/GPUs`` per server, ``L`` marks a loaned one). ``"rgb_array"``:
    ``render()`` returns a picture (:mod:`lyra_gym.envs.render`: servers as
    cells coloured by free / used / serving / loaned, a queue bar and a demand
    bar), of the same shape for every frame of the env (a blank one before
    ``reset``); stable-baselines3's ``make_vec_env`` asks for this mode.
    ``"human"``: the ``"ansi"`` text is printed to stdout on every ``reset``
    and ``step`` (``render()`` returns None).

    ## Vectorized environment
    Any Gymnasium vector wrapper; instances share nothing.

    ## Version History
    - v0: first release.
    """

    metadata = {"render_modes": ["ansi", "rgb_array", "human"], "render_fps": 4}
    controls_jobs = True
    controls_loaning = True

    def __init__(
        self,
        trace: str = "env-14d",
        trace_seed: int = 0,
        config: SimConfig | Mapping | str | None = None,
        profiles: str | None = None,
        window_s: float = 12 * 3600.0,
        test_fraction: float = 0.2,
        reward: str | Mapping[str, float] = "jct",
        reward_scale_s: float = 3600.0,
        num_job_slots: int = 32,
        num_server_slots: int = 16,
        borrow_levels: int = 4,
        heuristic: str = "lyra",
        max_steps: int = 5000,
        warmup_s: float = 0.0,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode: must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        _check_number("num_job_slots", num_job_slots, integer=True, lo=1, hi=MAX_SLOTS)
        _check_number("num_server_slots", num_server_slots, integer=True, lo=0, hi=MAX_SLOTS)
        _check_number("borrow_levels", borrow_levels, integer=True, lo=1, hi=MAX_BORROW_LEVELS)
        _check_number("max_steps", max_steps, integer=True, lo=1)
        _check_number("trace_seed", trace_seed, integer=True, lo=0)
        _check_number("window_s", window_s, lo=0.0, lo_open=True)
        _check_number("test_fraction", test_fraction, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        _check_number("reward_scale_s", reward_scale_s, lo=0.0, lo_open=True)
        _check_number("warmup_s", warmup_s, lo=0.0)
        if not isinstance(heuristic, str):
            raise ValueError(f"heuristic: must be a scheduler name, got {heuristic!r}")
        try:
            guided = registry.make(heuristic)  # fail now on an unknown name
        except KeyError as err:
            raise ValueError(f"heuristic: {err.args[0] if err.args else err}") from None
        if type(guided).decide_guided is Scheduler.decide_guided:
            raise ValueError(f"heuristic: scheduler {heuristic!r} cannot be guided by an agent (it has no "
                             "decide_guided; e.g. 'lyra')")
        if profiles is not None and not isinstance(profiles, (str, os.PathLike)):
            raise ValueError(f"profiles: must be a file path or None, got {profiles!r}")
        if not isinstance(trace, (str, os.PathLike)):
            raise ValueError(f"trace: must be a preset name ({', '.join(PRESETS)}) or a CSV path, got {trace!r}")
        num_job_slots, num_server_slots = int(num_job_slots), int(num_server_slots)
        borrow_levels, max_steps = int(borrow_levels), int(max_steps)
        self.trace = generate_trace(trace, int(trace_seed)) if trace in PRESETS else load_trace(trace)
        self.sim_config = _resolve_config(config)
        if profiles is not None:
            self.sim_config = replace(self.sim_config, profiles=profiles)
        self.profiles: ProfileSet = load_profiles(profiles) if profiles else builtin_profiles()
        self.windows = WindowSampler(self.trace, window_s, test_fraction, warmup_s=float(warmup_s))
        self.reward_weights = parse_reward(reward)
        self.reward_scale_s = float(reward_scale_s)
        self._span_reward = SpanReward(self.reward_weights, self.reward_scale_s)
        self.k, self.m, self.b = num_job_slots, num_server_slots, borrow_levels
        self.heuristic_name = heuristic
        self.max_steps = max_steps
        self.render_mode = render_mode
        self.builder = ObservationBuilder(self.k, self.m)
        self.observation_space = spaces.Box(-1.0, 1.0, (self.builder.size,), dtype=np.float32)
        self.codec = ActionCodec(self.k, self.m, self.b, self.controls_jobs, self.controls_loaning)
        self.action_space = spaces.MultiDiscrete(self.codec.nvec)
        self.engine = None
        self.window: Window | None = None
        self.invalid_actions_total = 0

    # ------------------------------------------------------------------ episode
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        split, window = self._parse_options(options)
        super().reset(seed=seed)
        if split == "test":
            self.window = self.windows.test(window)
        else:
            self.window = self.windows.train(self.np_random)
        jobs = self.window.jobs(self.trace)
        self.heuristic = registry.make(self.heuristic_name)
        self.engine = build_engine(jobs, self.heuristic, self.sim_config, self.window.seed, self.profiles)
        self._training_gpus = max(1, self.sim_config.cluster.training_gpus)  # the reward's usage term
        self.engine.begin()
        self.steps = 0
        self.invalid_actions_total = 0
        self.done = not self.engine.next_decision()
        self._warm_up()
        self._observe()
        if self.render_mode == "human":
            self.render()
        return self.obs, self._info(0)

    def _warm_up(self) -> None:
        """Run the heuristic itself (the same instance the agent then guides) through the decision
        points before the window's start; the agent's first decision is the first one at or after it."""
        engine, start = self.engine, self.window.start_s
        while not self.done and engine.now < start:
            engine.submit(self.heuristic.decide(engine.view))
            self.done = not engine.next_decision()

    def _parse_options(self, options: Mapping[str, Any] | None) -> tuple[str, int]:
        """(split, test window index) from reset's ``options``; ``ValueError`` naming the key."""
        if options is None:
            return "train", 0
        if not isinstance(options, Mapping):
            raise ValueError(f"options: must be a dict with keys among {RESET_OPTIONS}, got {type(options).__name__}")
        unknown = [key for key in options if key not in RESET_OPTIONS]
        if unknown:
            raise ValueError(f"options[{unknown[0]!r}]: unknown reset option (known: {', '.join(RESET_OPTIONS)})")
        split = options.get("split", "train")
        if not isinstance(split, str) or split not in ("train", "test"):
            raise ValueError(f"options['split']: must be 'train' or 'test', got {split!r}")
        if "window" not in options:
            return split, 0
        if split != "test":
            raise ValueError("options['window']: only with options['split'] = 'test' (train windows are drawn "
                             "by the reset seed)")
        window, count = options["window"], self.windows.num_test
        if isinstance(window, (bool, np.bool_)) or not isinstance(window, (int, np.integer)) \
                or not 0 <= window < count:
            raise ValueError(f"options['window']: must be an integer in [0, {count - 1}] (this env has {count} "
                             f"test windows), got {window!r}")
        return split, int(window)

    def step(self, action):
        self._check_can_step()
        guidance, invalid = self._decode(self.codec.check(action))
        self.invalid_actions_total += invalid
        return self._end_step(self._advance(guidance), invalid)

    def _check_can_step(self) -> None:
        if self.engine is None:
            raise RuntimeError("step(): call reset() first")
        if self.done:
            raise RuntimeError("step(): the episode is over (it terminated, or its window had no decision "
                               "to make); call reset()")

    def _end_step(self, r: float, invalid: int):
        """Count the step, charge what an early end leaves, observe; the step's 5-tuple."""
        engine = self.engine
        self.steps += 1
        left = len(engine.jobs) - engine.finished
        if self.done and left:
            # Jobs left unfinished when nothing more can happen (e.g. held by the agent) are
            # charged as if they waited one more window, so ending an episode early never pays.
            r += reward(self.reward_weights, StepOutcome(self.windows.length_s, left, left, 0.0, 0),
                        self.reward_scale_s)
        truncated = not self.done and self.steps >= self.max_steps
        self._observe()
        info = self._info(invalid)
        if self.done or truncated:
            engine.finish()
            info["final_metrics"] = summarize(engine)
        if self.render_mode == "human":
            self.render()
        return self.obs, r, self.done, truncated, info

    def _advance(self, guidance: Guidance) -> float:
        """Apply ``guidance`` and run to the agent's next decision point; the reward over the span.

        The guided heuristic's own ticks (Lyra's knapsack rounds) are not the agent's decision
        points: there the agent's last guidance stands, and the reward sums every sub-span."""
        engine, r = self.engine, 0.0
        while True:
            r += self._run(self.heuristic.decide_guided(engine.view, guidance))
            if self.done or not engine.tick_only:
                return r

    def _run(self, plan: Plan) -> float:
        """Submit ``plan`` and run to the next decision point; the reward of the span."""
        engine = self.engine
        t0, preempt0 = engine.now, engine.counts["preemptions"]
        engine.submit(plan)
        queued = len(engine.queue)
        in_system = queued + len(engine.running)
        usage = engine.used_training / self._training_gpus
        self.done = not engine.next_decision()
        # reward(self.reward_weights, StepOutcome(...), self.reward_scale_s)
        return self._span_reward(engine.now - t0, in_system, queued, usage, engine.counts["preemptions"] - preempt0)

    # ------------------------------------------------------------------ actions
    def _observe(self) -> None:
        view = self.engine.view
        self.slots = job_slots(view, self.k)
        self.server_ids = server_slots(view, self.m)
        self.obs = self.builder.build(view, self.slots, self.server_ids)
        self._masks = self.codec.masks(self.slots, self.server_ids)

    def action_masks(self) -> np.ndarray:
        """Valid values of every action dimension, concatenated (sb3-contrib MaskablePPO)."""
        return self._masks.copy()

    def expert_action(self) -> np.ndarray:
        """The heuristic's own choice: neutral levels everywhere, borrow as it would."""
        return self.codec.neutral(self.slots)

    def _decode(self, action: np.ndarray) -> tuple[Guidance, int]:
        """Action -> Guidance; a masked value becomes that dimension's neutral value and is counted."""
        return self.codec.decode(action, self._masks, self.slots, self.server_ids)

    # ------------------------------------------------------------------ info and rendering
    def _info(self, invalid: int) -> dict[str, Any]:
        engine = self.engine
        counts = engine.counts
        return {
            "time_s": engine.now,
            "window": self.window.index,
            "split": self.window.split,
            "jobs_total": len(engine.jobs),
            "jobs_finished": engine.finished,
            "jobs_queued": len(engine.queue),
            "jobs_running": len(engine.running),
            "servers_loaned": engine.loaned_count,
            "preemptions": counts["preemptions"],
            "scale_events": counts["scale_ins"] + counts["scale_outs"],
            "servers_borrowed": counts["servers_borrowed"],
            "inference_violations": counts["inference_violations"],
            "invalid_actions": invalid,
            "invalid_actions_total": self.invalid_actions_total,
        }

    def render(self) -> str | np.ndarray | None:
        """The frame of ``render_mode`` (see "Rendering"); None without a render mode."""
        if self.render_mode == "rgb_array":
            if self.engine is None:
                cluster = self.sim_config.cluster
                return blank_frame(sum(g.count for g in cluster.training), cluster.inference.count)
            return cluster_frame(self.engine)
        if self.render_mode == "human":
            if self.engine is not None:
                print(self._text(), flush=True)
            return None
        if self.render_mode != "ansi" or self.engine is None:
            return None
        return self._text()

    def _text(self) -> str:
        """The ``"ansi"`` frame."""
        engine, view = self.engine, self.engine.view
        lines = [
            f"t={engine.now / 3600:8.2f} h  queued={len(engine.queue):4d} running={len(engine.running):4d} "
            f"finished={engine.finished}/{len(engine.jobs)}  demand={view.inference_demand} "
            f"loaned={engine.loaned_count} loanable={view.num_loanable} reclaim={view.reclaim_pending}",
        ]
        for pool, ids in (("train", view.training_server_ids), ("infer", view.inference_server_ids)):
            cells = []
            for sid in ids:
                s = engine.servers[sid]
                mark = "L" if s.loaned else ("-" if pool == "infer" else "")
                cells.append(f"{mark}{s.used}/{s.num_gpus}")
            lines.append(f"{pool}: " + " ".join(cells))
        return "\n".join(lines)


class ClusterEnv(LyraClusterEnv):
    """``LyraGym/Cluster-v0``: the agent guides job allocation and loaning.

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
    """``LyraGym/Loaning-v0``: the agent decides borrowing and returning; Lyra allocates jobs.

    ## Description
    As ``Cluster-v0`` without the job slots' actions: admission and elastic
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
    """``LyraGym/Elastic-v0``: the agent guides job allocation; Lyra borrows and reclaims.

    ## Description
    As ``Cluster-v0`` without the loaning actions: borrowing (all loanable
    servers) and reclaiming (by preemption cost) are Lyra's own.

    ## Action Space
    ``MultiDiscrete([5]*K)``: a level per job slot (0 hold; 1-4 admit in level
    order and weight extra workers by 0.5, 1, 2, 4; 2 is neutral).

    Observation, rewards, starting state, episode end and arguments: see
    :class:`LyraClusterEnv`.
    """

    controls_loaning = False
