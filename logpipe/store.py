"""The DuckDB database: schema, migrations, writes and bookkeeping.

Invariants:
- The schema is the numbered SQL files in ``schemas/migrations/``, applied in order and
  recorded in ``schema_migrations``; a shipped file is never edited.  Views are recreated
  from ``schemas/views.sql`` after migrating.
- Every row written carries the file (``source_id``, its row in ``sources``) and line it
  came from.  The stored tables live in the schema ``logpipe_internal`` with the caches
  and bookkeeping; ``main`` holds the public contract: ``sources``, ``run_env``, the views
  of ``views.sql``, and a view of each stored table under its name with ``source_path``
  in place of ``source_id`` (:func:`data_view_sql`).  Write to :func:`stored` names, read
  the public ones.
- Writes of one file happen inside one transaction opened by the caller
  (:meth:`Store.transaction`): a failure leaves the database as it was.
- Large writes go through a :class:`Spool`: rows are spooled to temporary Parquet files
  and loaded with one ``INSERT ... SELECT`` per table at the end of the file.  DuckDB keeps
  many small appends of an open transaction in memory (beyond ``memory_limit``), but
  writes one large insert's row groups straight to the database file, so memory stays
  flat however large the file is.
- Connections never try the network (``autoinstall_known_extensions=False``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from logpipe import interrupts
from logpipe.errors import DatabaseError, QueryError
from logpipe.resources import schemas_dir  # noqa: F401 - re-exported

if TYPE_CHECKING:  # polars is imported where frames are written: an ingest of unchanged
    import polars as pl  # files needs none

    from logpipe.env import RunEnv

DEFAULT_DB = "logpipe.duckdb"
CORE_TABLES = ("events", "http_requests", "rejects", "bench_results", "phase_timings",
               "request_metrics", "traces", "trace_kernels", "trace_annotations", "trace_ops")
"""The stored tables every engine shares; each engine adds its own (``Engine.tables``)."""
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
DATA_VIEWS_VERSION = "3"
"""Changes when :func:`data_view_sql` does, so that the views are recreated."""


def stored(table: str) -> str:
    """Where rows of ``table`` are written: ``logpipe_internal.<table>`` for the stored
    tables and the caches, the name itself for ``sources`` and ``run_env``."""
    return f"{INTERNAL}.{table}" if table not in ("sources", "run_env") else table


def data_view_sql(table: str, columns: list[str]) -> str:
    """The public view of a stored table: its columns in order, ``source_path`` (the
    file's path from ``sources``) where the table has ``source_id``, and the text of each
    ``<name>_code`` column (its row in ``labels``, migration 0019) as ``<name>``.

    One join per coded column: a list of every label indexed per row was faster alone, but
    where DuckDB carries the list through another join it copies it for every row."""
    select: list[str] = []
    joins: list[str] = []
    for c in columns:
        if c == "source_id":
            select.append("s.path AS source_path")
        elif c.endswith(LABEL_SUFFIX):
            alias = f"l{len(joins)}"
            select.append(f"{alias}.label AS {c[:-len(LABEL_SUFFIX)]}")
            joins.append(f" LEFT JOIN {INTERNAL}.labels {alias} ON {alias}.label_id = t.{c}")
        else:
            select.append(f"t.{c}")
    name = ALL_ROWS_VIEWS.get(table, table)
    sql = (f"CREATE OR REPLACE VIEW main.{name} AS SELECT {', '.join(select)} "
           f"FROM {INTERNAL}.{table} t LEFT JOIN main.sources s USING (source_id)"
           + "".join(joins))
    if name != table:
        sql += f"; {one_row_view_sql(table)}"
    return sql


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


def _views_key(views_sql: str) -> str:
    """What the views were made from: ``views.sql`` and the data views' definition."""
    return _sha256(f"{DATA_VIEWS_VERSION}\n{views_sql}")


def _config() -> dict[str, Any]:
    return {"autoinstall_known_extensions": False, "autoload_known_extensions": True}


def lock_wait_s() -> float:
    """How long to wait for a database another process holds (``LOGPIPE_LOCK_WAIT``)."""
    try:
        return float(os.environ.get("LOGPIPE_LOCK_WAIT", "120"))
    except ValueError:
        return 120.0


def readers_waiting(path: str) -> Path:
    """The marker a reader leaves while it waits for a writer to let go of ``path``."""
    return Path(f"{path}.readers-waiting")


def _connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Connect, waiting while another process holds the file (DuckDB allows one process
    to have a database file open for writing, and no reader beside it): a second ingest
    waits for the first to finish, saying so once, then goes on; past the wait it fails
    clearly.  Nothing is written meanwhile, so the file is never corrupted.  A reader
    that waits leaves a marker (:func:`readers_waiting`): an ingest lets go between two
    files when it sees one (:meth:`Store.yield_to_readers`), so the reader gets in and sees
    the last committed state instead of waiting for the whole ingest."""
    deadline = time.monotonic() + lock_wait_s()
    said = False
    marker = readers_waiting(path)
    while True:
        try:
            con = duckdb.connect(path, read_only=read_only, config=_config())
            if read_only and said:
                marker.unlink(missing_ok=True)
            return con
        except duckdb.Error as exc:
            busy = "lock" in str(exc).lower()
            if not busy or time.monotonic() >= deadline:
                raise DatabaseError(
                    f"cannot open database: {' '.join(str(exc).split())}", path=path,
                    hint=("another process holds it (an ingest, or an open DuckDB shell): "
                          "wait for it, or raise LOGPIPE_LOCK_WAIT (seconds)") if busy
                    else "is it a DuckDB file written by DuckDB 2.0 or later?") from exc
            if not said:
                sys.stderr.write(f"logpipe: waiting for {path}: another process holds it "
                                 f"(up to {lock_wait_s():g} s, LOGPIPE_LOCK_WAIT)\n")
                said = True
            if read_only:
                try:
                    marker.write_text(str(os.getpid()))
                except OSError:
                    pass  # a folder it cannot write: it waits for the ingest to end
            time.sleep(0.1 if read_only else 0.25)


class Store:
    """An open logpipe database."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str,
                 read_only: bool = False) -> None:
        self.con = con
        self.path = path
        self.read_only = read_only
        """Opened read-only: nothing may be written through it (a lake's views are read
        only whatever this says)."""
        self._column_types: dict[tuple[str, str], list[tuple[str, str]]] = {}
        """``(name, type)`` of tables and views, asked once (only :meth:`migrate` changes
        them)."""
        self._source_ids: dict[str, int] = {}
        """``source_id`` of paths, known within the open transaction (a file's ingest
        asks for it with every block; a rollback may undo a new file's row)."""
        self._labels: dict[str, int] | None = None
        """``label_id`` of every text in ``labels`` (read once; a rollback may undo new
        ones, and then it is read again)."""

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False) -> Store:
        """Open (creating and migrating unless ``read_only``) the DuckDB file at ``path``
        (a lake is opened by :func:`logpipe.db.open_db`)."""
        path = str(path)
        if read_only and not Path(path).exists():
            raise DatabaseError("database does not exist", path=path,
                                hint="run `logpipe ingest PATH` first, or pass --db")
        con = _connect(path, read_only)
        con.execute("SET enable_progress_bar = false")
        store = cls(con, path, read_only)
        if not read_only:
            store.migrate()
        return store

    @classmethod
    def in_memory(cls, path: str | Path) -> Store:
        """An in-memory database with logpipe's schema, named ``path`` (a lake's views
        are laid over it by :func:`logpipe.lake.open_lake`)."""
        con = duckdb.connect(":memory:", config=_config())
        con.execute("SET enable_progress_bar = false")
        store = cls(con, str(path))
        store.migrate()
        return store

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bookkeeping(self, table: str) -> str | None:
        """Where ``schema_migrations`` / ``schema_views`` live (``main`` before 0017)."""
        for schema in (INTERNAL, "main"):
            if self.one("SELECT 1 FROM duckdb_tables() WHERE schema_name = ? AND "
                        "table_name = ?", [schema, table]):
                return f"{schema}.{table}"
        return None

    def migrate(self) -> list[int]:
        """Apply pending migrations and recreate the views when ``views.sql`` (or the
        schema) changed since they were created; returns the versions applied."""
        con = self.con
        self._column_types.clear()
        if self._bookkeeping("schema_migrations") is None:
            con.execute(
                "CREATE TABLE schema_migrations "
                "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP)"
            )
        done = {r[0] for r in con.execute(
            f"SELECT version FROM {self._bookkeeping('schema_migrations')}").fetchall()}
        pending = [m for m in migrations() if m[0] not in done]
        if pending:  # views are recreated below; a migration may drop what they read
            self._drop_views()
        applied = []
        for version, name, sql in pending:
            with self.transaction():
                con.execute(sql)
                con.execute(f"INSERT INTO {self._bookkeeping('schema_migrations')} "
                            "VALUES (?, ?, now())", [version, name])
            applied.append(version)
        engine_pending = self._engine_pending()
        if engine_pending and not pending:
            self._drop_views()
        for engine, version, name, sql in engine_pending:
            with self.transaction():
                con.execute(sql)
                con.execute(f"INSERT INTO {INTERNAL}.engine_migrations "
                            "VALUES (?, ?, ?, now())", [engine, version, name])
        text = views_sql()
        if text is not None:
            where = self._bookkeeping("schema_views")
            have = con.execute(f"SELECT max(sha256) FROM {where}").fetchone()
            if not applied and not engine_pending and have is not None \
                    and have[0] == _views_key(text):
                return applied  # the views are those of this views.sql already
            with self.transaction():
                self._create_data_views()
                con.execute(text)
                con.execute(f"DELETE FROM {where}")
                con.execute(f"INSERT INTO {where} VALUES (?)", [_views_key(text)])
        return applied

    def _engine_pending(self) -> list[tuple[str, int, str, str]]:
        """The engines' migrations not applied yet (none before migration 0023)."""
        if self.one("SELECT 1 FROM duckdb_tables() WHERE schema_name = ? AND table_name = "
                    "'engine_migrations'", [INTERNAL]) is None:
            return []
        done = set(self.all(f"SELECT engine, version FROM {INTERNAL}.engine_migrations"))
        return [m for m in engine_migrations() if (m[0], m[1]) not in done]

    def _drop_views(self) -> None:
        for (name,) in self.all("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                                "AND schema_name = 'main' AND NOT temporary"):
            self.con.execute(f'DROP VIEW IF EXISTS main."{name}"')

    def _create_data_views(self) -> None:
        if self.one("SELECT 1 FROM duckdb_schemas() WHERE schema_name = ?", [INTERNAL]) is None:
            return  # a database before migration 0017
        for table in stored_tables():
            self.con.execute(data_view_sql(table, [c for c, _ in self.columns(table, INTERNAL)]))

    def outdated(self) -> bool:
        """Whether migrations or views of this logpipe are missing from the database (a
        read-only open applies neither)."""
        try:
            done = {r[0] for r in self.con.execute(
                f"SELECT version FROM {self._bookkeeping('schema_migrations')}").fetchall()}
            have = self.con.execute(
                f"SELECT max(sha256) FROM {self._bookkeeping('schema_views')}").fetchone()
            if self._engine_pending():
                return True
        except duckdb.Error:
            return True
        text = views_sql()
        want = _views_key(text) if text is not None else None
        return any(v not in done for v, _, _ in migrations()) or \
            (have[0] if have else None) != want

    def yield_to_readers(self, wait_s: float = 5.0) -> bool:
        """Between two transactions of a writer: when a reader waits for the file (its
        marker is there), close, let it in, and open again (waiting while it reads).
        Returns whether it did."""
        marker = readers_waiting(self.path)
        if not marker.exists():
            return False
        self.con.close()
        deadline = time.monotonic() + wait_s
        while marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        marker.unlink(missing_ok=True)  # (a reader gone away leaves it behind)
        self.con = _connect(self.path, read_only=False)
        self.con.execute("SET enable_progress_bar = false")
        return True

    @contextmanager
    def lent(self, every_s: float = 0.5) -> Iterator[None]:
        """For a block that runs without the store (a launch: minutes of server and bench,
        between two ingests of one ``ab``): a reader waiting for the file is let in
        (:meth:`yield_to_readers`, from a thread) instead of waiting for the block to
        end.  The block must not use the store."""
        if self.read_only:
            yield
            return
        stop = threading.Event()
        failed: list[BaseException] = []

        def watch() -> None:
            while not stop.wait(every_s):
                try:
                    self.yield_to_readers()
                except Exception as exc:  # noqa: BLE001 - reconnected below, in the caller
                    failed.append(exc)
                    return

        thread = threading.Thread(target=watch, name="logpipe-store-lent", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            if failed:  # the reader kept the file past the wait: wait again, here
                self.con = _connect(self.path, read_only=False)
                self.con.execute("SET enable_progress_bar = false")

    @contextmanager
    def transaction(self, on_commit: Callable[[], None] | None = None) -> Iterator[None]:
        """One transaction: rolled back when the body raises.  The commit and
        ``on_commit`` (what records that it was made) run with signals held
        (:func:`interrupts.deferred`): Ctrl-C or SIGTERM there stops the command after
        both, never between them."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self._source_ids.clear()
            self._labels = None
            self.con.execute("ROLLBACK")
            raise
        with interrupts.deferred():
            self._source_ids.clear()
            self.con.execute("COMMIT")
            if on_commit is not None:
                on_commit()

    # -- reading ---------------------------------------------------------------------

    def one(self, sql: str, params: list[Any] | None = None) -> tuple[Any, ...] | None:
        """First row or None.  Fetches everything: an unfinished result would block
        ``con.sql()`` (DuckDB 2.0)."""
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    def all(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, params or []).fetchall()

    def columns(self, table: str, schema: str = "main") -> list[tuple[str, str]]:
        """``(name, type)`` of a table or view of ``schema``, in order."""
        memo = self._column_types
        if (schema, table) not in memo:
            memo[(schema, table)] = [(r[0], r[1]) for r in self.all(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = ? AND table_schema = ? ORDER BY ordinal_position",
                [table, schema])]
        return list(memo[(schema, table)])

    def source_id(self, path: str) -> int:
        """The integer of the file at ``path`` in ``sources``; a file seen for the first
        time gets its row now (completed by :meth:`upsert_source` at the end of its
        transaction)."""
        if path not in self._source_ids:
            self._source_ids[path] = self._find_or_add_source_id(path)
        return self._source_ids[path]

    def _find_or_add_source_id(self, path: str) -> int:
        row = self.one("SELECT source_id FROM sources WHERE path = ?", [path])
        if row is not None and row[0] is not None:
            return int(row[0])
        (new,) = self.one("SELECT coalesce(max(source_id), 0) + 1 FROM sources") or (1,)
        if row is None:
            self.con.execute("INSERT INTO sources (path, kind, source_id) VALUES (?, ?, ?)",
                             [path, "pending", new])
        else:
            self.con.execute("UPDATE sources SET source_id = ? WHERE path = ?", [new, path])
        return int(new)

    def source(self, path: str) -> dict[str, Any] | None:
        cur = self.con.execute("SELECT * FROM sources WHERE path = ?", [path])
        rows = cur.fetchall()
        if not rows:
            return None
        return dict(zip([d[0] for d in cur.description], rows[0], strict=True))

    def sources_with_head(self, head_sha256: str) -> list[dict[str, Any]]:
        cur = self.con.execute("SELECT * FROM sources WHERE head_sha256 = ?", [head_sha256])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def query(self, sql: str, params: list[Any] | None = None
              ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run user SQL (with ``params`` for its ``?``); returns column names and rows."""
        try:
            cur = self.con.execute(sql, params or [])
            if cur.description is None:
                return [], []
            return [d[0] for d in cur.description], cur.fetchall()
        except duckdb.Error as exc:
            message = " ".join(str(exc).split())
            hint = ("`logpipe sql` opens the database read-only (and its data tables are "
                    "views of the stored rows); write with DuckDB directly"
                    if "read-only" in message or "base table" in message
                    else "the tables and views are documented in schemas/README.md")
            raise QueryError(message, path=self.path, hint=hint) from exc

    # -- writing (inside a transaction) ----------------------------------------------

    def rows_for(self, table: str, frame: pl.DataFrame, constants: dict[str, Any]
                 ) -> pl.DataFrame:
        """``frame`` plus constant columns, cut to ``table``'s stored columns in their
        order; a ``source_path`` constant is stored as its ``source_id``, a text column
        stored as ``<name>_code`` as its labels."""
        import polars as pl

        columns = [c for c, _ in self.columns(
            table, INTERNAL if table in stored_tables() else "main")]
        if "source_path" in constants:
            constants = dict(constants)
            frame = frame.with_columns(pl.lit(self.source_id(constants.pop("source_path")),
                                              dtype=pl.Int32).alias("source_id"))
        frame = frame.with_columns(
            [pl.lit(v, dtype=pl.String).alias(k) for k, v in constants.items()])
        codes = [self._coded(frame.get_column(c[:-len(LABEL_SUFFIX)])).alias(c)
                 for c in columns
                 if c.endswith(LABEL_SUFFIX) and c[:-len(LABEL_SUFFIX)] in frame.columns]
        if codes:
            frame = frame.with_columns(codes)
        return frame.select([c for c in columns if c in frame.columns])

    def _coded(self, texts: pl.Series) -> pl.Series:
        """``texts`` as their ``label_id`` (null stays null), new texts added to ``labels``.

        A column of a few texts (a block's kinds, rank tags, graph labels) is coded by one
        comparison with each: ~4 ms for 240 k rows against ~8 ms for ``replace_strict``,
        which hashes every row's text."""
        import polars as pl

        ids = self.label_ids(texts.unique().drop_nulls().to_list())
        if not ids:
            return pl.Series(texts.name, dtype=pl.Int32).extend_constant(None, len(texts))
        if len(ids) > FEW_LABELS:
            return texts.replace_strict(ids, default=None, return_dtype=pl.Int32)
        code = pl.lit(None, pl.Int32)
        for text, label_id in ids.items():
            code = pl.when(pl.lit(texts) == text).then(pl.lit(label_id, pl.Int32)).otherwise(code)
        return pl.select(code.alias(texts.name)).to_series()

    def label_ids(self, texts: list[str]) -> dict[str, int]:
        """The ``label_id`` of each of ``texts``, adding those ``labels`` lacks."""
        if self._labels is None:
            self._labels = dict(self.all(f"SELECT label, label_id FROM {INTERNAL}.labels"))
        new = [t for t in texts if t not in self._labels]
        if new:
            first = max(self._labels.values(), default=0) + 1
            rows = list(zip(range(first, first + len(new)), new, strict=True))
            self.con.executemany(f"INSERT INTO {INTERNAL}.labels VALUES (?, ?)", rows)
            self._labels.update((t, i) for i, t in rows)
        return {t: self._labels[t] for t in texts}

    def insert(self, table: str, frame: pl.DataFrame, **constants: Any) -> int:
        """Append ``frame`` (plus constant columns) to ``table``; returns rows written."""
        if frame.height == 0:
            return 0
        frame = self.rows_for(table, frame, constants)
        cols = frame.columns
        arrow = frame.to_arrow()
        self.con.register("_incoming", arrow)
        try:
            col_list = ", ".join(cols)
            self.con.execute(f"INSERT INTO {stored(table)} ({col_list}) "
                             f"SELECT {col_list} FROM _incoming")
        finally:
            self.con.unregister("_incoming")
        return frame.height

    def delete_source(self, path: str) -> None:
        """Remove every row that came from ``path`` (a rewritten file is re-read whole)."""
        self._source_ids.pop(path, None)
        row = self.one("SELECT source_id FROM sources WHERE path = ?", [path])
        if row is not None and row[0] is not None:
            self.con.execute(f"DELETE FROM run_env WHERE run_id IN (SELECT run_id FROM "
                             f"{stored('runs')} WHERE source_id = ?)", [row[0]])
            for table in stored_tables():
                self.con.execute(f"DELETE FROM {stored(table)} WHERE source_id = ?", [row[0]])
        self.con.execute("DELETE FROM sources WHERE path = ?", [path])

    def unmake_runs(self, run_ids: list[str]) -> list[int]:
        """Take back runs of the file being ingested (its transaction): their rows go,
        other tables' rows that named them keep no run.  Returns the line numbers of the
        record lines they held (:func:`record_tables`), for ``rejects``."""
        if not run_ids:
            return []
        lines = [int(n) for (n,) in self.con.execute(" UNION ".join(
            f"SELECT line_no FROM {stored(t)} WHERE run_id IN (SELECT unnest(?))"
            for t in record_tables()) + " ORDER BY 1",
            [run_ids] * len(record_tables())).fetchall()]
        for table in run_tables():
            self.con.execute(f"DELETE FROM {stored(table)} WHERE run_id IN (SELECT unnest(?))",
                             [run_ids])
        self.con.execute(f"UPDATE {stored('rejects')} SET run_id = NULL "
                         "WHERE run_id IN (SELECT unnest(?))", [run_ids])
        for table in ("bench_results", "phase_timings", "request_metrics", "traces"):
            self.con.execute(f"UPDATE {stored(table)} SET run_id = NULL, link_method = NULL "
                             "WHERE run_id IN (SELECT unnest(?))", [run_ids])
        self.con.execute("DELETE FROM run_env WHERE run_id IN (SELECT unnest(?))", [run_ids])
        self.con.execute(f"DELETE FROM {stored('runs')} WHERE run_id IN (SELECT unnest(?))",
                         [run_ids])
        return lines

    def move_source(self, old: str, new: str) -> None:
        """Re-point a moved (rotated) file's rows to its new path: one row of ``sources``."""
        self._source_ids.pop(old, None)
        self._source_ids.pop(new, None)
        self.con.execute("UPDATE sources SET path = ? WHERE path = ?", [new, old])

    def end_generation(self, source: dict[str, Any]) -> None:
        """A truncated file: keep what its ending generation held (its ``sources`` row),
        so that a rotated copy of it is known as already read."""
        self.con.execute(
            f"INSERT INTO {INTERNAL}.source_generations VALUES (?, ?, ?, ?, ?, ?, now())",
            [source["path"], int(source.get("generations") or 0), source["head_sha256"],
             source["tail_sha256"], source["bytes_ingested"], source["lines"]])

    def generations_with_head(self, head_sha256: str) -> list[tuple[Any, ...]]:
        """``(path, generation, bytes_ingested, tail_sha256)`` of ended generations."""
        return self.all("SELECT path, generation, bytes_ingested, tail_sha256 FROM "
                        f"{INTERNAL}.source_generations WHERE head_sha256 = ?", [head_sha256])

    def upsert_source(self, row: dict[str, Any]) -> None:
        """Write the ``sources`` row of a file read now (its ``source_id`` kept)."""
        self.source_id(row["path"])
        cols = [c for c in row if c != "path"]
        self.con.execute(
            f"UPDATE sources SET {', '.join(f'{c} = ?' for c in cols)} WHERE path = ?",
            [row[c] for c in cols] + [row["path"]],
        )

    def set_env_key(self, path: str, key: str) -> None:
        """Record what the environments of ``path``'s runs were computed from."""
        self.con.execute("UPDATE sources SET env_key = ? WHERE path = ? "
                         "AND env_key IS DISTINCT FROM ?", [key, path, key])

    def name_taken(self, name: str) -> bool:
        return self.one("SELECT 1 FROM runs WHERE name = ?", [name]) is not None

    # -- runs and their environments: every write of ``runs`` and ``run_env`` ----------

    def add_runs(self, runs: list[tuple[Any, ...]], *, engine: str) -> None:
        """Launches seen for the first time, one statement (a file may hold hundreds):
        ``(run_id, name, source_path, run_seq, first_line, started_at, ended_at,
        format_era, era_mask)`` each, baselines until their arguments say more, of
        ``engine`` (``runs.engine``)."""
        if not runs:
            return
        cols = list(zip(*runs, strict=True))
        ids = [self.source_id(p) for p in cols[2]]
        self.con.execute(
            f"INSERT INTO {stored('runs')} (run_id, name, source_id, run_seq, first_line, "
            "started_at, ended_at, engine, format_era, era_mask, role, env_complete, "
            "profiled, env, tags) SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
            "unnest(?::INTEGER[]), unnest(?::INTEGER[]), unnest(?::BIGINT[]), "
            "unnest(?::TIMESTAMP[]), unnest(?::TIMESTAMP[]), ?, unnest(?::VARCHAR[]), "
            "unnest(?::BIGINT[]), 'baseline', false, false, '{}', '{}'",
            [list(cols[0]), list(cols[1]), ids, list(cols[3]), list(cols[4]), list(cols[5]),
             list(cols[6]), engine, list(cols[7]), list(cols[8])])

    def update_runs(self, updates: list[tuple[str, dict[str, Any]]]) -> None:
        """Set columns of many runs, one statement per set of columns (``update_run`` of
        each costs a statement per run)."""
        types = dict(self.columns("runs", INTERNAL))
        groups: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]] = {}
        for run_id, values in updates:
            if values:
                groups.setdefault(tuple(values), []).append((run_id, values))
        for cols, members in groups.items():
            select = ", ".join(["unnest(?::VARCHAR[]) AS run_id_"] + [
                f"unnest(?::{types[c]}[]) AS v{i}" for i, c in enumerate(cols)])
            sets = ", ".join(f"{c} = v.v{i}" for i, c in enumerate(cols))
            self.con.execute(
                f"UPDATE {stored('runs')} SET {sets} FROM (SELECT {select}) v "
                "WHERE run_id = v.run_id_",
                [[m[0] for m in members]] + [[m[1][c] for m in members] for c in cols])

    def set_run_clocks(self, clocks: list[tuple[str, int | None, str | None]]) -> None:
        """``(run_id, utc_offset_s, clock_source)`` of many runs in one statement."""
        if not clocks:
            return
        ids, offsets, sources = (list(x) for x in zip(*clocks, strict=True))
        self.con.execute(
            f"UPDATE {stored('runs')} SET utc_offset_s = v.o, clock_source = v.s FROM "
            "(SELECT unnest(?::VARCHAR[]) AS r, unnest(?::INTEGER[]) AS o, "
            "unnest(?::VARCHAR[]) AS s) v WHERE run_id = v.r AND "
            "(utc_offset_s IS DISTINCT FROM v.o OR clock_source IS DISTINCT FROM v.s)",
            [ids, offsets, sources])

    def update_run(self, run_id: str, **values: Any) -> None:
        """Set columns of a run (a row is rewritten only when a value differs)."""
        if not values:
            return
        cols = list(values)
        self.con.execute(
            f"UPDATE {stored('runs')} SET {', '.join(f'{c} = ?' for c in cols)} "
            f"WHERE run_id = ? AND ({' OR '.join(f'{c} IS DISTINCT FROM ?' for c in cols)})",
            [values[c] for c in cols] + [run_id] + [values[c] for c in cols])

    def widen_run(self, run_id: str, first_ts: Any, last_ts: Any, format_era: str | None,
                  era_mask: int | None) -> None:
        """More lines of a known launch: its time span grows, its era narrows."""
        self.con.execute(
            f"UPDATE {stored('runs')} SET started_at = least(coalesce(started_at, ?), ?), "
            "ended_at = greatest(coalesce(ended_at, ?), ?), era_mask = ?, format_era = ? "
            "WHERE run_id = ?",
            [first_ts, first_ts, last_ts, last_ts, era_mask, format_era, run_id])

    def set_run_envs(self, envs: list[tuple[str, RunEnv, dict[str, Any]]]) -> None:
        """Write runs' environments: ``runs.env`` and its fingerprint, and the same
        entries as ``run_env`` rows, together (one place keeps them in step); the dict
        holds other columns of the run to set with it."""
        if not envs:
            return
        rows: list[tuple[Any, ...]] = []
        self.update_runs([(run_id, {"env": env.to_json(), "env_fingerprint": env.fingerprint(),
                                    **columns}) for run_id, env, columns in envs])
        for run_id, env, _ in envs:
            rows += [
                (run_id, k, e.value if isinstance(e.value, str)
                 else json.dumps(e.value, default=str), e.tier, e.source, e.conflict)
                for k, e in sorted(env.entries.items())]
        # one statement each, not one per key: DuckDB's inserts are per call
        self.con.execute("DELETE FROM run_env WHERE run_id IN (SELECT unnest(?))",
                         [[run_id for run_id, _, _ in envs]])
        if rows:
            import polars as pl

            self.insert("run_env", pl.DataFrame(
                rows, schema=["run_id", "key", "value", "tier", "source", "conflict"],
                orient="row"))

    def link(self, table: str, source_path: str, run_id: str | None, method: str | None
             ) -> None:
        """Say which run the records of one file (benchmark, phase dump, trace) measured."""
        self.con.execute(
            f"UPDATE {stored(table)} SET run_id = ?, link_method = ? WHERE source_id = "
            "(SELECT source_id FROM sources WHERE path = ?) AND (run_id IS DISTINCT FROM ? "
            "OR link_method IS DISTINCT FROM ?)", [run_id, method, source_path, run_id, method])

    def append_to_last_error(self, source_path: str, text: str) -> None:
        """Lines that continue the last error event of a file (a traceback cut by the
        end of a block) join its message."""
        self.con.execute(
            f"UPDATE {stored('events')} SET message = message || chr(10) || $2 "
            "WHERE source_id = $1 AND line_no = (SELECT max(line_no) FROM "
            f"{stored('events')} WHERE source_id = $1 AND kind = 'error')",
            [self.source_id(source_path), text])

    def derive_profiled(self) -> None:
        """``runs.profiled``, from its evidence and nothing else (so it is cleared when the
        evidence goes): a profiler started in the log and never stopped, a trace linked to
        a run with no bounded profiler window, a phase dump taken with device
        synchronisation, ``CUDA_LAUNCH_BLOCKING=1`` or the tag ``profiled`` in its
        environment.  A profiler window the log bounds (``Profiling starts`` …
        ``Stop profiling`` / ``Profiling done``, as ``/start_profile`` with ``num_steps``
        leaves) profiles only its batch lines (``batch_states.state = 'profiled'``), not
        the launch."""
        self.con.execute(PROFILED_SQL)


