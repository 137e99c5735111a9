"""Benchmark protocol: every policy on a fixed suite of held-out scenarios, normalised, with IQM and CIs.

Protocol
--------
1. Scenarios, from a versioned suite (``--suite``, :mod:`lyra_agents.suite`): ``v0`` (the default,
   :data:`lyra_agents.scenarios.SUITE`: ``default``, ``contended``, ``contended-warm``,
   ``strong-diurnal``, ``low-elastic``, ``paper-shape``; one trace seed, three windows each) or
   ``v1`` (``traces/suite-v1/suite.yaml``: v0's six on two trace seeds x three windows, plus
   ``elastic-heavy``, ``overload`` and ``hetero``), ``v1.1`` (``traces/suite-v1.1/suite.yaml``: v1 with
   priced preemption, a checkpoint every 1800 s of run time), or a suite file. Each scenario runs on its own
   cluster config and the throughput profile it names, on fixed test windows of the
   environments (paired: every policy sees the same jobs and the same simulation seed on a window).
2. Policies: scheduler registry names (``lyra``, ``baseline``, ``tiresias``, ...),
   ``random`` (uniform over the valid values of every action dimension of ``LyraGym/Cluster-v1``'s
   masks, decoded into Lyra's guidance as the env does; seeded per window from ``--seed`` and the
   window's seed), ``small-first`` (:mod:`lyra_agents.small_first`'s fixed rule on those levels), ``model:PATH`` (a
   trained run, loaded the safe way: :func:`lyra_agents.policy_scheduler.load_policy_scheduler`),
   ``policy:MODULE:FACTORY`` and ``MODULE:CLASS`` (``docs/writing-a-policy.md``; built afresh per
   window), and agents given as several training seeds, ``--agent NAME=PATH,PATH,...``.
   ``lyra`` and ``random`` are always run: they are the references.
3. Metric per (policy, scenario, window, run): mean JCT (``jct_mean_s``), and
   ``jct_vs_lyra = JCT / JCT(lyra)`` (lower is better; lyra = 1) and
   ``headroom_closed = (JCT(ref) - JCT) / (JCT(ref) - JCT(bound))`` (higher is better; the
   scenario's best heuristic ``ref`` = 0, the isolated-job bound = 1, never above 1; named in
   ``headroom_ref``): :func:`~lyra_agents.bench_output.add_scores`; the formulas are in docs/benchmark.md.
4. Aggregate per policy over scenarios x (trace seed, window) units (x runs): the interquartile
   mean (IQM, the mean of the middle 50 %: ``scipy.stats.trim_mean(x, 0.25)``)
   and a 95 % stratified percentile bootstrap CI: the score matrix is (windows x
   runs) rows by scenario columns, and each bootstrap sample redraws the rows
   with replacement within every scenario (``--reps`` samples, seed ``--seed``).
   These are rliable's estimators (``metrics.aggregate_iqm``, ``StratifiedBootstrap``
   with ``task_bootstrap=False``) written in numpy with a seeded Generator
   (:func:`iqm`, :func:`stratified_bootstrap_ci`): rliable 1.2.0 itself does not
   run with current dependencies (it passes ``random_state=`` to arch, which
   arch 8 no longer takes; arch 7 does not import under pandas 3), draws from
   NumPy's global generator, and would pull arch, pandas, statsmodels and
   seaborn into every install. Suite v0 keeps this estimator (its numbers stay as
   they were); suite files use :func:`unit_bootstrap_ci` instead: the independent units
   are (trace seed, window) pairs, each redrawn with all its scenarios together (the
   scenarios of a suite share jobs), crossed with a redraw of the runs.
5. Headroom per scenario (:mod:`lyra_agents.headroom`): every heuristic's IQM against lyra,
   the best one, the per-window best (hindsight) and the isolated-job bound (unreachable).

Output: the suite's version, a table and the headroom tables on stdout and, with ``--out``,
a CSV (one row per policy, run, scenario, trace seed and window, one ``bound`` row per
window, then the aggregate rows; every row names the suite) written atomically. Same
arguments, same bytes. On stderr (not with ``--quiet``): a line per scenario and
window, and after 2 s a progress bar over the (policy, scenario, window)
simulations with tqdm's estimate of the time left (:mod:`lyra_gym.progress`;
``TQDM_DISABLE=1`` turns it off); always, one warning when a policy's interval
rests on fewer than 2 (window, run) cells per scenario (it has zero width), or else
when the intervals rest on fewer than 5 (trace seed, window) units.
Every option is checked before anything is trained or simulated, and a problem is a one-line error and exit status 2: a bad policy or
scenario name (names against the scheduler registry), a model that does not load
(every ``model:PATH`` and ``--agent`` run is loaded up front), ``--windows`` below 1
or above a scenario's windows, a negative ``--seed``, ``--seeds`` without
``--train``, a ``--train`` config that does not resolve, and an ``--out`` refused by
the output rule of :mod:`lyra_gym.outputs` (a folder, under a file, an existing file
without ``--overwrite``, or any file the command reads, directly or named in another:
the suite file, each scenario's cluster config and the profile, demand and efficiency
files it names, the models with their configs and the files those name; its folder is created).

Kept as they finish: with ``--out``, each window's rows are appended to ``OUT.partial``
(JSON lines, flushed to disk per window) and the file is removed once ``OUT`` is written.
Ctrl-C or SIGTERM stops the run with one line (``interrupted``, exit status 130), a file
that cannot be written (a full disk) with one line and exit status 1; either way the
windows done are kept, and the same command again simulates only the others (same
bytes as an uninterrupted run). A partial file of other arguments, models, input files
or code is refused (``--overwrite`` discards it); a file there that is not one is never
replaced. A ``--train`` benchmark does not resume (its runs are new).

Cost: the suite (5 scenarios x 3 windows) with all 13 registry schedulers and
``random`` took 52 s on one core (windows of 150-1,332 jobs). ``--train CONFIG --seeds 0,1,2`` first runs
``python train.py --config CONFIG --seed S --no-compare`` per seed (about an
hour each for the shipped configs on 2 cores, ~2 min for ``--quick``'s
``agents/configs/quick.yaml``) and benchmarks the runs as agent ``--train-name``.

Command line::

    python -m lyra_agents.benchmark --out bench.csv
    python -m lyra_agents.benchmark --policies lyra,baseline,pollux,random --scenarios default,contended
    python -m lyra_agents.benchmark --agent ppo=runs/a,runs/b,runs/c --out bench.csv
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from lyra_gym.errors import LyraGymError
from lyra_gym.harness.report import WIDTH
from lyra_gym.model.knowledge import KnowledgeConfig
from lyra_gym.provenance import provenance
from lyra_gym.sim import scheduler as registry
from lyra_gym.outputs import Inputs, OutputError, check_out_file
from lyra_gym.sim.scheduler import Scheduler
from lyra_gym.run.simulate import load_profile_set, simulate

from lyra_agents.artifacts import WriteError
from lyra_gym.interrupts import sigterm_as_interrupt
from lyra_agents.bench_output import (
    AGGREGATE_COLUMNS, COLUMNS, METRICS, WINDOW_COLUMNS, PartialRows, Unit, add_scores, aggregate, benchmark_inputs,
    few_units_warning, files_sha256, identity_sha256, model_paths, partial_path, scenario_table, score_cube,
    score_matrix, table,
    thin_interval_warning, to_csv, write_atomic,
)
from lyra_agents.bench_stats import headroom_closed, iqm, iqm_ci, stratified_bootstrap_ci, unit_bootstrap_ci, vs_lyra
from lyra_agents.experts import SMALL_FIRST, random_masked_action
from lyra_agents.headroom import BOUND, ORACLE, headroom, headroom_table, isolated_jct, row_kind
from lyra_agents.scenarios import Scenario
from lyra_agents.shipped import shipped_agent
from lyra_agents.suite import Suite, SuiteError, get_suite

__all__ = ["AGGREGATE_COLUMNS", "COLUMNS", "METRICS", "WINDOW_COLUMNS", "add_scores", "aggregate", "few_units_warning",
           "headroom_closed", "iqm", "iqm_ci", "main", "model_paths", "score_cube", "score_matrix",
           "stratified_bootstrap_ci", "table", "thin_interval_warning", "to_csv", "unit_bootstrap_ci", "vs_lyra",
           "write_atomic"]

TRAIN_SCRIPT = Path(__file__).resolve().parents[1] / "train.py"  # run for --train, wherever the cwd is
REFERENCE = "lyra"
RANDOM = "random"


class BenchmarkError(LyraGymError):
    """A bad argument (unknown name, missing path): reported in one line, exit status 2."""


# ---------------------------------------------------------------------- policies
class RandomMaskedScheduler(Scheduler):
    """Uniform over the valid values of every action dimension (``action_masks()`` of
    ``LyraGym/Cluster-v1``), decoded into guidance for Lyra as the env decodes an agent's action.

    :param seed: seeds ``numpy.random.default_rng`` at every ``reset`` (one run = one seed).
    """

    name = RANDOM

    def __init__(self, seed: int = 0) -> None:
        from lyra_agents.config import TrainConfig
        from lyra_agents.policy_scheduler import GuidedAgentScheduler

        class _Random(GuidedAgentScheduler):
            def act(inner, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
                return random_masked_action(self.rng, inner.codec.nvec, masks)

        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.inner = _Random(TrainConfig(), name=RANDOM)

    @property
    def tick_interval(self) -> float | None:  # type: ignore[override]
        return self.inner.tick_interval

    def reset(self, rng: np.random.Generator) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.inner.reset(rng)

    def decide(self, view: Any) -> Any:
        return self.inner.decide(view)


@dataclass
class Policy:
    """A benchmarked policy: a name and one factory per run (training seed)."""

    name: str
    runs: list[tuple[str, Callable[[int], Scheduler | str]]]  # (run label, window seed -> scheduler)


def always(scheduler: Scheduler | str) -> Callable[[int], Scheduler | str]:
    """A run's factory that gives ``scheduler`` (a loaded model, or a registry name) for every window seed."""
    return lambda _window_seed: scheduler


