"""Small new server logs parsed ahead, on the second core, while the files before them
are written.

A folder of many small logs is bound by per-file work, not by bytes: a small file's parse
(its one block prepared and finished, ~30 ms of fixed polars work whatever its lines) and
its writes (~20 statements) used to run one after the other, the second core idle.  Here
workers (threads, or processes for many files: :mod:`logpipe.ingest.workers`) parse the
next files while the ingest writes this one.

Only what cannot depend on the store is done ahead: which kind a file is and, for a plain
server log the store has no row for, of at most
:data:`~logpipe.ingest.group.SMALL_FILE_BYTES`, its whole parse from its first line with a
fresh parser.  The ingest uses that parse only when it sees the same kind, its own
decision says the file is read from the start (``new`` or ``rewritten``) and the file's
size, mtime and inode are those the worker saw; otherwise (a moved file, an append, a
file changed meanwhile) it reads the file itself, as it always did.  The rows are those of
the same parser code on the same bytes: equal by construction, and pinned equal by the
tests.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from logpipe.engines import engine_for_kind, engines
from logpipe.ingest.changes import head_sha
from logpipe.ingest.group import SMALL_FILE_BYTES
from logpipe.ingest.workers import Workers
from logpipe.readers import COMPRESSED_SUFFIXES, is_prose, read_head
from logpipe.sources import HEAD_BYTES, Source, bench, deep_window, detect

AHEAD_FILES = 16
"""Files parsed ahead of the one being written (their rows are held in memory: small
files, ~35 KB of rows each); 0: none, every file read by the ingest itself.  At 4 the
workers waited for the writer at the end of each group (1,000 small files: 27.3 s against
23.1 s at 16, one worker process then; 32 gave no more)."""
WORKERS = 2
"""Worker threads or processes (1,000 small files: 11.8-12.3 s with two processes,
13.5-13.8 s with three, on two cores)."""
PROCESS_FILES = 64
"""Files to look at from which the workers are processes rather than threads (a process
starts in ~1 s: the imports of polars and the parsers)."""


def detect_file(path: Path) -> tuple[bytes, Source | None]:
    """The head of ``path`` and the kind it is (None: not a recognised format).  Raises
    OSError when it cannot be read."""
    head = read_head(path, HEAD_BYTES)
    text_head = head.decode("utf-8", errors="replace")
    source = detect(text_head)
    if source is None:
        # a log behind a long preamble (pip output, an environment dump, one config line
        # longer than the head): look for a record marker further on, bounded
        found = deep_window(path)
        if found is not None:
            source = detect(found[1])
    if source is not None and source.name == bench.CONSOLE.name:
        # a run script that sent the server's output and bench_serving's summary to one
        # file: read it as the server log it is; the summaries come with it
        source = next((k for e in engines() for k in e.log_kinds
                       if (k.serves or k.sniff)(text_head)), source)
    return head, source


@dataclass
class Ahead:
    """What a worker found of one file the store has no row for."""

    kind: str | None
    """The kind the worker saw (the ingest uses ``parsed`` only when it sees the same)."""
    parsed: object | None = None
    """:class:`logpipe.ingest.logfile.Parsed`: the whole file parsed from its start
    (None: not parsed ahead, a copy, a moved file or a large one)."""


def look_in_worker(known_heads: set[str], path: Path, keep_text: bool) -> Ahead:
    """:func:`_look` in a worker process (:mod:`logpipe.ingest.workers`)."""
    return _look(path, keep_text, known_heads)


def _look(path: Path, keep_text: bool, known_heads: set[str]) -> Ahead:
    head, source = detect_file(path)
    engine = engine_for_kind(source.name) if source is not None else None
    if source is None or engine is None:
        return Ahead(source.name if source is not None else None)
    stat = path.stat()
    if stat.st_size > SMALL_FILE_BYTES or head_sha(head) in known_heads:
        return Ahead(source.name)  # (a copy or a moved file: the ingest tells which)
    from logpipe.ingest.logfile import parse_whole

    return Ahead(source.name, parse_whole(path, stat, engine, keep_text))


class ParseAhead:
    """The workers: :meth:`take` the ``Ahead`` of the files in the order given, each file
    started :data:`AHEAD_FILES` before it is taken.  Files in ``known`` (paths the store
    has a row for) are not looked at: most are unchanged, and a stat tells; nor parsed
    those whose head is one of ``known_heads`` (heads of files and generations the store
    has read: a copy or a moved file, which the ingest tells apart).

    The workers are threads for a few files; for :data:`PROCESS_FILES` or more, processes
    (a parse is mostly Python and polars calls on small frames, which hold the GIL: two
    threads beside the writer use ~1.3 cores of two): :mod:`logpipe.ingest.workers`.
    Their results come back pickled (~35 KB, ~0.5 ms a small file)."""

    def __init__(self, paths: list[Path], known: set[str], known_heads: set[str],
                 keep_text: bool) -> None:
        # (a note or an archive is read through its own stream, which reports damage to
        # the reading that meets it: the ingest's own)
        self._todo = deque((i, p) for i, p in enumerate(paths) if str(p) not in known
                           and not is_prose(p)
                           and not p.name.lower().endswith(COMPRESSED_SUFFIXES))
        self._keep_text = keep_text
        self._heads = known_heads
        self._processes = len(self._todo) >= PROCESS_FILES
        self._pool: ThreadPoolExecutor | Workers | None = None
        self._started: dict[int, Future[Ahead]] = {}

    def take(self, index: int) -> Ahead | None:
        """What was found of the ``index``-th file (None: not looked at, or the look
        failed: the ingest reads it itself and meets the failure there)."""
        if AHEAD_FILES <= 0:
            return None  # (none: every file read by the ingest, one after another)
        self._start(index)
        future = self._started.pop(index, None)
        self._start(index + 1)  # the next ones start while this one is written
        if future is None:
            return None
        try:
            return future.result()
        except Exception:  # noqa: BLE001 - the ingest's own reading reports it
            return None

    def _start(self, index: int) -> None:
        while self._todo and self._todo[0][0] < index:
            self._todo.popleft()  # (taken without a look: not started)
        while self._todo and len(self._started) < AHEAD_FILES + 1 \
                and self._todo[0][0] <= index + AHEAD_FILES:
            i, path = self._todo.popleft()
            pool = self._executor()
            self._started[i] = (
                pool.submit(path, self._keep_text) if isinstance(pool, Workers)
                else pool.submit(_look, path, self._keep_text, self._heads))

    def _executor(self) -> ThreadPoolExecutor | Workers:
        if self._pool is None:
            if self._processes:
                try:
                    self._pool = Workers(WORKERS, "logpipe.ingest.ahead:look_in_worker",
                                         self._heads)
                except OSError:  # (no process to be had: threads)
                    self._processes = False
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=WORKERS,
                                                thread_name_prefix="logpipe-ahead")
        return self._pool

    def close(self) -> None:
        """Stop: files not started are dropped, those being parsed end (small), and
        worker processes exit with them."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._started.clear()
        self._todo.clear()
