"""Per-run steady-state statistics, kept up to date instead of recomputed for every check.

``run_summary`` (a view) classifies every batch line of every run each time it is read:
about 100 s and many GB on a database of 1,000 runs and 50 M lines.  The statistics of
a run only change when its lines or its bounding events do, so they are stored in
``run_summary_cache`` with the ``data_key`` they were computed from (``run_data_keys``),
and :func:`refresh` recomputes just the runs whose key changed (``run_summary_stats``: a
few runs one at a time, many in one pass).  Ingest refreshes at its end, so that a read
command finds them current; ``check`` never writes, and computes for itself only the runs
changed since (by hand, or by an older logpipe).  It reads :data:`SUMMARY_SQL`, which is
``run_summary`` row for row (a test compares them).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING

import duckdb

from logpipe.rules import rules_key
from logpipe.store import Store

if TYPE_CHECKING:
    import polars as pl

STATS = ("decode_lines", "steady_decode_lines", "steady_gen_throughput", "steady_accept_len",
         "graph_coverage", "strata", "min_ts_step_s", "steady_stratum")

_RUN_COLUMNS = """r.run_id, r.name, r.model, r.tp_size, r.dp_size, r.ep_size, r.pp_size,
       r.spec_algorithm, r.role, r.env_fingerprint, r.env_complete, r.profiled,
       r.format_era, r.started_at"""

SUMMARY_SQL = f"""
SELECT {_RUN_COLUMNS}, {", ".join("c." + s for s in STATS)}
FROM runs r JOIN logpipe_internal.run_summary_cache c USING (run_id)
"""
"""``run_summary`` from the cache (complete after :func:`refresh`)."""

def _computed_sql(args: str, where: str) -> str:
    return f"""
SELECT {_RUN_COLUMNS}, coalesce(s.decode_lines, 0) AS decode_lines,
       coalesce(s.steady_decode_lines, 0) AS steady_decode_lines,
       {", ".join("s." + s for s in STATS[2:])}
FROM runs r LEFT JOIN run_summary_stats_of({args}) s USING (run_id) WHERE {where}
"""


ONE_RUN_SQL = _computed_sql("?, NULL", "r.run_id = ?")
"""``run_summary``'s row of one run, computed now (parameters: the run id, twice)."""

_MANY_RUNS_SQL = _computed_sql("NULL, NULL", "r.run_id IN (SELECT unnest(?))")
"""The rows of several runs in one pass (parameter: the run ids).  The macro's cost is
mostly fixed: every run of a fresh ingest in one pass takes about what two take one by one,
while a few runs of a large database are cheaper alone."""

_ONE_BY_ONE = 4


def stale(store: Store, kept: bool = False) -> list[tuple[str, str]]:
    """(run_id, current key) of every run whose cached statistics are missing or out of
    date: the key is the run's data key and the rules version (:mod:`logpipe.rules`), so
    statistics computed by other steady-state rules are never served.  ``kept``: the data
    keys from the kept ranges (exact once :func:`settle` has folded them), not from every
    batch line.  A read-only store computes it once (from every batch line: ~1 s for 27 M
    of them, which a report asked for three times)."""
    once = store.read_only and not kept
    if once and "stale" in store.read_once:
        return list(store.read_once["stale"])
    found = [(str(r), str(k)) for r, k in store.all(
        "SELECT k.run_id, k.data_key || '|' || ? AS key FROM run_data_keys_of(?) k "
        "LEFT JOIN logpipe_internal.run_summary_cache c USING (run_id) "
        "WHERE c.data_key IS DISTINCT FROM k.data_key || '|' || ?",
        [rules_key(), kept, rules_key()])]
    if once:
        store.read_once["stale"] = list(found)
    return found


def current(store: Store, run_ids: list[str]) -> bool:
    """Whether the statistics and counts ingest kept of every run in ``run_ids`` are those
    of its lines now (under these rules)."""
    return kept_of(store, run_ids) == set(run_ids)


KEYS_ONE_BY_ONE = 16
"""Runs up to which :func:`kept_of` reads each run's data key by a statement of its own:
a run's key is read from its own lines (the run's equality is pushed into the scans:
0.03 s for a run of 110,000 lines), while a list of runs reads every batch line of the
database (1.2 s of a `compare` of two runs on a database of 27 M lines)."""


