"""What the bit-for-bit tests share (``tests/run/test_golden_results.py``,
``tests/envs/test_env_equivalence.py``): the digest of a ``simulate`` result, the stored table,
and the ``--update`` entry point that rewrites it."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
WALL_CLOCK = {"sim_wall_s"}  # wall-clock time: left out of every digest


def result_digest(result: Any) -> str:
    """SHA-256 of a run's metrics (``repr`` of each value, so the last bit counts) and job rows."""
    h = hashlib.sha256()
    for key in sorted(result.metrics):
        if key not in WALL_CLOCK:
            h.update(f"{key}={result.metrics[key]!r}\n".encode())
    for row in result.jobs:
        h.update(repr(sorted(row.items())).encode())
    return h.hexdigest()


def stored(path: Path) -> dict[str, dict[str, str]]:
    """The stored digest table (empty if the file is missing)."""
    return json.loads(path.read_text()) if path.exists() else {}


def update_main(path: Path, table: Callable[[], dict[str, dict[str, str]]], script: str) -> None:
    """``python -m MODULE --update`` (``script``: ``-m MODULE``): recompute ``table()`` from the root
    and rewrite ``path``."""
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: python {script} --update")
    os.chdir(ROOT)
    path.write_text(json.dumps(table(), indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")
