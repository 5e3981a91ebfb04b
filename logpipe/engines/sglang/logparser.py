"""SGLang's server log, block by block, for the ingest's file protocol
(:mod:`logpipe.engines.parsing`): a block's state-free parse (:func:`prepare_block`, the C
fast lane where built) runs ahead on the second core; :meth:`SGLangLogParser.finish`
follows the file (day roll-over, launches, tracebacks across blocks)."""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from logpipe.engines.parsing import Chunk, Era, RunSeen
from logpipe.engines.sglang import era, fastlane
from logpipe.engines.sglang.parser import (
    Files,
    Launch,
    LogState,
    ParsedChunk,
    PreparedChunk,
    finish_chunk,
    prepare_block,
    split_files,
)
from logpipe.engines.sglang.records import is_request
from logpipe.readers import is_prose, read_head
from logpipe.sources.bench import CONSOLE_BANNER

if TYPE_CHECKING:
    from logpipe.workers import Workers

Sent = tuple[list[int], list[int], Future[Any]]
"""A block's slow lines given to the worker: the rows of its request records and of its
event lines, and the future of what the worker reads of them."""

PARSE_BLOCK_BYTES = 16 * 1024 * 1024
"""Bytes per parsed block while the C fast lane takes most lines.  Each block costs fixed
polars work (the parser's expressions are planned per call, whatever the rows), so larger
blocks pay it less often (the 256 MB dp4-journald mix, alternately: 4.7-6.1 s at 16 MB,
5.5-6.3 s at 8 MB), but up to three blocks and their frames are in memory at once: see
:data:`SLOW_BLOCK_BYTES`."""
SLOW_BLOCK_BYTES = 8 * 1024 * 1024
"""Bytes per block once a block's slow lines (those the C lane leaves to the polars parser:
startup, a file of many short launches; every line without the C lane)
were more than :data:`SLOW_SHARE` of it: their frames are many times their size (1 GB
steady log, ``LOGPIPE_FASTLANE=0``: 765 MB peak at 8 MB blocks, 1,704 MB at 32 MB).
Parsed without writing, 16 MB against 8 MB blocks: the 256 MB docker-launches mix 634-649
against 438-440 MB peak, 6.4-7.3 against 6.9-7.9 s; ingested, in alternate runs, 896-917
against 771-779 MB, within the noise in time.  The peak RSS target (1 GB at any size)
decided it."""
SLOW_SHARE = 0.25
"""The share of a block's bytes in slow lines from which the next blocks are
:data:`SLOW_BLOCK_BYTES` (the mixes: 0-1.4% of lines slow on the C-lane mixes, 61% of the
lines and 85% of the bytes on docker launches)."""


RECORDS_FOR_WORKER = 256
"""Request records in a block from which a big file's slow lines are read by a worker
process (:meth:`SGLangLogParser.workers`): a ``Finish:`` line of a few KB is ~80 us of
Python, which the first core, finishing the blocks in order, would otherwise spend (a
file of many short launches holds one every ~5 KB); the lines' text goes to the worker
and their rows come back pickled, a few ms a block."""
EVENTS_FOR_WORKER = 1000
"""Event lines in a block from which they are read by the worker likewise (their attrs
and, for ``server_args``, the arguments: ~20-200 us a line, ~1 ms a ``server_args``)."""
BLOCKS_BEFORE_WORKER = 2
"""Blocks of many slow lines read in process before the worker reads them: it is started
at the last of these (its start, ~0.5 s of CPU beside the blocks' preparation on the
second core, is then not waited for) and pays off over a long file, not over two blocks
(32 MB of docker launches: 3.1-3.2 s without, 3.6-4.0 s with a worker from the first)."""


def record_workers_enabled() -> bool:
    """Whether a big log's slow lines (request records, event lines) may be read by a
    worker process (``LOGPIPE_RECORD_WORKERS=0``: in the ingest's own process, as small
    files' are)."""
    return os.environ.get("LOGPIPE_RECORD_WORKERS", "1") != "0"


