"""A blank database migrates to exactly the documented schema."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from logpipe.store import Store, migrations
from tests.conftest import ROOT


def documented() -> dict[str, list[tuple[str, str]]]:
    text = (ROOT / "schemas" / "README.md").read_text().split("\n## Views")[0]
    tables: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^### `(\w+)`", line)
        if m:
            current = m.group(1)
            tables[current] = []
            continue
        m = re.match(r"^\| (\w+) \| ([A-Z]+(?:\[\])?) \|", line)
        if m and current:
            tables[current].append((m.group(1), m.group(2)))
    return tables


def test_blank_database_has_documented_columns(db: Path) -> None:
    docs = documented()
    assert set(docs) == {"sources", "runs", "run_env", "batches", "events",
                         "http_requests", "rejects", "bench_results", "phase_timings",
                         "request_metrics", "traces", "trace_kernels", "trace_annotations",
                         "trace_ops", "line_prefixes", "vllm_stats", "vllm_spec_metrics",
                         "metric_snapshots"}
    with Store.open(db) as store:
        for table, columns in docs.items():
            assert store.columns(table) == columns, table


def test_migrations_are_recorded_and_not_reapplied(db: Path) -> None:
    with Store.open(db) as store:
        versions = [v for v, _, _ in migrations()]
        assert store.all("SELECT version FROM logpipe_internal.schema_migrations "
                         "ORDER BY 1") == [
            (v,) for v in versions]
    with Store.open(db) as store:
        assert store.migrate() == []


def test_migration_files_are_numbered_without_gaps() -> None:
    versions = [v for v, _, _ in migrations()]
    assert versions == list(range(1, len(versions) + 1))


def test_documented_views_exist(db: Path) -> None:
    text = (ROOT / "schemas" / "README.md").read_text().split("\n## Views")[1]
    views = re.findall(r"^### `(\w+)`", text, re.M)
    assert views == ["bench_results_all", "server_samples", "batch_states", "steady_decode",
                     "run_pairs",
                     "spec_pairing",
                     "bench_vs_log", "counter_deltas", "level_windows", "level_samples",
                     "phase_summary", "profiling_overhead", "kernel_summary",
                     "kernel_class_summary", "trace_steps", "annotation_summary", "run_summary",
                     "launch_values", "run_configs", "launch_noise", "run_batch_ranges",
                     "run_data_keys"]
    with Store.open(db) as store:
        for view in views:
            assert store.columns(view), view


def test_views_of_float_sums_read_the_same_from_one_query_to_the_next(sample_db: Path
                                                                      ) -> None:
    """A parallel float sum's last digits follow the order the threads finish in: these
    views read differently from one query to the next (2-3 results in 20 queries of the
    samples) until their sums were made exact (decimal durations) or ordered."""
    import duckdb

    con = duckdb.connect(str(sample_db), read_only=True)
    try:
        for view in ("launch_noise", "annotation_summary", "kernel_summary",
                     "kernel_class_summary"):
            results = {repr(con.execute(f"SELECT * FROM {view} ORDER BY ALL").fetchall())
                       for _ in range(20)}
            rows = con.execute(f"SELECT count(*) FROM {view}").fetchone()
            assert rows is not None and rows[0] > 0, view  # (zero rows would prove nothing)
            assert len(results) == 1, view
    finally:
        con.close()


def _catalog(db: Path) -> list[tuple]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return [*con.execute(
            "SELECT schema_name, table_name, sql FROM duckdb_tables() ORDER BY ALL").fetchall(),
            *con.execute("SELECT schema_name, view_name, sql FROM duckdb_views() "
                         "WHERE NOT internal ORDER BY ALL").fetchall(),
            *con.execute("SELECT schema_name, function_name, macro_definition "
                         "FROM duckdb_functions() WHERE function_type LIKE '%macro' "
                         "AND NOT internal ORDER BY ALL").fetchall(),
            *con.execute("SELECT version, name FROM logpipe_internal.schema_migrations "
                        "ORDER BY 1").fetchall(),
            *con.execute("SELECT engine, version, name FROM logpipe_internal.engine_migrations "
                         "ORDER BY ALL").fetchall(),
            *con.execute("SELECT * FROM logpipe_internal.schema_views").fetchall(),
            *con.execute("SELECT * FROM logpipe_internal.labels ORDER BY ALL").fetchall()]
    finally:
        con.close()


def test_a_new_database_is_a_copy_of_the_empty_one_kept(tmp_path: Path,
                                                        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A new database is a copy of an empty one made once in the cache: the same catalog
    (tables, views, macros, bookkeeping) as one migrated from scratch, stamped when it was
    made; another schema gets its own; an unusable cache leaves new databases migrated as
    before, and a damaged template goes and is made again."""
    from logpipe.store import template

    monkeypatch.setenv("LOGPIPE_CACHE", str(tmp_path / "not-a-folder"))
    (tmp_path / "not-a-folder").write_text("")  # (a cache that cannot be made)
    with Store.open(tmp_path / "scratch.duckdb") as scratch:
        assert not scratch.from_template
        made = scratch.one("SELECT max(applied_at) FROM logpipe_internal.schema_migrations")
    want = _catalog(tmp_path / "scratch.duckdb")
    monkeypatch.setenv("LOGPIPE_CACHE", str(tmp_path / "cache"))
    for name in ("first", "second"):
        with Store.open(tmp_path / f"{name}.duckdb") as store:
            assert store.from_template, name
            assert store.migrate() == []  # (nothing left to apply)
            assert store.one("SELECT min(applied_at) FROM logpipe_internal.schema_migrations"
                             ) > made  # (when it was made, not when its template was)
        assert _catalog(tmp_path / f"{name}.duckdb") == want, name
    kept = template.template_path()
    assert kept.is_file() and kept.parent == tmp_path / "cache"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [kept.name]  # (no leftovers)
    monkeypatch.setattr(template, "schema_key", lambda: "another-schema")
    with Store.open(tmp_path / "third.duckdb") as third:
        assert third.from_template
    damaged = template.template_path()
    assert damaged.name == "empty-another-schema.duckdb" and kept.is_file()
    damaged.write_bytes(b"not a database")
    with Store.open(tmp_path / "fourth.duckdb") as fourth:
        assert not fourth.from_template  # (migrated from scratch)
    assert _catalog(tmp_path / "fourth.duckdb") == want
    assert not damaged.exists()
    with Store.open(tmp_path / "fifth.duckdb") as fifth:
        assert fifth.from_template
    assert not list(tmp_path.glob(".*.tmp*"))


