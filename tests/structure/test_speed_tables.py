"""benchmarks/config_steps.py and benchmarks/step_profile.py, the generators of docs/speed.md's
tables: each table is read from its CSV as written (a configuration's policies side by side; the
profile's parts nested, Lyra's phases inside its decision), and a tiny measurement writes a CSV
that the table reads back."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import config_steps  # noqa: E402


def test_the_table_puts_each_configurations_policies_side_by_side():
    rows = [dict(label="a", config="cluster", env_id="LyraGym/Cluster-v1", envs="1", policy="random", steps="10",
                 cpu_s="0.01", steps_per_cpu_s="1000"),
            dict(label="a", config="cluster", env_id="LyraGym/Cluster-v1", envs="1", policy="expert", steps="10",
                 cpu_s="0.01", steps_per_cpu_s="2500"),
            dict(label="a", config="loaning", env_id="LyraGym/Loaning-v1", envs="9", policy="expert", steps="10",
                 cpu_s="0.01", steps_per_cpu_s="12345")]
    assert config_steps.table(rows).splitlines()[2:] == [
        "| a | `cluster` | Cluster-v1 | 1 | 1,000 | 2,500 |",
        "| a | `loaning` | Loaning-v1 | 9 |  | 12,345 |"]


def test_a_tiny_measurement_round_trips_through_its_csv(tmp_path):
    out = tmp_path / "steps.csv"
    assert config_steps.main(["--steps", "4", "--warmup", "1", "--configs", "cluster", "--label", "t",
                              "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open(newline="")))
    assert [(r["config"], r["policy"], r["steps"]) for r in rows] == [("cluster", "random", "4"),
                                                                       ("cluster", "expert", "4")]
    assert all(int(r["steps_per_cpu_s"]) > 0 for r in rows)
    assert config_steps.table(rows).count("`cluster`") == 1


def test_the_step_profile_names_every_part_and_nests_lyras_phases():
    import step_profile

    stats, total = step_profile.profile(steps=30, warmup=5)
    rows = step_profile.shares(stats, total, 30)
    assert [r["part"] for r in rows] == [p[0] for p in step_profile.PARTS]
    share = {r["function"]: r["share"] for r in rows}
    assert 0 < share["lyra.py:decide_guided"] <= 1 and share["cluster_env.py:_observe"] > 0
    knapsack, rebalance = share["lyra_rebalance.py:knapsack_choice"], share["lyra_rebalance.py:rebalance"]
    assert knapsack <= rebalance <= share["lyra.py:decide_guided"]
    text = step_profile.table(rows)
    assert "| &nbsp;&nbsp;&nbsp;&nbsp;the knapsack's rows and choice | `lyra_rebalance.py:knapsack_choice` |" in text
