"""Printed tables fit 120 columns by default, runs labelled by name (issue 42 item 4); --wide keeps everything."""

from __future__ import annotations

import pytest

from lyra_agents.bench_output import add_scores, aggregate, scenario_table, table
from lyra_agents.headroom import BOUND
from lyra_gym.cli.app import main
from lyra_gym.cli.policy_list import FORMS, policy_lines
from lyra_gym.harness.report import TABLE_KEYS, fit_columns, format_ci_table, format_table, short_label, short_labels

RUN = "model:/work/wt-cluster/runs/LyraGym-Cluster-v1__cluster-history-sf__1__1796453369/model.zip?trust=1"


def test_short_label_is_the_runs_name():
    assert short_label(RUN) == "model:cluster-history-sf-s1"
    assert short_label("model:agents/pretrained/cluster-generalist") == "model:cluster-generalist"
    assert short_label("runs/LyraGym-Alloc-v1__quick__0__17/") == "quick-s0"
    assert short_label("pollux+loan") == "pollux+loan"
    assert short_label("policy:examples/p.py:make") == "policy:examples/p.py:make"
    # two runs that shorten alike keep their full names
    twins = ["model:a/LyraGym-Cluster-v1__x__0__1", "model:b/LyraGym-Cluster-v1__x__0__2"]
    assert short_labels(twins) == twins


def test_fit_columns_cuts_into_blocks_repeating_the_first_column():
    header = ["metric", *(f"policy{i:02d}" for i in range(20))]
    body = [["jct_mean_s", *("12345" for _ in range(20))]]
    lines = fit_columns(header, body, 60)
    assert max(map(len, lines)) <= 60 and sum(line.startswith("metric") for line in lines) > 1
    assert all(f"policy{i:02d}" in "".join(lines) for i in range(20))
    assert len(fit_columns(header, body, None)) == 2  # --wide: one block


def _rows():
    rows = []
    for window in (0, 1):
        jct = {"lyra": 100.0 + window, "pollux+loan": 90.0, RUN: 95.0, "random": 110.0}
        rows += [{"kind": "window", "policy": p, "run": p, "scenario": s, "window": window, "trace_seed": 0,
                  "jct_mean_s": v, "jct_vs_lyra": v / jct["lyra"]} for s in ("contended-warm", "strong-diurnal")
                 for p, v in jct.items()]
        rows += [{"kind": "bound", "policy": BOUND, "run": "", "scenario": s, "window": window, "trace_seed": 0,
                  "jct_mean_s": 50.0, "jct_vs_lyra": 50.0 / jct["lyra"]} for s in ("contended-warm", "strong-diurnal")]
    return add_scores(rows, ["lyra", "pollux+loan"])


def test_benchmark_tables_fit_120_columns_and_show_each_scenario():
    rows = _rows()
    aggregates = aggregate(rows, 200, 0)
    text = table(rows, aggregates) + "\n" + scenario_table(rows, 200, 0)
    assert max(map(len, text.splitlines())) <= 120
    assert "model:cluster-history-sf-s1" in text and RUN not in text
    assert "contended-warm: best heuristic pollux+loan" in text and "strong-diurnal: best heuristic" in text
    per_scenario = [line for line in text.splitlines() if line.strip().startswith("pollux+loan")]
    assert len(per_scenario) == 3 and all("0.000 [0.000, 0.000]" in line for line in per_scenario)
    assert RUN in table(rows, aggregates, width=None)


def test_compare_and_simulate_tables_fit_120_columns():
    rows = [{"policy": p, "seeds": 3, **{k: 12345.678 for k in TABLE_KEYS}, **{k + "_ci95": 12.3 for k in TABLE_KEYS}}
            for p in ["lyra", "pollux+loan", "tiresias+loan", "gandiva+loan", "lyra-noelastic", RUN, "sjf", "fifo"]]
    for text in (format_ci_table(rows, TABLE_KEYS), format_table(rows[:1], TABLE_KEYS), format_table(rows, TABLE_KEYS)):
        assert max(map(len, text.splitlines())) <= 120
    assert max(map(len, format_ci_table(rows, TABLE_KEYS, None).splitlines())) > 120  # --wide


def test_simulate_cli_prints_at_most_120_columns(tmp_path, capsys):
    assert main(["simulate", "--policy", "fifo", "--trace", "traces/default.csv", "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out.split("\nwrote ")[0]  # the table (the line after names the files written)
    assert max(map(len, out.splitlines())) <= 120 and "jct_mean_s" in out


@pytest.mark.parametrize("reads", [False, True])
def test_policies_lists_every_name_once_with_loaders_and_benchmark_policies(capsys, reads):
    from lyra_agents.benchmark import BUILTIN_POLICIES
    from lyra_gym.sim import scheduler as registry

    lines = "\n".join(policy_lines(reads)).splitlines()
    names = [line.split()[0] for line in lines[1:] if len(line.split()) > 1 and line.split()[1] in
             ("registry", "loader", "import", "benchmark")]
    assert names == [*registry.available(), *(f[0] for f in FORMS)]
    assert {f[0] for f in FORMS if f[1] == "benchmark"} == set(BUILTIN_POLICIES)
    assert {f[0].partition(":")[0] for f in FORMS if f[1] == "loader"} == set(registry.loader_names())
    assert any(line.startswith("reads: ") for line in lines) and max(map(len, lines)) <= 120
