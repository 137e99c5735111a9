"""Guarantees of the inference-demand curves (lyra_gym.model.demand)."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lyra_gym.model.demand import (
    DemandCurve,
    DemandFileError,
    DiurnalDemandConfig,
    diurnal_demand,
    load_demand_csv,
    write_demand_csv,
)

HOUR = 3600.0
DAY = 86400.0
WEEK = 7 * DAY


def noiseless(**overrides: object) -> DiurnalDemandConfig:
    return DiurnalDemandConfig(noise_std=0.0, **overrides)  # type: ignore[arg-type]


# --- diurnal shape, hand-computed (defaults: 16 servers, peak 0.9, ratio 4, peak 14 h) ---


def test_weekday_peak_hour_needs_ceil_of_peak_fraction_times_servers() -> None:
    curve = diurnal_demand(noiseless(), WEEK, np.random.default_rng(0))
    # peak = 0.9 * 16 = 14.4 -> 15 servers, on Monday..Friday at 14:00.
    for day in range(5):
        assert curve.at(day * DAY + 14 * HOUR) == 15


def test_twelve_hours_after_peak_needs_ceil_of_trough() -> None:
    curve = diurnal_demand(noiseless(), WEEK, np.random.default_rng(0))
    # trough = 14.4 / 4 = 3.6 -> 4 servers, at 02:00 (14 + 12 - 24).
    for day in range(7):
        assert curve.at(day * DAY + 2 * HOUR) == 4
    assert curve.servers.min() == 4


def test_weekend_peak_is_lower_by_weekend_factor_of_the_part_above_trough() -> None:
    curve = diurnal_demand(noiseless(), WEEK, np.random.default_rng(0))
    # Saturday/Sunday peak = 3.6 + 0.6 * (14.4 - 3.6) = 10.08 -> 11 servers, 4 fewer.
    saturday_peak = curve.at(5 * DAY + 14 * HOUR)
    sunday_peak = curve.at(6 * DAY + 14 * HOUR)
    assert saturday_peak == sunday_peak == 11
    assert curve.at(4 * DAY + 14 * HOUR) - saturday_peak == 4


def test_start_weekday_shifts_the_weekend() -> None:
    # t = 0 is a Saturday: day 0 and day 1 are the weekend, day 2 is a Monday.
    curve = diurnal_demand(noiseless(start_weekday=5), 3 * DAY, np.random.default_rng(0))
    assert curve.at(14 * HOUR) == 11
    assert curve.at(DAY + 14 * HOUR) == 11
    assert curve.at(2 * DAY + 14 * HOUR) == 15


def test_peak_hour_moves_the_peak() -> None:
    curve = diurnal_demand(noiseless(peak_hour=20.0), DAY, np.random.default_rng(0))
    assert curve.at(20 * HOUR) == 15
    assert curve.at(8 * HOUR) == 4


def test_diurnal_curve_keeps_only_change_points() -> None:
    curve = diurnal_demand(DiurnalDemandConfig(), 3 * WEEK, np.random.default_rng(3))
    assert curve.times_s[0] == 0.0
    assert np.all(np.diff(curve.times_s) > 0)
    assert np.all(np.diff(curve.servers) != 0)
    # every change lies on the step grid
    assert np.all(np.mod(curve.times_s, 900.0) == 0.0)


def test_zero_horizon_gives_a_single_point() -> None:
    curve = diurnal_demand(DiurnalDemandConfig(), 0.0, np.random.default_rng(0))
    assert len(curve) == 1
    assert curve.times_s.tolist() == [0.0]


# --- determinism ---


def test_same_seed_gives_identical_curves() -> None:
    config = DiurnalDemandConfig()
    a = diurnal_demand(config, 2 * WEEK, np.random.default_rng(42))
    b = diurnal_demand(config, 2 * WEEK, np.random.default_rng(42))
    np.testing.assert_array_equal(a.times_s, b.times_s)
    np.testing.assert_array_equal(a.servers, b.servers)
    assert a == b


def test_different_seeds_give_different_curves() -> None:
    config = DiurnalDemandConfig()
    a = diurnal_demand(config, 2 * WEEK, np.random.default_rng(1))
    b = diurnal_demand(config, 2 * WEEK, np.random.default_rng(2))
    assert a != b


def test_rng_consumption_does_not_depend_on_noise_std() -> None:
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    diurnal_demand(noiseless(), DAY, rng_a)
    diurnal_demand(DiurnalDemandConfig(noise_std=0.3), DAY, rng_b)
    assert rng_a.random() == rng_b.random()


# --- property: values are whole servers within capacity ---

configs = st.builds(
    DiurnalDemandConfig,
    num_servers=st.integers(1, 200),
    peak_fraction=st.floats(0.0, 1.0),
    peak_trough_ratio=st.floats(1.0, 50.0),
    peak_hour=st.floats(0.0, 23.99),
    weekend_factor=st.floats(0.0, 1.0),
    noise_std=st.floats(0.0, 2.0),
    step_s=st.floats(60.0, 7200.0),
    start_weekday=st.integers(0, 6),
)


@settings(max_examples=60, deadline=None)
@given(config=configs, horizon_s=st.floats(0.0, 3 * DAY), seed=st.integers(0, 2**32 - 1))
def test_demand_is_always_whole_servers_within_capacity(
    config: DiurnalDemandConfig, horizon_s: float, seed: int
) -> None:
    curve = diurnal_demand(config, horizon_s, np.random.default_rng(seed))
    assert curve.servers.dtype == np.int64
    assert curve.times_s.dtype == np.float64
    assert np.all(curve.servers >= 0)
    assert np.all(curve.servers <= config.num_servers)
    assert curve.times_s[0] == 0.0
    assert curve.times_s[-1] <= horizon_s
    assert np.all(np.diff(curve.times_s) > 0)


@settings(max_examples=60, deadline=None)
@given(config=configs, seed=st.integers(0, 2**32 - 1))
def test_noiseless_demand_lies_between_trough_and_peak(config: DiurnalDemandConfig, seed: int) -> None:
    config = DiurnalDemandConfig(**{**config.__dict__, "noise_std": 0.0})
    curve = diurnal_demand(config, 2 * DAY, np.random.default_rng(seed))
    peak = config.peak_fraction * config.num_servers
    trough = peak / config.peak_trough_ratio
    assert curve.servers.min() >= math.floor(trough)
    assert curve.peak() <= math.ceil(peak + 1e-6)


# --- DemandCurve ---


@pytest.fixture()
def tiny() -> DemandCurve:
    return DemandCurve(times_s=np.array([0.0, 10.0, 30.0]), servers=np.array([2, 6, 1]))


def test_at_is_right_continuous_at_change_points(tiny: DemandCurve) -> None:
    assert tiny.at(-5.0) == 2
    assert tiny.at(0.0) == 2
    assert tiny.at(float(np.nextafter(10.0, 0.0))) == 2
    assert tiny.at(10.0) == 6
    assert tiny.at(float(np.nextafter(10.0, 20.0))) == 6
    assert tiny.at(float(np.nextafter(30.0, 0.0))) == 6
    assert tiny.at(30.0) == 1
    assert tiny.at(1e12) == 1
    assert isinstance(tiny.at(10.0), int)


def test_next_change_gives_the_following_change_time(tiny: DemandCurve) -> None:
    assert tiny.next_change(-1.0) == 0.0
    assert tiny.next_change(0.0) == 10.0
    assert tiny.next_change(10.0) == 30.0
    assert tiny.next_change(30.0) is None


def test_peak_is_the_largest_value(tiny: DemandCurve) -> None:
    assert tiny.peak() == 6
    assert DemandCurve.constant(3).peak() == 3


def test_mean_busy_fraction_hand_checked(tiny: DemandCurve) -> None:
    # capacity 4: [0,10) 2 busy, [10,30) min(6,4)=4 busy; default horizon = 30 s
    assert tiny.mean_busy_fraction(4) == pytest.approx((2 * 10 + 4 * 20) / (4 * 30))
    # past the last change the last value (1) holds
    assert tiny.mean_busy_fraction(4, horizon_s=40.0) == pytest.approx((20 + 80 + 1 * 10) / (4 * 40))
    # a horizon inside the first step sees only the first value
    assert tiny.mean_busy_fraction(4, horizon_s=5.0) == pytest.approx(0.5)
    # a large capacity is never more than the demand
    assert tiny.mean_busy_fraction(8) == pytest.approx((2 * 10 + 6 * 20) / (8 * 30))


def test_mean_busy_fraction_of_single_point_uses_one_day() -> None:
    assert DemandCurve.constant(3).mean_busy_fraction(4) == pytest.approx(0.75)
    assert DemandCurve.constant(9).mean_busy_fraction(4) == pytest.approx(1.0)


def test_default_config_trough_is_under_forty_percent_busy() -> None:
    curve = diurnal_demand(noiseless(), DAY, np.random.default_rng(0))
    assert curve.at(2 * HOUR) / 16 < 0.4
    assert 0.0 < curve.mean_busy_fraction(16, horizon_s=DAY) < 1.0


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_mean_busy_fraction_rejects_bad_capacity(tiny: DemandCurve, bad: object) -> None:
    with pytest.raises(ValueError, match="num_servers"):
        tiny.mean_busy_fraction(bad)  # type: ignore[arg-type]


def test_constant_curve_needs_the_same_servers_always() -> None:
    curve = DemandCurve.constant(5)
    assert curve.times_s.tolist() == [0.0]
    assert curve.at(0.0) == curve.at(1e9) == 5
    assert curve.next_change(0.0) is None


def test_curve_arrays_are_read_only_copies() -> None:
    times = np.array([0.0, 5.0])
    servers = np.array([1, 2])
    curve = DemandCurve(times_s=times, servers=servers)
    times[1] = 99.0
    servers[0] = 99
    assert curve.times_s.tolist() == [0.0, 5.0]
    assert curve.servers.tolist() == [1, 2]
    with pytest.raises(ValueError):
        curve.servers[0] = 3
    with pytest.raises(ValueError):
        curve.times_s[0] = 1.0


@pytest.mark.parametrize(
    ("times", "servers", "needle"),
    [
        ([1.0, 2.0], [1, 2], "times_s[0]"),
        ([0.0, 2.0, 2.0], [1, 2, 3], "strictly increasing"),
        ([0.0, 3.0, 2.0], [1, 2, 3], "strictly increasing"),
        ([0.0, 1.0], [1, -2], ">= 0"),
        ([0.0, 1.0], [1], "same length"),
        ([], [], "at least one"),
        ([0.0, math.inf], [1, 2], "finite"),
        ([0.0, 1.0], [1.0, 2.5], "whole"),
    ],
)
def test_invalid_curve_raises_value_error_naming_the_problem(
    times: list[float], servers: list[float], needle: str
) -> None:
    with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        DemandCurve(times_s=np.array(times, dtype=float), servers=np.array(servers))


# --- CSV ---


def test_csv_round_trip_is_exact(tmp_path: Path) -> None:
    curve = diurnal_demand(DiurnalDemandConfig(step_s=333.3), WEEK, np.random.default_rng(11))
    path = tmp_path / "demand.csv"
    write_demand_csv(curve, path)
    assert load_demand_csv(path) == curve
    assert load_demand_csv(str(path)) == curve


def test_csv_rows_are_sorted_extra_columns_ignored_and_equal_runs_merged(tmp_path: Path) -> None:
    path = tmp_path / "unsorted.csv"
    path.write_text(
        "note,servers_needed,time_s\n"
        "c,3,600\n"
        "\n"
        "a,1,0\n"
        "d,3.0,900\n"
        "b,2,300\n"
    )
    curve = load_demand_csv(path)
    assert curve.times_s.tolist() == [0.0, 300.0, 600.0]
    assert curve.servers.tolist() == [1, 2, 3]


def test_csv_first_value_holds_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "late_start.csv"
    path.write_text("time_s,servers_needed\n100,4\n200,2\n")
    curve = load_demand_csv(path)
    # the prepended point at 0 equals the first row's value, so the two merge
    assert curve.times_s.tolist() == [0.0, 200.0]
    assert curve.servers.tolist() == [4, 2]
    assert curve.at(0.0) == 4
    assert curve.at(150.0) == 4
    assert curve.at(200.0) == 2


@pytest.mark.parametrize(
    ("content", "line", "field"),
    [
        ("", 1, "time_s"),
        ("\n\n", 1, "servers_needed"),
        ("time_s,servers\n0,1\n", 1, "servers_needed"),
        ("servers_needed\n1\n", 1, "time_s"),
        ("time_s,servers_needed\n", 2, "servers_needed"),
        ("time_s,servers_needed\n0,1\nabc,2\n", 3, "time_s"),
        ("time_s,servers_needed\n0,1\n\n-5,2\n", 4, "time_s"),
        ("time_s,servers_needed\n0,1\nnan,2\n", 3, "time_s"),
        ("time_s,servers_needed\n0,1\n,2\n", 3, "time_s"),
        ("time_s,servers_needed\n0,2.5\n", 2, "servers_needed"),
        ("time_s,servers_needed\n0,many\n", 2, "servers_needed"),
        ("time_s,servers_needed\n0,-1\n", 2, "servers_needed"),
        ("time_s,servers_needed\n0\n", 2, "servers_needed"),
        ("time_s,servers_needed\n0,1\n10,2\n10.0,3\n", 4, "time_s"),
        ("time_s,servers_needed,time_s\n0,1,0\n", 1, "time_s"),
    ],
    ids=[
        "empty-file",
        "only-blank-lines",
        "missing-servers-column",
        "missing-time-column",
        "no-data-rows",
        "non-numeric-time",
        "negative-time-after-blank-line",
        "nan-time",
        "empty-time",
        "non-integer-servers",
        "non-numeric-servers",
        "negative-servers",
        "short-row",
        "duplicate-time",
        "duplicate-column",
    ],
)
def test_csv_error_names_file_line_and_field(
    tmp_path: Path, content: str, line: int, field: str
) -> None:
    path = tmp_path / "broken_demand.csv"
    path.write_text(content)
    with pytest.raises(DemandFileError) as info:
        load_demand_csv(path)
    message = str(info.value)
    assert str(path) in message
    assert f"line {line}" in message
    assert field in message
    assert info.value.line == line
    assert field in info.value.field


def test_demand_file_error_is_a_value_error_and_pickles() -> None:
    error = DemandFileError("x.csv", 3, "time_s", "not a number")
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error)
    assert (copy.path, copy.line, copy.field) == ("x.csv", 3, "time_s")


# --- config validation ---


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_servers", 0),
        ("num_servers", 2.0),
        ("num_servers", True),
        ("peak_fraction", 1.5),
        ("peak_fraction", -0.1),
        ("peak_fraction", math.nan),
        ("peak_trough_ratio", 0.5),
        ("peak_trough_ratio", math.inf),
        ("peak_hour", 24.0),
        ("peak_hour", -1.0),
        ("weekend_factor", 1.2),
        ("noise_std", -0.01),
        ("step_s", 0.0),
        ("step_s", -900.0),
        ("start_weekday", 7),
        ("start_weekday", 1.0),
    ],
)
def test_invalid_config_raises_value_error_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        DiurnalDemandConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("horizon", [-1.0, math.inf, math.nan])
def test_invalid_horizon_raises_value_error(horizon: float) -> None:
    with pytest.raises(ValueError, match="horizon_s"):
        diurnal_demand(DiurnalDemandConfig(), horizon, np.random.default_rng(0))


def test_demand_presets_set_the_peak_trough_ratio_through_the_config():
    import numpy as np

    from lyra_gym.model.config import ConfigError, config_from_dict
    from lyra_gym.model.jobspec import JobSpec
    from lyra_gym.run.simulate import build_demand

    jobs = [JobSpec("a", 6 * 86400.0, 1, 10.0, "ncf", False, 1, 1)]
    peaks = {}
    for name, ratio in (("mild", 2.5), ("strong", 8.0)):
        cfg = config_from_dict({"demand_preset": name, "demand": {"noise_std": 0.0},
                                "cluster": {"inference": {"count": 40, "gpu_type": "t4"}}})
        curve = build_demand(cfg, jobs, np.random.default_rng(0))
        weekday = curve.servers[curve.times_s < 5 * 86400]
        peaks[name] = (weekday.max(), weekday.min())
        assert weekday.max() == math.ceil(0.9 * 40 - 1e-9)
        assert weekday.min() == math.ceil(round(0.9 * 40 / ratio, 9))
    assert peaks["strong"][1] < peaks["mild"][1]
    with pytest.raises(ConfigError, match="demand_preset"):
        config_from_dict({"demand_preset": "wild"})
