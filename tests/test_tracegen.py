"""Synthetic trace generator: determinism, validity, preset statistics, shipped trace."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from lyra_gym.trace import JobSpec, load_trace, write_trace
from lyra_gym.tracegen import MODEL_KEYS, PRESETS, TracePreset, generate_trace, offered_load

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = REPO / "traces" / "default.csv"


@cache
def gen(name: str, seed: int) -> tuple[JobSpec, ...]:
    return tuple(generate_trace(name, seed))


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_same_seed_identical_different_seed_differs(name):
    a = generate_trace(name, seed=7)
    b = generate_trace(name, seed=7)
    assert a == b
    assert [j.submit_time.hex() for j in a] == [j.submit_time.hex() for j in b]
    c = generate_trace(name, seed=8)
    assert a != c
    assert [j.submit_time for j in a] != [j.submit_time for j in c]


def test_preset_object_and_name_give_same_trace():
    assert generate_trace(PRESETS["small-1d"], 3) == list(gen("small-1d", 3))


# --------------------------------------------------------------------------- validity


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_counts_ids_order_and_ranges(name):
    p = PRESETS[name]
    jobs = gen(name, 0)
    assert len(jobs) == p.num_jobs
    assert [j.job_id for j in jobs] == [f"j{i:05d}" for i in range(p.num_jobs)]
    times = [j.submit_time for j in jobs]
    assert times == sorted(times)
    assert 0.0 <= times[0] and times[-1] <= p.horizon_s
    for j in jobs:
        assert p.duration_min_s <= j.duration <= p.duration_max_s
        assert round(j.submit_time, 3) == j.submit_time and round(j.duration, 3) == j.duration
        assert j.model in p.model_mix
        assert j.num_gpus in p.size_probs
        if j.elastic:
            assert (j.min_gpus, j.max_gpus) == (max(1, j.num_gpus // 2), 2 * j.num_gpus)
        else:
            assert j.min_gpus == j.max_gpus == j.num_gpus


def test_presets_use_only_known_model_keys():
    assert set(MODEL_KEYS) == {"resnet18", "resnet50", "bert", "transformer", "deepspeech2", "ncf", "yolov3"}
    for p in PRESETS.values():
        assert set(p.model_mix) <= set(MODEL_KEYS), p.name


def test_documented_preset_shapes():
    small, bench = PRESETS["small-1d"], PRESETS["bench-15d"]
    assert (small.days, small.num_jobs, small.reference_gpus) == (1.0, 400, 128)
    assert max(small.size_probs) == 16 and min(small.size_probs) == 1
    assert (bench.days, bench.num_jobs, bench.reference_gpus) == (15.0, 50_000, 1024)
    assert max(bench.size_probs) == 64 and min(bench.size_probs) == 1
    assert max(j.num_gpus for j in gen("bench-15d", 0)) == 64
    assert max(j.num_gpus for j in gen("small-1d", 0)) == 16


# --------------------------------------------------------------------------- statistics


def _binomial_tol(p: float, n: int, sds: float = 4.0) -> float:
    return sds * math.sqrt(max(p * (1 - p), 1e-12) / n) + 1e-9


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_elastic_share_and_size_mix_match_preset(name):
    p = PRESETS[name]
    jobs = gen(name, 0)
    n = len(jobs)
    share = sum(j.elastic for j in jobs) / n
    assert abs(share - p.elastic_share) <= _binomial_tol(p.elastic_share, n)
    sizes = np.array([j.num_gpus for j in jobs])
    for size, prob in p.size_probs.items():
        assert abs(np.mean(sizes == size) - prob) <= _binomial_tol(prob, n), size
    models = [j.model for j in jobs]
    for model, prob in p.model_mix.items():
        assert abs(models.count(model) / n - prob) <= _binomial_tol(prob, n), model


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_offered_load_within_documented_band(name):
    p = PRESETS[name]
    lo, hi = p.load_band
    assert lo <= p.expected_offered_load() <= hi
    seeds = range(5) if p.num_jobs <= 10_000 else range(1)
    for seed in seeds:
        load = offered_load(gen(name, seed), p.reference_gpus, p.horizon_s)
        assert lo <= load <= hi, (seed, load)
        if p.target_load is not None:
            assert load == pytest.approx(p.target_load, rel=1e-6)


def test_small_and_bench_presets_are_calibrated():
    assert PRESETS["small-1d"].target_load == 0.8
    assert PRESETS["bench-15d"].target_load == 0.85


def test_philly_like_matches_published_facts():
    # PROVENANCE.md: 93 % of Philly jobs use 1 GPU; median duration 1,144 s.
    jobs = gen("philly-like", 0)
    single = sum(j.num_gpus == 1 for j in jobs) / len(jobs)
    assert abs(single - 0.93) < 0.015
    median = float(np.median([j.duration for j in jobs]))
    assert 1144 * 0.9 < median < 1144 * 1.1
    assert PRESETS["philly-like"].target_load is None


def test_uncalibrated_durations_are_lognormal_around_median():
    p = replace(PRESETS["bench-15d"], target_load=None, duration_max_s=1e9)
    d = np.log([j.duration for j in generate_trace(p, 1)])
    assert np.median(d) == pytest.approx(math.log(p.duration_median_s), abs=0.05)
    assert np.std(d) == pytest.approx(p.duration_sigma, rel=0.05)
    assert p.expected_offered_load() > 0


def test_arrivals_follow_diurnal_and_weekly_pattern():
    p = PRESETS["bench-15d"]
    t = np.array([j.submit_time for j in gen("bench-15d", 0)])
    hour = (t % 86_400) / 3600
    near_peak = np.mean(np.abs(hour - p.peak_hour) < 3)
    near_trough = np.mean(np.abs(hour - (p.peak_hour + 12) % 24) < 3)
    # Expected ratio (1 + a * ~0.95) / (1 - a * ~0.95) ~ 2.8 for a = 0.5.
    assert near_peak > 2.0 * near_trough
    day = (t // 86_400).astype(int)
    per_day = np.bincount(day, minlength=15)[:15]
    weekend = [d for d in range(15) if (p.start_weekday + d) % 7 >= 5]
    weekday = [d for d in range(15) if (p.start_weekday + d) % 7 < 5]
    ratio = per_day[weekend].mean() / per_day[weekday].mean()
    assert ratio == pytest.approx(p.weekend_factor, rel=0.1)


def test_flat_profile_is_uniform():
    p = replace(PRESETS["bench-15d"], diurnal_amplitude=0.0, weekend_factor=1.0, num_jobs=20_000, days=2.0,
                target_load=None)
    t = np.array([j.submit_time for j in generate_trace(p, 0)])
    counts = np.histogram(t, bins=8, range=(0, p.horizon_s))[0]
    assert counts.min() > 0.9 * counts.mean()


# --------------------------------------------------------------------------- API edges


def test_unknown_preset_lists_known_names():
    with pytest.raises(ValueError) as info:
        generate_trace("huge-99d", 0)
    for name in PRESETS:
        assert name in str(info.value)


@pytest.mark.parametrize(
    "kw",
    [
        dict(size_probs={1: 0.5, 2: 0.4}),
        dict(size_probs={0: 1.0}),
        dict(model_mix={"bert": 1.1, "ncf": -0.1}),
        dict(days=0),
        dict(num_jobs=0),
        dict(diurnal_amplitude=1.5),
        dict(elastic_share=-0.1),
        dict(duration_max_s=10.0),
        dict(start_weekday=7),
        dict(target_load=0.0),
    ],
)
def test_preset_validation(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        TracePreset(name="x", **kw)


def test_preset_mappings_are_read_only():
    with pytest.raises(TypeError):
        PRESETS["small-1d"].size_probs[1] = 0.9  # type: ignore[index]


def test_unreachable_target_load_raises():
    p = replace(PRESETS["small-1d"], target_load=50.0)  # 400 jobs cannot fill 128 GPUs 50x at <= 12 h
    with pytest.raises(ValueError, match="target_load"):
        generate_trace(p, 0)


def test_offered_load_arithmetic():
    jobs = [JobSpec("a", 0.0, 2, 100.0, "ncf", False, 2, 2), JobSpec("b", 5.0, 4, 50.0, "ncf", False, 4, 4)]
    assert offered_load(jobs, num_gpus=8, horizon_s=100.0) == pytest.approx(400.0 / 800.0)
    assert offered_load([], 8, 100.0) == 0.0
    with pytest.raises(ValueError):
        offered_load(jobs, 0, 100.0)
    with pytest.raises(ValueError):
        offered_load(jobs, 8, 0.0)


# --------------------------------------------------------------------------- files


def test_bench_trace_round_trips_through_csv(tmp_path):
    jobs = list(gen("bench-15d", 0))
    path = tmp_path / "bench.csv"
    write_trace(jobs, path)
    assert load_trace(path, known_models=MODEL_KEYS) == jobs


def test_shipped_default_trace_equals_generator():
    assert DEFAULT_TRACE.is_file(), "regenerate with: lyra-gym trace generate --preset small-1d --seed 0 --out traces/default.csv"
    shipped = load_trace(DEFAULT_TRACE, known_models=MODEL_KEYS)
    assert shipped == list(gen("small-1d", 0))
    assert DEFAULT_TRACE.stat().st_size < 40_000


def test_shipped_default_trace_is_byte_identical_to_writer(tmp_path):
    path = tmp_path / "default.csv"
    write_trace(generate_trace("small-1d", seed=0), path)
    assert path.read_bytes() == DEFAULT_TRACE.read_bytes()


def test_readme_documents_regeneration_command():
    readme = (REPO / "traces" / "README.md").read_text(encoding="utf-8")
    assert "lyra-gym trace generate --preset small-1d --seed 0 --out traces/default.csv" in readme
    assert re.search(r"write_trace\(generate_trace\('small-1d', seed=0\), 'traces/default.csv'\)", readme)
