"""A Parquet lake: the public tables as hive-partitioned Parquet on shared storage.

Layout (``DIR``)::

    _schema.json                      contract version, every table's columns and partitions
    _manifest.json                    the complete parts, per table and source file
    table=batches/engine=sglang/run_id=<run>/part-<file>-<content>-<n>.parquet
    table=sources/part-<file>-<content>-<n>.parquet
    ...

Every table of the database's public contract (``schemas/README.md``) is there with its
documented columns, except ``sources.source_id`` (a number local to one database: the
lake's key of a file is its path).  Tables whose rows belong to runs are partitioned by
``engine`` and ``run_id`` (trace tables by their trace's run), so a query for a few runs
reads a few files; partition columns live in the paths, as Hive, Spark and Trino expect,
and in the files as text as well (a run id may be all digits: typed from its path alone,
it would be read as a number by some readers and clash with the next, non-digit one).

A file's rows are in no particular order (a reader sorts them, by ``line_no`` say).

The unit of an export is one source file's rows of one table, fingerprinted by a hash over
them: an export writes only units whose fingerprint changed (incremental), each to files
named by file and content.  Files are written to ``_staging/`` and renamed into place,
then ``_manifest.json`` is replaced by a rename: a reader that follows the manifest sees
either the previous complete export or the new one, never a part of one.  Files that no
manifest names any more are removed after the switch.

:func:`open_lake_views` gives a DuckDB connection the lake's tables as views (no copy),
so ``sql``, ``compare`` and ``check`` run on it as on a database.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from logpipe._version import __version__
from logpipe.errors import InputError
from logpipe.store import (
    ALL_ROWS_VIEWS,
    Store,
    data_tables,
    lock_wait_s,
    migrations,
    one_row_view_sql,
)

LOCK_FILE = "_lock"
SCHEMA_FILE = "_schema.json"
MANIFEST_FILE = "_manifest.json"
STAGING = "_staging"
LAKE_FORMAT = 1
"""Version of this layout (the files above); the table contract has its own version."""

TRACE_TABLES = ("trace_kernels", "trace_annotations", "trace_ops")
def tables() -> tuple[str, ...]:
    """The lake's tables: a table of the database under its public view's rows (``bench_results``
without the console summaries that repeat a JSONL record: what a Spark or pyarrow reader
of ``table=bench_results`` counts is what ``logpipe sql`` counts), and each such table's
every row beside it (``bench_results_all``, with ``duplicate_of``)."""
    return ("sources", "runs", "run_env", *data_tables(), *ALL_ROWS_VIEWS.values())


def partitions(table: str) -> tuple[str, ...]:
    """The partition columns of a lake table."""
    return {"sources": (), "runs": ("engine",)}.get(table, ("engine", "run_id"))
LOCAL_COLUMNS = {"sources": ("source_id",)}
"""Columns of one database that the lake leaves out."""


def _unit_query(table: str, columns: list[str]) -> str:
    """Rows of ``table`` with ``_unit`` (the source file they came from) and the partition
    columns that are not columns of the table.  Rows of no run are filed under the first
    built-in engine's partition (where every earlier export filed them)."""
    from logpipe.engines import engines

    UNLINKED = engines()[0].name  # noqa: N806
    cols = ", ".join(f"t.{c}" for c in columns)
    if table == "sources":
        return f"SELECT {cols}, t.path AS _unit FROM sources t"
    if table == "runs":
        return f"SELECT {cols}, t.source_path AS _unit FROM runs t"
    if table == "run_env":
        return (f"SELECT {cols}, coalesce(r.engine, '{UNLINKED}') AS engine, "
                "r.source_path AS _unit FROM run_env t JOIN runs r USING (run_id)")
    if table in TRACE_TABLES:
        return (f"SELECT {cols}, coalesce(r.engine, '{UNLINKED}') AS engine, x.run_id, "
                f"t.source_path AS _unit FROM {table} t "
                "LEFT JOIN traces x USING (source_path) LEFT JOIN runs r ON r.run_id = x.run_id")
    return (f"SELECT {cols}, coalesce(r.engine, '{UNLINKED}') AS engine, t.source_path AS _unit "
            f"FROM {table} t LEFT JOIN runs r USING (run_id)")


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def token(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass
class ExportResult:
    lake: str
    units_written: int = 0
    units_kept: int = 0
    units_dropped: int = 0
    files_written: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    units_others: int = 0
    """Units other databases (or ``ingest --lake``) wrote, kept as they were."""
    others: set[str] = field(default_factory=set)


def table_columns(store: Store) -> dict[str, list[tuple[str, str]]]:
    """The lake's columns of every table: the public ones, less the local ones."""
    return {t: [(c, ty) for c, ty in store.columns(t) if c not in LOCAL_COLUMNS.get(t, ())]
            for t in tables()}


def read_manifest(lake: Path) -> dict[str, Any]:
    path = lake / MANIFEST_FILE
    if not path.exists():
        return {"format": LAKE_FORMAT, "tables": {}}
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable lake manifest: {exc}", path=path,
                         hint="re-export the lake from a database: logpipe export DIR") from exc
    if manifest.get("format") != LAKE_FORMAT:
        raise InputError(f"lake format {manifest.get('format')} is not {LAKE_FORMAT}",
                         path=path, hint="export it again with this logpipe")
    return manifest


