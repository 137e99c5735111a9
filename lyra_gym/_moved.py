"""The old import paths of modules moved into the wings (issue 28): each old module is an alias
of the new one, kept for one release, and warns once when first imported."""

from __future__ import annotations

import sys
import warnings
from types import ModuleType


def alias(old: str, new: ModuleType) -> None:
    """Make ``import <old>`` give the module ``new`` itself (same objects, same state) and warn."""
    warnings.warn(f"{old} moved to {new.__name__}; the old path is kept for one release",
                  DeprecationWarning, stacklevel=3)
    sys.modules[old] = new
