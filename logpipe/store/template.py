"""A new database starts as a copy of an empty one of the same schema.

Creating a database applies every migration and view definition (~30 files, ~100 views:
~0.25 s, a third of a small ingest).  An empty database of the schema is made once in the
user's cache (``LOGPIPE_CACHE``, else ``$XDG_CACHE_HOME/logpipe``, else
``~/.cache/logpipe``), one file per schema and DuckDB release (:func:`schema_key`), and a
new database starts as a copy of it; opening one then finds nothing to migrate.  Nothing
depends on the cache: where it cannot be read or written, a new database is migrated as
before.

The template is made in a file of its own, never copied out of a database in use: a
process that opens and closes a file DuckDB holds open drops DuckDB's lock on it (POSIX
record locks belong to the process and go with any of its descriptors), and a second
ingest waiting for the database would then write beside the first."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import duckdb

from logpipe.errors import LogpipeError
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


def copy_to(path: str, make: Callable[[str], None]) -> bool:
    """Make the new database ``path`` a copy of the template (made first by ``make``, which
    migrates a new database at the path it is given, where there is none); False where
    that fails, DuckDB cannot open the template (damaged: it goes), or ``path`` exists
    (made meanwhile by another process: that one is opened).  The copy is opened once
    before it takes the name, so a damaged one never does."""
    try:
        template = template_path()
        if not template.is_file() and not _made(template, make):
            return False
        tmp = Path(path).with_name(f".{Path(path).name}.{uuid.uuid4().hex}.tmp")
        try:
            shutil.copyfile(template, tmp)
            try:
                duckdb.connect(str(tmp), read_only=True).close()
            except duckdb.Error:
                template.unlink(missing_ok=True)
                return False
            os.link(tmp, path)  # (never over a file: fails where ``path`` exists)
        finally:
            _remove(tmp)
    except OSError:
        return False
    return True


def _made(template: Path, make: Callable[[str], None]) -> bool:
    """The template made (migrated beside it and renamed: a reader never sees half a
    file); older ones beyond :data:`KEEP` go."""
    template.parent.mkdir(parents=True, exist_ok=True)
    tmp = template.with_name(f".{template.name}.{uuid.uuid4().hex}.tmp")
    try:
        make(str(tmp))
        os.replace(tmp, template)
    except (OSError, duckdb.Error, LogpipeError):
        return False
    finally:
        _remove(tmp)
    others = sorted(template.parent.glob("empty-*.duckdb"), key=lambda p: p.stat().st_mtime,
                    reverse=True)
    for old in others[KEEP:]:
        old.unlink(missing_ok=True)
    return True


def _remove(path: Path) -> None:
    for p in (path, Path(f"{path}.wal")):
        p.unlink(missing_ok=True)
