"""Reading a server log into the store, for every engine: the file protocol is here, the
engine brings only its parser (:mod:`logpipe.engines.parsing`).

What is new since the last ingest is read (an appended file goes on where the last one
stopped, with the parser's state; a truncated one continues its line numbers), in blocks
of complete lines whose state-free parse runs ahead on the second core while the one
before is finished in order.  The bulky rows are spooled and loaded once per file, the
launches' ``runs`` rows kept by one :class:`RunBook` as blocks widen them, and it all
happens in the caller's transaction."""

from __future__ import annotations

import hashlib
import io
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from logpipe.engines import Engine
from logpipe.engines.parsing import Chunk, Era, LogParser, RunSeen
from logpipe.ingest.base import IN_LOG, PARSER_VERSION, FileResult, Progress
from logpipe.ingest.changes import (
    BEGINS_WITH,
    TAIL_HASH_BYTES,
    decide,
    head_sha,
    record_log_source,
    stat_key,
)
from logpipe.ingest.group import Shared, taken_runs
from logpipe.ingest.walk import unique_run_name
from logpipe.readers import line_blocks, lines_at, open_binary, skip_to
from logpipe.sources import bench, load
from logpipe.store import Spool, Store, record_tables
from logpipe.store.frames import add_columns

AHEAD = 1
"""Blocks prepared ahead of the one being finished: its parse on the second core while this
one is finished and written on the first.  Two ahead held a third block and its frames for
no time (alternately with two: the EAGLE-3 mix 3.46-3.64 s against 3.50-3.60 s and
516-523 MB against 590-606 MB at the peak, the journald mix 4.33-4.49 s against
4.30-4.56 s and 521-526 against 588-610 MB, the vLLM mix 2.87-2.91 s against 2.85-3.33 s
and 403-432 against 439-473 MB); bigger blocks with one ahead were faster on some mixes
and ~100 MB higher at the peak on others (the docker-launches mix), not kept."""


@dataclass
class Parsed:
    """A whole file parsed from its first line, ahead of its writing
    (:mod:`logpipe.ingest.ahead`)."""

    stat: tuple[int, int, int]
    """Size, mtime and inode of the file parsed."""
    parser: LogParser
    """The parser, with the state it ended in."""
    blocks: list[tuple[bytearray, int, Chunk]]
    """Each block, its first line's number and its rows."""
    last: Chunk | None
    """What :meth:`LogParser.end` gave."""


def parse_whole(path: Path, stat: os.stat_result, engine: Engine,
                keep_text: bool) -> Parsed:
    """Parse all of a (small) file as :func:`read_log` parses a new one, without a store."""
    parser = _new_parser(engine, None, stat, keep_text)
    with open_binary(path) as fh:
        blocks = list(_chunks(fh, parser, None))
    return Parsed(stat_key(stat), parser, blocks, parser.end())


def _new_parser(engine: Engine, state_json: str | None, stat: os.stat_result,
                keep_text: bool) -> LogParser:
    fallback_date = datetime.fromtimestamp(stat.st_mtime).date().isoformat()
    parser: LogParser = load(engine.log_parser)(state_json, fallback_date, keep_text)
    return parser