def _random_policy(seed: int) -> Policy:
    def make(window_seed: int) -> Scheduler:
        child = int(np.random.SeedSequence([seed, window_seed]).generate_state(1)[0])
        return RandomMaskedScheduler(child)
    return Policy(RANDOM, [(f"seed={seed}", make)])


def _small_first_policy(_seed: int) -> Policy:
    from lyra_agents.small_first import SmallFirstScheduler  # imports torch: only when named
    return Policy(SMALL_FIRST, [("", lambda _window_seed: SmallFirstScheduler())])


#: Policies named here, not in the scheduler registry: name -> its policy given ``--seed``.
BUILTIN_POLICIES: dict[str, Callable[[int], Policy]] = {RANDOM: _random_policy, SMALL_FIRST: _small_first_policy}


def load_model_scheduler(path: str, name: str) -> Scheduler:
    from lyra_agents.policy_scheduler import load_policy_scheduler, split_trust_option

    try:
        base, _ = split_trust_option(path)
    except ValueError as err:
        raise BenchmarkError(f"model {path!r}: {err}") from None
    if not shipped_agent(base).exists():  # pretrained/NAME: a shipped agent
        raise BenchmarkError(f"model path {base!r} not found")
    try:
        return load_policy_scheduler(path, name=name)
    except (OSError, ValueError, RuntimeError) as err:  # RuntimeError: torch, weights of other shapes
        lines = str(err).strip().splitlines() or [type(err).__name__]
        raise BenchmarkError(f"model {path!r}: {lines[0]}") from None


