"""Linking: which server run each benchmark record, phase dump and trace measured."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from logpipe import clock
from logpipe.engines import engines
from logpipe.ingest.base import IN_LOG
from logpipe.store import Store
from logpipe.store.schema import LINKED_TABLES
from logpipe.traces import link_by_profile_id

# when a record file was written, as an instant, for the time-window link (else the
# file's modification time)
LINK_TIME = {"traces": "t.started_at", "metric_snapshots": "t.taken_at"}


# bench_serving prints floats with two decimals: a console value equals its JSONL value
# to that precision
CONSOLE_PRECISION = 0.0051
_DUPLICATES_SQL = f"""
UPDATE logpipe_internal.bench_results SET duplicate_of = d.record
FROM (
    SELECT c.source_id, c.line_no,
           min(js.path || ':' || j.line_no) AS record
    FROM logpipe_internal.bench_results c JOIN logpipe_internal.bench_results j
      ON c.run_id = j.run_id AND c.format = 'console' AND j.format = 'jsonl'
     AND c.completed = j.completed
     AND abs(c.duration_s - j.duration_s) <= {CONSOLE_PRECISION}
     AND abs(c.output_throughput - j.output_throughput) <= {CONSOLE_PRECISION}
     AND (c.total_output_tokens IS NULL OR c.total_output_tokens = j.total_output_tokens)
    JOIN sources js ON js.source_id = j.source_id
    GROUP BY ALL
) d
WHERE bench_results.source_id = d.source_id AND bench_results.line_no = d.line_no
  AND bench_results.duplicate_of IS DISTINCT FROM d.record
"""


def mark_duplicate_benchmarks(store: Store) -> None:
    """One benchmark, one result: a console summary whose run also has the JSONL record of
    the same measurement (same counts and duration, values equal to the console's printed
    precision) names that record in ``duplicate_of``; the JSONL row is the one kept."""
    store.con.execute("UPDATE logpipe_internal.bench_results SET duplicate_of = NULL "
                      "WHERE duplicate_of IS NOT NULL AND run_id IS NULL")
    store.con.execute(_DUPLICATES_SQL)


SPAN_PER_RECORD_S = 3600
"""A run's span is implausible beyond an hour per record line it holds (and an hour)."""

_RUN_SPANS_SQL = """
SELECT run_id, source_path, started_at, ended_at, utc_offset_s,
       coalesce(clock_source, '') NOT LIKE '%date inferred%' AS dated,
       epoch(ended_at) - epoch(started_at) AS span_s
FROM runs
"""

_RECORDS_SQL = """
WITH ids AS (SELECT unnest(?::VARCHAR[]) AS run_id)
SELECT run_id, sum(k) FROM (
    SELECT run_id, count(*) AS k FROM batches WHERE run_id IN (FROM ids) GROUP BY run_id
    UNION ALL SELECT run_id, count(*) FROM events WHERE run_id IN (FROM ids) GROUP BY run_id
    UNION ALL SELECT run_id, count(*) FROM http_requests WHERE run_id IN (FROM ids)
    GROUP BY run_id)
GROUP BY run_id
"""


def _run_spans(store: Store, folders: set[str]
               ) -> dict[str, list[tuple[str, Any, Any, frozenset[str]]]]:
    """The runs whose logs lie in ``folders``, by folder: (run id, start and end as UTC
    instants or None where the span is not to be trusted, name stem).  A span whose date
    was guessed from the file's modification time, or longer than the records it holds
    justify (a notes file quoting two lines months apart), takes no record by time window:
    a wrong link is worse than none.  Records are counted only for the runs longer than
    :data:`SPAN_PER_RECORD_S` (counting every run's read every row of a large database on
    every ingest)."""
    runs = [r for r in store.all(_RUN_SPANS_SQL) if str(Path(r[1]).parent) in folders]
    long = [r[0] for r in runs if r[6] is not None and r[6] > SPAN_PER_RECORD_S]
    records = {str(k): int(n) for k, n in store.all(_RECORDS_SQL, [long])} if long else {}
    by_folder: dict[str, list[tuple[str, Any, Any, frozenset[str]]]] = {}
    for run_id, src, start, end, offset, dated, span in runs:  # spans as instants (one clock)
        trusted = bool(dated) and span is not None and not (
            span > SPAN_PER_RECORD_S and span > SPAN_PER_RECORD_S * records.get(run_id, 0))
        by_folder.setdefault(str(Path(src).parent), []).append(
            (run_id, clock.to_utc(start, offset) if trusted else None,
             clock.to_utc(end, offset) if trusted else None, name_stem(src)))
    return by_folder


