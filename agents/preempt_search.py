"""Policy search over a linear preemption rule on ``-v2`` envs (issue 38): the cross-entropy method.

    python -m lyra_agents.preempt_search search --config agents/configs/cluster-v2-preempt-search.yaml --out DIR
    python -m lyra_agents.preempt_search evaluate DIR/rule.json --scenarios overload --trace-seeds 9 --windows 3 \
        --baselines lyra,lyra-backfill,pollux+loan --json FILE
    lyra-gym compare --policies lyra-backfill,rule:DIR --trace traces/default.csv   # any scheduler command

**The policy** reads the observation and the masks only. Every dimension takes the guide's own
(neutral) value, except one: among the running job slots where PREEMPT is valid, the one of highest
score ``s_j = w . phi_j + bias`` is preempted if ``s_j > 0`` and some job slot is queued. Its
features (:data:`FEATURES`; observation version 2, :mod:`lyra_gym.envs.observation`):

- ``remaining_gap``: its ``remaining_est`` minus the least ``remaining_est`` of the queued slots
  (log-times: how many times longer it would run than the shortest waiting job);
- ``attained_service``, ``preempt_cost``, ``preemptions``, ``workers``: the slot's own features;
- optionally (``--features``), how contended the cluster is, the same for every slot:
  ``queued_jobs`` (log of the queue's length) and ``queue_head_wait`` (log-time the longest-waiting
  job has waited). With them the rule can hold back where queues are short.

So ``w = (1, 0, 0, 0, 0)``, ``bias = -log-time ratio`` is "preempt the longest running job when a
job that much shorter waits" (shortest remaining first, as SRPT); ``bias`` very negative is the
guide itself. The form is a choice (an assumption, found by asking which of the heuristics' levers
the learned networks misuse: they preempt without choosing whom); the five weights and the bias are
learned.

**The search** (cross-entropy method: Rubinstein and Kroese, 2004; with added noise as Szita and
Lorincz, Neural Computation 2006) keeps a Gaussian over the weights and bias. Each generation draws
``population`` of them, plays each on the same ``windows`` training episodes (common random
numbers: the same reset seeds and traces, drawn anew each generation from the config's training
``trace_seeds`` and its ``scenarios``), and moves the mean and standard deviation to the best
``elite`` of them (highest objective), plus ``noise``. The rule written is the final mean. The env
is the config's (its ``reward``: the return it would train a network on), played in ``workers``
processes. The objective (``--objective``) is the mean return (``return``: long episodes and
crowded scenarios weigh most) or the mean of each episode's return over the guide's on the same
episode (``ratio``: the guide scores -1; every episode weighs alike, as in the paired evaluation's
JCT ratios).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lyra_agents.preempt_rule import (  # the rule's names (agents/preempt_rule.py)
    CLUSTER_FEATURES,
    RULE_FILE,
    RULE_FORMAT,
    SLOT_FEATURES,
    PreemptRule,
    RuleError,
    RuleLayout,
    features_problem,
    load_rule,
    rule_action,
    rule_file,
)
from lyra_agents.preempt_rule import FEATURES as FEATURES  # re-exported: where it was before 0.3.0's move

OBJECTIVES = ("return", "ratio")


def episode_return(env: Any, rule: PreemptRule, layout: RuleLayout, reset_seed: int) -> tuple[float, int]:
    """(return, steps) of one episode of ``env`` (a bare ``-v2`` env) from ``reset_seed`` under ``rule``."""
    obs, _ = env.reset(seed=reset_seed)
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(rule_action(rule, layout, obs, env.action_masks()))
        total += float(reward)
        steps += 1
        done = terminated or truncated
    return total, steps


# ---------------------------------------------------------------------------------------------- search
_ENVS: dict[tuple[int, int], Any] = {}  # per process: (scenario slot, trace seed) -> env
_SETTINGS: list[dict[str, Any]] = []
_FEATURES: list[str] = list(SLOT_FEATURES)  # the searched rule's features


def _set_up(settings: list[dict[str, Any]], features: Sequence[str] = SLOT_FEATURES) -> None:
    """A worker's start: its env settings, and the signals left to the parent (Ctrl-C interrupts
    the parent, which ends the pool; a forked worker must not inherit its SIGTERM-as-Ctrl-C)."""
    import signal

    if multiprocessing.parent_process() is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _ENVS.clear()
    _SETTINGS[:] = settings
    _FEATURES[:] = features


def _play(job: tuple[np.ndarray, Sequence[tuple[int, int, int]]]) -> tuple[list[float], int]:
    """(returns, env steps) of the rule ``theta`` over episodes ``(scenario slot, trace seed, reset seed)``."""
    import gymnasium as gym

    theta, episodes = job
    env: Any
    rule, returns, steps = PreemptRule.from_vector(theta, _FEATURES), [], 0
    for slot, trace_seed, reset_seed in episodes:
        env = _ENVS.get((slot, trace_seed))
        if env is None:
            env = _ENVS[slot, trace_seed] = gym.make(**{**_SETTINGS[slot], "trace_seed": trace_seed}).unwrapped
        ret, played = episode_return(env, rule, RuleLayout(env.codec, env.builder.names), reset_seed)
        returns.append(ret)
        steps += played
    return returns, steps


def objective_values(results: Sequence[Sequence[float]], guide: Sequence[float], objective: str) -> list[float]:
    """Each candidate's objective from its per-episode returns (module docstring): the mean return,
    or the mean of return / |guide's return| (an episode where the guide's return is 0 counts its
    return as it is)."""
    if objective == "return":
        return [sum(returns) / len(returns) for returns in results]
    return [sum(r / abs(g) if g else r for r, g in zip(returns, guide)) / len(returns) for returns in results]


@dataclass(frozen=True)
class SearchSettings:
    """The cross-entropy method's settings (module docstring); ``seed`` draws everything."""

    generations: int = 10
    population: int = 12
    elite: int = 3
    windows: int = 20
    noise: float = 0.05
    init_std: float = 1.0
    init_bias: float = -1.0
    workers: int = 2
    seed: int = 0
    objective: str = "return"

    def check(self) -> None:
        """:class:`RuleError` naming the first bad setting (:func:`lyra_gym.errors.number_problem`)."""
        from lyra_gym.errors import number_problem

        rules: dict[str, dict[str, Any]] = {
            **{name: {"integer": True, "lo": 1} for name in ("generations", "population", "elite", "windows",
                                                           "workers")},
            "noise": {"lo": 0}, "init_std": {"lo": 0}, "init_bias": {}}
        for name, rule in rules.items():
            problem = number_problem(getattr(self, name), **rule)
            if problem:
                raise RuleError(f"--{name.replace('_', '-')}: {problem}")
        if self.objective not in OBJECTIVES:
            raise RuleError(f"--objective: must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.elite > self.population:
            raise RuleError(f"--elite: must be <= --population ({self.population}), got {self.elite}")


def cem(fitness: Any, dims: int, settings: SearchSettings, init_mean: np.ndarray, episodes_of: Any,
        report: Any = None, names: Sequence[str] = SLOT_FEATURES) -> tuple[np.ndarray, list[dict[str, float]]]:
    """The cross-entropy method (module docstring) on ``fitness(list of (theta, episodes))`` ->
    objective values (the first two are the mean's and the guide's: a rule that never preempts, on the
    same episodes, for reference); ``episodes_of(rng)`` draws a generation's episodes; ``report(row)``
    hears each generation's row (``*_return``: the objective's values; ``mean_NAME``: the mean's
    parameter of each of ``names``, then ``bias``). (final mean, a row per generation)."""
    rng = np.random.default_rng(settings.seed)
    guide = np.zeros(dims)
    guide[-1] = -1.0  # scores -1 everywhere: never preempts (the guide's own run)
    mean, std = np.asarray(init_mean, dtype=np.float64).copy(), np.full(dims, settings.init_std)
    rows = []
    for generation in range(settings.generations):
        episodes = episodes_of(rng)
        thetas = mean + std * rng.standard_normal((settings.population, dims))
        scores = np.asarray(fitness([(t, episodes) for t in [mean, guide, *thetas]]), dtype=np.float64)
        elite = thetas[np.argsort(-scores[2:], kind="stable")[:settings.elite]]
        rows.append({"generation": generation, "mean_return": float(scores[0]), "guide_return": float(scores[1]),
                     "population_return": float(scores[2:].mean()),
                     "elite_return": float(np.sort(scores[2:])[-settings.elite:].mean()),
                     **{f"mean_{n}": float(v) for n, v in zip((*names, "bias"), mean)}})
        if report is not None:
            report(rows[-1])
        mean, std = elite.mean(axis=0), elite.std(axis=0) + settings.noise
    return mean, rows


def search_slots(cfg: Any) -> list[dict[str, Any]]:
    """``gymnasium.make`` keywords (``id`` included) of the envs a search plays: one per scenario of
    ``cfg`` in its order, whatever its ``n_envs`` (``env_kwargs_of`` cycles the scenarios over it),
    else the config's own env."""
    from lyra_agents.vec_envs import env_kwargs_of

    return [{"id": cfg.env_id, **kw} for kw in env_kwargs_of(cfg.replace(n_envs=max(1, len(cfg.scenarios))))]


def search(config_path: str, settings: SearchSettings, scenario: str | None = None, report: Any = None,
           features: Sequence[str] = SLOT_FEATURES) -> tuple[PreemptRule, list[dict[str, float]], Any]:
    """The rule over ``features`` the search finds on ``config_path``'s env (``scenario``: only that
    one of its ``scenarios``), the per-generation rows, and the config."""
    from lyra_agents.config import load_train_config

    settings.check()
    problem = features_problem(features)
    if problem:
        raise RuleError(f"--features: {problem}")
    cfg = load_train_config(config_path)
    if not cfg.env_id.endswith("Cluster-v2"):
        raise RuleError(f"env_id: a preemption rule needs LyraGym/Cluster-v2, got {cfg.env_id!r}")
    if scenario is not None:
        if scenario not in cfg.scenarios:
            raise RuleError(f"--scenario: {scenario!r} is not one of the config's scenarios "
                            f"({', '.join(cfg.scenarios)})")
        cfg = cfg.replace(scenarios=[scenario])
    slots = search_slots(cfg)
    trace_seeds = list(cfg.trace_seeds or [cfg.trace_seed])

    def episodes_of(rng: np.random.Generator) -> list[tuple[int, int, int]]:
        return [(int(rng.integers(len(slots))), int(trace_seeds[rng.integers(len(trace_seeds))]),
                 int(rng.integers(2**31))) for _ in range(settings.windows)]

    init = np.zeros(len(features) + 1)
    init[-1] = settings.init_bias
    steps = [0]  # env steps so far (every candidate's episodes: what the search paid for)

    def played(results: list[tuple[list[float], int]]) -> list[float]:
        steps[0] += sum(n for _, n in results)
        return objective_values([r for r, _ in results], results[1][0], settings.objective)  # [1]: the guide

    def counted(row: dict[str, float]) -> None:
        row["env_steps"] = steps[0]
        if report is not None:
            report(row)

    if settings.workers > 1:
        with multiprocessing.get_context("fork").Pool(settings.workers, _set_up, (slots, features)) as pool:
            mean, rows = cem(lambda jobs: played(pool.map(_play, jobs, chunksize=1)), len(init), settings, init,
                             episodes_of, counted, features)
    else:
        _set_up(slots, features)
        mean, rows = cem(lambda jobs: played([_play(j) for j in jobs]), len(init), settings, init, episodes_of,
                         counted, features)
    return PreemptRule.from_vector(mean, features), rows, cfg


# ------------------------------------------------------------------------------------------- rule files
def rule_json(rule: PreemptRule, config_path: str, settings: SearchSettings, folder: Path) -> str:
    """The rule file's text; ``config`` is kept relative to ``folder`` (where the file goes), so a
    folder moved with the repository still finds it."""
    config = os.path.relpath(Path(config_path).resolve(), Path(folder).resolve())
    return json.dumps({"format": RULE_FORMAT, "features": list(rule.features), "weights": list(rule.weights),
                       "bias": rule.bias, "config": Path(config).as_posix(), "search": settings.__dict__},
                      indent=2) + "\n"


def rule_scheduler(rule: PreemptRule, config_path: str, name: str = "policy") -> Any:
    """The rule as a scheduler for :func:`lyra_gym.run.simulate.simulate` (``paired.run_units``):
    the observation and masks the env gives, the rule's action, the guide's plan."""
    from lyra_agents.config import load_train_config
    from lyra_agents.policy_scheduler import GuidedAgentScheduler

    class RuleScheduler(GuidedAgentScheduler):
        def __init__(self, config: Any) -> None:
            super().__init__(config, name=name)
            self.layout = RuleLayout(self.codec, self.builder.names)

        def act(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
            return rule_action(rule, self.layout, obs, masks)

    return RuleScheduler(load_train_config(config_path).replace(observation_extras=False))


def load_rule_scheduler(path: str, **params: Any) -> Any:
    """The ``rule:PATH`` loader (entry-point group ``lyra_gym.scheduler_loaders``): a folder with a
    ``rule.json`` (``pretrained/NAME``: a shipped one) or the file itself; ``name=`` for the results
    (default ``rule:PATH``)."""
    unknown = set(params) - {"name"}
    if unknown:
        raise TypeError(f"load_rule_scheduler: unknown parameter(s) {', '.join(sorted(unknown))}")
    rule, config = load_rule(rule_file(path))
    return rule_scheduler(rule, config, name=params.get("name", f"rule:{path}"))


# ---------------------------------------------------------------------------------------------- command
def _search_main(args: argparse.Namespace) -> int:
    from lyra_gym.outputs import atomic_write_csv, atomic_write_text, check_out_folder

    settings = SearchSettings(args.generations, args.population, args.elite, args.windows, args.noise,
                              args.init_std, args.init_bias, args.workers, args.seed, args.objective)
    settings.check()
    features = [f.strip() for f in args.features.split(",") if f.strip()]  # checked by search, before any work
    check_out_folder(args.out, inputs={"--config": args.config})  # the output rule: new or empty, before any work

    def report(row: dict[str, float]) -> None:
        print(f"generation {row['generation']}: mean's objective {row['mean_return']:.6g} (guide "
              f"{row['guide_return']:.6g}), population "
              f"{row['population_return']:.6g}, elite {row['elite_return']:.6g}, {row['env_steps']:,} env steps",
              flush=True)

    rule, rows, _ = search(args.config, settings, args.scenario, report, features)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_csv(args.out / "search.csv", list(rows[0]),
                     ({k: repr(v) if isinstance(v, float) else v for k, v in row.items()} for row in rows))
    atomic_write_text(args.out / RULE_FILE, rule_json(rule, args.config, settings, args.out))
    print(f"rule: weights {', '.join(f'{n}={w:.3f}' for n, w in zip(rule.features, rule.weights))}, "
          f"bias {rule.bias:.3f}")
    print(f"wrote {args.out / 'rule.json'} and {args.out / 'search.csv'}")
    return 0


def _evaluate_main(args: argparse.Namespace) -> int:
    from lyra_agents import paired
    from lyra_agents.config import load_train_config
    from lyra_agents.evaluate import evaluate_protocol
    from lyra_agents.suite import get_suite
    from lyra_gym.outputs import check_out_file

    path = rule_file(args.rule)
    rule, config = load_rule(path)
    cfg = load_train_config(config)
    paired.check_numbers(args.trace_seeds, 10_000, 0)
    if args.windows < 1:
        raise RuleError(f"--windows: must be >= 1, got {args.windows}")
    if args.json is not None:  # the output rule, as lyra_agents.evaluate's: an existing file needs --overwrite
        check_out_file(args.json, args.overwrite, inputs={"rule": path, "config": config},
                       what="--json")
    protocol = paired.Protocol(tuple(range(args.trace_seeds)), args.windows)
    suite = get_suite(args.suite or cfg.suite)
    scenarios = [protocol.scenario(suite.get(n.strip())) for n in args.scenarios.split(",") if n.strip()]
    if not scenarios:
        raise RuleError("--scenarios: name at least one scenario of the suite")
    references = paired.references_of(args.baselines)
    scheduler = rule_scheduler(rule, config)
    factories = {"policy": lambda: scheduler,
                 **{r: paired.reference_factory(r, cfg) for r in references}}
    evaluate_protocol(scheduler, suite, scenarios, factories, references, path=args.rule, json_file=args.json)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lyra_agents.preempt_search", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("search", help="learn a rule on a train.py config's env")
    s.add_argument("--config", required=True, help="a train.py config YAML with env_id LyraGym/Cluster-v2")
    s.add_argument("--scenario", help="search on this one of the config's scenarios (default: all of them)")
    s.add_argument("--out", type=Path, required=True, help="a new (or empty) folder: rule.json, search.csv")
    defaults = SearchSettings()
    for name in ("generations", "population", "elite", "windows", "workers", "seed"):
        s.add_argument(f"--{name}", type=int, default=getattr(defaults, name))
    for name in ("noise", "init_std", "init_bias"):
        s.add_argument(f"--{name.replace('_', '-')}", dest=name, type=float, default=getattr(defaults, name))
    s.add_argument("--objective", default=defaults.objective, help=f"one of {', '.join(OBJECTIVES)} (module docstring)")
    s.add_argument("--features", default=",".join(SLOT_FEATURES),
                   help=f"the rule's features: {', '.join(SLOT_FEATURES)} (the default), then any of "
                        f"{', '.join(CLUSTER_FEATURES)}")
    e = sub.add_parser("evaluate", help="paired evaluation of a rule on suite scenarios' test windows")
    e.add_argument("rule", type=Path, help="a rule.json the search wrote, or its folder")
    e.add_argument("--scenarios", required=True, help="comma-separated suite scenarios")
    e.add_argument("--suite", help="the suite of the scenarios (default: the config's, v1; v1.1 prices preemption)")
    e.add_argument("--trace-seeds", type=int, default=9)
    e.add_argument("--windows", type=int, default=3)
    e.add_argument("--baselines", default="lyra,expert", help="references (as lyra_agents.evaluate's)")
    e.add_argument("--json", type=Path, help="write the per-unit rows here (lyra_agents.evaluate's format)")
    e.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command: 0; 2 with one line for a bad option, rule file or config; 130 when interrupted
    (Ctrl-C, SIGTERM: nothing is written, the files are written whole at the end)."""
    from lyra_gym.interrupts import sigterm_as_interrupt

    args = build_parser().parse_args(argv)
    try:
        with sigterm_as_interrupt():
            return _search_main(args) if args.command == "search" else _evaluate_main(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (RuleError, ValueError, OSError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
