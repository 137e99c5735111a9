"""Evaluate a model, the expert, or any scheduler on an env's held-out test windows.

Test window ``i`` has a fixed simulation seed (``env.window.seed``), so every
policy sees the same jobs and the same inference-demand curve: comparisons are
paired. Each function returns one row per window: ``{"policy", "window",
"seed", **metrics}`` with the keys of ``metrics.json``.

Two harnesses, one engine:

- :func:`evaluate_model` / :func:`evaluate_expert` step the environment (used
  during training, on the live model);
- :func:`evaluate_scheduler` runs ``lyra_gym.run.simulate`` on the window's jobs
  with the window's seed: a registry name (``"lyra"``), or a trained model as a
  :class:`~lyra_agents.policy_scheduler.PolicyScheduler`. This is what ``lyra-gym
  compare`` measures; the two agree exactly (``tests/agents/test_policy_building_blocks.py``).

Command line: ``python -m lyra_agents.evaluate RUN_DIR_OR_MODEL [--windows N] [--baselines lyra,sjf]
[--json FILE [--overwrite]] [--trust-model-files]`` (``--json``: the rows, each with the env id and
the lyra_gym version and commit, :func:`recorded`). It prints first what it runs on
(:func:`header_lines`: env id, trace and seed, cluster file, knowledge mode, windows). With ``--suite
v1 [--scenarios history] [--trace-seeds 9] [--windows 3] [--baselines lyra,expert] [--statistic
iqm|mean] [--reps N] [--seed S]`` it runs the paired protocol of :mod:`lyra_agents.paired` on the
suite's scenarios instead: per scenario, the ratio to each reference with its 95 % interval and
half-width (``--json``: one row per policy and unit). The model is loaded without unpickling anything
unless ``--trust-model-files`` (or ``LYRA_GYM_TRUST_MODEL_FILES=1``) is given; see ``docs/trust.md``.
Every option is checked before the first window is simulated (``--windows`` >= 1 and at most the
run's test windows, ``--baselines`` against the scheduler registry, the model loaded, ``--json``
by the output rule of :mod:`lyra_gym.outputs`: an existing file needs ``--overwrite``; the model's
own files, the files its config names (``sim_config``, ``trace``, ``profiles``, the suite and what
those name) and a ``model:PATH`` baseline's are refused); an error is one line on stderr and exit
status 2. Ctrl-C or SIGTERM is one line and exit status 130; a ``--json`` that cannot be written
(a full disk) one line and exit status 1, the old file left as it was. After 2 s a progress bar
over windows x policies (with tqdm's estimate of the time left) shows on stderr, never on stdout
(:mod:`lyra_gym.progress`; ``TQDM_DISABLE=1`` turns it off).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from lyra_agents.artifacts import WriteError, run_inputs, written
from lyra_gym.envs.learner_extras import LearnerExtrasObservation
from lyra_gym.interrupts import sigterm_as_interrupt
from lyra_gym.run.simulate import simulate
from lyra_gym.sim.scheduler import Scheduler

if TYPE_CHECKING:
    from lyra_agents.policy_scheduler import AgentScheduler

Row = dict[str, Any]


def held_out_windows(env: Any, count: int) -> list[int]:
    """The first ``count`` test windows of ``env`` (at most all of them)."""
    return list(range(min(count, env.unwrapped.windows.num_test)))


def rollout(env: Any, choose: Callable[[Any, np.ndarray], np.ndarray], window: int) -> Row:
    """Play test window ``window`` to its end with ``choose(env, obs) -> action``; its final metrics."""
    # the learner-extras wrapper is stepped (it extends the observation); any other wrapper is not
    stepper = env if isinstance(env, LearnerExtrasObservation) else env.unwrapped
    env = env.unwrapped
    obs, _ = stepper.reset(options={"split": "test", "window": window})
    info: dict[str, Any] = {}
    done = env.done
    while not done:
        obs, _, terminated, truncated, info = stepper.step(choose(env, obs))
        done = terminated or truncated
    if "final_metrics" not in info:  # a window with no decision point at all
        from lyra_gym.run.metrics import summarize
        env.engine.finish()
        info["final_metrics"] = summarize(env.engine)
    return {"window": env.window.index, "seed": env.window.seed, **info["final_metrics"]}


def evaluate_model(model: Any, env: Any, windows: Sequence[int], normalizer: Any | None = None,
                   deterministic: bool = True, label: str = "policy") -> list[Row]:
    """A live model on test ``windows``; ``normalizer`` is the training ``VecNormalize`` (or None)."""
    from lyra_agents.model_build import supports_action_masks

    masked = supports_action_masks(model)

    def choose(e: Any, obs: np.ndarray) -> np.ndarray:
        if normalizer is not None:
            obs = normalizer.normalize_obs(obs)
        kwargs = {"action_masks": e.action_masks()} if masked else {}
        action, _ = model.predict(obs, deterministic=deterministic, **kwargs)
        return action

    return [{"policy": label, **rollout(env, choose, w)} for w in windows]


def evaluate_expert(env: Any, windows: Sequence[int], label: str = "expert") -> list[Row]:
    """The env's expert action (the guided heuristic unmodified) on test ``windows``."""
    return [{"policy": label, **rollout(env, lambda e, _obs: e.expert_action(), w)} for w in windows]


