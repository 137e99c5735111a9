"""Where the envs of a masked-PPO round run: in this process, or spread over worker processes.

:class:`LocalMembers` steps every env here, one after the other (the plain form).
:class:`ProcessMembers` gives env ``i`` of a round to worker ``i % workers`` (each a process with
its own copies of the envs, built from the config as here) and steps the workers' shares at the
same time; the learner waits for all of them, then chooses the next actions. Both answer the same
calls with the same values: an env's episode depends only on its reset seed and the actions it is
given, so a run is bit for bit the same either way (``tests/agents/test_members.py``).

The learner (:meth:`lyra_agents.masked_ppo.MaskedPPO.collect`) asks two things:

- :meth:`reset` ``(specs)``: per group a :class:`GroupSpec` (slot, trace seed, env keywords, reset
  seed); every one of its ``group_size`` members is reset with that seed. One :class:`Start` per
  member, numbered in that order (the member's index in the round).
- :meth:`step` ``(moves)``: ``(index, action)`` for the members still playing; one :class:`Outcome`
  each, in the same order.

Masks come back with each observation (None once an episode is over). ``cpu_last``: the CPU
seconds the workers spent on the last call, together (0 in this process, where the learner's own
``time.process_time`` counts them), so the learner's ``time/*_cpu_s`` stay whole; ``cpu_spent``:
the workers' CPU seconds over every call. With ``vec_env: subproc`` a
worker's error is re-raised here with its traceback. Worker processes start with ``forkserver``
where the platform has it (as SB3's ``SubprocVecEnv``), else ``spawn``, so a script that trains
with them needs the ``if __name__ == "__main__":`` guard (``train.py`` has it); they are daemons,
closed by :meth:`close` (the learner's ``close``) or at exit.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import gymnasium as gym
import numpy as np

from lyra_agents.config import TrainConfig
from lyra_agents.experts import ExpertRule
from lyra_agents.trajectory import action_masks
from lyra_gym.envs.learner_extras import LearnerExtrasObservation


def make_member(cfg: TrainConfig, kwargs: dict[str, Any], sibling: gym.Env | None = None) -> gym.Env:
    """One training env: learner extras as configured, ``bc_expert`` as its ``expert_action``.
    ``sibling``: a member of the same group (same keywords) built already; the new one is its
    fork, so the two share the trace, its windows and the warm start of each reset on one seed
    (:meth:`lyra_gym.envs.episode.EpisodeSource.start`), not built or simulated twice."""
    env: gym.Env = gym.make(cfg.env_id, **kwargs) if sibling is None else sibling.unwrapped.fork()  # type: ignore[attr-defined]
    if cfg.observation_extras:
        env = LearnerExtrasObservation(env)
    if cfg.bc_expert != "heuristic":
        env = ExpertRule(env, cfg.bc_expert, cfg.bc_rule)
    return env


def make_group(cfg: TrainConfig, kwargs: dict[str, Any]) -> list[gym.Env]:
    """The ``group_size`` members of one group: the first built, the others its forks (:func:`make_member`)."""
    first = make_member(cfg, kwargs)
    return [first] + [make_member(cfg, kwargs, first) for _ in range(cfg.group_size - 1)]


class GroupSpec(NamedTuple):
    """One group of a round: ``slot`` (scenario) on ``trace_seed``, built with ``kwargs``, reset with ``reset_seed``."""

    slot: int
    trace_seed: int
    kwargs: dict[str, Any]
    reset_seed: int


@dataclass
class Start:
    """A member after its reset: observation, simulated time (s), whether nothing is left to decide, masks."""

    obs: np.ndarray
    time_s: float
    done: bool
    masks: np.ndarray | None


@dataclass
class Outcome:
    """A member after one step (``env.step``'s values, the info's time and final metrics, the next masks)."""

    obs: np.ndarray
    reward: float
    terminated: bool
    truncated: bool
    time_s: float
    metrics: dict[str, Any] | None
    masks: np.ndarray | None


class _Envs:
    """The envs one process steps: ``env_of(spec, member)`` gives (builds or reuses) each."""

    def __init__(self, env_of: Callable[[GroupSpec, int], gym.Env]) -> None:
        self.env_of = env_of
        self.current: dict[int, gym.Env] = {}  # the round's members by index

    def reset(self, members: Sequence[tuple[int, GroupSpec, int]]) -> list[Start]:
        """``(index, spec, member)`` each: build or reuse that env and reset it."""
        self.current = {}
        starts = []
        for index, spec, member in members:
            env = self.current[index] = self.env_of(spec, member)
            obs, info = env.reset(seed=spec.reset_seed)
            done = bool(env.unwrapped.done)  # type: ignore[attr-defined]
            starts.append(Start(obs, float(info["time_s"]), done, None if done else action_masks(env)))
        return starts

    def step(self, moves: Sequence[tuple[int, np.ndarray]]) -> list[Outcome]:
        outcomes = []
        for index, action in moves:
            env = self.current[index]
            obs, reward, terminated, truncated, info = env.step(action)
            over = terminated or truncated
            outcomes.append(Outcome(obs, float(reward), bool(terminated), bool(truncated), float(info["time_s"]),
                                    info.get("final_metrics") if over else None,
                                    None if over else action_masks(env)))
        return outcomes


def _member_list(specs: Sequence[GroupSpec], group_size: int) -> list[tuple[int, GroupSpec, int]]:
    return [(g * group_size + m, spec, m) for g, spec in enumerate(specs) for m in range(group_size)]


class LocalMembers:
    """Every env of the round in this process (module docstring): ``group_members(slot, trace_seed,
    kwargs)`` gives a group's envs (the learner's own, which its imitation start and the vine use too)."""

    def __init__(self, cfg: TrainConfig, group_members: Callable[[int, int, dict[str, Any]], list[gym.Env]]) -> None:
        self.group_size = cfg.group_size
        self._envs = _Envs(lambda spec, m: group_members(spec.slot, spec.trace_seed, spec.kwargs)[m])
        self.cpu_last = 0.0  # the learner's process time counts these envs' work already

    def reset(self, specs: Sequence[GroupSpec]) -> list[Start]:
        return self._envs.reset(_member_list(specs, self.group_size))

    def step(self, moves: Sequence[tuple[int, np.ndarray]]) -> list[Outcome]:
        return self._envs.step(moves)

    def envs(self, indices: Sequence[int]) -> list[gym.Env]:
        """The round's members ``indices`` (a learner's ``choose`` may read them, e.g. their expert)."""
        return [self._envs.current[i] for i in indices]

    def close(self) -> None:
        """Nothing to do: the envs are the learner's, closed by it."""


