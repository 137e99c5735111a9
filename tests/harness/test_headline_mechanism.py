"""benchmarks/headline_mechanism.py: its variants build valid traces and configs, the shared
baseline run is really shared, a short run gives finite ratios, and the table is the CSV's."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def hm(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import headline_mechanism

    return headline_mechanism


@pytest.mark.slow
def test_variants_load_and_validate(hm):
    for v in hm.VARIANTS.values():
        config = hm.variant_config(v)
        assert config.cluster.inference == v.inference
        assert config.cluster.training == hm.load_config(str(hm.PAPER_CONFIG)).cluster.training
        jobs = hm.variant_jobs(v, 0, 0.05)
        assert jobs and all(j.min_gpus <= j.num_gpus <= j.max_gpus for j in jobs)
        elastic = [j for j in jobs if j.elastic]
        if v.min_rule == "requested":
            assert all(j.min_gpus == j.num_gpus and j.max_gpus == 2 * j.num_gpus for j in elastic)
        else:
            assert all(j.min_gpus == max(1, j.num_gpus // 2) for j in elastic)
    assert not hm.VARIANTS["bound-v100"].defensible


def test_elastic_share_and_min_rule_change_no_other_field(hm):
    """The variants' traces differ from the paper trace only in elastic flags and ranges."""
    paper = hm.variant_jobs(hm.VARIANTS["paper"], 0, 0.2)
    bound = hm.variant_jobs(hm.VARIANTS["bound-v100"], 0, 0.2)
    assert [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.model) for j in paper] == \
        [(j.job_id, j.submit_time, j.num_gpus, j.duration, j.model) for j in bound]
    assert all(j.elastic for j in bound)


def test_implied_run_ratio_by_hand(hm):
    # Q = 3,000, J = 7,000: run 4,000 -> 7000/1.48 - 3000/1.53 = 4729.73 - 1960.78 = 2768.95; 4000/2768.95
    assert hm.implied_run_ratio(3000.0, 7000.0) == pytest.approx(4000.0 / (7000.0 / 1.48 - 3000.0 / 1.53))
    assert hm.implied_run_ratio(3000.0, 7000.0) == pytest.approx(1.4446, abs=1e-4)


@pytest.mark.slow
def test_baseline_shared_across_variants(hm):
    """baseline never borrows and ignores elastic ranges: its jobs are the same whatever the elastic
    minimum (and the inference pool); the usage over both clusters is not, so the run is shared only
    between variants with the same inference pool and scaling."""
    a = hm.run_task("paper", 0, "baseline", 0.1)
    b = hm.run_task("base-requested", 0, "baseline", 0.1)
    c = hm.run_task("loan-8", 0, "baseline", 0.1)
    assert {k: x for k, x in a.items() if k != "sim_wall_s"} == {k: x for k, x in b.items() if k != "sim_wall_s"}
    keys = ("queue_mean_s", "jct_mean_s", "queue_p95_s", "jobs_total")
    assert {k: a[k] for k in keys} == {k: c[k] for k in keys}
    assert a["gpu_usage_effective_overall"] != c["gpu_usage_effective_overall"]  # the inference pool counts
    v = hm.VARIANTS
    assert hm.task_key(v["paper"], 0, "baseline") == hm.task_key(v["base-requested"], 0, "baseline")
    assert hm.task_key(v["paper"], 0, "baseline") != hm.task_key(v["loan-8"], 0, "baseline")
    assert hm.task_key(v["paper"], 0, "baseline") != hm.task_key(v["bound-v100"], 0, "baseline")


@pytest.mark.slow
def test_one_day_seed0_finite_ratios_and_table_from_csv(hm, tmp_path, capsys):
    out = tmp_path / "hm"
    assert hm.main(["--variants", "paper,loan-16", "--seeds", "0", "--days", "1", "--out", str(out)]) == 0
    with open(out / "headline_mechanism.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["variant"] for r in rows] == ["paper", "loan-16"]
    for r in rows:
        for key in ("queue_ratio", "jct_ratio", "run_ratio", "implied_run_ratio", "usage_effective_diff_pp"):
            assert math.isfinite(float(r[key])), key
        assert int(r["unfinished"]) == 0
    capsys.readouterr()
    assert hm.main(["--from-csv", str(out / "headline_mechanism.csv")]) == 0
    table = (out / "headline_mechanism.md").read_text(encoding="utf-8").split("\n\n", 1)[1]
    assert capsys.readouterr().out == table


def test_the_headline_table_is_regenerated_from_its_csv(tmp_path, capsys, monkeypatch):
    """benchmarks/headline.py --from-csv prints what the run printed: the CSV round-trips (one
    seed's empty interval included)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import headline

    rows = [{"scenario": "paper", "comparison": "baseline", "backfill": "off", "seeds": 4,
             "usage_key": headline.USAGE_KEY, "queue_ratio": 13.1, "queue_ratio_ci95": 1.6, "jct_ratio": 1.42,
             "jct_ratio_ci95": 0.11, "usage_diff_pp": 1.4, "usage_diff_pp_ci95": None, "events_per_job": 1.0,
             "events_per_job_ci95": 0.07, "comparison_queue_mean_s": 3445.0, "reference_queue_mean_s": 264.0,
             "comparison_jct_mean_s": 7414.0, "reference_jct_mean_s": 5220.0}]
    headline.write_csv(rows, tmp_path / "h.csv")
    assert headline.main(["--from-csv", str(tmp_path / "h.csv")]) == 0
    assert capsys.readouterr().out == headline.markdown(rows, "lyra")