def read_log(store: Store, path: Path, key: str, kind: str, head: bytes, engine: Engine,
             progress: Progress | None, keep_text: bool = False,
             replace: bool = False, parsed: Parsed | None = None,
             shared: Shared | None = None, unknown: bool = False) -> FileResult:
    """Read what is new in one server log of ``engine`` (the caller's transaction); the
    caller has seen that its size, mtime or inode is not what its ``sources`` row says.
    ``parsed``: the file as parsed ahead, used when it is read from its start and is still
    the file parsed.  ``shared``: the file is one of a group written in one transaction;
    its rows are held with the group's (until ``shared.load()``).  ``unknown``: the
    caller knows that the store has no row for ``key`` (nor runs)."""
    stat = path.stat()
    head_hash = head_sha(head)
    status, existing, detail = decide(store, path, key, stat, head_hash, replace, unknown)
    if status == "new" and unknown:
        store.new_source_id(key, defer=shared is not None)
    if status in ("duplicate", "changed"):
        return FileResult(key, status, kind=kind, detail=detail)
    if parsed is not None and (existing is not None or parsed.stat != stat_key(stat)):
        parsed = None

    hasher = hashlib.sha256()
    previous_sha: str | None = None
    offset = 0
    state_json = existing["state"] if existing is not None else None
    generations = int(existing.get("generations") or 0) if existing else 0
    parser = (parsed.parser if parsed is not None
              else _new_parser(engine, state_json, stat, keep_text))
    fh = open_binary(path) if parsed is None else io.BytesIO()
    try:
        if existing is not None:
            if status == "truncated":  # the new content continues the old line numbers
                generations += 1
            else:
                offset = int(existing["bytes_ingested"] or 0)
                previous_sha = existing["sha256"]
                skip_to(fh, path, offset)
        res = FileResult(key, status, kind=kind)
        if detail and detail.startswith(BEGINS_WITH):  # (the copies test reads both)
            res.begins_with = detail[len(BEGINS_WITH):]
        runs = RunBook(store, path, key, engine.name, parser, head,
                       shared,
                       known=existing is not None or not unknown)
        rejected = int(existing["rejected"] or 0) if existing else 0
        noise = int(existing["noise_lines"] or 0) if existing else 0
        lines_before = 0 if parsed is not None else parser.lines
        tail: bytes | bytearray = b""
        if progress and offset:
            progress(min(offset, stat.st_size))
        consoles = ConsoleSummaries()
        # (a small file parsed ahead: no thread nor worker started for it; the parser's
        # workers end after the threads that prepare blocks for them)
        with (Spool(store) if shared is None else nullcontext(shared.spool)) as spool, \
                (parser.workers() if parsed is None else nullcontext(None)), \
                (ThreadPoolExecutor(max_workers=AHEAD) if parsed is None
                 else nullcontext(None)) as ahead, \
                (ThreadPoolExecutor(max_workers=1) if parsed is None
                 else nullcontext(None)) as hashing:
            for block, first_line_no, chunk in (
                    _chunks(fh, parser, ahead) if parsed is None else parsed.blocks):
                if hashing is not None:
                    hashing.submit(hasher.update, block)  # in order, off the main thread
                else:
                    hasher.update(block)
                tail = (block[-TAIL_HASH_BYTES:] if len(block) >= TAIL_HASH_BYTES
                        else (tail + block)[-TAIL_HASH_BYTES:])
                offset += len(block)
                consoles.feed(block, first_line_no, search=chunk.may_hold_console)
                with located(first_line_no, block):
                    rejected, noise = _write(store, key, chunk, parser, runs, res, spool,
                                             rejected, noise, shared is not None)
                if shared is None:
                    runs.flush()  # (a file of many launches: their facts not all held)
                if progress:
                    progress(len(block))
            last = parser.end() if parsed is None else parsed.last
            if last is not None:
                rejected, noise = _write(store, key, last, parser, runs, res, spool,
                                         rejected, noise, shared is not None)
            runs.flush()
            if shared is None:
                spool.load()
        if existing is None and runs.created:
            reason = parser.quotation(path, res.rows, noise)
            if reason is not None:
                if shared is not None:
                    shared.load()  # the rows of the runs taken back are in their tables
                rejected += _unmake_quoted_runs(store, path, key, runs, res, reason)
        if shared is not None and consoles.pending:
            shared.write_runs()  # (the summaries are linked to the runs they follow)
        n = consoles.write(store, key)
        if n:
            res.rows["bench_results"] = n
        res.lines = parser.lines - lines_before
        res.noise = noise - (int(existing["noise_lines"] or 0) if existing else 0)
    finally:
        fh.close()
    if res.lines == 0 and status == "appended":
        res.status = "unchanged"
    record_log_source(store, key, path, kind=kind, stat=stat, existing=existing,
                      status=status, head=head, tail=tail, offset=offset, hasher=hasher,
                      previous_sha=previous_sha, lines=parser.lines, new_lines=res.lines,
                      rejected=rejected, noise=noise, state_json=parser.state_json(),
                      generations=generations, parser_version=PARSER_VERSION)
    res.read_after = lines_before  # folded into the kept ranges by the ingest's last step
    res.runs_created = runs.created
    return res


