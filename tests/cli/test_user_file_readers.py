"""Issue 40 items 6, 7 and 9 (readers of user files): YAML aliases refused in every reader, YAML 1.1
numbers (010, 1:20) refused, echoed values cut short, bounded training sizes, suite windows checked,
ASCII digits in traces, deep Philly JSON, 0-job conversions, FIFOs and devices refused unread, and
errors about a file a config names that name the config and field but never quote the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lyra_agents.config import TrainConfigError, load_train_config, resolve_config
from lyra_agents.suite import SUITE_FILES, SuiteError, load_suite
from lyra_gym.cli.app import main
from lyra_gym.model import config as config_module
from lyra_gym.model.config import ConfigError, config_from_dict, load_config
from lyra_gym.model.demand import DemandFileError, load_demand_csv
from lyra_gym.workloads.realtraces import load_philly
from lyra_gym.workloads.trace import TraceError, load_trace

ROOT = Path(__file__).resolve().parents[2]
HEADER = "job_id,submit_time,num_gpus,duration,model,elastic,min_gpus,max_gpus\n"
SECRET = "admin:x:0:0:s3cr3t-password-hash"


def one_line_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("lyra-gym: warning:")]
    assert len(lines) == 1 and lines[0].startswith("lyra-gym: error:"), err
    return lines[0]


# ------------------------------------------------------------------ item 7: aliases, echoed values

ALIASED_CLUSTER = "cluster:\n  inference: &grp {count: 2, gpu_type: t4}\n  training: [*grp]\n"


def test_config_file_alias_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(ALIASED_CLUSTER)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"{path}, line 3: invalid YAML: YAML aliases (*name) are not accepted"


def test_suite_file_alias_is_refused(tmp_path):
    path = tmp_path / "su.yaml"
    path.write_text("format: lyra-gym-suite/1\nversion: &v t1\ndescription: *v\nscenarios: [{name: a}]\n")
    with pytest.raises(SuiteError, match=r"line 3: .*YAML aliases \(\*name\) are not accepted"):
        load_suite(path)


def test_training_config_alias_is_refused(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("net_arch: &w [64, 64]\nreward: *w\n")
    with pytest.raises(TrainConfigError, match=r"line 2: .*YAML aliases \(\*name\) are not accepted"):
        load_train_config(path)


def test_training_set_value_alias_is_refused():
    with pytest.raises(TrainConfigError, match=r"--set: reward: YAML aliases \(\*name\) are not accepted"):
        resolve_config(overrides=["reward=[&a [jct], *a, *a]"])


@pytest.mark.parametrize("data", [
    {"knowledge": {"mode": "x" * 10_000}},
    {"placement": list(range(10_000))},
    {"cluster": {"inference": {"count": 2, "gpu_type": ["t4"] * 10_000}}},
    {"reclaim_grace_s": "y" * 10_000},
])
def test_config_errors_echo_a_short_prefix(data):
    with pytest.raises(ConfigError) as err:
        config_from_dict(data)
    assert len(str(err.value)) < 200, str(err.value)[:300]


def test_suite_and_training_errors_echo_a_short_prefix(tmp_path):
    path = tmp_path / "su.yaml"
    path.write_text(f"format: lyra-gym-suite/1\nversion: {list(range(5000))}\nscenarios: [{{name: a}}]\n")
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert len(str(err.value)) < 200 + len(str(path))
    with pytest.raises(TrainConfigError) as err:
        resolve_config(overrides=["device=" + "z" * 5000])
    assert len(str(err.value)) < 200


def test_trace_errors_echo_a_short_prefix(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + f"j1,0,1,60,{'m' * 5000},0,,\n")
    with pytest.raises(TraceError) as err:
        load_trace(path, known_models={"resnet50"})
    assert "field 'model'" in str(err.value) and len(err.value.problem) < 200


# ------------------------------------------------------------------ item 9: YAML 1.1 numbers, limits

@pytest.mark.parametrize("count", ["010", "1:20"])
def test_yaml11_integers_are_not_read_as_octal_or_sexagesimal(tmp_path, count):
    path = tmp_path / "c.yaml"
    path.write_text(f"cluster:\n  inference: {{count: {count}, gpu_type: t4}}\n")
    with pytest.raises(ConfigError, match=rf"cluster\.inference\.count: must be an integer, got (str )?'{count}'"):
        load_config(path)


def test_total_timesteps_is_bounded():
    with pytest.raises(TrainConfigError, match=r"--set: total_timesteps: must be <= 1e10 \(MAX_TOTAL_TIMESTEPS\), "
                                               r"got an integer of about 301 digits"):
        resolve_config(overrides=["total_timesteps=1e300"])


def test_huge_net_arch_is_refused_before_torch():
    with pytest.raises(TrainConfigError, match=r"--set: net_arch: at most 16 layers \(MAX_NET_LAYERS\) of at most "
                                               r"8192 units \(MAX_NET_WIDTH\) each, got \[100000000\]"):
        resolve_config(overrides=["net_arch=[100000000]"])


def test_suite_windows_beyond_the_trace_are_one_line_errors(tmp_path):
    path = tmp_path / "su.yaml"
    path.write_text("format: lyra-gym-suite/1\nversion: t1\n"
                    "scenarios:\n  - {name: s, trace: env-14d, trace_seeds: [0], windows: [100000]}\n")
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    # env-14d: 14 days x 0.2 test fraction / 12 h windows = 5.6, so windows 0 to 4
    assert str(err.value) == (f"{path}: scenarios[0].windows: window 100000 asked, but trace env-14d seed 0 has "
                              "5 test windows (0 to 4) of 43200 s")


def test_shipped_suites_windows_exist():
    """The built-in suites skip the windows check at load (seconds): it holds here."""
    for path in SUITE_FILES.values():
        load_suite(path, check_windows=True)


@pytest.mark.parametrize("row, field", [
    ("j1,0,\u0661\u0662,60,resnet50,0,,\n", "num_gpus"),  # Arabic-Indic 12
    ("j1,\u0665,1,60,resnet50,0,,\n", "submit_time"),
    ("j1,0,1,\uff16\uff10,resnet50,0,,\n", "duration"),  # full-width 60
    ("j1,1_000,1,60,resnet50,0,,\n", "submit_time"),  # float() reads '1_000' as 1000
    ("j1,0,1,6_0,resnet50,0,,\n", "duration"),
])
def test_trace_numbers_must_be_ascii(tmp_path, row, field):
    path = tmp_path / "t.csv"
    path.write_text(HEADER + row, encoding="utf-8")
    with pytest.raises(TraceError, match=rf"field '{field}': not an? .*\(only ASCII digits, no '_' separators\)"):
        load_trace(path)


def test_demand_numbers_must_be_ascii(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("time_s,servers_needed\n0,\u0663\n", encoding="utf-8")
    with pytest.raises(DemandFileError, match=r"line 2, field 'servers_needed': .*only ASCII digits"):
        load_demand_csv(path)


def test_deeply_nested_philly_json_is_a_trace_error(tmp_path):
    path = tmp_path / "philly.json"
    path.write_text("[" + "[" * 100_000 + "]" * 100_000 + "]")
    with pytest.raises(TraceError, match=r"philly\.json:1: field 'json': a job record nested too deeply"):
        load_philly(path)


def test_zero_job_conversion_is_refused_and_writes_nothing(tmp_path, capsys):
    src, out = tmp_path / "philly.json", tmp_path / "out.csv"
    src.write_text('[{"jobid": "a", "status": "Failed", "submitted_time": 0, "attempts": []}]')
    code = main(["trace", "convert", "--format", "philly", "--in", str(src), "--out", str(out)])
    line = one_line_error(capsys.readouterr().err)
    assert code == 2 and not out.exists()
    assert line == f"lyra-gym: error: {src}: no job kept (1 read; skipped: 1 failed); nothing written to {out}"


def _run_isolated(code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter limited to 2 GB and 60 s (the old readers hung or ate memory)."""
    guard = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
    return subprocess.run([sys.executable, "-c", guard + code], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifo_and_device_traces_are_refused_unread(tmp_path):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        done = _run_isolated(f"from lyra_gym.workloads.trace import load_trace\n"
                             f"try:\n    load_trace({str(path)!r})\nexcept Exception as err:\n    print(err)\n")
        assert done.stdout.strip() == (f"{path}: a device, FIFO or socket, not a trace file "
                                       "(only regular files are read)")


def test_fifo_named_in_a_config_is_refused_unread(tmp_path):
    fifo = tmp_path / "profile.json"
    os.mkfifo(fifo)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"profiles: {fifo}\n")
    done = _run_isolated(f"from lyra_gym.model.config import load_config\n"
                         f"try:\n    load_config({str(cfg)!r})\nexcept Exception as err:\n    print(err)\n")
    assert done.stdout.strip() == (f"profiles {fifo} (field profiles of {cfg}): a device, FIFO or socket, not a "
                                   "profiles file (only regular files are read)")


