"""Every project module imports first: no import order hides a cycle.

A cycle between two modules works when the right one happens to be imported first and breaks
otherwise (``benchmarks/production_scale.py`` imported ``lyra_gym.workloads.presets_calibrated`` first and
failed while ``tracegen`` and it imported each other). In one fresh interpreter, each module is
imported with every project module removed from ``sys.modules`` before it, so it runs its own
chain of imports from the start (third-party packages stay loaded: that keeps it fast).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lyra_gym", "baselines", "agents")

SCRIPT = r"""
import importlib, pkgutil, sys
packages = {packages!r}
names = []
for package in packages:
    module = importlib.import_module(package)
    names.append(package)
    names += [m.name for m in pkgutil.walk_packages(module.__path__, package + ".")]
failed = []
for name in sorted(set(names)):
    if name.endswith(".__main__"):
        continue  # an entry script: importing it runs it
    for loaded in [m for m in sys.modules if m.split(".")[0] in packages]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - reported below
        failed.append(f"{{name}}: {{type(exc).__name__}}: {{exc}}")
print(len(names))
print("\n".join(failed))
"""


def test_every_module_imports_first():
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(packages=PACKAGES)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    count, *failed = out.stdout.strip().split("\n")
    assert int(count) > 60  # every module was found (a package import error would find few)
    assert [f for f in failed if f] == []