class SGLangLogParser:
    """SGLang's lines, block by block (:class:`logpipe.engines.parsing.LogParser`)."""

    spooled = frozenset({"batches", "http_requests", "line_prefixes"})
    linked = frozenset({"request_metrics", "phase_timings"})

    def __init__(self, state_json: str | None, fallback_date: str,
                 keep_text: bool = False) -> None:
        self.state = LogState.from_json(state_json)
        self.fallback_date = fallback_date
        self.keep_text = keep_text
        self._slow = not fastlane.enabled()
        """The last block prepared was mostly slow lines (:data:`SLOW_SHARE`)."""
        _reuse_freed_blocks()
        self._may_use_workers = False
        self._pool: Workers | None = None
        self._pool_lock = threading.Lock()
        self._pool_failed = False
        self._slow_blocks = 0

    def __getstate__(self) -> dict[str, Any]:
        """A small file's parser comes back pickled from the process that parsed it:
        without its worker pool (none: small files are parsed whole) nor the lock."""
        state = dict(self.__dict__)
        state.update(_pool=None, _pool_lock=None, _may_use_workers=False)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pool_lock = threading.Lock()

    @property
    def lines(self) -> int:
        return self.state.lines

    def count_lines(self, block: bytes | bytearray) -> int:
        return fastlane.count_lines(block)

    @property
    def block_bytes(self) -> int:
        return SLOW_BLOCK_BYTES if self._slow else PARSE_BLOCK_BYTES

    def prepare(self, block: bytes | bytearray, first_line_no: int
                ) -> tuple[PreparedChunk, Sent | None]:
        prepared = prepare_block(block, first_line_no, self.fallback_date)
        if prepared.fast is not None:  # (blocks are prepared on threads: the latest says)
            self._slow = len(prepared.fast.slow_text) > SLOW_SHARE * len(block)
        return prepared, self._send_slow_lines(prepared)

    def finish(self, prepared_: tuple[PreparedChunk, Sent | None]) -> Chunk:
        prepared, sent = prepared_
        if sent is not None:  # (the blocks are finished in order: the worker's in its)
            requests, events, future = sent
            try:
                read_requests, read_events = future.result()
                prepared.requests = dict(zip(requests, read_requests, strict=True))
                prepared.events = dict(zip(events, read_events, strict=True))
            except Exception:  # noqa: BLE001 - the worker failed: read here, as without
                prepared.requests = prepared.events = None
        chunk = finish_chunk(prepared, self.state, self.keep_text)
        return _rows(chunk, may_hold_console=prepared.fast is None
                     or CONSOLE_BANNER in prepared.fast.slow_text)

    def end(self) -> Chunk | None:
        return None

    @contextmanager
    def workers(self) -> Iterator[None]:
        """While the ingest reads a big file block by block: the request records and
        event lines of blocks with many (:data:`RECORDS_FOR_WORKER`,
        :data:`EVENTS_FOR_WORKER`) are read by a worker process after the first
        :data:`BLOCKS_BEFORE_WORKER` such blocks (started at the last of those, ended on
        exit; the rows are those this process would read).  Small files, parsed whole,
        never start one."""
        self._may_use_workers = record_workers_enabled()
        try:
            yield
        finally:
            self._may_use_workers = False
            with self._pool_lock:
                pool, self._pool = self._pool, None
            if pool is not None:  # (what it still reads, no block waits for: not waited)
                pool.shutdown(wait=False)

    def _send_slow_lines(self, prepared: PreparedChunk) -> Sent | None:
        """The block's request records and event lines sent to the worker, or None where
        they are read in :meth:`finish` (few, or no worker)."""
        lines = prepared.lines
        if not self._may_use_workers or self._pool_failed:
            return None
        if "msg" in lines.columns:
            requests = lines.filter(is_request(pl.col("msg"))).select("row", "msg")
            events = lines.filter(pl.col("event_kind").is_not_null()).select(
                "row", "event_kind", "msg")
        else:  # (every line the C lane's)
            requests = pl.DataFrame(schema={"row": pl.UInt32, "msg": pl.String})
            events = pl.DataFrame(schema={"row": pl.UInt32, "event_kind": pl.String,
                                          "msg": pl.String})
        if prepared.fast is not None and prepared.fast.records:  # rows past the slow lines'
            msgs = prepared.fast.records
            requests = pl.concat([requests, pl.DataFrame({
                "row": pl.int_range(lines.height, lines.height + len(msgs), dtype=pl.UInt32,
                                    eager=True),
                "msg": pl.Series(msgs, dtype=pl.String)})])
        if requests.height < RECORDS_FOR_WORKER and events.height < EVENTS_FOR_WORKER:
            return None
        with self._pool_lock:
            self._slow_blocks += 1
            early = self._slow_blocks <= BLOCKS_BEFORE_WORKER
            start = self._slow_blocks == BLOCKS_BEFORE_WORKER
        if early:
            if start:
                self._worker_pool()  # (started now, used from the next such block)
            return None
        pool = self._worker_pool()
        if pool is None:
            return None
        return (requests["row"].to_list(), events["row"].to_list(),
                pool.submit(requests["msg"].to_list(),
                            list(zip(events["event_kind"], events["msg"], strict=True)),
                            self.keep_text))

    def _worker_pool(self) -> Workers | None:
        with self._pool_lock:  # (blocks are prepared on several threads)
            if self._pool is None and not self._pool_failed and self._may_use_workers:
                from logpipe.workers import Workers

                try:
                    self._pool = Workers(
                        1, "logpipe.engines.sglang.slowlines:read_slow_lines", None)
                except OSError:
                    self._pool_failed = True
            return self._pool

    def state_json(self) -> str:
        return self.state.to_json()

    def era(self, previous: Era | None, seen: RunSeen) -> Era:
        start = previous[1] if previous is not None and previous[1] is not None else era.ALL
        mask = era.mask_from_flags(seen.era, start)
        return era.label(mask), mask

    def quotation(self, path: Path, rows: Mapping[str, int], noise: int) -> str | None:
        """A real server's output is records in sequence; a line or two among prose is a
        quotation."""
        if is_prose(path):
            return None  # a note's code blocks and whole inline records are its author's lines
        records = sum(rows.get(t, 0) for t in ("batches", "events", "http_requests"))
        if records > QUOTED_MAX_RECORDS or _prose_lines(path) < max(records, 1):
            return None
        return (f"an SGLang line quoted among {noise} lines of other text (a note or a "
                "paste), not a server's output: no run made")