def kept_of(store: Store, run_ids: list[str]) -> set[str]:
    """The runs of ``run_ids`` whose kept statistics and counts are current.  A read-only
    store answers each run once (its lines cannot change under it: a `check` of the
    samples asked of 264 runs in 32 calls, 56 runs in all, reading each one's lines each
    time)."""
    if not run_ids:
        return set()
    memo: dict[str, bool] | None = (store.read_once.setdefault("kept", {})
                                    if store.read_only else None)
    todo = [r for r in dict.fromkeys(run_ids) if memo is None or r not in memo]
    if not todo:
        assert memo is not None
        return {r for r in run_ids if memo[r]}
    if len(todo) <= KEYS_ONE_BY_ONE:
        keys = [(r, k) for r in todo for (k,) in store.all(
            "SELECT data_key FROM run_data_keys WHERE run_id = ?", [r])]
    else:
        keys = store.all("SELECT run_id, data_key FROM run_data_keys "
                         "WHERE run_id IN (SELECT unnest(?))", [todo])
    kept = {str(r) for (r,) in store.all(
        "SELECT c.run_id FROM logpipe_internal.run_summary_cache c "
        "JOIN (SELECT unnest(?::VARCHAR[]) AS run_id, unnest(?::VARCHAR[]) AS key) k "
        "USING (run_id) WHERE c.data_key = k.key || '|' || ?",
        [[str(r) for r, _ in keys], [str(k) for _, k in keys], rules_key()])}
    if memo is None:
        return kept
    memo.update((r, r in kept) for r in todo)
    return {r for r in run_ids if memo[r]}


def launch_values(store: Store, run_ids: list[str]) -> dict[str, list[tuple[int, float]]]:
    """``launch_values``' (stratum, steady_tps) of each run of ``run_ids`` in stratum order:
    from the counts ingest kept where they are current (one query for all), else
    classified now, run by run."""
    kept = kept_of(store, run_ids)
    rows = store.all("SELECT run_id, stratum, steady_tps FROM launch_values_of_counts(NULL, ?)",
                     [sorted(kept)]) if kept else []
    for run_id in sorted(set(run_ids) - kept):
        rows += [(run_id, s, v) for s, v in store.all(
            "SELECT stratum, steady_tps FROM launch_values_of(?)", [run_id])]
    out: dict[str, list[tuple[int, float]]] = {}
    for run_id, stratum, tps in sorted(rows, key=lambda r: (str(r[0]), int(r[1]))):
        out.setdefault(str(run_id), []).append((int(stratum), float(tps)))
    return out


def rows_of(run_ids: list[str]) -> list[tuple[str, list[object]]]:
    """``(sql, params)`` statements that select ``run_summary``'s rows of ``run_ids``,
    computed now: one pass for many runs, one statement per run for a few."""
    if len(run_ids) > _ONE_BY_ONE:
        return [(_MANY_RUNS_SQL, [list(run_ids)])]
    return [(ONE_RUN_SQL, [r, r]) for r in run_ids]


JUDGED_COLUMNS = ("series", "stratum", "value", "label", "n")

CLASSIFY_MEMORY = "512MB"
"""DuckDB's memory while ingest classifies the lines of the runs it changed (at most: a
lower ``LOGPIPE_DUCKDB_MEMORY`` stays)."""


PASS_LINES = 300_000
"""Batch lines up to which runs are classified together, in one pass (one read of their
lines, counted at once: a folder's thousands of small runs are a few passes).  A pass is
counted while the next is read, so passes of a few hundred thousand lines keep both at
work: the 256 MB steady mix (12 runs of ~135,000 lines, no rank): judged counts
0.79-0.84 s in passes of up to 300,000 lines, 1.09 s of 1 M, 1.07 s by DuckDB's window in
passes of 1 M."""

ALONE_LINES = 300_000
"""Batch lines from which a run is a pass of its own."""


def passes_of(run_ids: list[str], lines: dict[str, int] | None = None) -> list[list[str]]:
    """``run_ids`` in the passes their lines are classified in: runs of
    :data:`ALONE_LINES` or more one each, the others in passes of up to :data:`PASS_LINES`
    (``lines``: each run's batch lines, as far as known), in the order given."""
    lines = lines or {}
    alone: list[list[str]] = []
    passes: list[list[str]] = []
    held = 0
    for run_id in run_ids:
        n = lines.get(run_id, 0)
        if n >= ALONE_LINES:
            alone.append([run_id])
            continue
        if not passes or held + n > PASS_LINES:
            passes.append([])
            held = 0
        passes[-1].append(run_id)
        held += n
    return passes + alone


