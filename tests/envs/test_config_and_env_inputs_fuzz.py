"""Fuzzing the inputs (issue 15, items 6-8): config documents, config files, env actions, reset
options and env constructor arguments.

Each property: the input is accepted (and then usable: the config is strict JSON and round-trips;
the env steps with a finite reward and counts invalid values), or it is refused with the
documented error (:class:`ConfigError` / ``ValueError``) whose message names what was wrong (the
field's dotted path, the file, ``action:``, ``options[...]``, the argument). Any other exception
fails the test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import string
import tempfile
import typing
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays, from_dtype

from lyra_gym.envs import ClusterEnv, ElasticEnv
from lyra_gym.model.config import ConfigError, SimConfig, _hints, _unpack, config_from_dict, config_to_dict, load_config

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SMALL_ENV = dict(trace="small-1d", window_s=3 * 3600.0, num_job_slots=6, num_server_slots=3)

# ---------------------------------------------------------------- config documents

GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10**20, 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(string.printable, max_size=6),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "count", "x"]), st.integers(0, 3), max_size=2),
)
NUMBERISH = st.one_of(
    st.integers(-3, 100),
    st.floats(-10.0, 1e6),
    st.sampled_from([0, 0.0, -0.0, 1, 1.5, 2.0, 1e5, 1e300, math.nan, math.inf, -math.inf, -1,
                     "1e5", "1E+3", "60", "2.5", "1_000", "-1e2", ".nan", "nan", ".inf", "0x10", "", " 7 "]),
    GARBAGE,
)
BOOLISH = st.sampled_from([True, False, "no", "yes", "true", "off", 0, 1, None, 1.0])
STRINGISH = st.one_of(st.sampled_from(["v100", "t4", "a100", "", "  ", "mild", "default", "strong", "wild"]), GARBAGE)


def document(cls: type, depth: int = 0) -> st.SearchStrategy:
    """Random (mostly near-valid) mapping for dataclass ``cls``: every key optional, values valid
    or garbage, plus unknown keys now and then."""
    optional: dict[typing.Any, st.SearchStrategy] = {}
    for f in dataclasses.fields(cls):
        base, _ = _unpack(_hints(cls)[f.name])
        if dataclasses.is_dataclass(base):
            value = st.one_of(document(base, depth + 1), GARBAGE)
        elif typing.get_origin(base) is tuple:
            item = typing.get_args(base)[0]
            value = st.one_of(st.lists(st.one_of(document(item, depth + 1), GARBAGE), max_size=3), GARBAGE)
        elif base is bool:
            value = BOOLISH
        elif base is str:
            value = STRINGISH
        else:
            value = NUMBERISH
        optional[f.name] = value
    optional["bogus_key"] = GARBAGE
    optional[7] = GARBAGE  # a non-string key, as YAML can write
    return st.fixed_dictionaries({}, optional=optional)


DOCUMENTS = document(SimConfig)
CROSS_FIELD = {"demand_horizon_pad_s"}  # may be refused for demand.step_s, which the message names


def path_resolves(doc: typing.Any, path: str) -> bool:
    """Does dotted ``path`` (``cluster.training[0].count``) name something in ``doc``, or a key
    missing from a mapping in it?"""
    if path == "config":
        return True
    node = doc
    tokens = re.findall(r"\[\d+\]|[^.\[\]]+", path)
    for i, token in enumerate(tokens):
        if token.startswith("["):
            index = int(token[1:-1])
            if not isinstance(node, (list, tuple)) or index >= len(node):
                return False
            node = node[index]
            continue
        if not isinstance(node, dict):
            return False
        keys = {str(k): k for k in node}
        if token in keys:
            node = node[keys[token]]
        else:
            return i == len(tokens) - 1  # a required key that is missing
    return True


def resolve(doc: typing.Any, path: str) -> typing.Any:
    node = doc
    for token in re.findall(r"\[\d+\]|[^.\[\]]+", path):
        node = node[int(token[1:-1])] if token.startswith("[") else node[{str(k): k for k in node}[token]]
    return node


def names_an_unknown_key(doc: typing.Any, message: str) -> bool:
    """``parent.key: unknown key``: parent is in ``doc`` and holds ``key`` (as written, or its
    repr when it is not a plain name)."""
    found = re.match(r"^((?:[a-z_]+(?:\[\d+\])*\.)*)(.+?): unknown key \(known: ", message)
    if not found:
        return False
    parent = found.group(1).rstrip(".")
    if parent and not path_resolves(doc, parent):
        return False
    node = resolve(doc, parent) if parent else doc
    return any(found.group(2) in (k, repr(k)) for k in node)


def check_document(doc: typing.Any) -> SimConfig | None:
    try:
        config = config_from_dict(doc)
    except ConfigError as err:
        message = str(err)
        path = message.split(": ", 1)[0]
        assert "\n" not in message
        assert names_an_unknown_key(doc, message) or path_resolves(doc, path) \
            or (path in CROSS_FIELD and "demand.step_s" in message), message
        return None
    text = json.dumps(config_to_dict(config), allow_nan=False)  # no NaN or infinity got in
    assert config_from_dict(json.loads(text)) == config
    return config


@FUZZ
@given(DOCUMENTS)
def test_random_config_documents_give_a_config_or_a_config_error_naming_the_path(doc):
    check_document(doc)


@FUZZ
@given(st.recursive(GARBAGE, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                    max_leaves=10))
def test_nested_garbage_is_refused_cleanly(doc):
    check_document(doc)


@FUZZ
@given(st.fixed_dictionaries({}, optional={
    "cluster": st.fixed_dictionaries({}, optional={
        "training": st.lists(st.fixed_dictionaries({"count": st.integers(1, 8), "gpu_type": st.sampled_from(["v100", "a100"])},
                                                   optional={"gpus_per_server": st.sampled_from([1, 4, 8, 8.0])}),
                             min_size=1, max_size=3),
        "inference": st.fixed_dictionaries({"count": st.integers(0, 8), "gpu_type": st.just("t4")})}),
    "reclaim_grace_s": st.one_of(st.floats(0, 1e6), st.integers(0, 10**6), st.sampled_from(["1e3", "60"])),
    "horizon_s": st.one_of(st.none(), st.floats(1e-3, 1e9)),
    "allow_mixed_gpu_types": st.booleans(),
    "demand": st.fixed_dictionaries({}, optional={"step_s": st.floats(300.0, 86400.0),
                                                  "peak_fraction": st.floats(0.0, 1.0)}),
}))
def test_valid_documents_are_accepted(doc):
    assert check_document(doc) is not None


def yaml_file(content: str | bytes, suffix: str = ".yaml") -> Path:
    handle = tempfile.NamedTemporaryFile(suffix=suffix, delete=False)
    with handle:
        handle.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    return Path(handle.name)


def check_file(path: Path) -> SimConfig | None:
    try:
        return load_config(path)
    except ConfigError as err:
        message = str(err)
        assert message.startswith(str(path)) and "\n" not in message, message
        return None
    finally:
        path.unlink()


@FUZZ
@given(DOCUMENTS)
def test_yaml_files_of_random_documents_behave_as_the_documents(doc):
    text = yaml.safe_dump(doc, default_flow_style=False)
    assert (check_file(yaml_file(text)) is None) == (check_document(doc) is None)


@FUZZ
@given(st.one_of(st.text(max_size=40), st.text("{}[]:-,'\"\n #&*!|>%@`\t.e1", max_size=40)),
       st.sampled_from([".yaml", ".toml"]))
def test_random_text_files_give_a_config_or_a_one_line_error_naming_the_file(text, suffix):
    check_file(yaml_file(text, suffix))


@FUZZ
@given(st.binary(max_size=40), st.sampled_from([".yaml", ".toml"]))
def test_random_bytes_files_give_a_config_or_a_one_line_error_naming_the_file(raw, suffix):
    check_file(yaml_file(raw, suffix))


# ---------------------------------------------------------------- env actions

_ENV: dict[str, typing.Any] = {}


def cluster_env() -> ClusterEnv:
    if "env" not in _ENV:
        _ENV["env"] = ClusterEnv(**SMALL_ENV)
    return _ENV["env"]


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
DTYPES = INT_DTYPES + [np.float16, np.float32, np.float64, np.bool_]


@st.composite
def actions(draw):
    n = cluster_env().action_space.shape[0]
    shape = draw(st.one_of(st.just((n,)), st.just((n,)), st.lists(st.integers(0, n + 1), max_size=3).map(tuple)))
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    if dtype.kind in "iu" and draw(st.booleans()):  # mostly small values: in range, just out of range
        low = 0 if dtype.kind == "u" else -2
        elements = st.integers(low, 6)
    else:
        elements = from_dtype(dtype)
    return draw(arrays(dtype, shape, elements=elements))


def expected_invalid(env, action: np.ndarray) -> int:
    masks, bad, pos = env.action_masks(), 0, 0
    for value, n in zip(action.tolist(), env.action_space.nvec.tolist()):
        bad += not (0 <= value < n and masks[pos + value])
        pos += n
    return bad


@FUZZ
@given(actions(), st.integers(0, 3))
def test_random_actions_are_errors_or_counted_noops(action, seed):
    env = cluster_env()
    env.reset(seed=seed)
    well_formed = action.dtype.kind in "iu" and action.shape == env.action_space.shape
    expected = expected_invalid(env, action) if well_formed else None
    try:
        obs, reward, _, _, info = env.step(action)
    except ValueError as err:
        assert not well_formed and str(err).startswith("action: must be an integer array of shape"), err
        return
    assert well_formed
    assert info["invalid_actions"] == info["invalid_actions_total"] == expected
    assert math.isfinite(reward) and env.observation_space.contains(obs)


@FUZZ
@given(st.lists(st.one_of(st.integers(-3, 6), st.floats(0, 4), st.text(max_size=2), st.none()), max_size=16))
def test_random_lists_as_actions(values):
    env = cluster_env()
    env.reset(seed=0)
    form = all(type(v) is int for v in values) and len(values) == env.action_space.shape[0]
    try:
        env.step(values)
    except ValueError as err:
        assert not form and str(err).startswith("action:")
    else:
        assert form


# ---------------------------------------------------------------- reset options

OPTION_KEYS = st.sampled_from(["split", "window", "split", "window", "seed", "windw", ""])
OPTION_VALUES = st.one_of(st.sampled_from(["train", "test", "test", "val", "TEST"]), st.integers(-2, 6),
                          st.sampled_from([10**9, 1.0, 1.9, True, np.int64(1), None, "1"]))


def options_valid(options, num_test: int) -> bool:
    if options is None:
        return True
    if not isinstance(options, dict) or set(options) - {"split", "window"}:
        return False
    split = options.get("split", "train")
    if not (isinstance(split, str) and split in ("train", "test")):
        return False
    if "window" not in options:
        return True
    window = options["window"]
    return split == "test" and isinstance(window, (int, np.integer)) and not isinstance(window, bool) \
        and 0 <= window < num_test


@FUZZ
@given(st.one_of(st.none(), st.dictionaries(OPTION_KEYS, OPTION_VALUES, max_size=3), GARBAGE),
       st.one_of(st.none(), st.integers(0, 2**32)))
def test_random_reset_options_are_used_or_refused_naming_the_key(options, seed):
    env = cluster_env()
    valid = options_valid(options, env.windows.num_test)
    try:
        obs, info = env.reset(seed=seed, options=options)
    except ValueError as err:
        assert not valid and str(err).startswith("options"), err
        return
    assert valid and env.observation_space.contains(obs)
    if options and "window" in options:
        assert info["window"] == options["window"] and env.window.seed == 1_000_000 + options["window"]


# ---------------------------------------------------------------- constructor arguments

ARGUMENTS = {
    "reward_scale_s": NUMBERISH,
    "window_s": st.one_of(st.sampled_from([3600.0, 7200, 3 * 3600.0]), NUMBERISH),
    "test_fraction": st.one_of(st.floats(0.05, 0.5), NUMBERISH),
    "num_job_slots": st.one_of(st.integers(1, 8), NUMBERISH),
    "num_server_slots": st.one_of(st.integers(0, 4), NUMBERISH),
    "borrow_levels": st.one_of(st.integers(1, 4), NUMBERISH),
    "max_steps": st.one_of(st.integers(1, 50), NUMBERISH),
    "trace_seed": st.one_of(st.integers(0, 3), NUMBERISH),
    "reward": st.one_of(st.sampled_from(["jct", "queue+0.5*preemption", "usage", "x*jct", "jct+", "nan*jct"]),
                        st.dictionaries(st.sampled_from(["jct", "queue", "speed"]), NUMBERISH, max_size=2), GARBAGE),
    "heuristic": st.one_of(st.sampled_from(["lyra", "lyra-noloan", "fifo", "nope"]), GARBAGE),
}


@FUZZ
@given(st.fixed_dictionaries({}, optional=ARGUMENTS))
def test_random_constructor_arguments_build_an_env_or_name_the_argument(kwargs):
    try:
        env = ElasticEnv(trace="small-1d", **{"window_s": 3 * 3600.0, **kwargs})
    except ValueError as err:
        name = str(err).split(":", 1)[0]
        assert name in kwargs or name == "window_s", err
        return
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    if env.done:  # e.g. a window too short to hold a job: nothing to decide
        with pytest.raises(RuntimeError, match="the episode is over"):
            env.step(env.expert_action())
        return
    _, reward, *_ = env.step(env.expert_action())
    assert math.isfinite(reward)


@pytest.fixture(autouse=True, scope="module")
def _drop_the_shared_env():
    yield
    _ENV.clear()