def make_parser(state_json: str | None, fallback_date: str,
                keep_text: bool = False) -> SGLangLogParser:
    return SGLangLogParser(state_json, fallback_date, keep_text)


def parse_files(blocks: list[bytes | bytearray], fallback_date: str, keep_text: bool = False
                ) -> list[tuple[SGLangLogParser, Chunk]]:
    """New logs, each one block of complete lines from its first line, parsed as one
    block (:class:`logpipe.engines.sglang.parser.Files`): for each, the parser
    ``make_parser(None, fallback_date, keep_text)`` would be after its block, and the
    block's rows.  A small file's parse is fixed polars work whatever its lines (~35 ms
    here); fifty of them together cost ~1.5 ms a file.  Raises ValueError where the
    files cannot be parsed together (a block of none but fast lines): parse them alone."""
    counts = [fastlane.count_lines(block) for block in blocks]
    if not blocks or min(counts) < 1 or any(not block.endswith(b"\n") for block in blocks):
        raise ValueError("each file must be one block of complete lines")
    files = Files.of_lengths(counts)
    data = bytearray().join(blocks)
    prepared = prepare_block(data, 1, fallback_date)
    parsed = split_files(finish_chunk(prepared, LogState(), keep_text, files), files)
    banner = CONSOLE_BANNER.encode()
    out = []
    for block, chunk, state in zip(blocks, parsed, files.states, strict=True):
        parser = SGLangLogParser(None, fallback_date, keep_text)
        parser.state = state
        out.append((parser, _rows(chunk, may_hold_console=prepared.fast is None
                                  or banner in block)))
    return out


