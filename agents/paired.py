"""Evaluation with power: a learned agent against references on many paired units (issue 38 item 6).

A **unit** is one (trace seed, test window) of a suite scenario. Every policy runs on the same
units, the same jobs and the same simulation seed (the window's), so the per-unit ratio
``JCT_A / JCT_R`` of an agent ``A`` against a reference ``R`` is paired: what the two share (the
window's load, its job mix) cancels in the ratio. The protocol (:class:`Protocol`) is 9 trace
seeds x 3 test windows per scenario by default (27 units: a paired change against the expert on
suite v1 ``history`` has a 95 % half-width of 1.7 points with them, 2.5 with 15; docs/training.md);
the statistic is the IQM (the benchmark's, :func:`lyra_agents.bench_stats.iqm`) or the mean of the
ratios, with a 95 % percentile bootstrap interval over units (:func:`paired_interval`: units redrawn
with replacement, seeded, ``numpy.random.default_rng(seed)``). The half-width is reported in points
(``100 x (high - low) / 2``: 1 point is 1 % of the reference's JCT).

References: a registry name (``lyra``, ``pollux+loan``), ``expert`` (the agent's imitation expert:
its config's ``bc_expert`` rule, ``small-first``, or its guided heuristic for ``heuristic``) or
``model:PATH`` (another trained run, e.g. the imitation start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from lyra_agents.bench_stats import iqm

#: A unit: (scenario, trace seed, test window index).
Unit = tuple[str, int, int]
#: An evaluate --json file's mean JCTs: {scenario: {policy: {(trace seed, window): mean JCT s}}}.
SuiteUnits = dict[str, dict[str, dict[tuple[int, int], float]]]
K = TypeVar("K", bound=tuple)  # a unit's key: a Unit, or (trace seed, window) within one scenario
STATISTICS = ("iqm", "mean")
#: The reference name that means "the agent's imitation expert".
EXPERT = "expert"


@dataclass(frozen=True)
class Protocol:
    """Which units each scenario is evaluated on: ``trace_seeds`` x the first ``windows`` of the
    scenario's own test windows."""

    trace_seeds: tuple[int, ...] = tuple(range(9))
    windows: int = 3

    def __post_init__(self) -> None:
        if not self.trace_seeds or len(set(self.trace_seeds)) != len(self.trace_seeds) or \
                any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.trace_seeds):
            raise ValueError(f"trace seeds: distinct whole numbers >= 0 expected, got {list(self.trace_seeds)}")
        if isinstance(self.windows, bool) or not isinstance(self.windows, int) or self.windows < 1:
            raise ValueError(f"windows: a whole number >= 1 expected, got {self.windows!r}")

    def scenario(self, scenario: Any) -> Any:
        """``scenario`` on this protocol's trace seeds and its first :attr:`windows` windows;
        ``ValueError`` when it has fewer windows or a trace seed lacks one of them."""
        from dataclasses import replace

        from lyra_agents.suite import count_test_windows

        if len(scenario.windows) < self.windows:
            raise ValueError(f"windows: {self.windows} asked, but scenario {scenario.name!r} lists "
                             f"{len(scenario.windows)} ({list(scenario.windows)})")
        chosen = replace(scenario, trace_seeds=self.trace_seeds, windows=scenario.windows[:self.windows])
        for seed in self.trace_seeds:
            available = count_test_windows(chosen.trace, seed, chosen.window_s, chosen.test_fraction, chosen.warmup_s)
            if max(chosen.windows) >= available:
                raise ValueError(f"scenario {scenario.name!r}: trace {chosen.trace} seed {seed} has {available} "
                                 f"test windows; window {max(chosen.windows)} asked")
        return chosen