def _chunks(fh: BinaryIO, parser: LogParser, ahead: ThreadPoolExecutor | None
            ) -> Iterator[tuple[bytearray, int, Chunk]]:
    """Blocks of complete lines, each with its first line's number and its rows (parsed
    in order: ``parser`` follows the file).  With ``ahead``, each block's state-free parse
    is started on it: the next blocks are prepared while the caller writes this one (at
    most ``AHEAD + 1`` blocks are in memory)."""
    pending: deque[tuple[bytearray, Future[Any]]] = deque()
    line_no = parser.lines + 1

    def finished(block: bytearray, prepared: Future[Any]) -> tuple[bytearray, int, Chunk]:
        first_line_no = parser.lines + 1
        with located(first_line_no, block):
            return block, first_line_no, parser.finish(prepared.result())

    for block in line_blocks(fh, lambda: parser.block_bytes):
        if ahead is None:
            first_line_no = parser.lines + 1
            with located(first_line_no, block):
                chunk = parser.finish(parser.prepare(block, line_no))
            yield block, first_line_no, chunk
            line_no += parser.count_lines(block)
            continue
        pending.append((block, ahead.submit(parser.prepare, block, line_no)))
        line_no += parser.count_lines(block)
        if len(pending) > AHEAD:
            yield finished(*pending.popleft())
    while pending:
        yield finished(*pending.popleft())


@contextmanager
def located(first_line_no: int, block: bytes | bytearray) -> Iterator[None]:
    """An exception raised inside names the block's lines (a note, which the file's
    failure shows): a reader's failure outside the line readers, which reject a line
    instead, is then found in the file."""
    try:
        yield
    except Exception as exc:
        last = first_line_no + max(block.count(b"\n"), 1) - 1
        exc.add_note(f"in the block of lines {first_line_no}-{last}")
        raise


def _write(store: Store, key: str, chunk: Chunk, parser: LogParser, runs: RunBook,
           res: FileResult, spool: Spool, rejected: int, noise: int,
           hold_all: bool = False) -> tuple[int, int]:
    """Write one block's rows: the bulky ones (all with ``hold_all``) to ``spool`` (loaded
    once at the end of the file, or of its group), the few others straight into their
    tables.  Returns the file's rejected and noise lines so far."""
    for seen in chunk.runs:
        runs.observe(seen)
    mapping = runs.ids()

    for table, frame in chunk.tables.items():
        if frame.height == 0:
            res.rows.setdefault(table, 0)
            continue
        frame = add_columns(frame, [_run_ids(frame["run_seq"], mapping)])
        linked = {"link_method": IN_LOG} if table in parser.linked else {}
        n = (spool.add if hold_all or table in parser.spooled else store.insert)(
            table, frame, source_path=key, **linked)
        res.rows[table] = res.rows.get(table, 0) + n
        if table == "rejects":
            rejected += n
    if chunk.continuation:  # a traceback's lines after its first, cut by the block
        if hold_all:
            spool.load(["events"])  # (the event it continues is in its table)
        store.append_to_last_error(key, chunk.continuation)
    res.unread += chunk.unread
    return rejected, noise + chunk.noise


SMALL_FRAME = 4096
"""Rows up to which a column is mapped in Python: a polars expression costs ~0.1-0.3 ms
whatever the rows (a small file's frames are a few dozen rows, one a table)."""


def _run_ids(seqs: pl.Series, mapping: dict[int, str]) -> pl.Series:
    """The ``run_id`` of each row's ``run_seq`` (null where the run has none)."""
    if seqs.len() and not seqs.null_count() and seqs.min() == seqs.max():
        # the usual block lies in one run: a constant, not a lookup per row
        return pl.Series("run_id", [mapping.get(seqs[0])], pl.String).new_from_index(
            0, seqs.len())
    if seqs.len() <= SMALL_FRAME:
        return pl.Series("run_id", [mapping.get(s) for s in seqs.to_list()], pl.String)
    return seqs.replace_strict(mapping, return_dtype=pl.String, default=None).alias("run_id")


