"""The scheduler interface and the registry that finds schedulers by name.

A scheduler is a class with ``decide(view) -> Plan``. Schedulers are found by
name in two places: those registered in this process with :func:`register`,
and the packaging entry-point group ``lyra_gym.schedulers`` (this project's
own baselines are declared there in ``pyproject.toml``; a researcher's package
adds one the same way, with no edit here). Two more forms of name build a
scheduler without registering it, in any process (``docs/writing-a-policy.md``):

- ``PREFIX:ARGUMENT``, where ``PREFIX`` is a loader of the entry-point group
  ``lyra_gym.scheduler_loaders`` (``model:PATH``, ``policy:MODULE:FACTORY``);
- ``MODULE:ATTRIBUTE`` (:mod:`lyra_gym.sim.import_spec`): a :class:`Scheduler` class or a
  factory returning one, called with the policy's parameters.

A loader's name wins over a module of the same name (``model:X`` is a trained model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping

import numpy as np

from lyra_gym.errors import LyraGymError
from lyra_gym.sim import params as params_module
from lyra_gym.sim.import_spec import SchedulerSpecError, load_object, split_spec
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
    - ``preempt``: ids of running jobs to stop now and send back to the queue
      (the engine charges the usual restart cost and work since the last
      checkpoint, ``overheads``); the heuristic does not restart them in the same
      decision and may give their GPUs to other jobs. Ids of jobs that are not
      running are ignored. The lever Pollux and Tiresias use on their own
      (issue 38 item 1).
    """

    job_levels: Mapping[str, int] = field(default_factory=dict)
    borrow_fraction: float | None = None
    return_levels: Mapping[int, int] = field(default_factory=dict)
    preempt: frozenset[str] = frozenset()


JOB_LEVELS = 5
NEUTRAL_JOB_LEVEL = 2
RETURN_LEVELS = 3
NEUTRAL_RETURN_LEVEL = 1

#: What a policy can read of a job's duration: the :class:`~lyra_gym.sim.view.JobView` fields that
#: the run's knowledge model answers (:mod:`lyra_gym.model.knowledge`). ``Scheduler.reads`` names
#: the ones a policy uses.
DURATION_READS = frozenset({"spec.duration", "total_work", "remaining_work", "remaining_time_at", "expected_finish",
                            "snapshot"})


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

    def reset(self, rng: np.random.Generator) -> None:  # optional hook
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


def _loaders() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=PREFIX_ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Every scheduler name, sorted (``PREFIX:ARGUMENT`` and ``MODULE:ATTRIBUTE`` names aside)."""
    return sorted(set(_entry_point_factories()) | set(_registered))


def loader_names() -> list[str]:
    """The ``PREFIX`` of every ``PREFIX:ARGUMENT`` loader, sorted."""
    return sorted(_loaders())


def is_import_spec(name: str) -> bool:
    """Whether ``name`` is a ``MODULE:ATTRIBUTE`` scheduler (not registered, not a loader's prefix)."""
    return (name not in _registered and name.partition(":")[0] not in _loaders()
            and name not in _entry_point_factories() and split_spec(name) is not None)


def unknown_error(name: str) -> UnknownSchedulerError:
    """The error for a name that is no scheduler (listing the names, or the loaders for ``X:Y``)."""
    if ":" not in name:
        return UnknownSchedulerError(f"unknown scheduler {name!r} (available: {', '.join(available())})")
    return UnknownSchedulerError(
        f"unknown scheduler loader {name.partition(':')[0]!r} in {name!r} (available: "
        f"{', '.join(loader_names()) or 'none'}; or MODULE:ATTRIBUTE, a Scheduler class or factory to import)")


def scheduler_factory(name: str) -> Any | None:
    """What builds scheduler ``name``: its class or factory (None: a ``PREFIX:ARGUMENT`` loader's
    scheduler, known only once built). Raises :class:`UnknownSchedulerError` for an unknown name."""
    if name in _registered:
        return _registered[name]
    if is_import_spec(name):
        return load_object(name)
    eps = _entry_point_factories()
    if name not in eps:
        if name.partition(":")[0] in _loaders():
            return None
        raise unknown_error(name)
    return eps[name].load()


def declared_reads(name: str) -> frozenset[str] | None:
    """``reads`` of scheduler ``name``'s class (None: not declared, or a ``PREFIX:ARGUMENT`` loader's
    scheduler, known only once built). Raises :class:`UnknownSchedulerError` for an unknown name."""
    reads = getattr(scheduler_factory(name), "reads", None)
    return frozenset(reads) if reads is not None else None


def describe_params(name: str) -> str:
    """Scheduler ``name``'s parameters as a table (parameter, type, default, range, meaning), from
    their declarations (:mod:`lyra_gym.sim.params`); a line saying so when none are known."""
    rows = params_module.describe(scheduler_factory(name))
    if not rows:
        return f"{name}: no declared parameters (not a dataclass scheduler; see its documentation)"
    rows = [["parameter", "type", "default", "range", "meaning"], *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(row, widths)), row[4]]).rstrip() for row in rows)


