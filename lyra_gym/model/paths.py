"""Where a path written inside a file points: beside that file (issue 27 item 2).

The rule, for every path read from a file (a cluster config's ``profiles``, ``demand_csv`` and
``efficiency``; a training run's ``trace``, ``sim_config`` and ``profiles``; a suite's
``config_file`` and ``profiles``; a sweep's ``base_config``): a relative path is relative to the
folder of the file that holds it, so a command works from any working folder. Two fallbacks keep
files written before the rule working; each is tried only when nothing exists beside the file:

1. the working directory (the old rule: such files were written to be run from the checkout);
2. the shipped data root, the folder holding ``traces/`` (:data:`SHIPPED_ROOT`), so a shipped
   name such as ``traces/contended.yaml`` in an agent's ``config.yaml`` resolves from anywhere.

Where nothing exists, the path beside the file is returned (the one a later error names). A path
given on the command line stays relative to the working directory, as do output folders
(``runs_dir``). Files a run writes hold paths that resolve from there: :func:`portable`.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The folder holding the shipped data (``traces/``): the checkout lyra_gym runs from.
SHIPPED_ROOT = Path(__file__).resolve().parents[2]
#: The shipped data folder; a path into it is written as its shipped name (``traces/NAME``).
SHIPPED_DATA = SHIPPED_ROOT / "traces"


def resolve_beside(value: str, folder: str | os.PathLike) -> str:
    """``value`` (a path read from a file in ``folder``) as an absolute path, by the module's rule."""
    if os.path.isabs(value):
        return value
    beside = os.path.normpath(os.path.join(os.path.abspath(folder), value))
    if os.path.exists(beside):
        return beside
    for base in (os.getcwd(), SHIPPED_ROOT):  # files written before the rule
        legacy = os.path.normpath(os.path.join(base, value))
        if os.path.exists(legacy):
            return legacy
    return beside


def portable(value: str) -> str:
    """``value`` (a path valid from the working directory) as a file should record it: a shipped
    data file by its shipped name (``traces/contended.yaml``, found again by the fallback of
    :func:`resolve_beside` from any checkout), any other path absolute."""
    absolute = os.path.abspath(value)
    try:
        return "traces/" + Path(absolute).relative_to(SHIPPED_DATA).as_posix()
    except ValueError:
        return absolute
