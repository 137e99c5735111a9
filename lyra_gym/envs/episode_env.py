"""What the guided environments and ``Alloc-v1`` share: the arguments, reset, the end of a step,
info and rendering, over an :class:`~lyra_gym.envs.episode.Episode` each reset builds.

A subclass sets its spaces (:meth:`EpisodeEnv._init_spaces`), observes (``_observe``: sets
``obs`` and ``_masks``) and turns an action into the plans it runs in ``step``; see
:class:`~lyra_gym.envs.cluster_env.LyraClusterEnv` for the arguments and the episode's rules.
"""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np

from lyra_gym.envs.episode import Episode, EpisodeSource, check_number
from lyra_gym.envs.observation import ObservationBuilder
from lyra_gym.envs.render import cluster_text, episode_frame, episode_placements, show_human
from lyra_gym.envs.rewards import RewardSpec
from lyra_gym.envs.snapshot import ForkMixin
from lyra_gym.envs.truncation import FinalMetricsMixin, ResetNeeded
from lyra_gym.envs.windows import Window
from lyra_gym.model.config import SimConfig
from lyra_gym.sim.engine import Engine

#: Largest number of job slots K and loaned-server slots M (the observation grows with both).
MAX_SLOTS = 4096
#: Largest number of borrow levels B.
MAX_BORROW_LEVELS = 1024