def knowledge_tag(reads: frozenset[str] | None) -> str:
    """A policy's duration reads as a table cell: ``"none"``, the fields it reads
    (``"remaining_time_at, remaining_work"``) or ``"undeclared"``."""
    if reads is None:
        return "undeclared"
    return ", ".join(sorted(reads & DURATION_READS)) or "none"


def make(name: str, **params: Any) -> Scheduler:
    """Instantiate scheduler ``name`` with ``params`` (its dataclass fields).

    ``PREFIX:ARGUMENT`` names a scheduler built by a loader (entry-point group
    ``lyra_gym.scheduler_loaders``), e.g. ``model:PATH`` for a trained agent;
    ``MODULE:ATTRIBUTE`` a class or factory imported and called with ``params``
    (:func:`make_imported`). Declared parameters (and a dataclass's field types) are checked before
    the scheduler is built: :class:`~lyra_gym.sim.params.ParamError` names the policy and parameter.
    """
    if name in _registered:
        factory = _registered[name]
        params_module.check_params(name, factory, params)
        return factory(**params)
    prefix, sep, argument = name.partition(":")
    if sep:
        loaders = _loaders()
        if prefix in loaders:
            return loaders[prefix].load()(argument, **params)
        if is_import_spec(name):
            return make_imported(name, **params)
    eps = _entry_point_factories()
    if name not in eps:
        raise unknown_error(name)
    factory = eps[name].load()
    params_module.check_params(name, factory, params)
    return factory(**params)


def make_imported(spec: str, **params: Any) -> Scheduler:
    """``ATTRIBUTE(**params)`` of the ``MODULE:ATTRIBUTE`` spec (:func:`lyra_gym.sim.import_spec.load_object`):
    a :class:`Scheduler` subclass or a factory returning a Scheduler, else :class:`SchedulerSpecError`.
    A ``TypeError`` of the call (an unknown parameter) is raised as it is; a dataclass's field types
    are checked first (:func:`lyra_gym.sim.params.check_params`)."""
    factory = load_object(spec)
    if isinstance(factory, Scheduler) or not callable(factory):
        raise SchedulerSpecError(f"{spec!r}: {type(factory).__name__} object is not a Scheduler class or factory "
                                 f"(name the class, or a function returning a new Scheduler)")
    params_module.check_params(spec, factory, params)
    scheduler = factory(**params)
    if not isinstance(scheduler, Scheduler):
        hint = (" (an observation -> action policy? name it policy:" + spec + ")"
                if callable(scheduler) or hasattr(scheduler, "predict") else "")
        raise SchedulerSpecError(f"{spec!r}: returned a {type(scheduler).__name__}, not a "
                                 f"lyra_gym.sim.scheduler.Scheduler{hint}")
    return scheduler