def _unmake_quoted_runs(store: Store, path: Path, key: str, runs: RunBook,
                        res: FileResult, reason: str) -> int:
    """A notes file quoting an engine's launch line became a run of its own, spanning
    the months from its mtime and taking the benchmarks of its folder.  Its runs are
    taken back and its record lines go to ``rejects`` with the parser's reason.  Returns
    the rejects written."""
    lines = store.unmake_runs(list(runs.ids().values()))
    raw = {no: text.decode("utf-8", errors="replace").rstrip("\r")[:2000]
           for no, text in lines_at(path, set(lines)).items()}
    store.insert("rejects", pl.DataFrame(
        {"line_no": lines, "run_id": [None] * len(lines), "reason": [reason] * len(lines),
         "raw": [raw.get(n) for n in lines]},
        schema={"line_no": pl.Int64, "run_id": pl.String, "reason": pl.String,
                "raw": pl.String}), source_path=key)
    for table in record_tables():
        res.rows.pop(table, None)
    res.rows["rejects"] = res.rows.get("rejects", 0) + len(lines)
    runs.forget()
    return len(lines)


class ConsoleSummaries:
    """Benchmark console summaries printed into a server log (a run script that sent both
    to one file): found by their banner in the blocks as they stream by, written to
    ``bench_results`` linked to the run whose lines they follow."""

    BANNER = bench.CONSOLE_BANNER.encode()
    WINDOW = 64 * 1024

    def __init__(self) -> None:
        self.found: list[tuple[int, bytes]] = []
        self._open: tuple[int, bytearray] | None = None

    def feed(self, block: bytes | bytearray, first_line_no: int, search: bool = True) -> None:
        """``search=False``: the block holds no banner (the parser read every line), only a
        table cut by the last block is read."""
        if self._open is not None:  # a table cut by the block boundary
            line_no, text = self._open
            text += block[:self.WINDOW]
            self.found.append((line_no, bytes(text)))
            self._open = None
        if not search:
            return
        pos = block.find(self.BANNER)
        while pos >= 0:
            start = block.rfind(b"\n", 0, pos) + 1
            line_no = first_line_no + block.count(b"\n", 0, start)
            chunk = block[start:start + self.WINDOW]
            if len(chunk) < self.WINDOW and not chunk.rstrip().endswith(b"="):
                self._open = (line_no, bytearray(chunk))
            else:
                self.found.append((line_no, bytes(chunk)))
            pos = block.find(self.BANNER, pos + len(self.BANNER))

    @property
    def pending(self) -> bool:
        """Whether a summary was found (:meth:`write` has rows to write)."""
        return bool(self.found) or self._open is not None

    def write(self, store: Store, key: str) -> int:
        if self._open is not None:
            self.found.append((self._open[0], bytes(self._open[1])))
            self._open = None
        rows = []
        for line_no, data in self.found:
            for start, row in bench.parse_console(data.decode("utf-8", errors="replace"))[:1]:
                rows.append({"line_no": line_no + start - 1, **row})
        if not rows:
            return 0
        frame = pl.DataFrame(rows, infer_schema_length=None)
        runs = store.all("SELECT run_id, first_line FROM runs WHERE source_path = ? "
                         "ORDER BY first_line", [key])

        def run_of(line: int) -> str | None:
            before = [rid for rid, first in runs if first is not None and first <= line]
            return before[-1] if before else (runs[0][0] if runs else None)

        frame = frame.with_columns(
            pl.Series("run_id", [run_of(n) for n in frame["line_no"]], dtype=pl.String),
            pl.lit(IN_LOG).alias("link_method"))
        return store.insert("bench_results", frame, source_path=key)


