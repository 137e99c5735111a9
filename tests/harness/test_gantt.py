"""The Gantt picture: where every job ran (lyra_gym.run.placements), drawn by lyra_gym.envs.gantt_draw
for the envs' rgb_array frames and by ``python -m lyra_gym.harness.gantt RUN`` for a run folder."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import lyra_gym  # noqa: F401  (registers the envs)
from lyra_gym.envs.gantt_draw import GanttError, assign_lanes
from lyra_gym.envs.render import FRAME_SHAPE
from lyra_gym.harness.gantt import main as gantt_main
from lyra_gym.model.config import load_config
from lyra_gym.run.placements import Segment, read_placements_csv
from lyra_gym.run.simulate import simulate, write_result
from lyra_gym.workloads.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "docs" / "img" / "gantt-example.yaml"  # 4 + 4 servers of 8 GPUs


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """lyra on the first 60 jobs of traces/default.csv on the docs' small cluster (it loans)."""
    folder = tmp_path_factory.mktemp("gantt")
    trace = folder / "first60.csv"
    trace.write_text("".join((ROOT / "traces" / "default.csv").read_text().splitlines(keepends=True)[:61]))
    result = simulate(load_trace(trace), "lyra", load_config(CONFIG), seed=0, record_timeline=True)
    write_result(result, folder / "run")
    return result, folder / "run"


def test_segments_hold_exactly_the_engines_gpu_seconds(small_run):
    result, _ = small_run
    p, timeline = result.timeline.placements, result.timeline
    assert p.loans and p.jobs  # the case is one that loans
    assert p.gpu_seconds("training") == pytest.approx(timeline.integral("gpus_training"), rel=1e-12)
    assert p.gpu_seconds("inference") == pytest.approx(timeline.integral("gpus_loaned"), rel=1e-12)
    # every job that ran has segments from its first start to its finish
    rows = {r["job_id"]: r for r in result.jobs}
    for job_id in {s.job_id for s in p.jobs}:
        mine = [s for s in p.jobs if s.job_id == job_id]
        assert min(s.start_s for s in mine) == rows[job_id]["first_start"]
        assert max(s.end_s for s in mine) == rows[job_id]["finish_time"]


def test_recording_placements_does_not_change_the_run(small_run):
    result, _ = small_run
    trace = small_run[1].parent / "first60.csv"
    plain = simulate(load_trace(trace), "lyra", load_config(CONFIG), seed=0)
    drop = {"sim_wall_s"}
    assert {k: v for k, v in plain.metrics.items() if k not in drop} == \
        {k: v for k, v in result.metrics.items() if k not in drop}


def test_lanes_never_hold_two_jobs_at_once(small_run):
    p = small_run[0].timeline.placements
    lanes = assign_lanes(p.jobs, p.servers)
    for seg, mine in zip(p.jobs, lanes):
        assert len(mine) == seg.gpus and all(0 <= lane < p.servers[seg.server][1] for lane in mine)
    by_lane: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for seg, mine in zip(p.jobs, lanes):
        for lane in mine:
            by_lane.setdefault((seg.server, lane), []).append((seg.start_s, seg.end_s))
    for spans in by_lane.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_a_server_over_its_gpus_is_refused():
    servers = [("training", 2)]
    with pytest.raises(GanttError, match="server 0 holds more than its 2 GPUs"):
        assign_lanes([Segment("a", 0, 2, 0.0, 10.0), Segment("b", 0, 1, 5.0, 8.0)], servers)
    # one ending when the other starts shares the lanes
    assert assign_lanes([Segment("a", 0, 2, 0.0, 5.0), Segment("b", 0, 2, 5.0, 8.0)], servers) == [[0, 1], [0, 1]]


def test_placements_csv_reads_back_what_was_recorded(small_run):
    result, folder = small_run
    p = result.timeline.placements
    back = read_placements_csv(folder / "placements.csv", p.servers)
    assert back.jobs == p.jobs and back.loans == p.loans


@pytest.mark.slow
def test_rgb_array_is_a_deterministic_labelled_gantt():
    frames = []
    for _ in range(2):
        env = gym.make("LyraGym/Cluster-v1", render_mode="rgb_array").unwrapped
        blank = env.render()
        env.reset(seed=3)
        for _ in range(30):
            env.step(env.expert_action())
        frames.append(env.render())
    assert blank.shape == frames[0].shape == FRAME_SHAPE and frames[0].dtype == np.uint8
    assert np.array_equal(frames[0], frames[1])  # same run, same pixels
    assert len(np.unique(frames[0].reshape(-1, 3), axis=0)) > len(np.unique(blank.reshape(-1, 3), axis=0)) + 20
    assert not np.array_equal(frames[0], blank)


def test_cli_draws_a_run_folder(small_run, tmp_path, capsys):
    _, folder = small_run
    out = tmp_path / "g.png"
    assert gantt_main([str(folder), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out == f"wrote {out}\n"


@pytest.mark.parametrize("case, message", [
    ("missing", "no such run folder or file"),
    ("no_placements", "no placements.csv; record one with `lyra-gym simulate ... --timeline`"),
    ("bad_header", "not a placements.csv"),
    ("bad_row", "line 2: server 99 is not in the cluster"),
    ("bad_out", "must end in .png"),
])
def test_cli_refuses_bad_input_in_one_line(small_run, tmp_path, capsys, case, message):
    import shutil

    _, good = small_run
    run = tmp_path / "run"
    args = [str(run)]
    if case != "missing":
        shutil.copytree(good, run)
    if case == "no_placements":
        (run / "placements.csv").unlink()
    elif case == "bad_header":
        (run / "placements.csv").write_text("time_s,queued\n1,2\n")
    elif case == "bad_row":
        (run / "placements.csv").write_text("kind,job_id,server,gpus,start_s,end_s\njob,j1,99,1,0,5\n")
    elif case == "bad_out":
        args += ["--out", str(tmp_path / "g.jpg")]
    assert gantt_main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err and "Traceback" not in err
