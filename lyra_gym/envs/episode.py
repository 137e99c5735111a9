"""The episode runner the environments compose: one trace window's engine, from reset to the end.

:class:`EpisodeSource` is what every episode of one environment is drawn from (the trace and
its train / test windows, the cluster config, the profiles, the guided heuristic's name, the
reward and the truncation); :meth:`EpisodeSource.start` builds an :class:`Episode` on reset.
An :class:`Episode` owns the engine of one window: it warms up with the heuristic, runs a plan
to the next decision point and pays the span (the reward), counts steps, says when the episode
terminates or is truncated, and gives the final metrics and the info items every environment
shares. The guided environments (``cluster_env.py``) and ``Alloc-v1`` (``alloc_env.py``) differ
only in how an action becomes the plans an episode runs.
"""

from __future__ import annotations

import copy
import os
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from lyra_gym.envs.rewards import RewardSpec, jobs_in_system, span_reward
from lyra_gym.envs.snapshot import shared_memo
from lyra_gym.envs.windows import Window, WindowSampler
from lyra_gym.model.config import SimConfig, config_from_dict, load_config
from lyra_gym.model.demand import number_problem
from lyra_gym.model.profiles import ProfileSet, builtin_profiles, load_profiles
from lyra_gym.run.metrics import summarize
from lyra_gym.run.placements import PlacementRecorder
from lyra_gym.run.simulate import build_engine
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.engine import Engine
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.workloads.trace import load_trace
from lyra_gym.workloads.tracegen import PRESETS, generate_trace

#: The keys ``reset(options=...)`` understands.
RESET_OPTIONS = ("split", "window")


def check_number(name: str, value: object, **rule: Any) -> None:
    """``ValueError`` naming the constructor argument if ``value`` breaks ``rule``
    (:func:`lyra_gym.model.demand.number_problem`'s keywords)."""
    problem = number_problem(value, **rule)
    if problem is not None:
        raise ValueError(f"{name}: {problem}")