class RunBook:
    """Creates and updates the ``runs`` rows of one file as its lines stream by.

    A known run's time span and era are kept here as blocks widen them, and what its
    launch lines say, and all are written once by :meth:`flush` (a query and an update per
    run per block cost ~1 s per GB)."""

    def __init__(self, store: Store, path: Path, key: str, engine: str,
                 parser: LogParser, head: bytes, shared: Shared | None = None,
                 known: bool = True) -> None:
        self.store = store
        self.shared = shared
        """The group of files in this transaction: the names in the database as it keeps
        them, and the runs it writes at its end (None: read and written here)."""
        self._names: list[str] = []
        self.path = path
        self.key = key
        self.engine = engine
        self.parser = parser
        self.created = 0
        self._ids: dict[int, str] = {}
        self._eras: dict[str, Era] = {}
        for seq, rid, label, mask in store.all(
                "SELECT run_seq, run_id, format_era, era_mask FROM runs "
                "WHERE source_path = ?", [key]) if known else ():
            self._ids[int(seq)] = str(rid)
            self._eras[str(rid)] = (label, None if mask is None else int(mask))
        self._spans: dict[str, tuple[Any, Any]] = {}
        self._new: list[tuple[Any, ...]] = []
        """Runs first seen since the last flush, inserted by it in one statement."""
        self._facts: list[tuple[str, dict[str, Any]]] = []
        self._taken: tuple[set[str], set[str]] | None = None
        """Every run name and id in the database, those given here included."""
        self._given: list[str] = []
        """The ids given to the runs made here."""
        self._first = first_line_of(head)

    def ids(self) -> dict[int, str]:
        return dict(self._ids)

    def forget(self) -> None:
        """The runs made so far were taken back (a quotation): their names and ids are
        free."""
        self._ids.clear()
        self.created = 0
        if self._taken is not None:
            self._taken[0].difference_update(self._names)
            self._taken[1].difference_update(self._given)
        self._names.clear()
        self._given.clear()

    def _taken_runs(self) -> tuple[set[str], set[str]]:
        if self._taken is None:
            self._taken = (self.shared.taken() if self.shared is not None else
                           taken_runs(self.store))
        return self._taken

    def _new_name(self, seq: int) -> str:
        name = unique_run_name(self.path, seq, self._taken_runs()[0])
        self._names.append(name)
        return name

    def _new_id(self, seq: int, first_line: int | None) -> str:
        taken = self._taken_runs()[1]
        rid, k = run_id(self.key, self._first, seq, first_line), 1
        while rid in taken:  # (a new file where a moved one's runs still hold their ids)
            k += 1
            rid = run_id(self.key, self._first, seq, first_line, k)
        taken.add(rid)
        self._given.append(rid)
        return rid

    def observe(self, seen: RunSeen) -> None:
        seq = seen.seq
        if seq not in self._ids:
            rid = self._new_id(seq, seen.first_line)
            label, mask = self.parser.era(None, seen)
            self._new.append((rid, self._new_name(seq), self.key, seq, seen.first_line,
                              seen.first_ts, seen.last_ts, label, mask))
            self._ids[seq] = rid
            self._eras[rid] = (label, mask)
            self.created += 1
        else:
            rid = self._ids[seq]
            self._eras[rid] = self.parser.era(self._eras.get(rid), seen)
            first, last = self._spans.get(rid, (None, None))
            self._spans[rid] = (_least(first, seen.first_ts), _greatest(last, seen.last_ts))
        if seen.facts:
            self._facts.append((rid, seen.facts))

    def flush(self) -> None:
        """Write the runs first seen, then the spans and eras that blocks widened, then
        what the launch lines said, since the last flush."""
        to = self.shared if self.shared is not None else self.store  # (a group: at its end)
        facts = to.add_runs(self._new, engine=self.engine, facts=self._facts)
        self._new.clear()
        for rid, (first, last) in self._spans.items():
            label, mask = self._eras[rid]
            to.widen_run(rid, first, last, label, mask)
        self._spans.clear()
        to.update_runs(facts)
        self._facts.clear()


FIRST_LINE_BYTES = 4096
"""Bytes of a file's first line that its runs' ids hash (:func:`first_line_of`)."""


def first_line_of(head: bytes) -> bytes:
    """A file's first line (up to :data:`FIRST_LINE_BYTES`) from its head."""
    end = head.find(b"\n", 0, FIRST_LINE_BYTES)
    return head[:end if end >= 0 else FIRST_LINE_BYTES]


def run_id(key: str, first: bytes, seq: int, first_line: int | None, k: int = 1) -> str:
    """A run's id: a hash of its file (its path and its first line ``first``, which tells
    a new file at a path from the one moved away), its number in the file and its first
    line's number; ``k`` > 1: the ``k``-th choice, where the first is taken.  Every read
    of the file finds these alike however much of the file it saw (a live log read in
    parts, blocks cut elsewhere).  Not its first stamp: a run's lines may carry two clocks
    (docker's stamp alone on some lines, the engine's on the others), and the earliest
    stamp among the lines one read saw depends on which lines it saw."""
    h = hashlib.sha256(f"{key}\n{seq}\n{first_line}\n".encode())
    h.update(first)
    if k > 1:
        h.update(f"\n{k}".encode())
    return h.hexdigest()[:12]


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _greatest(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)
