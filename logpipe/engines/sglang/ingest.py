"""The parse loop of a server log: blocks of lines parsed ahead on the second core,
finished in order, their rows spooled and loaded once per file, runs kept as they go."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import platform
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from logpipe import summaries
from logpipe.engines.sglang import NAME as ENGINE_NAME
from logpipe.engines.sglang import era, fastlane
from logpipe.engines.sglang.parser import (
    Launch,
    LogState,
    ParsedChunk,
    PreparedChunk,
    finish_chunk,
    prepare_block,
)
from logpipe.engines.sglang.server_args import redact, redact_text
from logpipe.ingest.base import IN_LOG, PARSER_VERSION, FileResult, Progress
from logpipe.ingest.changes import HEAD_HASH_BYTES, TAIL_HASH_BYTES, decide, record_log_source
from logpipe.ingest.walk import unique_run_name
from logpipe.readers import is_prose, line_blocks, lines_at, open_binary, read_head, skip_to
from logpipe.sources import bench
from logpipe.store import Spool, Store

PARSE_BLOCK_BYTES = 32 * 1024 * 1024
"""Bytes per parsed block.  Each block costs ~0.1 s of fixed polars work (the parser's
expressions are planned per call, whatever the rows), so larger blocks pay it less often:
the 1 GB steady log ingests in 22.6 s at 8 MB, 19.3 s at 16 MB, 16.6 s at 32 MB and 17.7 s
at 64 MB (one run each), 32 MB adding ~100 MB of peak memory to 8 MB's."""
POLARS_BLOCK_BYTES = 8 * 1024 * 1024
"""Bytes per block without the C fast lane: the polars parser's frames of a block are many
times its size (1 GB steady log, polars parser only: 765 MB peak at 8 MB blocks, 1,704 MB
at 32 MB), and its per-line cost dwarfs the per-block one."""


def ingest_log(store: Store, path: Path, key: str, kind: str, head: bytes,
                progress: Progress | None, keep_text: bool = False,
                replace: bool = False) -> FileResult:
    """Read what is new in a server log, one transaction (the caller's); the caller has
    seen that its size, mtime or inode is not what its ``sources`` row says."""
    stat = path.stat()
    head_sha = hashlib.sha256(head[:HEAD_HASH_BYTES]).hexdigest()
    status, existing, detail = decide(store, path, key, stat, head_sha, replace)
    if status in ("duplicate", "changed"):
        return FileResult(key, status, kind=kind, detail=detail)

    hasher = hashlib.sha256()
    previous_sha: str | None = None
    state = LogState()
    offset = 0
    generations = int(existing.get("generations") or 0) if existing else 0
    fh = open_binary(path)
    try:
        if existing is not None:
            state = LogState.from_json(existing["state"])
            if status == "truncated":  # the new content continues the old line numbers
                generations += 1
            else:
                n = int(existing["bytes_ingested"] or 0)
                offset = n
                previous_sha = existing["sha256"]
                skip_to(fh, path, n)
        res = FileResult(key, status, kind=kind)
        fallback_date = datetime.fromtimestamp(stat.st_mtime).date().isoformat()
        runs = _RunBook(store, path, key)
        rejected = int(existing["rejected"] or 0) if existing else 0
        noise = int(existing["noise_lines"] or 0) if existing else 0
        lines_before = state.lines
        tail: bytes | bytearray = b""
        if progress and offset:
            progress(min(offset, stat.st_size))
        summaries_in_log = _ConsoleSummaries()
        _reuse_freed_blocks()
        with Spool(store) as spool, ThreadPoolExecutor(max_workers=AHEAD) as ahead, \
                ThreadPoolExecutor(max_workers=1) as hashing:
            for block, prepared in _prepared_blocks(fh, ahead, state.lines + 1,
                                                    fallback_date):
                hashing.submit(hasher.update, block)  # in order, off the main thread
                tail = (block[-TAIL_HASH_BYTES:] if len(block) >= TAIL_HASH_BYTES
                        else (tail + block)[-TAIL_HASH_BYTES:])
                offset += len(block)
                ready = prepared.result()
                summaries_in_log.feed(block, state.lines + 1, search=ready.fast is None
                                      or _ConsoleSummaries.TEXT in ready.fast.slow_text)
                chunk = finish_chunk(ready, state, keep_text)
                _write_chunk(store, key, chunk, runs, res, spool)
                rejected += chunk.rejects.height
                noise += chunk.noise
                res.unread += chunk.unread
                if progress:
                    progress(len(block))
            runs.flush()
            spool.load()
        if existing is None and runs.created:
            rejected += _unmake_quoted_runs(store, path, key, runs, res, noise)
        n = summaries_in_log.write(store, key, runs.ids())
        if n:
            res.rows["bench_results"] = n
        res.lines = state.lines - lines_before
        res.noise = noise - (int(existing["noise_lines"] or 0) if existing else 0)
    finally:
        fh.close()
    if res.lines == 0 and status == "appended":
        res.status = "unchanged"
    record_log_source(store, key, path, kind=kind, stat=stat, existing=existing,
                      status=status, head=head, tail=tail, offset=offset, hasher=hasher,
                      previous_sha=previous_sha, lines=state.lines, new_lines=res.lines,
                      rejected=rejected, noise=noise, state_json=state.to_json(),
                      generations=generations, parser_version=PARSER_VERSION)
    summaries.fold_ranges(store, key, lines_before)
    res.runs_created = runs.created
    return res


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


