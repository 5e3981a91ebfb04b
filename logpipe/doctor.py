"""``logpipe doctor FILE``: what a file gave and what it did not, without a database.

What a user runs when a number looks wrong: for a server log, how many lines of each kind
were found, which wrappers were peeled off them, the rejected lines with their reasons,
and the lines that say ``batch`` or ``throughput`` but were not read — so it is plain at
once whether anything was lost.  Parsing is the ingest's own (the polars parser, which
the C fast lane matches row for row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from logpipe.engines import engine_for_kind, engines
from logpipe.errors import InputError
from logpipe.readers import read_head, take_damage
from logpipe.sources import HEAD_BYTES, deep_window, detect, load


@dataclass
class Diagnosis:
    path: str
    kind: str | None
    lines: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    wrappers: dict[str, int] = field(default_factory=dict)
    rejects: list[tuple[int, str, str]] = field(default_factory=list)
    unread: list[tuple[int, str]] = field(default_factory=list)
    unread_total: int = 0
    rejects_total: int = 0
    display: str | None = None
    """The engine whose server log it is (``SGLang``, ``vLLM``)."""
    damaged: str | None = None
    """What is wrong with a compressed file that ends in damage (the lines before it are
    what ingest reads)."""


def diagnose(path: Path) -> Diagnosis:
    """Parse ``path`` as ingest would and say what came of each line."""
    if not path.is_file():
        raise InputError("no such file", path=path)
    take_damage(path)
    d = _diagnose(path)
    d.damaged = take_damage(path)
    return d


def _diagnose(path: Path) -> Diagnosis:
    try:
        raw_head = read_head(path, HEAD_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", path=path) from exc
    head = raw_head.decode("utf-8", errors="replace")
    source = detect(head)
    if source is None:
        found = deep_window(path)
        if found is not None and detect(found[1]) is not None:
            head, source = found[1], detect(found[1])
    kind = source.name if source else None
    if engine_for_kind(kind or "") is None:
        # an engine's log under another kind's lines: the test ingest applies to a console
        kind = next((k.name for e in engines() for k in e.log_kinds
                     if (k.serves or k.sniff)(head)), kind)
    d = Diagnosis(str(path), kind)
    engine = engine_for_kind(kind) if kind else None
    d.display = engine.display if engine is not None else None
    if engine is not None and engine.diagnose is not None:
        for name, value in load(engine.diagnose)(path).items():
            setattr(d, name, value)
        return d
    return d


