"""Stopping a long command cleanly (Ctrl-C, SIGINT, SIGTERM).

:func:`catch_signals` makes SIGINT and SIGTERM raise ``KeyboardInterrupt`` (also where a
shell started the command in the background with SIGINT ignored) and records that a stop
was asked for: an interrupt that lands inside a DuckDB query comes back as a query error
(or is met later as an aborted transaction), and :func:`requested` lets the ingest tell
that from a damaged file.  Inside :func:`deferred` (a commit and what records it) a signal
only records the stop and is raised when the section ends: a stop never lands between a
commit and the note that says it was made.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_requested = threading.Event()
_deferring = 0
"""How many :func:`deferred` sections the main thread is in."""
_held = False
"""A signal arrived inside a :func:`deferred` section and is raised when it ends."""


def requested() -> bool:
    """Whether a stop was asked for since :func:`catch_signals` began."""
    return _requested.is_set()


@contextmanager
def catch_signals() -> Iterator[None]:
    """Within: SIGINT and SIGTERM raise ``KeyboardInterrupt`` (a job scheduler's or
    ``timeout``'s SIGTERM stops a command as Ctrl-C does).  Only the main thread can
    install handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        global _held
        _requested.set()
        if _deferring:
            _held = True
            return
        raise KeyboardInterrupt

    _requested.clear()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _requested.clear()


@contextmanager
def deferred() -> Iterator[None]:
    """Within: a signal only records the stop; ``KeyboardInterrupt`` is raised when the
    (outermost) section ends, so what the section does is done whole.  For a commit and
    the bookkeeping that says it was made: a stop that landed between them would leave a
    committed file reported as not committed.  Signals reach the main thread only: on
    another thread this holds nothing (and never raises there)."""
    global _deferring, _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferring += 1
    try:
        yield
    except BaseException:
        _deferring -= 1
        if not _deferring:
            _held = False  # the exception on its way out stops the command already
        raise
    _deferring -= 1
    if not _deferring and _held:
        _held = False
        raise KeyboardInterrupt
