"""``logpipe doctor FILE``: what a file gave and what it did not, without a database.

What a user runs when a number looks wrong: for a server log, how many lines of each kind
were found, which wrappers were peeled off them, the rejected lines with their reasons,
and the lines that say ``batch`` or ``throughput`` but were not read — so it is plain at
once whether anything was lost.  Parsing is the ingest's own (the polars parser, which
the C fast lane matches row for row).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from logpipe.engines import engine_for_kind
from logpipe.engines.sglang.parser import NAME as SGLANG
from logpipe.engines.sglang.parser import (
    RECORD_LIKE_RE,
    LogState,
    finish_chunk,
    prepare_chunk,
)
from logpipe.engines.sglang.parser import sniff as sglang_sniff
from logpipe.errors import InputError
from logpipe.readers import line_blocks, open_binary, read_head, take_damage
from logpipe.sources import HEAD_BYTES, deep_window, detect, load

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


@dataclass
class Diagnosis:
    path: str
    kind: str | None
    lines: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    events: dict[str, int] = field(default_factory=dict)
    wrappers: dict[str, int] = field(default_factory=dict)
    rejects: list[tuple[int, str, str]] = field(default_factory=list)
    unread: list[tuple[int, str]] = field(default_factory=list)
    unread_total: int = 0
    rejects_total: int = 0
    display: str | None = None
    """The engine whose server log it is (``SGLang``, ``vLLM``)."""
    damaged: str | None = None
    """What is wrong with a compressed file that ends in damage (the lines before it are
    what ingest reads)."""


def diagnose(path: Path) -> Diagnosis:
    """Parse ``path`` as ingest would and say what came of each line."""
    if not path.is_file():
        raise InputError("no such file", path=path)
    take_damage(path)
    d = _diagnose(path)
    d.damaged = take_damage(path)
    return d


def _diagnose(path: Path) -> Diagnosis:
    try:
        raw_head = read_head(path, HEAD_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read: {exc}", path=path) from exc
    head = raw_head.decode("utf-8", errors="replace")
    source = detect(head)
    if source is None:
        found = deep_window(path)
        if found is not None and detect(found[1]) is not None:
            head, source = found[1], detect(found[1])
    kind = source.name if source else None
    if kind != SGLANG and sglang_sniff(head):
        kind = SGLANG
    d = Diagnosis(str(path), kind)
    engine = engine_for_kind(kind) if kind else None
    d.display = engine.display if engine is not None else None
    if engine is not None and engine.diagnose is not None:
        for name, value in load(engine.diagnose)(path).items():
            setattr(d, name, value)
        return d
    if kind != SGLANG:
        return d
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
            d.rejects_total += chunk.rejects.height
            for row in chunk.rejects.head(SHOWN - len(d.rejects)).iter_rows():
                d.rejects.append((int(row[1]), str(row[2]), str(row[3])[:200]))
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
                d.unread_total += 1
                if len(d.unread) < SHOWN:
                    d.unread.append((int(n), str(raw).replace("\r", "")[:200]))
    d.lines = state.lines
    d.counts = dict(counts)
    d.events = dict(events)
    d.wrappers = dict(wrappers)
    return d


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
