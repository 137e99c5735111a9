"""Bad model files are refused up front, in one line naming the file (issue 23, item 6).

Every ``model:``/``rllib:`` policy is opened and validated by ``check_policies`` before the
first simulation (``simulate``, ``compare``, ``sweep``); ``model:PATH?trust=1`` is accepted
there; every load error names the file; hostile archives (deep JSON, a zip bomb) are refused
before they are parsed or inflated. The model here is a tiny PPO built without an env.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lyra_agents.config import TrainConfig
from lyra_agents.factory import (
    MAX_DATA_BYTES, MAX_JSON_DEPTH, TRUST_ENV, ModelFileError, inference_model, read_model_zip,
)
from lyra_agents.policy_scheduler import load_policy_scheduler
from lyra_gym.cli import app as cli
from lyra_gym.harness.compare import CompareError, check_policies
from lyra_gym.workloads.trace import write_trace
from lyra_gym.workloads.tracegen import generate_trace

OBS_K, OBS_M = 4, 2


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """A run folder: config.yaml, model.zip (a tiny untrained PPO) and vecnormalize.npz."""
    run = tmp_path_factory.mktemp("model") / "good"
    run.mkdir()
    cfg = TrainConfig(num_job_slots=OBS_K, num_server_slots=OBS_M, net_arch=[8], algo="ppo", device="cpu")
    (run / "config.yaml").write_text(cfg.to_yaml())
    model = inference_model(cfg, "cpu")
    model.save(run / "model.zip")
    size = model.observation_space.shape[0]
    with open(run / "vecnormalize.npz", "wb") as fh:
        np.savez(fh, obs_mean=np.zeros(size), obs_var=np.ones(size), obs_count=np.float64(10),
                 norm_obs=np.bool_(True), clip_obs=np.float64(10), epsilon=np.float64(1e-8))
    return run


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "small.csv"
    write_trace(generate_trace("small-1d", 0)[:10], path)
    return path


@pytest.fixture(autouse=True)
def untrusted(monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)


def copy_run(good: Path, tmp_path: Path, name: str = "bad") -> Path:
    return Path(shutil.copytree(good, tmp_path / name))


def replace_member(model_zip: Path, name: str, content: bytes | None) -> None:
    """Rewrite ``model_zip`` with member ``name`` replaced (None: removed)."""
    with zipfile.ZipFile(model_zip) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    if content is None:
        del members[name]
    else:
        members[name] = content
    with zipfile.ZipFile(model_zip, "w", zipfile.ZIP_DEFLATED) as archive:
        for n, c in members.items():
            archive.writestr(n, c)


def bomb_member(model_zip: Path, name: str = "data", megabytes: int = 200) -> None:
    """Replace member ``name`` by ``megabytes`` MB of spaces, deflated (a ~200 KB file)."""
    with zipfile.ZipFile(model_zip) as archive:
        members = {n: archive.read(n) for n in archive.namelist() if n != name}
    with zipfile.ZipFile(model_zip, "w", zipfile.ZIP_DEFLATED) as archive:
        for n, c in members.items():
            archive.writestr(n, c)
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w") as fh:
            chunk = b" " * 2**20
            for _ in range(megabytes):
                fh.write(chunk)


def write_npz(path: Path, **arrays) -> None:
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def stats(size: int, **changes) -> dict:
    base = dict(obs_mean=np.zeros(size), obs_var=np.ones(size), obs_count=np.float64(10), norm_obs=np.bool_(True),
                clip_obs=np.float64(10), epsilon=np.float64(1e-8))
    return {**base, **changes}


def deep_json(depth: int) -> bytes:
    return b'{"num_timesteps": 1, "x": ' + b"[" * depth + b"]" * depth + b"}"


# (name, mutation of a copy of the run, the file the message must name, what it must say)
MALFORMED = [
    ("data not UTF-8", lambda r: replace_member(r / "model.zip", "data", b'{"a": "\xff\xfe"}'),
     "model.zip", "member 'data': not UTF-8"),
    ("data not JSON", lambda r: replace_member(r / "model.zip", "data", b"{not json"), "model.zip", "not JSON"),
    ("data nested 100000 deep", lambda r: replace_member(r / "model.zip", "data", deep_json(100_000)),
     "model.zip", "nested"),
    ("data zip bomb", lambda r: bomb_member(r / "model.zip"), "model.zip", "inflates to"),
    ("policy.pth missing", lambda r: replace_member(r / "model.zip", "policy.pth", None), "model.zip",
     "no policy.pth"),
    ("policy.pth garbage", lambda r: replace_member(r / "model.zip", "policy.pth", b"garbage" * 10),
     "model.zip", "member 'policy.pth'"),
    ("model.zip not a zip", lambda r: (r / "model.zip").write_bytes(b"not a zip"), "model.zip", "not a zip file"),
    ("model.zip empty", lambda r: (r / "model.zip").write_bytes(b""), "model.zip", "not a zip file"),
    ("weights of another network", lambda r: (r / "config.yaml").write_text(
        (r / "config.yaml").read_text().replace("net_arch:\n- 8\n", "net_arch:\n- 16\n")), "model.zip",
     "size mismatch"),
    ("config.yaml not UTF-8", lambda r: (r / "config.yaml").write_bytes(b"name: \xff\xfe\n"), "config.yaml",
     "not UTF-8"),
    ("config.yaml not YAML", lambda r: (r / "config.yaml").write_text("a: [1,\n"), "config.yaml", "YAML"),
    ("config.yaml nested deep", lambda r: (r / "config.yaml").write_text("a: " + "[" * 50_000 + "]" * 50_000),
     "config.yaml", "nested"),
    ("config.yaml missing", lambda r: (r / "config.yaml").unlink(), "model.zip", "config.yaml"),
    ("stats object array", lambda r: write_npz(r / "vecnormalize.npz",
                                               **stats(10, obs_mean=np.array([None, 1], dtype=object))),
     "vecnormalize.npz", "obs_mean"),
    ("stats garbage", lambda r: (r / "vecnormalize.npz").write_bytes(b"\x00" * 64), "vecnormalize.npz",
     "not a .npz"),
    ("stats of another shape", lambda r: write_npz(r / "vecnormalize.npz", **stats(5)), "vecnormalize.npz",
     "shape"),
    ("stats strings", lambda r: write_npz(r / "vecnormalize.npz", **stats(5, obs_count=np.array("x"))),
     "vecnormalize.npz", "obs_count"),
    ("stats missing", lambda r: (r / "vecnormalize.npz").unlink(), "model.zip", "statistics"),
    ("stats only as a pickle", lambda r: (r / "vecnormalize.npz").rename(r / "vecnormalize.pkl"),
     "vecnormalize.pkl", "pickle"),
]


@pytest.mark.parametrize("mutate,file,problem", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
@pytest.mark.sample(5)
def test_every_malformed_model_is_refused_up_front_in_one_line(good, tmp_path, mutate, file, problem):
    bad = copy_run(good, tmp_path)
    mutate(bad)
    with pytest.raises(CompareError) as err:
        check_policies(["fifo", f"model:{bad}"], {})
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    assert f"model:{bad}" in message and file in message and problem in message, message


def test_compare_fails_before_any_run_with_one_line_naming_the_file(good, trace, tmp_path, capsys):
    bad = copy_run(good, tmp_path)
    replace_member(bad / "model.zip", "data", b"\xff" * 40)
    out = tmp_path / "out"
    code = cli.main(["compare", "--policies", f"fifo,model:{bad}", "--trace", str(trace), "--seeds", "0",
                     "--jobs", "1", "--no-plots", "--out", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("lyra-gym: error:"), err
    assert f"{bad / 'model.zip'}: member 'data': not UTF-8" in lines[0]
    assert not out.exists()  # no run folder (not even fifo's) was written


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_trust_option_is_accepted_by_simulate_and_compare(good, trace, tmp_path, capsys, command):
    policy = f"model:{good}?trust=1"
    out = tmp_path / "out"
    argv = (["simulate", "--policy", policy] if command == "simulate"
            else ["compare", "--policies", f"fifo,{policy}", "--seeds", "0", "--jobs", "1", "--no-plots"])
    code = cli.main([*argv, "--trace", str(trace), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning: trusting model files" in err
    metrics = list(out.rglob("metrics.json"))
    assert metrics and all(json.loads(m.read_text())["jobs_finished"] > 0 for m in metrics)


def test_trust_option_is_accepted_by_the_check_and_unknown_options_refused(good):
    check_policies([f"model:{good}?trust=1", f"model:{good}?trust=0"], {})  # as sweep calls it
    for query, says in [("trusted=1", "unknown option 'trusted'"), ("trust=maybe", "trust= takes"),
                        ("trust=1&x=2", "unknown option 'x'")]:
        with pytest.raises(CompareError, match=says):
            check_policies([f"model:{good}?{query}"], {})


@pytest.mark.parametrize("command", ["simulate", "sweep"])
def test_other_commands_refuse_a_bad_model_in_one_line(good, trace, tmp_path, capsys, command):
    bad = copy_run(good, tmp_path)
    write_npz(bad / "vecnormalize.npz", **stats(10, obs_var=np.array([None], dtype=object)))
    if command == "simulate":
        argv = ["simulate", "--policy", f"model:{bad}", "--trace", str(trace)]
    else:
        grid = tmp_path / "grid.yaml"
        grid.write_text(f"policies: [fifo, 'model:{bad}']\ntraces: ['{trace}']\nseeds: [0]\n")
        argv = ["sweep", str(grid), "--no-plots"]
    code = cli.main([*argv, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert str(bad / "vecnormalize.npz") in err and "obs_var" in err
    assert not (tmp_path / "out").exists()


def test_load_errors_name_the_file(good, tmp_path):
    """The loader itself (what a run calls) names the file, not only the up-front check."""
    bad = copy_run(good, tmp_path)
    write_npz(bad / "vecnormalize.npz", **stats(10, obs_mean=np.array([None], dtype=object)))
    with pytest.raises(ModelFileError, match=r"vecnormalize\.npz: array 'obs_mean': .*allow_pickle=False"):
        load_policy_scheduler(bad)
    write_npz(bad / "vecnormalize.npz", **stats(10))
    replace_member(bad / "model.zip", "data", b'{"x": "\xc3\x28"}')
    with pytest.raises(ModelFileError, match=r"model\.zip: member 'data': not UTF-8"):
        load_policy_scheduler(bad)


def test_deep_json_is_refused_before_parsing(good, tmp_path):
    bad = copy_run(good, tmp_path)
    replace_member(bad / "model.zip", "data", deep_json(100_000))
    with pytest.raises(ModelFileError, match=f"nested 100001 levels deep, over the limit of {MAX_JSON_DEPTH}"):
        read_model_zip(bad / "model.zip")
    # brackets inside strings are not nesting; the genuine data passes
    replace_member(bad / "model.zip", "data", json.dumps({"num_timesteps": 3, "s": "[" * 10_000}).encode())
    assert read_model_zip(bad / "model.zip")[0] == {"num_timesteps": 3}


def test_a_zip_bomb_is_refused_without_inflating(good, tmp_path):
    bad = copy_run(good, tmp_path)
    bomb_member(bad / "model.zip", "data", 200)
    assert (bad / "model.zip").stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match=f"member 'data' inflates to {200 * 2**20} bytes"):
            read_model_zip(bad / "model.zip")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, peak  # not inflated: the peak stays far below the 200 MiB member


def test_weights_over_the_archive_limit_are_refused_without_inflating(good, tmp_path, monkeypatch):
    from lyra_agents import model_files

    monkeypatch.setattr(model_files, "MAX_ARCHIVE_BYTES", 2**20)
    bad = copy_run(good, tmp_path)
    bomb_member(bad / "model.zip", "policy.pth", 3)
    with pytest.raises(CompareError, match=r"model\.zip: member 'policy\.pth' inflates to 3145728 bytes"):
        check_policies([f"model:{bad}"], {})


def test_weights_whose_own_records_would_inflate_past_the_limit_are_refused(good, tmp_path, monkeypatch):
    """``policy.pth`` is itself a zip (torch's format): its records are held to the limit too."""
    from lyra_agents import model_files

    monkeypatch.setattr(model_files, "MAX_ARCHIVE_BYTES", 2**20)
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data/0", b"\0" * 3 * 2**20)
    bad = copy_run(good, tmp_path)
    replace_member(bad / "model.zip", "policy.pth", inner.getvalue())
    with pytest.raises(ModelFileError, match=r"member 'policy\.pth': member 'archive/data/0' inflates to 3145728"):
        read_model_zip(bad / "model.zip")


def test_a_zip_header_that_understates_the_size_is_caught(good, tmp_path):
    """``data`` inflates to MAX_DATA_BYTES + 1 MB while its headers declare 100 bytes."""
    bad = copy_run(good, tmp_path)
    bomb_member(bad / "model.zip", "data", MAX_DATA_BYTES // 2**20 + 1)
    raw = bytearray((bad / "model.zip").read_bytes())
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        at = raw.find(signature)
        while raw[at + name_at:at + name_at + 4] != b"data":
            at = raw.find(signature, at + 1)
        struct.pack_into("<I", raw, at + size_at, 100)
    (bad / "model.zip").write_bytes(bytes(raw))
    with zipfile.ZipFile(bad / "model.zip") as archive:
        assert archive.getinfo("data").file_size == 100
    with pytest.raises(ModelFileError, match=r"model\.zip: member 'data'"):
        read_model_zip(bad / "model.zip")


def test_rllib_weights_errors_name_the_file(tmp_path):
    """``rllib:PATH``: a bad ``module_weights.npz`` is refused up front, naming the file."""
    pytest.importorskip("ray.rllib")
    from lyra_agents.rllib_backend import (CHECKPOINT_DIR, MODULE_SUBPATH, WEIGHTS_FILE, build_module,
                                           save_module_weights)

    run = tmp_path / "rl"
    module_dir = run / CHECKPOINT_DIR / MODULE_SUBPATH
    module_dir.mkdir(parents=True)
    (module_dir / "module_state.pt").write_bytes(b"")
    cfg = TrainConfig(num_job_slots=OBS_K, num_server_slots=OBS_M, net_arch=[8], device="cpu")
    (run / "config.yaml").write_text(cfg.to_yaml())
    weights = run / CHECKPOINT_DIR / WEIGHTS_FILE
    save_module_weights(build_module(cfg).state_dict(), weights)
    check_policies([f"rllib:{run}", f"rllib:{run}?trust=0"], {})
    state = dict(np.load(weights))
    write_npz(weights, **{**state, next(iter(state)): np.array([None], dtype=object)})
    with pytest.raises(CompareError, match=f"{weights}: array .*allow_pickle=False"):
        check_policies([f"rllib:{run}"], {})
    write_npz(weights, **{k: np.zeros(3) for k in state})
    with pytest.raises(CompareError, match=f"{weights}: .*size mismatch"):
        check_policies([f"rllib:{run}"], {})


def test_trust_option_loads_an_exported_model_without_optimizer_state(good, trace, tmp_path, capsys):
    """SB3's own loader insists on the optimizer state that lyra_agents.export strips (the shipped agent
    has none): ``?trust=1`` on such a model reads its weights the safe way, with the same result."""
    from lyra_agents.export import export

    exported = tmp_path / "exported"
    export(good, exported)
    runs = {}
    for suffix in ("", "?trust=1"):
        out = tmp_path / f"out{len(runs)}"
        code = cli.main(["simulate", "--policy", f"model:{exported}{suffix}", "--trace", str(trace), "--out", str(out)])
        assert code == 0, capsys.readouterr().err
        runs[suffix] = (out / "jobs.csv").read_text()
    assert runs[""] == runs["?trust=1"]


def test_the_limit_message_names_the_module_where_setting_it_works(tmp_path, monkeypatch):
    """The limits are read from lyra_agents.model_files (setting a re-exported copy does nothing)."""
    from lyra_agents import model_files

    monkeypatch.setattr(model_files, "MAX_ARCHIVE_BYTES", 10)
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as archive:
        archive.writestr("w", b"\0" * 11)
    with zipfile.ZipFile(tmp_path / "a.zip") as archive, pytest.raises(
            ModelFileError, match=r"over the limit of 10 \(lyra_agents\.model_files\.MAX_ARCHIVE_BYTES\)"):
        model_files.check_archive(tmp_path / "a.zip", archive)
