"""``MODULE:ATTRIBUTE`` specs: a researcher's object found by import, in any process.

A spec names a module and an attribute in it, so a worker process (``lyra-gym compare --jobs 2``)
finds the same object as the process that was given the spec:

- ``pkg.mod:Name`` imports ``pkg.mod`` (from ``sys.path``; when it is not found there, from the
  current directory too, as ``python -m`` would) and takes ``Name`` (``Outer.Inner`` walks
  attributes);
- ``path/to/file.py:Name`` runs that file as a module (a path relative to the current directory).

Importing a module runs its code: a spec is trusted as a command line is. Nothing is unpickled.
A spec read from a file (a sweep file) is refused unless the user passed a trust flag
(:func:`refuse_code_specs`; ``docs/trust.md``, "Which inputs can run code").
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
from types import ModuleType
from typing import Any, Iterable, Mapping

from lyra_gym.errors import LyraGymError

_IDENTIFIERS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
#: Loader prefixes whose argument is a path read as data: nothing is imported or unpickled unless
#: trusted (``?trust=1`` in the path, or the parameter :data:`TRUST_PARAMETER`).
DATA_LOADERS = ("model", "rllib")
TRUST_PARAMETER = "trust_model_files"
_SHOWN_CHARS = 160  # an echoed spec is cut to this many characters


class SchedulerSpecError(LyraGymError):
    """A ``MODULE:ATTRIBUTE`` spec that cannot be imported or built; the message names the spec."""


class UntrustedCodeError(SchedulerSpecError):
    """A policy read from a file would import or unpickle code, and no trust flag was given."""


def runs_code(spec: str, params: Mapping[str, Any] | None = None) -> bool:
    """Whether building policy ``spec`` with ``params`` can import or unpickle code: every
    ``PREFIX:ARGUMENT`` or ``MODULE:ATTRIBUTE`` name (a ``.py`` file, a module, ``policy:``, any
    other loader) except ``model:PATH``/``rllib:PATH``, which run code only when trusted (``?trust=``
    or a true ``trust_model_files`` parameter). A plain name (an installed scheduler) does not."""
    prefix, sep, argument = spec.partition(":")
    if not sep:
        return False
    if prefix not in DATA_LOADERS:
        return True
    return _trust_option(argument) or bool((params or {}).get(TRUST_PARAMETER))


def _trust_option(argument: str) -> bool:
    """Whether a loader's ``PATH?OPTIONS`` asks for trust (any ``trust`` option but ``0``/``false``/``no``;
    an unknown option is left to the loader, which refuses it)."""
    _, sep, query = argument.rpartition("?")
    for item in query.split("&") if sep else ():
        key, eq, value = item.partition("=")
        if key.strip() == "trust" and (not eq or value.strip().lower() not in ("0", "false", "no")):
            return True
    return False


def refuse_code_specs(specs: Iterable[str], source: str, trust: bool,
                      params: Mapping[str, Mapping[str, Any]] | None = None, flag: str = "--trust-code") -> None:
    """Refuse, before anything is imported, a policy of ``specs`` read from a file that would run
    code (:func:`runs_code`, with its parameters in ``params``) unless ``trust``: one line naming
    ``source`` (the file and field, e.g. ``"sweep.yaml: policies"``), the spec and ``flag``."""
    if trust:
        return
    for spec in specs:
        given = (params or {}).get(spec)
        if runs_code(spec, given):
            shown = repr(shorten(spec)) + ("" if runs_code(spec) else f" with {TRUST_PARAMETER} set")
            raise UntrustedCodeError(
                f"{source}: {shown} can run code (it imports a module, runs a .py file or unpickles a model), "
                f"and a file is data: pass {flag} if you trust this file, or give the policy on the command line")


def shorten(text: str, limit: int = _SHOWN_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters (an echoed value never floods a message)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def split_spec(spec: str) -> tuple[str, str] | None:
    """``(module, attribute)`` of ``spec`` when it has the form ``MODULE:ATTRIBUTE`` (a dotted
    module name or a path ending in ``.py``; a dotted attribute name), else None."""
    module, sep, attribute = spec.rpartition(":")
    if not sep or not _IDENTIFIERS.fullmatch(attribute):
        return None
    if _IDENTIFIERS.fullmatch(module) or (module.endswith(".py") and len(module) > 3):
        return module, attribute
    return None


def load_object(spec: str, shown: str | None = None) -> Any:
    """The object ``spec`` names; :class:`SchedulerSpecError` naming ``shown`` (default: ``spec``)
    when it has not the form, its module cannot be imported (any error the module raises), or
    the attribute is missing."""
    shown = shown or spec
    parts = split_spec(spec)
    if parts is None:
        raise SchedulerSpecError(f"{shown!r}: expected MODULE:ATTRIBUTE (a dotted module name or a .py path, "
                                 f"then a name in it, e.g. my_pkg.policies:make)")
    module_name, attribute = parts
    module = _import(module_name, shown)
    found: Any = module
    for name in attribute.split("."):
        if not hasattr(found, name):
            raise SchedulerSpecError(f"{shown!r}: module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, name)
    return found


def _import(module_name: str, shown: str) -> ModuleType:
    try:
        if module_name.endswith(".py"):
            return _import_path(module_name, shown)
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name.split(".")[0] or os.getcwd() in sys.path or "" in sys.path:
                raise
            sys.path.append(os.getcwd())  # as `python -m` finds modules of the current directory
            return importlib.import_module(module_name)
    except SchedulerSpecError:
        raise
    except Exception as err:  # the user's module: any error it raises, in one line
        message = " ".join(str(err).split()) or type(err).__name__
        raise SchedulerSpecError(f"{shown!r}: cannot import {module_name!r} ({type(err).__name__}: {message})"
                                 ) from None


def _import_path(path: str, shown: str) -> ModuleType:
    """The module of the file at ``path``, imported once per process under a name made from its
    absolute path (so two files of one name stay two modules)."""
    absolute = os.path.abspath(path)
    if not os.path.isfile(absolute):
        raise SchedulerSpecError(f"{shown!r}: no file {path!r}")
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(absolute))[0])
    name = f"_lyra_gym_spec_{stem}_{hashlib.sha256(absolute.encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, absolute)
    assert loader_spec is not None and loader_spec.loader is not None  # a .py file always has one
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # before running it, as import does (dataclasses look it up)
    try:
        loader_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