def resolve_policies(names: Sequence[str], agents: Sequence[str], random_seed: int) -> list[Policy]:
    """Policies from ``--policies`` names and ``--agent NAME=PATH,...`` groups; ``lyra`` and
    ``random`` first (added when missing). Every name checked and every model loaded here."""
    known = set(registry.available())
    policies: dict[str, Policy] = {}

    def add(policy: Policy) -> None:
        if policy.name in policies:
            raise BenchmarkError(f"policy {policy.name!r} given twice")
        policies[policy.name] = policy

    for name in [REFERENCE, RANDOM, *[n for n in names if n not in (REFERENCE, RANDOM)]]:
        if name in BUILTIN_POLICIES:
            add(BUILTIN_POLICIES[name](random_seed))
        elif name.startswith("model:"):
            scheduler = load_model_scheduler(name[len("model:"):], name)
            add(Policy(name, [(name[len("model:"):], always(scheduler))]))
        elif name in known:
            add(Policy(name, [("", always(name))]))
        elif ":" in name:  # policy:MODULE:FACTORY, MODULE:CLASS: built once now (errors name it), then per window
            registry.make(name)
            add(Policy(name, [("", lambda _window_seed, name=name: registry.make(name))]))  # type: ignore[misc]
        else:
            raise BenchmarkError(f"unknown policy {name!r} (known: {', '.join(sorted(known | set(BUILTIN_POLICIES)))}, model:PATH, "
                                 f"policy:MODULE:FACTORY, MODULE:CLASS)")
    for spec in agents:
        label, eq, paths = spec.partition("=")
        label = label.strip()
        if not eq or not label or not paths.strip():
            raise BenchmarkError(f"--agent {spec!r}: expected NAME=PATH[,PATH...]")
        runs = []
        for path in [p.strip() for p in paths.split(",") if p.strip()]:
            runs.append((path, always(load_model_scheduler(path, label))))
        add(Policy(label, runs))
    return list(policies.values())