def counts_of(run_ids: list[str], lines: dict[str, int] | None = None
              ) -> list[tuple[str, list[object]]]:
    """``(sql, params)`` statements that select ``run_judged_counts``' rows of ``run_ids``,
    computed now, a statement a pass of :func:`passes_of`; a pass of one run reads it by
    its equality."""
    cols = ", ".join(JUDGED_COLUMNS)
    return [(f"SELECT run_id, {cols} FROM run_judged_counts(?)", [p[0]]) if len(p) == 1
            else (f"SELECT run_id, {cols} FROM run_judged_counts_in(NULL, ?)", [p])
            for p in passes_of(run_ids, lines)]


_KEY_OF = ("JOIN (SELECT unnest(?::VARCHAR[]) AS run_id, unnest(?::VARCHAR[]) AS key) k "
           "USING (run_id)")
"""Each row's run joined with its key (parameters: the run ids, the keys)."""


def _keep_counts(store: Store, keys: dict[str, str], lines: dict[str, int]) -> None:
    """Insert the judged counts of the runs ``keys`` (run id: its key) into
    ``run_judged_cache``: counted by :mod:`logpipe.classify`, a pass counted on a thread
    while the next pass's lines are read here (the store's transaction); a pass of more
    than :data:`classify.MAX_LINES` lines by the SQL macro, which spills.  (Two passes
    counted at once on two threads were no faster: 0.87-0.94 s of judged counts on the
    EAGLE-3 mix against 0.86-0.91 s one at a time, and held twice the memory.)"""
    from logpipe import classify  # (numpy and polars: not for an ingest that changed none)

    ids, values = list(keys), list(keys.values())
    judged = ", ".join("a." + c for c in JUDGED_COLUMNS)

    def insert(rows: str, params: list[object], _incoming: object = None) -> None:
        """The counts ``rows`` select (``_incoming``: an Arrow table, read by that name)."""
        store.con.execute(
            f"INSERT INTO logpipe_internal.run_judged_cache (run_id, data_key, "
            f"{', '.join(JUDGED_COLUMNS)}) SELECT a.run_id, k.key, {judged} "
            f"FROM {rows} a {_KEY_OF}", [*params, ids, values])

    counting: Future[pl.DataFrame] | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="logpipe-classify") as pool:
        for run_ids in passes_of(ids, lines):
            read = classify.read(store, run_ids)
            if counting is not None:  # (one pass counted while the next is read)
                insert("_incoming", [], counting.result().to_arrow())
                counting = None
            if read is None:  # (the SQL's rows of a pass too big to hold)
                ((sql, params),) = counts_of(run_ids)  # (one pass: no lines known)
                insert(f"({sql})", params)
                continue
            counting = pool.submit(classify.count_lines, *read)
            del read
        if counting is not None:
            insert("_incoming", [], counting.result().to_arrow())


def refresh(store: Store, kept: bool = False) -> int:
    """Recompute the kept counts and statistics of stale runs (the lines classified once:
    the statistics come from the counts) and drop those of runs gone; returns the number
    recomputed.  ``kept``: stale by the kept ranges (:func:`stale`).  Call inside a write
    transaction or with autocommit."""
    todo = stale(store, kept)
    for table in ("run_summary_cache", "run_judged_cache"):
        store.con.execute(f"DELETE FROM logpipe_internal.{table} WHERE run_id NOT IN "
                          "(SELECT run_id FROM runs)")
    if not todo:
        return 0
    keys = dict(todo)
    ids, values = list(keys), list(keys.values())
    for table in ("run_summary_cache", "run_judged_cache"):
        store.con.execute(f"DELETE FROM logpipe_internal.{table} WHERE run_id IN "
                          "(SELECT unnest(?))", [ids])
    # the runs' lines as the kept ranges count them (exact after settle: a guide to
    # the passes, not to the counts)
    lines = {str(r): int(n) for r, n in store.all(
        "SELECT run_id, batch_lines FROM logpipe_internal.run_batch_ranges_cache "
        "WHERE run_id IN (SELECT unnest(?))", [ids])}
    # classifying lines in SQL (window functions over a run's lines) spills to disk past
    # this instead of growing with the runs: a run of 1.6 M lines took 0.9 GB
    with store.memory_bound(CLASSIFY_MEMORY):
        _keep_counts(store, keys, lines)
    cols = ", ".join(STATS)
    store.con.execute(
        f"INSERT INTO logpipe_internal.run_summary_cache (run_id, data_key, {cols}) "
        f"SELECT a.run_id, k.key, {', '.join('a.' + c for c in STATS)} "
        f"FROM ({_computed_sql('NULL, ?', 'r.run_id IN (SELECT unnest(?))')}) a {_KEY_OF}",
        [ids, ids, ids, values])
    return len(todo)