@dataclass(frozen=True)
class Paired:
    """The paired comparison of an agent with one reference on one scenario.

    :param ratios: ``JCT_A / JCT_R`` per unit, in unit order.
    :param point: the statistic (:attr:`statistic`) of the ratios.
    :param low: the interval's lower bound; :param high: its upper bound (same scale).
    """

    reference: str
    statistic: str
    ratios: tuple[float, ...]
    point: float
    low: float
    high: float

    @property
    def half_width_points(self) -> float:
        """Half the interval's width in points (100 x the ratio's scale)."""
        return 100.0 * (self.high - self.low) / 2.0


def statistic_of(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Row-wise statistic of a 2-D array (samples x units): ``iqm`` or ``mean``."""
    if name == "mean":
        return lambda a: a.mean(axis=1)
    if name == "iqm":
        def rows_iqm(a: np.ndarray) -> np.ndarray:
            values = np.sort(a, axis=1)
            cut = int(0.25 * values.shape[1])
            return values[:, cut:values.shape[1] - cut].mean(axis=1)
        return rows_iqm
    raise ValueError(f"statistic: must be one of {', '.join(STATISTICS)}, got {name!r}")


def unit_ratios(agent: Mapping[K, float], reference: Mapping[K, float]) -> np.ndarray:
    """``agent[u] / reference[u]`` for every unit, in ``agent``'s order; ``ValueError`` when the two
    were not run on the same units or a JCT is not a positive finite number."""
    if set(agent) != set(reference):
        missing = sorted(set(agent) ^ set(reference))
        raise ValueError(f"not paired: units {missing[:3]} are in one result only")
    a = np.array([agent[u] for u in agent], dtype=float)
    r = np.array([reference[u] for u in agent], dtype=float)
    if not (np.isfinite(a).all() and np.isfinite(r).all() and (r > 0).all()):
        raise ValueError("JCT: positive finite values expected on every unit")
    return a / r


def paired_interval(ratios: Sequence[float] | np.ndarray, statistic: str = "iqm", reps: int = 10_000,
                    size: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(point, low, high): ``statistic`` of ``ratios`` and its percentile bootstrap interval: each of
    ``reps`` samples redraws ``len(ratios)`` units with replacement; the bounds are the
    ``(1 - size) / 2`` and ``(1 + size) / 2`` percentiles (``np.percentile``, linear) of the samples'
    statistics. E.g. ratios (0.8, 1.0), mean: the samples' means are 0.8, 0.9, 1.0 with
    probabilities 1/4, 1/2, 1/4, so the 95 % interval is (0.8, 1.0)."""
    values = np.asarray(ratios, dtype=float).ravel()
    if values.size == 0 or not np.isfinite(values).all():
        raise ValueError("ratios: a non-empty array of finite values expected")
    if reps < 1 or not 0 < size < 1:
        raise ValueError(f"reps >= 1 and size in (0, 1) expected, got {reps} and {size}")
    rows = statistic_of(statistic)
    point = float(rows(values[None, :])[0]) if statistic == "mean" else iqm(values)
    rng = np.random.default_rng(seed)
    stats = np.empty(reps)
    chunk = max(1, 2_000_000 // values.size)
    for start in range(0, reps, chunk):
        n = min(chunk, reps - start)
        stats[start:start + n] = rows(values[rng.integers(0, values.size, size=(n, values.size))])
    tail = 100 * (1 - size) / 2
    low, high = np.percentile(stats, [tail, 100 - tail])
    return point, float(low), float(high)


def interval_cells(ratios: Sequence[float] | np.ndarray) -> tuple[str, str]:
    """``"point [low, high]"`` of the IQM and of the mean of ``ratios`` (:func:`paired_interval`,
    seed 0), for the tools' Markdown tables."""
    iqm_cell, mean_cell = (f"{point:.3f} [{low:.3f}, {high:.3f}]"
                           for point, low, high in (paired_interval(ratios, s) for s in ("iqm", "mean")))
    return iqm_cell, mean_cell


def compare(jct: Mapping[str, Mapping[Unit, float]], agent: str, references: Sequence[str],
            statistic: str = "iqm", reps: int = 10_000, seed: int = 0) -> list[Paired]:
    """:class:`Paired` of ``agent`` against each of ``references``, from per-unit mean JCTs
    ``jct[policy][unit]`` (one scenario's units)."""
    out = []
    for ref in references:
        ratios = unit_ratios(jct[agent], jct[ref])
        point, low, high = paired_interval(ratios, statistic, reps, seed=seed)
        out.append(Paired(ref, statistic, tuple(float(r) for r in ratios), point, low, high))
    return out


def run_units(schedulers: Mapping[str, Callable[[], Any]], scenario: Any, bar: Any | None = None,
              windows_of: Callable[[int, Any], Sequence[Any]] | None = None) -> dict[str, dict[Unit, float]]:
    """Mean JCT (s) of each policy on every unit of ``scenario`` (already on the protocol's seeds and
    windows, :meth:`Protocol.scenario`): ``schedulers`` maps a label to a factory of a scheduler (or
    a registry name) built afresh per unit; an agent hands over from its heuristic at a
    warm-started window's start, as in the env. ``bar`` is advanced per simulation.
    ``windows_of(trace_seed, trace)``: other windows than the scenario's test windows (the train
    windows of ``tools/train_window_gap.py``); a unit's index is then the window's ``index``."""
    from lyra_agents.policy_scheduler import AgentScheduler
    from lyra_gym.run.simulate import load_profile_set, simulate

    config = scenario.sim_config()
    profiles = load_profile_set(config)
    out: dict[str, dict[Unit, float]] = {label: {} for label in schedulers}
    for trace_seed in scenario.seeds():
        trace = scenario.build_trace(trace_seed)
        for window in (scenario.test_windows(trace) if windows_of is None else windows_of(trace_seed, trace)):
            jobs = window.jobs(trace)
            for label, make in schedulers.items():
                if bar is not None:
                    bar.set_description_str(f"{label} on {scenario.name} seed {trace_seed} window {window.index}",
                                            refresh=False)
                scheduler = make()
                if isinstance(scheduler, AgentScheduler):
                    scheduler.start_window(window)
                result = simulate(jobs, scheduler, config, seed=window.seed, profiles=profiles)
                out[label][scenario.name, trace_seed, window.index] = float(result.metrics["jct_mean_s"])
                if bar is not None:
                    bar.update(1)
    return out


def expert_name(config: Any) -> str:
    """The scheduler name of a run's imitation expert: its ``bc_expert`` rule as a benchmark
    policy (``small-first``; ``rule:PATH`` for a ``bc_rule`` file), or its guided heuristic
    (``lyra``) for ``heuristic``."""
    from lyra_agents.experts import SMALL_FIRST

    expert = getattr(config, "bc_expert", "heuristic")
    if expert == "rule":
        return f"rule:{config.bc_rule}"
    return SMALL_FIRST if expert == "small_first" else config.heuristic


def reference_factory(name: str, agent_config: Any) -> Callable[[], Any]:
    """A factory of the scheduler that reference ``name`` means (module docstring); ``ValueError``
    naming an unknown one. A ``model:PATH`` is loaded once, here."""
    from lyra_agents.experts import SMALL_FIRST
    from lyra_gym.sim import scheduler as registry

    if name == EXPERT:
        name = expert_name(agent_config)
    if name == SMALL_FIRST:
        from lyra_agents.small_first import SmallFirstScheduler
        return SmallFirstScheduler
    if name in registry.available():
        return lambda: name
    if name.startswith("model:"):
        from lyra_agents.policy_scheduler import load_policy_scheduler
        loaded = load_policy_scheduler(name[len("model:"):], name=name)
        return lambda: loaded
    if name.startswith("rule:"):  # through the registry's loader (entry point): no import cycle
        rule = registry.make(name)
        return lambda: rule
    raise ValueError(f"unknown reference {name!r} (known: expert, {SMALL_FIRST}, model:PATH, rule:PATH, "
                     f"{', '.join(registry.available())})")


def result_lines(scenario: str, units: int, pairs: Sequence[Paired], agent: str = "policy") -> list[str]:
    """One line per reference: ``agent / R  IQM 0.912  95 % [0.894, 0.931]  half-width 1.9 points``."""
    width = max(len(p.reference) for p in pairs)
    lines = [f"{scenario}: {units} paired units"]
    for p in pairs:
        lines.append(f"  {agent} / {p.reference.ljust(width)}  {p.statistic.upper()} {p.point:.3f}  "
                     f"95 % [{p.low:.3f}, {p.high:.3f}]  half-width {p.half_width_points:.1f} points")
    return lines


def unit_rows(jct: Mapping[str, Mapping[Unit, float]]) -> list[dict[str, Any]]:
    """Per-unit rows ``{"policy", "scenario", "trace_seed", "window", "jct_mean_s"}`` (``--json``)."""
    return [{"policy": label, "scenario": u[0], "trace_seed": u[1], "window": u[2], "jct_mean_s": value}
            for label, units in jct.items() for u, value in units.items()]


def read_units(path: Any) -> SuiteUnits:
    """``{scenario: {policy: {(trace_seed, window): mean JCT s}}}`` of an ``evaluate --suite --json``
    file (:func:`unit_rows` under ``"units"``); ValueError naming the file and the row otherwise."""
    import json
    from pathlib import Path

    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("units"), list):
        raise ValueError(f"{path}: not an evaluate --suite --json file (no 'units' list)")
    out: SuiteUnits = {}
    for i, row in enumerate(data["units"]):
        try:
            key = (int(row["trace_seed"]), int(row["window"]))
            out.setdefault(str(row["scenario"]), {}).setdefault(str(row["policy"]), {})[key] = float(row["jct_mean_s"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: units[{i}]: {err!r}") from None
    return out


# ---------------------------------------------------------------------- the command's mode
def relative_path(path: Any) -> str:
    """``path`` relative to the working folder when under it (shorter headers), else as it is."""
    import os

    text = str(path)
    try:
        rel = os.path.relpath(text)
    except ValueError:
        return text
    return text if rel.startswith("..") else rel


def scenario_header(scenario: Any, env_id: str) -> str:
    """What a scenario's units are, in one line: env id, trace and seeds, cluster file (and the keys
    that override it), knowledge mode, windows, window length and warm start."""
    path = scenario.config_path()
    cluster = relative_path(path) if path is not None else "default (no file)"
    overrides = [f"{k}={v}" for k, v in scenario.config.items() if k != "knowledge"]
    if overrides:
        cluster += " + " + ", ".join(overrides)
    share = f" (elastic share {scenario.elastic_share:g})" if scenario.elastic_share is not None else ""
    seeds = scenario.seeds()
    return (f"{scenario.name}: env {env_id}, trace {scenario.trace}{share} seeds {', '.join(map(str, seeds))}, "
            f"cluster {cluster}, knowledge {scenario.sim_config().knowledge.mode}, windows "
            f"{', '.join(map(str, scenario.windows))} ({scenario.window_s / 3600:g} h, warm start "
            f"{scenario.warmup_s / 3600:g} h)")


def references_of(text: str | None) -> list[str]:
    """``--baselines`` in the protocol's mode (default ``lyra,expert``); ``ValueError`` on a repeat."""
    names = [n.strip() for n in ("lyra,expert" if text is None else text).split(",") if n.strip()]
    if not names:
        raise ValueError("--baselines: at least one reference expected with --suite")
    for i, name in enumerate(names):
        if name in names[:i] or name == "policy":
            raise ValueError(f"--baselines: {name!r} given twice" if name != "policy" else
                             "--baselines: 'policy' is the evaluated model's label; not a reference")
    return names


def check_numbers(trace_seeds: int, reps: int, seed: int) -> None:
    """The protocol's counts: ``ValueError`` naming the option."""
    for option, value, least in (("--trace-seeds", trace_seeds, 1), ("--reps", reps, 1), ("--seed", seed, 0)):
        if value < least:
            raise ValueError(f"{option}: must be >= {least}, got {value}")
