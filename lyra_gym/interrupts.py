"""SIGTERM handled as Ctrl-C, so a command stopped either way cleans up and says so in one line.

Every command that writes (``lyra-gym``, ``train.py``, ``python -m lyra_agents.benchmark`` and
``evaluate``) runs inside :func:`sigterm_as_interrupt`: a SIGTERM raises ``KeyboardInterrupt``,
which each turns into its ``interrupted`` line, exit status 130 and an honest manifest.
:func:`interrupts_deferred` holds such an interrupt back over a few file-system calls that must
not be cut apart (a folder renamed aside and the new one renamed into place).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["interrupts_deferred", "sigterm_as_interrupt"]


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


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Inside, a SIGINT or SIGTERM is recorded instead of handled; on leaving, the handlers are
    restored and the first signal recorded is handled then (``KeyboardInterrupt`` under
    :func:`sigterm_as_interrupt`), so the body runs whole. Python handles signals in the main
    thread only, whichever thread the kernel picks, so this works with other threads running
    (a signal mask would not); outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    record = lambda signum, frame: caught.append(signum)  # noqa: E731
    old: dict[signal.Signals, Any] = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(signum)
            if handler is not None:  # None: a handler set outside Python, left alone
                old[signum] = handler  # noted first: an interrupt here still restores it
                signal.signal(signum, record)
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])  # handled now by the restored handler