# ------------------------------------------------------------------ batch ranges, by ingest

_RANGE_COLUMNS = ("batch_lines", "lines_hash", "min_token_usage", "max_token_usage",
                  "min_accept_len", "max_accept_len", "min_gen_throughput",
                  "min_input_throughput")
_COMBINE = {"batch_lines": "coalesce(k.{c}, 0) + n.{c}", "lines_hash": "coalesce(k.{c}, 0) + n.{c}",
            "max_token_usage": "greatest(k.{c}, n.{c})", "max_accept_len": "greatest(k.{c}, n.{c})"}


def fold_ranges(store: Store, files: list[tuple[str, int]]) -> None:
    """Fold the batch lines an ingest just wrote (of each ``(source_path, after_line)``,
    the lines past ``after_line``; 0: the whole file, replacing what was kept for its
    runs) into ``run_batch_ranges_cache`` in one pass, and drop the rows of runs gone.
    Call inside a write transaction."""
    con = store.con
    con.execute("DELETE FROM logpipe_internal.run_batch_ranges_cache WHERE run_id NOT IN "
                "(SELECT run_id FROM runs)")
    if not files:
        return
    whole = [p for p, after in files if after <= 0]
    if whole:
        con.execute("DELETE FROM logpipe_internal.run_batch_ranges_cache WHERE run_id IN "
                    "(SELECT run_id FROM runs WHERE source_path IN (SELECT unnest(?)))",
                    [whole])
    merged = ", ".join(
        _COMBINE.get(c, "least(k.{c}, n.{c})").format(c=c) + f" AS {c}" for c in _RANGE_COLUMNS)
    paths, afters = [p for p, _ in files], [a for _, a in files]
    # (in the database, not through Python: a folder of 10,000 small logs has as many
    # runs, and an insert of them row by row took seconds)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE _folded AS SELECT n.run_id, {merged} "
        "FROM run_batch_ranges_of(?, ?) n "
        "LEFT JOIN logpipe_internal.run_batch_ranges_cache k USING (run_id)",
        [paths, afters])
    try:
        con.execute("DELETE FROM logpipe_internal.run_batch_ranges_cache WHERE run_id IN "
                    "(SELECT run_id FROM _folded)")
        con.execute("INSERT INTO logpipe_internal.run_batch_ranges_cache "
                    f"(run_id, {', '.join(_RANGE_COLUMNS)}) "
                    f"SELECT run_id, {', '.join(_RANGE_COLUMNS)} FROM _folded")
    finally:
        con.execute("DROP TABLE IF EXISTS _folded")


_RANGES_DRIFT_SQL = """
SELECT c.run_id FROM (SELECT run_id, count(*) AS batch_lines FROM batches GROUP BY run_id) c
LEFT JOIN logpipe_internal.run_batch_ranges_cache k USING (run_id)
WHERE k.batch_lines IS DISTINCT FROM c.batch_lines
"""


def unsettled(store: Store) -> list[str]:
    """The sources whose ``sha256`` differs from the one the last ingest to finish
    settled (or that it did not know): rows were written to them since, by an ingest
    stopped between a file's commit and its end."""
    return [str(p) for (p,) in store.all(
        "SELECT s.path FROM sources s LEFT JOIN logpipe_internal.settled_sources t "
        "ON t.path = s.path WHERE t.path IS NULL OR t.sha256 IS DISTINCT FROM s.sha256 "
        "ORDER BY 1")]


def settle(store: Store, read: list[tuple[str, int]], left: list[str]) -> int:
    """The end of an ingest: the kept ranges brought up to those of every file written
    since the last ingest ended, then the statistics of the runs whose ranges changed,
    then every source's hash recorded as settled; returns the runs recomputed.  ``read``:
    each ``(source_path, after_line)`` the ingest read (its lines past ``after_line``, as
    :func:`fold_ranges`); ``left``: the files unsettled when it began (:func:`unsettled`),
    folded whole, even where it appended to them (an earlier read's rows are not in the
    kept ranges).  The kept ranges are then exact for every run (but for rows changed by
    hand, which `check` finds), so the kept keys are compared: an ingest that changed
    nothing reads no batch line.  Call inside a write transaction."""
    whole = set(left)
    now = {p for p, _ in read}
    fold_ranges(store, [*((p, 0 if p in whole else after) for p, after in read),
                        *((p, 0) for p in left if p not in now)])
    recomputed = refresh(store, kept=True)
    store.con.execute("DELETE FROM logpipe_internal.settled_sources")
    store.con.execute("INSERT INTO logpipe_internal.settled_sources SELECT path, sha256 "
                      "FROM sources")
    return recomputed