def resolve_scenarios(names: Sequence[str], suite: Suite | None = None) -> list[Scenario]:
    """The named scenarios of ``suite`` (default v0); ``BenchmarkError`` naming an unknown or
    not yet runnable one."""
    suite = suite or get_suite("v0")
    try:
        return [suite.get(n) for n in names]
    except ValueError as err:
        raise BenchmarkError(str(err)) from None


# ---------------------------------------------------------------------- running
def _seeds(scenario: Any) -> tuple[int, ...]:
    return scenario.seeds() if hasattr(scenario, "seeds") else (0,)


def evaluation_count(policies: Sequence[Policy], scenarios: Sequence[Scenario], windows: int | None = None) -> int:
    """How many simulations :func:`evaluate` runs: (policy runs) x (trace seeds x windows of every scenario)."""
    runs = sum(len(p.runs) for p in policies)
    return runs * sum(len(_seeds(s)) * len(s.windows if windows is None else s.windows[:windows]) for s in scenarios)


def _window_rows(jct: dict[tuple[str, str], float], base: dict[str, Any]) -> list[dict[str, Any]]:
    lyra = next(v for (p, _r), v in jct.items() if p == REFERENCE)
    rows = []
    for (name, run), value in jct.items():
        rows.append({**base, "kind": row_kind(name), "policy": name, "run": run,
                     "jct_mean_s": value, "jct_vs_lyra": vs_lyra(value, lyra)})
    return rows


