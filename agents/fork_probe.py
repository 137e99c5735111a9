"""The fork probe (issue 38 item 3): how much one decision's action changes an episode's return.

``python -m lyra_agents.fork_probe --config agents/configs/cluster-generalist.yaml --states 20``

1. Run the expert (the env's ``expert_action()``, the guided heuristic's own neutral choice) over
   an episode (train window drawn by reset seed ``--seed``; the next seed for the next episode
   while more states are wanted) and count its decision steps.
2. Pick ``--states`` decision steps, seeded, without replacement.
3. At each, fork the env (``env.unwrapped.fork()``, :mod:`lyra_gym.envs.snapshot`) once per
   alternative of ``--kinds``, play that alternative for this one step, then the expert to the
   episode's end (termination or truncation), and compare the return from that step on with the
   expert's own:

   - ``random``: a uniformly random valid value in every dimension (masks);
   - ``level``: one dimension with more than one valid value (drawn), moved to another valid value
     (drawn), e.g. one job's level; a state with no such dimension has no choice at all and plays
     the expert's action (its row says ``choice`` 0);
   - ``neutral``: the expert's action itself: the return does not change at all, bit for bit (a
     check of the fork);
   - ``preempt`` (envs with preemption, ``-v2``): the expert's action with one running job's slot
     (drawn among those that may be preempted) set to preempt; a state with none plays the
     expert's action (``choice`` 0). What a vine label of a single preemption says.

The change of return is reported in reward units and, for the ``jct`` reward (return = -(job-seconds
in the system) / ``reward_scale_s``), in job-hours: positive is better (fewer job-hours). Printed:
per kind and over all alternatives, the share of decisions whose return does not change at all
(exact float equality; the engine is deterministic), the spread (min / median / mean / max) of the
change in job-hours over the decisions that changed it, and the share of decisions it made better
(fewer job-hours). ``--out`` writes one CSV row per fork.

Env: ``--config`` (a ``train.py`` config: its ``env_id`` and env keywords; ``--scenario`` one of its
``scenarios``, merged as ``train.py`` merges them), or ``--env`` alone (the env's defaults);
``--env`` with ``--config`` replaces the config's env id (e.g. a ``-v2`` id with the same settings).
``--rule PATH`` makes a preemption rule the expert instead (a ``preempt_search`` rule file or folder,
``pretrained/NAME`` for a shipped one; ``-v2`` envs with job slots, the rule on top of the guide, as
``bc_expert: rule`` imitates it): its episode, and the rule again after each alternative.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

import lyra_gym  # noqa: F401  (registers the LyraGym/ ids)
from lyra_agents.config import TrainConfigError, load_train_config
from lyra_agents.experts import random_masked_action, rule_file_action
from lyra_agents.preempt_rule import RuleError
from lyra_agents.suite import get_suite
from lyra_gym.envs.cluster_env_v2 import LeverClusterEnv
from lyra_gym.envs.levers import PREEMPT
from lyra_gym.errors import LyraGymError, shown

KINDS = ("random", "level", "neutral", "preempt")
#: CSV columns, in order (:class:`Fork`'s fields)
COLUMNS = ("state", "episode_seed", "step", "time_s", "kind", "dimension", "choice", "delta_return",
           "delta_job_hours", "steps_after")
#: the expert's action in an env now (default: the env's own ``expert_action()``)
Expert = Callable[[Any], np.ndarray]


@dataclass(frozen=True)
class Fork:
    """One alternative played at one decision state. ``delta_return``: its return from ``step`` on
    minus the expert's (reward units); ``delta_job_hours``: the same in job-hours saved (NaN unless
    the reward is ``jct``); ``dimension``: the action dimension ``level`` moved (-1 otherwise);
    ``choice``: 1 if some dimension had more than one valid value."""

    state: int
    episode_seed: int
    step: int
    time_s: float
    kind: str
    dimension: int
    choice: int
    delta_return: float
    delta_job_hours: float
    steps_after: int


class ProbeError(LyraGymError):
    """A bad probe argument; the message names it."""


def env_settings(config: str | None, env_id: str | None, scenario: str | None) -> tuple[str, dict[str, Any]]:
    """(env id, ``gymnasium.make`` keywords) from the arguments (module docstring)."""
    if config is None:
        if env_id is None:
            raise ProbeError("--config or --env: give a train.py config file or an env id")
        if scenario is not None:
            raise ProbeError("--scenario: needs --config (a config's scenarios)")
        return env_id, {}
    try:
        cfg = load_train_config(config)
    except OSError as err:
        raise ProbeError(f"--config: cannot read {shown(config)} ({err.strerror or err})") from None
    kwargs = cfg.env_kwargs()
    if scenario is not None:
        if scenario not in cfg.scenarios:
            raise ProbeError(f"--scenario: {shown(scenario)} is not one of the config's scenarios "
                             f"({', '.join(cfg.scenarios) or 'none'})")
        extra = get_suite(cfg.suite).get(scenario).env_kwargs()
        assert extra is not None  # TrainConfig.validate refuses scenarios an env cannot express
        kwargs = {**kwargs, **extra, "trace_seed": cfg.trace_seed}
    return env_id or cfg.env_id, kwargs


def make_env(env_id: str, kwargs: dict[str, Any]) -> Any:
    """The unwrapped env; an unknown id or a keyword the env refuses is a :class:`ProbeError`."""
    try:
        env = gym.make(env_id, **kwargs).unwrapped
    except gym.error.Error as err:
        raise ProbeError(f"--env: {shown(env_id)}: {err}") from None
    except ValueError as err:  # the env's own check of a keyword, naming it
        raise ProbeError(f"{env_id} settings: {err}") from None
    if not hasattr(env, "fork") or not hasattr(env, "expert_action"):
        raise ProbeError(f"--env: {shown(env_id)} is not a LyraGym env with fork() and expert_action()")
    return env


def own_expert(env: Any) -> np.ndarray:
    """The env's own expert: its guide's neutral action."""
    return env.expert_action()


def rule_expert(path: str) -> Expert:
    """The expert of the preemption rule in ``path`` (``--rule``), for an unwrapped ``-v2`` env with job slots."""
    try:
        return rule_file_action(path)
    except RuleError as err:
        raise ProbeError(f"--rule: {err}") from None


def expert_rewards(env: Any, seed: int, expert: Expert = own_expert) -> list[float]:
    """The expert's rewards over the episode of reset seed ``seed``."""
    env.reset(seed=seed)
    rewards: list[float] = []
    while not (env.done or env.episode.truncated):
        rewards.append(float(env.step(expert(env))[1]))
    return rewards