def test_two_processes_making_one_new_database_both_write_into_it(tmp_path: Path) -> None:
    """Two ingests into one new database, the template not made yet: the second waits for
    the first and both files' rows are there (a template copied out of the database in use
    dropped DuckDB's lock on it, and the second wrote beside the first)."""
    import os
    import subprocess
    import sys

    from tests.conftest import SAMPLES

    db = tmp_path / "new.duckdb"
    env = {**os.environ, "LOGPIPE_LOCK_WAIT": "120", "LOGPIPE_CACHE": str(tmp_path / "c")}
    procs = [subprocess.Popen([sys.executable, "-m", "logpipe.cli", "ingest",
                               str(SAMPLES / "real-cpu" / d), "--db", str(db)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
             for d in ("real-cpu-baseline-r1", "real-cpu-baseline-r2")]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        names = {n for (n,) in con.execute("SELECT name FROM runs").fetchall()}
    finally:
        con.close()
    assert names == {"real-cpu-baseline-r1", "real-cpu-baseline-r2"}


def test_an_in_memory_store_leaves_no_file(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``Store.open(":memory:")`` (a fleet's working store) is DuckDB's in-memory
    database: never a copy of the kept empty database written to a file of that name."""
    monkeypatch.chdir(tmp_path)
    with Store.open(":memory:") as store:
        store.con.execute("SELECT count(*) FROM runs").fetchall()
    assert list(tmp_path.iterdir()) == []