def window_jct(policies: Sequence[Policy], label: str, window: Any, jobs: list[Any], config: Any, profiles: Any,
                bar: Any | None, bounds: bool) -> dict[tuple[str, str], float]:
    """Mean JCT (s) of every (policy, run) on one window's ``jobs``; with ``bounds`` also the
    isolated-job bound and, when the scenario's schedulers are not told durations, the oracle lyra."""
    from lyra_agents.policy_scheduler import AgentScheduler

    jct: dict[tuple[str, str], float] = {}
    for policy in policies:
        for run, make in policy.runs:
            if bar is not None:
                bar.set_description_str(f"{policy.name} on {label} window {window.index}", refresh=False)
            scheduler = make(window.seed)
            if isinstance(scheduler, AgentScheduler):
                scheduler.start_window(window)
            result = simulate(jobs, scheduler, config, seed=window.seed, profiles=profiles)
            jct[policy.name, run] = float(result.metrics["jct_mean_s"])
            if bar is not None:
                bar.update(1)
    if bounds:
        jct[BOUND, ""] = float(np.mean(isolated_jct(jobs, config, profiles))) if jobs else math.nan
        if config.knowledge.mode != "oracle":  # what the missing knowledge costs lyra
            told = replace(config, knowledge=KnowledgeConfig())
            jct[ORACLE, ""] = float(simulate(jobs, registry.make(REFERENCE), told, seed=window.seed,
                                             profiles=profiles).metrics["jct_mean_s"])
    return jct


def _window_line(unit: Unit, what: str, rows: Sequence[dict[str, Any]]) -> str:
    lyra = next(r["jct_mean_s"] for r in rows if r["policy"] == REFERENCE)
    rand = next(r["jct_mean_s"] for r in rows if r["policy"] == RANDOM)
    return f"{unit[0]} seed {unit[1]} window {unit[2]}: {what}, lyra {lyra:.0f} s, random {rand:.0f} s"


def evaluate(policies: Sequence[Policy], scenarios: Sequence[Scenario], windows: int | None = None,
             progress: Callable[[str], None] | None = None, bar: Any | None = None,
             bounds: bool = False, kept: PartialRows | None = None) -> list[dict[str, Any]]:
    """One row per (policy, run, scenario, trace seed, window): its mean JCT and both normalised
    scores (:func:`~lyra_agents.bench_output.add_scores`: the best heuristic among ``policies``); with ``bounds``, one more (kind ``bound``) per window: the isolated-job bound
    (:func:`lyra_agents.headroom.isolated_jct`). Each scenario runs on its own config and the
    profile that config names. ``bar`` (a :func:`lyra_gym.progress.progress` bar of
    :func:`evaluation_count` steps) is told the policy and scenario of each simulation and
    advanced after it. ``kept`` (:class:`~lyra_agents.bench_output.PartialRows`): a window it
    holds is taken from it, not simulated again; every other window's rows are added to it as
    the window finishes."""
    done = kept.done if kept is not None else {}
    runs = sum(len(p.runs) for p in policies)
    rows: list[dict[str, Any]] = []
    for scenario in scenarios:
        config = scenario.sim_config()
        profiles = load_profile_set(config)
        for trace_seed in _seeds(scenario):
            trace = scenario.build_trace(trace_seed)
            for window in scenario.test_windows(trace, windows):
                unit = (scenario.name, trace_seed, window.index)
                if unit in done:
                    window_rows, what = done[unit], "kept from the earlier run"
                    if bar is not None:
                        bar.update(runs)
                else:
                    jobs = window.jobs(trace)
                    jct = window_jct(policies, scenario.name, window, jobs, config, profiles, bar, bounds)
                    base = {"scenario": scenario.name, "window": window.index, "trace_seed": trace_seed,
                            "window_seed": window.seed}
                    window_rows, what = _window_rows(jct, base), f"{len(jobs)} jobs"
                    if kept is not None:
                        kept.append(unit, window_rows)
                rows += window_rows
                if progress:
                    progress(_window_line(unit, what, window_rows))
    return add_scores(rows, [p.name for p in policies if p.name in registry.available()])


