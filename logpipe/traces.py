"""Storing PyTorch profiler traces: ``traces``, ``trace_kernels``, ``trace_annotations``
and ``trace_ops`` (``schemas/migrations/0007_torch_traces.sql``).

A trace is read streaming (:mod:`logpipe.sources.torch_trace`) and written batch by batch
inside the file's transaction, so memory does not grow with the file.  Once its events are
in, each kernel is given the user annotation (``record_function`` range) and the
``ProfilerStep#N`` around it, in SQL: first from the GPU-side copy of the annotation on
the kernel's own stream, else from the CPU-side annotation around the runtime call that
launched it (matched by correlation id).  Nested annotations resolve to the one that
started last, provided it still covers the kernel.

A trace is replaced whole when its bytes change; an unchanged file (same size and
modification time) is not read again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from logpipe.env import Entry, Rendered, RunEnv, Tiers, render
from logpipe.errors import InputError
from logpipe.readers import open_binary
from logpipe.sources import torch_trace
from logpipe.sources.torch_trace import TraceFormatError, TraceSummary, row_schema
from logpipe.store import Spool, Store

if TYPE_CHECKING:  # polars is imported where rows are built: linking and unchanged
    import polars as pl  # traces need none

TRACE_TABLES = ("trace_kernels", "trace_annotations", "trace_ops")

class _Hashing:
    """A reader that feeds what it reads to a SHA-256 and counts the bytes."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.sha = hashlib.sha256()
        self.head = hashlib.sha256()
        self.bytes = 0

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        if self.bytes < 4096:
            self.head.update(data[: 4096 - self.bytes])
        self.sha.update(data)
        self.bytes += len(data)
        return data


def _frame(table: str, rows: list[tuple[Any, ...]], base_us: float | None) -> pl.DataFrame:
    import polars as pl

    frame = pl.DataFrame(rows, schema=row_schema(table), orient="row")
    if base_us is not None:
        ts = (pl.col("ts_us") + base_us)
    else:  # traces without a base time: epoch microseconds when they look like it
        ts = pl.when(pl.col("ts_us") > 1e15).then(pl.col("ts_us"))
    return frame.with_columns(ts.cast(pl.Int64).cast(pl.Datetime("us")).alias("ts"))


def ingest_trace(store: Store, path: Path, key: str, existing: dict[str, Any] | None,
                 parser_version: str) -> tuple[str, dict[str, int], int, str | None]:
    """Read ``path`` into the trace tables (inside the caller's transaction).

    Returns ``(status, rows per table, events, note)``; raises :class:`InputError` naming
    the line of a malformed trace (the caller's transaction then leaves nothing behind).
    """
    stat = path.stat()
    if existing is not None and existing["size_bytes"] == stat.st_size and \
            existing["mtime"] == datetime.fromtimestamp(stat.st_mtime):
        return "unchanged", {}, 0, None
    if existing is not None:
        store.delete_source(key)
    status = "new" if existing is None else "rewritten"
    summary = TraceSummary()
    rows = dict.fromkeys(TRACE_TABLES, 0)
    with open_binary(path) as raw, Spool(store) as spool:
        fh = _Hashing(raw)
        try:
            for batch in torch_trace.read_trace(fh, summary):  # type: ignore[arg-type]
                base = torch_trace.base_time_us(summary.metadata)
                for table, part in (("trace_kernels", batch.kernels),
                                    ("trace_annotations", batch.annotations),
                                    ("trace_ops", batch.ops)):
                    if part:
                        rows[table] += spool.add(table, _frame(table, part, base),
                                                 source_path=key)
            spool.load(["trace_annotations", "trace_ops"])
            _load_kernels(store, spool, key)
        except TraceFormatError as exc:
            raise InputError(f"malformed trace: {exc}", path=path, line=exc.line,
                             hint="a trace is one JSON object; was the file cut or edited?"
                             ) from None
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read trace: {exc}", path=path) from None
    note = None
    rejects = [(n, reason, raw) for n, reason, raw in summary.bad_events]
    if summary.truncated_at is not None:
        note = f"trace ends early at line {summary.truncated_at}: kept {summary.events} events"
        rejects.append((summary.truncated_at, "trace ends before traceEvents is closed "
                        "(cut off while being written?)", ""))
    if rejects:
        import polars as pl

        rows["rejects"] = store.insert("rejects", pl.DataFrame(
            rejects, schema={"line_no": pl.Int64, "reason": pl.String, "raw": pl.String},
            orient="row"), source_path=key)
    _store_trace_row(store, path, key, summary)
    store.upsert_source({
        "path": key, "kind": torch_trace.SOURCE.name, "size_bytes": stat.st_size,
        "sha256": fh.sha.hexdigest(), "bytes_ingested": fh.bytes, "lines": 0,
        "rejected": len(rejects), "noise_lines": summary.skipped,
        "ingested_at": datetime.now(), "parser_version": parser_version,
        "head_sha256": fh.head.hexdigest(), "tail_sha256": None,
        "mtime": datetime.fromtimestamp(stat.st_mtime), "state": None,
    })
    return status, rows, summary.events, note


