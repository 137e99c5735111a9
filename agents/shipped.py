"""Where the shipped reference agents are (package data, installed with the wheel) and how
``pretrained/NAME`` names one."""

from __future__ import annotations

import os
from pathlib import Path

#: The shipped reference agents (package data: installed with the wheel, beside this module).
PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"


def shipped_agent(path: str | os.PathLike) -> Path:
    """``pretrained/NAME`` names a shipped agent (:data:`PRETRAINED_DIR`) unless a file or folder of
    that name exists where the command runs; any other path is returned as given."""
    path = Path(path)
    if not path.exists() and len(path.parts) == 2 and path.parts[0] == "pretrained":
        return PRETRAINED_DIR / path.parts[1]
    return path


def shipped_name(path: str | os.PathLike) -> str | None:
    """``pretrained/NAME`` when ``path`` is a shipped agent's folder (or a file in it), else None."""
    absolute = Path(os.path.abspath(path))
    try:
        parts = absolute.relative_to(PRETRAINED_DIR).parts
    except ValueError:
        return None
    return f"pretrained/{parts[0]}" if parts else None


def agent_path_beside(value: str, folder: str | os.PathLike) -> str:
    """An agent path read from a file in ``folder`` (``bc_rule``): ``pretrained/NAME`` stays a
    shipped name unless that path exists beside the file; any other path is resolved beside it
    (:func:`lyra_gym.model.paths.resolve_beside`)."""
    from lyra_gym.model.paths import resolve_beside

    beside = os.path.join(os.path.abspath(folder), value)
    if shipped_agent(value) != Path(value) and not os.path.exists(beside):
        return value
    return resolve_beside(value, folder)


def portable_agent_path(value: str) -> str:
    """An agent path (valid from the working directory) as a file records it: a shipped agent by
    its name (``pretrained/NAME``), found from any checkout or installed wheel; any other absolute."""
    found = shipped_agent(value)
    return shipped_name(found) or os.path.abspath(found)
