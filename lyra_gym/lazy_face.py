"""A package face whose names are imported on first use (PEP 562): ``lyra_gym`` and ``lyra_baselines``
each hand :func:`lazy_face` a table of name -> defining module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_face(namespace: dict[str, Any], table: Mapping[str, str],
              computed: Mapping[str, Callable[[], Any]] | None = None
              ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` of the package whose globals are ``namespace``.

    :param table: face name -> the module that defines it; the first use imports that module and
        keeps the object in ``namespace`` (later uses are a plain global lookup).
    :param computed: names worked out at each use and not kept (e.g. ``__version__``).
    """
    package, computed = namespace["__name__"], computed or {}

    def __getattr__(name: str) -> Any:
        if name in computed:
            return computed[name]()
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ()), *computed})

    return __getattr__, __dir__
