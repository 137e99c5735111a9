"""The project's errors: one base, :class:`LyraGymError`, for every bad input the gym refuses
(configs, traces, profiles, plans, output paths, model files, ...), the shared number check, and
:func:`shown` (a user's value cut short for a message).

Every error of the project subclasses :class:`LyraGymError` (a ``ValueError``), so a caller can
catch all of them at once; the message always names the field, file or line at fault.
Imports no project module.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

import numpy as np

__all__ = ["SHOWN_CHARS", "ConfigError", "LyraGymError", "number_problem", "shown"]


class LyraGymError(ValueError):
    """Bad input refused by the gym; the message names the field, file or line."""


class ConfigError(LyraGymError):
    """An impossible or malformed configuration; the message names the field (and file)."""


#: Most characters of a user's value an error message shows (then ``...``).
SHOWN_CHARS = 60
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 2, 6, 6, 4, 4
_REPR.maxstring = _REPR.maxother = SHOWN_CHARS
_REPR.maxlong = 4 * SHOWN_CHARS  # cut in the middle past this; shown() keeps the prefix


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut to :data:`SHOWN_CHARS` characters plus ``...``
    (nested or long values never printed whole; the cost is bounded too)."""
    if isinstance(value, int) and value.bit_length() > 4 * SHOWN_CHARS:  # repr fails past 4,300 digits
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value[:SHOWN_CHARS + 1]) if isinstance(value, str) else _REPR.repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def number_problem(
    value: object,
    *,
    integer: bool = False,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    allow_inf: bool = False,
) -> str | None:
    """``None`` if ``value`` is a number of the wanted kind and range, else the problem as
    ``"must be <requirement>, got <value>"``.

    Booleans are never numbers; NaN never passes; infinity passes only with ``allow_inf``
    (and a range that holds it). ``integer`` wants an ``int`` (or NumPy integer); otherwise
    any real number is accepted.
    """
    kind = "an integer" if integer else ("a number" if allow_inf else "a finite number")
    bounds = ""
    if lo is not None and hi is not None:
        bounds = f" in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    elif lo is not None:
        bounds = f" {'>' if lo_open else '>='} {lo:g}"
    elif hi is not None:
        bounds = f" {'<' if hi_open else '<='} {hi:g}"
    problem = f"must be {kind}{bounds}, got {shown(value)}"
    if isinstance(value, (bool, np.bool_)):
        return problem
    if integer:
        if not isinstance(value, (int, np.integer)):
            return problem
        number: float = int(value)
    else:
        if not isinstance(value, (int, float, np.integer, np.floating)):
            return problem
        try:
            number = float(value)
        except OverflowError:
            return problem
        if math.isnan(number) or (math.isinf(number) and not allow_inf):
            return problem
    if lo is not None and (number < lo or (lo_open and number == lo)):
        return problem
    if hi is not None and (number > hi or (hi_open and number == hi)):
        return problem
    return None
