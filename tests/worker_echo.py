"""A worker function for the tests of :mod:`logpipe.workers`: its request back."""

from __future__ import annotations

from typing import Any


def echo(setup: Any, value: Any) -> Any:
    return value


def echo_interrupted(setup: Any, value: Any) -> Any:
    """``echo``, in a worker that takes SIGUSR1 (a handler: a signal interrupts a write to
    the pipe part way, as a profiler's or debugger's stops do)."""
    import signal

    signal.signal(signal.SIGUSR1, lambda *_: None)
    return value
