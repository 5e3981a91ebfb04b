"""What ``logpipe doctor`` says of an SGLang log: every line parsed as ingest parses it
(the polars parser, which the C fast lane matches row for row), with counts by what it
became, the wrappers peeled off, and the record-like lines nothing read."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from logpipe.engines.sglang.parser import RECORD_LIKE_RE, LogState, finish_chunk, prepare_chunk
from logpipe.readers import line_blocks, open_binary

SHOWN = 20
"""Lines listed per section (the counts are always complete)."""
BLOCK = 8 * 1024 * 1024
# which wrapper a line came in, in the order they are peeled (outermost first)
WRAPPERS = (("wts", "container runtime stamp (docker --timestamps)"),
            ("actor", "Ray actor prefix"),
            ("pyts", "Python-logging or host-logger stamp"),
            ("outer", "outer prefix found by SGLang's signature"),
            ("gpu_rank", "pre-0.2.14 [gpu_id=N] rank"),
            ("indent", "indentation"))


def diagnose(path: Path) -> dict[str, Any]:
    """``lines, counts, events, wrappers, rejects, rejects_total, unread, unread_total``
    of ``path``."""
    rejects: list[tuple[int, str, str]] = []
    unread: list[tuple[int, str]] = []
    rejects_total = unread_total = 0
    state, line_no = LogState(), 1
    fallback = datetime.fromtimestamp(path.stat().st_mtime).date().isoformat()
    counts: Counter[str] = Counter()
    events: Counter[str] = Counter()
    wrappers: Counter[str] = Counter()
    with open_binary(path) as fh:
        for block in line_blocks(fh, BLOCK):
            text = block.decode("utf-8", errors="replace")
            prepared = prepare_chunk(text, line_no, fallback)
            line_no += block.count(b"\n")
            lines = prepared.lines
            chunk = finish_chunk(prepared, state)
            counts.update({"batch lines": chunk.batches.height, "events": chunk.events.height,
                           "HTTP access lines": chunk.http.height,
                           "request records": chunk.requests.height,
                           "phase records": chunk.phases.height,
                           "rejected": chunk.rejects.height, "noise": chunk.noise})
            events.update(chunk.events["kind"].to_list())
            rejects_total += chunk.rejects.height
            for row in chunk.rejects.head(SHOWN - len(rejects)).iter_rows():
                rejects.append((int(row[1]), str(row[2]), str(row[3])[:200]))
            read = set(chunk.batches["line_no"].to_list()) | set(chunk.events["line_no"]
                                                                 .to_list()) \
                | set(chunk.http["line_no"].to_list()) | set(chunk.rejects["line_no"].to_list())
            if chunk.requests.height:
                read |= set(chunk.requests["line_no"].to_list())
            _count_wrappers(lines.filter(pl.col("line_no").is_in(list(read))), wrappers)
            like = lines.filter(pl.col("msg").str.contains(RECORD_LIKE_RE))
            for n, raw in like.select("line_no", "raw").iter_rows():
                if n in read:
                    continue
                unread_total += 1
                if len(unread) < SHOWN:
                    unread.append((int(n), str(raw).replace("\r", "")[:200]))
    return {"lines": state.lines, "counts": dict(counts), "events": dict(events),
            "wrappers": dict(wrappers), "rejects": rejects, "rejects_total": rejects_total,
            "unread": unread, "unread_total": unread_total}


def _count_wrappers(lines: pl.DataFrame, into: Counter[str]) -> None:
    present = lines.with_columns(
        (pl.col("ranks").fill_null("").str.starts_with("gpu_id=")).alias("gpu_rank"),
        (pl.col("indent").fill_null("") != "").alias("indent")
        if "indent" in lines.columns else pl.lit(False).alias("indent"))
    for column, label in WRAPPERS:
        if column not in present.columns:
            continue
        col = pl.col(column)
        hit = col if present.schema[column] == pl.Boolean else (
            col.is_not_null() & (col.cast(pl.String) != ""))
        n = present.filter(hit).height
        if n:
            into[label] += n
