"""The ways rows reach the database give the same tables: a file's rows held in memory and
inserted at once, or spooled to Parquet and loaded (a large file), are the same rows in
every public table, a profiler trace included."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from logpipe.ingest import ingest_paths
from logpipe.store import spool

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
# what differs by construction between two ingests of the same files
VOLATILE = ("ingested_at", "mtime", "device", "inode")


def _tables(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [n for (n,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_catalog = current_database() ORDER BY 1").fetchall()]
        out = {}
        for name in names:
            cols = [c for (c, *_) in con.execute(f"DESCRIBE main.{name}").fetchall()
                    if c not in VOLATILE]
            quoted = ", ".join(f'"{c}"' for c in cols)
            rows = con.execute(f"SELECT {quoted} FROM main.{name}").fetchall()
            # unordered tables; sums over them (summaries) may differ in the last bits
            out[name] = sorted((tuple(round(v, 6) if isinstance(v, float) else v for v in r)
                                for r in rows), key=repr)
        return out
    finally:
        con.close()


def test_held_and_spooled_rows_are_the_same_tables(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    logs = tmp_path / "logs"
    for part in ("real-gpu-profiled", "mission"):
        shutil.copytree(SAMPLES / part, logs / part)
    held, spooled = tmp_path / "held.duckdb", tmp_path / "spooled.duckdb"
    ingest_paths([logs], held)
    monkeypatch.setattr(spool, "HELD_BYTES", 0)  # every frame goes to Parquet at once
    ingest_paths([logs], spooled)
    a, b = _tables(held), _tables(spooled)
    assert a.keys() == b.keys()
    assert sum(len(v) for v in a.values()) > 10_000  # not vacuous: batches and a trace
    assert a["trace_kernels"] and a["batches"]
    for name in a:
        assert a[name] == b[name], name


def test_the_database_memory_bound_is_applied_and_rows_are_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "mission", logs / "mission")
    free, bounded = tmp_path / "free.duckdb", tmp_path / "bounded.duckdb"
    ingest_paths([logs], free)
    monkeypatch.setenv("LOGPIPE_DUCKDB_MEMORY", "300MB")
    ingest_paths([logs], bounded)
    from logpipe.store import Store

    with Store.open(bounded) as store:
        (limit,) = store.one("SELECT current_setting('memory_limit')") or ("",)
    assert limit == "286.1 MiB"  # 300 MB as DuckDB prints it (unbounded: ~80% of the RAM)
    assert _tables(free) == _tables(bounded)