def _serve(conn: Any, cfg: TrainConfig) -> None:
    """A worker: answer ``(command, payload)`` messages until ``close`` (or the pipe closes)."""
    built: dict[tuple[int, int, int], gym.Env] = {}

    def env_of(spec: GroupSpec, member: int) -> gym.Env:
        key = (spec.slot, spec.trace_seed, member)
        if key not in built:
            sibling = next((env for (slot, seed, _), env in built.items()
                            if slot == spec.slot and seed == spec.trace_seed), None)
            built[key] = make_member(cfg, {**spec.kwargs, "trace_seed": spec.trace_seed}, sibling)
        return built[key]

    envs = _Envs(env_of)
    try:
        while True:
            start = time.process_time()  # waiting costs none: the spent CPU is reading, the work, writing
            try:
                command, payload = conn.recv()
            except EOFError:
                return
            try:
                if command == "close":
                    conn.send(("ok", None))
                    return
                answer = envs.reset(payload) if command == "reset" else envs.step(payload)
                conn.send(("ok", answer, time.process_time() - start))  # (writing this, not counted)
            except Exception:  # sent back whole with its traceback, raised in the learner
                conn.send(("error", traceback.format_exc(), 0.0))
    finally:
        for env in built.values():
            env.close()
        conn.close()


class ProcessMembers:
    """The round's envs spread over ``workers`` processes, member ``i`` on worker ``i % workers``."""

    def __init__(self, cfg: TrainConfig, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers: must be >= 1, got {workers}")
        self.group_size = cfg.group_size
        self.cpu_last = self.cpu_spent = 0.0  # the workers' CPU s: the last call's, all calls'
        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        context = mp.get_context(method)
        self._pipes, self._processes = [], []
        for _ in range(workers):
            here, there = context.Pipe()
            process = context.Process(target=_serve, args=(there, cfg), daemon=True)  # type: ignore[attr-defined]
            process.start()
            there.close()
            self._pipes.append(here)
            self._processes.append(process)

    def _ask(self, command: str, shares: list[list[Any]]) -> list[list[Any]]:
        """Send each worker its share, then gather every answer (workers with none are not asked)."""
        asked = [w for w, share in enumerate(shares) if share]
        self.cpu_last = 0.0
        for w in asked:
            try:
                self._pipes[w].send((command, shares[w]))
            except OSError:  # BrokenPipeError: the worker is gone
                raise self._stopped(w) from None
        answers: list[list[Any]] = [[] for _ in shares]
        for w in asked:
            try:
                status, value, cpu = self._pipes[w].recv()
            except (EOFError, OSError):
                raise self._stopped(w) from None
            if status == "error":
                raise RuntimeError(f"env worker {w} failed:\n{value}")
            answers[w] = value
            self.cpu_last += cpu
        self.cpu_spent += self.cpu_last
        return answers

    def _stopped(self, w: int) -> RuntimeError:
        process = self._processes[w]
        process.join(timeout=1)
        return RuntimeError(f"env worker {w} (pid {process.pid}) stopped (exit code {process.exitcode})")

    def _round_trip(self, command: str, items: Sequence[tuple]) -> list[Any]:
        """Each item (its member's index first) to worker ``index % workers``; the answers back in
        the items' order."""
        shares: list[list[Any]] = [[] for _ in self._pipes]
        for item in items:
            shares[item[0] % len(shares)].append(item)
        cursors = [iter(answers) for answers in self._ask(command, shares)]
        return [next(cursors[item[0] % len(cursors)]) for item in items]

    def reset(self, specs: Sequence[GroupSpec]) -> list[Start]:
        return self._round_trip("reset", _member_list(specs, self.group_size))

    def step(self, moves: Sequence[tuple[int, np.ndarray]]) -> list[Outcome]:
        return self._round_trip("step", moves)

    def envs(self, indices: Sequence[int]) -> None:
        """None: the members' envs live in the workers."""
        return None

    def close(self) -> None:
        for pipe, process in zip(self._pipes, self._processes):
            try:
                pipe.send(("close", None))
                pipe.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
            pipe.close()
        self._pipes, self._processes = [], []
