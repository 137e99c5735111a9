"""Config files map onto SimConfig; mistakes name the field (and file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_gym.model.config import ClusterConfig, ConfigError, ServerGroup, SimConfig, config_from_dict, load_config

ROOT = Path(__file__).resolve().parents[2]


def test_documented_example_config_equals_the_defaults():
    assert load_config(ROOT / "docs" / "example-config.yaml") == SimConfig()


def test_yaml_and_toml_give_the_same_config(tmp_path):
    (tmp_path / "c.yaml").write_text("reclaim_grace_s: 60\ncluster:\n  training:\n    - {count: 2, gpu_type: a100}\n")
    (tmp_path / "c.toml").write_text('reclaim_grace_s = 60\n[[cluster.training]]\ncount = 2\ngpu_type = "a100"\n')
    expected = SimConfig(reclaim_grace_s=60, cluster=ClusterConfig(training=(ServerGroup(2, "a100", 8),)))
    assert load_config(tmp_path / "c.yaml") == expected
    assert load_config(tmp_path / "c.toml") == expected


@pytest.mark.parametrize(
    "data, field",
    [
        ({"reclaim_gracee_s": 1}, "reclaim_gracee_s"),
        ({"cluster": {"training": [{"count": 1, "gpu_type": "v100", "gpu": 8}]}}, "cluster.training[0].gpu"),
        ({"overheads": {"rescale": 3}}, "overheads.rescale"),
        ({"reclaim_grace_s": -1}, "reclaim_grace_s"),
        ({"cluster": {"training": [{"count": 0, "gpu_type": "v100"}]}}, "cluster.training[0].count"),
        ({"cluster": {"inference": {"count": 2, "gpu_type": "t4", "gpus_per_server": 0}}}, "cluster.inference.gpus_per_server"),
        ({"demand": {"peak_trough_ratio": 0.5}}, "peak_trough_ratio"),
        ({"overheads": {"restart_s": -5}}, "overheads.restart_s"),
    ],
)
def test_bad_config_names_the_field(data, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        config_from_dict(data)


def test_config_file_error_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("horizon_s: -3\n")
    with pytest.raises(ConfigError, match="bad.yaml.*horizon_s"):
        load_config(path)
