"""train.py's comparison table: hand-computed means and ratios, and a window a policy left unfinished."""

from lyra_agents.evaluate import comparison_table


def test_means_and_ratios_are_hand_computed():
    results = {"policy": [{"window": 0, "jct_mean_s": 90.0}, {"window": 1, "jct_mean_s": 150.0}],
               "lyra": [{"window": 0, "jct_mean_s": 100.0}, {"window": 1, "jct_mean_s": 140.0}]}
    lines = comparison_table(results).splitlines()
    assert lines[1].split() == ["0", "90", "100"]
    assert lines[3].split() == ["mean", "120", "120"]
    assert lines[4].split() == ["/", "lyra", "1.000", "1.000"]


def test_an_unfinished_window_is_named_and_no_mean_flatters_the_policy():
    results = {"policy": [{"window": 0, "jct_mean_s": 90.0, "jobs_total": 5, "jobs_finished": 5},
                          {"window": 1, "jct_mean_s": None, "jobs_total": 7, "jobs_finished": 4}],
               "lyra": [{"window": 0, "jct_mean_s": 100.0}, {"window": 1, "jct_mean_s": 140.0}]}
    table = comparison_table(results)
    assert "n/a (3 unfinished)" in table
    mean_row = next(line for line in table.splitlines() if line.lstrip().startswith("mean"))
    assert mean_row.split() == ["mean", "n/a", "120"]
    ratio_row = table.splitlines()[-1]
    assert ratio_row.split() == ["/", "lyra", "n/a", "1.000"]
