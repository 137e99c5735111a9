"""The leaderboard (issue 42 item 3): a submission's CSV checked whole, a sample of its windows rerun,
an edited row refused, a true one accepted; the page rendered from the committed CSVs."""

from __future__ import annotations

import shutil

import pytest

from lyra_agents import leaderboard

GENERALIST = leaderboard.SUBMISSIONS / "cluster-generalist.yaml"


def _copy(tmp_path, edit=None):
    """The generalist's submission and CSV copied to tmp_path, ``edit(lines)`` applied to the CSV."""
    lines = (leaderboard.DOCS / "bench-suite-v1-generalist-seed1.csv").read_text().splitlines()
    if edit:
        edit(lines)
    (tmp_path / "bench.csv").write_text("\n".join(lines) + "\n")
    text = GENERALIST.read_text().replace("../bench-suite-v1-generalist-seed1.csv", "bench.csv")
    (tmp_path / "sub.yaml").write_text(text)
    return tmp_path / "sub.yaml"


def _agent_line(lines, unit):
    scenario, seed, window = unit
    return next(i for i, line in enumerate(lines) if line.startswith("window,cluster-generalist,")
                and line.split(",")[3:6] == [scenario, str(window), str(seed)])


def test_an_edited_jct_is_refused_without_a_rerun(tmp_path):
    def edit(lines):
        i = _agent_line(lines, ("history", 1, 2))
        cells = lines[i].split(",")
        cells[7] = str(float(cells[7]) * 0.9)  # 10 % better, ratio left as it was
        lines[i] = ",".join(cells)

    problems = leaderboard.check_rows(leaderboard.read_csv(leaderboard.read_submission(_copy(tmp_path, edit))["csv"]),
                                      "cluster-generalist")
    assert len(problems) == 1 and "jct_vs_lyra" in problems[0]


def test_the_committed_csv_is_consistent_whole():
    rows = leaderboard.read_csv(leaderboard.read_submission(GENERALIST)["csv"])
    assert leaderboard.check_rows(rows, "cluster-generalist") == []


@pytest.mark.parametrize("text, field", [("name: x\ncsv: nowhere.csv\nload: lyra\n", "csv"),
                                         ("name: x\nload: lyra\n", "csv: required"),
                                         ("name: x\ncsv: a.csv\nload: lyra\nextra: 1\n", "extra: unknown key")])
def test_a_bad_submission_names_its_field(tmp_path, capsys, text, field):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    assert leaderboard.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_a_rerun_accepts_the_true_csv_and_refuses_a_consistently_edited_row(tmp_path, capsys):
    unit = leaderboard.sample_units(leaderboard.read_csv(leaderboard.read_submission(GENERALIST)["csv"]), 1, 0)[0]
    assert leaderboard.main(["validate", str(_copy(tmp_path)), "--sample", "1"]) == 0

    def edit(lines):  # the JCT and its ratio edited together: only a rerun can tell
        i = _agent_line(lines, unit)
        cells = lines[i].split(",")
        cells[7], cells[8] = str(float(cells[7]) * 0.9), str(float(cells[8]) * 0.9)
        lines[i] = ",".join(cells)

    shutil.rmtree(tmp_path / "bench.csv", ignore_errors=True)
    assert leaderboard.main(["validate", str(_copy(tmp_path, edit)), "--sample", "1", "--rtol", "1e-6"]) == 1
    assert "refused: " in capsys.readouterr().out


def test_render_has_a_table_per_suite_with_heuristics_agents_and_the_bound():
    text = leaderboard.render(["v1"])
    assert "## Suite v1" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    names = {line.split(" | ")[1]: line for line in rows}
    assert {"lyra", "pollux+loan", "isolated-bound", "cluster-generalist"} <= set(names)
    assert "1.000 [1.000, 1.000]" in names["lyra"] and "| bound |" in names["isolated-bound"]


def test_the_committed_page_is_the_rendered_one():
    assert (leaderboard.DOCS / "leaderboard.md").read_text() == leaderboard.render()


def test_render_refuses_a_submission_whose_name_has_no_rows_with_one_line(tmp_path, monkeypatch, capsys):
    """A submission naming a policy its CSV does not hold (``model:NAME`` where the benchmark wrote
    ``model:pretrained/NAME``) is an error naming the file, and the page is left as it was."""
    subs = tmp_path / "submissions"
    subs.mkdir()
    _copy(subs)
    (subs / "bench.csv").rename(tmp_path / "bench.csv")
    (subs / "sub.yaml").write_text((subs / "sub.yaml").read_text().replace("name: cluster-generalist", "name: other")
                                   .replace("csv: bench.csv", "csv: ../bench.csv"))
    monkeypatch.setattr(leaderboard, "SUBMISSIONS", subs)
    page = tmp_path / "page.md"
    page.write_text("before\n")
    assert leaderboard.main(["render", "--out", str(page)]) == 2
    err = capsys.readouterr().err
    assert "sub.yaml: no window rows of policy 'other'" in err and len(err.splitlines()) == 1
    assert page.read_text() == "before\n"