def evaluate_scheduler(policy: str | Scheduler, env: Any, windows: Sequence[int],
                       label: str | None = None, bar: Any | None = None) -> list[Row]:
    """``simulate`` on each test window's jobs with its seed and the env's cluster config (an agent
    hands over from its heuristic at a warm-started window's start, as in the env). ``bar`` (a
    :func:`lyra_gym.progress.progress` bar) is told the policy and window and advanced per window."""
    from lyra_agents.policy_scheduler import AgentScheduler

    env = env.unwrapped
    rows = []
    for w in windows:
        window = env.windows.test(w)
        if bar is not None:
            bar.set_description_str(f"{label or getattr(policy, 'name', policy)} window {w}", refresh=False)
        if isinstance(policy, AgentScheduler):
            policy.start_window(window)
        result = simulate(window.jobs(env.trace), policy, env.sim_config, seed=window.seed, profiles=env.profiles)
        rows.append({"policy": label or result.policy, "window": window.index, "seed": window.seed,
                     **result.metrics})
        if bar is not None:
            bar.update(1)
    return rows


def mean(rows: Sequence[Row], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(values)) if values else math.nan


def check_window_count(windows: int | None, what: str = "windows") -> None:
    """Refuse a window count below 1 (``None``: the default). Never a silent default for 0."""
    if windows is None:
        return
    if isinstance(windows, bool) or not isinstance(windows, (int, np.integer)) or windows < 1:
        raise ValueError(f"{what}: must be a whole number >= 1, got {windows!r}")


def chosen_windows(env: Any, windows: int | None, default: int, what: str = "windows") -> list[int]:
    """The first ``windows`` test windows of ``env``; ``None``: the first ``default`` (at most all of
    them). An explicit count above the env's test windows is refused, not silently cut."""
    check_window_count(windows, what)
    available = env.unwrapped.windows.num_test
    if windows is not None and windows > available:
        raise ValueError(f"{what}: {windows} asked, but the run's env has only {available} test windows")
    return held_out_windows(env, default if windows is None else windows)


def compare_saved(path: str | os.PathLike, windows: int | None = None,
                  baselines: Sequence[str | Scheduler] | Mapping[str, str | Scheduler] = ("lyra",),
                  trust_model_files: bool | None = None) -> dict[str, list[Row]]:
    """A saved model (run directory, ``model.zip`` or checkpoint) and ``baselines`` on the first
    ``windows`` test windows of its training env (default: the run's ``final_windows``).
    ``trust_model_files``: see :func:`lyra_agents.policy_scheduler.load_policy_scheduler`.
    ``baselines``: names, or ``{label: name or scheduler}``."""
    from lyra_agents.policy_scheduler import load_policy_scheduler
    from lyra_agents.vec_envs import make_eval_env

    check_window_count(windows)
    scheduler = load_policy_scheduler(path, name="policy", trust_model_files=trust_model_files)
    env = make_eval_env(scheduler.config)
    return compare_on(scheduler, env, chosen_windows(env, windows, scheduler.config.final_windows), baselines)


def compare_on(scheduler: Scheduler, env: Any, windows: Sequence[int],
               baselines: Sequence[str | Scheduler] | Mapping[str, str | Scheduler] = ("lyra",),
               bar: Any | None = None) -> dict[str, list[Row]]:
    """``scheduler`` (labelled ``policy``) and ``baselines`` on test ``windows`` of ``env``; ``bar``
    (of ``len(windows) x (1 + len(baselines))`` steps) advanced per window."""
    results = {"policy": evaluate_scheduler(scheduler, env, windows, label="policy", bar=bar)}
    named = baselines if isinstance(baselines, Mapping) else {str(b): b for b in baselines}
    for name, policy in named.items():
        results[name] = evaluate_scheduler(policy, env, windows, label=name, bar=bar)
    return results