PROFILED_SQL = f"""
UPDATE {INTERNAL}.runs SET profiled = d.profiled
FROM (
    SELECT r.run_id,
           coalesce(r.run_id IN (SELECT s.run_id FROM {INTERNAL}.events s
                                 WHERE s.kind = 'profiling_start' AND s.run_id IS NOT NULL
                                   AND NOT EXISTS (
                                       SELECT 1 FROM {INTERNAL}.events e
                                       WHERE e.run_id = s.run_id AND e.kind = 'profiling_stop'
                                         AND e.line_no > s.line_no))
        OR r.run_id IN (SELECT run_id FROM {INTERNAL}.traces WHERE run_id IS NOT NULL
                        AND run_id NOT IN (SELECT run_id FROM {INTERNAL}.events
                                           WHERE kind = 'profiling_stop'
                                             AND run_id IS NOT NULL))
        OR r.run_id IN (SELECT run_id FROM {INTERNAL}.phase_timings
                        WHERE synchronized AND run_id IS NOT NULL)
        OR r.run_id IN (SELECT run_id FROM run_env
                        WHERE (key = 'CUDA_LAUNCH_BLOCKING' AND trim(value) = '1')
                           OR (key = 'tag.profiled'
                               AND lower(trim(value)) IN ('1', 'true', 'yes'))), false)
           AS profiled
    FROM {INTERNAL}.runs r
) d
WHERE runs.run_id = d.run_id AND runs.profiled IS DISTINCT FROM d.profiled
"""
"""Every run's ``profiled`` from its evidence (:meth:`Store.derive_profiled`)."""


