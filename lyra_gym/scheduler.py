"""The scheduler interface and the registry that finds schedulers by name.

A scheduler is a class with ``decide(view) -> Plan``. Schedulers are found by
name in two places: those registered in this process with :func:`register`,
and the packaging entry-point group ``lyra_gym.schedulers`` (this project's
own baselines are declared there in ``pyproject.toml``; a researcher's package
adds one the same way, with no edit here).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any, Callable

import numpy as np

from lyra_gym.plan import Plan
from lyra_gym.view import ClusterView

ENTRY_POINT_GROUP = "lyra_gym.schedulers"


class Scheduler:
    """Base class. Subclasses implement :meth:`decide`.

    - ``tick_interval``: seconds between extra decision points the scheduler
      asks for (``None`` = only on events).
    - ``reset(rng)`` is called once before a simulation with the run's
      generator; keep any randomness on it.
    """

    name: str = "scheduler"
    tick_interval: float | None = None

    def reset(self, rng: np.random.Generator) -> None:  # noqa: B027 - optional hook
        """Start of a simulation; ``rng`` is the run's only source of randomness."""

    def decide(self, view: ClusterView) -> Plan:
        raise NotImplementedError


class UnknownSchedulerError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


_registered: dict[str, Callable[..., Scheduler]] = {}


def register(name: str, factory: Callable[..., Scheduler]) -> None:
    """Make ``factory(**params)`` available as scheduler ``name`` in this process."""
    _registered[name] = factory


def _entry_point_factories() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Every scheduler name, sorted."""
    return sorted(set(_entry_point_factories()) | set(_registered))


def make(name: str, **params: Any) -> Scheduler:
    """Instantiate scheduler ``name`` with ``params`` (its dataclass fields)."""
    if name in _registered:
        factory = _registered[name]
    else:
        eps = _entry_point_factories()
        if name not in eps:
            raise UnknownSchedulerError(f"unknown scheduler {name!r} (available: {', '.join(available())})")
        factory = eps[name].load()
    return factory(**params)
