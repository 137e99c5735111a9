"""The benchmark's held-out scenarios: a trace, a cluster, a window length, and which test windows.

A :class:`Scenario` is data: a trace preset and seed (optionally with another
elastic share), a cluster config (a YAML file under ``traces/`` and/or a few
overriding keys), the window length, and the indices of the test windows that
are evaluated. Its test windows are the environments' own
(:class:`lyra_gym.envs.windows.WindowSampler` over the same trace with the same
``window_s`` and ``test_fraction``: the last 20 % of the trace, tiled, window
``i`` simulated with seed ``1_000_000 + i``), so a scenario that the env can
express (:meth:`Scenario.env_kwargs`) gives exactly the jobs and seeds of
``env.reset(options={"split": "test", "window": i})``.

:data:`SUITE` is the fixed suite of ``python -m lyra_agents.benchmark``. Each
scenario's offered load over its evaluated windows (requested GPU-seconds over
training GPU-seconds; elasticity and loaning ignored) is
:meth:`Scenario.offered_load`; the benchmark prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from lyra_gym.envs.windows import Window, WindowSampler
from lyra_gym.model.config import SimConfig, config_from_dict, config_to_dict, load_config
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.tracegen import PRESETS, generate_trace, offered_load

#: Where the shipped cluster files live (``traces/`` beside the packages, in a source checkout).
TRACES_DIR = Path(__file__).resolve().parents[1] / "traces"


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra``'s keys replacing (recursively for mappings) its own."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Scenario:
    """One held-out scenario.

    :param name: the name on the command line and in results.
    :param description: one line: what it stresses.
    :param trace: a trace preset name (:data:`lyra_gym.workloads.tracegen.PRESETS`).
    :param trace_seed: the preset's seed.
    :param trace_seeds: independent trace seeds evaluated, each with :attr:`windows` (empty:
        ``(trace_seed,)`` alone); a (trace seed, window) pair is one unit of the benchmark.
    :param elastic_share: replaces the preset's elastic share (None: the preset's). The
        generator draws the elastic flags last, so only the flags (and elastic ranges) change.
    :param config_file: a cluster config YAML, relative to ``traces/`` or absolute (None: defaults).
    :param config: keys that override the file's (or the defaults'), e.g. ``{"demand_preset": "strong"}``.
    :param window_s: window (episode) length, s.
    :param warmup_s: warm start: s of jobs before each window run by the heuristic first (0 = cold).
    :param windows: the test windows evaluated (indices into the env's test windows).
    :param test_fraction: the share of the trace kept for test windows (the envs' 0.2).
    """

    name: str
    description: str
    trace: str = "env-14d"
    trace_seed: int = 0
    trace_seeds: tuple[int, ...] = ()
    elastic_share: float | None = None
    config_file: str | None = None
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    window_s: float = 12 * 3600.0
    warmup_s: float = 0.0
    windows: tuple[int, ...] = (0, 1, 2)
    test_fraction: float = 0.2

    def preset(self) -> Any:
        if self.trace not in PRESETS:
            raise ValueError(f"scenario {self.name!r}: unknown trace preset {self.trace!r}")
        p = PRESETS[self.trace]
        return p if self.elastic_share is None else replace(p, elastic_share=self.elastic_share)

    def seeds(self) -> tuple[int, ...]:
        """The trace seeds evaluated: :attr:`trace_seeds`, or ``(trace_seed,)``."""
        return self.trace_seeds or (self.trace_seed,)

    def build_trace(self, seed: int | None = None) -> list[JobSpec]:
        """The trace of ``seed`` (default :attr:`trace_seed`)."""
        return generate_trace(self.preset(), self.trace_seed if seed is None else seed)

    def config_path(self) -> Path | None:
        if self.config_file is None:
            return None
        path = Path(self.config_file)
        return path if path.is_absolute() else TRACES_DIR / path

    def sim_config(self) -> SimConfig:
        path = self.config_path()
        if path is not None and not path.is_file():
            raise FileNotFoundError(f"scenario {self.name!r}: cluster config {path} not found")
        if not self.config:
            return load_config(path) if path is not None else SimConfig()
        base = config_to_dict(load_config(path)) if path is not None else {}
        return config_from_dict(_merge(base, self.config))

    def sampler(self, trace: list[JobSpec]) -> WindowSampler:
        return WindowSampler(trace, self.window_s, self.test_fraction, warmup_s=self.warmup_s)

    def test_windows(self, trace: list[JobSpec], count: int | None = None) -> list[Window]:
        """The evaluated test windows (the first ``count`` of :attr:`windows` when given)."""
        sampler = self.sampler(trace)
        chosen = self.windows if count is None else self.windows[:count]
        return [sampler.test(i) for i in chosen]

    def offered_load(self, trace: list[JobSpec] | None = None, count: int | None = None) -> float:
        """Offered load on the training GPUs over the evaluated windows together (of ``trace``, or
        of every trace seed's trace)."""
        traces = [trace] if trace is not None else [self.build_trace(s) for s in self.seeds()]
        jobs = [j for t in traces for w in self.test_windows(t, count) for j in w.jobs(t)]
        windows = len(traces) * len(self.windows if count is None else self.windows[:count])
        span = (self.window_s + self.warmup_s) * windows
        return offered_load(jobs, self.sim_config().cluster.training_gpus, span)

    def env_kwargs(self) -> dict[str, Any] | None:
        """``gymnasium.make`` keywords giving the same windows, or None when the env cannot express
        the scenario (a preset with another elastic share)."""
        if self.elastic_share is not None:
            return None
        return {"trace": self.trace, "trace_seed": self.trace_seed, "config": self.sim_config(),
                "window_s": self.window_s, "test_fraction": self.test_fraction, "warmup_s": self.warmup_s}


SUITE: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("default", "the envs' default: env-14d seed 0, 16x8 V100 training, 16x8 T4 inference, 12 h"),
        Scenario("contended", "env-14d on 11 training servers (88 GPUs): offered load above 1 "
                              "(the trace's 0.8 x 16/11 = 1.16 overall)", config_file="contended.yaml"),
        Scenario("contended-warm", "contended, each window warm-started: the 6 h of jobs before it run under "
                                   "lyra first (the agent inherits a loaded cluster)",
                 config_file="contended.yaml", warmup_s=6 * 3600.0),
        Scenario("strong-diurnal", "env-14d with demand_preset strong (8x inference peak/trough)",
                 config={"demand_preset": "strong"}),
        Scenario("low-elastic", "env-14d with elastic_share 0.05 instead of 0.3 (same jobs otherwise)",
                 elastic_share=0.05),
        Scenario("paper-shape", "lyra-15d seed 0 on traces/lyra-15d-paper.yaml (1,024 training GPUs, "
                                "160x8 T4 inference), 6 h weekday windows",
                 trace="lyra-15d", config_file="lyra-15d-paper.yaml", window_s=6 * 3600.0, windows=(8, 9, 10)),
    )
}
