"""Shared helper of the tests: ``train.py`` loaded as a module (it is a script, not a package member)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

TRAIN = Path(__file__).resolve().parents[1] / "train.py"


def load_train_script(name: str = "train_script") -> ModuleType:
    """A fresh module object of ``train.py`` (not registered in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, TRAIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
