"""Issue 40 item 8: every scheduler parameter is checked by type and range before work.

``pollux.tick_interval=.nan`` hung and ``1e-9`` never finished; ``fifo.backfill=maybe``,
``lyra.reserve_servers=2.5`` and ``pollux.p=abc`` were accepted or gave a traceback. Each parameter
is declared once (``lyra_gym.sim.params``); the registry's ``make``, compare's pre-run check and
direct construction refuse a bad value in one line naming the policy and parameter, whether it
came from the command line (a string parsed as YAML) or a sweep file (already typed). The hang
cases are checked before any simulation: the engine is replaced by one that fails the test.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections import abc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lyra_baselines.fifo import FifoScheduler
from lyra_baselines.pollux import PolluxScheduler
from lyra_baselines.tiresias import TiresiasScheduler
from lyra_gym.cli.app import main
from lyra_gym.errors import LyraGymError
from lyra_gym.harness.compare import CompareError, check_policies, parse_policy_params
from lyra_gym.sim import params as params_module
from lyra_gym.sim import scheduler as registry
from lyra_gym.sim.params import ParamError
from lyra_gym.sim.scheduler import Scheduler

HEURISTICS = ["baseline", "baseline-min", "fifo", "gandiva", "gandiva+loan", "lyra", "lyra-noelastic",
              "lyra-noloan", "pollux", "pollux+loan", "sjf", "tiresias", "tiresias+loan"]

# (--policy-param item, the message after "lyra-gym: error: "), hand-written
CASES = [
    ("pollux.tick_interval=.nan",
     "policy 'pollux': parameter tick_interval: must be a finite number in [1, 1e+09] or null (got nan)"),
    ("pollux.tick_interval=1e-9",
     "policy 'pollux': parameter tick_interval: must be a finite number in [1, 1e+09] or null (got 1e-09)"),
    ("fifo.backfill=maybe", "policy 'fifo': parameter backfill: must be true or false (got 'maybe')"),
    ("fifo.backfill=1", "policy 'fifo': parameter backfill: must be true or false (got 1)"),
    ("lyra.reserve_servers=2.5",
     "policy 'lyra': parameter reserve_servers: must be an integer in [0, 100000] (got 2.5)"),
    ("pollux.p=abc", "policy 'pollux': parameter p: must be a finite number in [-10, 10] (got 'abc')"),
    ("lyra.round_s=.inf", "policy 'lyra': parameter round_s: must be a finite number in [1, 1e+09] (got inf)"),
    ("lyra.knapsack_exact_limit=1000000000000",
     "policy 'lyra': parameter knapsack_exact_limit: must be an integer in [0, 1e+08] (got 1000000000000)"),
    ("gandiva.quantum_s=0.001",
     "policy 'gandiva': parameter quantum_s: must be a finite number in [1, 1e+09] (got 0.001)"),
    ("tiresias.tick_interval=.nan",
     "policy 'tiresias': parameter tick_interval: must be a finite number in [1, 1e+09] or null (got nan)"),
]


@pytest.fixture
def no_simulation(monkeypatch):
    """Any simulation started fails the test (a hang case must be refused before one)."""
    def started(*args, **kwargs):
        raise AssertionError("a simulation started")

    monkeypatch.setattr("lyra_gym.cli.app.simulate", started)
    monkeypatch.setattr("lyra_gym.run.simulate.build_engine", started)


@pytest.mark.parametrize("item, message", CASES)
def test_the_command_line_refuses_a_bad_value_in_one_line_before_any_run(item, message, tmp_path, capsys,
                                                                         no_simulation):
    policy = item.partition(".")[0]
    code = main(["simulate", "--policy", policy, "--policy-param", item, "--trace", "traces/default.csv",
                 "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"lyra-gym: error: {message}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("item, message", CASES)
def test_check_policies_and_make_refuse_the_value_as_parsed(item, message):
    policy = item.partition(".")[0]
    params = parse_policy_params([item], [policy])
    with pytest.raises(CompareError) as err:
        check_policies([policy], params)
    assert str(err.value) == message
    with pytest.raises(ParamError) as made:
        registry.make(policy, **params[policy])
    assert str(made.value) == message


def test_simulate_refuses_a_nan_tick_before_building_the_engine(no_simulation):
    from lyra_gym.run.simulate import simulate

    with pytest.raises(ParamError, match=r"^policy 'pollux': parameter tick_interval: "):
        simulate([], "pollux", policy_params={"tick_interval": math.nan})
    with pytest.raises(ParamError, match=r"^policy 'pollux\+loan': parameter tick_interval: "):
        simulate([], "pollux+loan", policy_params={"tick_interval": 1e-9})


def test_a_sweep_file_is_checked_as_the_command_line_is(tmp_path):
    from lyra_gym.harness.sweep import load_grid

    path = tmp_path / "grid.yaml"
    path.write_text("policies: [pollux, fifo]\ntraces: ['preset:small-1d']\n"
                    "policy_params:\n  fifo: {backfill: true}\n  pollux: {tick_interval: .nan}\n")
    with pytest.raises(LyraGymError) as err:
        load_grid(path)
    assert str(err.value) == CASES[0][1]
    path.write_text("policies: [lyra]\ntraces: ['preset:small-1d']\npolicy_params:\n  lyra: {reserve_servers: 2.5}\n")
    with pytest.raises(LyraGymError) as err:
        load_grid(path)
    assert str(err.value) == CASES[4][1]


def test_direct_construction_refuses_what_make_refuses():
    with pytest.raises(ParamError, match=r"^tick_interval: must be a finite number in \[1, 1e\+09\] or null, got nan$"):
        PolluxScheduler(tick_interval=math.nan)
    with pytest.raises(ParamError, match=r"^backfill: must be true or false, got 'maybe'$"):
        FifoScheduler(backfill="maybe")  # type: ignore[arg-type]
    with pytest.raises(ParamError, match="^fixed_batch_models: "):
        PolluxScheduler(fixed_batch_models=[1, 2])  # type: ignore[list-item]
    with pytest.raises(ParamError, match="^model_noise_scale_ratio: "):
        PolluxScheduler(model_noise_scale_ratio=3)  # type: ignore[arg-type]  # was an AttributeError


def test_a_lone_value_stands_for_a_one_item_list():
    assert TiresiasScheduler(thresholds=57600).thresholds == (57600.0,)  # type: ignore[arg-type]
    assert PolluxScheduler(fixed_batch_models="ncf").fixed_batch_models == ("ncf",)  # was the string "ncf"
    with pytest.raises(ParamError, match=r"^thresholds: "):
        TiresiasScheduler(thresholds=[100.0] * 32)  # 33 queues


def test_an_echoed_value_is_cut_to_a_short_prefix():
    huge = "x" * 100_000
    with pytest.raises(ParamError) as err:
        registry.make("pollux", speedup_base=huge)
    cut = "'" + "x" * 59 + "..."  # lyra_gym.errors.shown: the first 60 characters of the repr
    assert str(err.value) == ("policy 'pollux': parameter speedup_base: must be one of 'fair-share', 'request' "
                              f"(got {cut})")
    bomb: list[Any] = ["a"]
    for _ in range(40):  # 2 ** 40 leaves if expanded
        bomb = [bomb, bomb]
    with pytest.raises(ParamError) as err:
        registry.make("tiresias", thresholds=bomb)
    assert str(err.value).startswith("policy 'tiresias': parameter thresholds: ") and len(str(err.value)) < 300


# --- third-party schedulers ---------------------------------------------------------------------

@dataclasses.dataclass
class _ThirdParty(Scheduler):
    gain: float = 1.0
    limit: float = math.inf  # inf is a legitimate "off" for a field nobody declared
    label: str = "x"
    name = "third-party"


class _Plain(Scheduler):
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


def test_third_party_dataclasses_get_their_field_types_checked_and_others_are_built_as_they_are(monkeypatch):
    monkeypatch.setitem(registry._registered, "t3-dataclass", _ThirdParty)
    monkeypatch.setitem(registry._registered, "t3-plain", _Plain)
    with pytest.raises(ParamError, match=r"^policy 't3-dataclass': parameter gain: must be a number \(got 'abc'\)$"):
        registry.make("t3-dataclass", gain="abc")
    with pytest.raises(ParamError, match="parameter label: must be a string"):
        registry.make("t3-dataclass", label=3)
    assert registry.make("t3-dataclass", gain=2, limit=math.inf).limit == math.inf
    assert registry.make("t3-plain", anything="goes").kwargs == {"anything": "goes"}  # type: ignore[attr-defined]
    assert "gain" in registry.describe_params("t3-dataclass")
    assert "no declared parameters" in registry.describe_params("t3-plain")
    spec = "tests.sim.test_scheduler_params_checked:_ThirdParty"
    with pytest.raises(ParamError, match=rf"^policy '{spec}': parameter gain: "):
        registry.make(spec, gain=None)


# --- declarations ---------------------------------------------------------------------------------

def test_every_heuristic_declares_every_parameter_and_prints_them():
    assert set(HEURISTICS) <= set(registry.available())
    for name in HEURISTICS:
        factory = registry.scheduler_factory(name)
        declared = params_module.declared(factory)
        assert declared, name
        assert all(d.spec is not None and d.spec.doc and d.rule is not None for d in declared.values()), name
        table = registry.describe_params(name).splitlines()
        assert table[0].split() == ["parameter", "type", "default", "range", "meaning"]
        assert [line.split()[0] for line in table[1:]] == list(declared)
    table = registry.describe_params("pollux")
    assert any(line.split()[:4] == ["tick_interval", "float", "or", "null"] and "[1, 1e+09] s" in line
               for line in table.splitlines())


# --- property: any invalid value refused in one line, any valid one accepted ----------------------

def _valid(tp: Any, spec: params_module.Param) -> st.SearchStrategy:
    inner = params_module._optional(tp)
    if inner is not None:
        return st.one_of(st.none(), _valid(inner, spec))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if spec.choices:
        return st.sampled_from(spec.choices)
    if tp is bool:
        return st.booleans()
    if tp is str:
        return st.text(max_size=10)
    if tp is int:
        return st.integers(int(spec.lo), int(spec.hi))  # type: ignore[arg-type]
    if tp is float:
        return st.floats(spec.lo, spec.hi, exclude_min=spec.lo_open, allow_nan=False) | st.integers(
            math.ceil(spec.lo) + spec.lo_open, math.floor(spec.hi))  # type: ignore[arg-type]
    if origin is abc.Sequence and args[0] is float:  # thresholds: increasing
        return st.lists(_valid(float, spec), max_size=spec.max_items, unique=True).map(sorted)
    if origin is abc.Sequence:
        return st.lists(_valid(args[0], spec), max_size=spec.max_items)
    assert origin is abc.Mapping, tp
    return st.dictionaries(st.text(max_size=8), _valid(args[1], spec), max_size=5)


def _invalid(tp: Any, spec: params_module.Param) -> st.SearchStrategy:
    others = st.sampled_from(["abc", "", [1], {"a": 1}, math.nan, -math.inf, object()])
    inner = params_module._optional(tp) or tp
    origin = typing.get_origin(inner)
    if spec.choices:
        return others | st.text().filter(lambda s: s not in spec.choices) | st.integers()
    if inner is str:
        return st.sampled_from([1, 2.5, None, True, [1], {"a": "b"}])
    if inner is bool:
        return others | st.integers() | st.sampled_from(["true", "maybe", 1.0])
    if inner in (int, float):
        wrong = [math.nan, math.inf, spec.lo - 1 if not spec.lo_open else spec.lo, spec.hi * 2 + 1, True, "1"]
        numbers = st.sampled_from(wrong) | st.floats(spec.hi, allow_infinity=True, exclude_min=True)
        return numbers | (st.floats(0.01, 0.99).map(lambda f: spec.lo + f) if inner is int else others)
    if origin is abc.Sequence:
        item = typing.get_args(inner)[0]
        too_long = [_example(item, spec)] * (spec.max_items + 1)
        return (st.builds(lambda bad: [bad], _invalid(item, spec)) | st.just(too_long)
                | st.sampled_from([{"a": 1}, math.nan]))
    assert origin is abc.Mapping
    return (st.sampled_from([3, "abc", ["a"], {1: 1.0}])
            | st.builds(lambda bad: {"m": bad}, _invalid(typing.get_args(inner)[1], spec)))


def _example(tp: Any, spec: params_module.Param) -> Any:
    return spec.choices[0] if spec.choices else {str: "m", float: spec.hi, int: spec.lo}[tp]


def _params() -> list[tuple[str, str, Any, params_module.Param]]:
    """(policy, parameter, type, declaration) of every heuristic's parameters."""
    return [(name, key, d.type, d.spec) for name in HEURISTICS
            for key, d in params_module.declared(registry.scheduler_factory(name)).items()]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), case=st.deferred(lambda: st.sampled_from(_params())))
@pytest.mark.slow
def test_every_declared_parameter_refuses_invalid_values_and_accepts_valid_ones(data, case):
    name, key, tp, spec = case
    bad = data.draw(_invalid(tp, spec), label="invalid")
    with pytest.raises(ParamError) as err:
        registry.make(name, **{key: bad})
    text = str(err.value)
    assert text.startswith(f"policy {name!r}: parameter {key}: must be ") and "\n" not in text and len(text) < 400
    good = data.draw(_valid(tp, spec), label="valid")
    assert getattr(registry.make(name, **{key: good}), key) == (good if not isinstance(good, list) else
                                                                  tuple(good) if key == "thresholds" else good)
