"""How far a masked-PPO policy is from its imitation expert, checkpoint by checkpoint.

    python tools/policy_margin.py RUN --scenario history --steps 150 --out margin.csv
    python tools/policy_margin.py --table margin.csv

On the expert's own episode of one test window of a scenario of the run's config (its first test
window, the config's trace seed), for each ``RUN/checkpoints/model_<N>_steps.zip``: the dimensions
with more than one valid value, how many of them the deterministic policy (each dimension's most
likely value) sets otherwise than the expert (by kind: a job slot set to hold, to preempt or to
another weight, and loaning dimensions), the median probability of sampling the expert's whole
action, and the median over steps of the smallest log-probability gap between the expert's value
and the next valid one (nats). A deterministic evaluation differs from the imitation start only
once some gap crosses 0.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

COLUMNS = ("checkpoint", "steps", "choice_dims", "argmax_not_expert", "to_hold", "to_preempt", "to_weight",
           "loaning", "p_expert_action_median", "min_gap_nats_median")


def margins(run: Path, scenario: str, steps: int) -> list[dict[str, Any]]:
    import torch

    from lyra_agents.config import load_train_config
    from lyra_agents.masked_ppo import MaskedPolicy, action_masks, expert_action
    from lyra_agents.model_loading import load_masked_ppo
    from lyra_agents.normalizer_stats import load_normalizer

    torch.set_num_threads(1)
    cfg = load_train_config(run / "config.yaml")
    checkpoints = sorted((run / "checkpoints").glob("model_*_steps.zip"), key=lambda p: int(p.stem.split("_")[1]))
    rows = []
    for zip_path in checkpoints:
        model = load_masked_ppo(cfg, zip_path)
        norm = load_normalizer(zip_path.with_name(zip_path.name.replace("model_", "model_vecnormalize_"))
                               .with_suffix(".npz"))
        slot = cfg.scenarios.index(scenario) if cfg.scenarios else 0
        env = model.group_members(slot, cfg.trace_seed, model.slot_kwargs()[slot])[0]
        obs, _ = env.reset(options={"split": "test", "window": 0})
        dims = flips = 0
        kinds = np.zeros(4, dtype=np.int64)
        p_expert, gaps = [], []
        for _ in range(steps):
            action, masks = expert_action(env), action_masks(env)
            normalized = norm.normalize_obs(obs[None].astype(np.float32)).astype(np.float32)
            with torch.no_grad():
                logp = model.policy.log_probs(torch.as_tensor(normalized), torch.as_tensor(masks)[None])[0]
            choice = (torch.isfinite(logp).sum(dim=1) > 1).numpy()
            dims += int(choice.sum())
            argmax = logp.argmax(dim=1).numpy()
            flipped = (argmax != action) & choice
            flips += int(flipped.sum())
            kinds += deviation_kinds(argmax, flipped, cfg.num_job_slots)
            chosen = torch.as_tensor(action)
            p_expert.append(float(MaskedPolicy.chosen(logp[None], chosen[None]).exp()))
            others = logp.clone()
            others[torch.arange(len(action)), chosen] = -torch.inf
            gap = (logp.gather(1, chosen[:, None])[:, 0] - others.max(dim=1).values).numpy()[choice]
            if gap.size:
                gaps.append(float(gap.min()))
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        model.close()
        rows.append(dict(checkpoint=zip_path.name, steps=int(zip_path.stem.split("_")[1]), choice_dims=dims,
                         argmax_not_expert=flips, **dict(zip(COLUMNS[4:8], kinds.tolist())),
                         p_expert_action_median=round(float(np.median(p_expert)), 4),
                         min_gap_nats_median=round(float(np.median(gaps)), 3) if gaps else float("nan")))
    return rows


def deviation_kinds(argmax: np.ndarray, flipped: np.ndarray, job_slots: int) -> np.ndarray:
    """Counts of the ``flipped`` dimensions by what the policy's value does (``Cluster-v2`` levels):
    a job slot set to 0 (hold), to 5 (preempt) or to another weight 1-4, and loaning dimensions."""
    jobs = flipped[:job_slots]
    values = argmax[:job_slots][jobs]
    hold, preempt = int((values == 0).sum()), int((values == 5).sum())
    return np.array([hold, preempt, len(values) - hold - preempt, int(flipped[job_slots:].sum())])


def table(path: Path) -> str:
    rows = list(csv.DictReader(path.open()))
    lines = ["| PPO steps | dimensions with a choice | argmax not the expert's (hold / preempt / weight / loaning) "
             "| P(expert's whole action), median | smallest gap to the next value, median (nats) |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {int(r['steps']):,} | {int(r['choice_dims']):,} | {r['argmax_not_expert']} ({r['to_hold']} / "
              f"{r['to_preempt']} / {r['to_weight']} / {r['loaning']}) | {r['p_expert_action_median']} | "
              f"{r['min_gap_nats_median']} |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", type=Path, help="a masked_ppo run folder (config.yaml, checkpoints/)")
    parser.add_argument("--scenario", default="history", help="one of the config's scenarios (default history)")
    parser.add_argument("--steps", type=int, default=150, help="expert steps of the test window (default 150)")
    parser.add_argument("--out", type=Path, help="CSV to write")
    parser.add_argument("--table", type=Path, help="print the Markdown table of this CSV and exit")
    args = parser.parse_args(argv)
    if args.table:
        if not args.table.is_file():
            parser.error(f"--table: {args.table}: no such file")
        print(table(args.table))
        return 0
    if args.run is None or not (args.run / "config.yaml").is_file():
        parser.error("RUN: a masked_ppo run folder with config.yaml and checkpoints/ expected")
    if not any((args.run / "checkpoints").glob("model_*_steps.zip")):
        parser.error(f"RUN: {args.run / 'checkpoints'} holds no model_<N>_steps.zip")
    rows = margins(args.run, args.scenario, args.steps)
    if args.out:
        with args.out.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
