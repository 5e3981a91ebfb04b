"""Where a command's time went, phase by phase (``logpipe ingest --timings``).

A phase is timed where its code runs (``with phase("load"): ...``) and counts only while
something collects (:func:`collecting`): anywhere else it costs a context lookup.  Phases
nest, and a phase's time is its own: one inside another is taken out of the outer one.
Only the thread that collects is timed (an ingest's blocks are prepared ahead on other
threads, overlapping its own time: they are in the phase that waits for them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

READ = "read and parse"
"""An ingest reading its files: detecting, parsing (what blocks prepared ahead on other
threads left to wait for), writing the rows that go straight into their tables, runs."""
LOAD = "load"
"""Loading a file's spooled rows (batch and access lines) into their tables."""
ENVIRONMENTS = "environments"
"""Building, rendering and writing the runs' environments."""
COPIES = "copies and links"
"""Taking back copies of logs, linking records to runs, deriving ``profiled``."""
JUDGED = "judged counts"
"""Classifying the changed runs' lines and keeping their counts and statistics."""
COMMIT = "commit"
"""Committing transactions (each file's, each group's, the last one's)."""
PHASES = (READ, LOAD, ENVIRONMENTS, COPIES, JUDGED, COMMIT)
"""An ingest's phases, in the order it meets them."""


@dataclass
class _Spent:
    seconds: dict[str, float] = field(default_factory=dict)
    inner: list[float] = field(default_factory=list)
    """Per open phase, the time of the phases opened inside it."""


_current: ContextVar[_Spent | None] = ContextVar("logpipe_timings", default=None)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the body as ``name`` (its own time: the phases inside it are their own)."""
    spent = _current.get()
    if spent is None:
        yield
        return
    start = time.perf_counter()
    spent.inner.append(0.0)
    try:
        yield
    finally:
        took = time.perf_counter() - start
        inner = spent.inner.pop()
        spent.seconds[name] = spent.seconds.get(name, 0.0) + took - inner
        if spent.inner:
            spent.inner[-1] += took


@contextmanager
def collecting() -> Iterator[dict[str, float]]:
    """Collect the phases of the body (on this thread) into the dict yielded,
    ``{phase: seconds}``, filled as they end (a collection inside it collects its own)."""
    spent = _Spent()
    token = _current.set(spent)
    try:
        yield spent.seconds
    finally:
        _current.reset(token)
