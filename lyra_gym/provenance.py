"""What produced an output: the package version and, in a git checkout, the commit (issue 27).

Recorded in every run's ``run.json`` and ``metrics.json``, the benchmark CSV (with the suite
version), a training run's ``config.yaml`` (a header comment), ``compare.json`` and TensorBoard text
(``config/provenance``, with the env id) and ``lyra_agents.evaluate --json`` (with the env id), so a
published number can be traced to the behaviour that made it. Imports no project module.
"""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

#: The distribution name on the package index.
DISTRIBUTION = "lyra-gym"


@cache
def package_version() -> str:
    """The installed distribution's version, or ``"0+unknown"`` when lyra_gym runs uninstalled."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "0+unknown"


@cache
def git_commit() -> str | None:
    """The commit of the checkout lyra_gym runs from (with ``+dirty`` when tracked files are changed),
    or None outside a git checkout (an installed wheel) or without git."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=root, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 1 else "")


#: The keys :func:`provenance` gives (a reader of ``metrics.json`` that wants the metrics alone drops them).
PROVENANCE_KEYS = ("lyra_gym_version", "lyra_gym_commit")


def provenance() -> dict[str, str | None]:
    """``{"lyra_gym_version": ..., "lyra_gym_commit": ...}``, the keys every output records."""
    return {"lyra_gym_version": package_version(), "lyra_gym_commit": git_commit()}
