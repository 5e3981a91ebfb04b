"""The DuckDB database: schema, migrations, writes and bookkeeping.

Invariants:
- The schema is the numbered SQL files in ``schemas/migrations/``, applied in order and
  recorded in ``schema_migrations``; a shipped file is never edited.  Views are recreated
  from ``schemas/views.sql`` after migrating.
- Every row written carries the file (``source_path``) and line it came from.
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
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from logpipe.errors import DatabaseError, QueryError

DEFAULT_DB = "logpipe.duckdb"
DATA_TABLES = ("batches", "events", "http_requests", "rejects", "bench_results",
               "phase_timings", "request_metrics", "traces", "trace_kernels",
               "trace_annotations", "trace_ops", "line_prefixes")


def schemas_dir() -> Path:
    """``$LOGPIPE_SCHEMAS`` or the ``schemas/`` folder shipped inside the package (the
    repository's top-level ``schemas/`` is a link to it)."""
    env = os.environ.get("LOGPIPE_SCHEMAS")
    if env:
        return Path(env)
    return Path(str(files("logpipe"))) / "schemas"


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


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _config() -> dict[str, Any]:
    return {"autoinstall_known_extensions": False, "autoload_known_extensions": True}


def lock_wait_s() -> float:
    """How long to wait for a database another process holds (``LOGPIPE_LOCK_WAIT``)."""
    try:
        return float(os.environ.get("LOGPIPE_LOCK_WAIT", "120"))
    except ValueError:
        return 120.0


def _connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Connect, waiting while another process holds the file (DuckDB allows one process
    to have a database file open for writing, and no reader beside it): a second ingest
    waits for the first to finish, saying so once, then goes on; past the wait it fails
    clearly.  Nothing is written meanwhile, so the file is never corrupted."""
    deadline = time.monotonic() + lock_wait_s()
    said = False
    while True:
        try:
            return duckdb.connect(path, read_only=read_only, config=_config())
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
            time.sleep(0.25)


class Store:
    """An open logpipe database."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str) -> None:
        self.con = con
        self.path = path
        self._columns: dict[str, list[str]] = {}

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False) -> Store:
        """Open (creating and migrating unless ``read_only``) the database at ``path``."""
        path = str(path)
        if read_only and not Path(path).exists():
            raise DatabaseError("database does not exist", path=path,
                                hint="run `logpipe ingest PATH` first, or pass --db")
        con = _connect(path, read_only)
        con.execute("SET enable_progress_bar = false")
        store = cls(con, path)
        if not read_only:
            store.migrate()
        return store

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def migrate(self) -> list[int]:
        """Apply pending migrations and recreate the views when ``views.sql`` (or the
        schema) changed since they were created; returns the versions applied."""
        con = self.con
        con.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP)"
        )
        done = {r[0] for r in con.execute("SELECT version FROM schema_migrations").fetchall()}
        applied = []
        for version, name, sql in migrations():
            if version in done:
                continue
            with self.transaction():
                con.execute(sql)
                con.execute("INSERT INTO schema_migrations VALUES (?, ?, now())",
                            [version, name])
            applied.append(version)
        views = schemas_dir() / "views.sql"
        if views.exists():
            text = views.read_text()
            have = con.execute("SELECT max(sha256) FROM schema_views").fetchone()
            if not applied and have is not None and have[0] == _sha256(text):
                return applied  # the views are those of this views.sql already
            with self.transaction():
                con.execute(text)
                con.execute("DELETE FROM schema_views")
                con.execute("INSERT INTO schema_views VALUES (?)", [_sha256(text)])
        return applied

    def outdated(self) -> bool:
        """Whether migrations or views of this logpipe are missing from the database (a
        read-only open applies neither)."""
        views = schemas_dir() / "views.sql"
        try:
            done = {r[0] for r in self.con.execute(
                "SELECT version FROM schema_migrations").fetchall()}
            have = self.con.execute("SELECT max(sha256) FROM schema_views").fetchone()
        except duckdb.Error:
            return True
        want = _sha256(views.read_text()) if views.exists() else None
        return any(v not in done for v, _, _ in migrations()) or \
            (have[0] if have else None) != want

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    # -- reading ---------------------------------------------------------------------

    def one(self, sql: str, params: list[Any] | None = None) -> tuple[Any, ...] | None:
        """First row or None.  Fetches everything: an unfinished result would block
        ``con.sql()`` (DuckDB 2.0)."""
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    def all(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, params or []).fetchall()

    def columns(self, table: str) -> list[tuple[str, str]]:
        """``(name, type)`` of a table or view, in order."""
        return [
            (r[0], r[1])
            for r in self.all(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = ? ORDER BY ordinal_position",
                [table],
            )
        ]

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

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run user SQL; returns column names and rows."""
        try:
            cur = self.con.execute(sql)
            if cur.description is None:
                return [], []
            return [d[0] for d in cur.description], cur.fetchall()
        except duckdb.Error as exc:
            message = " ".join(str(exc).split())
            hint = ("`logpipe sql` opens the database read-only; write with DuckDB directly"
                    if "read-only" in message
                    else "the tables and views are documented in schemas/README.md")
            raise QueryError(message, path=self.path, hint=hint) from exc

    # -- writing (inside a transaction) ----------------------------------------------

    def rows_for(self, table: str, frame: pl.DataFrame, constants: dict[str, Any]
                 ) -> pl.DataFrame:
        """``frame`` plus constant text columns, cut to ``table``'s columns in its order."""
        if table not in self._columns:
            self._columns[table] = [c for c, _ in self.columns(table)]
        frame = frame.with_columns(
            [pl.lit(v, dtype=pl.String).alias(k) for k, v in constants.items()])
        return frame.select([c for c in self._columns[table] if c in frame.columns])

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
            self.con.execute(f"INSERT INTO {table} ({col_list}) SELECT {col_list} FROM _incoming")
        finally:
            self.con.unregister("_incoming")
        return frame.height

    def delete_source(self, path: str) -> None:
        """Remove every row that came from ``path`` (a rewritten file is re-read whole)."""
        for table in DATA_TABLES:
            self.con.execute(f"DELETE FROM {table} WHERE source_path = ?", [path])
        self.con.execute("DELETE FROM runs WHERE source_path = ?", [path])
        self.con.execute("DELETE FROM sources WHERE path = ?", [path])

    def move_source(self, old: str, new: str) -> None:
        """Re-point every row of a moved (rotated) file to its new path."""
        for table in DATA_TABLES:
            self.con.execute(f"UPDATE {table} SET source_path = ? WHERE source_path = ?",
                             [new, old])
        self.con.execute("UPDATE runs SET source_path = ? WHERE source_path = ?", [new, old])
        self.con.execute("UPDATE sources SET path = ? WHERE path = ?", [new, old])

    def upsert_source(self, row: dict[str, Any]) -> None:
        cols = list(row)
        placeholders = ", ".join("?" for _ in cols)
        updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "path")
        self.con.execute(
            f"INSERT INTO sources ({', '.join(cols)}) VALUES ({placeholders}) "
            f"ON CONFLICT (path) DO UPDATE SET {updates}",
            [row[c] for c in cols],
        )

    def name_taken(self, name: str) -> bool:
        return self.one("SELECT 1 FROM runs WHERE name = ?", [name]) is not None


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
        return [c for c, _ in self.store.columns(table) if c in names]

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
                    f"INSERT INTO {table} ({cols}) SELECT {cols} FROM "
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
