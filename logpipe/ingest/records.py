"""Files read whole: benchmark results, phase dumps, request metrics, profiler traces."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

from logpipe.ingest.base import PARSER_VERSION, EnvOptions, FileResult
from logpipe.ingest.changes import HEAD_HASH_BYTES, TAIL_HASH_BYTES, same_bytes
from logpipe.readers import open_binary
from logpipe.sources import Source, torch_trace
from logpipe.store import Store
from logpipe.traces import ingest_trace as read_trace


def ingest_records(store: Store, path: Path, key: str, source: Source,
                   options: EnvOptions) -> FileResult:
    """Small record files (benchmark results, phase dumps, request metrics): parsed whole
    by their kind's ``parse`` into its ``table``, replaced whole on change."""
    kind = source.name
    assert source.parse is not None and source.table is not None
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
    import polars as pl  # (here: an unchanged file needs none)

    status = "new" if existing is None else "rewritten"
    if existing is not None:
        store.delete_source(key)
    text = data.decode("utf-8", errors="replace")
    table = source.table
    rows, rejects = source.parse(text, options.keep_request_text)
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


def ingest_trace(store: Store, path: Path, key: str, options: EnvOptions) -> FileResult:
    existing = store.source(key)
    stat = path.stat()
    mtime = datetime.fromtimestamp(stat.st_mtime)
    if existing is not None and existing["mtime"] != mtime and same_bytes(path, stat,
                                                                          existing):
        # the same bytes with a new mtime: not read again, as a log of the same bytes is
        # not; the new mtime is kept, for the next ingest to tell it by its stat
        store.upsert_source({"path": key, "mtime": mtime})
        return FileResult(key, "unchanged", kind=torch_trace.SOURCE.name)
    status, rows, events, note = read_trace(store, path, key, existing, PARSER_VERSION)
    if options.bench_run and status != "unchanged":
        from logpipe.query import resolve_run

        store.link("traces", key, resolve_run(store, options.bench_run), "explicit")
    res = FileResult(key, status, kind=torch_trace.SOURCE.name, lines=events, detail=note)
    res.rows.update(rows)
    return res