def resolve_config(config: SimConfig | Mapping | str | os.PathLike | None) -> SimConfig:
    """``config`` as a :class:`SimConfig` (the defaults for None, a file path loaded)."""
    if config is None:
        return SimConfig()
    if isinstance(config, SimConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        return load_config(config)
    if not isinstance(config, Mapping):
        raise ValueError(f"config: must be a SimConfig, a mapping or a file path, got {type(config).__name__}")
    return config_from_dict(config)


def _guided_heuristic(heuristic: object) -> str:
    """``heuristic`` checked: the registry name of a scheduler with ``decide_guided``."""
    if not isinstance(heuristic, str):
        raise ValueError(f"heuristic: must be a scheduler name, got {heuristic!r}")
    try:
        guided = registry.make(heuristic)  # fail now on an unknown name
    except KeyError as err:
        raise ValueError(f"heuristic: {err.args[0] if err.args else err}") from None
    if type(guided).decide_guided is Scheduler.decide_guided:
        raise ValueError(f"heuristic: scheduler {heuristic!r} cannot be guided by an agent (it has no "
                         "decide_guided; e.g. 'lyra')")
    return heuristic


class EpisodeSource:
    """What the episodes of one environment are drawn from; the environments' arguments of
    the same names (see :class:`~lyra_gym.envs.cluster_env.LyraClusterEnv`), each checked here
    (``ValueError`` naming it, or the config's ``ConfigError``)."""

    def __init__(self, trace: str | os.PathLike, trace_seed: int, config: SimConfig | Mapping | str | None,
                 profiles: str | None, window_s: float, test_fraction: float, reward: RewardSpec,
                 reward_scale_s: float, heuristic: str, max_steps: int, warmup_s: float) -> None:
        check_number("max_steps", max_steps, integer=True, lo=1)
        check_number("trace_seed", trace_seed, integer=True, lo=0)
        check_number("window_s", window_s, lo=0.0, lo_open=True)
        check_number("test_fraction", test_fraction, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        check_number("reward_scale_s", reward_scale_s, lo=0.0, lo_open=True)
        check_number("warmup_s", warmup_s, lo=0.0)
        self.heuristic_name = _guided_heuristic(heuristic)
        if profiles is not None and not isinstance(profiles, (str, os.PathLike)):
            raise ValueError(f"profiles: must be a file path or None, got {profiles!r}")
        if not isinstance(trace, (str, os.PathLike)):
            raise ValueError(f"trace: must be a preset name ({', '.join(PRESETS)}) or a CSV path, got {trace!r}")
        self.max_steps = int(max_steps)
        self.trace = generate_trace(trace, int(trace_seed)) if trace in PRESETS else load_trace(trace)
        self.sim_config = resolve_config(config)
        if profiles is not None:
            self.sim_config = replace(self.sim_config, profiles=profiles)
        self.profiles: ProfileSet = load_profiles(profiles) if profiles else builtin_profiles()
        self.windows = WindowSampler(self.trace, window_s, test_fraction, warmup_s=float(warmup_s))
        self.reward_scale_s = float(reward_scale_s)
        self.span_reward = span_reward(reward, self.reward_scale_s)
        self.reward_weights = self.span_reward.weights
        self._fresh: tuple[Window, Episode, tuple] | None = None  # the last start: window, episode, its mark

    def parse_options(self, options: Mapping[str, Any] | None) -> tuple[str, int]:
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

    def start(self, rng: np.random.Generator, split: str, window: int) -> Episode:
        """A new episode on test window ``window``, or (``split`` "train") a train window drawn by ``rng``.

        The last episode started is kept while it is unplayed: a start on the same window (the
        envs that share this source, e.g. a group's forks, reset with one seed) copies it instead
        of simulating the warm start again (the same state: :meth:`Episode.mark` unmoved)."""
        chosen = self.windows.test(window) if split == "test" else self.windows.train(rng)
        fresh = self._fresh
        if fresh is not None and fresh[0] == chosen and fresh[1].mark() == fresh[2]:
            return copy.deepcopy(fresh[1], shared_memo(self))
        heuristic = registry.make(self.heuristic_name)
        engine = build_engine(chosen.jobs(self.trace), heuristic, self.sim_config, chosen.seed, self.profiles)
        episode = Episode(self, engine, heuristic, chosen)
        self._fresh = (chosen, episode, episode.mark())
        return episode


class Episode:
    """One episode: the engine of ``window``'s jobs, run from its first decision point.

    The heuristic itself (the instance the agent then guides) runs every decision point before
    the window's start (warm start, ``warmup_s``); the agent's first decision is the first one at
    or after it. ``done``: nothing more can happen (every job finished, or no job runs, nothing is
    ahead and the last decision changed nothing).
    """

    def __init__(self, source: EpisodeSource, engine: Engine, heuristic: Scheduler, window: Window) -> None:
        self.source, self.engine, self.heuristic, self.window = source, engine, heuristic, window
        self.training_gpus = max(1, source.sim_config.cluster.training_gpus)  # the reward's usage term
        self.span_reward = source.span_reward
        self.steps = 0
        self.truncated = False  # the last step reached max_steps: no step more before a reset
        self.invalid_actions_total = 0
        self.plans = 0  # plans submitted by run(), the heuristic's no-op ticks included
        self.recorder: PlacementRecorder | None = None  # set to sample placements after each plan (render)
        engine.begin()
        self.done = not engine.next_decision()
        start = window.start_s
        while not self.done and engine.now < start:
            engine.submit(heuristic.decide(engine.view))
            self.done = not engine.next_decision()

    def mark(self) -> tuple[float, int, int, int, bool]:
        """What playing the episode moves (simulated time, the engine's change count, plans, steps,
        a placement recorder): equal to its mark at the start while nothing was played."""
        engine = self.engine
        return engine.now, engine.state_version, self.plans, self.steps, self.recorder is None

    def run(self, plan: Plan) -> float:
        """Submit ``plan`` and run to the next decision point; the reward of the span."""
        engine = self.engine
        self.plans += 1
        counts = engine.counts
        t0, preempt0 = engine.now, counts["preemptions"]
        engine.submit(plan)
        if self.recorder is not None:
            self.recorder.record()
        queued = len(engine.queue)
        in_system = queued + len(engine.running)
        usage = engine.accounting.used_training / self.training_gpus
        span = self.span_reward
        jobs = jobs_in_system(engine) if span.needs_jobs else None  # only for terms that read them (slowdown)
        self.done = not engine.next_decision()
        # reward(weights, StepOutcome(...), scale), computed faster
        return span(engine.now - t0, in_system, queued, usage, counts["preemptions"] - preempt0, jobs)

    def end_step(self, r: float, invalid: int) -> tuple[float, bool]:
        """Count a step (and its ``invalid`` sub-actions or dimensions); ``(reward, truncated)``,
        the reward ``r`` plus what an early end leaves."""
        engine = self.engine
        self.steps += 1
        self.invalid_actions_total += invalid
        left = len(engine.jobs) - engine.finished
        if self.done and left:
            # Jobs left unfinished when nothing more can happen (e.g. held by the agent) are
            # charged as if they waited one more window, so ending an episode early never pays.
            r += self.span_reward.leftover(engine, self.source.windows.length_s, left)
        self.truncated = not self.done and self.steps >= self.source.max_steps
        return r, self.truncated

    def final_metrics(self) -> dict[str, Any]:
        """The episode's metrics in the keys of ``metrics.json`` (the engine is finished first)."""
        self.engine.finish()
        return summarize(self.engine, invalid_actions=self.invalid_actions_total)

    def info(self, invalid: int) -> dict[str, Any]:
        """The info items every environment gives; ``invalid`` this step's counted no-ops."""
        engine, window = self.engine, self.window
        counts = engine.counts
        return {
            "time_s": engine.now,
            "window": window.index,
            "split": window.split,
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


__all__ = ["Episode", "EpisodeSource", "RESET_OPTIONS", "check_number", "resolve_config"]
