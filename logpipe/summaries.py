"""Per-run steady-state statistics, kept up to date instead of recomputed for every check.

``run_summary`` (a view) classifies every batch line of every run each time it is read:
about 100 s and many GB on a database of 1,000 runs and 50 M lines.  The statistics of
a run only change when its lines or its bounding events do, so they are stored in
``run_summary_cache`` with the ``data_key`` they were computed from (``run_data_keys``),
and :func:`refresh` recomputes just the runs whose key changed, one run at a time
(``run_summary_stats(run)``).  ``check`` refreshes before it runs (so it pays only for the
runs ingested or changed since the last check; ingest stays as fast as it was) and reads
:data:`SUMMARY_SQL`, which is ``run_summary`` row for row (a test compares them).
"""

from __future__ import annotations

from logpipe.store import Store

STATS = ("decode_lines", "steady_decode_lines", "steady_gen_throughput", "steady_accept_len",
         "graph_coverage", "strata")

_RUN_COLUMNS = """r.run_id, r.name, r.model, r.tp_size, r.dp_size, r.ep_size, r.pp_size,
       r.spec_algorithm, r.role, r.env_fingerprint, r.env_complete, r.profiled,
       r.format_era, r.started_at"""

SUMMARY_SQL = f"""
SELECT {_RUN_COLUMNS}, {", ".join("c." + s for s in STATS)}
FROM runs r JOIN run_summary_cache c USING (run_id)
"""
"""``run_summary`` from the cache (complete after :func:`refresh`)."""

ONE_RUN_SQL = f"""
SELECT {_RUN_COLUMNS}, coalesce(s.decode_lines, 0) AS decode_lines,
       coalesce(s.steady_decode_lines, 0) AS steady_decode_lines,
       {", ".join("s." + s for s in STATS[2:])}
FROM runs r LEFT JOIN run_summary_stats(?) s USING (run_id) WHERE r.run_id = ?
"""
"""``run_summary``'s row of one run, computed now (parameters: the run id, twice)."""


def stale(store: Store) -> list[tuple[str, str]]:
    """(run_id, current data key) of every run whose cached statistics are missing or out
    of date."""
    return [(str(r), str(k)) for r, k in store.all(
        "SELECT k.run_id, k.data_key FROM run_data_keys k "
        "LEFT JOIN run_summary_cache c USING (run_id) "
        "WHERE c.data_key IS DISTINCT FROM k.data_key")]


def refresh(store: Store) -> int:
    """Recompute the statistics of stale runs and drop those of runs gone; returns the
    number recomputed.  Call inside a write transaction or with autocommit."""
    todo = stale(store)
    store.con.execute("DELETE FROM run_summary_cache WHERE run_id NOT IN "
                      "(SELECT run_id FROM runs)")
    cols = ", ".join(STATS)
    for run_id, key in todo:
        store.con.execute("DELETE FROM run_summary_cache WHERE run_id = ?", [run_id])
        store.con.execute(
            f"INSERT INTO run_summary_cache (run_id, data_key, {cols}) "
            f"SELECT run_id, ?, {cols} FROM ({ONE_RUN_SQL})", [key, run_id, run_id])
    return len(todo)
