"""Scheduler parameters: each declared once (type, range, unit, meaning) and checked before work.

A heuristic declares every constructor parameter as a dataclass field made by :func:`param`::

    tick_interval: float | None = param(60.0, "seconds between re-optimisations", lo=MIN_TICK_S,
                                        hi=MAX_S, unit="s")

The annotation is the type (``bool``, ``int``, ``float``, ``str``, ``X | None``, ``Sequence[X]``,
``Mapping[str, X]``); :class:`Param` adds the range or the choices, the unit and the meaning. A
subclass that only changes a default (``loan: bool = True``) keeps its parent's declaration.

Checks: :func:`check_params` (the registry's ``make`` and compare's pre-run check, before a
scheduler is built: one line naming the policy and the parameter) and :func:`check_fields` (a
heuristic's ``__post_init__``: direct construction). Booleans are booleans, integers integers,
numbers finite and in range, NaN never. A third-party dataclass scheduler with no declaration has
its field types checked; any other scheduler is built as it is. :func:`describe` prints the table
``lyra-gym policies --params NAME`` shows. Imports no scheduler module.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections import abc
from dataclasses import MISSING, dataclass
from typing import Any, Callable, Mapping

import numpy as np

from lyra_gym.errors import LyraGymError, number_problem, shown

__all__ = ["MAX_S", "MIN_TICK_S", "Param", "ParamError", "check_fields", "check_params", "checked_tick", "describe",
           "param", "shown"]

#: s: the shortest tick (decision interval) a heuristic may ask for: a shorter one floods the engine
#: with decision points (``tick_interval=1e-9`` never finishes) for no gain at trace time scales.
MIN_TICK_S = 1.0
#: s: the longest time parameter (about 32 years; longer ones are typos).
MAX_S = 1e9
_KEY = "lyra_param"  # the key of a Param in a dataclass field's metadata


class ParamError(LyraGymError):
    """A scheduler parameter of the wrong type or out of range; the message names it."""


@dataclass(frozen=True)
class Param:
    """How one parameter is checked and shown.

    :param doc: its meaning, one line.
    :param lo: smallest number allowed (``lo_open``: excluded); ``hi``: largest (included).
    :param unit: shown after the range (``"s"``, ``"GPU-s"``, ``"servers"``).
    :param choices: the strings allowed (a ``str`` parameter).
    :param max_items: the most items of a list or mapping.
    :param scalar: a lone item stands for a one-item list.
    :param allow_inf: infinity is a number (undeclared fields of third-party schedulers; NaN never is).
    """

    doc: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    unit: str = ""
    choices: tuple[str, ...] = ()
    max_items: int = 64
    scalar: bool = False
    allow_inf: bool = False


#: the checks of a third-party field nobody declared: its type only (infinity allowed, any length)
_UNDECLARED = Param("", allow_inf=True, max_items=2**62)


def param(default: Any = MISSING, doc: str = "", *, factory: Callable[[], Any] | None = None, **checks: Any) -> Any:
    """A dataclass field with default ``default`` (or ``factory()``), declared by ``Param(doc, **checks)``."""
    metadata = {_KEY: Param(doc, **checks)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class _Rule:
    """What a value must be, in words (``"a finite number >= 1"``), and the test."""

    words: str
    fits: Callable[[Any], bool]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _number_rule(integer: bool, spec: Param) -> _Rule:
    problem = functools.partial(number_problem, integer=integer, lo=spec.lo, hi=spec.hi, lo_open=spec.lo_open,
                                allow_inf=spec.allow_inf)
    # number_problem's own words for these bounds (None is never a number, so it always answers)
    words = str(problem(None)).removeprefix("must be ").rpartition(", got ")[0]
    return _Rule(words, lambda v: _is_number(v) and problem(v) is None)


def _list_rule(item: _Rule, spec: Param) -> _Rule:
    def fits(v: Any) -> bool:
        if spec.scalar and item.fits(v):
            return True
        listed = isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim == 1)
        return listed and len(v) <= spec.max_items and all(map(item.fits, v))

    words = f"a list of at most {spec.max_items} items, each {item.words}"
    return _Rule(f"{item.words}, or {words}" if spec.scalar else words, fits)


def _mapping_rule(key: _Rule, value: _Rule, spec: Param) -> _Rule:
    def fits(v: Any) -> bool:
        return (isinstance(v, Mapping) and len(v) <= spec.max_items
                and all(key.fits(k) and value.fits(x) for k, x in v.items()))

    return _Rule(f"a mapping of at most {spec.max_items} items, each {key.words} -> {value.words}", fits)


def _optional(tp: Any) -> Any | None:
    """``X`` of ``X | None`` (``Optional[X]``), else None."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        return next(a for a in args if a is not type(None))
    return None


