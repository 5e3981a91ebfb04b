"""Large writes of one file, spooled to temporary Parquet files and loaded at its end."""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logpipe.store.schema import INTERNAL, stored, stored_tables
from logpipe.timings import LOAD, phase

if TYPE_CHECKING:  # polars is imported where frames are written: an ingest of unchanged
    import polars as pl  # files needs none

    from logpipe.store.frames import FrameRows


HELD_BYTES = 32 * 1024 * 1024
"""Rows a spool keeps in memory before it writes them to Parquet: a small file's rows (most
files) go straight into their tables at :meth:`Spool.load`, without files on disk."""
SMALL_TABLE_BYTES = 4 * 1024 * 1024
"""A table holding at most this much in memory stays there when the spool writes the others
to Parquet: what a spool holds is at most :data:`HELD_BYTES` plus this much a table."""


class Spool:
    """Rows bound for several tables, held until :meth:`load`: in memory while they are
    few, in temporary Parquet files once they are many.

    Use it inside the file's transaction: ``add`` as rows come, ``load`` once at the end
    (one ``INSERT ... SELECT`` per table), ``close`` always (it removes the files).  Files
    are written on a background thread (polars releases the GIL), so the caller goes on
    parsing; ``load`` waits for them and re-raises a failed write.
    """

    def __init__(self, store: FrameRows, shape_late: bool = False) -> None:
        self.store = store
        self.shape_late = shape_late
        """Rows of many small files: each table's frames are shaped for it
        (:meth:`FrameRows.rows_for`: columns, labels) once, all together, rather than one
        by one as they come (~1-2 ms of polars each, whatever the rows)."""
        self.unshaped: dict[str, list[pl.DataFrame]] = {}
        self._dir: Path | None = None
        self.parts: dict[str, list[Path]] = {}
        self.held: dict[str, list[pl.DataFrame]] = {}
        self._held_bytes: dict[str, int] = {}
        """The bytes held in memory, by table."""
        self._writer: ThreadPoolExecutor | None = None
        self._writes: list[Future[None]] = []

    @property
    def dir(self) -> Path:
        if self._dir is None:  # made when the first rows go to disk
            self._dir = Path(tempfile.mkdtemp(prefix="logpipe-spool-"))
        return self._dir

    def add(self, table: str, frame: pl.DataFrame, **constants: Any) -> int:
        """Spool ``frame`` (plus constant text columns) for ``table``; returns its rows."""
        if frame.height == 0:
            return 0
        if self.shape_late:
            frame = self.store.with_constants(frame, constants)
            self.unshaped.setdefault(table, []).append(frame)
        else:
            frame = self.store.rows_for(table, frame, constants)
            self.held.setdefault(table, []).append(frame)
        self._held_bytes[table] = self._held_bytes.get(table, 0) + int(frame.estimated_size())
        if sum(self._held_bytes.values()) > HELD_BYTES:
            # the tables that hold much go to disk; a table of few rows a block (a long
            # log's stats lines) stays in memory and is inserted once at the end
            big = [t for t, n in self._held_bytes.items() if n > SMALL_TABLE_BYTES]
            if big:
                self._spill(big)
        return frame.height

    def _shape(self) -> None:
        """The frames held unshaped, shaped for their tables (one frame a table)."""
        if not self.unshaped:
            return
        import polars as pl

        for table, frames in self.unshaped.items():
            frame = (pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1
                     else frames[0])
            self.held.setdefault(table, []).append(self.store.rows_for(table, frame, {}))
        self.unshaped = {}

    def _spill(self, tables: list[str] | None = None) -> None:
        """Write the frames held in memory to Parquet (``tables``: of those alone)."""
        self._shape()
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1)
        spilled = {t: f for t, f in self.held.items() if tables is None or t in tables}
        for table, frames in spilled.items():
            parts = self.parts.setdefault(table, [])
            for frame in frames:
                path = self.dir / f"{table}-{len(parts):06d}.parquet"
                self._writes.append(self._writer.submit(
                    frame.write_parquet, path, compression="lz4", statistics=False))
                parts.append(path)
            del self.held[table]
            self._held_bytes.pop(table, None)

    def flush(self) -> None:
        """Wait for every file written so far (re-raising a write's error)."""
        writes, self._writes = self._writes, []
        for w in writes:
            w.result()

    def files(self, table: str) -> list[str]:
        """The Parquet files spooled for ``table`` (read them with ``read_parquet``; its
        rows held in memory are written now, the other tables' stay)."""
        if self.held.get(table) or self.unshaped.get(table):
            self._spill([table])
            self.flush()
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
        with phase(LOAD):
            self._load(tables)

    def _load(self, tables: list[str] | None) -> None:
        self._shape()
        if self.held:  # tables with no rows on disk: inserted from memory
            import polars as pl

            for table in tables if tables is not None else list(self.held):
                frames = self.held.get(table) if table not in self.parts else None
                if frames:
                    del self.held[table]
                    self._held_bytes.pop(table, None)
                    self.store.insert_rows(table, pl.concat(frames, how="diagonal_relaxed")
                                           if len(frames) > 1 else frames[0])
        if not self.parts:
            return
        self._spill(tables)  # (the held rows of tables with rows on disk join them there)
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
        if self._writer is not None:
            self._writer.shutdown(wait=True)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self.held.clear()
        self._held_bytes.clear()
        self.unshaped.clear()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
