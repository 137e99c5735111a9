"""Issue 15 items 6 and 7: every config value is type- and range-checked, naming its dotted path;
files that do not parse give one-line errors naming the file and line; the demand curve is capped."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lyra_gym.model import demand as demand_module
from lyra_gym.model.config import (
    MAX_CLUSTER_SERVERS,
    ClusterConfig,
    ConfigError,
    OverheadConfig,
    ServerGroup,
    SimConfig,
    config_from_dict,
    config_to_dict,
    load_config,
)
from lyra_gym.model.demand import MAX_DEMAND_POINTS, DiurnalDemandConfig, diurnal_demand
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.run.simulate import build_demand


def error_of(data) -> str:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    return str(info.value)


def file_error(tmp_path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(str(path))
    return message


# ---------------------------------------------------------------- NaN and infinity


@pytest.mark.parametrize("text", [".nan", ".NaN", ".inf", "-.inf", ".Inf"])
@pytest.mark.parametrize("field", ["reclaim_grace_s", "horizon_s", "demand_horizon_pad_s"])
def test_nan_and_inf_in_a_yaml_file_are_rejected_naming_the_field(tmp_path, field, text):
    message = file_error(tmp_path, "c.yaml", f"{field}: {text}\n")
    assert f"{field}: must be a finite number" in message


@pytest.mark.parametrize(
    "data, path",
    [
        ({"reclaim_grace_s": math.nan}, "reclaim_grace_s"),  # NaN used to turn reclaim enforcement off
        ({"horizon_s": math.inf}, "horizon_s"),
        ({"overheads": {"rescale_s": math.nan}}, "overheads.rescale_s"),
        ({"overheads": {"restart_s": math.inf}}, "overheads.restart_s"),
        ({"overheads": {"migrate_s": -math.inf}}, "overheads.migrate_s"),
        ({"demand": {"noise_std": math.nan}}, "demand.noise_std"),
        ({"demand": {"step_s": math.inf}}, "demand.step_s"),
    ],
)
def test_nan_and_inf_are_rejected_naming_the_dotted_path(data, path):
    assert error_of(data).startswith(f"{path}: must be a finite number")


def test_nan_is_rejected_when_the_dataclass_is_built_in_python():
    with pytest.raises(ConfigError, match="reclaim_grace_s"):
        SimConfig(reclaim_grace_s=math.nan)
    with pytest.raises(ConfigError, match="OverheadConfig.resume_s"):
        OverheadConfig(resume_s=math.inf)


def test_a_valid_config_is_written_as_strict_json():
    text = json.dumps(config_to_dict(config_from_dict({"horizon_s": 1e5, "reclaim_grace_s": "60"})), allow_nan=False)
    assert '"horizon_s": 100000.0' in text


# ---------------------------------------------------------------- YAML 1.1 numbers and booleans


def test_yaml_exponent_numbers_without_a_dot_are_numbers(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("demand_horizon_pad_s: 1e5\nhorizon_s: 1E+5\noverheads: {restart_s: 2e1}\n"
                    "cluster:\n  inference: {count: 1e1, gpu_type: t4}\n")
    config = load_config(path)
    assert config.demand_horizon_pad_s == config.horizon_s == 1e5
    assert config.overheads.restart_s == 20.0
    assert config.cluster.inference.count == 10 and isinstance(config.cluster.inference.count, int)


def test_numbers_written_as_text_in_a_dict_are_read():
    # yaml.safe_load elsewhere (sweep files) reads 1e5 as the string "1e5"
    config = config_from_dict({"demand_horizon_pad_s": "1e5", "horizon_s": "2.5e4"})
    assert config.demand_horizon_pad_s == 1e5 and config.horizon_s == 2.5e4


@pytest.mark.parametrize("value", ["1.5", "1e-1"])
def test_a_fractional_server_count_is_an_error_not_a_crash(tmp_path, value):
    message = file_error(tmp_path, "c.yaml", f"cluster:\n  training:\n    - {{count: {value}, gpu_type: v100}}\n")
    assert "cluster.training[0].count: must be an integer" in message


def test_a_whole_float_is_read_as_an_integer():
    config = config_from_dict({"cluster": {"training": [{"count": 2.0, "gpu_type": "v100", "gpus_per_server": 4.0}]}})
    assert config.cluster.training[0] == ServerGroup(2, "v100", 4)


@pytest.mark.parametrize("text", ["'no'", "no", "off", "yes", "'true'", "1", "0", "null"])
def test_booleans_are_only_true_or_false(tmp_path, text):
    message = file_error(tmp_path, "c.yaml", f"allow_mixed_gpu_types: {text}\n")
    assert "allow_mixed_gpu_types: must be true or false" in message


@pytest.mark.parametrize("text, value", [("true", True), ("false", False), ("True", True), ("FALSE", False)])
def test_true_and_false_are_booleans(tmp_path, text, value):
    path = tmp_path / "c.yaml"
    path.write_text(f"allow_mixed_gpu_types: {text}\n")
    assert load_config(path).allow_mixed_gpu_types is value


def test_toml_booleans_and_numbers(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("allow_mixed_gpu_types = false\nhorizon_s = 1e5\n")
    config = load_config(path)
    assert config.allow_mixed_gpu_types is False and config.horizon_s == 1e5
    path.write_text('allow_mixed_gpu_types = "no"\n')
    with pytest.raises(ConfigError, match="allow_mixed_gpu_types: must be true or false"):
        load_config(path)
    path.write_text("horizon_s = nan\n")
    with pytest.raises(ConfigError, match="horizon_s: must be a finite number"):
        load_config(path)


# ---------------------------------------------------------------- types and ranges, by path


@pytest.mark.parametrize(
    "data, message",
    [
        ({"horizon_s": 0}, "horizon_s: must be a finite number > 0"),
        ({"horizon_s": "soon"}, "horizon_s: must be a number, got str 'soon'"),
        ({"horizon_s": [1]}, "horizon_s: must be a number, got list"),
        ({"horizon_s": True}, "horizon_s: must be a finite number > 0, got True"),
        ({"reclaim_grace_s": 10 ** 400}, "reclaim_grace_s: must be a finite number >= 0"),
        ({"demand_horizon_pad_s": -1}, "demand_horizon_pad_s: must be a finite number >= 0"),
        ({"demand_preset": 3}, "demand_preset: must be a non-empty string"),
        ({"demand_csv": ""}, "demand_csv: must be a non-empty string"),
        ({"profiles": ["a"]}, "profiles: must be a non-empty string"),
        ({"reference_gpu": {"x": 1}}, "reference_gpu: must be a non-empty string"),
        ({"allow_mixed_gpu_types": None}, "allow_mixed_gpu_types: must be true or false, got None"),
        ({"reclaim_grace_s": None}, "reclaim_grace_s: must be a number, got null"),
        ({"cluster": None}, "cluster: expected a table/mapping of settings, got null"),
        ({"cluster": []}, "cluster: expected a table/mapping"),
        ({"cluster": {"training": {"count": 1}}}, "cluster.training: expected a list of server groups"),
        ({"cluster": {"training": []}}, "cluster.training: at least one server group"),
        ({"cluster": {"training": ["v100"]}}, "cluster.training[0]: expected a table/mapping"),
        ({"cluster": {"training": [{"count": 1}]}}, "cluster.training[0].gpu_type: missing"),
        ({"cluster": {"training": [{"count": 1, "gpu_type": ""}]}}, "cluster.training[0].gpu_type: must be a non-empty"),
        ({"cluster": {"training": [{"count": 1, "gpu_type": "v100"}, {"count": "two", "gpu_type": "a100"}]}},
         "cluster.training[1].count: must be an integer, got str 'two'"),
        ({"cluster": {"training": [{"count": 1, "gpu_type": "v100", "gpus_per_server": 10 ** 6}]}},
         "cluster.training[0].gpus_per_server: must be an integer in [1, 1024]"),
        ({"cluster": {"inference": {"count": -1, "gpu_type": "t4"}}}, "cluster.inference.count: must be an integer"),
        ({"cluster": {"training": [{"count": MAX_CLUSTER_SERVERS, "gpu_type": "v100"}]}},
         "cluster: 100016 servers in all, more than MAX_CLUSTER_SERVERS"),
        ({"demand": {"num_servers": 1.5}}, "demand.num_servers: must be an integer >= 1"),
        ({"demand": {"start_weekday": "monday"}}, "demand.start_weekday: must be an integer, got str"),
        ({"demand": {"peak_hour": 24}}, "demand.peak_hour: must be a finite number in [0, 24)"),
        ({"demand": {"weekend_factor": False}}, "demand.weekend_factor: must be a finite number in [0, 1]"),
        ({"demand": {"peak": 1}}, "demand.peak: unknown key"),
        ({"overheads": {"restart_s": "fast"}}, "overheads.restart_s: must be a number"),
        ({"overheads": 30}, "overheads: expected a table/mapping of settings, got int 30"),
        ({1: 2}, "1: unknown key"),
        ({"demand": {"step_s": 0.001}}, "demand_horizon_pad_s: 259200 s at demand.step_s=0.001 s"),
    ],
)
def test_bad_values_name_the_dotted_path(data, message):
    assert message in error_of(data)


def test_a_top_level_list_or_scalar_is_an_error(tmp_path):
    assert "config: expected a table/mapping of settings at the top level, got list" in \
        file_error(tmp_path, "c.yaml", "- 1\n- 2\n")
    assert "got str" in file_error(tmp_path, "c.yaml", "just text\n")
    assert "config: expected a table/mapping" in error_of([("horizon_s", 1)])


def test_python_construction_checks_types_too():
    with pytest.raises(ConfigError, match="ServerGroup.count: must be an integer"):
        ServerGroup(1.5, "v100")
    with pytest.raises(ConfigError, match="ServerGroup.gpu_type"):
        ServerGroup(1, None)
    with pytest.raises(ConfigError, match="ClusterConfig.training"):
        ClusterConfig(training=({"count": 1},))
    with pytest.raises(ConfigError, match="allow_mixed_gpu_types"):
        SimConfig(allow_mixed_gpu_types="no")
    with pytest.raises(ConfigError, match="demand: expected a DiurnalDemandConfig"):
        SimConfig(demand={"step_s": 60})
    assert ClusterConfig(training=[ServerGroup(1, "v100")]).training == (ServerGroup(1, "v100"),)


def test_demand_config_errors_are_config_errors_and_value_errors():
    with pytest.raises(ConfigError, match="DiurnalDemandConfig.step_s: must be a finite number > 0"):
        DiurnalDemandConfig(step_s=math.nan)
    assert issubclass(ConfigError, ValueError)


# ---------------------------------------------------------------- files that do not parse


def test_invalid_yaml_is_one_line_naming_file_and_line(tmp_path):
    message = file_error(tmp_path, "bad.yaml", "horizon_s: 5\ncluster: [\n")
    assert "bad.yaml, line 3: invalid YAML" in message
    message = file_error(tmp_path, "bad.yaml", "a: 1\n  b: 2\n")
    assert "bad.yaml, line 2: invalid YAML" in message


def test_invalid_toml_is_one_line_naming_file_and_line(tmp_path):
    message = file_error(tmp_path, "bad.toml", "horizon_s = 5\nreclaim_grace_s = = 1\n")
    assert "bad.toml, line 2: invalid TOML" in message


def test_a_non_utf8_file_is_one_line_naming_file_and_line(tmp_path):
    message = file_error(tmp_path, "bad.yaml", b"horizon_s: 5\n# caf\xe9\n")
    assert "bad.yaml, line 2: not UTF-8 text (byte 0xe9)" in message


def test_a_missing_file_is_a_config_error(tmp_path):
    assert "cannot read the config file" in file_error_missing(tmp_path)


def file_error_missing(tmp_path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    return str(info.value)


def test_deeply_nested_yaml_is_an_error(tmp_path):
    message = file_error(tmp_path, "deep.yaml", "cluster: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "deep.yaml" in message


# ---------------------------------------------------------------- the demand curve is bounded


def test_a_far_submit_time_is_a_clear_error_not_a_memory_error():
    # submit times are capped at 10 years by the trace (MAX_SUBMIT_TIME_S); a fine demand step
    # still reaches the point cap within that
    jobs = [JobSpec("far", 3e8, 1, 10.0, "ncf", False, 1, 1)]
    config = SimConfig(demand=DiurnalDemandConfig(step_s=60.0))
    with pytest.raises(ConfigError) as info:
        build_demand(config, jobs, np.random.default_rng(0))
    message = str(info.value)
    assert "horizon_s=300259200 s" in message and "demand.step_s=60 s" in message
    assert f"MAX_DEMAND_POINTS={MAX_DEMAND_POINTS:,}" in message
    with pytest.raises(ConfigError, match="MAX_DEMAND_POINTS"):
        build_demand(SimConfig(demand=DiurnalDemandConfig(step_s=1.0)),
                     [JobSpec("farther", 1e7, 1, 10.0, "ncf", False, 1, 1)], np.random.default_rng(0))


def test_the_cap_is_the_documented_constant(monkeypatch):
    monkeypatch.setattr(demand_module, "MAX_DEMAND_POINTS", 100)
    config = DiurnalDemandConfig(step_s=10.0)
    assert len(diurnal_demand(replace_noise(config), 98 * 10.0, np.random.default_rng(0))) <= 99
    with pytest.raises(ConfigError, match=r"horizon_s=1000 s at demand.step_s=10 s needs 101 points"):
        diurnal_demand(config, 1000.0, np.random.default_rng(0))


def replace_noise(config: DiurnalDemandConfig) -> DiurnalDemandConfig:
    from dataclasses import replace

    return replace(config, noise_std=0.0)


def test_a_tiny_demand_step_is_caught_when_the_curve_is_drawn():
    tiny = DiurnalDemandConfig(step_s=1e-300)
    with pytest.raises(ConfigError, match="MAX_DEMAND_POINTS"):
        diurnal_demand(tiny, 1.0, np.random.default_rng(0))
