"""What an ingest reports, and the options it runs with (shared by its parts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from logpipe._version import __version__
from logpipe.env import Tiers

PARSER_VERSION = f"logpipe {__version__}"
IN_LOG = "server log"
"""link_method of records printed in the server log itself: they belong to its run."""

Progress = Callable[[int], None]


@dataclass
class FileResult:
    path: str
    status: str
    """new | appended | unchanged | truncated | rewritten | changed | moved | duplicate |
    skipped | failed"""
    kind: str | None = None
    lines: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    runs_created: int = 0
    noise: int = 0
    detail: str | None = None
    begins_with: str | None = None
    """A file read already whose content this new file begins with (it goes on past
    it): one of the two may be a copy of the other."""
    unread: int = 0
    """Lines that look like records (batch head, throughput) but were not read."""
    damaged: str | None = None
    """What was wrong with a compressed file that ended in damage (truncated, corrupt):
    the lines before it were read."""
    read_after: int | None = None
    """A server log read now: the last line read before (0: read from its start); its
    lines past it are folded into the kept batch ranges at the end of the ingest."""


@dataclass
class IngestResult:
    db: str
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    unlinked: list[str] = field(default_factory=list)
    """Benchmark records (``path:line``) not linked to any server run."""
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    """Console summaries (``path:line``) ingested now that repeat a JSONL record, with it."""
    copies: list[Any] = field(default_factory=list)
    """Files read now whose record lines all repeat another file's (``ingest.copies.Copy``):
    they made no run."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds of each phase (:data:`logpipe.timings.PHASES`) of ``seconds``."""

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    def rows(self, table: str) -> int:
        return sum(f.rows.get(table, 0) for f in self.files)

    @property
    def runs_created(self) -> int:
        return sum(f.runs_created for f in self.files)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.status == "failed"]

    @property
    def damaged(self) -> list[FileResult]:
        return [f for f in self.files if f.damaged]

    interrupted: bool = False
    """The ingest was stopped (Ctrl-C, SIGINT, SIGTERM): ``files`` are those committed."""
    pending: list[str] = field(default_factory=list)
    """Files not committed when the ingest was stopped (the one being read and the rest)."""


@dataclass
class EnvOptions:
    """Environment given on the command line, applied to every run of an ingest."""

    env: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    tiers: Tiers | None = None
    bench_run: str | None = None
    """Run that benchmark files of this ingest measured (``--run``)."""
    keep_request_text: bool = False
    """Store prompt and output text of request records (``--keep-request-text``)."""
    replace: bool = False
    """Replace the rows of files whose ingested bytes changed in place (``--replace``)."""
    tz: str | None = None
    """Zone of the SGLang stamps of the runs ingested now (``--tz``), over the manifest's."""