def _store_trace_row(store: Store, path: Path, key: str, summary: TraceSummary) -> None:
    meta = dict(summary.metadata)
    parts = torch_trace.name_parts(path.name)
    devices = meta.pop("deviceProperties", None)
    dist = meta.pop("distributedInfo", None)
    version = meta.pop("schemaVersion", None)
    span = store.one(
        "SELECT min(ts), max(ts + to_microseconds(CAST(coalesce(dur_us, 0) AS BIGINT))) "
        "FROM (SELECT ts, dur_us FROM trace_kernels WHERE source_path = $1 UNION ALL "
        "SELECT ts, dur_us FROM trace_annotations WHERE source_path = $1 UNION ALL "
        "SELECT ts, dur_us FROM trace_ops WHERE source_path = $1)", [key])
    started, ended = span if span else (None, None)
    store.con.execute(
        "INSERT INTO logpipe_internal.traces (source_id, profile_id, tp_rank, dp_rank, "
        "pp_rank, ep_rank, stage, merged, started_at, ended_at, schema_version, device_properties, "
        "distributed_info, metadata, events, kernels, annotations, ops, skipped) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [store.source_id(key), parts["profile_id"], parts["tp_rank"], parts["dp_rank"],
         parts["pp_rank"], parts["ep_rank"], parts["stage"], parts["merged"], started, ended,
         version if isinstance(version, int) else None,
         json.dumps(devices) if devices is not None else None,
         json.dumps(dist) if dist is not None else None,
         json.dumps(meta, default=str), summary.events, summary.kernels,
         summary.annotations, summary.ops, summary.skipped])


ANNOTATE_SQL = """
SELECT {cols}, coalesce(gpu.name, cpu.name) AS annotation, step.name AS step
FROM k
LEFT JOIN (
    SELECT kl.event_no, CASE WHEN kl.ts_us < a.end_us THEN a.name END AS name
    FROM kl ASOF LEFT JOIN (SELECT * FROM spans WHERE side = 'gpu' AND NOT is_step) a
      ON a.pid = kl.device AND a.tid = kl.stream AND kl.ts_us >= a.ts_us
) gpu USING (event_no)
LEFT JOIN (
    SELECT kl.event_no, CASE WHEN kl.launch_us < a.end_us THEN a.name END AS name
    FROM kl ASOF LEFT JOIN (SELECT * FROM spans WHERE side = 'cpu' AND NOT is_step) a
      ON a.pid = kl.lpid AND a.tid = kl.ltid AND kl.launch_us >= a.ts_us
) cpu USING (event_no)
LEFT JOIN (
    SELECT kl.event_no, CASE WHEN kl.launch_us < a.end_us THEN a.name END AS name
    FROM kl ASOF LEFT JOIN (SELECT * FROM spans WHERE side = 'cpu' AND is_step) a
      ON a.pid = kl.lpid AND a.tid = kl.ltid AND kl.launch_us >= a.ts_us
) step USING (event_no)
"""
ANNOTATE_CTES = """
WITH k AS (SELECT * FROM read_parquet($2, union_by_name = true)),
launch AS (
    SELECT correlation, arg_min(pid, ts_us) AS pid, arg_min(tid, ts_us) AS tid,
           min(ts_us) AS ts_us
    FROM trace_ops
    WHERE source_path = $1 AND correlation IS NOT NULL
      AND category IN ('cuda_runtime', 'cuda_driver')
    GROUP BY correlation
),
spans AS (
    SELECT side, starts_with(name, 'ProfilerStep#') AS is_step, pid, tid, ts_us,
           ts_us + coalesce(dur_us, 0) AS end_us, name
    FROM trace_annotations WHERE source_path = $1
),
kl AS (
    SELECT k.event_no, k.ts_us, CAST(k.device AS VARCHAR) AS device,
           CAST(k.stream AS VARCHAR) AS stream, l.pid AS lpid, l.tid AS ltid,
           l.ts_us AS launch_us
    FROM k LEFT JOIN launch l USING (correlation)
)
"""