class EpisodeEnv(ForkMixin, FinalMetricsMixin, gym.Env[np.ndarray, Any]):
    """Base of the LyraGym environments (the Gymnasium plumbing around an :class:`Episode`);
    ``fork()`` and ``final_metrics()``: :mod:`lyra_gym.envs.snapshot`, :mod:`lyra_gym.envs.truncation`."""

    metadata = {"render_modes": ["ansi", "rgb_array", "human"], "render_fps": 4}
    obs: np.ndarray
    _masks: np.ndarray
    builder: ObservationBuilder  # set by _init_spaces

    def __init__(
        self,
        trace: str = "env-14d",
        trace_seed: int = 0,
        config: SimConfig | Mapping | str | None = None,
        profiles: str | None = None,
        window_s: float = 12 * 3600.0,
        test_fraction: float = 0.2,
        reward: RewardSpec = "jct",
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
        check_number("num_job_slots", num_job_slots, integer=True, lo=1, hi=MAX_SLOTS)
        check_number("num_server_slots", num_server_slots, integer=True, lo=0, hi=MAX_SLOTS)
        check_number("borrow_levels", borrow_levels, integer=True, lo=1, hi=MAX_BORROW_LEVELS)
        self.source = EpisodeSource(trace, trace_seed, config, profiles, window_s, test_fraction, reward,
                                    reward_scale_s, heuristic, max_steps, warmup_s)
        self.k, self.m, self.b = int(num_job_slots), int(num_server_slots), int(borrow_levels)
        self.render_mode = render_mode
        self._human: dict[str, Any] = {}  # "human": the window (lyra_gym.envs.render.show_human)
        self.episode: Episode | None = None
        self._init_spaces()

    def _init_spaces(self) -> None:
        """Set ``observation_space``, ``action_space`` and what observing and decoding need."""
        raise NotImplementedError

    # ------------------------------------------------------------------ what every episode is drawn from
    trace = property(lambda self: self.source.trace, doc="the trace's jobs (list of JobSpec)")
    windows = property(lambda self: self.source.windows, doc="the train and test windows (WindowSampler)")
    sim_config = property(lambda self: self.source.sim_config, doc="the cluster and engine settings")
    profiles = property(lambda self: self.source.profiles, doc="the job profiles (ProfileSet)")
    reward_weights = property(lambda self: self.source.reward_weights, doc="reward term -> weight")
    reward_scale_s = property(lambda self: self.source.reward_scale_s, doc="seconds per unit of reward")
    heuristic_name = property(lambda self: self.source.heuristic_name, doc="the guided scheduler's name")
    max_steps = property(lambda self: self.source.max_steps, doc="truncation, steps")

    @property
    def observation_names(self) -> tuple[str, ...]:
        """One name per observation entry, in order: ``job[i].<feature>`` (K job slots),
        ``cluster.<feature>``, ``server[j].<feature>`` (M loaned-server slots); the builder
        lays out its values by the same names (``docs/observations.md`` says what each means)."""
        return self.builder.names

    # ------------------------------------------------------------------ the current episode
    @property
    def engine(self) -> Engine | None:
        """The current episode's engine (None before the first reset)."""
        return self.episode.engine if self.episode is not None else None

    @property
    def window(self) -> Window | None:
        """The current episode's window (None before the first reset)."""
        return self.episode.window if self.episode is not None else None

    @property
    def invalid_actions_total(self) -> int:
        """Counted no-ops of the current episode."""
        return self.episode.invalid_actions_total if self.episode is not None else 0

    heuristic = property(lambda self: self._current().heuristic, doc="the current episode's guided scheduler")
    done = property(lambda self: self._current().done, doc="whether the current episode is over")
    steps = property(lambda self: self._current().steps, doc="steps taken in the current episode")

    def _current(self) -> Episode:
        if self.episode is None:
            raise AttributeError("no episode yet: call reset() first")
        return self.episode

    def _started(self, method: str) -> Episode:
        """The current episode, or :class:`ResetNeeded` naming ``method`` before the first reset."""
        if self.episode is None:
            raise ResetNeeded(f"call reset() before {method}")
        return self.episode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        split, window = self.source.parse_options(options)
        super().reset(seed=seed)
        self.episode = episode = self.source.start(self.np_random, split, window)
        if self.render_mode in ("rgb_array", "human"):
            episode_placements(episode)  # start sampling where every job runs (the Gantt picture)
        self._observe(episode)
        if self.render_mode == "human":
            self.render()
        return self.obs, self._info(0)

    def _observe(self, episode: Episode) -> None:
        """Set ``obs`` and ``_masks`` for the current decision point of ``episode`` (the current one)."""
        raise NotImplementedError

    def _check_can_step(self) -> Episode:
        """The current episode, or :class:`ResetNeeded` when there is none to step (before the first
        reset, or after the episode terminated or was truncated)."""
        episode = self._started("step()")
        if episode.done or episode.truncated:
            raise ResetNeeded("step(): the episode is over (it terminated, was truncated at max_steps, or its "
                              "window had no decision to make); call reset()")
        return episode

    def _end_step(self, episode: Episode, r: float, invalid: int, observed: bool = False):
        """Count the step, charge what an early end leaves, observe (unless ``observed``: the
        current decision point was observed already); the step's 5-tuple."""
        r, truncated = episode.end_step(r, invalid)
        if not observed:
            self._observe(episode)
        info = self._info(invalid)
        if episode.done or truncated:
            info["final_metrics"] = episode.final_metrics()
        if self.render_mode == "human":
            self.render()
        return self.obs, r, episode.done, truncated, info

    def _info(self, invalid: int) -> dict[str, Any]:
        return self._current().info(invalid)

    def action_masks(self) -> np.ndarray:
        """Valid values of every action dimension, concatenated (sb3-contrib MaskablePPO);
        :class:`ResetNeeded` before the first reset."""
        self._started("action_masks()")
        return self._masks.copy()

    # ------------------------------------------------------------------ rendering
    def render(self) -> Any:
        """The frame of ``render_mode`` (see "Rendering"): a str, an H x W x 3 uint8 array, or None
        (``"human"``, or no render mode)."""
        engine = self.engine
        if self.render_mode == "rgb_array":
            return episode_frame(self.episode, self.sim_config)
        if self.render_mode == "human":
            if self.episode is not None:
                show_human(self.episode, self._human)
            return None
        if self.render_mode != "ansi" or engine is None:
            return None
        return cluster_text(engine)


__all__ = ["EpisodeEnv", "MAX_BORROW_LEVELS", "MAX_SLOTS", "ResetNeeded"]
