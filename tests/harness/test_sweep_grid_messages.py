"""``load_grid``'s error messages, pinned word for word, and which one a file with several faults
gets (the checks run in a fixed order): a refactoring of the sweep-file parser must keep both."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lyra_gym.errors import ConfigError
from lyra_gym.harness.sweep import GRID_KEYS, SweepError, load_grid
from lyra_gym.workloads.tracegen import PRESETS

OK = {"policies": ["fifo"], "traces": ["preset:small-1d"]}


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def _error(path: Path) -> str:
    with pytest.raises(SweepError) as info:
        load_grid(path)
    return str(info.value)


def test_file_level_errors_name_the_file(tmp_path):
    assert _error(tmp_path) == f"{tmp_path}: a folder, not a sweep file (only regular files are read)"
    bad = tmp_path / "latin.yaml"
    bad.write_bytes(b"policies: [caf\xe9]\n")
    assert _error(bad) == f"{bad}: not UTF-8 text"
    assert _error(_write(tmp_path, "policies: [fifo\n")).startswith(f"{tmp_path / 'grid.yaml'}: not valid YAML (")
    assert _error(_write(tmp_path, "- fifo\n")) == f"{tmp_path / 'grid.yaml'}: expected a mapping at the top level"
    path = _write(tmp_path, {**OK, "zeta": 1, "alpha": 2})
    assert _error(path) == f"{path}: alpha: unknown key (known: {', '.join(GRID_KEYS)})"


def test_an_empty_file_lacks_policies(tmp_path):
    assert _error(_write(tmp_path, "")) == "policies: required (a list)"


@pytest.mark.parametrize("extra, message", [
    ({"policies": None}, "policies: required (a list)"),
    ({"policies": "fifo"}, "policies: expected a non-empty list, got 'fifo'"),
    ({"policies": []}, "policies: expected a non-empty list, got []"),
    ({"traces": None}, "traces: required (a list)"),
    ({"traces": {"a": 1}}, "traces: expected a non-empty list, got {'a': 1}"),
    ({"seeds": ["x"]}, "seeds: expected a list of integers, got ['x']"),
    ({"seeds": [[1]]}, "seeds: expected a list of integers, got [[1]]"),
    ({"seeds": 3}, "seeds: expected a list of integers, got 3"),  # _list's SweepError is a ValueError too
    ({"seeds": [0, -2, -3]}, "seeds: must be integers >= 0, got -2"),
    ({"seeds": [2, 1, 2, 1, 0]}, "seeds: listed twice: [1, 2]"),
    ({"trace_seed": -1}, "trace_seed: expected 'run' or an integer >= 0, got -1"),
    ({"trace_seed": True}, "trace_seed: expected 'run' or an integer >= 0, got True"),
    ({"trace_seed": "fixed"}, "trace_seed: expected 'run' or an integer >= 0, got 'fixed'"),
    ({"trace_params": [1]}, "trace_params: expected a mapping of name -> list of values"),
    ({"params": {"reclaim_grace_s": []}}, "params.reclaim_grace_s: empty list of values"),
    ({"params": {"reclaim_grace_s": [[1]]}},
     "params.reclaim_grace_s: swept values must be scalars (they label the plots), got [1]; "
     "set structured settings in base_config"),
    ({"trace_params": {"num_jobs": [10]}, "params": {"num_jobs": [1]}}, "num_jobs: in both trace_params and params"),
    ({"policy_params": ["fifo"]}, "policy_params: expected a mapping of policy -> mapping of parameters"),
    ({"policy_params": {"fifo": 1}}, "policy_params: expected a mapping of policy -> mapping of parameters"),
    ({"policy_params": {"lyra": {}}}, "policy_params.lyra: not among the policies (fifo)"),
    ({"traces": ["preset:nope"]}, f"traces: unknown preset 'nope' (known: {', '.join(sorted(PRESETS))})"),
    ({"traces": ["missing.csv"]}, "traces: 'missing.csv': no such file"),
    ({"traces": ["preset:small-1d", "missing.csv"], "trace_params": {"elastic_share": [0.5]}},
     "traces: 'missing.csv' is a CSV file; trace_params can only be swept on preset:NAME traces"),
    ({"trace_params": {"nope": [1]}}, "trace_params.nope: unknown trace preset field (known: "),
    ({"params": {"reclaim_grace_s": [0, "soon"]}},
     "params: 'reclaim_grace_s' = 'soon' is not a valid engine setting: "),
])
def test_each_check_names_its_key(tmp_path, extra, message):
    text = _error(_write(tmp_path, {**OK, **extra}))
    assert text == message or (message.endswith(": ") or message.endswith("(known: ")) and text.startswith(message)


@pytest.mark.parametrize("extra, first", [
    ({"policies": [], "traces": [], "seeds": [-1]}, "policies:"),
    ({"traces": [], "seeds": [-1]}, "traces:"),
    ({"seeds": [-1], "trace_seed": -1}, "seeds:"),
    ({"trace_seed": -1, "trace_params": [1]}, "trace_seed:"),
    ({"trace_params": [1], "params": [1]}, "trace_params:"),
    ({"params": [1], "policy_params": [1]}, "params:"),
    ({"trace_params": {"x": [1]}, "params": {"x": [1]}, "policy_params": [1]}, "x: in both"),
    ({"policy_params": {"lyra": {}}, "traces": ["preset:nope"]}, "policy_params.lyra:"),
    ({"traces": ["preset:nope"], "params": {"nope": [1]}}, "traces: unknown preset"),
    ({"trace_params": {"nope": [1]}, "params": {"nope2": [1]}}, "trace_params.nope:"),
])
def test_the_first_fault_in_file_order_is_reported(tmp_path, extra, first):
    assert _error(_write(tmp_path, {**OK, **extra})).startswith(first)


def test_a_bad_scheduler_fails_after_policy_params_before_traces(tmp_path):
    from lyra_gym.sim.scheduler import UnknownSchedulerError

    path = _write(tmp_path, {"policies": ["nope"], "traces": ["preset:nope"]})
    with pytest.raises(UnknownSchedulerError, match="unknown scheduler 'nope'"):
        load_grid(path)
    path = _write(tmp_path, {"policies": ["nope"], "traces": ["preset:nope"], "policy_params": {"x": {}}})
    assert _error(path).startswith("policy_params.x: not among the policies")


def test_base_config_is_read_next_to_the_sweep_file(tmp_path, monkeypatch):
    folder = tmp_path / "sweeps"
    folder.mkdir()
    (folder / "base.yaml").write_text("reclaim_grace_s: 7\n")
    monkeypatch.chdir(tmp_path)
    grid = load_grid(_write(folder, {**OK, "base_config": "base.yaml"}))
    assert grid.base_config.reclaim_grace_s == 7
    assert grid.base_config_path == "base.yaml"
    assert grid.base_config_file == str(folder / "base.yaml")
    with pytest.raises(ConfigError, match=f"^{folder / 'gone.yaml'}: cannot read the config file"):
        load_grid(_write(folder, {**OK, "base_config": "gone.yaml", "policy_params": [1]}))


def test_a_good_grid_is_parsed_as_written(tmp_path):
    grid = load_grid(_write(tmp_path, {**OK, "policies": ["fifo", "lyra"], "seeds": [3, 1], "trace_seed": 0,
                                       "trace_params": {"elastic_share": 0.5}, "params": {"reclaim_grace_s": [0, 60]},
                                       "policy_params": {"lyra": {"reclaim_rule": "random"}}}))
    assert (grid.policies, grid.traces) == (("fifo", "lyra"), ("preset:small-1d",))
    assert (grid.seeds, grid.trace_seed) == ((3, 1), 0)
    assert dict(grid.trace_params) == {"elastic_share": (0.5,)} and dict(grid.params) == {"reclaim_grace_s": (0, 60)}
    assert dict(grid.policy_params) == {"fifo": {}, "lyra": {"reclaim_rule": "random"}}
    assert grid.base_config_path is None and grid.base_config_file is None
    assert grid.swept == ["elastic_share", "reclaim_grace_s"]
