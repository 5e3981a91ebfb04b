"""Input kinds behind one registry.

Each kind is a :class:`Source`: a name, a ``sniff`` that looks only at the head of a file
(the first 64 KiB, decoded), and the sample files it ships under ``sample_logs/``.  The
registry tries the most specific kinds first (lnav's rule) and every sample must be
detected as its own kind and no other (``tests/test_registry.py``).  Built-in kinds are
registered the same way a plugin would: by calling :func:`register`.  A kind says how its
files are read: records parsed whole into one table (``table`` + ``parse``), or a reader
of its own (``reader``); a server log's kind belongs to an engine
(:mod:`logpipe.engines`), which reads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Source:
    """One kind of input file."""

    name: str
    description: str
    sniff: Callable[[str], bool]
    samples: tuple[str, ...] = field(default=())
    """Paths under ``sample_logs/`` that must be detected as this kind."""
    specificity: int = 0
    """Higher runs first: a narrow format must win over a broad one."""
    table: str | None = None
    """The table the records of a file of this kind go to (with ``parse``)."""
    parse: Callable[[str, bool], tuple[list[tuple[int, dict[str, Any]]],
                                       list[tuple[int, str, str]]]] | None = None
    """``(text, keep_text) -> (rows as (line_no, record), rejects as (line_no, reason,
    raw))``: a whole file's records."""
    reader: str | None = None
    """``module:function`` of a kind read its own way, ``(store, path, key, options) ->
    FileResult`` (profiler traces: streamed)."""
    markers: tuple[bytes, ...] = ()
    """Literal bytes of this kind's record lines (``Decode batch``): a file whose head shows
    no known format is scanned for them further on (:func:`deep_window`), so that a log
    behind a long preamble (pip output, an environment dump) is still found."""
    serves: Callable[[str], bool] | None = None
    """A server log kind: does a head that also holds a benchmark's console summary show
    this server's own output (a run script that sent both to one file), not only lines a
    benchmark client of the same engine prints with the same prefix?  None: ``sniff``."""


_REGISTRY: dict[str, Source] = {}


def register(source: Source) -> Source:
    """Add a kind to the registry (replacing one of the same name)."""
    _REGISTRY[source.name] = source
    return source


def registered() -> list[Source]:
    """All kinds, most specific first."""
    _load_builtins()
    return sorted(_REGISTRY.values(), key=lambda s: (-s.specificity, s.name))


def detect(head: str) -> Source | None:
    """The first kind whose sniff accepts ``head``, or None."""
    for source in registered():
        if source.sniff(head):
            return source
    return None


DEEP_SCAN_BYTES = 1 << 30
"""How far past the head :func:`deep_window` looks for a record marker (a literal search:
about a second per GiB), so that a big file of another kind costs a bounded scan."""
DEEP_BLOCK = 4 << 20


def deep_window(path: Any, start: int = HEAD_BYTES) -> tuple[int, str] | None:
    """Where a known kind's record marker first occurs past the head, as ``(offset of its
    line, HEAD_BYTES of text from there)``; None when none occurs within the bounded scan.
    The window is what :func:`detect` is then shown (a log behind a long preamble).  A
    binary file (a NUL byte in its head: model weights, Parquet) is not scanned."""
    from logpipe.readers import open_binary

    markers = [m for s in registered() for m in s.markers]
    if not markers:
        return None
    longest = max(len(m) for m in markers)
    with open_binary(path) as fh:
        seen = fh.read(start)
        offset = len(seen)
        if len(seen) < start or b"\0" in seen:
            return None  # all of it was the head, or a binary file (weights, Parquet)
        carry = seen[-longest:]
        while offset < start + DEEP_SCAN_BYTES:
            block = fh.read(DEEP_BLOCK)
            if not block:
                return None
            data = carry + block
            base = offset - len(carry)
            hits = [i for i in (data.find(m) for m in markers) if i >= 0]
            if hits:
                at = min(hits)
                line = data.rfind(b"\n", 0, at) + 1
                window = data[line:] + fh.read(HEAD_BYTES)
                return base + line, window[:HEAD_BYTES].decode("utf-8", errors="replace")
            offset += len(block)
            carry = data[-longest:]
    return None

BUILTIN_KINDS = ("logpipe.sources.bench", "logpipe.sources.phases", "logpipe.engines.counters",
                 "logpipe.sources.request_metrics", "logpipe.sources.torch_trace")
"""Modules of the record kinds that ship with logpipe; each registers its kinds.  Server
log kinds come with their engines (``logpipe.engines``)."""


def _load_builtins() -> None:
    for module in BUILTIN_KINDS:
        importlib.import_module(module)
    importlib.import_module("logpipe.engines").engines()  # registers their log kinds


def load(spec: str) -> Any:
    """The object a ``module:attribute`` spec names (a kind's reader, an engine)."""
    module, _, attr = spec.partition(":")
    obj = importlib.import_module(module)
    return getattr(obj, attr) if attr else obj
