"""The schema: the core's and the engines' tables, their migrations, the views over them
(``views.sql`` with the engines' fragments of the samples view) and the public views of
the stored tables."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from logpipe.errors import DatabaseError
from logpipe.resources import schemas_dir

if TYPE_CHECKING:  # polars is imported where frames are written: an ingest of unchanged

    pass


DEFAULT_DB = "logpipe.duckdb"
CORE_TABLES = ("events", "http_requests", "rejects", "bench_results", "phase_timings",
               "request_metrics", "traces", "trace_kernels", "trace_annotations", "trace_ops",
               "metric_snapshots")
"""The stored tables every engine shares; each engine adds its own (``Engine.tables``)."""
LINKED_TABLES = ("bench_results", "phase_timings", "request_metrics", "traces",
                 "metric_snapshots")
"""Tables of record files linked to a server run (``run_id``, ``link_method``)."""
RUN_LINE_TABLES = ("events", "http_requests")
"""The core's tables of one row per record line of a run (each engine adds its
``record_tables``)."""
INTERNAL = "logpipe_internal"
"""Schema of the stored tables, caches and bookkeeping (migration 0017)."""


def data_tables() -> tuple[str, ...]:
    """The tables of rows read from files: the core's, then each engine's."""
    from logpipe.engines import engines

    return (*CORE_TABLES, *(t for e in engines() for t in e.tables))


def record_tables() -> tuple[str, ...]:
    """The tables of one row per record line of a run: the record lines of a run taken
    back (:meth:`Store.unmake_runs`) are its rows here."""
    from logpipe.engines import engines

    return (*(t for e in engines() for t in e.record_tables), *RUN_LINE_TABLES)


def run_tables() -> tuple[str, ...]:
    """The tables whose rows are all of one run's lines (taken back with the run): the
    core's line tables and every engine's own."""
    from logpipe.engines import engines

    return (*RUN_LINE_TABLES, *(t for e in engines() for t in e.tables))


def stored_tables() -> tuple[str, ...]:
    """Tables stored with ``source_id``, shown in ``main`` as views with ``source_path``."""
    return ("runs", *data_tables())


LABEL_SUFFIX = "_code"
"""A stored column ``<name>_code`` holds the ``label_id`` of ``<name>``'s text in
``logpipe_internal.labels`` (a text that repeats on nearly every row, stored once)."""
FEW_LABELS = 8
"""Up to this many distinct texts, a column is coded by comparisons, not a hash per row."""
DATA_VIEWS_VERSION = "4"
"""Changes when :func:`data_view_sql` does, so that the views are recreated."""


def stored(table: str) -> str:
    """Where rows of ``table`` are written: ``logpipe_internal.<table>`` for the stored
    tables and the caches, the name itself for ``sources`` and ``run_env``."""
    return f"{INTERNAL}.{table}" if table not in ("sources", "run_env") else table


def data_view_sql(table: str, columns: list[str]) -> str:
    """The public view of a stored table: its columns in order, ``source_path`` (the
    file's path from ``sources``) where the table has ``source_id``, and the text of each
    ``<name>_code`` column (its row in ``labels``, migration 0019) as ``<name>``, and the
    columns kept beside its rows (:data:`SIDE_COLUMNS`) in their places.

    One join per coded column: a list of every label indexed per row was faster alone, but
    where DuckDB carries the list through another join it copies it for every row."""
    select: list[str] = []
    joins: list[str] = []
    side = SIDE_COLUMNS.get(table)
    for c in columns:
        if c == "source_id":
            select.append("s.path AS source_path")
        elif c.endswith(LABEL_SUFFIX):
            alias = f"l{len(joins)}"
            select.append(f"{alias}.label AS {c[:-len(LABEL_SUFFIX)]}")
            joins.append(f" LEFT JOIN {INTERNAL}.labels {alias} ON {alias}.label_id = t.{c}")
        else:
            select.append(f"t.{c}")
        if side is not None:
            select += [f"coalesce(e.{name}, {default}) AS {name}" if default else
                       f"e.{name} AS {name}"
                       for name, (after, default) in side[1].items() if after == c]
    if side is not None:
        joins.append(f" LEFT JOIN {INTERNAL}.{side[0]} e ON e.run_id = t.run_id")
    name = ALL_ROWS_VIEWS.get(table, table)
    sql = (f"CREATE OR REPLACE VIEW main.{name} AS SELECT {', '.join(select)} "
           f"FROM {INTERNAL}.{table} t LEFT JOIN main.sources s USING (source_id)"
           + "".join(joins))
    if name != table:
        sql += f"; {one_row_view_sql(table)}"
    return sql


RUN_ENV_TABLES = ("run_env", f"{INTERNAL}.run_envs")
"""Where a run's environment is kept besides its row (keyed by ``run_id``): its entries as
rows, and ``runs.env`` with its fingerprint (:data:`SIDE_COLUMNS`); written together
(:meth:`logpipe.store.runs.RunRows.set_run_envs`) and taken with the run."""

SIDE_COLUMNS: dict[str, tuple[str, dict[str, tuple[str, str | None]]]] = {
    "runs": ("run_envs", {"env_fingerprint": ("role", None),
                          "env": ("server_args_raw", "'{}'::JSON")}),
}
"""Columns of a public view kept in a table of their own, one row per run (migration
0027): ``{table: (side table, {column: (the column it follows, its value without a
row, None: NULL)})}``.  A run's environment is ~50 KB and written after its row: in
``runs`` itself that was the row written again whole
(:data:`logpipe.store.runs.WIDE_RUN_COLUMNS`)."""

ALL_ROWS_VIEWS = {"bench_results": "bench_results_all"}
"""Tables whose public view keeps one row per measurement: ``bench_results`` leaves out a
console summary that repeats a JSONL record of the same benchmark (``duplicate_of``), so
``avg(...) FROM bench_results`` is right without a filter; ``bench_results_all`` has
both."""


def one_row_view_sql(table: str) -> str:
    return (f"CREATE OR REPLACE VIEW main.{table} AS SELECT * FROM "
            f"main.{ALL_ROWS_VIEWS[table]} WHERE duplicate_of IS NULL")




def migrations() -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for every migration file, in order."""
    folder = schemas_dir() / "migrations"
    if not folder.is_dir():
        raise DatabaseError("schema migrations not found", path=folder,
                            hint="the installation is incomplete (schemas/ ships inside "
                            "the package): reinstall logpipe, or set LOGPIPE_SCHEMAS")
    out = []
    for path in sorted(folder.glob("*.sql")):
        version = int(path.name.split("_", 1)[0])
        out.append((version, path.stem, path.read_text()))
    return out


SAMPLE_COLUMNS = ("run_id", "source_path", "line_no", "ts", "kind", "rank_tag", "running_req",
                  "running_now", "queue_req", "gen_throughput", "input_throughput",
                  "accept_len", "accept_rate", "token_usage", "cuda_graph")
"""The columns of ``run_samples(rid)``, in order: each engine's fragment gives them."""
ENGINE_SAMPLES = "-- @engine_samples"
"""Where ``views.sql`` takes the engines' fragments of ``run_samples``."""


def views_sql() -> str | None:
    """``views.sql`` with every engine's fragment of the samples view in place (None
    where the package has no views)."""
    from logpipe.engines import engines, resource

    views = schemas_dir() / "views.sql"
    if not views.exists():
        return None
    cols = ", ".join(SAMPLE_COLUMNS)
    parts = [f"SELECT {cols} FROM (\n{resource(e.samples_sql).read_text().strip()}\n)"
             for e in engines() if e.samples_sql]
    return views.read_text().replace(ENGINE_SAMPLES, "\nUNION ALL\n".join(parts))


def engine_migrations() -> list[tuple[str, int, str, str]]:
    """``(engine, version, name, sql)`` for every engine's own migrations, applied after
    the core's in the order of the engines and of their numbers."""
    from logpipe.engines import engines, resource

    out = []
    for engine in engines():
        if engine.migrations is None:
            continue
        for path in sorted(resource(engine.migrations).glob("*.sql")):
            out.append((engine.name, int(path.name.split("_", 1)[0]), path.stem,
                        path.read_text()))
    return out


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def views_key(views_sql: str) -> str:
    """What the views were made from: ``views.sql`` and the data views' definition."""
    return _sha256(f"{DATA_VIEWS_VERSION}\n{views_sql}")