def _load_kernels(store: Store, spool: Spool, key: str) -> None:
    """Insert the spooled kernels of ``key`` with the annotation and step around each.

    Done in the one ``INSERT ... SELECT`` that loads them (the trace's annotations and
    runtime calls are already in): updating them afterwards would hold every changed row
    in the transaction's memory.
    """
    files = spool.files("trace_kernels")
    if not files:
        return
    cols = spool.columns("trace_kernels")
    select = ANNOTATE_SQL.format(cols=", ".join(f"k.{c}" for c in cols))
    # the joins that attribute kernels spill to disk past this instead of growing with
    # the trace (a 300 MB trace: 626 MB peak without it)
    with store.memory_bound(KERNEL_JOIN_MEMORY):
        store.con.execute(
            f"INSERT INTO logpipe_internal.trace_kernels ({', '.join(cols)}, annotation, "
            f"step) SELECT * FROM ({ANNOTATE_CTES} {select})", [key, files])


KERNEL_JOIN_MEMORY = "256MB"


PROFILE_ID_SQL = r"""
SELECT t.source_path, e.run_id
FROM traces t JOIN events e ON e.kind = 'profiling_start'
 AND t.profile_id IS NOT NULL
 AND (t.profile_id = regexp_extract(e.message, 'profile id: ([^)\s]+)', 1)
      OR ends_with(t.profile_id, '-' || regexp_extract(e.message, 'profile id: ([^)\s]+)', 1)))
WHERE t.link_method IS DISTINCT FROM 'explicit'
"""


def link_by_profile_id(store: Store) -> set[str]:
    """Link traces whose profile id a run's ``Profiling starts ... (with profile id: X)``
    line names; returns the trace paths so linked."""
    linked: dict[str, set[str]] = {}
    for src, run_id in store.all(PROFILE_ID_SQL):
        linked.setdefault(src, set()).add(run_id)
    done = set()
    for src, runs in linked.items():
        if len(runs) == 1:
            store.link("traces", src, next(iter(runs)), "profile id")
            done.add(src)
    return done


def apply_trace_env(store: Store, tiers: Tiers) -> None:
    """Add the device facts of each run's linked traces to its environment.

    A fact fills a key the run lacks (source ``trace <file>``); where the run already has
    the key with another value, the existing value stays and the disagreement is noted.
    (A run with a trace is profiled: a trace exists only while a profiler ran;
    :meth:`Store.derive_profiled` says so.)
    """
    # (no trace, no facts: the join below reads every run's environment, ~20 ms of each
    # ingest of a folder of 1,600 launches)
    if not store.all("SELECT 1 FROM traces LIMIT 1"):
        return
    rows = store.all(
        "SELECT t.run_id, t.source_path, t.device_properties, t.distributed_info, "
        "t.metadata, r.env FROM traces t JOIN runs r USING (run_id) ORDER BY 1, 2")
    by_run: dict[str, tuple[str | None, list[tuple[str, dict[str, Any]]]]] = {}
    for run_id, src, devices, dist, meta, env_json in rows:
        metadata = json.loads(meta) if meta else {}
        metadata["deviceProperties"] = json.loads(devices) if devices else None
        metadata["distributedInfo"] = json.loads(dist) if dist else None
        by_run.setdefault(run_id, (env_json, []))[1].append(
            (Path(src).name, torch_trace.device_facts(metadata)))
    updates: list[tuple[str, Rendered, dict[str, Any]]] = []
    for run_id, (env_json, facts) in by_run.items():
        env = RunEnv.from_json(env_json)
        changed = False
        for name, found in facts:
            for key, value in found.items():
                entry = env.entries.get(key)
                source = f"trace {name}"
                if entry is None or entry.source.startswith("trace "):
                    if entry is None or entry.value != value:
                        env.entries[key] = Entry(value, source, tiers.tier(key))
                        changed = True
                elif str(entry.value) != str(value) and not entry.conflict:
                    env.entries[key] = dataclasses.replace(
                        entry, conflict=f"{source} says {value!r}")
                    changed = True
        if changed:
            updates.append((run_id, render(env), {}))
    store.set_run_envs(updates)