# ---------------------------------------------------------------------- training
def train_seeds(config: str, seeds: Sequence[int], name: str, runs_dir: str = "runs") -> list[str]:
    """``python train.py --config CONFIG --seed S --no-compare`` per seed; the run directories."""
    paths = []
    for seed in seeds:
        proc = subprocess.run([sys.executable, str(TRAIN_SCRIPT), "--config", config, "--seed", str(seed), "--no-compare",
                               "--set", f"name={name}-s{seed}", f"runs_dir={runs_dir}"],
                              capture_output=True, text=True)
        sys.stderr.write(proc.stderr)
        found = re.search(r"^run (\S+)", proc.stdout, flags=re.M)
        if proc.returncode != 0 or not found:
            raise BenchmarkError(f"train.py for seed {seed} failed (exit {proc.returncode})")
        paths.append(found.group(1))
    return paths


def _parse_seeds(text: str) -> list[int]:
    """``--seeds 0,1,2``: distinct whole numbers >= 0, at least one."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            seed = int(part)
        except ValueError:
            raise BenchmarkError(f"--seeds: {part!r} is not a whole number") from None
        if seed < 0:
            raise BenchmarkError(f"--seeds: must be >= 0, got {seed}")
        if seed in seeds:
            raise BenchmarkError(f"--seeds: {seed} given twice")
        seeds.append(seed)
    if not seeds:
        raise BenchmarkError("--seeds: none given")
    return seeds


def _check_training(config: str, seeds: Sequence[int], name: str) -> None:
    """The config of every ``--train`` run resolved now (as train.py will), so a bad file, key,
    value or ``--train-name`` fails before the first run starts."""
    from lyra_agents.config import TrainConfigError, resolve_config, run_name_problem

    if not Path(config).is_file():
        raise BenchmarkError(f"--train: config {config!r} not found")
    if not TRAIN_SCRIPT.is_file():
        raise BenchmarkError(f"--train: {TRAIN_SCRIPT} not found (--train needs a source checkout)")
    problem = run_name_problem(name) or ("must not contain '=' or ','" if set(name) & set("=,") else None)
    if problem:
        raise BenchmarkError(f"--train-name: {problem}")
    for seed in seeds:
        try:
            resolve_config(config_path=config, seed=seed, overrides=[f"name={name}-s{seed}", "runs_dir=runs"])
        except TrainConfigError as err:
            raise BenchmarkError(f"--train {config}: {err}") from None


# ---------------------------------------------------------------------- command line
def _default_policies() -> list[str]:
    return registry.available()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lyra_agents.benchmark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="v0",
                        help="v0 (default), v1 (traces/suite-v1/suite.yaml), v1.1 (v1, priced preemption) or a suite file")
    parser.add_argument("--policies", default=None,
                        help="comma-separated registry names, 'random', 'small-first', model:PATH, policy:MODULE:FACTORY, "
                             "MODULE:CLASS (default: every registry scheduler and random)")
    parser.add_argument("--agent", action="append", default=[], metavar="NAME=PATH[,PATH...]",
                        help="a trained agent as runs of several training seeds (repeatable)")
    parser.add_argument("--scenarios", default=None, help="comma-separated (default: every scenario of the suite)")
    parser.add_argument("--windows", type=int, default=None,
                        help="evaluate only the first N windows of each scenario (per trace seed)")
    parser.add_argument("--reps", type=int, default=10_000, help="bootstrap samples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random policy and the bootstrap")
    parser.add_argument("--out", default=None,
                        help="CSV of per-window and aggregate rows (written atomically; its folder is created)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    parser.add_argument("--train", default=None, metavar="CONFIG",
                        help="first train CONFIG once per --seeds with train.py (hours for the shipped configs)")
    parser.add_argument("--seeds", default=None, help="training seeds for --train (default 0,1,2; only with --train)")
    parser.add_argument("--train-name", default="trained", help="agent name of the --train runs")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr (per-window lines, progress bar)")
    parser.add_argument("--wide", action="store_true",
                        help=f"tables on full-length lines, policies by full name (default: {WIDTH} columns)")
    return parser


def _check_numbers(args: argparse.Namespace) -> None:
    if args.windows is not None and args.windows < 1:
        raise BenchmarkError(f"--windows: must be >= 1, got {args.windows}")
    if args.reps < 1:
        raise BenchmarkError(f"--reps: must be >= 1, got {args.reps}")
    if args.seed < 0:
        raise BenchmarkError(f"--seed: must be >= 0, got {args.seed}")
    if args.seeds is not None and not args.train:
        raise BenchmarkError("--seeds: only used with --train CONFIG (the training seeds); to benchmark runs "
                             "of several seeds pass --agent NAME=RUN,RUN,...")


def _suite_scenarios(args: argparse.Namespace) -> tuple[Suite, list[Scenario]]:
    try:
        suite = get_suite(args.suite)
    except SuiteError as err:
        raise BenchmarkError(f"--suite: {err}") from None
    names = list(suite.scenarios) if args.scenarios is None else [s.strip() for s in args.scenarios.split(",")]
    scenarios = resolve_scenarios([n for n in names if n], suite)
    if not scenarios:
        raise BenchmarkError("--scenarios: none given")
    fewest = min(len(s.windows) for s in scenarios)
    if args.windows is not None and args.windows > fewest:
        raise BenchmarkError(f"--windows: {args.windows} asked, but scenario "
                             f"{next(s.name for s in scenarios if len(s.windows) == fewest)!r} has only "
                             f"{fewest} test windows")
    return suite, scenarios


def _policies(args: argparse.Namespace, suite: Suite, scenarios: Sequence[Scenario]) -> tuple[list[Policy], Inputs]:
    """Every policy resolved and model loaded (after ``--train`` runs, whose config is checked first),
    and every file the command reads (kept apart from ``--out``, checked here before any work)."""
    names = ([p.strip() for p in args.policies.split(",") if p.strip()] if args.policies is not None
             else _default_policies() + [RANDOM])
    agents = list(args.agent)
    seeds: list[int] = []
    if args.train:
        seeds = _parse_seeds(args.seeds if args.seeds is not None else "0,1,2")
        _check_training(args.train, seeds, args.train_name)
    inputs = benchmark_inputs(suite, scenarios, names, agents, args.train) if args.out is not None else {}
    if args.out is not None:
        check_out_file(args.out, args.overwrite, inputs=inputs, what="--out")
        check_out_file(partial_path(args.out), True, inputs=inputs, what="--out")
        if args.train and partial_path(args.out).exists() and not args.overwrite:
            raise BenchmarkError(f"--out {args.out}: {partial_path(args.out)} holds rows of an earlier run, and a "
                                 f"--train benchmark cannot resume (its runs are new); pass --overwrite to discard them")
    if args.train:
        before = resolve_policies(names, agents, args.seed)  # bad names and models fail before hours of training
        if args.train_name in {p.name for p in before}:
            raise BenchmarkError(f"--train-name {args.train_name!r}: also the name of another policy")
        agents.append(f"{args.train_name}=" + ",".join(train_seeds(args.train, seeds, args.train_name)))
    return resolve_policies(names, agents, args.seed), inputs


def _kept_rows(args: argparse.Namespace, suite: Suite, scenarios: Sequence[Scenario], policies: Sequence[Policy],
               inputs: Inputs) -> PartialRows | None:
    """With ``--out``, its partial file opened (:class:`~lyra_agents.bench_output.PartialRows`): the
    windows an earlier run of the same suite, scenarios, windows, policies, seed, input files and code
    kept; another run's rows are refused unless ``--overwrite``."""
    if args.out is None:
        return None
    parts = {"suite": [suite.version, suite.source, suite.bootstrap], "scenarios": [repr(s) for s in scenarios],
             "windows": args.windows, "seed": args.seed, "policies": [[p.name, [r for r, _ in p.runs]] for p in policies],
             "files": files_sha256(inputs), **provenance()}
    kept = PartialRows(args.out, identity_sha256(parts))
    kept.open(args.overwrite)
    return kept