def resolve_baselines(names: Sequence[str]) -> dict[str, str | Scheduler]:
    """``--baselines`` checked against the scheduler registry before anything runs: a registered
    name stays a name; a loader name (``model:PATH``) is loaded now. ``ValueError`` naming the
    first unknown, repeated or unloadable one."""
    from lyra_gym.sim import scheduler as registry
    known = registry.available()
    out: dict[str, str | Scheduler] = {}
    for name in names:
        if name in out or name == "policy":
            raise ValueError(f"--baselines: {name!r} given twice" if name in out else
                             "--baselines: 'policy' is the evaluated model's label; not a baseline name")
        if name in known:
            out[name] = name
        elif ":" in name:
            try:
                out[name] = registry.make(name)
            except (KeyError, OSError, ValueError, RuntimeError) as err:
                message = err.args[0] if isinstance(err, KeyError) and err.args else err
                raise ValueError(f"--baselines: {name}: {message}") from None
        else:
            raise ValueError(f"--baselines: unknown scheduler {name!r} (known: {', '.join(known)}, model:PATH)")
    return out


def recorded(results: Mapping[str, Sequence[Row]], env_id: str) -> dict[str, list[Row]]:
    """``results`` as a file records them (``--json``, a run's ``compare.json``): every row also
    names the env id and what produced it (:func:`lyra_gym.provenance.provenance`)."""
    from lyra_gym.provenance import provenance

    made_by = {"env_id": env_id, **provenance()}
    return {label: [{**row, **made_by} for row in rows] for label, rows in results.items()}


def _cell(row: Row, key: str) -> str:
    """``row[key]`` rounded, or why it is missing (jobs left unfinished at the end of the run)."""
    value = row.get(key)
    if value is not None:
        return f"{value:.0f}"
    left = (row.get("jobs_total") or 0) - (row.get("jobs_finished") or 0)
    return f"n/a ({left} unfinished)" if left else "n/a"