def is_lake(path: str | Path) -> bool:
    return (Path(path) / MANIFEST_FILE).is_file()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def stage_units(store: Store, staging: Path, tables_done: dict[str, dict[str, Any]],
                only_units: set[str] | None = None) -> tuple[dict[str, dict[str, Any]], int]:
    """Write every unit (table, source file) of ``store`` whose fingerprint is not the one
    in ``tables_done`` to ``staging``; returns ``{table: {unit: entry}}`` for every unit
    (entries of kept units as they were; written ones name their staged files) and the
    number of units written.  ``only_units`` limits the export to those source files."""
    columns = table_columns(store)
    out: dict[str, dict[str, Any]] = {}
    written = 0
    for table in tables():
        cols = [c for c, _ in columns[table]]
        query = _unit_query(table, cols)
        parts = partitions(table)
        hashed = ", ".join([*cols, *(p for p in parts if p not in cols)])
        fingerprints = store.all(
            f"SELECT _unit, count(*), CAST(sum(hash({hashed})) AS VARCHAR) "
            f"FROM ({query}) GROUP BY _unit")
        out[table] = {}
        todo: list[tuple[str, int, str]] = []
        for unit, rows, digest in fingerprints:
            if only_units is not None and unit not in only_units:
                continue
            fingerprint = token(f"{table}|{rows}|{digest}")
            done = tables_done.get(table, {}).get(unit)
            if done is not None and done["fingerprint"] == fingerprint:
                out[table][unit] = done
                continue
            todo.append((unit, int(rows), fingerprint))
        if not todo:
            continue
        for at in range(0, len(todo), UNITS_PER_COPY):
            some = todo[at:at + UNITS_PER_COPY]
            folders = [staging / f"table={table}" / f"u{token(unit)}" for unit, _, _ in some]
            files = _write_units(store, staging / f"table={table}" / "_copy", query,
                                 [c for c in cols if c not in parts], parts,
                                 [unit for unit, _, _ in some], folders)
            for (unit, rows, fingerprint), folder, names in zip(some, folders, files,
                                                                strict=True):
                out[table][unit] = {"fingerprint": fingerprint, "rows": rows,
                                    "staged": str(folder), "files": names}
        written += len(todo)
    return out, written


UNITS_PER_COPY = 256
"""Units of one table written by one COPY: DuckDB holds every partition's rows of a
COPY until its end (2,000 files' units at once peaked at 457 MB, 6,000 at 1.1 GB); a COPY
reads the table's query once."""


def _write_units(store: Store, raw: Path, query: str, data_cols: list[str],
                 parts: tuple[str, ...], units: list[str], folders: list[Path]
                 ) -> list[list[str]]:
    """The rows of ``units`` (``query``'s rows by their ``_unit``) written by one COPY,
    each unit's to its folder of ``folders``: its partition folders (``engine=.../``)
    and their files; returns each unit's files, relative to its folder.  (A COPY a unit
    read the table's query once a unit: ~10 ms each, 9 s for the bundled samples' 1,128
    units, and a database of thousands of files grew with its files times its rows.)

    The unit is the first partition of the COPY, by its number in ``units``, and left out
    of the files; the table's partition columns are written into the files (a reader
    that types them from the path reads an all-digit run id as a number, then fails on
    the next one) and partition the COPY again under other names, renamed after."""
    alias = [f"_part_{i}" for i in range(len(parts))]
    raw.parent.mkdir(parents=True, exist_ok=True)
    select = ", ".join([*data_cols, *parts, "w._k",
                        *(f"{p} AS {a}" for p, a in zip(parts, alias, strict=True))])
    store.con.execute(
        f"COPY (SELECT {select} FROM ({query}) q JOIN (SELECT unnest(?::VARCHAR[]) AS _unit, "
        "unnest(?::INTEGER[]) AS _k) w USING (_unit)) "
        f"TO {literal(str(raw))} (FORMAT parquet, COMPRESSION zstd, "
        f"FILENAME_PATTERN 'part-{{i}}', PARTITION_BY ({', '.join(['_k', *alias])}), "
        "WRITE_PARTITION_COLUMNS false, OVERWRITE_OR_IGNORE)",
        [units, list(range(len(units)))])
    named = dict(zip([f"{a}=" for a in alias], [f"{p}=" for p in parts], strict=True))
    files: list[list[str]] = [[] for _ in units]
    for path in raw.rglob("*.parquet"):
        first, *middle, name = path.relative_to(raw).parts
        k = int(first.removeprefix("_k="))
        rel = Path(*(named[m[:m.index("=") + 1]] + m[m.index("=") + 1:] for m in middle),
                   name)
        dest = folders[k] / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
        files[k].append(str(rel))
    shutil.rmtree(raw, ignore_errors=True)
    return [sorted(names) for names in files]