def test_user_files_are_read_up_to_a_limit(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * 101)
    assert config_module.read_user_file(path, 101, "config file") == b"#" * 101
    with pytest.raises(ConfigError, match=r"big\.yaml: larger than 100 bytes, the most a config file may hold"):
        config_module.read_user_file(path, 100, "config file")


# ------------------------------------------------------------------ item 6: files named inside a config

@pytest.mark.parametrize("field, name", [("profiles", "p.json"), ("efficiency", "e.json"), ("demand_csv", "d.csv")])
def test_a_file_named_in_a_config_is_checked_without_quoting_it(tmp_path, field, name):
    (tmp_path / name).write_text(f"{SECRET}\n{SECRET}\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"{field}: {name}\n")
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    message = str(err.value)
    assert message.startswith(f"{field} {tmp_path / name} (field {field} of {cfg}): ") and "line 1" in message
    assert "s3cr3t" not in message and "admin" not in message


def test_demand_csv_header_is_not_quoted(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(f"{SECRET}\n")
    with pytest.raises(DemandFileError) as err:
        load_demand_csv(path)
    assert "s3cr3t" not in str(err.value) and "field 'time_s': missing column" in str(err.value)


def test_simulate_names_the_config_field_not_the_file_contents(tmp_path, capsys):
    (tmp_path / "passwd").write_text(f"{SECRET}\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("demand_csv: passwd\n")
    code = main(["simulate", "--config", str(cfg), "--policy", "fifo", "--trace",
                 str(ROOT / "traces" / "default.csv"), "--out", str(tmp_path / "run")])
    line = one_line_error(capsys.readouterr().err)
    assert code == 2 and f"(field demand_csv of {cfg})" in line and "s3cr3t" not in line


@pytest.mark.parametrize("group, field", [("training", "cluster.training[0].gpu_type"),
                                          ("inference", "cluster.inference.gpu_type")])
def test_an_unknown_gpu_type_in_the_cluster_is_refused_naming_the_field(tmp_path, capsys, group, field):
    """An inference GPU type no profile knows went unnoticed until a policy borrowed a server
    (fifo never does: exit 0); now every run refuses it before the first event."""
    from lyra_gym.cli.app import main

    types = {"training": "v100", "inference": "t4", group: "tpu9"}
    config = tmp_path / "c.yaml"
    config.write_text(f"cluster:\n  training:\n    - {{count: 2, gpu_type: {types['training']}, gpus_per_server: 8}}\n"
                      f"  inference: {{count: 2, gpu_type: {types['inference']}, gpus_per_server: 8}}\n")
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "j1,0,1,60,resnet50,0,,\n")
    code = main(["simulate", "--policy", "fifo", "--trace", str(trace), "--config", str(config),
                 "--out", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err.strip() == (f"lyra-gym: error: {field}: unknown GPU type 'tpu9' "
                                               f"(the profile knows a100, t4, v100)")
    assert not (tmp_path / "out").exists()
