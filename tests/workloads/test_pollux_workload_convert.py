"""Pollux artifact workloads (``trace convert --format pollux``): a hand-written fixture converts to
hand-computed jobs, bad rows name file, line and field, and the CLI's trace runs on the testbed config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_gym.cli.app import main
from lyra_gym.model.config import load_config
from lyra_gym.model.jobspec import JobSpec
from lyra_gym.model.profiles import builtin_profiles
from lyra_gym.workloads.realtraces import POLLUX_APPLICATIONS, load_pollux, load_real_trace
from lyra_gym.workloads.trace import TraceError, load_trace

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "pollux" / "workload-tiny.csv"
TESTBED = ROOT / "traces" / "pollux-testbed.yaml"
HEADER = "name,time,application,num_replicas,batch_size"


def _v100(model):
    g = builtin_profiles().model(model).gpu("v100")
    return g.step_compute_s, g.allreduce_intra_s, g.allreduce_inter_s


def _duration(model, work, n, batch, sync_unit):
    # n V100s at local batch m = batch / n: compute = step_fixed_s + the rest of step_compute_s in
    # proportion to m / local_batch, step = compute + 2(n-1)/n * unit, samples/s = n m / step
    g = builtin_profiles().model(model)
    m = batch / n
    v = g.gpu("v100")
    c = v.step_fixed_s + (v.step_compute_s - v.step_fixed_s) * m / g.local_batch
    sync = 0.0 if n == 1 else 2 * (n - 1) / n * sync_unit
    return work / (n * m / (c + sync))


def test_fixture_converts_to_hand_computed_jobs():
    # Work = P* x b0 samples (artifact traces/<app>/validation-*.csv, row max_epochs; module docstring).
    # Duration = work / samples/s at the workload's batch_size on n V100s packed 4 to a server.
    _, _, inter = _v100("resnet18")      # cifar10, 6 GPUs = 2 servers of 4, batch 2048
    cifar = _duration("resnet18", 39062.90816659533 * 128, 6, 2048, inter)
    ncf = _duration("ncf", 194174.0 * 256, 1, 32768, 0.0)
    yolo = _duration("yolov3", 103443.97796253164 * 8, 1, 64, 0.0)
    _, intra, _ = _v100("bert")          # bert, 4 GPUs = 1 server
    bert = _duration("bert", 14774.0 * 12, 4, 384, intra)
    _, _, inter = _v100("resnet50")      # imagenet, 8 GPUs = 2 servers
    imagenet = _duration("resnet50", 576525.594895604 * 200, 8, 3200, inter)
    _, intra, _ = _v100("deepspeech2")   # deepspeech2, 2 GPUs = 1 server
    ds2 = _duration("deepspeech2", 28536.0 * 20, 2, 320, intra)
    expected = [  # sorted by time; yolov3-3 (time 30) is out of order in the file
        JobSpec("cifar10-0", 10.0, 6, cifar, "resnet18", True, 1, 64),
        JobSpec("ncf-1", 25.0, 1, ncf, "ncf", False, 1, 1),
        JobSpec("yolov3-3", 30.0, 1, yolo, "yolov3", True, 1, 32),
        JobSpec("bert-2", 40.0, 4, bert, "bert", True, 1, 64),
        JobSpec("imagenet-4", 60.0, 8, imagenet, "resnet50", True, 1, 64),
        JobSpec("deepspeech2-5", 75.0, 2, ds2, "deepspeech2", True, 1, 64),
    ]
    jobs = load_pollux(TINY)
    assert [j.job_id for j in jobs] == [e.job_id for e in expected]
    for got, want in zip(jobs, expected):
        assert got.duration == pytest.approx(want.duration, rel=1e-12)
        assert got == JobSpec(want.job_id, want.submit_time, want.num_gpus, got.duration, want.model,
                              want.elastic, want.min_gpus, want.max_gpus, got.batch_size)
    assert [j.batch_size for j in jobs] == [2048, 32768, 64, 384, 3200, 320]  # the workload's, in time order
    assert jobs.records == 6 and jobs.skipped == {} and jobs.format == "pollux"
    assert list(load_real_trace("pollux", TINY)) == list(jobs)


def test_work_is_target_epochs_of_the_training_set():
    # P* x b0 = max_epochs x the data set (CIFAR-10 50,000; ImageNet-1k 1,281,167; VOC07+12 16,551).
    per_epoch = {app: a.work_samples / a.max_epochs for app, a in POLLUX_APPLICATIONS.items()}
    assert per_epoch["cifar10"] == pytest.approx(50_000, rel=1e-4)
    assert per_epoch["imagenet"] == pytest.approx(1_281_167, rel=1e-5)
    assert per_epoch["yolov3"] == pytest.approx(16_551, rel=1e-4)
    assert {a.model for a in POLLUX_APPLICATIONS.values()} <= set(builtin_profiles().models)


def test_gpus_per_server_changes_the_packing():
    one_server = load_pollux(TINY, gpus_per_server=8)
    by_id = {j.job_id: j for j in one_server}
    c, intra, _ = _v100("resnet18")  # 6 GPUs now fit one server: intra-server all-reduce
    assert by_id["cifar10-0"].duration == pytest.approx(_duration("resnet18", 39062.90816659533 * 128, 6, 2048, intra))
    with pytest.raises(ValueError, match="gpus_per_server"):
        load_pollux(TINY, gpus_per_server=0)


def test_more_replicas_than_the_cap_raise_the_cap(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text(f"{HEADER}\nyolov3-0,0,yolov3,48,64\n")
    (job,) = load_pollux(path)
    assert (job.num_gpus, job.min_gpus, job.max_gpus) == (48, 1, 48)


@pytest.mark.parametrize("text, line, field, problem", [
    ("name,time,num_replicas,batch_size\nx,0,1,8\n", 1, "application", "missing column 'application'"),
    (f"{HEADER}\nx,0,cifar10,1,128\ny,5,mnist,1,128\n", 3, "application", "unknown application 'mnist'"),
    (f"{HEADER}\nx,-3,cifar10,1,128\n", 2, "time", "must be >= 0"),
    (f"{HEADER}\nx,0,cifar10,2.5,128\n", 2, "num_replicas", "not a whole number of replicas: '2.5'"),
    (f"{HEADER}\nx,0,cifar10,two,128\n", 2, "num_replicas", "not a number: 'two'"),
    (f"{HEADER}\nx,0,cifar10,0,128\n", 2, "num_replicas", "must be >= 1"),
    (f"{HEADER}\nx,0,cifar10,1,\n", 2, "batch_size", "missing value"),
    (f"{HEADER}\nx,0,cifar10,1,128\n\nx,9,ncf,1,32768\n", 4, "name", "duplicate job id 'x'"),
    (f"{HEADER}\nx,0,cifar10\n", 2, "num_replicas", "missing"),
    ("", 1, "header", "empty file"),
])
def test_bad_rows_name_file_line_and_field(tmp_path, text, line, field, problem):
    path = tmp_path / "workload-bad.csv"
    path.write_text(text)
    with pytest.raises(TraceError) as err:
        load_pollux(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)
    assert problem in err.value.problem
    assert str(err.value).startswith(f"{path}:{line}: field '{field}': ")


def test_model_missing_from_the_profile_is_named(tmp_path):
    data = json.loads((ROOT / "lyra_gym" / "data" / "builtin_profiles.json").read_text())
    del data["models"]["yolov3"]
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps(data))
    with pytest.raises(TraceError, match="'yolov3'") as err:
        load_pollux(TINY, profiles=prof)
    assert (err.value.line, err.value.field) == (5, "application")


def test_testbed_config_is_16_nodes_of_4_t4_without_inference():
    cfg = load_config(TESTBED)
    (group,) = cfg.cluster.training
    assert (group.count, group.gpu_type, group.gpus_per_server) == (16, "t4", 4)
    assert cfg.cluster.inference.count == 0
    assert (cfg.overheads.restart_s, cfg.overheads.rescale_s) == (30.0, 30.0)


def test_cli_converts_and_simulates_on_the_testbed(tmp_path, capsys):
    out = tmp_path / "tiny.csv"
    assert main(["trace", "convert", "--format", "pollux", "--in", str(TINY), "--out", str(out)]) == 0
    assert "6 jobs read, 6 kept" in capsys.readouterr().out
    assert load_trace(out) == list(load_pollux(TINY))
    run = tmp_path / "fifo"
    assert main(["simulate", "--policy", "fifo", "--trace", str(out), "--config", str(TESTBED),
                 "--out", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["jobs_finished"] == 6 and metrics["jobs_unfinished"] == 0
    assert metrics["servers_borrowed"] == 0
    capsys.readouterr()


@pytest.mark.parametrize("extra, message", [
    (["--model-mix", "bert=1"], "--model-mix is not used with --format pollux"),
    (["--elastic-share", "0.5"], "--elastic-share is not used with --format pollux"),
    (["--in2", "x.csv"], "--in2 is only used with --format alibaba"),
    (["--gpus-per-server", "0"], "--gpus-per-server 0: must be >= 1"),
])
def test_cli_rejects_options_pollux_does_not_use(tmp_path, capsys, extra, message):
    args = ["trace", "convert", "--format", "pollux", "--in", str(TINY), "--out", str(tmp_path / "t.csv")]
    assert main(args + extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "t.csv").exists()


def test_gpus_per_server_is_pollux_only(tmp_path, capsys):
    args = ["trace", "convert", "--format", "helios", "--in", str(TINY), "--out", str(tmp_path / "t.csv"),
            "--gpus-per-server", "8"]
    assert main(args) == 2
    assert "--gpus-per-server is only used with --format pollux" in capsys.readouterr().err


def test_bad_row_through_the_cli_is_one_line(tmp_path, capsys):
    path = tmp_path / "w.csv"
    path.write_text(f"{HEADER}\nx,0,resnet,1,128\n")
    assert main(["trace", "convert", "--format", "pollux", "--in", str(path), "--out", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: field 'application': unknown application 'resnet'" in err
    assert err.count("\n") == 1
