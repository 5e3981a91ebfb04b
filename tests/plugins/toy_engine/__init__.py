"""A toy serving engine, registered the way a third-party engine is: an entry point in the
``logpipe.engines`` group naming :data:`ENGINE`.  Its server prints

    2026-12-02T10:00:00 TOY ready model=/models/toy
    2026-12-02T10:00:01 TOY stats kind=decode running=4 waiting=0 gen_tps=120.5

and its reader writes one run per file with the stats lines as server samples."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from logpipe.engines import Engine
from logpipe.ingest.base import PARSER_VERSION, FileResult
from logpipe.sources import Source
from logpipe.store import Store

LINE_RE = re.compile(r"^(?P<ts>\S+) TOY (?P<what>ready|stats)(?P<rest>.*)$")
KV_RE = re.compile(r"(\w+)=(\S+)")

KIND = Source(name="toy_server_log", description="the toy engine's server log",
              sniff=lambda head: " TOY ready " in head or " TOY stats " in head,
              specificity=15)


def ingest_log(store: Store, path: Path, key: str, kind: str, head: bytes, progress: Any,
               keep_text: bool = False, replace: bool = False) -> FileResult:
    text = path.read_text()
    if store.source(key) is not None:
        store.delete_source(key)
    run_id = hashlib.sha256(key.encode()).hexdigest()[:12]
    samples, rejects, stamps = [], [], []
    for n, line in enumerate(text.splitlines(), 1):
        m = LINE_RE.match(line)
        if m is None:
            rejects.append((n, "not a toy line", line))
            continue
        ts = datetime.fromisoformat(m["ts"])
        stamps.append(ts)
        if m["what"] == "stats":
            kv = dict(KV_RE.findall(m["rest"]))
            samples.append({"line_no": n, "ts": ts, "kind": kv["kind"],
                            "running_req": int(kv["running"]),
                            "queue_req": int(kv["waiting"]),
                            "gen_throughput": float(kv["gen_tps"])})
    store.source_id(key)
    store.add_runs([(run_id, path.stem, key, 1, 1, min(stamps), max(stamps), None, 0)],
                   engine=ENGINE.name)
    res = FileResult(key, "new", kind=kind, lines=len(text.splitlines()))
    res.runs_created = 1
    res.rows["batches"] = store.insert("batches", pl.DataFrame(samples), run_id=run_id,
                                       source_path=key)
    res.rows["rejects"] = store.insert("rejects", pl.DataFrame(
        rejects, schema={"line_no": pl.Int64, "reason": pl.String, "raw": pl.String},
        orient="row"), source_path=key)
    stat = path.stat()
    store.upsert_source({
        "path": key, "kind": kind, "size_bytes": stat.st_size,
        "sha256": hashlib.sha256(text.encode()).hexdigest(), "bytes_ingested": stat.st_size,
        "lines": res.lines, "rejected": len(rejects), "noise_lines": 0,
        "ingested_at": datetime.now(), "parser_version": PARSER_VERSION,
        "head_sha256": None, "tail_sha256": None,
        "mtime": datetime.fromtimestamp(stat.st_mtime), "state": None})
    return res


ENGINE = Engine(name="toy", display="Toy", log_kinds=(KIND,),
                ingest_log="toy_engine:ingest_log", packages=("toy-engine",),
                env_prefixes=("TOY_",), name_words=frozenset({"toy"}))