def rest_of_episode(env: Any, first: np.ndarray, then: Callable[[np.ndarray], np.ndarray] | None = None
                    ) -> tuple[float, int]:
    """(return, steps) of ``first`` and then, to the episode's end, the expert or ``then``
    (the action for an observation)."""
    total, steps, action = 0.0, 0, first
    while True:
        obs, r, done, truncated, _ = env.step(action)
        total += float(r)
        steps += 1
        if done or truncated:
            return total, steps
        action = env.expert_action() if then is None else then(obs)


def valid_values(nvec: np.ndarray, masks: np.ndarray) -> list[np.ndarray]:
    """Per dimension of a ``MultiDiscrete(nvec)`` action, its valid values under the flat ``masks``."""
    starts = np.concatenate([[0], np.cumsum(nvec)[:-1]])
    return [np.flatnonzero(masks[start:start + n]) for start, n in zip(starts, nvec)]


def move_one(action: np.ndarray, valid: list[np.ndarray], rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(``action`` with one dimension that has a choice, drawn, moved to another of its ``valid``
    values, drawn uniformly; that dimension). Some dimension must have a choice."""
    open_dims = [d for d, values in enumerate(valid) if len(values) > 1]
    d = open_dims[int(rng.integers(len(open_dims)))]
    others = valid[d][valid[d] != action[d]]
    moved = np.array(action, dtype=np.int64)
    moved[d] = others[int(rng.integers(len(others)))]
    return moved, d


def alternative(env: Any, kind: str, rng: np.random.Generator, own: Expert = own_expert
                ) -> tuple[np.ndarray, int, int]:
    """(action, dimension moved or -1, 1 if some dimension has a choice) of ``kind`` now, around
    the action of expert ``own``."""
    expert = np.asarray(own(env), dtype=np.int64)
    nvec = np.asarray(env.action_space.nvec, dtype=np.int64)
    masks = env.action_masks()
    valid = valid_values(nvec, masks)
    if kind == "preempt":
        if not isinstance(env, LeverClusterEnv) or not env.codec.controls_jobs:
            raise ProbeError("--kinds: preempt needs an env with preemption (a -v2 id with job slots)")
        open_dims = [d for d in range(env.codec.k) if PREEMPT in valid[d] and expert[d] != PREEMPT]
        if not open_dims:
            return expert, -1, 0
        d = open_dims[int(rng.integers(len(open_dims)))]
        action = expert.copy()
        action[d] = PREEMPT
        return action, d, 1
    choice = int(any(len(values) > 1 for values in valid))
    if kind == "neutral" or (kind == "level" and not choice):
        return expert, -1, choice
    if kind == "random":
        return random_masked_action(rng, nvec, masks), -1, choice
    action, d = move_one(expert, valid, rng)
    return action, d, choice


def job_hours_per_unit(env: Any) -> float:
    """Job-hours per unit of return (the ``jct`` reward alone), else NaN."""
    weights = dict(env.reward_weights)
    return env.reward_scale_s / 3600.0 if weights == {"jct": 1.0} else math.nan


def probe(env: Any, states: int, seed: int, kinds: Sequence[str], expert: Expert = own_expert) -> list[Fork]:
    """The forks of ``states`` decision states (module docstring), each alternative of ``kinds``
    around ``expert``'s episode, ``expert`` to the end after each."""
    rng = np.random.default_rng(seed)
    hours = job_hours_per_unit(env)
    forks: list[Fork] = []
    episode_seed, state, empty = seed, 0, 0
    while state < states:
        rewards = expert_rewards(env, episode_seed, expert)
        empty = 0 if rewards else empty + 1
        if empty >= 100:
            raise ProbeError(f"--seed: 100 episodes in a row (seeds to {episode_seed}) had no decision to make")
        chosen = sorted(rng.choice(len(rewards), size=min(states - state, len(rewards)), replace=False).tolist())
        env.reset(seed=episode_seed)
        for step in range(len(rewards)):
            if chosen and step == chosen[0]:
                chosen.pop(0)
                expert_return = sum(rewards[step:], 0.0)  # summed in the order the fork's return is
                for kind in kinds:
                    fork = env.fork()
                    action, dimension, choice = alternative(fork, kind, rng, expert)
                    total, steps = rest_of_episode(fork, action, functools.partial(_acting_in, fork, expert))
                    delta = total - expert_return
                    forks.append(Fork(state, episode_seed, step, float(env.engine.now), kind, dimension, choice,
                                      delta, delta * hours, steps))
                state += 1
            env.step(expert(env))
        episode_seed += 1
    return forks


def _acting_in(env: Any, expert: Expert, _obs: np.ndarray) -> np.ndarray:
    """``expert``'s action in ``env`` (:func:`rest_of_episode`'s ``then``: the observation unused)."""
    return expert(env)


def summary(forks: Sequence[Fork], kinds: Sequence[str]) -> list[str]:
    """Lines: per kind and over all, the share with no effect, the share that lowered the job-hours
    (better), and the spread (min / median / mean / max) of the changes."""
    lines = [f"{'kind':<8} {'forks':>5} {'no effect':>9} {'better':>6} {'min job-h':>10} {'median':>8} {'mean':>8} "
             f"{'max job-h':>10}"]
    for kind in (*dict.fromkeys(kinds), "all"):
        rows = [f for f in forks if kind in ("all", f.kind)]
        if not rows:
            continue
        changed = [f.delta_job_hours if not math.isnan(f.delta_job_hours) else f.delta_return
                   for f in rows if f.delta_return != 0.0]
        spread = (f"{min(changed):10.2f} {float(np.median(changed)):8.2f} {float(np.mean(changed)):8.2f} "
                  f"{max(changed):10.2f}" if changed else f"{'-':>10} {'-':>8} {'-':>8} {'-':>10}")
        shares = (f"{sum(f.delta_return == 0.0 for f in rows) / len(rows):9.0%} "
                  f"{sum(f.delta_return > 0.0 for f in rows) / len(rows):6.0%}")
        lines.append(f"{kind:<8} {len(rows):5d} {shares} {spread}")
    return lines


def write_csv(path: Path, forks: Sequence[Fork]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for fork in forks:
            writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in asdict(fork).items()})


