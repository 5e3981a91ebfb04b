"""walk → detect → parse → store, one transaction per file (consecutive small files:
one per group of them, a file that fails read again alone).

The parts: :mod:`~logpipe.ingest.walk` (which files), :mod:`~logpipe.ingest.changes`
(what is new in each), :mod:`~logpipe.ingest.logfile` (the file protocol of a server log),
:mod:`~logpipe.ingest.records` (files read whole), :mod:`~logpipe.ingest.environment`
(environments and clocks of runs), :mod:`~logpipe.ingest.linking` (records to runs),
:mod:`~logpipe.ingest.group` (small files written together) and
:mod:`~logpipe.ingest.ahead` (small new logs parsed ahead, by
:mod:`~logpipe.workers`).

:func:`ingest_paths` is the whole job behind ``logpipe ingest``.  For each file it decides
what is new by comparing the file with its ``sources`` row, as logrotate-aware tailers do
(a file is its (device, inode) plus the hash of what was read from it):

- unknown path, unknown content → parse everything (``new``);
- same path, the bytes ingested last time are unchanged → parse only what was appended
  (``appended``; ``unchanged`` when nothing was);
- same file, now shorter than what was ingested → it was truncated (``copytruncate``,
  ``> server.log``): the rows already ingested are kept and reading restarts at the new
  content, line numbers and the open launch continuing (``truncated``);
- same path, another file (a new inode: rotation by rename, then a new file created) →
  the old rows are set aside under the old file's identity, so that the rotated copy takes
  them when it is found, and the new file is read (``new``);
- same file, same size or longer, but the bytes ingested changed → edited in place:
  nothing is deleted unless ``replace`` (``--replace``) says so (``changed``; with
  ``replace``: ``rewritten``);
- unknown path whose content starts with the bytes of a file that is gone or now holds
  something else → the file was moved or rotated: its rows follow it (``moved``);
- unknown path whose content duplicates a file still present, or an earlier generation of
  a truncated file → ``duplicate``, skipped;
- unknown path whose content starts with all the bytes of a file still present and goes
  on past them (a log kept longer than a copy of it taken mid-run) → read whole
  (``new``); the shorter is then tested as a copy of it (:mod:`logpipe.ingest.copies`).

A line still being written (no final newline) is left for the next ingest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import duckdb

from logpipe import clock, interrupts, summaries
from logpipe.engines import engine_for_kind
from logpipe.env import Tiers, discover
from logpipe.errors import LogpipeError
from logpipe.ingest.ahead import Ahead, ParseAhead, detect_file
from logpipe.ingest.base import PARSER_VERSION, EnvOptions, FileResult, IngestResult, Progress
from logpipe.ingest.changes import same_stat
from logpipe.ingest.copies import take_back_copies
from logpipe.ingest.environment import attach_env, attach_envs, environment_key
from logpipe.ingest.group import Shared, groups
from logpipe.ingest.linking import link_records, mark_duplicate_benchmarks
from logpipe.ingest.walk import run_base_name, walk
from logpipe.readers import take_damage
from logpipe.sources import load
from logpipe.store import Store, run_tables
from logpipe.timings import COPIES, JUDGED, READ, collecting, phase
from logpipe.traces import apply_trace_env


class IngestInterrupted(LogpipeError):
    """The ingest was stopped by Ctrl-C, SIGINT or SIGTERM; ``result`` holds the files
    committed before it (each file is one transaction: the one being read was rolled
    back)."""

    exit_code = 130

    def __init__(self, result: IngestResult) -> None:
        super().__init__(f"interrupted: {len(result.files)} file(s) committed, "
                         f"{len(result.pending)} not", hint="run the same ingest again: "
                         "committed files are found unchanged and the rest is read")
        self.result = result


__all__ = ["PARSER_VERSION", "EnvOptions", "FileResult", "IngestInterrupted", "IngestResult",
           "attach_env",
           "ingest_files", "ingest_paths", "link_records", "mark_duplicate_benchmarks",
           "run_base_name", "walk"]


def ingest_paths(
    paths: Iterable[str | Path],
    db: Store | str | Path,
    *,
    env: dict[str, str] | None = None,
    tags: dict[str, str] | None = None,
    tiers_file: Path | None = None,
    bench_run: str | None = None,
    keep_request_text: bool = False,
    replace: bool = False,
    tz: str | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> IngestResult:
    """Ingest every recognised file under ``paths`` into the database ``db``.

    ``env`` and ``tags`` (``--env``/``--tag``) are attached to every run ingested now and
    win over manifests; ``tiers_file`` overrides the default tiers; ``replace`` lets a file
    edited in place replace its rows (otherwise they are kept and the file is reported);
    ``tz`` is the zone of the SGLang stamps (``UTC``, ``+02:00``, an IANA name).
    """
    started = time.perf_counter()
    if tz is not None:
        clock.offset_of(tz)  # an unknown zone fails before anything is read
    db_path = Path(db.path if isinstance(db, Store) else db)
    options = EnvOptions(dict(env or {}), dict(tags or {}), Tiers.load(tiers_file), bench_run,
                         keep_request_text, replace, tz)
    files = walk([Path(p) for p in paths], exclude=[db_path])
    if on_total is not None:
        on_total(sum(f.stat().st_size for f, _ in files))
    return ingest_files(files, db if isinstance(db, Store) else db_path, options, progress,
                        started)


def ingest_files(files: list[tuple[Path, Path]], db: Store | Path, options: EnvOptions,
                 progress: Progress | None = None, started: float | None = None
                 ) -> IngestResult:
    """Ingest ``(file, root)`` pairs as :func:`walk` lists them (the root bounds where
    folder manifests are looked for), then link records to runs across them.  ``db``: the
    store a command opened for writing (left open), or the file to open for this ingest."""
    started = time.perf_counter() if started is None else started
    result = IngestResult(db=db.path if isinstance(db, Store) else str(db))
    with collecting() as result.timings:
        _ingest_files(files, db, options, progress, started, result)
    result.seconds = time.perf_counter() - started
    return result


def _ingest_files(files: list[tuple[Path, Path]], db: Store | Path, options: EnvOptions,
                  progress: Progress | None, started: float, result: IngestResult) -> None:
    """:func:`ingest_files` into ``result``."""
    with nullcontext(db) if isinstance(db, Store) else Store.open(db) as store:
        def record(res: FileResult) -> None:  # once per file (from its commit or after)
            if not result.files or result.files[-1] is not res:
                result.files.append(res)

        keys = [p.resolve() for p, _ in files]
        # the files an ingest stopped before its end left with rows not yet in the kept
        # ranges (read whole at the end, also where this ingest appends to them)
        unsettled = summaries.unsettled(store)
        store.keep_sources()  # (the rows every file is compared with, read once)
        ahead = ParseAhead(keys, *store.known_files(), options.keep_request_text)
        found: dict[int, Ahead | None] = {}

        def look(i: int) -> Ahead | None:  # taken as its turn comes (and kept for a redo)
            if i not in found:
                found[i] = ahead.take(i)
            return found[i]

        try:
            for group in groups(files):
                try:
                    if interrupts.requested():
                        raise KeyboardInterrupt
                    found.clear()  # (what was found of the last group's files)
                    members = [(*files[i], partial(look, i)) for i in group]
                    while members:
                        with phase(READ):
                            done = (_ingest_group(store, members, options, progress, record)
                                    if len(members) > 1 else None)
                        if done is None:  # one file, or a group that failed: one by one
                            for path, root, a in members:
                                if interrupts.requested():
                                    raise KeyboardInterrupt
                                with phase(READ):
                                    record(_ingest_file(store, path, root, options, progress,
                                                        record, a()))
                            done = len(members)
                        members = members[done:]
                        store.yield_to_readers()  # a reader waiting sees the files so far
                except KeyboardInterrupt:
                    # the file or group being read was rolled back (one transaction each);
                    # the ones before it are committed, and so is one whose commit the
                    # stop met (the commit records it with signals held)
                    result.interrupted = True
                    result.pending = [str(p) for p, _ in files[len(result.files):]]
                    result.seconds = time.perf_counter() - started
                    raise IngestInterrupted(result) from None
        finally:
            ahead.close()
            store.keep_sources(False)
        try:
            with store.transaction(commit_memory=WRITE_MEMORY), phase(COPIES):
                read = [f.path for f in result.files if f.runs_created]
                result.copies = take_back_copies(store, read + [
                    f.begins_with for f in result.files
                    if f.runs_created and f.begins_with and f.begins_with not in read])
                copies = {c.path for c in result.copies}
                for f in result.files:
                    if f.path in copies:
                        f.runs_created = 0
                        for table in run_tables():
                            f.rows.pop(table, None)
                result.unlinked = link_records(store)
                apply_trace_env(store, options.tiers or Tiers.load())
                store.derive_profiled()
                # the batch ranges and statistics `check` reads, kept per run: the lines of
                # every log read now, and of any file an ingest stopped before this left
                # unsettled, so that no read command classifies them again
                with phase(JUDGED):
                    summaries.settle(store, [(f.path, f.read_after) for f in result.files
                                             if f.read_after is not None], unsettled)
        except KeyboardInterrupt:
            result.interrupted = True
            result.seconds = time.perf_counter() - started
            raise IngestInterrupted(result) from None
        touched = [f.path for f in result.files if f.rows.get("bench_results")]
        if touched:
            result.duplicates = [(f"{src}:{line}", dup) for src, line, dup in store.all(
                "SELECT source_path, line_no, duplicate_of FROM bench_results_all WHERE "
                "duplicate_of IS NOT NULL AND source_path IN (SELECT unnest(?)) ORDER BY 1, 2",
                [touched])]


def _ingest_group(store: Store,
                  members: Sequence[tuple[Path, Path, Callable[[], Ahead | None]]],
                  options: EnvOptions, progress: Progress | None,
                  record: Callable[[FileResult], None]) -> int | None:
    """Small files in one transaction, their rows inserted together at its end.  Returns
    how many were written: all, or those before a reader came to wait for the database
    (the group ends there, so that the reader is let in).  None when one of them failed:
    the whole group was rolled back (nothing of it written), and the caller reads each
    file alone, so that the one that fails fails alone."""
    results: list[FileResult] = []
    shared = Shared(store)

    def committed() -> None:
        for r in results:
            record(r)

    try:
        with store.transaction(on_commit=committed):
            done: list[FileResult] = []
            for path, root, look in members:
                if interrupts.requested():
                    raise KeyboardInterrupt
                if done and store.reader_waiting():
                    break
                done.append(_ingest_file(store, path, root, options, progress, record,
                                         look(), shared))
            shared.load()
            attach_envs(store, [(key, manifests) for key, manifests, _ in shared.envs],
                        options)
            store.set_env_keys([(key, env_key) for key, _, env_key in shared.envs])
            results.extend(done)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - read again one by one, where it fails alone
        if _is_interrupt(exc):
            raise KeyboardInterrupt from None
        return None
    finally:
        shared.close()
    return len(results)


WRITE_MEMORY = "256MB"
"""DuckDB's memory while a file is read and written in its own transaction, and while
the ingest's last transaction commits (at most: a lower ``LOGPIPE_DUCKDB_MEMORY`` stays):
its rows and commit spill to disk past it instead of adding to the parse's memory.  Every
write of a big file can spill (a run's wide columns are written by insertion,
:data:`logpipe.store.runs.WIDE_RUN_COLUMNS`), so the bound holds DuckDB's part of the
peak whatever the launches: docker launches in one file, 512 MB / 1 GB / 2 GB, peaked at
759-768 / 937-950 / 960 MB (1,219-1,264 / 3,365 MB / - before, at 512 MB with updates
that could not spill, benchmarks/RESULTS-mixes.md).  A file whose statements cannot spill
is read again without the bound."""


def _ingest_file(store: Store, path: Path, root: Path, options: EnvOptions,
                 progress: Progress | None, record: Callable[[FileResult], None],
                 ahead: Ahead | None = None, shared: Shared | None = None) -> FileResult:
    """The result of one file; ``record`` is called with it as its transaction commits
    (``shared``: the group's transaction, whose commit records it).  ``ahead``: what was
    found of it ahead of time (:mod:`logpipe.ingest.ahead`)."""
    key = str(path.resolve())
    take_damage(path)  # what an earlier reading of this path met is not this one's
    if shared is not None:  # (a group's small files: their transaction is the group's)
        res = _ingest_one(store, path, key, root, options, progress, record, ahead, shared)
    else:
        try:
            with store.memory_bound(WRITE_MEMORY):
                res = _ingest_one(store, path, key, root, options, progress, record, ahead,
                                  shared, bounded=True)
        except duckdb.OutOfMemoryException:  # an operator that cannot spill: rolled back
            take_damage(path)
            res = _ingest_one(store, path, key, root, options, progress, record, ahead,
                              shared)
    damage = take_damage(path)
    if damage is not None:
        res.damaged = damage
    return res


def _ingest_one(store: Store, path: Path, key: str, root: Path, options: EnvOptions,
                progress: Progress | None, record: Callable[[FileResult], None],
                ahead: Ahead | None, shared: Shared | None, bounded: bool = False
                ) -> FileResult:
    """One file in its own transaction, or (``shared``) in its group's: then a failure
    is raised, for the group to be rolled back and its files read again one by one.
    ``bounded``: DuckDB's memory is bounded (:data:`WRITE_MEMORY`), and running out of it
    is raised, for the file to be read again without the bound."""
    try:
        head, source = detect_file(path)
    except OSError as exc:
        return FileResult(key, "failed", detail=f"cannot read: {exc}")
    if source is None:
        if progress:
            progress(path.stat().st_size)
        return FileResult(key, "skipped", detail="not a recognised format")
    engine = engine_for_kind(source.name)
    res: FileResult | None = None

    def committed() -> None:
        if res is not None:
            record(res)

    try:
        with store.transaction(on_commit=committed) if shared is None else nullcontext():
            if engine is not None:
                # (a file looked at ahead is one the store had no row for)
                known = store.source(key) if ahead is None else None
                if same_stat(known, path.stat()):  # not re-read: the parser is not imported
                    res = FileResult(key, "unchanged", kind=source.name)
                else:
                    from logpipe.ingest.logfile import read_log

                    res = read_log(store, path, key, source.name, head, engine, progress,
                                   options.keep_request_text, options.replace,
                                   ahead.parsed if ahead is not None  # type: ignore[arg-type]
                                   and ahead.kind == source.name else None,
                                   shared, unknown=ahead is not None)
                    known = store.source(key) if res.status == "unchanged" else None
                if res.status not in ("duplicate", "changed"):
                    manifests = discover(path, root)
                    env_key = environment_key(manifests, options)
                    if known is None or known.get("env_key") != env_key:
                        if shared is None:
                            attach_envs(store, [(key, manifests)], options)
                            store.set_env_keys([(key, env_key)])
                        else:  # it reads the file's rows: once they are in their tables
                            shared.envs.append((key, manifests, env_key))
            elif source.reader is not None:
                store.flush_sources()  # (a reader's queries may join any file's row)
                res = load(source.reader)(store, path, key, options)
                if progress:
                    progress(path.stat().st_size)
            elif source.parse is not None:
                from logpipe.ingest.records import ingest_records

                store.flush_sources()
                res = ingest_records(store, path, key, source, options)
                if progress:
                    progress(path.stat().st_size)
            else:
                res = FileResult(key, "skipped", kind=source.name,
                                 detail=f"no reader for kind {source.name}")
    except LogpipeError as exc:
        if shared is not None:
            raise
        return FileResult(key, "failed", kind=source.name, detail=str(exc) + _notes(exc))
    except Exception as exc:  # noqa: BLE001 - any failure of one file must not stop the rest
        if _is_interrupt(exc):  # Ctrl-C inside a query: the file was rolled back
            raise KeyboardInterrupt from None
        if shared is not None or (bounded and isinstance(exc, duckdb.OutOfMemoryException)):
            raise
        return FileResult(key, "failed", kind=source.name,
                          detail=f"{type(exc).__name__}: {exc}{_notes(exc)}")
    return res


def _notes(exc: BaseException) -> str:
    """Where in the file ``exc`` was raised, as far as the reader noted it (the lines of
    its block: ``logfile.located``)."""
    notes = getattr(exc, "__notes__", None) or []
    return "".join(f" ({note})" for note in notes)


def _is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C (or SIGINT/SIGTERM) that landed inside a DuckDB query comes back as DuckDB's
    interrupt, as the RuntimeError "Query interrupted" the Python client raises, or later
    as the aborted transaction it left: the file was rolled back, not failed."""
    return interrupts.requested() or isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and "query interrupted" in str(exc).lower())
