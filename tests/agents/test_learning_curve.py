"""lyra_agents.learning_curve (command line: tools/plot_learning_curve.py): short labels, every seed
or a mean with a band, the heuristics as lines, read from what train.py's evaluation writes
(TensorBoard eval/*, else progress.csv)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lyra_agents import learning_curve as plc

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("plot_learning_curve", ROOT / "tools" / "plot_learning_curve.py")
assert _spec and _spec.loader
cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cli)

HEADER = "time/total_timesteps,eval/jct_policy,eval/jct_lyra,eval/jct_vs_lyra,eval/jct_expert,train/loss\n"


def fake_run(folder: Path, policy: list[float], lyra: float = 1000.0, expert: float = 950.0) -> Path:
    """A progress.csv as SB3's csv logger writes it: rollout rows with the step, eval rows after."""
    folder.mkdir(parents=True)
    lines = [HEADER]
    for i, jct in enumerate(policy):
        lines.append(f"{(i + 1) * 100},,,,,0.5\n")
        lines.append(f",{jct},{lyra},{jct / lyra},{expert},\n")
    (folder / "progress.csv").write_text("".join(lines))
    return folder


def test_progress_csv_gives_eval_points_at_their_steps(tmp_path):
    curve = plc.read_curve(fake_run(tmp_path / "r", [1200.0, 1100.0]))
    assert curve["eval/jct_policy"] == [(100.0, 1200.0), (200.0, 1100.0)]
    assert curve["eval/jct_expert"][-1] == (200.0, 950.0)
    assert "train/loss" not in curve


def test_tensorboard_events_are_read_first(tmp_path):
    tb = pytest.importorskip("torch.utils.tensorboard")
    run = tmp_path / "tb-run"
    writer = tb.SummaryWriter(str(run))
    for step, value in ((0, 1300.0), (500, 1050.0)):
        writer.add_scalar("eval/jct_policy", value, step)
    writer.close()
    assert plc.read_curve(run)["eval/jct_policy"] == [(0.0, 1300.0), (500.0, 1050.0)]


def test_labels_are_run_names_not_paths():
    runs = [Path("/long/path/runs/elastic-seed0"), Path("/x/a/ppo"), Path("/x/b/ppo")]
    assert plc.short_labels(runs) == ["elastic-seed0", "a/ppo", "b/ppo"]


def test_band_is_the_mean_min_and_max_over_seeds(tmp_path):
    curves = [plc.read_curve(fake_run(tmp_path / f"m-seed{i}", p))
              for i, p in enumerate([[1200.0, 1000.0], [1000.0, 900.0], [1100.0, 800.0]])]
    steps, mean, lo, hi = plc._band(curves, "eval/jct_policy")
    assert steps == [100.0, 200.0] and mean == [1100.0, 900.0] and lo == [1000.0, 800.0] and hi == [1200.0, 1000.0]
    assert {plc._SEED.sub("", f"m{s}") for s in ("-seed0", "_s1", "__2")} == {"m"}


def test_plot_writes_a_png_and_refuses_an_empty_run(tmp_path, capsys):
    runs = [fake_run(tmp_path / f"m-seed{i}", [1200.0 - 100 * i, 1000.0]) for i in range(2)]
    out = plc.plot_learning_curves(runs, tmp_path / "lc.png", band=True)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "empty").mkdir()
    assert cli.main([str(tmp_path / "empty"), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no eval/jct_policy recorded" in err