def commit(lake: Path, staged: dict[str, dict[str, Any]], contract: dict[str, Any],
           replaced: set[str] | None = None, origin: str | None = None,
           replace_all: bool = False) -> ExportResult:
    """Move staged files into place, then switch the manifest (one rename), then remove
    the files no manifest names.  Every unit records the ``origin`` that wrote it (a
    database's path, or ``ingest --lake``).  Units of the old manifest that ``staged``
    lacks are dropped when they are this origin's (an export of a whole database:
    ``replaced`` None; the files it no longer holds) or those of the source files in
    ``replaced`` (the files an ingest read again); other origins' units are kept (a team
    lake holds several databases) unless ``replace_all``."""
    result = ExportResult(str(lake))
    old = read_manifest(lake)
    units: dict[str, dict[str, Any]] = {}
    for table in tables():
        before = old["tables"].get(table, {})
        if replaced is not None:
            now: dict[str, Any] = {u: e for u, e in before.items() if u not in replaced}
        elif replace_all:
            now = {}
        else:  # another database's units stay, unless this one has the same source file
            now = {u: e for u, e in before.items()
                   if e.get("origin") != origin and u not in staged.get(table, {})}
            result.units_others += len(now)
            result.others.update(str(e.get("origin") or "an earlier export")
                                 for e in now.values())
        for unit, entry in staged.get(table, {}).items():
            if "staged" not in entry:
                now[unit] = {**entry, "origin": entry.get("origin") or origin}
                result.units_kept += 1
                continue
            final: list[str] = []
            for rel in entry["files"]:
                sub = Path(rel).parent  # the partition folders, if any
                name = f"part-{token(unit)}-{entry['fingerprint']}-{len(final)}.parquet"
                dest = lake / f"table={table}" / sub / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(Path(entry["staged"]) / rel, dest)
                final.append(str(dest.relative_to(lake)))
            now[unit] = {"fingerprint": entry["fingerprint"], "rows": entry["rows"],
                         "files": final, "origin": origin}
            result.units_written += 1
            result.files_written += len(final)
        result.units_dropped += len(set(before) - set(now))
        result.rows[table] = sum(int(e["rows"]) for e in now.values())
        units[table] = now
    _write_atomic(lake / SCHEMA_FILE, json.dumps(contract, indent=1, sort_keys=True))
    _write_atomic(lake / MANIFEST_FILE, json.dumps({
        "format": LAKE_FORMAT, "contract_version": contract["contract_version"],
        "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "logpipe": __version__, "tables": units}, indent=1, sort_keys=True))
    named = {lake / f for entries in units.values() for e in entries.values()
             for f in e["files"]}
    for path in lake.glob("table=*/**/*.parquet"):
        if path not in named:
            path.unlink()
    for folder in sorted(lake.glob("table=*/**/"), key=lambda p: -len(p.parts)):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return result


def contract_of(store: Store) -> dict[str, Any]:
    """What ``_schema.json`` says: the contract version (the database's migration level),
    each table's columns and types, and its partition columns."""
    return {
        "format": LAKE_FORMAT,
        "contract_version": max(v for v, _, _ in migrations()),
        "logpipe": __version__,
        "tables": {t: {"columns": [[c, ty] for c, ty in cols],
                       "partition_by": list(partitions(t))}
                   for t, cols in table_columns(store).items()},
    }


@contextmanager
def writer_lock(lake: Path) -> Iterator[None]:
    """One writer of a lake at a time (an export or a fleet ingest): an exclusive lock on
    ``DIR/_lock``, waited for (saying so) up to ``LOGPIPE_LOCK_WAIT`` seconds.  Readers
    take no lock: they follow the manifest."""
    lake.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + lock_wait_s()
    said = False
    with open(lake / LOCK_FILE, "w") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise InputError("another export or ingest is writing this lake",
                                     path=lake, hint="wait for it, or raise "
                                     "LOGPIPE_LOCK_WAIT (seconds)") from None
                if not said:
                    sys.stderr.write(f"logpipe: waiting for {lake}: another export or "
                                     "ingest is writing it\n")
                    said = True
                time.sleep(0.25)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def export(db: str | Path, lake: str | Path, replace: bool = False) -> ExportResult:
    """Export the database ``db`` to the lake folder ``lake`` (created if missing): only
    the units that changed since the last export are written.  What other databases
    exported into the lake is kept (a source file both hold takes this database's rows);
    ``replace``: the lake becomes this database's alone."""
    lake = Path(lake)
    try:
        lake.mkdir(parents=True, exist_ok=True)
        with writer_lock(lake):
            return _export(db, lake, replace)
    except OSError as exc:  # a lake that cannot be made or written: the user's path
        raise InputError(f"cannot write the lake {lake}: {exc.strerror or exc}", path=lake,
                         hint="give a folder you can create and write") from exc


def _export(db: str | Path, lake: Path, replace: bool = False) -> ExportResult:
    staging = lake / STAGING / uuid.uuid4().hex
    try:
        with Store.open(db, read_only=True) as store:
            if store.outdated():
                raise InputError("the database needs a migration before it can be exported",
                                 path=db, hint="run `logpipe ingest` (or `logpipe check "
                                 "--update-cache`) on it once with this logpipe")
            staged, _ = stage_units(store, staging, read_manifest(lake)["tables"])
            contract = contract_of(store)
        return commit(lake, staged, contract, origin=str(Path(db).resolve()),
                      replace_all=replace)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        remove_if_empty(lake / STAGING)


def remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


# ---------------------------------------------------------------------------- reading


def _hive_types(parts: tuple[str, ...]) -> str:
    return "{" + ", ".join(f"'{p}': 'VARCHAR'" for p in parts) + "}"


def open_lake(path: str | Path) -> Store:
    """A Parquet lake read as a database: an in-memory database with logpipe's schema
    whose tables are views over the lake's files.  What is written to it (a cache) is
    gone when it closes."""
    store = Store.in_memory(path)
    open_lake_views(store.con, path)  # (the derived views bind to them when queried)
    return store


def open_lake_views(con: duckdb.DuckDBPyConnection, lake: str | Path) -> None:
    """Make the lake's tables the ``main`` tables of ``con`` (a database logpipe migrated,
    e.g. in memory): each becomes a view over the manifest's Parquet files, with the
    documented columns in order.  The derived views read them as they read a database."""
    lake = Path(lake)
    manifest = read_manifest(lake)
    contract = json.loads((lake / SCHEMA_FILE).read_text())
    if contract.get("contract_version") != manifest.get("contract_version"):
        raise InputError("the lake's schema and manifest disagree", path=lake,
                         hint="export it again: logpipe export DIR")
    for table in tables():
        spec = contract["tables"].get(table)
        if spec is None:
            continue
        columns = [(c, ty) for c, ty in spec["columns"]]
        files = [str(lake / f) for e in manifest["tables"].get(table, {}).values()
                 for f in e["files"]]
        # a lake of an earlier export holds only every row, under the public table's name
        older = table in ALL_ROWS_VIEWS and ALL_ROWS_VIEWS[table] not in contract["tables"]
        if table in ALL_ROWS_VIEWS and not older:
            continue  # the public view over the table of every row, made with it below
        name = ALL_ROWS_VIEWS.get(table, table) if older else table
        public = next((t for t, every in ALL_ROWS_VIEWS.items() if every in (table, name)),
                      None)
        for view in {table, name, *([public] if public else [])}:
            kind = con.execute("SELECT table_type FROM information_schema.tables WHERE "
                               "table_schema = 'main' AND table_name = ?", [view]).fetchall()
            if kind:
                con.execute(f"DROP {'VIEW' if kind[0][0] == 'VIEW' else 'TABLE'} main.{view}")
        local = list(LOCAL_COLUMNS.get(table, ()))
        select = ", ".join([f"CAST({c} AS {ty}) AS {c}" for c, ty in columns]
                           + [f"CAST(NULL AS INTEGER) AS {c}" for c in local])
        if files:
            parts = tuple(spec["partition_by"])
            listed = "[" + ", ".join(literal(f) for f in files) + "]"
            source = (f"read_parquet({listed}, union_by_name = true"
                      + (f", hive_partitioning = true, hive_types = {_hive_types(parts)}"
                         if parts else ", hive_partitioning = false") + ")")
            con.execute(f"CREATE VIEW main.{name} AS SELECT {select} FROM {source}")
        else:
            empty = ", ".join([f"CAST(NULL AS {ty}) AS {c}" for c, ty in columns]
                              + [f"CAST(NULL AS INTEGER) AS {c}" for c in local])
            con.execute(f"CREATE VIEW main.{name} AS SELECT * FROM (SELECT {empty}) "
                        "WHERE false")
        if public is not None:
            con.execute(one_row_view_sql(public))
