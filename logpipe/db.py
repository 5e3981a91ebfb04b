"""The front door to a database: ``open_db(path)`` opens a DuckDB file or a Parquet lake
(:mod:`logpipe.lake`), the only place that tells the two apart.  Everything that reads or
writes runs goes through it; :class:`logpipe.store.Store` itself knows files only."""

from __future__ import annotations

from pathlib import Path

from logpipe import lake
from logpipe.store import Store


def open_db(path: str | Path, *, read_only: bool = False) -> Store:
    """The database at ``path``: a lake folder read as a database, else the DuckDB file
    (created and migrated unless ``read_only``)."""
    if lake.is_lake(path):
        return lake.open_lake(path)
    return Store.open(path, read_only=read_only)
