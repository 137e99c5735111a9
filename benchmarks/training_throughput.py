"""Throughput where training spends it (issue 38 item 5): env.step and whole training updates.

    python benchmarks/training_throughput.py --out docs/training-throughput.csv
    python benchmarks/training_throughput.py --label old --append docs/training-throughput.csv  # in an old checkout
    python benchmarks/training_throughput.py --from-run RUN --label ... --append docs/training-throughput.csv

Rows (CSV: label, what, config, env_id, steps, cpu_s, steps_per_cpu_s, wall_s, steps_per_wall_s):

- ``env.step``: the expert's steps (``expert_action()``) on the env of a training config (its env
  settings: knowledge, warm start, scenario trace; resets not counted), process time;
- ``train``: one collection round and update of the config's algorithm after one warm-up round
  (``maskable_ppo``: SB3's ``learn`` of ``n_envs x n_steps``; ``masked_ppo``: one round of every
  group; ``2 env processes``: the same with ``vec_env: subproc``, the envs in worker processes,
  their CPU time counted too), env steps per CPU second and per wall second, everything in the
  round counted;
- ``train.py run``: a whole masked-PPO run (``--from-run RUN``, its folder's ``progress.csv``):
  env steps over the process time of its resets, steps, policy and updates (the env workers'
  included; imitation and evaluations not counted), and over its wall time.

Process time first: on a shared machine the wall clock counts other processes; the wall clock is
what env processes buy (two cores working at once), so those rows give both. A config or env
id the checkout does not have (an old commit) is skipped with a line on stderr, so the same script
measures old and new side by side.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from lyra_gym.outputs import atomic_write_csv

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {  # what: the shipped generalist's env settings under each guided id and both algorithms
    "generalist-v1": ("agents/configs/cluster-generalist.yaml", "LyraGym/Cluster-v1"),
    "generalist-v2": ("agents/configs/cluster-v2-pollux-mppo.yaml", "LyraGym/Cluster-v2"),
}
COLUMNS = ("label", "what", "config", "env_id", "steps", "cpu_s", "steps_per_cpu_s", "wall_s", "steps_per_wall_s")


def env_step_rate(config: str, env_id: str, steps: int, seed: int = 0) -> tuple[int, float]:
    """(steps, CPU s) of ``steps`` expert steps on ``config``'s env under ``env_id``."""
    import gymnasium as gym

    from lyra_agents.config import load_train_config

    cfg = load_train_config(ROOT / config)
    env = gym.make(env_id, **{**cfg.env_kwargs(), "num_job_slots": cfg.num_job_slots}).unwrapped
    env.reset(seed=seed)
    done, cpu, count = False, 0.0, 0
    while count < steps:
        if done:
            seed += 1
            env.reset(seed=seed)
        action = env.expert_action()
        t0 = time.process_time()
        *_, terminated, truncated, _ = env.step(action)
        cpu += time.process_time() - t0
        done = terminated or truncated
        count += 1
    env.close()
    return count, cpu


def train_rate(config: str, algo: str, overrides: dict[str, Any]) -> tuple[int, float, float]:
    """(env steps, CPU s, wall s) of one training round of ``config`` after a warm-up round; with env
    worker processes (masked PPO, ``vec_env: subproc``) the CPU time counts theirs too."""
    import torch

    from lyra_agents.config import load_train_config

    torch.set_num_threads(1)
    cfg = load_train_config(ROOT / config).replace(algo=algo, bc_steps=0, eval_freq=0, checkpoint_freq=0,
                                                   **overrides)
    if algo == "masked_ppo":
        from lyra_agents.masked_ppo import MaskedPPO

        model = MaskedPPO(cfg, "cpu")
        if cfg.vec_env == "subproc" and not hasattr(model, "members"):
            raise RuntimeError("this checkout's masked PPO has no env processes")
        model.learn(1)  # one round: the warm-up
        members = model.members() if hasattr(model, "members") else None
        workers0 = getattr(members, "cpu_spent", 0.0)  # env processes' CPU (none in this process)
        before, t0, w0 = model.num_timesteps, time.process_time(), time.perf_counter()
        model.learn(model.num_timesteps + 1)
        wall = time.perf_counter() - w0
        steps = model.num_timesteps - before
        cpu = time.process_time() - t0 + getattr(members, "cpu_spent", 0.0) - workers0
        model.close()
        return steps, cpu, wall
    sys.path.insert(0, str(ROOT))
    from train import build_model  # (train.py's own: the envs and model as a run builds them)

    venv, model = build_model(cfg, None, None, False)
    round_steps = cfg.n_envs * cfg.n_steps
    model.learn(round_steps)
    t0, w0 = time.process_time(), time.perf_counter()
    model.learn(round_steps, reset_num_timesteps=False)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    venv.close()
    return round_steps, cpu, wall


