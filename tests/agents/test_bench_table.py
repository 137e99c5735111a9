"""tools/bench_table.py: the docs' benchmark tables from a CSV, checked by hand on a tiny CSV."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))  # bench_table, compare_table
import bench_table

HEADER = "kind,policy,run,scenario,window,trace_seed,jct_mean_s,jct_vs_lyra,metric,iqm,ci_low,ci_high\n"


def _csv(tmp_path: Path) -> str:
    rows = []
    for seed, window, lyra, other in [(0, 0, 100.0, 80.0), (0, 1, 200.0, 220.0), (1, 0, 300.0, 240.0)]:
        rows.append(f"window,lyra,,s,{window},{seed},{lyra},1.0,,,,")
        rows.append(f"window,fifo,,s,{window},{seed},{other},{other / lyra},,,,")
        rows.append(f"bound,bound,,s,{window},{seed},{lyra / 2},0.5,,,,")
    rows.append("aggregate,fifo,,,,,,,jct_vs_lyra,0.9,0.8,1.1")
    path = tmp_path / "b.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return str(path)


def test_mean_jct_and_whole_suite_cells_are_the_csvs(tmp_path):
    rows = bench_table.read_rows(_csv(tmp_path))
    table = bench_table.jct_table(rows, ["lyra", "fifo"], ["s"]).splitlines()
    assert table[2] == "| lyra |  | 200 |"  # (100 + 200 + 300) / 3; lyra has no aggregate row here
    assert table[3] == "| fifo | 0.900 [0.800, 1.100] | 180 |"  # (80 + 220 + 240) / 3


def test_ratio_cells_are_the_iqm_over_units(tmp_path):
    rows = bench_table.read_rows(_csv(tmp_path))
    table = bench_table.ratio_table(rows, ["lyra", "fifo"], ["s"], reps=200).splitlines()
    assert table[2] == "| lyra |  | 1.000 |"
    # units 0.8, 1.1, 0.8: the IQM of three values is their mean trimmed by a quarter at each end
    point = bench_table.iqm([0.8, 1.1, 0.8])
    assert table[3].startswith(f"| fifo | 0.900 [0.800, 1.100] | {point:.3f} [")
    assert table[4] == "| isolated-job bound (unreachable) | | 0.500 |"


def test_headroom_is_the_benchmarks_over_the_registered_heuristics(tmp_path):
    """fifo's units 0.8, 1.1, 0.8 against lyra's 1.0: fifo is the best heuristic; the bound 0.5."""
    text = bench_table.headroom_markdown(bench_table.read_rows(_csv(tmp_path)))
    row = next(line for line in text.splitlines() if line.startswith("s "))
    cells = row.split()
    assert cells[:4] == ["s", "3", "200", "fifo"] and cells[-1] == "0.500"


def test_merged_csvs_take_each_policy_from_the_first_file_that_has_it(tmp_path):
    first = Path(_csv(tmp_path))
    second = tmp_path / "agent.csv"
    second.write_text(HEADER + "window,lyra,,s,0,0,999.0,1.0,,,,\nwindow,agent,,s,0,0,90.0,0.9,,,,\n")
    rows = bench_table.merged_rows([str(first), str(second)])
    assert sorted(r["jct_mean_s"] for r in rows if r["policy"] == "lyra") == [100.0, 200.0, 300.0]
    assert [r["jct_mean_s"] for r in rows if r["policy"] == "agent"] == [90.0]


def test_compare_table_rows_and_joined_columns(tmp_path):
    """tools/compare_table.py: the summary's means, printed as the compare table prints them."""
    import compare_table

    a = tmp_path / "a.csv"
    a.write_text("policy,jct_mean_s,queue_mean_s\nfifo,9052.4,2159.0\nlyra,6591.0,0.8125\n")
    b = tmp_path / "b.csv"
    b.write_text("policy,jct_mean_s\nlyra,7295.0\nfifo,9657.0\n")
    text = compare_table.table(compare_table.read_summary(str(a)), ["jct_mean_s", "queue_mean_s"],
                               [("consolidated", compare_table.read_summary(str(b)), ["jct_mean_s"])])
    assert text.splitlines()[2:] == ["| fifo | 9052 | 2159 | 9657 |", "| lyra | 6591 | 0.812 | 7295 |"]