def _rule(tp: Any, spec: Param) -> _Rule | None:
    """The rule of type ``tp`` under ``spec``; None for a type not checked (``Any``, a class)."""
    inner = _optional(tp)
    if inner is not None:
        rule = _rule(inner, spec)
        return None if rule is None else _Rule(f"{rule.words} or null", lambda v: v is None or rule.fits(v))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal and all(isinstance(a, str) for a in args):
        spec = dataclasses.replace(spec, choices=args)
    if spec.choices:
        choices = spec.choices
        return _Rule("one of " + ", ".join(map(repr, choices)), lambda v: isinstance(v, str) and v in choices)
    if tp is bool:
        return _Rule("true or false", lambda v: isinstance(v, (bool, np.bool_)))
    if tp in (int, float):
        return _number_rule(tp is int, spec)
    if tp is str:
        return _Rule("a string", lambda v: isinstance(v, str))
    if origin in (abc.Sequence, list, tuple) and args and (origin is not tuple or args[-1] is Ellipsis):
        item = _rule(args[0], spec)
        return None if item is None else _list_rule(item, spec)
    if origin in (abc.Mapping, dict) and len(args) == 2:
        key, value = _rule(args[0], Param("")), _rule(args[1], spec)
        return None if key is None or value is None else _mapping_rule(key, value, spec)
    return None


@dataclass(frozen=True)
class _Declared:
    """One init field of a scheduler class: its type, declaration (None: undeclared) and rule."""

    type: Any
    spec: Param | None
    rule: _Rule | None


def _spec(cls: type, name: str) -> Param | None:
    """The Param of field ``name``, from the first class of ``cls``'s MRO that declares it."""
    for klass in cls.__mro__:
        found = getattr(klass, "__dataclass_fields__", {}).get(name)
        if found is not None and _KEY in found.metadata:
            return found.metadata[_KEY]
    return None


def declared(factory: Any) -> dict[str, _Declared]:
    """Every init field of ``factory``, a dataclass, with its rule (empty for anything else)."""
    if not isinstance(factory, type) or not dataclasses.is_dataclass(factory):
        return {}
    return _declared(factory)


@functools.lru_cache(maxsize=256)
def _declared(cls: type) -> dict[str, _Declared]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: types left unchecked
        hints = {}
    out = {}
    for f in dataclasses.fields(cls):
        if f.init:
            spec = _spec(cls, f.name)
            tp = hints.get(f.name, Any)
            out[f.name] = _Declared(tp, spec, _rule(tp, spec or _UNDECLARED))
    return out


def _problem(cls: Any, params: Mapping[str, Any]) -> tuple[str, str, Any] | None:
    """The first ``(key, requirement, value)`` of ``params`` that ``cls`` refuses, or None."""
    rules = declared(cls)
    for key, value in params.items():
        rule = rules[key].rule if key in rules else None
        if rule is not None and not rule.fits(value):
            return key, f"must be {rule.words}", value
    return None


