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
