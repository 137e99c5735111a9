"""One entry point over every format: :func:`load_real_trace`."""

from __future__ import annotations

import os
from typing import Any

from lyra_gym.workloads.realtraces.alibaba import load_alibaba
from lyra_gym.workloads.realtraces.common import ConvertedJobs
from lyra_gym.workloads.realtraces.helios import load_helios
from lyra_gym.workloads.realtraces.philly import load_philly
from lyra_gym.workloads.realtraces.pollux import load_pollux

FORMATS = ("philly", "helios", "alibaba", "pai", "pollux")  # "pai" = "alibaba" (Alibaba PAI 2020)


def load_real_trace(fmt: str, path: str | os.PathLike[str], path2: str | os.PathLike[str] | None = None,
                    seed: int = 0, **options: Any) -> ConvertedJobs:
    """Dispatch on ``fmt`` (``philly``, ``helios``, ``alibaba``, ``pollux``; ``alibaba`` needs ``path2`` = the
    task table; ``pollux`` ignores ``seed`` and takes :func:`load_pollux`'s options)."""
    if fmt == "pollux":
        if path2 is not None:
            raise ValueError("format 'pollux' reads one file (--in); --in2 is for alibaba only")
        return load_pollux(path, **options)
    if fmt == "philly":
        return load_philly(path, seed, **options)
    if fmt == "helios":
        return load_helios(path, seed, **options)
    if fmt in ("alibaba", "pai"):
        if path2 is None:
            raise ValueError("format 'alibaba' needs two files: the job table and the task table (--in2)")
        return load_alibaba(path, path2, seed, **options)
    raise ValueError(f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")