MASKED = {"n_envs": 9, "group_size": 4, "curriculum_start_s": 10800.0}
#: (what, algo, overrides) of the training rows, each on the generalist's v1 config
TRAIN_ROWS = (("train maskable_ppo", "maskable_ppo", {}),
              ("train masked_ppo", "masked_ppo", {**MASKED, "vec_env": "dummy"}),
              ("train masked_ppo, 2 env processes", "masked_ppo", {**MASKED, "vec_env": "subproc"}))


def measure(label: str, env_steps: int) -> list[dict[str, Any]]:
    rows = []
    for what, (config, env_id) in CONFIGS.items():
        try:
            steps, cpu = env_step_rate(config, env_id, env_steps)
        except Exception as err:  # an old checkout lacks the config or the id: skip, say so
            print(f"skip env.step {what}: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        rows.append(dict(label=label, what="env.step", config=config, env_id=env_id, steps=steps,
                         cpu_s=round(cpu, 2), steps_per_cpu_s=round(steps / cpu)))
    config = CONFIGS["generalist-v1"][0]
    for what, algo, overrides in TRAIN_ROWS:
        try:
            steps, cpu, wall = train_rate(config, algo, overrides)
        except Exception as err:  # as above
            print(f"skip {what}: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        rows.append(dict(label=label, what=what, config=config, env_id="LyraGym/Cluster-v1", steps=steps,
                         cpu_s=round(cpu, 2), steps_per_cpu_s=round(steps / cpu), wall_s=round(wall, 2),
                         steps_per_wall_s=round(steps / wall)))
    return rows


def run_row(label: str, run: Path) -> dict[str, Any]:
    """The row of a whole ``train.py`` run of masked PPO (its folder's ``progress.csv``, last row
    with counters): env steps, process time (resets, env steps, policy, update: the workers'
    included) and wall time (steps over ``time/fps``, which train.py counts from the first round)."""
    import yaml

    rows = [r for r in csv.DictReader((run / "progress.csv").open(newline="")) if r.get("time/total_timesteps")]
    if not rows:
        raise ValueError(f"{run / 'progress.csv'}: no row with time/total_timesteps (not a masked PPO run?)")
    last, cfg = rows[-1], yaml.safe_load((run / "config.yaml").read_text())
    steps = int(last["time/total_timesteps"])
    cpu = sum(float(last[f"time/{part}_cpu_s"]) for part in ("reset", "env", "policy", "update"))
    wall = steps / float(last["time/fps"])
    processes = ", 2 env processes" if cfg.get("vec_env") == "subproc" else ""
    return dict(label=label, what=f"train.py run{processes}", config=str(cfg.get("name", run.name)),
                env_id=cfg.get("env_id", ""), steps=steps, cpu_s=round(cpu, 1), steps_per_cpu_s=round(steps / cpu),
                wall_s=round(wall, 1), steps_per_wall_s=round(steps / wall))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="new", help="the row label (e.g. a commit)")
    parser.add_argument("--env-steps", type=int, default=2000, help="expert steps per env.step row")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--out", type=Path, help="write the CSV here (replacing it)")
    out.add_argument("--append", type=Path, help="append rows to this CSV (header if new)")
    parser.add_argument("--table", type=Path, help="print the Markdown table of this CSV and exit")
    parser.add_argument("--from-run", type=Path, metavar="RUN",
                        help="instead of measuring: the row of a finished masked-PPO train.py run folder")
    args = parser.parse_args(argv)
    if args.table:
        rows = list(csv.DictReader(args.table.open()))
        print("| label | what | env | steps | CPU s | steps per CPU-s | steps per wall-s |\n"
              "|---|---|---|---:|---:|---:|---:|")
        for r in rows:
            wall = f"{int(r['steps_per_wall_s']):,}" if r.get("steps_per_wall_s") else ""
            print(f"| {r['label']} | {r['what']} | {r['env_id']} | {r['steps']} | {r['cpu_s']} | "
                  f"{int(r['steps_per_cpu_s']):,} | {wall} |")
        return 0
    rows = [run_row(args.label, args.from_run)] if args.from_run else measure(args.label, args.env_steps)
    path = args.out or args.append
    for r in rows:
        print(r)
    if path is not None:
        kept = list(csv.DictReader(path.open(newline=""))) if args.append and path.exists() else []
        atomic_write_csv(path, COLUMNS, kept + rows)  # a row without wall-clock columns: left empty
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