def check_params(policy: str, factory: Any, params: Mapping[str, Any]) -> None:
    """Refuse, before ``factory(**params)`` runs, a parameter of the wrong type or out of range:
    :class:`ParamError` ``"policy 'pollux': parameter tick_interval: must be ... (got nan)"``.
    Names the factory does not declare are left to it (an unknown one is its ``TypeError``)."""
    problem = _problem(factory, params)
    if problem is not None:
        key, requirement, value = problem
        raise ParamError(f"policy {policy!r}: parameter {key}: {requirement} (got {shown(value)})")


def check_fields(scheduler: Any) -> None:
    """:func:`check_params` for a scheduler just built (its ``__post_init__``): every field's value;
    :class:`ParamError` ``"tick_interval: must be ..., got nan"``."""
    cls = type(scheduler)
    problem = _problem(cls, {key: getattr(scheduler, key) for key in declared(cls)})
    if problem is not None:
        key, requirement, value = problem
        raise ParamError(f"{key}: {requirement}, got {shown(value)}")


def _type_name(tp: Any) -> str:
    """``float | None`` -> ``"float or null"``, ``Sequence[str]`` -> ``"list of str"``."""
    inner = _optional(tp)
    if inner is not None:
        return f"{_type_name(inner)} or null"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (abc.Sequence, list, tuple) and args:
        return f"list of {_type_name(args[0])}"
    if origin in (abc.Mapping, dict) and len(args) == 2:
        return f"mapping {_type_name(args[0])} -> {_type_name(args[1])}"
    return getattr(tp, "__name__", str(tp))


def _range(spec: Param | None, tp: Any) -> str:
    """The range column of a ``tp`` parameter: ``"[1, 1e+09] s"``, ``"cost, random"``, ``""``..."""
    if spec is None:
        return ""
    if spec.choices:
        return ", ".join(spec.choices)
    lo = None if spec.lo is None else f"{spec.lo:g}"
    hi = None if spec.hi is None else f"{spec.hi:g}"
    if lo is not None and hi is not None:
        text = f"{'(' if spec.lo_open else '['}{lo}, {hi}]"
    elif lo is not None:
        text = f"{'>' if spec.lo_open else '>='} {lo}"
    else:
        text = "" if hi is None else f"<= {hi}"
    text = f"{text} {spec.unit}".strip()
    if typing.get_origin(_optional(tp) or tp) in (abc.Sequence, list, tuple, abc.Mapping, dict):
        text = f"{text}, at most {spec.max_items} items".lstrip(", ")
    return text


def _default(f: dataclasses.Field) -> str:
    """A field's default as a table cell (``true``, ``null``, ``60.0``, ``('ncf',)``)."""
    if f.default_factory is not MISSING:
        return shown(f.default_factory())
    if isinstance(f.default, bool) or f.default is None:
        return {True: "true", False: "false", None: "null"}[f.default]
    return "(required)" if f.default is MISSING else shown(f.default)


def describe(factory: Any) -> list[list[str]]:
    """Rows (parameter, type, default, range, meaning) of ``factory``'s init fields (none: not a dataclass)."""
    rules, rows = declared(factory), []
    for f in dataclasses.fields(factory) if rules else ():
        if f.name in rules:
            d = rules[f.name]
            rows.append([f.name, _type_name(d.type), _default(f), _range(d.spec, d.type), d.spec.doc if d.spec else ""])
    return rows


def checked_tick(scheduler: Any) -> float | None:
    """``scheduler.tick_interval`` (s; None: no ticks), refused unless a finite number > 0 whatever
    the scheduler declares (a NaN tick hung the engine's loop)."""
    tick = scheduler.tick_interval
    if tick is not None and not (_is_number(tick) and math.isfinite(tick) and tick > 0):
        raise ValueError(f"{type(scheduler).__name__}.tick_interval: must be a finite number > 0 seconds, "
                         f"got {shown(tick)}")
    return tick
