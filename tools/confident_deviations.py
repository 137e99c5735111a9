"""Are a masked-PPO policy's most confident deviations from its expert the good ones?

    python tools/confident_deviations.py RUN_OR_MODEL --scenario overload --margins 0,0.5,1,2 --out dev.csv
    python tools/confident_deviations.py --table dev.csv

A ``-v2`` policy (``algo: masked_ppo``) is played deterministically on one suite scenario of its
config, with a margin: a dimension takes the policy's most likely value only where that value's
log-probability exceeds the expert's (the neutral value, which reproduces the guide bit for bit)
by more than ``margin`` nats, else the neutral one (:func:`gated`). Margin 0 is the plain
deterministic policy; a margin above every gap is the expert itself. Each margin is paired with the
expert (:func:`lyra_agents.paired.expert_name`) on the scenario's units as ``python -m
lyra_agents.evaluate --suite`` pairs them. If the deviations the policy is surest of were better
than the expert's choice, some margin would beat the expert where margin 0 does not.

CSV rows: ``margin, trace_seed, window, deviations, jct_policy_s, jct_expert_s, ratio``
(``deviations``: dimensions set away from neutral over the window); ``--table``: per margin the
units, the mean deviations per unit and the IQM and mean of the ratio with 95 % bootstrap
intervals (:func:`lyra_agents.paired.paired_interval`, seed 0).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

COLUMNS = ("margin", "trace_seed", "window", "deviations", "jct_policy_s", "jct_expert_s", "ratio")


def gated(log_probs: np.ndarray, neutral: np.ndarray, margin: float) -> np.ndarray:
    """Per dimension the most likely value where its log-probability exceeds the neutral value's by
    more than ``margin`` (nats), else the neutral value. ``log_probs``: ``[dims, values]``, -inf
    where masked; ``neutral``: ``[dims]``, valid values."""
    rows = np.arange(len(neutral))
    best = log_probs.argmax(axis=1)
    gain = log_probs[rows, best] - log_probs[rows, neutral]
    return np.where(gain > margin, best, neutral)


def gated_scheduler(path: str, margin: float) -> Any:
    """The policy at ``path`` (a ``-v2`` masked-PPO run) as a scheduler deciding by :func:`gated`;
    its ``deviations`` counts the dimensions set away from neutral."""
    import torch

    from lyra_agents.policy_scheduler import PolicyScheduler, lever_point, load_policy_scheduler

    class GatedPolicy(PolicyScheduler):
        deviations = 0
        _neutral: np.ndarray

        def _lever_guidance(self, view: Any) -> Any:
            self._neutral = np.asarray(self.codec.neutral(lever_point(view, self.codec).slots))
            return super()._lever_guidance(view)

        def act(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
            if self.normalizer is not None:
                obs = self.normalizer.normalize_obs(obs)
            with torch.no_grad():
                log_probs = self.model.dimension_log_probs(torch.as_tensor(obs[None, :], dtype=torch.float32),
                                                           torch.as_tensor(masks[None, :]))[0].numpy()
            action = gated(log_probs, self._neutral, margin)
            self.deviations += int((action != self._neutral).sum())
            return action

    loaded = load_policy_scheduler(path, name="policy")
    cfg = loaded.config
    if cfg.algo != "masked_ppo" or not loaded.levers:
        raise ValueError(f"{path}: a -v2 masked_ppo run expected (algo {cfg.algo}, env {cfg.env_id})")
    return GatedPolicy(loaded.model, loaded.config, loaded.normalizer, name="policy")


def deviation_rows(model_path: str, scenario_name: str, margins: Sequence[float], trace_seeds: int,
                   windows: int) -> list[dict[str, Any]]:
    """The CSV rows (module docstring) of the policy at ``model_path`` on ``scenario_name``."""
    from lyra_agents import paired
    from lyra_agents.suite import get_suite

    config = gated_scheduler(model_path, 0.0).config
    scenario = paired.Protocol(tuple(range(trace_seeds)), windows).scenario(get_suite(config.suite).get(scenario_name))
    made: dict[float, list[Any]] = {margin: [] for margin in margins}  # per margin, one agent per unit
    units: list[tuple[int, int]] = []  # (trace seed, window), in the order they are played

    def factory(margin: float) -> Any:
        def make() -> Any:
            made[margin].append(gated_scheduler(model_path, margin))
            return made[margin][-1]
        return make

    def test_windows(trace_seed: int, trace: Any) -> list[Any]:
        windows = scenario.test_windows(trace)
        units.extend((trace_seed, w.index) for w in windows)
        return windows

    factories = {"expert": paired.reference_factory(paired.EXPERT, config)}
    factories.update({f"margin {m}": factory(m) for m in margins})
    jct = paired.run_units(factories, scenario, windows_of=test_windows)
    rows = []
    for k, (trace_seed, window) in enumerate(units):
        expert = jct["expert"][scenario.name, trace_seed, window]
        for margin in margins:
            policy = jct[f"margin {margin}"][scenario.name, trace_seed, window]
            rows.append({"margin": margin, "trace_seed": trace_seed, "window": window,
                         "deviations": made[margin][k].deviations, "jct_policy_s": round(policy, 3),
                         "jct_expert_s": round(expert, 3), "ratio": round(policy / expert, 6)})
    return rows


def table(path: Path) -> str:
    """The Markdown table of a CSV this tool wrote: per margin, IQM and mean of the ratio."""
    from lyra_agents.paired import interval_cells

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    lines = ["| margin (nats) | units | deviations per unit, mean | IQM of policy / expert [95 % CI] "
             "| mean [95 % CI] |", "|---:|---:|---:|---:|---:|"]
    for margin in sorted({float(r["margin"]) for r in rows}):
        chosen = [r for r in rows if float(r["margin"]) == margin]
        ratios = np.array([float(r["ratio"]) for r in chosen])
        cells = interval_cells(ratios)
        deviations = np.mean([int(r["deviations"]) for r in chosen])
        lines.append(f"| {margin:g} | {len(ratios)} | {deviations:.1f} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", help="a run folder, its model.zip or a checkpoint zip")
    parser.add_argument("--scenario", default="overload", help="a suite scenario (default overload)")
    parser.add_argument("--margins", default="0,0.5,1,2", help="comma-separated nats >= 0 (default 0,0.5,1,2)")
    parser.add_argument("--trace-seeds", type=int, default=9, help="trace seeds 0..N-1 (default 9)")
    parser.add_argument("--windows", type=int, default=3, help="test windows per trace seed (default 3)")
    parser.add_argument("--out", type=Path, help="CSV to write")
    parser.add_argument("--table", type=Path, help="print the Markdown table of this CSV and exit")
    args = parser.parse_args(argv)
    if args.table is not None:
        print(table(args.table))
        return 0
    if args.path is None or args.out is None:
        parser.error("a run or model path and --out are needed (or --table CSV)")
    try:
        margins = [float(m) for m in args.margins.split(",")]
    except ValueError:
        parser.error(f"--margins: comma-separated numbers, got {args.margins!r}")
    if not margins or len(set(margins)) != len(margins) or not all(np.isfinite(m) and m >= 0 for m in margins):
        parser.error(f"--margins: distinct finite numbers >= 0, got {args.margins!r}")
    try:
        rows = deviation_rows(args.path, args.scenario, margins, args.trace_seeds, args.windows)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        parser.error(str(exc))
    from lyra_gym.outputs import atomic_write_csv

    atomic_write_csv(args.out, COLUMNS, rows)
    print(table(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
