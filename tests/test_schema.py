"""A blank database migrates to exactly the documented schema."""

from __future__ import annotations

import re
from pathlib import Path

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
    """The first new database is migrated and kept, empty, in the cache; the next ones are
    copies of it, the same catalog (tables, views, macros, bookkeeping) as one migrated
    from scratch, stamped when they were made; another schema gets its own; an unusable
    cache leaves new databases migrated as before, and a damaged template is made again."""
    from logpipe.store import template

    monkeypatch.setenv("LOGPIPE_CACHE", str(tmp_path / "cache"))
    stamps = "SELECT max(applied_at) FROM logpipe_internal.schema_migrations"
    with Store.open(tmp_path / "first.duckdb") as first:
        assert not first.from_template
        made = first.one(stamps)
    kept = template.template_path()
    assert kept.is_file() and kept.parent == tmp_path / "cache"
    with Store.open(tmp_path / "second.duckdb") as second:
        assert second.from_template
        assert second.migrate() == []  # (nothing left to apply)
        assert second.one("SELECT min(applied_at) FROM logpipe_internal.schema_migrations"
                          ) > made  # (when it was made, not when its template was)
    assert _catalog(tmp_path / "second.duckdb") == _catalog(tmp_path / "first.duckdb")
    (tmp_path / "not-a-folder").write_text("")  # (a cache that cannot be made)
    monkeypatch.setenv("LOGPIPE_CACHE", str(tmp_path / "not-a-folder"))
    with Store.open(tmp_path / "third.duckdb") as third:
        assert not third.from_template
    assert _catalog(tmp_path / "third.duckdb") == _catalog(tmp_path / "first.duckdb")
    monkeypatch.setenv("LOGPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(template, "schema_key", lambda: "another-schema")
    with Store.open(tmp_path / "fourth.duckdb") as fourth:
        assert not fourth.from_template  # (made from scratch, and kept as that schema's)
    assert (tmp_path / "cache" / "empty-another-schema.duckdb").is_file()
    assert kept.is_file()
    damaged = template.template_path()  # (that schema's: made from scratch, kept again)
    damaged.write_bytes(b"not a database")
    with Store.open(tmp_path / "fifth.duckdb") as fifth:
        assert not fifth.from_template
    assert _catalog(tmp_path / "fifth.duckdb") == _catalog(tmp_path / "first.duckdb")
    assert damaged.read_bytes() != b"not a database"
    with Store.open(tmp_path / "sixth.duckdb") as sixth:
        assert sixth.from_template
