"""Large writes of one file, spooled to temporary Parquet files and loaded at its end."""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logpipe.store.schema import INTERNAL, stored, stored_tables

if TYPE_CHECKING:  # polars is imported where frames are written: an ingest of unchanged
    import polars as pl  # files needs none

    from logpipe.store.frames import FrameRows


class Spool:
    """Rows bound for several tables, held in temporary Parquet files until :meth:`load`.

    Use it inside the file's transaction: ``add`` as rows come, ``load`` once at the end
    (one ``INSERT ... SELECT`` per table), ``close`` always (it removes the files).  Files
    are written on a background thread (polars releases the GIL), so the caller goes on
    parsing; ``load`` waits for them and re-raises a failed write.
    """

    def __init__(self, store: FrameRows) -> None:
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