def comparison_table(results: Mapping[str, Sequence[Row]], reference: str = "lyra",
                     key: str = "jct_mean_s") -> str:
    """Per-window ``key`` of every policy, the mean, and each policy's ratio to ``reference``."""
    names = list(results)
    windows = [r["window"] for r in next(iter(results.values()))]
    header = ["window", *[f"{n} {key}" for n in names]]
    body = [[str(w), *[_cell(results[n][i], key) for n in names]] for i, w in enumerate(windows)]
    # a mean over only the windows a policy finished would flatter it: n/a unless all are there
    means = {n: mean(results[n], key) if all(r.get(key) is not None for r in results[n]) else math.nan
             for n in names}
    body.append(["mean", *[f"{means[n]:.0f}" if not math.isnan(means[n]) else "n/a" for n in names]])
    if reference in means:
        ratios = [means[n] / means[reference] for n in names]
        body.append([f"/ {reference}", *[f"{r:.3f}" if not math.isnan(r) else "n/a" for r in ratios]])
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(wd) for h, wd in zip(header, widths))]
    lines += ["  ".join(c.rjust(wd) for c, wd in zip(row, widths)) for row in body]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lyra_agents.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("path", help="run directory, its model.zip, or a checkpoint zip")
    parser.add_argument("--windows", type=int, default=None,
                        help="test windows, >= 1 (default: the run's final_windows, at most all of them)")
    parser.add_argument("--baselines", default=None,
                        help="comma-separated scheduler names ('' for none; default lyra); with --suite the "
                             "references, where 'expert' is the run's imitation expert (default lyra,expert)")
    parser.add_argument("--json", default=None, help="write the per-window rows here (atomically)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    parser.add_argument("--trust-model-files", action="store_true",
                        help="load through SB3's pickle path (model.zip fields, vecnormalize.pkl): "
                             "can run code from the files; only for files you trust")
    power = parser.add_argument_group("the paired protocol (lyra_agents.paired): on suite scenarios, not the run's env")
    power.add_argument("--suite", default=None, help="evaluate on this suite's scenarios (v1, v1.1 or a file)")
    power.add_argument("--scenarios", default=None, help="comma-separated scenario names (default: every one)")
    power.add_argument("--trace-seeds", type=int, default=9, help="trace seeds 0..N-1 per scenario (default 9)")
    power.add_argument("--statistic", choices=("iqm", "mean"), default="iqm",
                       help="of the per-unit ratios (default iqm)")
    power.add_argument("--reps", type=int, default=10_000, help="bootstrap samples (default 10000)")
    power.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command: exit status 0; 2 for a refused option, model or output; 1 when ``--json`` cannot
    be written; 130 when interrupted (Ctrl-C, SIGTERM); each a line on stderr."""
    args = _parser().parse_args(argv)
    try:
        with sigterm_as_interrupt():
            return _main(args)
    except KeyboardInterrupt:
        print("lyra_agents.evaluate: interrupted", file=sys.stderr)
        return 130


def _main(args: argparse.Namespace) -> int:
    if args.suite is not None:
        return _main_protocol(args)
    # every option, the model and the output checked before the first window is simulated
    try:
        from lyra_agents.artifacts import find_artifacts
        from lyra_agents.policy_scheduler import load_policy_scheduler, split_trust_option
        from lyra_agents.vec_envs import make_eval_env
        from lyra_gym.outputs import check_out_file

        check_window_count(args.windows, "--windows")
        names = [b.strip() for b in ("lyra" if args.baselines is None else args.baselines).split(",") if b.strip()]
        baselines = resolve_baselines(names)
        base, _ = split_trust_option(args.path)
        find_artifacts(base)  # a missing model or config: one line, before anything else
        if args.json is not None:
            check_out_file(args.json, args.overwrite, inputs=evaluate_inputs(base, names), what="--json")
        scheduler = load_policy_scheduler(args.path, name="policy",
                                          trust_model_files=True if args.trust_model_files else None)
        env = make_eval_env(scheduler.config)
        chosen = chosen_windows(env, args.windows, scheduler.config.final_windows, "--windows")
    except (OSError, ValueError, RuntimeError) as err:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        print(f"lyra_agents.evaluate: error: {lines[0]}", file=sys.stderr)
        return 2
    try:
        _evaluate(args, scheduler, env, chosen, baselines)
    except WriteError as err:  # --json on a full disk: the old file (if any) is left as it was
        print(f"lyra_agents.evaluate: error: {err}", file=sys.stderr)
        return 1
    return 0


def _evaluate(args: argparse.Namespace, scheduler: AgentScheduler, env: Any, chosen: Sequence[int],
              baselines: Mapping[str, str | Scheduler]) -> None:
    """Simulate, print the table and write ``--json`` (atomically)."""
    from lyra_gym.progress import progress

    print("\n".join(header_lines(scheduler.config, env, chosen)), flush=True)
    with progress(len(chosen) * (1 + len(baselines)), unit="sim") as bar:
        results = compare_on(scheduler, env, chosen, baselines, bar=bar)
    print(comparison_table(results))
    if args.json:
        with written(args.json) as tmp:
            tmp.write_text(json.dumps(recorded(results, scheduler.config.env_id), indent=2) + "\n")


def header_lines(config: Any, env: Any, windows: Sequence[int]) -> list[str]:
    """What the evaluation runs on, printed before it starts: env id, trace and trace seed, cluster
    file, knowledge mode, test windows (length and warm start); for a generalist, that these are the
    config's own env settings, not its scenarios'."""
    from lyra_agents.paired import relative_path

    inner = env.unwrapped
    cluster = relative_path(config.sim_config) if config.sim_config else "default (no file)"
    lines = [f"env {config.env_id}, trace {config.trace} seed {config.trace_seed}, cluster {cluster}, "
             f"knowledge {inner.sim_config.knowledge.mode}",
             f"test windows {', '.join(map(str, windows))} of {inner.windows.num_test} "
             f"({config.window_s / 3600:g} h each, warm start {config.warmup_s / 3600:g} h)"]
    if config.scenarios:
        lines.append(f"trained on suite {config.suite} scenarios {', '.join(config.scenarios)}; evaluated here on "
                     f"the config's own env above (--suite {config.suite} --scenarios NAME: on a scenario's units)")
    return lines


def _main_protocol(args: argparse.Namespace) -> int:
    """``--suite``: the paired protocol (:mod:`lyra_agents.paired`) on the suite's scenarios."""
    from lyra_agents import paired

    try:
        from lyra_agents.artifacts import find_artifacts
        from lyra_agents.policy_scheduler import load_policy_scheduler, split_trust_option
        from lyra_agents.suite import get_suite
        from lyra_gym.outputs import check_out_file

        check_window_count(args.windows, "--windows")
        paired.check_numbers(args.trace_seeds, args.reps, args.seed)
        protocol = paired.Protocol(tuple(range(args.trace_seeds)), 3 if args.windows is None else args.windows)
        suite = get_suite(args.suite)
        names = list(suite.scenarios) if args.scenarios is None else \
            [n.strip() for n in args.scenarios.split(",") if n.strip()]
        scenarios = [protocol.scenario(suite.get(n)) for n in names]
        references = paired.references_of(args.baselines)
        base, _ = split_trust_option(args.path)
        find_artifacts(base)
        if args.json is not None:
            inputs = evaluate_inputs(base, references)
            if suite.source != "built in":
                inputs["--suite"] = suite.source
            check_out_file(args.json, args.overwrite, inputs=inputs, what="--json")
        scheduler = load_policy_scheduler(args.path, name="policy",
                                          trust_model_files=True if args.trust_model_files else None)
        factories = {"policy": lambda: scheduler,
                     **{r: paired.reference_factory(r, scheduler.config) for r in references}}
    except (OSError, ValueError, RuntimeError) as err:
        lines = str(err).strip().splitlines() or [type(err).__name__]
        print(f"lyra_agents.evaluate: error: {lines[0]}", file=sys.stderr)
        return 2
    try:
        evaluate_protocol(scheduler, suite, scenarios, factories, references, path=args.path,
                          statistic=args.statistic, reps=args.reps, seed=args.seed, json_file=args.json)
    except WriteError as err:
        print(f"lyra_agents.evaluate: error: {err}", file=sys.stderr)
        return 1
    return 0


