"""benchmarks/helios_compare.py's pure parts: the integer-second jobs, the two trace files, the
JCT agreement count. (Running the Helios artifact itself is the benchmark's job, not a test's.)"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from lyra_gym.cli.app import main
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import helios_compare as hc  # noqa: E402


def spec(job_id: str, submit: float, gpus: int, duration: float, elastic: bool = False) -> JobSpec:
    lo, hi = (1, 2 * gpus) if elastic else (gpus, gpus)
    return JobSpec(job_id, submit, gpus, duration, "resnet50", elastic, lo, hi)


def test_integer_jobs_round_strictly_increase_and_start_at_zero():
    specs = [spec("c", 20.4, 8, 0.4), spec("a", 10.6, 1, 99.5), spec("b", 10.9, 2, 100.49, elastic=True),
             spec("d", 21.2, 4, 7.0)]
    jobs = hc.integer_jobs(specs)
    # sorted by submit: a 10.6 -> 11, b 10.9 -> 11 -> 12 (moved up), c 20.4 -> 20, d 21.2 -> 21; minus 11
    assert [(j.job_id, j.submit_s, j.num_gpus, j.duration_s) for j in jobs] == [
        ("a", 0, 1, 100), ("b", 1, 2, 100), ("c", 9, 8, 1), ("d", 10, 4, 7)]


def test_moved_up_submit_times_cascade():
    jobs = hc.integer_jobs([spec(f"j{i}", 5.0, 1, 10.0) for i in range(4)])
    assert [j.submit_s for j in jobs] == [0, 1, 2, 3]
    assert [j.job_id for j in jobs] == ["j0", "j1", "j2", "j3"]  # ties keep their order


def test_lyra_rows_load_as_the_same_inelastic_jobs(tmp_path):
    jobs = hc.integer_jobs([spec("a", 3.0, 4, 50.0, elastic=True), spec("b", 9.0, 16, 70.0)])
    path = tmp_path / "t.csv"
    hc.write_csv(path, hc.lyra_rows(jobs))
    loaded = load_trace(path)
    assert [(s.job_id, s.submit_time, s.num_gpus, s.duration, s.elastic, s.min_gpus, s.max_gpus) for s in loaded] == [
        ("a", 0.0, 4, 50.0, False, 4, 4), ("b", 6.0, 16, 70.0, False, 16, 16)]


def test_helios_rows_use_its_philly_columns_and_dates():
    jobs = [hc.Job("a", 0, 1, 5, "bert"), hc.Job("b", 90061, 8, 7, "ncf")]  # 1 day 1 h 1 min 1 s
    rows = hc.helios_rows(jobs)
    assert rows[0] == ["job_id", "user", "vc", "jobname", "gpu_num", "state", "submit_time", "duration"]
    assert rows[1] == ["a", "u0", "vc0", "a", "1", "Pass", "2017-10-01 00:00:00", "5"]
    assert rows[2] == ["b", "u0", "vc0", "b", "8", "Pass", "2017-10-02 01:01:01", "7"]


def test_agreement_counts_common_jobs_with_equal_jct():
    assert hc.agreement({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 1.0, "b": 2.5, "d": 4.0}) == (1, 2)


def test_read_jct_skips_unfinished_rows(tmp_path):
    path = tmp_path / "jobs.csv"
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows([["job_id", "jct_s"], ["a", "12.5"], ["b", ""], ["c", "None"]])
    assert hc.read_jct(path, "job_id", "jct_s") == {"a": 12.5}


def test_the_config_runs_fifo_consolidated_without_inference_or_restart_cost(tmp_path, capsys):
    """The cluster file loads, and a 2-job trace gives the hand-computed JCTs: no restart overhead,
    a 16-GPU job waits for two wholly free servers (consolidated placement)."""
    (tmp_path / "c.yaml").write_text(hc.LYRA_CONFIG)
    jobs = [hc.Job("a", 0, 632, 100, "resnet50"), hc.Job("b", 10, 16, 50, "resnet50")]
    hc.write_csv(tmp_path / "t.csv", hc.lyra_rows(jobs))
    out = tmp_path / "out"
    code = main(["simulate", "--policy", "fifo", "--trace", str(tmp_path / "t.csv"), "--config",
                 str(tmp_path / "c.yaml"), "--out", str(out)])
    assert code == 0
    # a holds 632 of 640 GPUs (79 servers): one server free, so b (2 servers) waits until 100
    assert hc.read_jct(out / "jobs.csv", "job_id", "jct_s") == {"a": 100.0, "b": 140.0}


@pytest.mark.parametrize("values, expected", [([3.0, 1.0, 2.0], "2.00 s (range 1.00-3.00)")])
def test_median_range(values, expected):
    assert hc.median_range(values) == expected