def ranges_drifted(store: Store, live: str | None = None) -> list[str]:
    """Runs whose kept ranges are not those of the lines the batches table holds: by
    line count alone (cheap: catches lines added or deleted by hand, or by an older
    logpipe), or column by column against ``live`` (a table or view of
    ``run_batch_ranges``, read from every line)."""
    if live is None:
        return [str(r) for (r,) in store.all(_RANGES_DRIFT_SQL)]
    differs = " OR ".join(f"v.{c} IS DISTINCT FROM k.{c}" for c in _RANGE_COLUMNS)
    return [str(r) for (r,) in store.all(
        f"SELECT v.run_id FROM {live} v "
        "LEFT JOIN logpipe_internal.run_batch_ranges_cache k USING (run_id) "
        f"WHERE {differs}")]


def repair_ranges(store: Store, every_column: bool = False) -> int:
    """Recompute the kept ranges of the runs that drifted (``every_column``: compared
    column by column, reading every line); returns how many."""
    drifted = ranges_drifted(store, "main.run_batch_ranges" if every_column else None)
    if drifted:  # one pass over the lines for all of them
        store.con.execute("DELETE FROM logpipe_internal.run_batch_ranges_cache WHERE run_id IN "
                          "(SELECT unnest(?))", [drifted])
        store.con.execute("INSERT INTO logpipe_internal.run_batch_ranges_cache SELECT * FROM "
                          "main.run_batch_ranges WHERE run_id IN (SELECT unnest(?))",
                          [drifted])
    return len(drifted)


# ------------------------------------------------------------- read commands, without writing

SHADOWED = ("run_summary", "launch_values")
"""The views :func:`shadow` lays a temporary table of the same name over."""


def shadow(store: Store, stale: list[str]) -> None:
    """``run_summary`` and ``launch_values`` once for a read command, as temporary tables of
    the same names: they shadow the views for every query of this connection (the
    pairing, regression, noise and overhead views read them, each classifying every
    run's lines when read as views).  Rows come from what ingest kept; the ``stale`` runs
    (changed since, by hand or by an older logpipe) are classified here.  Nothing is
    written to the database; :func:`unshadow` drops them."""
    unshadow(store)
    try:
        store.con.execute(f"CREATE TEMP TABLE run_summary AS {SUMMARY_SQL}")
        if stale:
            store.con.execute("DELETE FROM temp.run_summary WHERE run_id IN "
                              "(SELECT unnest(?))", [stale])
        for sql, params in rows_of(stale):
            store.con.execute(f"INSERT INTO temp.run_summary {sql}", params)
        changed = set(stale)
        store.con.execute(
            "CREATE TEMP TABLE launch_values AS SELECT * FROM launch_values_of_counts(NULL, ?)",
            [[r for (r,) in store.all("SELECT run_id FROM runs") if r not in changed]])
        if len(stale) > _ONE_BY_ONE:
            store.con.execute("INSERT INTO temp.launch_values SELECT * FROM main.launch_values "
                              "WHERE run_id IN (SELECT unnest(?))", [stale])
        else:
            for run_id in stale:
                store.con.execute("INSERT INTO temp.launch_values "
                                  "SELECT * FROM launch_values_of(?)", [run_id])
    except duckdb.Error:
        unshadow(store)  # a database without the caches or views: the views themselves


def unshadow(store: Store) -> None:
    for table in SHADOWED:
        store.con.execute(f"DROP TABLE IF EXISTS temp.{table}")


@contextmanager
def shadowed(store: Store) -> Iterator[None]:
    """:func:`shadow` for the length of a read command (the runs found stale computed
    here), then :func:`unshadow`: the store goes on serving its opener."""
    try:
        shadow(store, [run_id for run_id, _ in stale(store)])
    except duckdb.Error:
        pass  # written by an older logpipe: the views themselves
    try:
        yield
    finally:
        unshadow(store)