def read_csv(path: Path) -> list[Fork]:
    """The forks of a CSV :func:`write_csv` wrote; ``ProbeError`` naming the file and row otherwise."""
    kinds: tuple[Callable[[str], Any], ...] = (int, int, int, float, str, int, int, float, float, int)
    types = dict(zip(COLUMNS, kinds))
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            if tuple(reader.fieldnames or ()) != COLUMNS:
                raise ProbeError(f"{shown(str(path))}: not a fork-probe CSV (columns {', '.join(COLUMNS)})")
            return [Fork(**{k: types[k](row[k]) for k in COLUMNS}) for row in reader]
    except OSError as err:
        raise ProbeError(f"{shown(str(path))}: {err.strerror}") from None
    except (TypeError, ValueError) as err:
        raise ProbeError(f"{shown(str(path))}: a row is not a fork ({err})") from None


def summary_table(labelled: Sequence[tuple[str, Sequence[Fork]]]) -> str:
    """Markdown: per CSV (label) and kind, forks, share with no effect, share better, min / median /
    mean / max change."""
    lines = ["| probe | kind | forks | no effect | better | min job-h | median | mean | max job-h |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, forks in labelled:
        for row in summary(forks, [f.kind for f in forks])[1:]:
            kind, count, share, better, *spread = row.split()
            lines.append(f"| {label} | {kind} | {count} | {share} | {better} | " + " | ".join(spread) + " |")
    return "\n".join(lines)


def parse_kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ProbeError(f"--kinds: {shown(bad[0] if bad else text)} is not a kind (known: {', '.join(KINDS)})")
    return kinds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lyra_agents.fork_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="a train.py config YAML (its env_id and env settings)")
    parser.add_argument("--env", help="env id (replaces the config's; alone: the env's default settings)")
    parser.add_argument("--scenario", help="one of the config's scenarios (default: the config's own settings)")
    parser.add_argument("--states", type=int, default=20, help="decision states to fork at (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="reset seed of the first episode and the draws")
    parser.add_argument("--kinds", default="random,level", help=f"alternatives per state, comma-separated, "
                        f"repeats allowed ({', '.join(KINDS)}; default random,level)")
    parser.add_argument("--rule", metavar="PATH", help="the expert is this preemption rule (a preempt_search rule "
                        "file or folder; pretrained/NAME), not the guide's neutral action (-v2 envs with job slots)")
    parser.add_argument("--out", type=Path, help="CSV file: one row per fork")
    parser.add_argument("--summarize", nargs="+", metavar="[LABEL=]CSV",
                        help="print the Markdown summary of probe CSVs written by --out, and run nothing")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.summarize:
        try:
            labelled = []
            for spec in args.summarize:
                label, sep, name = spec.partition("=")
                labelled.append((label if sep else Path(spec).stem, read_csv(Path(name if sep else spec))))
        except ProbeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(summary_table(labelled))
        return 0
    try:
        if args.states < 1:
            raise ProbeError(f"--states: must be >= 1, got {args.states}")
        if args.seed < 0:
            raise ProbeError(f"--seed: must be >= 0, got {args.seed}")
        kinds = parse_kinds(args.kinds)
        if args.out is not None and not args.out.parent.is_dir():
            raise ProbeError(f"--out: folder {shown(str(args.out.parent))} does not exist")
        env_id, kwargs = env_settings(args.config, args.env, args.scenario)
        env = make_env(env_id, kwargs)
        expert: Expert = own_expert
        if args.rule is not None:
            if not isinstance(env, LeverClusterEnv) or not env.codec.controls_jobs:
                raise ProbeError(f"--rule: a preemption rule acts in -v2 envs with job slots, not {shown(env_id)}")
            expert = rule_expert(args.rule)
        forks = probe(env, args.states, args.seed, kinds, expert)
    except (ProbeError, TrainConfigError, LyraGymError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    around = f", around the rule {args.rule}" if args.rule else ""
    print(f"fork probe: {env_id}, {args.states} states from seed {args.seed}, kinds {','.join(kinds)}{around}")
    print("\n".join(summary(forks, kinds)))
    if args.out is not None:
        write_csv(args.out, forks)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
