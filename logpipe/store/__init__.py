"""The DuckDB database: schema, migrations, writes and bookkeeping.

Rooms: :mod:`.connection` (opening, waiting, transactions, reading), :mod:`.schema`
(tables, migrations, views), :mod:`.sources`, :mod:`.frames` and :mod:`.runs` (the rows
written), :mod:`.spool` (large writes); :class:`Store` is all of them on one database.

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

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import duckdb

from logpipe.errors import DatabaseError, QueryError
from logpipe.resources import schemas_dir
from logpipe.store import connection, template
from logpipe.store.connection import Connection, default_db, lock_wait_s, readers_waiting
from logpipe.store.runs import PROFILED_SQL, RunRows
from logpipe.store.schema import (
    ALL_ROWS_VIEWS,
    CORE_TABLES,
    DATA_VIEWS_VERSION,
    DEFAULT_DB,
    ENGINE_SAMPLES,
    FEW_LABELS,
    INTERNAL,
    LABEL_SUFFIX,
    RUN_LINE_TABLES,
    SAMPLE_COLUMNS,
    data_tables,
    data_view_sql,
    engine_migrations,
    migrations,
    one_row_view_sql,
    record_tables,
    run_tables,
    stored,
    stored_tables,
    views_key,
    views_sql,
)
from logpipe.store.spool import Spool

__all__ = [
    "ALL_ROWS_VIEWS", "CORE_TABLES", "DATA_VIEWS_VERSION", "DEFAULT_DB", "ENGINE_SAMPLES",
    "FEW_LABELS", "INTERNAL", "LABEL_SUFFIX", "PROFILED_SQL", "RUN_LINE_TABLES",
    "SAMPLE_COLUMNS", "Connection", "Spool", "Store", "data_tables", "data_view_sql",
    "default_db", "engine_migrations", "lock_wait_s", "migrations", "one_row_view_sql",
    "readers_waiting", "record_tables", "run_tables", "schemas_dir", "stored",
    "stored_tables", "views_sql",
]


class Store(RunRows):
    """An open logpipe database: opened, migrated, written and read."""

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False) -> Store:
        """Open (creating and migrating unless ``read_only``) the DuckDB file at ``path``
        (a lake is opened by :func:`logpipe.db.open_db`)."""
        path = str(path)
        if read_only and not Path(path).exists():
            raise DatabaseError("database does not exist", path=path,
                                hint="run `logpipe ingest PATH` first, or pass --db")
        new = not read_only and path != ":memory:" and not Path(path).exists()
        copied = new and template.copy_to(path, cls._make_empty)  # (an empty database)
        con = connection.connect(path, read_only)
        con.execute("SET enable_progress_bar = false")
        store = cls(con, path, read_only)
        store.from_template = copied
        if not read_only:
            store.migrate()
            if copied:  # (the copy's bookkeeping says when this database was made)
                store._stamp_migrations()
        return store

    @classmethod
    def _make_empty(cls, path: str) -> None:
        """A new database at ``path``, migrated and closed (:mod:`.template`'s)."""
        store = cls(connection.connect(path, False), path, False)
        try:
            store.migrate()
            store.con.execute("CHECKPOINT")
        finally:
            store.close()

    from_template = False
    """Whether the database was made by this open as a copy of the empty one kept
    (:mod:`logpipe.store.template`)."""

    def _stamp_migrations(self) -> None:
        self.con.execute(f"UPDATE {self._bookkeeping('schema_migrations')} "
                         "SET applied_at = now()")
        if self.one("SELECT 1 FROM duckdb_tables() WHERE schema_name = ? AND table_name = "
                    "'engine_migrations'", [INTERNAL]):
            self.con.execute(f"UPDATE {INTERNAL}.engine_migrations SET applied_at = now()")

    @classmethod
    def in_memory(cls, path: str | Path) -> Store:
        """An in-memory database with logpipe's schema, named ``path`` (a lake's views
        are laid over it by :func:`logpipe.lake.open_lake`)."""
        con = duckdb.connect(":memory:", config=connection.config())
        con.execute("SET enable_progress_bar = false")
        store = cls(con, str(path))
        store.migrate()
        return store

    def _bookkeeping(self, table: str) -> str | None:
        """Where ``schema_migrations`` / ``schema_views`` live (``main`` before 0017)."""
        for schema in (INTERNAL, "main"):
            if self.one("SELECT 1 FROM duckdb_tables() WHERE schema_name = ? AND "
                        "table_name = ?", [schema, table]):
                return f"{schema}.{table}"
        return None

    def migrate(self) -> list[int]:
        """Apply pending migrations and recreate the views when ``views.sql`` (or the
        schema) changed since they were created; returns the versions applied.  A new
        database gets its whole schema in one transaction (made whole or not at all; ~20
        ms less than a commit a migration); an existing one a transaction per migration."""
        con = self.con
        self._column_types.clear()
        fresh = self._bookkeeping("schema_migrations") is None
        if not fresh:
            return self._migrate()
        with self.transaction():
            con.execute(
                "CREATE TABLE schema_migrations "
                "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP)"
            )
            return self._migrate(contextlib.nullcontext)

    def _migrate(self, step: Callable[[], AbstractContextManager[None]] | None = None
                 ) -> list[int]:
        """:meth:`migrate`, each step in ``step()`` (default: a transaction of its own)."""
        con = self.con
        step = step or self.transaction
        done = {r[0] for r in con.execute(
            f"SELECT version FROM {self._bookkeeping('schema_migrations')}").fetchall()}
        pending = [m for m in migrations() if m[0] not in done]
        if pending:  # views are recreated below; a migration may drop what they read
            self._drop_views()
        applied = []
        for version, name, sql in pending:
            with step():
                con.execute(sql)
                con.execute(f"INSERT INTO {self._bookkeeping('schema_migrations')} "
                            "VALUES (?, ?, now())", [version, name])
            applied.append(version)
        engine_pending = self._engine_pending()
        if engine_pending and not pending:
            self._drop_views()
        for engine, version, name, sql in engine_pending:
            with step():
                con.execute(sql)
                con.execute(f"INSERT INTO {INTERNAL}.engine_migrations "
                            "VALUES (?, ?, ?, now())", [engine, version, name])
        text = views_sql()
        if text is not None:
            where = self._bookkeeping("schema_views")
            have = con.execute(f"SELECT max(sha256) FROM {where}").fetchone()
            if not applied and not engine_pending and have is not None \
                    and have[0] == views_key(text):
                return applied  # the views are those of this views.sql already
            with step():
                self._create_data_views()
                con.execute(text)
                con.execute(f"DELETE FROM {where}")
                con.execute(f"INSERT INTO {where} VALUES (?)", [views_key(text)])
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
        want = views_key(text) if text is not None else None
        return any(v not in done for v, _, _ in migrations()) or \
            (have[0] if have else None) != want

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
