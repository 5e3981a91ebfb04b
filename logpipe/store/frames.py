"""Rows written from frames: each table's columns in order, repeated texts stored once as
labels (``<name>_code``), the file's ``source_id`` on every row."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from logpipe.store.schema import FEW_LABELS, INTERNAL, LABEL_SUFFIX, stored, stored_tables
from logpipe.store.sources import SourceRows

if TYPE_CHECKING:
    import polars as pl


def add_columns(frame: pl.DataFrame, columns: list[pl.Series]) -> pl.DataFrame:
    """``frame`` with ``columns`` (replacing those of their names) without a polars query
    where none is replaced: a query costs ~0.1 ms whatever the rows, and a small file's
    frames are a few dozen rows."""
    if any(c.name in frame.columns for c in columns):
        return frame.with_columns(columns)
    return frame.hstack(columns)


class FrameRows(SourceRows):
    """Inserting frames of rows into the stored tables."""

    def rows_for(self, table: str, frame: pl.DataFrame, constants: dict[str, Any]
                 ) -> pl.DataFrame:
        """``frame`` plus constant columns, cut to ``table``'s stored columns in their
        order; a ``source_path`` constant is stored as its ``source_id``, a text column
        stored as ``<name>_code`` as its labels."""
        columns = [c for c, _ in self.columns(
            table, INTERNAL if table in stored_tables() else "main")]
        frame = self.with_constants(frame, constants)
        codes = [self._coded(frame.get_column(c[:-len(LABEL_SUFFIX)])).alias(c)
                 for c in columns
                 if c.endswith(LABEL_SUFFIX) and c[:-len(LABEL_SUFFIX)] in frame.columns]
        if codes:
            frame = frame.with_columns(codes)
        return frame.select([c for c in columns if c in frame.columns])

    def with_constants(self, frame: pl.DataFrame, constants: dict[str, Any]) -> pl.DataFrame:
        """``frame`` plus constant text columns; a ``source_path`` constant as its
        ``source_id``."""
        import polars as pl

        if not constants:
            return frame
        columns = [pl.Series(k, [v], dtype=pl.String) for k, v in constants.items()
                   if k != "source_path"]
        if "source_path" in constants:
            columns.insert(0, pl.Series("source_id", [self.source_id(
                constants["source_path"])], dtype=pl.Int32))
        return add_columns(frame, [c.new_from_index(0, frame.height) for c in columns])

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
        known = self._known_labels()
        new = [t for t in texts if t not in known]
        if new:
            first = max(known.values(), default=0) + 1
            rows = list(zip(range(first, first + len(new)), new, strict=True))
            self.con.executemany(f"INSERT INTO {INTERNAL}.labels VALUES (?, ?)", rows)
            known.update((t, i) for i, t in rows)
        return {t: known[t] for t in texts}

    def label_texts(self) -> dict[int, str]:
        """Each ``label_id``'s text (a coded column read back)."""
        return {i: t for t, i in self._known_labels().items()}

    def _known_labels(self) -> dict[str, int]:
        """``labels`` as text: id, read once (forgotten where a transaction rolls back)."""
        if self._labels is None:
            self._labels = dict(self.all(f"SELECT label, label_id FROM {INTERNAL}.labels"))
        return self._labels

    def insert(self, table: str, frame: pl.DataFrame, **constants: Any) -> int:
        """Append ``frame`` (plus constant columns) to ``table``; returns rows written."""
        if frame.height == 0:
            return 0
        return self.insert_rows(table, self.rows_for(table, frame, constants))

    def insert_rows(self, table: str, frame: pl.DataFrame) -> int:
        """Append rows already shaped by :meth:`rows_for`; returns rows written."""
        cols = frame.columns
        if max(frame.n_chunks("all"), default=1) > 1:
            # (a group's rows are a frame of each file's: one batch to DuckDB, not one per
            # file and column; 1,743 rows of 100 small files: 34 -> 11 ms an insert)
            frame = frame.rechunk()
        # read by DuckDB's scan of this frame's local variable, not a registered view: a
        # view registered and dropped in a transaction keeps its Arrow table until the
        # commit (a file's inserts held all their rows: ~100 bytes a row, 300 MB on a
        # 1 GB file of docker launches)
        _incoming = frame.to_arrow()  # noqa: F841 - read by name in the statement
        col_list = ", ".join(cols)
        self.con.execute(f"INSERT INTO {stored(table)} ({col_list}) "
                         f"SELECT {col_list} FROM _incoming")
        return frame.height
