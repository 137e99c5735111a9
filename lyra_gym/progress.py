"""A progress bar for long commands: tqdm on stderr, shown only after a delay, never on stdout.

:func:`progress` is what ``python -m lyra_agents.benchmark``, ``python -m lyra_agents.evaluate``,
``benchmarks/headline.py`` and ``benchmarks/lyra_ablations.py`` show while they run (the ETA is
tqdm's). The bar:

* writes to ``sys.stderr`` only, so tables on stdout and written files are the same bytes with
  or without it, and is cleared when it closes (``leave=False``);
* appears after ``delay`` seconds (default 2 s; ``LYRA_GYM_PROGRESS_DELAY`` overrides it,
  ``0`` shows it at once), so a short run prints nothing;
* is off with ``TQDM_DISABLE=1`` (any value but ``''``, ``0``, ``false``, ``no``) or ``enabled=False``;
* redraws at most every :data:`PIPE_INTERVAL_S` seconds when stderr is not a terminal (a CI log
  or a file gets a line every few seconds, not hundreds), every 0.1 s on a terminal.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

DELAY_S = 2.0
PIPE_INTERVAL_S = 5.0
DELAY_ENV = "LYRA_GYM_PROGRESS_DELAY"


def _delay() -> float:
    text = os.environ.get(DELAY_ENV, "").strip()
    if not text:
        return DELAY_S
    try:
        value = float(text)
    except ValueError:
        return DELAY_S
    return value if value >= 0 else DELAY_S


def _disabled_by_env() -> bool:
    return os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false", "no")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def progress(total: int, desc: str | None = None, unit: str = "run", enabled: bool = True) -> Any:
    """A tqdm bar of ``total`` steps on stderr (use as a context manager; ``update(1)`` per step,
    ``set_description_str(...)`` for what runs now). Disabled, it still takes every call."""
    from tqdm import tqdm

    stream = sys.stderr
    return tqdm(total=total, desc=desc, unit=unit, file=stream, leave=False, delay=_delay(),
                mininterval=0.1 if _isatty(stream) else PIPE_INTERVAL_S,
                disable=not enabled or _disabled_by_env(), dynamic_ncols=True)


def write(line: str, file: Any = None) -> None:
    """``line`` and a newline on ``file`` (default stderr; the same bytes as ``print(line, file=file)``),
    flushed. A bar already showing is cleared first and drawn again after; unlike ``tqdm.write``,
    a bar still within its delay is left hidden (so a short run stays free of bars)."""
    from tqdm import tqdm

    stream = sys.stderr if file is None else file
    shown = []
    for bar in list(getattr(tqdm, "_instances", ())):
        if getattr(bar, "disable", True) or not hasattr(bar, "start_t"):
            continue
        clock = getattr(bar, "_time", time.time)
        if clock() - bar.start_t >= getattr(bar, "delay", 0.0):
            shown.append(bar)
    for bar in shown:
        bar.clear()
    stream.write(line + "\n")
    stream.flush()
    for bar in shown:
        bar.refresh()