def _unmake_quoted_runs(store: Store, path: Path, key: str, runs: _RunBook,
                        res: FileResult, noise: int) -> int:
    """A notes file quoting one ``server_args=`` line became a run of its own, spanning
    the months from its mtime and taking the benchmarks of its folder.  Real server output
    is records in sequence; a line or two among prose is a quotation.  Such a file's runs
    are taken back and its record lines go to ``rejects``, saying why.  Returns the
    rejects written."""
    if is_prose(path):
        return 0  # a note's code blocks and whole inline records are its author's log lines
    records = sum(res.rows.get(t, 0) for t in ("batches", "events", "http_requests"))
    if records > QUOTED_MAX_RECORDS or _prose_lines(path) < max(records, 1):
        return 0
    lines = store.unmake_runs(list(runs.ids().values()))
    raw = {no: text.decode("utf-8", errors="replace").rstrip("\r")[:2000]
           for no, text in lines_at(path, set(lines)).items()}
    reason = (f"an SGLang line quoted among {noise} lines of other text (a note or a paste), "
              "not a server's output: no run made")
    store.insert("rejects", pl.DataFrame(
        {"line_no": lines, "run_id": [None] * len(lines), "reason": [reason] * len(lines),
         "raw": [raw.get(n) for n in lines]},
        schema={"line_no": pl.Int64, "run_id": pl.String, "reason": pl.String,
                "raw": pl.String}), source_path=key)
    for table in ("batches", "events", "http_requests"):
        res.rows.pop(table, None)
    res.rows["rejects"] = res.rows.get("rejects", 0) + len(lines)
    runs.forget()
    return len(lines)


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


AHEAD = 2
"""Blocks prepared ahead of the one being finished (one per core of a small machine)."""


def _prepared_blocks(fh: BinaryIO, ahead: ThreadPoolExecutor, first_line_no: int,
                     fallback_date: str) -> Iterator[tuple[bytearray, Future[PreparedChunk]]]:
    """Blocks of complete lines, each with its state-free parse already started on
    ``ahead``: the next blocks are prepared while the caller finishes and writes this one
    (polars releases the GIL, so this uses the cores that one block's parse leaves idle;
    at most ``AHEAD + 1`` blocks are in memory)."""
    pending: deque[tuple[bytearray, Future[PreparedChunk]]] = deque()
    line_no = first_line_no
    size = (PARSE_BLOCK_BYTES if fastlane.enabled()
            else min(PARSE_BLOCK_BYTES, POLARS_BLOCK_BYTES))
    for block in line_blocks(fh, size):
        pending.append((block, ahead.submit(prepare_block, block, line_no, fallback_date)))
        line_no += fastlane.count_lines(block)
        if len(pending) > AHEAD:
            yield pending.popleft()
    while pending:
        yield pending.popleft()


class _ConsoleSummaries:
    """``bench_serving`` summaries printed into a server log (a run script that sent both
    to one file): found by their banner in the blocks as they stream by, written to
    ``bench_results`` linked to the run whose lines they follow."""

    TEXT = fastlane.CONSOLE_BANNER
    BANNER = TEXT.encode()

    def __init__(self) -> None:
        self.found: list[tuple[int, bytes]] = []
        self._open: tuple[int, bytearray] | None = None

    def feed(self, block: bytes | bytearray, first_line_no: int, search: bool = True) -> None:
        """``search=False``: the block holds no banner (the fast lane's lines never do,
        and its slow lines were searched), only a table cut by the last block is read."""
        if self._open is not None:  # a table cut by the block boundary
            line_no, text = self._open
            text += block[:64 * 1024]
            self.found.append((line_no, bytes(text)))
            self._open = None
        if not search:
            return
        pos = block.find(self.BANNER)
        while pos >= 0:
            start = block.rfind(b"\n", 0, pos) + 1
            line_no = first_line_no + block.count(b"\n", 0, start)
            chunk = block[start:start + 64 * 1024]
            if len(chunk) < 64 * 1024 and not chunk.rstrip().endswith(b"="):
                self._open = (line_no, bytearray(chunk))
            else:
                self.found.append((line_no, bytes(chunk)))
            pos = block.find(self.BANNER, pos + len(self.BANNER))

    def write(self, store: Store, key: str, run_ids: dict[int, str]) -> int:
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


