"""The calibrated lyra-15d preset: paper scale, the documented shape, its cluster file; slow: baseline queuing band."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from lyra_gym.model.config import load_config
from lyra_gym.harness.calibration import measure
from lyra_gym.workloads.presets_calibrated import (
    LYRA_15D, LYRA_15D_PAPER_CLUSTER, LYRA_15D_TARGETS, lyra_15d_config,
)
from lyra_gym.model.profiles import builtin_profiles
from lyra_gym.workloads.tracegen import MODEL_KEYS, generate_trace, offered_load

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trace():
    return generate_trace(LYRA_15D, 0)


def test_preset_has_the_paper_scale_and_documented_shape(trace):
    assert LYRA_15D.name == "lyra-15d" and LYRA_15D.days == 15.0
    assert len(trace) >= 50_000
    assert max(j.submit_time for j in trace) < 15 * 86400
    sizes = Counter(j.num_gpus for j in trace)
    assert min(sizes) == 1 and max(sizes) == 64  # one GPU up to eight 8-GPU servers
    assert set(j.model for j in trace) == set(MODEL_KEYS) <= set(builtin_profiles().models)
    assert abs(np.mean([j.elastic for j in trace]) - LYRA_15D.elastic_share) < 0.01
    durations = np.array([j.duration for j in trace])
    assert np.percentile(durations, 99) / np.median(durations) > 50  # heavy tail
    load = offered_load(trace, LYRA_15D.reference_gpus, LYRA_15D.horizon_s)
    assert load == pytest.approx(LYRA_15D.target_load, rel=1e-4)
    assert LYRA_15D.load_band[0] <= load <= LYRA_15D.load_band[1]


def test_arrivals_are_diurnal_and_weekly(trace):
    t = np.array([j.submit_time for j in trace])
    hour = (t % 86400) // 3600
    by_hour = np.bincount(hour.astype(int), minlength=24)
    assert by_hour[14] > 2 * by_hour[2]  # afternoon peak vs night
    day = (t // 86400).astype(int)
    by_day = np.bincount(day, minlength=15)
    weekdays = [d for d in range(15) if d % 7 < 5]
    weekend = [d for d in range(15) if d % 7 >= 5]
    assert by_day[weekend].mean() < 0.75 * by_day[weekdays].mean()


def test_cluster_file_matches_the_python_cluster():
    assert load_config(ROOT / "traces" / "lyra-15d.yaml") == lyra_15d_config()
    assert lyra_15d_config().cluster.training_gpus == LYRA_15D.reference_gpus


def test_inference_trough_is_under_40_percent_busy():
    from lyra_gym.model.demand import diurnal_demand

    config = lyra_15d_config()
    servers = config.cluster.inference.count
    demand = config.demand.__class__(**{**config.demand.__dict__, "num_servers": servers})
    curve = diurnal_demand(demand, LYRA_15D.horizon_s, np.random.default_rng(0))
    busy = np.array([curve.at(t) for t in np.arange(0, LYRA_15D.horizon_s, 900.0)]) / servers
    assert busy.min() < 0.4
    for day in range(5):  # every weekday has a stretch under 40 %
        assert (busy[day * 96:(day + 1) * 96] < 0.4).sum() >= 12  # >= 3 hours


def test_paper_cluster_file_has_a_larger_inference_pool_under_40_percent_busy_at_the_trough(trace):
    from lyra_gym.run.simulate import build_demand

    config = load_config(ROOT / "traces" / "lyra-15d-paper.yaml")
    assert config == lyra_15d_config(paper=True) and config.cluster == LYRA_15D_PAPER_CLUSTER
    inference = config.cluster.inference
    assert inference.gpu_type == "t4" and {g.gpu_type for g in config.cluster.training} == {"v100"}
    assert inference.count * inference.gpus_per_server >= config.cluster.training_gpus
    # the same training pool as the calibrated cluster, so baseline's calibration carries over
    assert config.cluster.training == lyra_15d_config().cluster.training
    # trough busy fraction of the demand the simulator builds for this cluster and trace (seed 0)
    demand_seq, _ = np.random.SeedSequence(0).spawn(2)
    curve = build_demand(config, trace, np.random.default_rng(demand_seq))
    busy = np.array([curve.at(t) for t in np.arange(0, LYRA_15D.horizon_s, 900.0)]) / inference.count
    assert busy.min() < 0.4
    for day in range(5):  # every weekday has a stretch under 40 %
        assert (busy[day * 96:(day + 1) * 96] < 0.4).sum() >= 12  # >= 3 hours


@pytest.mark.slow
def test_baseline_queuing_is_in_the_papers_band():
    row = measure(0)
    for key, (lo, hi) in LYRA_15D_TARGETS.items():
        assert lo <= row[key] <= hi, (key, row[key])
