"""A connection to a database file: waiting while another process holds it, letting a
waiting reader in, one transaction at a time, and reading."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import duckdb

from logpipe import interrupts
from logpipe.errors import DatabaseError
from logpipe.store.schema import DEFAULT_DB
from logpipe.timings import COMMIT, phase

if TYPE_CHECKING:  # polars is imported where frames are written: an ingest of unchanged

    pass


def config() -> dict[str, Any]:
    """DuckDB's settings of every connection; ``LOGPIPE_DUCKDB_MEMORY`` (e.g. ``600MB``)
    bounds DuckDB's own memory, which then spills to disk: on a 256 MB steady log the
    ingest's peak went from 1,270 MB to 932 MB at 15% more time, `compare` of two runs of
    1 M lines from 1,744 MB to 1,085 MB (``400MB``) at 6% more (default: DuckDB's, 80% of
    the machine's memory)."""
    settings: dict[str, Any] = {"autoinstall_known_extensions": False,
                                "autoload_known_extensions": True}
    limit = os.environ.get("LOGPIPE_DUCKDB_MEMORY", "").strip()
    if limit:
        settings["memory_limit"] = limit
    return settings


def lock_wait_s() -> float:
    """How long to wait for a database another process holds (``LOGPIPE_LOCK_WAIT``)."""
    try:
        return float(os.environ.get("LOGPIPE_LOCK_WAIT", "120"))
    except ValueError:
        return 120.0


def readers_waiting(path: str) -> Path:
    """The marker a reader leaves while it waits for a writer to let go of ``path``."""
    return Path(f"{path}.readers-waiting")


def connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Connect, waiting while another process holds the file (DuckDB allows one process
    to have a database file open for writing, and no reader beside it): a second ingest
    waits for the first to finish, saying so once, then goes on; past the wait it fails
    clearly.  Nothing is written meanwhile, so the file is never corrupted.  A reader
    that waits leaves a marker (:func:`readers_waiting`): an ingest lets go between two
    files when it sees one (:meth:`Connection.yield_to_readers`), so the reader gets in and sees
    the last committed state instead of waiting for the whole ingest."""
    deadline = time.monotonic() + lock_wait_s()
    said = False
    marker = readers_waiting(path)
    while True:
        try:
            con = duckdb.connect(path, read_only=read_only, config=config())
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


def default_db() -> str:
    return os.environ.get("LOGPIPE_DB", DEFAULT_DB)


class Connection:
    """An open database file (or an in-memory database): the connection and what is known
    within its open transaction."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str,
                 read_only: bool = False) -> None:
        self.con = con
        self.path = path
        self.read_only = read_only
        """Opened read-only: nothing may be written through it (a lake's views are read
        only whatever this says)."""
        self.read_once: dict[str, Any] = {}
        """What a read-only store computes once from its rows (they cannot change while it
        is open: DuckDB lets no writer in), by name: :func:`logpipe.summaries.stale`."""
        self._column_types: dict[tuple[str, str], list[tuple[str, str]]] = {}
        """``(name, type)`` of tables and views, asked once (only :meth:`migrate` changes
        them)."""
        self._source_ids: dict[str, int] = {}
        """``source_id`` of paths, known within the open transaction (a file's ingest
        asks for it with every block; a rollback may undo a new file's row)."""
        self._next_source_id: int | None = None
        """The next free ``source_id`` within the open transaction (asked once)."""
        self._in_transaction = False
        self._pending_sources: dict[str, dict[str, Any]] = {}
        """``sources`` rows of new files made within the open transaction and not yet
        written (:meth:`SourceRows.new_source_id` with ``defer``): written by the first
        read, or at the commit."""
        self._kept_sources: dict[str, dict[str, Any]] | None = None
        """``sources`` rows by path, read once (:meth:`SourceRows.keep_sources`)."""
        self._heads: set[str] | None = None
        """Every ``head_sha256`` the store may hold (a superset: one rolled back stays)."""
        self._labels: dict[str, int] | None = None
        """``label_id`` of every text in ``labels`` (read once; a rollback may undo new
        ones, and then it is read again)."""

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reader_waiting(self) -> bool:
        """Whether a reader waits for the file (:meth:`yield_to_readers` would let it in)."""
        return readers_waiting(self.path).exists()

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
        self.con = connect(self.path, read_only=False)
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
                self.con = connect(self.path, read_only=False)
                self.con.execute("SET enable_progress_bar = false")

    @contextmanager
    def transaction(self, on_commit: Callable[[], None] | None = None,
                    commit_memory: str | None = None) -> Iterator[None]:
        """One transaction: rolled back when the body raises.  The commit and
        ``on_commit`` (what records that it was made) run with signals held
        (:func:`interrupts.deferred`): Ctrl-C or SIGTERM there stops the command after
        both, never between them.  ``commit_memory``: the commit under that
        :meth:`memory_bound` (it reads back what the transaction spilled: all of it at
        once without one)."""
        self.con.execute("BEGIN TRANSACTION")
        self._next_source_id = None
        self._in_transaction = True
        try:
            yield
            self._before_read()  # (rows held back are written before the commit)
        except BaseException:
            self._in_transaction = False
            self._pending_sources.clear()
            self._source_ids.clear()
            self._next_source_id = None
            self._labels = None
            self.con.execute("ROLLBACK")
            raise
        self._in_transaction = False
        with interrupts.deferred():
            self._source_ids.clear()
            self._next_source_id = None
            with self.memory_bound(commit_memory) if commit_memory else nullcontext(), \
                    phase(COMMIT):
                self.con.execute("COMMIT")
            if on_commit is not None:
                on_commit()

    # -- reading ---------------------------------------------------------------------

    @contextmanager
    def memory_bound(self, limit: str) -> Iterator[None]:
        """DuckDB's ``memory_limit`` lowered to ``limit`` (e.g. ``512MB``) for the statements
        inside, where it is higher: their sorts, windows and joins spill to disk past it
        instead of growing with the data; the setting is restored after."""
        (before,) = self.one("SELECT current_setting('memory_limit')") or ("",)
        lower = _bytes(limit) < _bytes(str(before))
        if lower:
            self.con.execute(f"SET memory_limit = '{limit}'")
        try:
            yield
        finally:
            if lower:  # back to the connection's own (the setting reads back rounded)
                configured = config().get("memory_limit")
                self.con.execute(f"SET memory_limit = '{configured}'" if configured
                                 else "RESET memory_limit")

    def one(self, sql: str, params: list[Any] | None = None) -> tuple[Any, ...] | None:
        """First row or None.  Fetches everything: an unfinished result would block
        ``con.sql()`` (DuckDB 2.0)."""
        self._before_read()
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    def all(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        self._before_read()
        return self.con.execute(sql, params or []).fetchall()

    def _before_read(self) -> None:
        """Write what is held back, so that a read sees it (:class:`SourceRows`)."""

    def columns(self, table: str, schema: str = "main") -> list[tuple[str, str]]:
        """``(name, type)`` of a table or view of ``schema``, in order."""
        memo = self._column_types
        if (schema, table) not in memo:
            memo[(schema, table)] = [(r[0], r[1]) for r in self.all(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = ? AND table_schema = ? ORDER BY ordinal_position",
                [table, schema])]
        return list(memo[(schema, table)])


_UNITS = {"": 1, "B": 1, "BYTES": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
          "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}


def _bytes(size: str) -> float:
    """A DuckDB memory size (``488.2 MiB``, ``512MB``) in bytes; an unknown form: infinite."""
    text = size.strip().upper()
    digits = text.rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ ")
    try:
        return float(digits) * _UNITS[text[len(digits):].strip()]
    except (ValueError, KeyError):
        return float("inf")
