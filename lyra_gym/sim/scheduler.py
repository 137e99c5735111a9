"""The scheduler interface and the registry that finds schedulers by name.

A scheduler is a class with ``decide(view) -> Plan``. Schedulers are found by
name in two places: those registered in this process with :func:`register`,
and the packaging entry-point group ``lyra_gym.schedulers`` (this project's
own baselines are declared there in ``pyproject.toml``; a researcher's package
adds one the same way, with no edit here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping

import numpy as np

from lyra_gym.errors import LyraGymError
from lyra_gym.sim.plan import Plan
from lyra_gym.sim.view import ClusterView

ENTRY_POINT_GROUP = "lyra_gym.schedulers"
# "PREFIX:ARGUMENT" names (e.g. "model:runs/x/model.zip") go to the loader registered under
# PREFIX in this group: a callable (argument, **params) -> Scheduler.
PREFIX_ENTRY_POINT_GROUP = "lyra_gym.scheduler_loaders"


@dataclass
class Guidance:
    """An agent's modulation of a guided heuristic (the environments' decoded actions).

    Every field left at its default lets the heuristic decide alone, so an
    empty Guidance reproduces the heuristic exactly.

    - ``job_levels``: job id -> level in ``0 .. JOB_LEVELS - 1``. 0 = hold (a
      queued job is not admitted; a running elastic job gets no workers above
      its minimum); ``NEUTRAL_JOB_LEVEL`` = the heuristic's own choice; other
      levels admit in level order (higher first) and scale the job's value for
      extra workers by ``2 ** (level - NEUTRAL_JOB_LEVEL)``.
    - ``borrow_fraction``: fraction (0-1) of loanable servers to borrow; None =
      the heuristic's choice.
    - ``return_levels``: loaned server id -> level in ``0 .. RETURN_LEVELS - 1``;
      on a reclaim, servers with a higher level are returned first (0 =
      protect; ``NEUTRAL_RETURN_LEVEL`` = no preference).
    """

    job_levels: Mapping[str, int] = field(default_factory=dict)
    borrow_fraction: float | None = None
    return_levels: Mapping[int, int] = field(default_factory=dict)


JOB_LEVELS = 5
NEUTRAL_JOB_LEVEL = 2
RETURN_LEVELS = 3
NEUTRAL_RETURN_LEVEL = 1

#: What a policy can read of a job's duration: the :class:`~lyra_gym.sim.view.JobView` fields that
#: the run's knowledge model answers (:mod:`lyra_gym.model.knowledge`). ``Scheduler.reads`` names
#: the ones a policy uses.
DURATION_READS = frozenset({"spec.duration", "total_work", "remaining_work", "remaining_time_at", "expected_finish"})


class Scheduler:
    """Base class. Subclasses implement :meth:`decide`.

    - ``tick_interval``: seconds between extra decision points the scheduler
      asks for (``None`` = only on events).
    - ``tick_origin``: where the ticks' grid starts (``None``: the first arrival, the
      engine's start; ``0.0``: multiples of ``tick_interval``, as simulators that run in
      fixed rounds from time 0 do).
    - ``reset(rng)`` is called once before a simulation with the run's
      generator; keep any randomness on it.
    - ``reads``: what the policy reads of job durations, a subset of :data:`DURATION_READS`
      (empty: nothing; ``None``: not declared). Shown by ``lyra-gym policies`` and in compare's
      table (:func:`knowledge_tag`), since under ``knowledge: oracle`` those reads are the truth.
    """

    name: str = "scheduler"
    tick_interval: float | None = None
    tick_origin: float | None = None
    reads: frozenset[str] | None = None

    def reset(self, rng: np.random.Generator) -> None:  # noqa: B027 - optional hook
        """Start of a simulation; ``rng`` is the run's only source of randomness."""

    def decide(self, view: ClusterView) -> Plan:
        raise NotImplementedError

    def decide_guided(self, view: ClusterView, guidance: Guidance) -> Plan:
        """Decide with an agent's :class:`Guidance`; only guidable heuristics implement it."""
        raise NotImplementedError(f"scheduler {self.name!r} cannot be guided by an agent")


class UnknownSchedulerError(LyraGymError, KeyError):
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


def declared_reads(name: str) -> frozenset[str] | None:
    """``reads`` of scheduler ``name``'s class (None: not declared, or a ``PREFIX:ARGUMENT`` loader's
    scheduler, known only once built). Raises :class:`UnknownSchedulerError` for an unknown name."""
    if name in _registered:
        factory: Any = _registered[name]
    else:
        eps = _entry_point_factories()
        if name not in eps:
            if ":" in name:
                return None
            raise UnknownSchedulerError(f"unknown scheduler {name!r} (available: {', '.join(available())})")
        factory = eps[name].load()
    reads = getattr(factory, "reads", None)
    return frozenset(reads) if reads is not None else None


def knowledge_tag(reads: frozenset[str] | None) -> str:
    """A policy's duration reads as a table cell: ``"none"``, the fields it reads
    (``"remaining_time_at, remaining_work"``) or ``"undeclared"``."""
    if reads is None:
        return "undeclared"
    return ", ".join(sorted(reads & DURATION_READS)) or "none"


def make(name: str, **params: Any) -> Scheduler:
    """Instantiate scheduler ``name`` with ``params`` (its dataclass fields).

    ``PREFIX:ARGUMENT`` names a scheduler built by a loader (entry-point group
    ``lyra_gym.scheduler_loaders``), e.g. ``model:PATH`` for a trained agent.
    """
    prefix, sep, argument = name.partition(":")
    if sep and name not in _registered:
        loaders = {ep.name: ep for ep in entry_points(group=PREFIX_ENTRY_POINT_GROUP)}
        if prefix not in loaders:
            raise UnknownSchedulerError(
                f"unknown scheduler loader {prefix!r} in {name!r} (available: {', '.join(sorted(loaders)) or 'none'})")
        return loaders[prefix].load()(argument, **params)
    if name in _registered:
        factory = _registered[name]
    else:
        eps = _entry_point_factories()
        if name not in eps:
            raise UnknownSchedulerError(f"unknown scheduler {name!r} (available: {', '.join(available())})")
        factory = eps[name].load()
    return factory(**params)