ROLE_WORDS = frozenset({
    "bench", "benchmark", "benchmarks", "bench_serving", "serving", "server", "serve",
    "launch", "log", "logs", "output", "out", "result", "results", "console",
    "stdout", "stderr", "run"})
"""Words of a file name that say what the file is, not which experiment it belongs to
(with every engine's name words)."""


def name_stem(path: str) -> frozenset[str]:
    """The words of a file's name (up to its first dot) that name its experiment:
    ``bench-plain.jsonl`` and ``server-plain.log`` share ``{plain}``."""
    from logpipe.engines import name_words

    words = re.split(r"[-_\s]+", Path(path).name.split(".", 1)[0].lower())
    role = ROLE_WORDS | name_words()
    return frozenset(w for w in words if w and w not in role)


LAUNCH_SUBFOLDERS = frozenset({"metrics", "profile"})
"""Folders ``launch`` writes inside a run's folder (counter snapshots, profiler traces):
their files belong to the run whose log is one folder up."""


def _run_folder(src: str) -> str:
    """The folder whose run a record file belongs to: its own, or the run folder above a
    launch's ``metrics/`` or ``profile/``."""
    folder = Path(src).parent
    return str(folder.parent if folder.name in LAUNCH_SUBFOLDERS else folder)


def link_records(store: Store) -> list[str]:
    """Link benchmark records and phase dumps to the server run they measured; returns the
    unlinked benchmark records (``path:line``).

    Explicit links (``--run``) are kept.  A trace whose profile id one run's "Profiling
    starts" line names goes to that run (``profile id``).  Otherwise, per file: the only
    run whose log lies in the same folder (``same folder``), else the run in that folder
    whose time span contains the file's time (``time window``: a trace's first event,
    other files' modification time), never a run whose date was inferred from its file's
    modification time or whose span is implausible for the records it holds; when no
    run's span holds it (a copied folder's times), the one run whose log shares the
    file's name stem (``name stem``: ``bench-plain.jsonl`` → ``server-plain.log``).  A run whose
    phase dump was taken with device synchronisation is profiled
    (:meth:`Store.derive_profiled`, run after linking).
    """
    by_profile_id = link_by_profile_id(store)
    to_link = {table: store.all(
        f"SELECT DISTINCT t.source_path, {LINK_TIME.get(table, 'NULL')}, s.mtime "
        f"FROM {table} t JOIN sources s ON s.path = t.source_path "
        f"WHERE coalesce(t.link_method, '') NOT IN ('explicit', '{IN_LOG}')")
        for table in LINKED_TABLES}
    folders = {_run_folder(str(src)) for files in to_link.values() for src, *_ in files}
    by_folder = _run_spans(store, folders) if folders else {}
    for table, files in to_link.items():
        for src, utc_time, local_mtime in files:
            # a trace's first event is UTC; a file's modification time is this host's
            mtime = utc_time if utc_time is not None else clock.file_time_utc(local_mtime)
            if src in by_profile_id:
                continue
            candidates = by_folder.get(_run_folder(src), [])
            run_id, method = None, None
            if len(candidates) == 1:
                run_id, method = candidates[0][0], "same folder"
            else:
                inside = [c for c in candidates if c[1] is not None and c[2] is not None
                          and c[1] <= mtime <= c[2]]
                if len(inside) == 1:
                    run_id, method = inside[0][0], "time window"
                elif not inside:  # no usable time (a copied folder): the shared name
                    stem = name_stem(src)
                    named = [c for c in candidates if stem and c[3] == stem]
                    if len(named) == 1:
                        run_id, method = named[0][0], "name stem"
            store.link(table, src, run_id, method)
    mark_duplicate_benchmarks(store)
    unlinked = [f"{src}:{line}" for src, line in store.all(
        "SELECT source_path, line_no FROM bench_results WHERE run_id IS NULL "
        "AND duplicate_of IS NULL ORDER BY 1, 2")]
    # a benchmark may name the release of the server it ran against (SGLang's
    # bench_serving writes `sglang_version`, from server_info, 0.5.5+): a run of that
    # engine with no version of its own takes it
    columns = {c for c, _ in store.columns("bench_results")}
    for engine in engines():
        column = f"{engine.name}_version"
        if column not in columns:
            continue
        for run_id, version in store.all(
                f"SELECT b.run_id, min(b.{column}) FROM bench_results b JOIN runs r "
                f"USING (run_id) WHERE b.{column} IS NOT NULL AND r.engine_version IS NULL "
                "AND r.engine = ? GROUP BY b.run_id", [engine.name]):
            store.update_run(run_id, engine_version=version)
    return unlinked
