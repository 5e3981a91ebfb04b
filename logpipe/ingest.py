"""walk → detect → parse → store, one transaction per file.

:func:`ingest_paths` is the whole job behind ``logpipe ingest``.  For each file it decides
what is new by comparing the file with its ``sources`` row, as logrotate-aware tailers do
(a file is its (device, inode) plus the hash of what was read from it):

- unknown path, unknown content → parse everything (``new``);
- same path, the bytes ingested last time are unchanged → parse only what was appended
  (``appended``; ``unchanged`` when nothing was);
- same file, now shorter than what was ingested → it was truncated (``copytruncate``,
  ``> server.log``): the rows already ingested are kept and reading restarts at the new
  content, line numbers and the open launch continuing (``truncated``);
- same path, another file (a new inode: rotation by rename, then a new file created) →
  the old rows are set aside under the old file's identity, so that the rotated copy takes
  them when it is found, and the new file is read (``new``);
- same file, same size or longer, but the bytes ingested changed → edited in place:
  nothing is deleted unless ``replace`` (``--replace``) says so (``changed``; with
  ``replace``: ``rewritten``);
- unknown path whose content starts with the bytes of a file that is gone or now holds
  something else → the file was moved or rotated: its rows follow it (``moved``);
- unknown path whose content duplicates a file still present, or an earlier generation of
  a truncated file → ``duplicate``, skipped.

A line still being written (no final newline) is left for the next ingest.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from logpipe import __version__, clock, era, summaries
from logpipe.env import (
    RunEnv,
    Tiers,
    build_env,
    discover,
    is_manifest_name,
    load_manifest,
    log_facts,
)
from logpipe.errors import InputError, LogpipeError
from logpipe.readers import (
    COMPRESSED_SUFFIXES,
    line_blocks,
    open_binary,
    read_exact,
    read_head,
    skip_to,
)
from logpipe.server_args import redact, redact_text
from logpipe.sources import HEAD_BYTES, bench, detect, phases, request_metrics, torch_trace
from logpipe.sources.sglang_log import NAME as SGLANG
from logpipe.sources.sglang_log import SOURCE as SGLANG_SOURCE
from logpipe.sources.sglang_log import (
    Launch,
    LogState,
    ParsedChunk,
    PreparedChunk,
    finish_chunk,
    prepare_block,
)
from logpipe.sources.sglang_log import sniff as sglang_sniff
from logpipe.store import Spool, Store
from logpipe.traces import apply_trace_env, ingest_trace, link_by_profile_id

PARSER_VERSION = f"logpipe {__version__}"
HEAD_HASH_BYTES = 4096
TAIL_HASH_BYTES = 1 << 20
GENERIC_STEMS = {
    "server", "log", "logs", "output", "out", "stdout", "stderr", "sglang", "launch",
    "server_log", "serve", "console", "run", "nohup", "sglang_server", "launch_server",
}
TEXT_SUFFIXES = (".log", ".txt", ".out", ".err")
PARSE_BLOCK_BYTES = 8 * 1024 * 1024

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
    unread: int = 0
    """Lines that look like records (batch head, throughput) but were not read."""


@dataclass
class IngestResult:
    db: str
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    unlinked: list[str] = field(default_factory=list)
    """Benchmark records (``path:line``) not linked to any server run."""
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    """Console summaries (``path:line``) ingested now that repeat a JSONL record, with it."""

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


def walk(paths: Iterable[Path], exclude: Iterable[Path] = ()) -> list[tuple[Path, Path]]:
    """``(file, root)`` for files under ``paths`` in a stable order, skipping hidden entries,
    environment manifests, database files and ``exclude``."""
    skip = {p.resolve() for p in exclude}
    out: list[tuple[Path, Path]] = []
    for root in paths:
        if not root.exists():
            raise InputError("no such file or directory", path=root,
                             hint="check the path; folders are searched recursively")
        if root.is_file():
            out.append((root, root.parent))
            continue
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root)
            if any(part.startswith(".") for part in rel.parts) or not p.is_file():
                continue
            out.append((p, root))
    seen: set[Path] = set()
    result = []
    for p, root in out:
        rp = p.resolve()
        if (rp in seen or rp in skip or rp.name.endswith((".duckdb", ".duckdb.wal"))
                or is_manifest_name(rp)):
            continue
        seen.add(rp)
        result.append((p, root))
    return result


def run_base_name(path: Path) -> str:
    """A memorable run name: the file stem, or the folder name when the stem is generic."""
    name = path.name
    for suffix in COMPRESSED_SUFFIXES + TEXT_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in TEXT_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    if not name or name.lower() in GENERIC_STEMS:
        name = path.parent.name or name or "run"
    return name


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


def ingest_paths(
    paths: Iterable[str | Path],
    db: str | Path,
    *,
    env: dict[str, str] | None = None,
    tags: dict[str, str] | None = None,
    tiers_file: Path | None = None,
    bench_run: str | None = None,
    keep_request_text: bool = False,
    replace: bool = False,
    tz: str | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> IngestResult:
    """Ingest every recognised file under ``paths`` into the database ``db``.

    ``env`` and ``tags`` (``--env``/``--tag``) are attached to every run ingested now and
    win over manifests; ``tiers_file`` overrides the default tiers; ``replace`` lets a file
    edited in place replace its rows (otherwise they are kept and the file is reported);
    ``tz`` is the zone of the SGLang stamps (``UTC``, ``+02:00``, an IANA name).
    """
    started = time.perf_counter()
    if tz is not None:
        clock.offset_of(tz)  # an unknown zone fails before anything is read
    db_path = Path(db)
    options = EnvOptions(dict(env or {}), dict(tags or {}), Tiers.load(tiers_file), bench_run,
                         keep_request_text, replace, tz)
    files = walk([Path(p) for p in paths], exclude=[db_path])
    if on_total is not None:
        on_total(sum(f.stat().st_size for f, _ in files))
    result = IngestResult(db=str(db))
    with Store.open(db_path) as store:
        for path, root in files:
            result.files.append(_ingest_file(store, path, root, options, progress))
        with store.transaction():
            result.unlinked = link_records(store)
            apply_trace_env(store, options.tiers or Tiers.load())
        touched = [f.path for f in result.files if f.rows.get("bench_results")]
        if touched:
            result.duplicates = [(f"{src}:{line}", dup) for src, line, dup in store.all(
                "SELECT source_path, line_no, duplicate_of FROM bench_results WHERE "
                "duplicate_of IS NOT NULL AND source_path IN (SELECT unnest(?)) ORDER BY 1, 2",
                [touched])]
    result.seconds = time.perf_counter() - started
    return result


def _ingest_file(store: Store, path: Path, root: Path, options: EnvOptions,
                 progress: Progress | None) -> FileResult:
    key = str(path.resolve())
    try:
        head = read_head(path, HEAD_BYTES)
    except OSError as exc:
        return FileResult(key, "failed", detail=f"cannot read: {exc}")
    text_head = head.decode("utf-8", errors="replace")
    source = detect(text_head)
    if source is not None and source.name == bench.CONSOLE.name and sglang_sniff(text_head):
        # a run script that sent the server's output and bench_serving's summary to one
        # file: read it as the server log it is; the summaries come with it
        source = SGLANG_SOURCE
    if source is None:
        if progress:
            progress(path.stat().st_size)
        return FileResult(key, "skipped", detail="not a recognised format")
    try:
        with store.transaction():
            if source.name == SGLANG:
                res = _ingest_log(store, path, key, source.name, head, progress,
                                  options.keep_request_text, options.replace)
                if res.status not in ("duplicate", "changed"):
                    attach_env(store, key, discover(path, root), options)
            elif source.name == torch_trace.SOURCE.name:
                res = _ingest_trace(store, path, key, options)
                if progress:
                    progress(path.stat().st_size)
            else:
                res = _ingest_records(store, path, key, source.name, options)
                if progress:
                    progress(path.stat().st_size)
    except LogpipeError as exc:
        return FileResult(key, "failed", kind=source.name, detail=str(exc))
    except Exception as exc:  # noqa: BLE001 - any failure of one file must not stop the rest
        return FileResult(key, "failed", kind=source.name,
                          detail=f"{type(exc).__name__}: {exc}")
    return res


def _window_sha(path: Path, end: int, size: int) -> str | None:
    """SHA-256 of the ``size`` bytes before offset ``end`` (decompressed), or None when
    the file is shorter."""
    start = max(0, end - size)
    with open_binary(path) as fh:
        if skip_to(fh, path, start) != start:
            return None
        data = fh.read(end - start)
    return hashlib.sha256(data).hexdigest() if len(data) == end - start else None


def _same_prefix(path: Path, row: dict[str, Any]) -> bool:
    """Does ``path`` still begin with the bytes ingested for ``row``?  Checked by the hash
    of the first 4 KiB and of the last (up to) 1 MiB ingested, not by re-reading it all."""
    n = int(row["bytes_ingested"] or 0)
    if row.get("tail_sha256") is None:  # rows written before migration 0003
        h = hashlib.sha256()
        with open_binary(path) as fh:
            got = read_exact(fh, n, h)
        return got == n and h.hexdigest() == row["sha256"]
    head = _window_sha(path, min(n, HEAD_HASH_BYTES), HEAD_HASH_BYTES)
    return head == row["head_sha256"] and _window_sha(path, n, TAIL_HASH_BYTES) == \
        row["tail_sha256"]


def _retire(store: Store, key: str, existing: dict[str, Any]) -> None:
    """Set the rows of a file that no longer lives at ``key`` aside under a path of their
    own (``key`` plus the old file's identity), so that its rotated copy takes them."""
    aside = f"{key} (replaced file {existing.get('device')}:{existing.get('inode')})"
    store.move_source(key, aside)


def _decide(store: Store, path: Path, key: str, stat: os.stat_result, head_sha: str,
            replace: bool) -> tuple[str, dict[str, Any] | None, str | None]:
    """``(status, existing source row to continue from, detail)`` for a log file; the
    status is one of the module docstring's.  Moves and set-asides happen here."""
    existing = store.source(key)
    if existing is not None and existing.get("inode") not in (None, stat.st_ino) and \
            not _same_prefix(path, existing):
        _retire(store, key, existing)  # rotated by rename: another file lives here now
        existing = None
    if existing is None:
        for other in store.sources_with_head(head_sha):
            if not _same_prefix(path, other):
                continue
            old = Path(other["path"])
            if old.exists() and _same_prefix(old, other):
                return "duplicate", None, f"same content as {other['path']}"
            store.move_source(other["path"], key)
            return "moved", store.source(key), None
        for gen in store.all(
                "SELECT path, generation, bytes_ingested, tail_sha256 FROM source_generations "
                "WHERE head_sha256 = ?", [head_sha]):
            n = int(gen[2] or 0)
            if _window_sha(path, n, TAIL_HASH_BYTES) == gen[3]:
                extra = stat.st_size - n
                return "duplicate", None, (
                    f"rotated copy of {gen[0]} before its truncation, already ingested"
                    + (f"; {extra} byte(s) after the ingested part are not read (written "
                       "between the last ingest and the rotation)" if extra > 0 else ""))
        return "new", None, None
    if _same_prefix(path, existing):
        return "appended", existing, None
    if replace:
        store.delete_source(key)
        return "rewritten", None, None
    compressed = path.name.lower().endswith(COMPRESSED_SUFFIXES)
    if not compressed and stat.st_size < int(existing["bytes_ingested"] or 0):
        # (a compressed file's size is not comparable with the bytes read from it)
        store.con.execute(
            "INSERT INTO source_generations VALUES (?, ?, ?, ?, ?, ?, now())",
            [key, int(existing.get("generations") or 0), existing["head_sha256"],
             existing["tail_sha256"], existing["bytes_ingested"], existing["lines"]])
        return "truncated", existing, None
    return "changed", None, (
        "the bytes ingested earlier changed in place; its rows are kept as they were. "
        "Pass --replace to replace them with the file's content")


def _ingest_log(store: Store, path: Path, key: str, kind: str, head: bytes,
                progress: Progress | None, keep_text: bool = False,
                replace: bool = False) -> FileResult:
    stat = path.stat()
    head_sha = hashlib.sha256(head[:HEAD_HASH_BYTES]).hexdigest()
    known = store.source(key)
    if (known is not None and known["size_bytes"] == stat.st_size
            and known["mtime"] == datetime.fromtimestamp(stat.st_mtime)
            and known.get("inode") in (None, stat.st_ino)):
        return FileResult(key, "unchanged", kind=kind)  # same size and mtime: not re-read
    status, existing, detail = _decide(store, path, key, stat, head_sha, replace)
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
        tail = b""
        if progress and offset:
            progress(min(offset, stat.st_size))
        summaries_in_log = _ConsoleSummaries()
        with Spool(store) as spool, ThreadPoolExecutor(max_workers=AHEAD) as ahead, \
                ThreadPoolExecutor(max_workers=1) as hashing:
            for block, prepared in _prepared_blocks(fh, ahead, state.lines + 1,
                                                    fallback_date):
                summaries_in_log.feed(block, state.lines + 1)
                hashing.submit(hasher.update, block)  # in order, off the main thread
                tail = (block[-TAIL_HASH_BYTES:] if len(block) >= TAIL_HASH_BYTES
                        else (tail + block)[-TAIL_HASH_BYTES:])
                offset += len(block)
                chunk = finish_chunk(prepared.result(), state, keep_text)
                _write_chunk(store, key, chunk, runs, res, spool)
                rejected += chunk.rejects.height
                noise += chunk.noise
                res.unread += chunk.unread
                if progress:
                    progress(len(block))
            spool.load()
        n = summaries_in_log.write(store, key, runs.ids())
        if n:
            res.rows["bench_results"] = n
        res.lines = state.lines - lines_before
        res.noise = noise - (int(existing["noise_lines"] or 0) if existing else 0)
    finally:
        fh.close()
    if res.lines == 0 and status == "appended":
        res.status = "unchanged"
    if existing is not None and res.lines == 0 and status != "truncated":
        tail_sha, sha = existing["tail_sha256"], existing["sha256"]
    else:
        tail_sha = (hashlib.sha256(tail).hexdigest() if len(tail) >= min(offset, TAIL_HASH_BYTES)
                    else _window_sha(path, offset, TAIL_HASH_BYTES))
        # the first ingest hashes everything; each append chains the hash of its own bytes
        sha = hasher.hexdigest() if previous_sha is None else hashlib.sha256(
            (previous_sha + hasher.hexdigest()).encode()).hexdigest()
    store.upsert_source({
        "path": key,
        "kind": kind,
        "size_bytes": stat.st_size,
        "sha256": sha,
        "bytes_ingested": offset,
        "lines": state.lines,
        "rejected": rejected,
        "noise_lines": noise,
        "ingested_at": datetime.now(),
        "parser_version": PARSER_VERSION,
        "head_sha256": head_sha,
        "tail_sha256": tail_sha,
        "mtime": datetime.fromtimestamp(stat.st_mtime),
        "state": state.to_json(),
        "device": stat.st_dev,
        "inode": stat.st_ino,
        "generations": generations,
    })
    summaries.fold_ranges(store, key, lines_before)
    res.runs_created = runs.created
    return res


AHEAD = 2
"""Blocks prepared ahead of the one being finished (one per core of a small machine)."""


def _prepared_blocks(fh: BinaryIO, ahead: ThreadPoolExecutor, first_line_no: int,
                     fallback_date: str) -> Iterator[tuple[bytes, Future[PreparedChunk]]]:
    """Blocks of complete lines, each with its state-free parse already started on
    ``ahead``: the next blocks are prepared while the caller finishes and writes this one
    (polars releases the GIL, so this uses the cores that one block's parse leaves idle;
    at most ``AHEAD + 1`` blocks are in memory)."""
    pending: deque[tuple[bytes, Future[PreparedChunk]]] = deque()
    line_no = first_line_no
    for block in line_blocks(fh, PARSE_BLOCK_BYTES):
        pending.append((block, ahead.submit(prepare_block, block, line_no, fallback_date)))
        line_no += block.count(b"\n")
        if len(pending) > AHEAD:
            yield pending.popleft()
    while pending:
        yield pending.popleft()


class _ConsoleSummaries:
    """``bench_serving`` summaries printed into a server log (a run script that sent both
    to one file): found by their banner in the blocks as they stream by, written to
    ``bench_results`` linked to the run whose lines they follow."""

    BANNER = b"Serving Benchmark Result"

    def __init__(self) -> None:
        self.found: list[tuple[int, bytes]] = []
        self._open: tuple[int, bytearray] | None = None

    def feed(self, block: bytes, first_line_no: int) -> None:
        if self._open is not None:  # a table cut by the block boundary
            line_no, text = self._open
            text += block[:64 * 1024]
            self.found.append((line_no, bytes(text)))
            self._open = None
        pos = block.find(self.BANNER)
        while pos >= 0:
            start = block.rfind(b"\n", 0, pos) + 1
            line_no = first_line_no + block.count(b"\n", 0, start)
            chunk = block[start:start + 64 * 1024]
            if len(chunk) < 64 * 1024 and not chunk.rstrip().endswith(b"="):
                self._open = (line_no, bytearray(chunk))
            else:
                self.found.append((line_no, chunk))
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
    if chunk.continuation:
        open_line = store.one(
            "SELECT max(line_no) FROM events WHERE source_path = ? AND kind = 'error'", [key]
        )
        if open_line and open_line[0] is not None:
            store.con.execute(
                "UPDATE events SET message = message || chr(10) || ? "
                "WHERE source_path = ? AND line_no = ?",
                [chunk.continuation, key, open_line[0]],
            )


class _RunBook:
    """Creates and updates the ``runs`` rows of one file as its lines stream by."""

    def __init__(self, store: Store, path: Path, key: str) -> None:
        self.store = store
        self.path = path
        self.key = key
        self.created = 0
        self._ids: dict[int, str] = {
            int(seq): rid
            for seq, rid in store.all(
                "SELECT run_seq, run_id FROM runs WHERE source_path = ?", [key]
            )
        }

    def ids(self) -> dict[int, str]:
        return dict(self._ids)

    def _new_name(self, seq: int) -> str:
        base = run_base_name(self.path)
        if seq > 0:
            base = f"{base}-{seq + 1}"
        name, k = base, 2
        while self.store.name_taken(name):
            name = f"{base}~{k}"
            k += 1
        return name

    def observe(self, row: dict[str, Any]) -> None:
        seq = int(row["run_seq"])
        flags = {name: bool(row[name]) for name, _, _ in era.FEATURES}
        if seq not in self._ids:
            rid = hashlib.sha256(f"{self.key}\n{seq}\n{row['first_ts']}".encode()).hexdigest()[:12]
            mask = era.mask_from_flags(flags)
            self.store.con.execute(
                "INSERT INTO runs (run_id, name, source_path, run_seq, first_line, started_at, "
                "ended_at, engine, format_era, era_mask, role, env_complete, profiled, env, tags)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'sglang', ?, ?, 'baseline', false, ?, '{}', '{}')",
                [rid, self._new_name(seq), self.key, seq, row["first_line"], row["first_ts"],
                 row["last_ts"], era.label(mask), mask, bool(row["profiled"])],
            )
            self._ids[seq] = rid
            self.created += 1
            return
        rid = self._ids[seq]
        current = self.store.one("SELECT era_mask FROM runs WHERE run_id = ?", [rid])
        mask = era.mask_from_flags(flags, int(current[0]) if current and current[0] is not None
                                   else era.ALL)
        self.store.con.execute(
            "UPDATE runs SET started_at = least(coalesce(started_at, ?), ?), "
            "ended_at = greatest(coalesce(ended_at, ?), ?), era_mask = ?, format_era = ?, "
            "profiled = profiled OR ? WHERE run_id = ?",
            [row["first_ts"], row["first_ts"], row["last_ts"], row["last_ts"], mask,
             era.label(mask), bool(row["profiled"]), rid],
        )

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
        self.store.con.execute(
            "UPDATE runs SET server_args = ?, server_args_raw = ?, model = ?, tp_size = ?, "
            "dp_size = ?, ep_size = ?, pp_size = ?, spec_algorithm = ?, spec_num_steps = ?, "
            "spec_eagle_topk = ?, spec_num_draft_tokens = ?, role = ? WHERE run_id = ?",
            [json.dumps(safe, default=str) if args else None, redact_text(launch.raw, args),
             args.get("model_path"), size("tp_size"), size("dp_size"), size("ep_size"),
             size("pp_size"), algo, opt_int("speculative_num_steps"),
             opt_int("speculative_eagle_topk"), opt_int("speculative_num_draft_tokens"),
             "speculative" if algo else "baseline", rid],
        )


def attach_env(store: Store, key: str, manifests: list[Path], options: EnvOptions) -> None:
    """(Re)compute the environment of every run read from ``key``.

    Runs are recomputed on every ingest, so a manifest added later takes effect; values
    given on an earlier command line are kept unless given again.
    """
    loaded = [(str(p), load_manifest(p)) for p in manifests]
    tiers = options.tiers or Tiers.load()
    rewritten: list[str] = []
    rows: list[tuple[Any, ...]] = []
    for (run_id, server_args, era_label, old_env, old_fp, old_complete, old_version, old_tags,
         old_profiled) in store.all(
        "SELECT run_id, server_args, format_era, env, env_fingerprint, env_complete, "
        "engine_version, tags::VARCHAR, profiled FROM runs WHERE source_path = ?", [key]
    ):
        previous = RunEnv.from_json(old_env)
        cli = {k: e.value for k, e in previous.entries.items()
               if e.source == "command line" and not k.startswith("tag.")}
        tags = {k[4:]: e.value for k, e in previous.entries.items()
                if e.source == "command line" and k.startswith("tag.")}
        cli.update(options.env)
        tags.update(options.tags)
        said = log_facts((kind, json.loads(attrs) if attrs else {}) for kind, attrs in store.all(
            "SELECT kind, attrs FROM events WHERE run_id = ? AND kind IN ('nccl_env', "
            "'nccl_version', 'setting_adjusted', 'attention_backend', 'capacity', "
            "'load_weight', 'kv_cache', 'graph_capture', 'startup_timings') "
            "ORDER BY line_no", [run_id]))
        env = build_env(tiers=tiers, manifests=loaded,
                        server_args=json.loads(server_args) if server_args else None,
                        format_era=era_label, cli_env=cli, tags=tags, log_facts=said)
        version = env.entries.get("pkg.sglang")
        blocking = env.entries.get("CUDA_LAUNCH_BLOCKING")
        tagged = env.entries.get("tag.profiled")
        instrumented = (blocking is not None and str(blocking.value).strip() == "1") or (
            tagged is not None and str(tagged.value).lower() in ("1", "true", "yes"))
        _set_clock(store, run_id, env, options.tz)
        env_json, tags_json = env.to_json(), json.dumps(tags, default=str)
        unchanged = (env_json == old_env and env.fingerprint() == old_fp
                     and env.complete == old_complete and tags_json == old_tags
                     and (version is None or str(version.value) == old_version)
                     and (old_profiled or not instrumented))
        if unchanged:
            continue  # an unchanged file and no new manifest: nothing to rewrite
        store.con.execute(
            "UPDATE runs SET env = ?, env_fingerprint = ?, env_complete = ?, "
            "engine_version = coalesce(?, engine_version), tags = ?, "
            "profiled = profiled OR ? WHERE run_id = ?",
            [env_json, env.fingerprint(), env.complete,
             str(version.value) if version else None, tags_json, instrumented, run_id],
        )
        rewritten.append(run_id)
        rows += [
            (run_id, k, e.value if isinstance(e.value, str) else json.dumps(e.value, default=str),
             e.tier, e.source, e.conflict)
            for k, e in sorted(env.entries.items())
        ]
    if rewritten:  # one statement each, not one per key: DuckDB's inserts are per call
        store.con.execute("DELETE FROM run_env WHERE run_id IN (SELECT unnest(?))", [rewritten])
    if rows:
        store.insert("run_env", pl.DataFrame(
            rows, schema=["run_id", "key", "value", "tier", "source", "conflict"],
            orient="row"))


_OUTER_OFFSET_SQL = """
SELECT median(epoch(x.ts) - epoch(p.outer_ts)), count(*)
FROM line_prefixes p
JOIN (SELECT run_id, line_no, ts FROM batches WHERE run_id = $1
      UNION ALL SELECT run_id, line_no, ts FROM events WHERE run_id = $1) x
  USING (run_id, line_no)
WHERE p.run_id = $1 AND p.outer_ts_utc AND x.ts IS NOT NULL
"""


def _set_clock(store: Store, run_id: str, env: RunEnv, tz: str | None) -> None:
    """The offset of the run's stamps from UTC, and where it came from: ``--tz``, the
    manifest (the host's zone at capture), or a host logger's zoned stamps beside
    SGLang's; else unknown (NULL)."""
    start = store.one("SELECT started_at FROM runs WHERE run_id = ?", [run_id])
    at = start[0] if start else None
    offset: int | None = None
    source: str | None = None
    declared = env.entries.get("host.utc_offset_s")
    if tz is not None:
        offset, source = clock.offset_of(tz, at), f"--tz {tz}"
    elif declared is not None and declared.value is not None:
        zone = env.entries.get("host.timezone")
        name = str(zone.value) if zone is not None and zone.value else None
        try:  # the zone's offset at the run's start (daylight saving), else as captured
            offset = clock.offset_of(name, at) if name and "/" in name else int(declared.value)
        except (InputError, TypeError, ValueError):
            offset = int(declared.value)
        source = "manifest"
    else:
        row = store.one(_OUTER_OFFSET_SQL, [run_id])
        if row and row[1]:
            offset, source = clock.rounded(float(row[0])), "outer stamps"
    store.con.execute("UPDATE runs SET utc_offset_s = ?, clock_source = ? WHERE run_id = ? "
                      "AND (utc_offset_s IS DISTINCT FROM ? OR clock_source IS DISTINCT FROM ?)",
                      [offset, source, run_id, offset, source])


def _ingest_records(store: Store, path: Path, key: str, kind: str,
                    options: EnvOptions) -> FileResult:
    """Small record files (benchmark results): parsed whole, replaced whole on change."""
    stat = path.stat()
    with open_binary(path) as fh:
        data = fh.read()
    sha = hashlib.sha256(data).hexdigest()
    existing = store.source(key)
    explicit = None
    if options.bench_run:
        from logpipe.query import resolve_run

        explicit = resolve_run(store, options.bench_run)
    if existing is not None and existing["sha256"] == sha and explicit is None:
        return FileResult(key, "unchanged", kind=kind)
    status = "new" if existing is None else "rewritten"
    if existing is not None:
        store.delete_source(key)
    text = data.decode("utf-8", errors="replace")
    rejects: list[tuple[int, str, str]] = []
    table = "bench_results"
    if kind == bench.CONSOLE.name:
        rows = bench.parse_console(text)
    elif kind == phases.SOURCE.name:
        rows, rejects = phases.parse(text)
        table = "phase_timings"
    elif kind == request_metrics.SOURCE.name:
        rows, rejects = request_metrics.parse(text, keep_text=options.keep_request_text)
        table = "request_metrics"
    else:
        rows, rejects = bench.parse_jsonl(text)
    frame = pl.DataFrame([{"line_no": n, **r} for n, r in rows], infer_schema_length=None)
    if explicit is not None and frame.height:
        frame = frame.with_columns(pl.lit(explicit).alias("run_id"),
                                   pl.lit("explicit").alias("link_method"))
    res = FileResult(key, status, kind=kind)
    res.rows[table] = store.insert(table, frame, source_path=key)
    rej = pl.DataFrame(rejects, schema={"line_no": pl.Int64, "reason": pl.String,
                                        "raw": pl.String}, orient="row")
    res.rows["rejects"] = store.insert("rejects", rej, source_path=key)
    lines = text.count("\n")
    res.lines = lines
    store.upsert_source({
        "path": key, "kind": kind, "size_bytes": stat.st_size, "sha256": sha,
        "bytes_ingested": len(data), "lines": lines, "rejected": len(rejects),
        "noise_lines": 0, "ingested_at": datetime.now(), "parser_version": PARSER_VERSION,
        "head_sha256": hashlib.sha256(data[:HEAD_HASH_BYTES]).hexdigest(),
        "tail_sha256": hashlib.sha256(data[-TAIL_HASH_BYTES:]).hexdigest(),
        "mtime": datetime.fromtimestamp(stat.st_mtime), "state": None,
    })
    return res


def _ingest_trace(store: Store, path: Path, key: str, options: EnvOptions) -> FileResult:
    status, rows, events, note = ingest_trace(store, path, key, store.source(key),
                                              PARSER_VERSION)
    if options.bench_run and status != "unchanged":
        from logpipe.query import resolve_run

        store.con.execute("UPDATE traces SET run_id = ?, link_method = 'explicit' "
                          "WHERE source_path = ?", [resolve_run(store, options.bench_run), key])
    res = FileResult(key, status, kind=torch_trace.SOURCE.name, lines=events, detail=note)
    res.rows.update(rows)
    return res


LINKED_TABLES = ("bench_results", "phase_timings", "request_metrics", "traces")
IN_LOG = "server log"
"""link_method of records printed in the server log itself: they belong to its run."""
# when a record file was written, as an instant, for the time-window link (else the
# file's modification time)
LINK_TIME = {"traces": "t.started_at"}


# bench_serving prints floats with two decimals: a console value equals its JSONL value
# to that precision
CONSOLE_PRECISION = 0.0051
_DUPLICATES_SQL = f"""
UPDATE bench_results SET duplicate_of = d.record
FROM (
    SELECT c.source_path, c.line_no,
           min(j.source_path || ':' || j.line_no) AS record
    FROM bench_results c JOIN bench_results j
      ON c.run_id = j.run_id AND c.format = 'console' AND j.format = 'jsonl'
     AND c.completed = j.completed
     AND abs(c.duration_s - j.duration_s) <= {CONSOLE_PRECISION}
     AND abs(c.output_throughput - j.output_throughput) <= {CONSOLE_PRECISION}
     AND (c.total_output_tokens IS NULL OR c.total_output_tokens = j.total_output_tokens)
    GROUP BY ALL
) d
WHERE bench_results.source_path = d.source_path AND bench_results.line_no = d.line_no
  AND bench_results.duplicate_of IS DISTINCT FROM d.record
"""


def mark_duplicate_benchmarks(store: Store) -> None:
    """One benchmark, one result: a console summary whose run also has the JSONL record of
    the same measurement (same counts and duration, values equal to the console's printed
    precision) names that record in ``duplicate_of``; the JSONL row is the one kept."""
    store.con.execute("UPDATE bench_results SET duplicate_of = NULL WHERE duplicate_of IS NOT "
                      "NULL AND run_id IS NULL")
    store.con.execute(_DUPLICATES_SQL)


def link_records(store: Store) -> list[str]:
    """Link benchmark records and phase dumps to the server run they measured; returns the
    unlinked benchmark records (``path:line``).

    Explicit links (``--run``) are kept.  A trace whose profile id one run's "Profiling
    starts" line names goes to that run (``profile id``).  Otherwise, per file: the only
    run whose log lies in the same folder (``same folder``), else the run in that folder
    whose time span contains the file's time (``time window``: a trace's first event,
    other files' modification time).  A run whose phase dump was taken with device
    synchronisation is marked profiled.
    """
    by_profile_id = link_by_profile_id(store)
    runs = store.all("SELECT run_id, source_path, started_at, ended_at, utc_offset_s FROM runs")
    by_folder: dict[str, list[tuple[str, Any, Any]]] = {}
    for run_id, src, start, end, offset in runs:  # spans as instants (one clock)
        by_folder.setdefault(str(Path(src).parent), []).append(
            (run_id, clock.to_utc(start, offset), clock.to_utc(end, offset)))
    for table in LINKED_TABLES:
        files = store.all(
            f"SELECT DISTINCT t.source_path, {LINK_TIME.get(table, 'NULL')}, s.mtime "
            f"FROM {table} t JOIN sources s ON s.path = t.source_path "
            f"WHERE coalesce(t.link_method, '') NOT IN ('explicit', '{IN_LOG}')")
        for src, utc_time, local_mtime in files:
            # a trace's first event is UTC; a file's modification time is this host's
            mtime = utc_time if utc_time is not None else clock.file_time_utc(local_mtime)
            if src in by_profile_id:
                continue
            candidates = by_folder.get(str(Path(src).parent), [])
            run_id, method = None, None
            if len(candidates) == 1:
                run_id, method = candidates[0][0], "same folder"
            else:
                inside = [c for c in candidates if c[1] is not None and c[2] is not None
                          and c[1] <= mtime <= c[2]]
                if len(inside) == 1:
                    run_id, method = inside[0][0], "time window"
            store.con.execute(f"UPDATE {table} SET run_id = ?, link_method = ? "
                              "WHERE source_path = ?", [run_id, method, src])
    mark_duplicate_benchmarks(store)
    unlinked = [f"{src}:{line}" for src, line in store.all(
        "SELECT source_path, line_no FROM bench_results WHERE run_id IS NULL "
        "AND duplicate_of IS NULL ORDER BY 1, 2")]
    # server_info names the SGLang release the benchmark ran against (0.5.5+)
    store.con.execute(
        "UPDATE runs SET engine_version = v.version FROM (SELECT run_id, "
        "min(sglang_version) AS version FROM bench_results WHERE sglang_version IS NOT NULL "
        "GROUP BY run_id) v WHERE runs.run_id = v.run_id AND runs.engine_version IS NULL")
    store.con.execute(
        "UPDATE runs SET profiled = true WHERE run_id IN "
        "(SELECT run_id FROM phase_timings WHERE synchronized AND run_id IS NOT NULL)")
    return unlinked
