"""What an engine's log parser gives the ingest, and nothing more.

The ingest (:mod:`logpipe.ingest.logfile`) owns a server log's file protocol: what is new
since the last ingest, the parser's state kept between ingests, hashes, the transaction,
the ``runs`` rows, spooling and writing.  An engine brings a :class:`LogParser`, made by
the factory its :attr:`logpipe.engines.Engine.log_parser` names, that turns blocks of
complete lines into a :class:`Chunk`: rows by table (each with the ``run_seq`` of the
launch it belongs to) and what it saw of each launch (:class:`RunSeen`).  No engine
imports the ingest or the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

Era = tuple[str | None, int | None]
"""``(runs.format_era, runs.era_mask)`` of a launch."""


@dataclass
class RunSeen:
    """A launch (``run_seq`` within its file) as one block shows it."""

    seq: int
    first_line: int | None
    first_ts: Any
    last_ts: Any
    era: Any = None
    """The engine's own observation of its format era, folded by :meth:`LogParser.era`."""
    facts: dict[str, Any] = field(default_factory=dict)
    """``runs`` columns its launch lines say (arguments, sizes, speculation, role)."""


@dataclass
class Chunk:
    """The rows of one block."""

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    """Rows by table, each with ``run_seq``; the ingest sets ``run_id`` from it."""
    runs: list[RunSeen] = field(default_factory=list)
    noise: int = 0
    """Lines that are no record of the engine (other programs' output, blank lines)."""
    unread: int = 0
    """Lines that look like records but were not read."""
    continuation: str | None = None
    """Text continuing the error event left open by the previous block."""
    may_hold_console: bool = True
    """Whether the block's lines may hold a benchmark's console summary (False: the
    parser read every line as its own, so there is nothing to search)."""


class LogParser(Protocol):
    """One file's parser, made with the state its last ingest left
    (``factory(state_json | None, fallback_date, keep_text)``)."""

    @property
    def block_bytes(self) -> int:
        """Bytes of complete lines for the next block (read before each: a parser may size
        its blocks by the lines it has read)."""
    spooled: frozenset[str]
    """Tables whose rows are many (one per batch or access line): spooled and loaded once
    per file rather than inserted per block."""
    linked: frozenset[str]
    """Tables of records the server log itself holds (request, phase records): their rows
    belong to the log's run (``link_method``)."""

    @property
    def lines(self) -> int:
        """Lines parsed, over every ingest of the file."""

    def count_lines(self, block: bytes | bytearray) -> int: ...

    def prepare(self, block: bytes | bytearray, first_line_no: int) -> Any:
        """The part of parsing that needs no state (run ahead on another thread)."""

    def finish(self, prepared: Any) -> Chunk:
        """The part that follows the file, in order; updates the parser's state."""

    def end(self) -> Chunk | None:
        """What is left at the end of what the file holds now (a record left open)."""

    def workers(self) -> AbstractContextManager[None]:
        """Entered while the ingest reads a big file block by block: worker processes the
        parse may give its slowest lines to (started as needed, ended on exit).  Small
        files, parsed whole, are parsed without."""

    def state_json(self) -> str: ...

    def era(self, previous: Era | None, seen: RunSeen) -> Era:
        """A launch's era after this block (``previous``: before it, None for a new one)."""

    def quotation(self, path: Path, rows: Mapping[str, int], noise: int) -> str | None:
        """Why the runs of a new file are a quotation of the engine's lines among prose
        (a note, a chat paste), not a server's output; None when they are output."""
