"""Stopping a long command cleanly (Ctrl-C, SIGINT, SIGTERM).

:func:`catch_signals` makes SIGINT and SIGTERM raise ``KeyboardInterrupt`` (also where a
shell started the command in the background with SIGINT ignored) and records that a stop
was asked for: an interrupt that lands inside a DuckDB query comes back as a query error
(or is met later as an aborted transaction), and :func:`requested` lets the ingest tell
that from a damaged file.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_requested = threading.Event()


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
        _requested.set()
        raise KeyboardInterrupt

    _requested.clear()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _requested.clear()
