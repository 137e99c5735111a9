"""Issue 28 item 7: the folders agents/ and baselines/ install as lyra_agents and lyra_baselines (no
clash with OpenAI Baselines' `baselines`), every package of the tree is listed for the wheel, and
the code imports only the installed names."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def _tree_packages() -> set[str]:
    renamed = {folder: name for name, folder in SETUPTOOLS["package-dir"].items()}
    found = set()
    for init in ROOT.glob("*/**/__init__.py"):
        parts = init.relative_to(ROOT).parent.parts
        if parts[0] in renamed or parts[0] == "lyra_gym":
            found.add(".".join((renamed.get(parts[0], parts[0]), *parts[1:])))
    return found


def test_every_package_of_the_tree_is_in_the_wheel_list():
    assert set(SETUPTOOLS["packages"]) == _tree_packages()


def test_installed_names_collide_with_no_other_package():
    assert SETUPTOOLS["package-dir"] == {"lyra_agents": "agents", "lyra_baselines": "baselines"}
    assert not {"agents", "baselines"} & {p.split(".")[0] for p in SETUPTOOLS["packages"]}
    for group in ("lyra_gym.schedulers", "lyra_gym.scheduler_loaders"):
        for target in PYPROJECT["project"]["entry-points"][group].values():
            assert target.startswith(("lyra_baselines.", "lyra_agents.")), target


def test_code_imports_only_the_installed_names():
    """A module imported as both `lyra_baselines.x` and `lyra_baselines.x` would be two modules (two
    registries, two classes): nothing in the project may use the folder names as import names."""
    bad = re.compile(r"^\s*(from|import) (agents|baselines)(\.|\s|$)", re.M)
    offenders = [str(p.relative_to(ROOT)) for folder in ("lyra_gym", "agents", "baselines", "tests", "benchmarks")
                 for p in (ROOT / folder).rglob("*.py")
                 if bad.search(p.read_text(encoding="utf-8")) and p.name != "agent.py"]  # asv: older commits
    offenders += ["train.py"] if bad.search((ROOT / "train.py").read_text(encoding="utf-8")) else []
    assert offenders == []


@pytest.mark.slow
def test_installed_names_import_from_another_folder(tmp_path):
    code = ("import lyra_baselines.lyra, lyra_agents.artifacts, importlib.util, sys\n"
            "print(lyra_agents.artifacts.PRETRAINED_DIR.is_dir(), importlib.util.find_spec('baselines') is None)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


@pytest.mark.slow
def test_wheel_installs_and_runs_the_shipped_agent_without_the_checkout(tmp_path):
    """`pip wheel .` then a fresh venv (with this interpreter's packages for the dependencies):
    `lyra-gym compare --policies lyra,model:pretrained/alloc-contended` runs from an empty folder,
    and `import baselines` is not provided by the wheel."""
    pytest.importorskip("stable_baselines3")
    wheels, venv, work = tmp_path / "wheels", tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)], check=True)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    wheel = next(wheels.glob("lyra_gym-*.whl"))
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True)
    where = "import lyra_agents as a, lyra_baselines as b, lyra_gym as g; print(a.__file__, b.__file__, g.__file__)"
    files = subprocess.run([str(python), "-c", where], cwd=work, capture_output=True, text=True,
                           check=True).stdout.split()
    assert all(str(venv) in f for f in files), files
    names = subprocess.run([str(python), "-m", "pip", "show", "-f", "lyra-gym"], capture_output=True, text=True,
                           check=True).stdout
    assert "baselines/__init__.py" not in names.replace("lyra_baselines/", "") and "lyra_agents/pretrained/" in names
    trace = work / "short.csv"
    trace.write_text("".join((ROOT / "traces" / "default.csv").read_text().splitlines(keepends=True)[:41]))
    command = [str(venv / "bin" / "lyra-gym"), "compare", "--policies", "lyra,model:pretrained/alloc-contended",
               "--trace", str(trace), "--out", str(work / "cmp")]
    out = subprocess.run(command, cwd=work, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (work / "cmp" / "summary.csv").is_file()