def _rows(chunk: ParsedChunk, may_hold_console: bool) -> Chunk:
    """The ingest's :class:`Chunk` of a parsed block."""
    seen = {int(row["run_seq"]): RunSeen(
        int(row["run_seq"]), row["first_line"], row["first_ts"], row["last_ts"],
        era={name: bool(row[name]) for name, _, _ in era.FEATURES})
        for row in chunk.runs.iter_rows(named=True)}
    for launch in chunk.launches:
        seen[launch.run_seq].facts.update(launch_facts(launch))
    tables = {"batches": chunk.batches, "http_requests": chunk.http,
              "events": chunk.events, "rejects": chunk.rejects,
              "line_prefixes": chunk.prefixes}
    for table, frame in (("request_metrics", chunk.requests),
                         ("phase_timings", chunk.phases)):
        if frame.height:
            tables[table] = frame
    return Chunk(tables=tables, runs=list(seen.values()), noise=chunk.noise,
                 unread=chunk.unread, continuation=chunk.continuation,
                 may_hold_console=may_hold_console)


QUOTED_MAX_RECORDS = 2
"""A file with at most this many SGLang record lines, and at least as many lines of prose
(sentences, not console output) beside them, quotes a server log (notes, a chat paste, a
README): it makes no run.  Progress bars, tracebacks, shell prompts, blank lines and other
programs' log lines are console, not prose: two decode lines between tqdm bars are a
server's output, pasted, and are read."""
PROSE_SCAN_BYTES = 4 << 20

_CONSOLE = re.compile(
    r"\d+%\||it/s\]|s/it\]|^\s*(?:Traceback |File \"|\^+\s*$|[$#>] |>>> |\.\.\. )"
    r"|^\s*\[?\d{2,4}[-/:]\d\d|^\s*(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|\w+Error:")
_RECORD = re.compile(r"(?:Decode|Prefill) batch|server_args\s*=|fired up and ready")
_WORD = re.compile(r"[A-Za-z][A-Za-z']+")


def _prose_lines(path: Path) -> int:
    """Lines of natural language in the file's head (three words or more, mostly words),
    not console output and not record lines."""
    try:
        text = read_head(path, PROSE_SCAN_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return 0
    count = 0
    for line in text.splitlines():
        if not line.strip() or _CONSOLE.search(line) or _RECORD.search(line):
            continue
        words = _WORD.findall(line)
        if len(words) >= 3 and sum(map(len, words)) >= 0.6 * len(line.strip()):
            count += 1
    return count


@functools.cache
def _reuse_freed_blocks() -> None:
    """Let glibc's malloc keep freed block-sized buffers for the next block.

    A block, and the C lane's columns of it, are tens of MB each: glibc serves such sizes
    with a fresh ``mmap`` and returns them on ``free``, so each block pays its page
    faults and zeroing again (~1 s of system time per GB).  Raising the mmap and trim
    thresholds to 256 MB serves them from the heap and keeps them for reuse, for ~170 MB
    more peak memory (1 GB steady log, alternating runs: 14.7 → 13.7 s, median of 3).
    Process-wide and once; nothing happens on other C libraries."""
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL(None)
        for param in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD):
            libc.mallopt(param, 256 * 1024 * 1024)
    except (OSError, AttributeError):
        pass


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


def launch_facts(launch: Launch) -> dict[str, Any]:
    """``runs`` columns from a launch's ``server_args`` line."""
    args = launch.args or {}

    def size(key: str) -> int | None:
        if not args:
            return None
        value = args.get(key)
        return int(value) if isinstance(value, int) else (1 if value is None else None)

    def opt_int(key: str) -> int | None:
        value = args.get(key)
        return int(value) if isinstance(value, int) else None

    algo = args.get("speculative_algorithm")
    algo = str(algo) if algo not in (None, "", "None") else None
    return dict(
        server_args=launch.args_json, server_args_raw=launch.redacted,
        model=args.get("model_path"),
        tp_size=size("tp_size"), dp_size=size("dp_size"), ep_size=size("ep_size"),
        pp_size=size("pp_size"), spec_algorithm=algo,
        spec_num_steps=opt_int("speculative_num_steps"),
        spec_eagle_topk=opt_int("speculative_eagle_topk"),
        spec_num_draft_tokens=opt_int("speculative_num_draft_tokens"),
        role="speculative" if algo else "baseline")

