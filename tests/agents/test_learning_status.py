"""tools/learning_status.py: issue 38's targets against committed results, by hand on small files."""

from __future__ import annotations

import csv
import json

import pytest

from lyra_agents.fork_probe import Fork, write_csv
from tools import learning_status
from tools.learning_status import agent_row, ppo_runs, table

UNITS = [(0, 0), (0, 1), (1, 0), (1, 1)]


def units(policy, jcts, scenario):
    return [{"policy": policy, "scenario": scenario, "trace_seed": s, "window": w, "jct_mean_s": j}
            for (s, w), j in zip(UNITS, jcts)]


def by_scenario(rows):
    out = {}
    for r in rows:
        out.setdefault(r["scenario"], {}).setdefault(r["policy"], {})[(r["trace_seed"], r["window"])] = r["jct_mean_s"]
    return out


def test_better_means_below_one_against_every_heuristic_and_worse_means_above_one_against_lyra():
    rows = (units("policy", [90] * 4, "a") + units("lyra", [100] * 4, "a") + units("lyra-backfill", [95] * 4, "a")
            + units("pollux+loan", [99] * 4, "a")
            # b: better than lyra and lyra-backfill, but pollux+loan was not measured there: not counted
            + units("policy", [50] * 4, "b") + units("lyra", [100] * 4, "b") + units("lyra-backfill", [100] * 4, "b")
            # c: 10 % worse than lyra on every unit
            + units("policy", [110] * 4, "c") + units("lyra", [100] * 4, "c"))
    label, better, worse, count = agent_row("x", [(by_scenario(rows), "policy")])
    assert better == ["`a` 0.947"]  # the toughest heuristic: 90 / 95
    assert worse == ["`c` 1.100"] and count == 3


def test_a_later_file_gives_the_references_the_first_lacks():
    first = by_scenario(units("policy", [90] * 4, "a") + units("lyra", [100] * 4, "a"))
    second = by_scenario(units("start", [90] * 4, "a") + units("lyra-backfill", [95] * 4, "a")
                         + units("pollux+loan", [80] * 4, "a"))
    assert agent_row("x", [(first, "policy"), (second, "start")])[1] == []  # 90 / 80 > 1: not better than pollux


def write_json(path, rows):
    path.write_text(json.dumps({"units": rows}))


def test_ppo_runs_count_scenarios_against_the_imitation_start(tmp_path):
    write_json(tmp_path / "learned-run-a.json",
               units("policy", [90, 95, 90, 95], "history") + units("imitation-start", [100] * 4, "history")
               + units("policy", [120] * 4, "overload") + units("imitation-start", [100] * 4, "overload"))
    write_json(tmp_path / "learned-rule.json", units("policy", [1] * 4, "history") + units("lyra", [2] * 4, "history"))
    [(run, better, worse, half)] = ppo_runs(tmp_path)
    # history ratios 0.90, 0.95, 0.90, 0.95: every bootstrap IQM within [0.9, 0.95]
    assert run == "run-a" and better == ["`history` 0.925"] and worse == ["overload"]
    assert 0 < half <= 0.025


def test_table_rows_from_small_committed_files(tmp_path, monkeypatch):
    write_json(tmp_path / "learned-agent.json",
               units("policy", [90] * 4, "a") + units("lyra", [100] * 4, "a") + units("lyra-backfill", [95] * 4, "a")
               + units("pollux+loan", [99] * 4, "a"))
    monkeypatch.setattr(learning_status, "AGENTS", (("agent", (("learned-agent.json", "policy"),)),))
    write_csv(tmp_path / "fork-probe-cluster-v2-x.csv",
              [Fork(i, 0, i, 0.0, "random", -1, 1, 0.0 if i < 1 else 1.0, 0.0, 3) for i in range(4)])
    with open(tmp_path / "training-throughput.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=("label", "what", "env_id", "steps", "steps_per_cpu_s", "wall_s"))
        writer.writeheader()
        step = dict(what="env.step", env_id="LyraGym/Cluster-v1", steps=2000)
        writer.writerow(dict(label="old", steps_per_cpu_s=900, **step))
        writer.writerow(dict(label="new", steps_per_cpu_s=2100, **step))
        writer.writerow(dict(label="run", what="train.py run", env_id="LyraGym/Cluster-v1", steps=2_000_000,
                             steps_per_cpu_s=999, wall_s=3000.0))
    lines = table(tmp_path).splitlines()
    assert lines[2].endswith("better on `a` 0.947 (against the best); worse than `lyra` on none of 1 | **no** |")
    assert lines[3] == ("| PPO better than its imitation start on >= 2 scenarios | 0 runs; better on one scenario or "
                        "more: none; worse on one or more: 0 | **no** |")
    assert lines[4] == ("| fork probe: decisions with no effect < 25 % (`-v2`) | 1 probes, at most 25% "
                        "(`cluster-v2-x`) | **no** |")
    assert lines[5] == "| `env.step` >= 2,000 per CPU-s (the generalist's envs) | 2,100 (new) | yes |"
    assert lines[6] == "| `train.py` >= 1,000 env steps per CPU-s | 999 (run) | **no** |"
    assert lines[7] == "| 10^6 env steps in <= 30 min on 2 cores | 25.0 min per 10^6 (run) | yes |"


def test_a_missing_file_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        learning_status.main(["--docs", str(tmp_path)])
    assert exit_info.value.code == 2 and "learned-preempt-rule-contention-part1.json" in capsys.readouterr().err