class Spool:
    """Rows bound for several tables, held in temporary Parquet files until :meth:`load`.

    Use it inside the file's transaction: ``add`` as rows come, ``load`` once at the end
    (one ``INSERT ... SELECT`` per table), ``close`` always (it removes the files).  Files
    are written on a background thread (polars releases the GIL), so the caller goes on
    parsing; ``load`` waits for them and re-raises a failed write.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dir = Path(tempfile.mkdtemp(prefix="logpipe-spool-"))
        self.parts: dict[str, list[Path]] = {}
        self._writer = ThreadPoolExecutor(max_workers=1)
        self._writes: list[Future[None]] = []

    def add(self, table: str, frame: pl.DataFrame, **constants: Any) -> int:
        """Spool ``frame`` (plus constant text columns) for ``table``; returns its rows."""
        if frame.height == 0:
            return 0
        frame = self.store.rows_for(table, frame, constants)
        parts = self.parts.setdefault(table, [])
        path = self.dir / f"{table}-{len(parts):06d}.parquet"
        self._writes.append(self._writer.submit(
            frame.write_parquet, path, compression="lz4", statistics=False))
        parts.append(path)
        return frame.height

    def flush(self) -> None:
        """Wait for every file written so far (re-raising a write's error)."""
        writes, self._writes = self._writes, []
        for w in writes:
            w.result()

    def files(self, table: str) -> list[str]:
        """The Parquet files spooled for ``table`` (read them with ``read_parquet``)."""
        return [str(p) for p in self.parts.get(table, [])]

    def columns(self, table: str) -> list[str]:
        """Columns of ``table`` present in its spooled files, in table order."""
        files = self.files(table)
        if not files:
            return []
        names = {n for (n,) in self.store.all(
            "SELECT name FROM parquet_schema(?)", [files])}
        schema = INTERNAL if table in stored_tables() else "main"
        return [c for c, _ in self.store.columns(table, schema) if c in names]

    def load(self, tables: list[str] | None = None) -> None:
        """Insert what was spooled for ``tables`` (default: all), one statement each.

        Rows are inserted in no particular order (every reader orders by line number):
        keeping the order of a hundred small files costs DuckDB half as much again
        (5.3 M batch rows: 7.5 s ordered, 5.2 s not)."""
        self.flush()
        con = self.store.con
        (ordered,) = con.execute(
            "SELECT current_setting('preserve_insertion_order')").fetchone() or (True,)
        con.execute("SET preserve_insertion_order = false")
        try:
            for table in tables if tables is not None else list(self.parts):
                parts = self.files(table)
                if not parts:
                    continue
                cols = ", ".join(self.columns(table))
                con.execute(
                    f"INSERT INTO {stored(table)} ({cols}) SELECT {cols} FROM "
                    "read_parquet(?, union_by_name = true)", [parts])
                for p in self.parts.pop(table):
                    p.unlink()
        finally:
            con.execute(f"SET preserve_insertion_order = {'true' if ordered else 'false'}")

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_db() -> str:
    return os.environ.get("LOGPIPE_DB", DEFAULT_DB)
