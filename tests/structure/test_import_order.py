"""Every project module imports first: no import order hides a cycle.

A cycle between two modules works when the right one happens to be imported first and breaks
otherwise (``benchmarks/production_scale.py`` imported ``lyra_gym.workloads.presets_calibrated`` first and
failed while ``tracegen`` and it imported each other). In one fresh interpreter, each module is
imported with every project module removed from ``sys.modules`` before it, so it runs its own
chain of imports from the start (third-party packages stay loaded: that keeps it fast).

A module that needs an optional extra which is not installed (``lyra_agents.rllib_backend`` without
``pip install -e '.[rllib]'``, also when ``ray`` is there without RLlib) is skipped, not failed;
only the modules of :data:`NEED_AN_EXTRA` may be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lyra_gym", "baselines", "agents")
#: The modules that need an optional extra (pyproject.toml's optional-dependencies) -> the extra.
NEED_AN_EXTRA = {"agents.rllib_backend": "rllib"}

SCRIPT = r"""
import importlib, json, pkgutil, sys
{preamble}
packages = {packages!r}
ours = set(packages) | {{"lyra_baselines", "lyra_agents"}}
names = []
for package in packages:
    module = importlib.import_module(package)
    names.append(package)
    names += [m.name for m in pkgutil.walk_packages(module.__path__, package + ".")]
failed, skipped = [], {{}}
for name in sorted(set(names)):
    if name.endswith(".__main__"):
        continue  # an entry script: importing it runs it
    for loaded in [m for m in sys.modules if m.split(".")[0] in ours]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ImportError as exc:  # a third-party module missing: an extra not installed
        if exc.name and exc.name.split(".")[0] not in ours:
            skipped[name] = exc.name
        else:
            failed.append(f"{{name}}: {{type(exc).__name__}}: {{exc}}")
    except Exception as exc:  # noqa: BLE001 - reported below
        failed.append(f"{{name}}: {{type(exc).__name__}}: {{exc}}")
print(json.dumps({{"count": len(names), "failed": failed, "skipped": skipped}}))
"""


def _import_all(preamble: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tools" / "import_names")])}
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(packages=PACKAGES, preamble=preamble)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_module_imports_first():
    result = _import_all()
    assert result["count"] > 60  # every module was found (a package import error would find few)
    assert result["failed"] == []
    assert set(result["skipped"]) <= set(NEED_AN_EXTRA), result["skipped"]
    if result["skipped"]:
        pytest.skip("every other module imports first; not installed: "
                    + ", ".join(f"{m} needs the '{NEED_AN_EXTRA[m]}' extra" for m in result["skipped"]))


@pytest.mark.slow
def test_ray_without_rllib_skips_only_the_rllib_backend():
    result = _import_all("sys.modules['ray.rllib'] = None  # as a venv with ray and without RLlib")
    assert result["failed"] == []
    assert set(result["skipped"]) == {"agents.rllib_backend"}