def _write_chunk(store: Store, key: str, chunk: ParsedChunk, runs: _RunBook,
                 res: FileResult, spool: Spool) -> None:
    """Write one parsed block: the bulky rows (batches, HTTP lines) to ``spool``, loaded
    once at the end of the file; the few others straight into their tables."""
    for row in chunk.runs.iter_rows(named=True):
        runs.observe(row)
    for launch in chunk.launches:
        runs.launch(launch)
    mapping = runs.ids()

    def with_run(frame: pl.DataFrame) -> pl.DataFrame:
        seqs = frame["run_seq"]
        if (frame.height and not seqs.null_count() and seqs.min() == seqs.max()
                and seqs[0] in mapping):
            # the usual block lies in one run: a constant, not a lookup per row
            return frame.with_columns(pl.lit(mapping[seqs[0]], pl.String).alias("run_id"))
        return frame.with_columns(
            pl.col("run_seq").replace_strict(mapping, return_dtype=pl.String).alias("run_id")
        )

    for table, frame in (("batches", chunk.batches), ("http_requests", chunk.http)):
        n = spool.add(table, with_run(frame), source_path=key)
        res.rows[table] = res.rows.get(table, 0) + n
    for table, frame in (("events", chunk.events), ("rejects", chunk.rejects),
                         ("line_prefixes", chunk.prefixes)):
        n = store.insert(table, with_run(frame), source_path=key)
        res.rows[table] = res.rows.get(table, 0) + n
    for table, frame in (("request_metrics", chunk.requests), ("phase_timings", chunk.phases)):
        if frame.height:
            n = store.insert(table, with_run(frame).with_columns(
                pl.lit(IN_LOG).alias("link_method")), source_path=key)
            res.rows[table] = res.rows.get(table, 0) + n
    if chunk.continuation:  # a traceback's lines after its first, cut by the block
        store.append_to_last_error(key, chunk.continuation)


class _RunBook:
    """Creates and updates the ``runs`` rows of one file as its lines stream by.

    A known run's time span and era are kept here as blocks widen them and written once
    by :meth:`flush` (a query and an update per run per block cost ~1 s per GB)."""

    def __init__(self, store: Store, path: Path, key: str) -> None:
        self.store = store
        self.path = path
        self.key = key
        self.created = 0
        self._ids: dict[int, str] = {}
        self._masks: dict[str, int] = {}
        for seq, rid, mask in store.all(
                "SELECT run_seq, run_id, era_mask FROM runs WHERE source_path = ?", [key]):
            self._ids[int(seq)] = rid
            self._masks[rid] = int(mask) if mask is not None else era.ALL
        self._spans: dict[str, tuple[Any, Any]] = {}
        self._new: list[tuple[Any, ...]] = []
        """Runs first seen since the last flush, inserted by it in one statement."""
        self._launches: list[tuple[str, dict[str, Any]]] = []
        self._taken: set[str] | None = None

    def ids(self) -> dict[int, str]:
        return dict(self._ids)

    def forget(self) -> None:
        """The runs made so far were taken back (:func:`_unmake_quoted_runs`)."""
        self._ids.clear()
        self.created = 0

    def _new_name(self, seq: int) -> str:
        if self._taken is None:  # every name in the database, once (not a query a run)
            self._taken = {str(n) for (n,) in self.store.all("SELECT name FROM runs")}
        return unique_run_name(self.path, seq, self._taken)

    def observe(self, row: dict[str, Any]) -> None:
        seq = int(row["run_seq"])
        flags = {name: bool(row[name]) for name, _, _ in era.FEATURES}
        if seq not in self._ids:
            rid = hashlib.sha256(f"{self.key}\n{seq}\n{row['first_ts']}".encode()).hexdigest()[:12]
            mask = era.mask_from_flags(flags)
            self._new.append((rid, self._new_name(seq), self.key, seq, row["first_line"],
                              row["first_ts"], row["last_ts"], era.label(mask), mask))
            self._ids[seq] = rid
            self._masks[rid] = mask
            self.created += 1
            return
        rid = self._ids[seq]
        self._masks[rid] = era.mask_from_flags(flags, self._masks[rid])
        first, last = self._spans.get(rid, (None, None))
        self._spans[rid] = (_least(first, row["first_ts"]), _greatest(last, row["last_ts"]))

    def flush(self) -> None:
        """Write the runs first seen, then the spans and eras that blocks widened, then
        the launches' arguments, since the last flush."""
        self.store.add_runs(self._new, engine=ENGINE_NAME)
        self._new.clear()
        for rid, (first, last) in self._spans.items():
            mask = self._masks[rid]
            self.store.widen_run(rid, first, last, era.label(mask), mask)
        self._spans.clear()
        self.store.update_runs(self._launches)
        self._launches.clear()

    def launch(self, launch: Launch) -> None:
        rid = self._ids[launch.run_seq]
        args = launch.args or {}
        safe = redact(args)

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
        self._launches.append((rid, dict(
            server_args=json.dumps(safe, default=str) if args else None,
            server_args_raw=redact_text(launch.raw, args), model=args.get("model_path"),
            tp_size=size("tp_size"), dp_size=size("dp_size"), ep_size=size("ep_size"),
            pp_size=size("pp_size"), spec_algorithm=algo,
            spec_num_steps=opt_int("speculative_num_steps"),
            spec_eagle_topk=opt_int("speculative_eagle_topk"),
            spec_num_draft_tokens=opt_int("speculative_num_draft_tokens"),
            role="speculative" if algo else "baseline")))


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _greatest(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)
