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


BUILTIN_KINDS = ("logpipe.sources.bench", "logpipe.sources.phases",
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
