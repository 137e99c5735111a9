"""tools/paired_table.py: the paired ratio table of an evaluate --suite --json file, by hand."""

from __future__ import annotations

import json

import pytest

from tools.paired_table import main, table


def write(path, rows):
    path.write_text(json.dumps({"units": rows}))
    return path


def units(policy, jcts, scenario="history"):
    return [{"policy": policy, "scenario": scenario, "trace_seed": s, "window": w, "jct_mean_s": j}
            for (s, w), j in zip([(0, 0), (0, 1), (1, 0), (1, 1)], jcts)]


def test_ratios_are_paired_per_unit_and_marked_when_the_interval_excludes_one(tmp_path):
    f = write(tmp_path / "a.json", units("policy", [90, 180, 270, 360]) + units("expert", [100, 200, 300, 400])
              + units("lyra", [90, 200, 270, 400]))
    text = table([("seed1", f)], "policy", ["expert", "lyra"])
    rows = {line.split("|")[2].strip(): line.split("|")[3].strip() for line in text.splitlines()[2:4]}
    assert rows["expert"] == "0.900 [0.900, 0.900]*"   # every unit 0.9: zero width, below 1
    # ratios 1.0, 0.9, 1.0, 0.9: IQM (middle two of 0.9, 0.9, 1.0, 1.0) = 0.95; bootstrap within [0.9, 1.0]
    point, interval = rows["lyra"].split(" ", 1)
    assert point == "0.950" and interval.startswith("[0.9") and not rows["lyra"].endswith("*")


def test_unpaired_units_and_bad_files_are_one_line_errors(tmp_path, capsys):
    f = write(tmp_path / "b.json", units("policy", [1, 2, 3, 4]) + units("expert", [1, 2, 3]))
    with pytest.raises(SystemExit) as exit_info:
        main([str(f)])
    assert exit_info.value.code == 2 and "not paired" in capsys.readouterr().err
    bad = tmp_path / "c.json"
    bad.write_text("[]")
    with pytest.raises(SystemExit):
        main([str(bad)])
    assert "not an evaluate --suite --json file" in capsys.readouterr().err


def test_files_of_one_label_make_one_block_and_may_not_share_a_scenario(tmp_path):
    a = write(tmp_path / "a.json", units("policy", [90, 180, 270, 360]) + units("lyra", [100, 200, 300, 400]))
    b = write(tmp_path / "b.json", units("policy", [50, 50, 50, 50], "overload") + units("lyra", [100] * 4, "overload"))
    lines = table([("rule", a), ("rule", b)], "policy", ["lyra"]).splitlines()
    assert lines[0] == "| agent | against | history | overload |"
    assert lines[2] == "| rule | lyra | 0.900 [0.900, 0.900]* | 0.500 [0.500, 0.500]* |" and lines[3] == ""
    with pytest.raises(ValueError, match="scenario 'history' is in another file of label 'rule'"):
        table([("rule", a), ("rule", a)], "policy", ["lyra"])
