"""A new database starts as a copy of an empty one of the same schema.

Creating a database applies every migration and view definition (~30 files, ~100 views:
~0.25 s, a third of a small ingest).  The first database made from scratch is kept, empty,
in the user's cache (``LOGPIPE_CACHE``, else ``$XDG_CACHE_HOME/logpipe``, else
``~/.cache/logpipe``), one file per schema and DuckDB release (:func:`schema_key`), and
later new databases start as a copy of it; opening one then finds nothing to migrate.
Nothing depends on the cache: where it cannot be read or written, a new database is
migrated as before."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from pathlib import Path

import duckdb

from logpipe.store.schema import engine_migrations, migrations, views_key, views_sql

KEEP = 4
"""Templates kept in the cache (the most recent: other installs, other schemas)."""


def schema_key() -> str:
    """What an empty database is made of: every migration, the engines' migrations, the
    views and the DuckDB release that writes the file."""
    h = hashlib.sha256(duckdb.__version__.encode())
    for version, name, sql in migrations():
        h.update(f"\0{version}\0{name}\0{sql}".encode())
    for engine, version, name, sql in engine_migrations():
        h.update(f"\0{engine}\0{version}\0{name}\0{sql}".encode())
    h.update(views_key(views_sql() or "").encode())
    return h.hexdigest()[:24]


def cache_dir() -> Path:
    where = os.environ.get("LOGPIPE_CACHE")
    if where:
        return Path(where)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "logpipe"


def template_path() -> Path:
    return cache_dir() / f"empty-{schema_key()}.duckdb"


def copy_to(path: str) -> bool:
    """Make the new database ``path`` a copy of the template; False where there is none,
    or ``path`` exists (made meanwhile by another process: that one is opened)."""
    try:
        template = template_path()
        if not template.is_file():
            return False
        tmp = Path(path).with_name(f".{Path(path).name}.{uuid.uuid4().hex}.tmp")
        try:
            shutil.copyfile(template, tmp)
            os.link(tmp, path)  # (never over a file: fails where ``path`` exists)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def keep(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Keep the database at ``path`` (open on ``con``), made and migrated from scratch and
    still empty, as the template (written beside and renamed: a reader never sees half a
    file)."""
    try:
        target = template_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        con.execute("CHECKPOINT")  # (the whole database in its file)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        others = sorted(target.parent.glob("empty-*.duckdb"), key=lambda p: p.stat().st_mtime,
                        reverse=True)
        for old in others[KEEP:]:
            old.unlink(missing_ok=True)
    except (OSError, duckdb.Error):
        pass  # (no template: the next new database is migrated, as this one was)


def discard(path: str) -> None:
    """A copy that DuckDB could not open: it goes, with the template it came from."""
    for p in (Path(path), Path(path + ".wal"), template_path()):
        with contextlib.suppress(OSError):
            p.unlink(missing_ok=True)