def _warn(aggregates: Sequence[dict[str, Any]], scenarios: int) -> None:
    """One warning line on stderr when the intervals rest on too little: zero width, else < MIN_UNITS units."""
    warning = thin_interval_warning(aggregates, scenarios) or few_units_warning(aggregates)
    if warning:
        print(f"lyra_agents.benchmark: warning: {warning}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """The command: exit status 0; 2 for a refused option, input or output (before any work); 1 when a
    file cannot be written (disk full) and 130 when interrupted (Ctrl-C, SIGTERM), each one line, the
    windows done so far kept in ``OUT.partial`` for the same command to resume."""
    args = _parser().parse_args(argv)
    kept: PartialRows | None = None
    try:
        with sigterm_as_interrupt():
            # every option, name, model and output checked before anything is trained or simulated
            try:
                _check_numbers(args)
                suite, scenarios = _suite_scenarios(args)
                policies, inputs = _policies(args, suite, scenarios)
                kept = _kept_rows(args, suite, scenarios, policies, inputs)
            except (OutputError, LyraGymError, WriteError) as err:  # BenchmarkError, SchedulerSpecError, ...
                print(f"lyra_agents.benchmark: error: {err}", file=sys.stderr)
                return 2
            _run(args, suite, scenarios, policies, kept)
            return 0
    except KeyboardInterrupt:
        print(f"lyra_agents.benchmark: interrupted{'; ' + kept.note() if kept else ''}", file=sys.stderr)
        return 130
    except WriteError as err:  # a full disk while writing a window's rows or --out
        print(f"lyra_agents.benchmark: error: {err}{'; ' + kept.note() if kept else ''}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, suite: Suite, scenarios: Sequence[Scenario], policies: Sequence[Policy],
         kept: PartialRows | None) -> None:
    """Simulate (skipping the windows ``kept`` holds), print the tables and write ``--out``."""
    from lyra_gym.progress import progress as progress_bar, write as write_line

    progress = None if args.quiet else write_line
    if progress:
        progress(f"suite {suite.version} ({suite.source}): {suite.description}")
        for name, why in suite.unavailable.items():
            progress(f"scenario {name}: not run, needs {why}")
        for s in scenarios:
            progress(f"scenario {s.name}: offered load {s.offered_load(count=args.windows):.3f} over its windows; "
                     f"{s.description}")
    count = evaluation_count(policies, scenarios, args.windows)
    with progress_bar(count, unit="sim", enabled=not args.quiet) as bar:
        rows = evaluate(policies, scenarios, args.windows, progress, bar, bounds=True, kept=kept)
    aggregates = aggregate(rows, args.reps, args.seed, suite.bootstrap)
    width = None if args.wide else WIDTH
    print(f"suite {suite.version}")
    print(table(rows, aggregates, width))
    what = ("stratified bootstrap (windows redrawn within each scenario)" if suite.bootstrap == "stratified"
            else "bootstrap over (trace seed, window) units, a unit's scenarios redrawn together")
    print(f"(IQM over {len(scenarios)} scenarios x trace seeds x windows x runs;\n 95 % CI: {what}, {args.reps} samples)")
    print()
    print(scenario_table(rows, args.reps, args.seed, suite.bootstrap, width))
    print()
    print(headroom_table(headroom(rows, [p.name for p in policies if p.name in registry.available()])))
    _warn(aggregates, len(scenarios))
    if args.out and kept is not None:
        made_by = {"suite": suite.version, **provenance()}  # what produced the numbers (issue 27)
        write_atomic(args.out, to_csv([{**r, **made_by} for r in [*rows, *aggregates]]))
        kept.remove()


if __name__ == "__main__":
    sys.exit(main())
