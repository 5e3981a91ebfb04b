"""The front door to a database: ``open_db(path)`` opens a DuckDB file or a Parquet lake
(:mod:`logpipe.lake`), the only place that tells the two apart.  Everything that reads or
writes runs goes through it; :class:`logpipe.store.Store` itself knows files only."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from logpipe import lake
from logpipe.store import Store

StoreOrPath = Store | str | Path
"""What a library entry point reads: the store a command opened, or a database path."""


def open_db(path: str | Path, *, read_only: bool = False) -> Store:
    """The database at ``path``: a lake folder read as a database, else the DuckDB file
    (created and migrated unless ``read_only``)."""
    if lake.is_lake(path):
        return lake.open_lake(path)
    return Store.open(path, read_only=read_only)


@contextmanager
def using(db: StoreOrPath, *, read_only: bool = False) -> Iterator[Store]:
    """The store ``db`` names for the block: an open :class:`Store` as it is (whoever
    opened it closes it: a command opens the database once and hands it to every library
    call), else the database at the path, opened for the block and closed after."""
    if isinstance(db, Store):
        yield db
        return
    with open_db(db, read_only=read_only) as store:
        yield store
