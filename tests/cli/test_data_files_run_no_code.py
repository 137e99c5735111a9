"""Issue 40 items 4, 5 and 9 (sweep seeds): code from files the user considers data.

4. A sweep file is data: a policy that imports or unpickles code (``MODULE:ATTRIBUTE``, ``file.py:NAME``,
   ``policy:...``, ``model:PATH?trust=1``, ``trust_model_files``) is refused before anything is imported
   or built, in one line naming the file, the field and the spec, unless the user passes the trust flag.
   Each payload leaves a marker file when it runs: the marker must not exist.
5. ``python -m lyra_agents.export`` refuses a symbolic link among what it copies, and a run that does
   not load the safe way (malformed statistics, weights, a zip bomb), in one line, writing nothing.
9. Sweep ``seeds`` are integers: ``1.5``, ``true`` and ``"1"`` are refused (they ran seed 1).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import zipfile
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import yaml

from lyra_agents import export as export_module
from lyra_agents.config import TrainConfig
from lyra_agents.factory import TRUST_ENV, inference_model
from lyra_gym.cli.app import main
from lyra_gym.harness.sweep import SweepError, load_grid, run_sweep
from lyra_gym.sim.import_spec import UntrustedCodeError, refuse_code_specs, runs_code

PRESET = "preset:small-1d"


@pytest.fixture(autouse=True)
def untrusted(monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)


class Payload:
    """Unpickling this creates the folder ``marker`` (``os.makedirs``): proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.makedirs, (self.marker, 0o755, True)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run folder: config.yaml, model.zip (a tiny untrained PPO, with its optimizer state) and
    vecnormalize.npz."""
    folder = tmp_path_factory.mktemp("model") / "run"
    folder.mkdir()
    cfg = TrainConfig(num_job_slots=4, num_server_slots=2, net_arch=[8], algo="ppo", device="cpu")
    (folder / "config.yaml").write_text(cfg.to_yaml())
    model = inference_model(cfg, "cpu")
    model.save(folder / "model.zip")
    size = model.observation_space.shape[0]
    with open(folder / "vecnormalize.npz", "wb") as fh:
        np.savez(fh, obs_mean=np.zeros(size), obs_var=np.ones(size), obs_count=np.float64(10),
                 norm_obs=np.bool_(True), clip_obs=np.float64(10), epsilon=np.float64(1e-8))
    return folder


def _grid(folder: Path, **data) -> Path:
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump({"traces": [PRESET], **data}))
    return path


def _one_line(capsys, prog: str = "lyra-gym") -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"{prog}: error:") and "Traceback" not in err, err
    return err


def _payload_file(folder: Path, marker: Path) -> Path:
    """A .py file that creates ``marker`` when it is imported."""
    path = folder / "payload.py"
    path.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n\ndef make(**params):\n    return None\n")
    return path


def _plant(run_dir: Path, marker: Path) -> None:
    """A cloudpickled payload in ``model.zip``'s ``data``, run by SB3's (trusted) loader."""
    model_zip = run_dir / "model.zip"
    with zipfile.ZipFile(model_zip) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members["data"].decode())
    data["_planted"] = {":type:": "<class 'Payload'>",
                        ":serialized:": base64.b64encode(cloudpickle.dumps(Payload(marker))).decode()}
    members["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(model_zip, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)


# ---------------------------------------------------------------------- 4. code specs in a sweep file
def _code_grids(tmp_path: Path, run: Path, marker: Path) -> dict[str, dict]:
    """The ways a sweep file ran code, each with its payload in place (a ``.py`` file, a planted model)."""
    _payload_file(tmp_path, marker)
    planted = Path(shutil.copytree(run, tmp_path / "planted"))
    _plant(planted, marker)
    return {
        "os:system": {"policies": ["os:system"], "policy_params": {"os:system": {"command": f"touch {marker}"}}},
        ".py spec": {"policies": ["payload.py:make"]},
        "policy: spec": {"policies": ["policy:payload.py:make"]},
        "model ?trust=1": {"policies": [f"model:{planted}?trust=1"]},
        "model trust_model_files": {"policies": [f"model:{planted}"],
                                    "policy_params": {f"model:{planted}": {"trust_model_files": True}}},
    }


WAYS = ["os:system", ".py spec", "policy: spec", "model ?trust=1", "model trust_model_files"]


@pytest.mark.parametrize("way", WAYS)
def test_a_sweep_file_runs_no_code_without_the_trust_flag(tmp_path, run, monkeypatch, capsys, way):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "MARKER"
    data = _code_grids(tmp_path, run, marker)[way]
    path = _grid(tmp_path, **data)
    with pytest.raises(SweepError) as info:
        load_grid(path)
    message = str(info.value)
    assert message.startswith(f"{path}: policies: {data['policies'][0]!r}") and "--trust-code" in message
    assert "\n" not in message
    assert not marker.exists()
    with pytest.raises(SweepError):
        run_sweep(path, tmp_path / "out", plots=False)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out2"), "--no-plots"]) == 2
    assert "--trust-code" in _one_line(capsys)
    assert not marker.exists()
    assert not (tmp_path / "out").exists() and not (tmp_path / "out2").exists()


def test_the_trust_flag_allows_a_code_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("from lyra_gym.sim.scheduler import make\n\n"
                                      "def build(**params):\n    return make('fifo', **params)\n")
    path = _grid(tmp_path, policies=["mine.py:build", "fifo"])
    with pytest.raises(SweepError, match="'mine.py:build' can run code"):
        load_grid(path)
    assert load_grid(path, trust_code=True).policies == ("mine.py:build", "fifo")


def test_plain_names_and_an_untrusted_model_stay_allowed_from_a_file(tmp_path, run):
    path = _grid(tmp_path, policies=["fifo", "lyra", f"model:{run}", f"model:{run}?trust=0"],
                 policy_params={f"model:{run}": {"trust_model_files": False}})
    assert len(load_grid(path).policies) == 4


@pytest.mark.parametrize("spec, params, expected", [
    ("fifo", None, False), ("lyra", {"reclaim_rule": "random"}, False),
    ("model:runs/x", None, False), ("rllib:runs/x", None, False), ("model:runs/x?trust=0", None, False),
    ("model:runs/x", {"trust_model_files": False}, False),
    ("model:runs/x?trust=1", None, True), ("rllib:runs/x?trust=yes", None, True), ("model:runs/x?trust", None, True),
    ("model:runs/x?trust=TRUE", None, True), ("model:runs/x", {"trust_model_files": True}, True),
    ("os:system", None, True), ("pkg.mod:Name", None, True), ("path/to/file.py:Name", None, True),
    ("policy:pkg.mod:make", None, True), ("someloader:anything", None, True),
])
def test_runs_code(spec, params, expected):
    assert runs_code(spec, params) is expected


def test_the_refusal_is_one_short_line_naming_source_and_spec():
    long_spec = "pkg." + "m" * 5000 + ":Name"
    with pytest.raises(UntrustedCodeError) as info:
        refuse_code_specs(["fifo", long_spec], "suite.yaml: policies", trust=False)
    message = str(info.value)
    assert message.startswith("suite.yaml: policies: 'pkg.mmm") and len(message) < 400
    refuse_code_specs(["fifo", long_spec], "suite.yaml: policies", trust=True)  # trusted: nothing refused


# ---------------------------------------------------------------------- 9. sweep seeds
@pytest.mark.parametrize("seeds", [[1.5], [True], ["1"], [0, 2.0], [False]])
def test_sweep_seeds_must_be_integers(tmp_path, seeds):
    path = _grid(tmp_path, policies=["fifo"], seeds=seeds)
    with pytest.raises(SweepError, match=r"^seeds: expected a list of integers, got \["):
        load_grid(path)


def test_a_long_seed_list_is_cut_in_the_message(tmp_path):
    path = _grid(tmp_path, policies=["fifo"], seeds=[*range(2000), 0.5])
    with pytest.raises(SweepError) as info:
        load_grid(path)
    assert len(str(info.value)) < 300 and str(info.value).endswith("...")


# ---------------------------------------------------------------------- 5. lyra_agents.export
def _export_refused(run_dir: Path, out: Path, capsys, *words: str) -> None:
    assert export_module.main([str(run_dir), str(out)]) == 2
    err = _one_line(capsys, "lyra_agents.export")
    assert all(w in err for w in words), err
    assert not out.exists()


@pytest.mark.parametrize("target", ["secret text", "valid statistics"])
def test_export_refuses_a_symbolic_link(tmp_path, run, capsys, target):
    run_dir = Path(shutil.copytree(run, tmp_path / "linked"))
    elsewhere = tmp_path / "elsewhere.npz"
    if target == "secret text":
        elsewhere.write_text("root:x:0:0:root:/root:/bin/bash\n")
    else:
        shutil.copyfile(run / "vecnormalize.npz", elsewhere)
    (run_dir / "vecnormalize.npz").unlink()
    (run_dir / "vecnormalize.npz").symlink_to(elsewhere)
    _export_refused(run_dir, tmp_path / "out", capsys, "vecnormalize.npz", "symbolic link")
    assert "root:x" not in capsys.readouterr().err


def test_export_refuses_a_linked_model(tmp_path, run, capsys):
    run_dir = tmp_path / "linked"
    run_dir.mkdir()
    for name in ("config.yaml", "vecnormalize.npz"):
        shutil.copyfile(run / name, run_dir / name)
    (run_dir / "model.zip").symlink_to(run / "model.zip")
    _export_refused(run_dir, tmp_path / "out", capsys, "model.zip", "symbolic link")


def _garbage_statistics(run_dir: Path) -> str:
    (run_dir / "vecnormalize.npz").write_bytes(b"not a zip of arrays")
    return "vecnormalize.npz"


def _garbage_weights(run_dir: Path) -> str:
    _replace_member(run_dir / "model.zip", "policy.pth", b"garbage")
    return "policy.pth"


def _pickled_statistics(run_dir: Path) -> str:
    with open(run_dir / "vecnormalize.npz", "wb") as fh:
        np.savez(fh, obs_mean=np.array([{"a": 1}], dtype=object))
    return "vecnormalize.npz"


def _zip_bomb(run_dir: Path) -> str:
    """``data`` replaced by 17 MiB of spaces (over MAX_DATA_BYTES, 16 MiB), deflated to a few KB."""
    model_zip = run_dir / "model.zip"
    with zipfile.ZipFile(model_zip) as archive:
        members = {n: archive.read(n) for n in archive.namelist() if n != "data"}
    with zipfile.ZipFile(model_zip, "w", zipfile.ZIP_DEFLATED) as archive:
        for n, c in members.items():
            archive.writestr(n, c)
        with archive.open(zipfile.ZipInfo("data"), "w") as fh:
            for _ in range(17):
                fh.write(b" " * 2**20)
    return "MAX_DATA_BYTES"


def _replace_member(model_zip: Path, name: str, content: bytes) -> None:
    with zipfile.ZipFile(model_zip) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members[name] = content
    with zipfile.ZipFile(model_zip, "w", zipfile.ZIP_DEFLATED) as archive:
        for n, c in members.items():
            archive.writestr(n, c)


@pytest.mark.parametrize("spoil", [_garbage_statistics, _garbage_weights, _pickled_statistics, _zip_bomb])
def test_export_refuses_a_run_that_does_not_load(tmp_path, run, capsys, spoil):
    run_dir = Path(shutil.copytree(run, tmp_path / "bad"))
    word = spoil(run_dir)
    _export_refused(run_dir, tmp_path / "out", capsys, word)


def test_a_good_run_still_exports_and_loads(tmp_path, run, capsys):
    from lyra_agents.policy_scheduler import load_policy_scheduler

    assert export_module.main([str(run), str(tmp_path / "out")]) == 0
    load_policy_scheduler(tmp_path / "out")
