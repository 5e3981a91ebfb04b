"""Small new server logs parsed ahead, on the second core, while the files before them
are written.

A folder of many small logs is bound by per-file work, not by bytes: a small file's parse
(its one block prepared and finished, ~30 ms of fixed polars work whatever its lines) and
its writes (~20 statements) used to run one after the other, the second core idle.  Here
workers (threads, or processes for many files: :mod:`logpipe.workers`) parse the
next files while the ingest writes this one, :data:`BATCH_FILES` a request, and the new
small logs of a request that are of one engine and one date are parsed as one block
where the engine can (SGLang: 1,000 small files 12.2 s -> 5.2 s), each file's rows,
runs and state those of its own parse (pinned by ``tests/test_parse_files.py``).

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

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from logpipe.engines import Engine, engine_for_kind, engines
from logpipe.ingest.changes import head_sha, stat_key
from logpipe.ingest.group import SMALL_FILE_BYTES
from logpipe.readers import COMPRESSED_SUFFIXES, is_prose, open_binary, read_head
from logpipe.sources import HEAD_BYTES, Source, bench, deep_window, detect, load
from logpipe.workers import Workers

AHEAD_FILES = 144
"""Files parsed ahead of the one being written (their rows are held in memory: small
files, ~35 KB of rows each); 0: none, every file read by the ingest itself.  At 4 the
workers waited for the writer at the end of each group (1,000 small files, one file a
request: 27.3 s against 23.1 s at 16, one worker process then; 32 gave no more).  With
files parsed together (:data:`BATCH_FILES`), 1,000 small files took 5.0-5.2 s at 48 ahead
in requests of 16, 4.2-4.6 s at 144 in requests of 48."""
AHEAD_BYTES = 32 * 1024 * 1024
"""Bytes of the files parsed ahead at most (a file's rows are held until it is written:
a folder of 4 MB logs is not parsed 144 files ahead)."""
BATCH_FILES = 48
"""Files a worker is given at once: new small logs of one engine among them are parsed as
one block where the engine can (:attr:`logpipe.engines.Engine.log_files_parser`): 100 small
SGLang logs cost 6.4 ms of CPU a file parsed 10 together, 1.7 ms 50 together."""
TOGETHER_BYTES = 256 * 1024
"""A log parsed together with others is at most this big (above it, its bytes cost more
than the fixed cost of a parse it would share)."""
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


def look_in_worker(known_heads: set[str], paths: list[Path], keep_text: bool
                   ) -> list[Ahead | None]:
    """:func:`_look_many` in a worker process (:mod:`logpipe.workers`)."""
    return _look_many(paths, keep_text, known_heads)


def _look_many(paths: list[Path], keep_text: bool, known_heads: set[str]
               ) -> list[Ahead | None]:
    """:func:`_look` of each path (None where the look failed: the ingest reads the file
    itself and meets the failure there), the new small logs of an engine that can parse
    several at once parsed together, by the date a time-only stamp takes."""
    out: list[Ahead | None] = []
    together: dict[tuple[str, str], list[tuple[int, os.stat_result, bytearray]]] = {}
    for path in paths:
        try:
            found = _look(path, keep_text, known_heads, defer=True)
        except Exception:  # noqa: BLE001 - the ingest's own reading reports it
            found = None
        if isinstance(found, _Deferred):
            together.setdefault((found.engine.name, found.fallback_date), []).append(
                (len(out), found.stat, found.block))
            found = found.ahead
        out.append(found)
    for (name, fallback_date), members in together.items():
        engine = next(e for e in engines() if e.name == name)
        assert engine.log_files_parser is not None
        try:
            parsed = load(engine.log_files_parser)(
                [block for _, _, block in members], fallback_date, keep_text)
        except Exception:  # noqa: BLE001 - (ValueError: not together) each one alone
            parsed = None
        for k, (i, stat, block) in enumerate(members):
            ahead = out[i]
            assert ahead is not None
            if parsed is not None:
                from logpipe.ingest.logfile import Parsed

                parser, chunk = parsed[k]
                ahead.parsed = Parsed(stat_key(stat), parser, [(block, 1, chunk)],
                                      parser.end())
            else:
                try:
                    ahead.parsed = _parse_alone(paths[i], stat, engine, keep_text)
                except Exception:  # noqa: BLE001
                    out[i] = None
    return out


@dataclass
class _Deferred:
    """A new small log left to be parsed together with others."""

    ahead: Ahead
    engine: Engine
    stat: os.stat_result
    block: bytearray
    fallback_date: str


def _look(path: Path, keep_text: bool, known_heads: set[str], defer: bool = False
          ) -> Ahead | _Deferred:
    head, source = detect_file(path)
    engine = engine_for_kind(source.name) if source is not None else None
    if source is None or engine is None:
        return Ahead(source.name if source is not None else None)
    stat = path.stat()
    if stat.st_size > SMALL_FILE_BYTES or head_sha(head) in known_heads:
        return Ahead(source.name)  # (a copy or a moved file: the ingest tells which)
    if defer and engine.log_files_parser is not None and stat.st_size <= TOGETHER_BYTES:
        from logpipe.ingest import logfile

        with open_binary(path) as fh:  # (blocks as the ingest cuts them)
            blocks = list(logfile.line_blocks(fh, TOGETHER_BYTES + 1))
        if len(blocks) == 1:  # (no complete line, more than one block, grown: alone)
            return _Deferred(Ahead(source.name), engine, stat, blocks[0],
                             datetime.fromtimestamp(stat.st_mtime).date().isoformat())
    return Ahead(source.name, _parse_alone(path, stat, engine, keep_text))


def _parse_alone(path: Path, stat: os.stat_result, engine: Engine, keep_text: bool
                 ) -> object:
    from logpipe.ingest.logfile import parse_whole

    return parse_whole(path, stat, engine, keep_text)


class ParseAhead:
    """The workers: :meth:`take` the ``Ahead`` of the files in the order given, each file
    started :data:`AHEAD_FILES` before it is taken.  Files in ``known`` (paths the store
    has a row for) are not looked at: most are unchanged, and a stat tells; nor parsed
    those whose head is one of ``known_heads`` (heads of files and generations the store
    has read: a copy or a moved file, which the ingest tells apart).

    The workers are threads for a few files; for :data:`PROCESS_FILES` or more, processes
    (a parse is mostly Python and polars calls on small frames, which hold the GIL: two
    threads beside the writer use ~1.3 cores of two): :mod:`logpipe.workers`.
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
        self._started: dict[int, tuple[Future[list[Ahead | None]], int, int]] = {}
        """index -> (its request, its place in the request's answer, its bytes)"""
        self._held = 0
        """Bytes of the files started and not yet taken."""

    def take(self, index: int) -> Ahead | None:
        """What was found of the ``index``-th file (None: not looked at, or the look
        failed: the ingest reads it itself and meets the failure there)."""
        if AHEAD_FILES <= 0:
            return None  # (none: every file read by the ingest, one after another)
        for skipped in [i for i in self._started if i < index]:
            self._held -= self._started.pop(skipped)[2]  # (passed without being taken)
        self._start(index)
        started = self._started.pop(index, None)
        if started is not None:
            self._held -= started[2]
        self._start(index + 1)  # the next ones start while this one is written
        if started is None:
            return None
        future, k, _ = started
        try:
            return future.result()[k]
        except Exception:  # noqa: BLE001 - the ingest's own reading reports it
            return None

    def _start(self, index: int) -> None:
        """Start the files up to :data:`AHEAD_FILES` past ``index`` and
        :data:`AHEAD_BYTES` of them, in requests of up to :data:`BATCH_FILES` consecutive
        files."""
        while self._todo and self._todo[0][0] < index:
            self._todo.popleft()  # (taken without a look: not started)
        while self._todo and len(self._started) <= AHEAD_FILES \
                and self._todo[0][0] <= index + AHEAD_FILES \
                and (self._held < AHEAD_BYTES or not self._started):
            batch: list[tuple[int, Path, int]] = []
            while self._todo and len(batch) < BATCH_FILES \
                    and self._todo[0][0] <= index + AHEAD_FILES + BATCH_FILES \
                    and (self._held < AHEAD_BYTES or not batch):
                i, path = self._todo.popleft()
                size = _size(path)
                self._held += size
                batch.append((i, path, size))
            paths = [path for _, path, _ in batch]
            pool = self._executor()
            future = (pool.submit(paths, self._keep_text) if isinstance(pool, Workers)
                      else pool.submit(_look_many, paths, self._keep_text, self._heads))
            for k, (i, _, size) in enumerate(batch):
                self._started[i] = (future, k, size)

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
        self._held = 0


def _size(path: Path) -> int:
    """The bytes of ``path`` (0 when it cannot be read: the look fails, as the ingest's
    own reading then does)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
