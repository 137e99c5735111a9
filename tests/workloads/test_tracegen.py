"""Synthetic trace generator: determinism, validity, preset statistics, shipped trace, scale option."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from lyra_gym.model.jobspec import JobSpec
from lyra_gym.workloads.trace import load_trace, write_trace
from lyra_gym.workloads.tracegen import MODEL_KEYS, PRESETS, TracePreset, generate_trace, offered_load, scaled_preset

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TRACE = REPO / "traces" / "default.csv"

#: Presets small enough to generate many times per run; the production-scale ones
#: (500,000 jobs) have their own tests below, on a cut.
ORDINARY = sorted(name for name, p in PRESETS.items() if p.num_jobs <= 50_000)


@cache
def gen(name: str, seed: int) -> tuple[JobSpec, ...]:
    return tuple(generate_trace(name, seed))


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", ORDINARY)
@pytest.mark.sample(1)
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


@pytest.mark.parametrize("name", ORDINARY)
@pytest.mark.sample(1)
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


@pytest.mark.parametrize("name", ORDINARY)
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


@pytest.mark.parametrize("name", ORDINARY)
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


@pytest.mark.slow
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


# --------------------------------------------------------------------------- existing presets never move

#: SHA-256 of ``write_trace(generate_trace(name, 0))``, recorded before the scale option was
#: added (issue 24): adding options must not change a single byte of an existing preset's trace.
#: A deliberate change to the generator updates these and says so in the commit.
PRESET_SHA256_SEED0 = {
    "bench-15d": "19c53e3a0a935b8a46365dca1c8192c26ae8824544c683bc1f4def89421151db",
    "env-14d": "773a21453e4c5a66bc9bbfa4fa06b003dc592a32b7d72a2af3f293c2cfd2f77c",
    "lyra-15d": "f41adb3386cf4d70c63172195c9d2f77cbcd8054aa6dded4104e0bc259185018",
    "philly-like": "d7c8c6d0f08dc4034398ae74691b5ab6f70ca4996dcb59d822af542f48679787",
    "small-1d": "9db65f8bf225ab3a4e94b41e293eba0cbb17b003b8ca3ba81a6c77f15e539bcc",
}


@pytest.mark.parametrize("name", sorted(PRESET_SHA256_SEED0))
def test_existing_presets_write_the_same_bytes_as_before(name, tmp_path):
    path = tmp_path / f"{name}.csv"
    write_trace(list(gen(name, 0)), path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == PRESET_SHA256_SEED0[name]


# --------------------------------------------------------------------------- scale option


def test_scale_one_is_the_preset_itself():
    for name in ORDINARY:
        assert scaled_preset(name, 1) is PRESETS[name]
    assert generate_trace("lyra-15d", 0, scale=1) == list(gen("lyra-15d", 0))
    assert generate_trace(PRESETS["small-1d"], 3, scale=1, days=None) == list(gen("small-1d", 3))


@pytest.mark.parametrize("scale", [2, 5])
def test_scale_multiplies_jobs_and_reference_cluster_keeping_the_load(scale):
    base = PRESETS["small-1d"]
    p = scaled_preset("small-1d", scale)
    assert (p.name, p.num_jobs, p.reference_gpus, p.days) == (f"small-1d-x{scale}", 400 * scale, 128 * scale, 1.0)
    jobs = generate_trace("small-1d", 0, scale=scale)
    assert len(jobs) == 400 * scale
    assert jobs == generate_trace(p, 0)
    assert offered_load(jobs, 128 * scale, base.horizon_s) == pytest.approx(base.target_load, rel=1e-6)


def test_scaled_trace_is_deterministic_for_its_seed():
    a = generate_trace("env-14d", 4, scale=3)
    assert a == generate_trace("env-14d", 4, scale=3)
    assert a != generate_trace("env-14d", 5, scale=3)


def test_scale_keeps_the_per_job_distributions_and_the_arrival_shape():
    base, n = PRESETS["env-14d"], 8
    one = list(gen("env-14d", 0)) + list(gen("env-14d", 1))  # 11,200 jobs
    big = generate_trace("env-14d", 0, scale=n)  # 44,800 jobs
    for jobs in (one, big):
        m = len(jobs)
        sizes = np.array([j.num_gpus for j in jobs])
        for size, prob in base.size_probs.items():
            assert abs(np.mean(sizes == size) - prob) <= _binomial_tol(prob, m), size
        assert abs(np.mean([j.elastic for j in jobs]) - base.elastic_share) <= _binomial_tol(base.elastic_share, m)
    # the same share of arrivals in each day of the horizon and each 4-hour block of the day
    for key, bins in ((lambda t: t // 86_400, 14), (lambda t: (t % 86_400) // 14_400, 6)):
        share_one = np.bincount(key(np.array([j.submit_time for j in one])).astype(int), minlength=bins) / len(one)
        share_big = np.bincount(key(np.array([j.submit_time for j in big])).astype(int), minlength=bins) / len(big)
        assert np.abs(share_one - share_big).max() < 0.01
    # the same duration distribution: the load calibration's common factor is ~1 at any scale
    # (its seed noise, a few per cent at x1, shrinks with the job count)
    for jobs in (one, big):
        d = np.log([j.duration for j in jobs])
        assert np.median(d) == pytest.approx(math.log(base.duration_median_s), abs=0.1)
        assert np.std(d) == pytest.approx(base.duration_sigma, rel=0.1)


def test_days_cut_prorates_the_jobs_from_the_same_start():
    p = scaled_preset("lyra-15d", 10, days=2)
    assert (p.name, p.num_jobs, p.days, p.reference_gpus) == ("lyra-15d-x10-2d", 66_666, 2.0, 10_240)
    assert scaled_preset("lyra-15d", 1, days=2).num_jobs == 6_666
    jobs = generate_trace("lyra-15d", 0, scale=1, days=2)
    assert len(jobs) == 6_666 and max(j.submit_time for j in jobs) <= 2 * 86_400
    assert offered_load(jobs, 1024, 2 * 86_400) == pytest.approx(PRESETS["lyra-15d"].target_load, rel=1e-6)


@pytest.mark.parametrize("kw", [dict(scale=0), dict(scale=1.5), dict(scale=True), dict(days=0),
                                dict(days=float("nan")), dict(days=1e-9)])
def test_bad_scale_or_days_is_refused(kw):
    with pytest.raises(ValueError, match=next(iter(kw)) if "1e-09" not in repr(kw) else "no job"):
        generate_trace("small-1d", 0, **kw)


def test_production_scale_preset_is_lyra_15d_ten_times():
    x10, base = PRESETS["lyra-15d-x10"], PRESETS["lyra-15d"]
    assert (x10.num_jobs, x10.reference_gpus, x10.days) == (500_000, 10_240, 15.0)
    same = {f: getattr(base, f) for f in ("diurnal_amplitude", "weekend_factor", "size_probs", "duration_median_s",
                                          "duration_sigma", "duration_max_s", "duration_min_s", "elastic_share",
                                          "model_mix", "peak_hour", "start_weekday", "load_band", "target_load")}
    assert {f: getattr(x10, f) for f in same} == same
    assert replace(x10, description="") == replace(scaled_preset(base, 10), description="")
    # its first day: ids as wide as the job count needs, load calibrated on the scaled cluster
    jobs = generate_trace("lyra-15d-x10", 0, days=1)
    assert len(jobs) == 33_333 and jobs[0].job_id == "j00000"
    assert offered_load(jobs, 10_240, 86_400) == pytest.approx(1.02, rel=1e-6)


@pytest.mark.slow
def test_production_scale_preset_generates_500k_jobs():
    jobs = generate_trace("lyra-15d-x10", 0)
    assert len(jobs) == 500_000 and jobs[-1].job_id == "j499999"
    assert offered_load(jobs, 10_240, 15 * 86_400) == pytest.approx(1.02, rel=1e-6)
