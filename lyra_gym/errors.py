"""The project's errors: one base, :class:`LyraGymError`, for every bad input the gym refuses
(configs, traces, profiles, plans, output paths, model files, ...), and the shared number check.

Every error of the project subclasses :class:`LyraGymError` (a ``ValueError``), so a caller can
catch all of them at once; the message always names the field, file or line at fault.
Imports no project module.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ConfigError", "LyraGymError", "number_problem"]


class LyraGymError(ValueError):
    """Bad input refused by the gym; the message names the field, file or line."""


class ConfigError(LyraGymError):
    """An impossible or malformed configuration; the message names the field (and file)."""


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
    problem = f"must be {kind}{bounds}, got {value!r}"
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