def evaluate_protocol(scheduler: AgentScheduler, suite: Any, scenarios: Sequence[Any],
                      factories: Mapping[str, Callable[[], Any]], references: Sequence[str], *, path: Any,
                      statistic: str = "iqm", reps: int = 10_000, seed: int = 0, json_file: Any = None) -> None:
    """Header, simulations, one block of paired intervals per scenario, ``json_file`` (atomically):
    the paired protocol of ``--suite`` for ``factories["policy"]`` (``scheduler``, named ``path``)
    against ``references``; also :mod:`lyra_agents.preempt_search`'s ``evaluate``."""
    from lyra_agents import paired
    from lyra_gym.progress import progress

    expert = paired.expert_name(scheduler.config)
    print(f"suite {suite.version}; policy = {path}; expert = {expert}; {statistic.upper()} of the "
          f"per-unit JCT ratio, 95 % bootstrap over units ({reps} samples, seed {seed})")
    for scenario in scenarios:
        print(paired.scenario_header(scenario, scheduler.config.env_id))
    sims = sum(len(s.seeds()) * len(s.windows) for s in scenarios) * len(factories)
    jct: dict[str, dict[paired.Unit, float]] = {label: {} for label in factories}
    blocks = []
    with progress(sims, unit="sim") as bar:
        for scenario in scenarios:
            one = paired.run_units(factories, scenario, bar=bar)
            pairs = paired.compare(one, "policy", references, statistic, reps, seed)
            blocks.append(paired.result_lines(scenario.name, len(one["policy"]), pairs))
            for label in jct:
                jct[label].update(one[label])
    print("\n".join(line for block in blocks for line in block))
    if json_file:
        with written(json_file) as tmp:
            rows = recorded({"units": paired.unit_rows(jct)}, scheduler.config.env_id)
            tmp.write_text(json.dumps(rows, indent=2) + "\n")


def evaluate_inputs(path: str, baselines: Sequence[str]) -> dict[str, str | os.PathLike[str] | None]:
    """``{what: path}`` of every file the command reads: the model, its statistics and config, the files
    that config names (:func:`lyra_agents.artifacts.run_inputs`) and each ``model:PATH`` baseline's."""
    from lyra_agents.policy_scheduler import split_trust_option
    from lyra_gym.outputs import named_inputs

    pairs = run_inputs("PATH", path)
    for name in baselines:
        if name.startswith("model:"):
            try:
                base, _ = split_trust_option(name[len("model:"):])
            except ValueError:
                continue
            pairs += run_inputs(f"--baselines {name}", base)
    return named_inputs(pairs)


if __name__ == "__main__":
    sys.exit(main())
