"""SIGTERM handled as Ctrl-C, so a command stopped either way cleans up and says so in one line.

Every command that writes (``lyra-gym``, ``train.py``, ``python -m lyra_agents.benchmark`` and
``evaluate``) runs inside :func:`sigterm_as_interrupt`: a SIGTERM raises ``KeyboardInterrupt``,
which each turns into its ``interrupted`` line, exit status 130 and an honest manifest.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

__all__ = ["sigterm_as_interrupt"]


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does; the old handler is restored
    after. Outside the main thread (where no handler can be set), nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
