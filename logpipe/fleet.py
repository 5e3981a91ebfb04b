"""Fleet ingest into a Parquet lake: folders of files parsed as parallel tasks.

``logpipe ingest PATHS --lake DIR [--runner ray --address auto]``.  The files are grouped
by folder (records are linked to runs of their own folder, so a folder is the unit that
links the same alone as with everything else) and every group with a new or changed file
becomes one task.  A task runs the ordinary ingest (:func:`logpipe.ingest.ingest_files`,
the same parser code) into a database of its own and stages its rows as lake parts
(:func:`logpipe.lake.stage_units`) under ``DIR/_staging/``.  The driver then commits
every task's parts at once (:func:`logpipe.lake.commit`): files renamed into place, the
manifest switched by one rename.  A failed task's staged files are never named by a
manifest, so they stay invisible and are removed.  Re-running finds every file unchanged
(size and modification time equal to the lake's ``sources`` row) and adds nothing.

A task reads its files whole into a fresh database, so a file that changed in any way is
read again whole and its rows in the lake replaced: an append as one database would read
it; an edit in place as ``--replace`` would; a truncated log (``copytruncate``) holds only
its new content (its earlier lines are in the lake under the rotated copy's path when
that copy is ingested too, where one database keeps them under the original path).

Engines: ``local`` runs the tasks one after another in this process; ``ray`` runs them
as Ray tasks (``pip install logpipe[ray]``) on a local Ray (``--workers N`` CPUs) or on
the cluster at ``--address`` (its workers need logpipe installed and ``DIR`` mounted).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from logpipe import lake as lakes
from logpipe.db import open_db
from logpipe.env import Tiers
from logpipe.errors import InputError
from logpipe.ingest import EnvOptions, ingest_files, walk
from logpipe.ingest.walk import free_name
from logpipe.readers import read_head
from logpipe.sources import HEAD_BYTES, detect
from logpipe.store import Store

RUNNERS = ("local", "ray")


@dataclass
class FleetResult:
    lake: str
    runner: str
    workers: int
    groups: int = 0
    groups_skipped: int = 0
    files: int = 0
    files_failed: list[str] = field(default_factory=list)
    tasks_failed: list[str] = field(default_factory=list)
    bytes_read: int = 0
    duplicates: list[str] = field(default_factory=list)
    """Files whose content another file already holds (skipped, as ingest skips them)."""
    units_written: int = 0
    units_kept: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def _known_files(lake: Path) -> dict[str, tuple[Any, Any]]:
    """``path -> (size_bytes, mtime)`` of the files the lake holds."""
    if not lakes.is_lake(lake):
        return {}
    with open_db(lake, read_only=True) as store:
        return {p: (s, m) for p, s, m in store.all(
            "SELECT path, size_bytes, mtime FROM sources")}


def plan_groups(paths: list[Path], lake: Path) -> tuple[list[list[tuple[Path, Path]]], int]:
    """Folders of files to ingest (a folder with nothing new or changed is left out) and
    how many were left out."""
    lake = lake.resolve()
    files = [(f, r) for f, r in walk(paths) if lake not in f.resolve().parents]
    known = _known_files(lake)
    groups: dict[Path, list[tuple[Path, Path]]] = {}
    for f, root in files:
        groups.setdefault(f.resolve().parent, []).append((f, root))
    todo, skipped = [], 0
    for members in groups.values():
        changed = False
        for f, _ in members:
            stat = f.stat()
            was = known.get(str(f.resolve()))
            if was is not None and was == (stat.st_size, datetime.fromtimestamp(stat.st_mtime)):
                continue
            try:
                head = read_head(f, HEAD_BYTES).decode("utf-8", errors="replace")
            except OSError:
                changed = True
                break
            if detect(head) is not None:
                changed = True
                break
        if changed:
            todo.append(members)
        else:
            skipped += 1
    return todo, skipped


def ingest_group(pairs: list[tuple[str, str]], staging: str, done: dict[str, dict[str, Any]],
                 options: dict[str, Any]) -> dict[str, Any]:
    """One task: ingest ``pairs`` (file, root) into a database of its own and stage its
    parts under ``staging``; returns the staged units and what happened to each file.
    Runs in a Ray worker or in this process; everything it returns is plain data."""
    work = Path(tempfile.mkdtemp(prefix="logpipe-task-"))
    try:
        opts = EnvOptions(dict(options.get("env") or {}), dict(options.get("tags") or {}),
                          Tiers.load(Path(options["tiers"]) if options.get("tiers") else None),
                          None, bool(options.get("keep_request_text")), False,
                          options.get("tz"))
        result = ingest_files([(Path(f), Path(r)) for f, r in pairs], work / "task.duckdb",
                              opts)
        with Store.open(work / "task.duckdb", read_only=True) as store:
            units = {str(Path(f).resolve()) for f, _ in pairs}
            staged, written = lakes.stage_units(store, Path(staging), done, only_units=units)
        return {"staged": staged, "written": written,
                "failed": [f"{f.path}: {f.detail}" for f in result.failed],
                "read": [f.path for f in result.files if f.status != "failed"],
                "files": len(result.files),
                "bytes": sum(Path(f).stat().st_size for f, _ in pairs)}
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # nothing of a failed task is kept
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _contract() -> dict[str, Any]:
    with Store.open(":memory:") as store:
        return lakes.contract_of(store)


def ingest_to_lake(paths: list[Path], lake: Path, *, runner: str = "local",
                   address: str | None = None, workers: int = 2,
                   env: dict[str, str] | None = None, tags: dict[str, str] | None = None,
                   tiers_file: Path | None = None, keep_request_text: bool = False,
                   tz: str | None = None,
                   on_group: Callable[[int, int], None] | None = None) -> FleetResult:
    """Ingest ``paths`` into the lake ``lake``, the tasks run by ``runner`` (``local`` or
    ``ray``)."""
    if runner not in RUNNERS:
        raise InputError(f"unknown runner {runner!r}", hint="use one of: local, ray")
    started = time.perf_counter()
    lake = Path(lake)
    with lakes.writer_lock(lake):
        result = _ingest_to_lake(paths, lake, runner, address, workers, {
            "env": env or {}, "tags": tags or {}, "keep_request_text": keep_request_text,
            "tz": tz, "tiers": str(tiers_file) if tiers_file else None}, on_group)
    result.seconds = time.perf_counter() - started
    return result


def _ingest_to_lake(paths: list[Path], lake: Path, runner: str, address: str | None,
                    workers: int, options: dict[str, Any],
                    on_group: Callable[[int, int], None] | None) -> FleetResult:
    result = FleetResult(str(lake), runner, workers)
    groups, result.groups_skipped = plan_groups(paths, lake)
    result.groups = len(groups)
    done = lakes.read_manifest(lake)["tables"]
    staging_root = lake / lakes.STAGING / uuid.uuid4().hex
    jobs = []
    for n, members in enumerate(groups):
        units = {str(f.resolve()) for f, _ in members}
        mine = {t: {u: e for u, e in entries.items() if u in units}
                for t, entries in done.items()}
        jobs.append(([(str(f), str(r)) for f, r in members], str(staging_root / f"g{n}"),
                     mine, options))
    try:
        outcomes = _run(jobs, runner, address, workers, on_group)
        merged: dict[str, dict[str, Any]] = {}
        reread: set[str] = set()  # files whose rows this ingest replaces (failed ones keep)
        for (pairs, _, _, _), outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                result.tasks_failed.append(f"{Path(pairs[0][0]).parent}: {outcome}")
                continue
            result.files += outcome["files"]
            result.bytes_read += outcome["bytes"]
            result.files_failed += outcome["failed"]
            reread.update(outcome["read"])
            for table, entries in outcome["staged"].items():
                merged.setdefault(table, {}).update(entries)
        if reread:
            result.duplicates = _drop_duplicate_files(lake, merged, done)
            _dedupe_run_names(lake, merged, done)
            committed = lakes.commit(lake, merged, _contract(), replaced=reread,
                                     origin="ingest --lake")
            result.units_written, result.units_kept = committed.units_written, \
                committed.units_kept
            result.rows = committed.rows
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
        lakes.remove_if_empty(lake / lakes.STAGING)
    return result


def _drop_duplicate_files(lake: Path, merged: dict[str, dict[str, Any]],
                          done: dict[str, dict[str, Any]]) -> list[str]:
    """One content, one set of rows, as in one database: a file read now whose bytes
    another file still present holds (in the lake, or read earlier in this ingest, in
    path order) is a duplicate, and its rows are not committed; returns those files."""
    import duckdb

    staged = merged.get("sources", {})
    con = duckdb.connect(":memory:")
    try:
        def identity(entry: dict[str, Any], base: Path) -> tuple[Any, ...] | None:
            files = [str(base / f) for f in entry["files"]]
            rows = con.execute("SELECT sha256, bytes_ingested FROM read_parquet(?)",
                               [files]).fetchall() if files else []
            return tuple(rows[0]) if rows and rows[0][0] is not None else None

        seen: dict[tuple[Any, ...], str] = {}
        for unit, entry in done.get("sources", {}).items():
            if unit not in staged and Path(unit).exists():
                key = identity(entry, lake)
                if key is not None:
                    seen.setdefault(key, unit)
        dropped = []
        for unit in sorted(u for u, e in staged.items() if "staged" in e):
            key = identity(staged[unit], Path(staged[unit]["staged"]))
            if key is None:
                continue
            if key in seen and seen[key] != unit:
                dropped.append(f"{unit} (same content as {seen[key]})")
                for entries in merged.values():
                    entries.pop(unit, None)
            else:
                seen[key] = unit
        return dropped
    finally:
        con.close()


def _dedupe_run_names(lake: Path, merged: dict[str, dict[str, Any]],
                      done: dict[str, dict[str, Any]]) -> None:
    """Run names stay unique across tasks, as in one database: a name another file's run
    already has in the lake, or that an earlier folder of this ingest took, becomes
    ``name~2``, ``name~3`` ... (the rule of :class:`~logpipe.ingest.logfile.RunBook`).
    The staged ``runs`` files are rewritten with the new names."""
    import duckdb

    staged = merged.get("runs", {})
    con = duckdb.connect(":memory:")
    try:
        taken: set[str] = set()
        for unit, entry in done.get("runs", {}).items():
            if unit in staged:
                continue  # replaced now: its names are given again below
            taken |= _names_of(con, [str(lake / f) for f in entry["files"]])
        for entry in staged.values():
            if "staged" not in entry:
                taken |= _names_of(con, [str(lake / f) for f in entry["files"]])
        for unit in sorted(u for u, e in staged.items() if "staged" in e):
            entry = staged[unit]
            renames: dict[str, str] = {}
            for rel in entry["files"]:
                path = Path(entry["staged"]) / rel
                for (name,) in con.execute("SELECT name FROM read_parquet(?) ORDER BY run_seq",
                                           [str(path)]).fetchall():
                    new = free_name(Path(unit), name, taken)
                    if new != name:
                        renames[name] = new
                if renames:
                    tmp = path.with_name(path.name + ".renamed")
                    cases = " ".join(f"WHEN {lakes.literal(a)} THEN {lakes.literal(b)}"
                                     for a, b in renames.items())
                    con.execute(
                        f"COPY (SELECT * REPLACE (CASE name {cases} ELSE name END AS name) "
                        f"FROM read_parquet({lakes.literal(str(path))})) "
                        f"TO {lakes.literal(str(tmp))} (FORMAT parquet, COMPRESSION zstd)")
                    tmp.replace(path)
            if renames:
                entry["fingerprint"] = lakes.token(
                    entry["fingerprint"] + "|" + "|".join(sorted(renames.values())))
    finally:
        con.close()


def _names_of(con: Any, files: list[str]) -> set[str]:
    if not files:
        return set()
    return {n for (n,) in con.execute("SELECT name FROM read_parquet(?)", [files]).fetchall()}


def _run(jobs: list[tuple[Any, ...]], runner: str, address: str | None, workers: int,
         on_group: Callable[[int, int], None] | None) -> list[Any]:
    """Each job's result, or the exception it raised, in order."""
    out: list[Any] = []
    if not jobs:
        return out  # nothing new: no Ray to start
    if runner == "local":
        for n, job in enumerate(jobs):
            try:
                out.append(ingest_group(*job))
            except Exception as exc:  # noqa: BLE001 - one folder's failure is reported
                out.append(exc)
            if on_group:
                on_group(n + 1, len(jobs))
        return out
    try:
        import ray
    except ImportError as exc:
        raise InputError("the ray runner needs Ray", hint="pip install 'logpipe[ray]'"
                         ) from exc
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, num_cpus=None if address else workers,
                 include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(ingest_group)
        refs = [task.remote(*job) for job in jobs]
        for n, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayError as exc:
                out.append(exc)
            if on_group:
                on_group(n + 1, len(jobs))
    finally:
        if started_here:
            ray.shutdown()
    return out
