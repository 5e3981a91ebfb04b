"""The ``runs`` rows and what hangs on them: made, widened, re-clocked, given their
environment, linked to records, taken back; ``profiled`` derived from its evidence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logpipe.store.frames import FrameRows
from logpipe.store.schema import (
    INTERNAL,
    LINKED_TABLES,
    RUN_ENV_TABLES,
    record_tables,
    run_tables,
    stored,
)

if TYPE_CHECKING:
    import polars as pl

    from logpipe.env import Rendered


@dataclass
class EnvRows:
    """Runs' environments as rows to write (:func:`env_rows`)."""

    updates: list[tuple[str, dict[str, Any]]]
    """Other columns of each run, set with its environment."""
    envs: pl.DataFrame
    """``run_envs`` rows: ``run_id``, ``env`` (JSON), ``env_fingerprint``."""
    entries: pl.DataFrame
    """``run_env`` rows: one per run and key."""


def env_rows(envs: list[tuple[str, Rendered, dict[str, Any]]]) -> EnvRows | None:
    """The rows :meth:`RunRows.set_run_envs` writes for ``envs`` (None: none), made without
    the store."""
    if not envs:
        return None
    import polars as pl

    ids = [run_id for run_id, _, _ in envs]
    # as a frame, not as list parameters: 1,586 environments of ~54 KB took 0.83-0.92 s
    # as parameters, 0.33-0.34 s as a frame
    frame = pl.DataFrame(
        {"run_id": ids, "env": [env.json for _, env, _ in envs],
         "env_fingerprint": [env.fingerprint for _, env, _ in envs]},
        schema=dict.fromkeys(("run_id", "env", "env_fingerprint"), pl.String))
    # built column by column (a file of 1,500 launches writes ~900,000 entries: rows of
    # tuples cost twice as much)
    columns: dict[str, list[Any]] = {c: [] for c in (
        "run_id", "key", "value", "tier", "source", "conflict")}
    for run_id, env, _ in envs:
        entries = [env.entries[k] for k in env.keys]
        columns["run_id"] += [run_id] * len(entries)
        columns["key"] += env.keys
        columns["value"] += [e.value_text for e in entries]
        columns["tier"] += [e.tier for e in entries]
        columns["source"] += [e.source for e in entries]
        columns["conflict"] += [e.conflict for e in entries]
    return EnvRows([(run_id, other) for run_id, _, other in envs], frame,
                   pl.DataFrame(columns, schema=dict.fromkeys(columns, pl.String)))


WIDE_RUN_COLUMNS = frozenset({"server_args", "server_args_raw"})
"""Columns of ``runs`` tens of KB a row (a launch's arguments), which are written by
deleting the rows and inserting them again, not by ``UPDATE``: DuckDB keeps an open
transaction's updated values in memory it cannot spill, so a file of 3,000 launches held
~300 MB of them until its commit; inserted rows spill past the write's memory bound
(:data:`logpipe.ingest.WRITE_MEMORY`).  A new launch's arguments are written with its row
(:meth:`RunRows.add_runs`); its environment, written after it, is a row of its own
(``run_envs``, :meth:`RunRows.set_run_envs`)."""
_REWRITTEN = "logpipe_rewritten_runs"
"""The temporary table of the rows being written again (the connection's own)."""


_POLARS_TYPES = {"VARCHAR": "String", "JSON": "String", "INTEGER": "Int32", "BIGINT": "Int64",
                 "DOUBLE": "Float64", "BOOLEAN": "Boolean", "TIMESTAMP": "Datetime"}


_INT_BITS = {"INTEGER": 31, "BIGINT": 63}


def _fitting(values: list[Any], duckdb_type: str) -> list[Any]:
    """A launch fact's ``values`` for a ``runs`` column of ``duckdb_type``: an integer the
    column cannot hold (a launch's ``tp_size`` of 20 digits) is no fact (None), rather than
    a frame that cannot be built and a file that fails; its arguments keep it as printed."""
    bits = _INT_BITS.get(duckdb_type)
    if bits is None:
        return values
    bound = 1 << bits
    return [None if type(v) is int and not -bound <= v < bound else v for v in values]


def _polars_type(duckdb_type: str) -> Any:
    """The polars type a ``runs`` column's values are framed in (its DuckDB type's)."""
    import polars as pl

    if duckdb_type not in _POLARS_TYPES:
        raise TypeError(f"runs: no polars type for a column of type {duckdb_type}")
    return getattr(pl, _POLARS_TYPES[duckdb_type])


class RunRows(FrameRows):
    """Reading and writing the rows of ``runs`` and ``run_env``."""

    def unmake_runs(self, run_ids: list[str]) -> list[int]:
        """Take back runs of the file being ingested (its transaction): their rows go,
        other tables' rows that named them keep no run.  Returns the line numbers of the
        record lines they held (:func:`record_tables`), for ``rejects``."""
        if not run_ids:
            return []
        lines = [int(n) for (n,) in self.con.execute(" UNION ".join(
            f"SELECT line_no FROM {stored(t)} WHERE run_id IN (SELECT unnest(?))"
            for t in record_tables()) + " ORDER BY 1",
            [run_ids] * len(record_tables())).fetchall()]
        for table in run_tables():
            self.con.execute(f"DELETE FROM {stored(table)} WHERE run_id IN (SELECT unnest(?))",
                             [run_ids])
        self.con.execute(f"UPDATE {stored('rejects')} SET run_id = NULL "
                         "WHERE run_id IN (SELECT unnest(?))", [run_ids])
        for table in LINKED_TABLES:
            self.con.execute(f"UPDATE {stored(table)} SET run_id = NULL, link_method = NULL "
                             "WHERE run_id IN (SELECT unnest(?))", [run_ids])
        for table in RUN_ENV_TABLES:
            self.con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT unnest(?))",
                             [run_ids])
        self.con.execute(f"DELETE FROM {stored('runs')} WHERE run_id IN (SELECT unnest(?))",
                         [run_ids])
        return lines

    def env_texts(self, run_ids: Sequence[str]) -> dict[str, str]:
        """``runs.env`` of each of ``run_ids`` (``{}`` where none is kept), read where it is
        kept: the view joins it to every run, and a file of 1,586 launches took 44 ms to
        read one run's so, 17 ms this way (its ~54 KB texts are compressed together)."""
        found = {str(r): str(e) for r, e in self.con.execute(
            f"SELECT run_id, env FROM {INTERNAL}.run_envs "
            "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)]).fetchall()}
        missing = [str(r) for r in run_ids if str(r) not in found]
        if missing:  # through the view: a lake's runs (its own table is the view's)
            found.update({str(r): str(e) for r, e in self.con.execute(
                "SELECT run_id, env FROM runs WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
                [missing]).fetchall()})
        return {str(r): found.get(str(r), "{}") for r in run_ids}

    def name_taken(self, name: str) -> bool:
        return self.one("SELECT 1 FROM runs WHERE name = ?", [name]) is not None

    # -- runs and their environments: every write of ``runs`` and ``run_env`` ----------

    def add_runs(self, runs: list[tuple[Any, ...]], *, engine: str,
                 facts: Sequence[tuple[str, dict[str, Any]]] = ()
                 ) -> list[tuple[str, dict[str, Any]]]:
        """Launches seen for the first time, a statement per set of facts (a file may hold
        hundreds): ``(run_id, name, source_path, run_seq, first_line, started_at,
        ended_at, format_era, era_mask)`` each, baselines until their arguments say more,
        of ``engine`` (``runs.engine``).  ``facts``: what launch lines said of runs
        (:meth:`update_runs`' items): those of these runs are written with their rows (an
        update of their arguments would be held in memory, :data:`WIDE_RUN_COLUMNS`), the
        others are returned."""
        new = {row[0] for row in runs}
        said: dict[str, dict[str, Any]] = {}
        rest = []
        for run_id, facts_of in facts:
            if run_id in new:
                said.setdefault(run_id, {}).update(facts_of)
            else:
                rest.append((run_id, facts_of))
        if not runs:
            return rest
        import polars as pl

        types = dict(self.columns("runs", INTERNAL))
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for row in runs:
            groups.setdefault(tuple(said.get(row[0], ())), []).append(row)
        for keys, rows in groups.items():
            cols = list(zip(*rows, strict=True))
            values: dict[str, list[Any]] = {
                "run_id": list(cols[0]), "name": list(cols[1]),
                "source_id": [self.source_id(p) for p in cols[2]], "run_seq": list(cols[3]),
                "first_line": list(cols[4]), "started_at": list(cols[5]),
                "ended_at": list(cols[6]), "format_era": list(cols[7]),
                "era_mask": list(cols[8])}
            for key in keys:
                values[key] = _fitting([said[r[0]][key] for r in rows], types[key])
            # as a frame, not as list parameters: a launch's arguments are ~38 KB of text
            # (1,586 launches of a file: 0.49 s as parameters)
            frame = pl.DataFrame(values, schema={c: _polars_type(types[c]) for c in values})
            unsaid = {"engine": pl.lit(engine, pl.String), "role": pl.lit("baseline"),
                      "env_complete": pl.lit(False), "profiled": pl.lit(False),
                      "tags": pl.lit("{}")}
            self.insert_rows("runs", frame.with_columns(
                **{c: v for c, v in unsaid.items() if c not in values}))
        return rest

    def update_runs(self, updates: list[tuple[str, dict[str, Any]]]) -> None:
        """Set columns of many runs, one statement per set of columns (``update_run`` of
        each costs a statement per run)."""
        types = dict(self.columns("runs", INTERNAL))
        groups: dict[tuple[str, ...], list[tuple[str, dict[str, Any]]]] = {}
        for run_id, values in updates:
            if values:
                groups.setdefault(tuple(values), []).append((run_id, values))
        for cols, members in groups.items():
            select = ", ".join(["unnest(?::VARCHAR[]) AS run_id_"] + [
                f"unnest(?::{types[c]}[]) AS v{i}" for i, c in enumerate(cols)])
            params = [[m[0] for m in members]] + [[m[1][c] for m in members] for c in cols]
            if WIDE_RUN_COLUMNS.isdisjoint(cols):
                sets = ", ".join(f"{c} = v.v{i}" for i, c in enumerate(cols))
                self.con.execute(
                    f"UPDATE {stored('runs')} SET {sets} FROM (SELECT {select}) v "
                    "WHERE run_id = v.run_id_", params)
                continue
            # the rows written again whole (see WIDE_RUN_COLUMNS)
            replaced = ", ".join(f"v.v{i} AS {c}" for i, c in enumerate(cols))
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {_REWRITTEN} AS SELECT r.* REPLACE ({replaced}) "
                f"FROM {stored('runs')} r JOIN (SELECT {select}) v ON r.run_id = v.run_id_",
                params)
            self.con.execute(f"DELETE FROM {stored('runs')} WHERE run_id IN "
                             f"(SELECT run_id FROM {_REWRITTEN})")
            self.con.execute(f"INSERT INTO {stored('runs')} SELECT * FROM {_REWRITTEN}")
            self.con.execute(f"DROP TABLE {_REWRITTEN}")

    def set_run_clocks(self, clocks: list[tuple[str, int | None, str | None]]) -> None:
        """``(run_id, utc_offset_s, clock_source)`` of many runs in one statement."""
        if not clocks:
            return
        ids, offsets, sources = (list(x) for x in zip(*clocks, strict=True))
        self.con.execute(
            f"UPDATE {stored('runs')} SET utc_offset_s = v.o, clock_source = v.s FROM "
            "(SELECT unnest(?::VARCHAR[]) AS r, unnest(?::INTEGER[]) AS o, "
            "unnest(?::VARCHAR[]) AS s) v WHERE run_id = v.r AND "
            "(utc_offset_s IS DISTINCT FROM v.o OR clock_source IS DISTINCT FROM v.s)",
            [ids, offsets, sources])

    def update_run(self, run_id: str, **values: Any) -> None:
        """Set columns of a run (a row is rewritten only when a value differs)."""
        if not values:
            return
        cols = list(values)
        self.con.execute(
            f"UPDATE {stored('runs')} SET {', '.join(f'{c} = ?' for c in cols)} "
            f"WHERE run_id = ? AND ({' OR '.join(f'{c} IS DISTINCT FROM ?' for c in cols)})",
            [values[c] for c in cols] + [run_id] + [values[c] for c in cols])

    def widen_run(self, run_id: str, first_ts: Any, last_ts: Any, format_era: str | None,
                  era_mask: int | None) -> None:
        """More lines of a known launch: its time span grows, its era narrows."""
        self.con.execute(
            f"UPDATE {stored('runs')} SET started_at = least(coalesce(started_at, ?), ?), "
            "ended_at = greatest(coalesce(ended_at, ?), ?), era_mask = ?, format_era = ? "
            "WHERE run_id = ?",
            [first_ts, first_ts, last_ts, last_ts, era_mask, format_era, run_id])

    def set_run_envs(self, envs: list[tuple[str, Rendered, dict[str, Any]]]) -> None:
        """Write runs' environments (each rendered: :func:`logpipe.env.render`): ``runs.env``
        and its fingerprint (a row of ``run_envs`` each), and the same entries as
        ``run_env`` rows, together (one place keeps them in step); the dict holds other
        columns of the run to set with it."""
        rows = env_rows(envs)
        if rows is not None:
            self.write_run_envs(rows)

    def write_run_envs(self, rows: EnvRows) -> None:
        """Write what :func:`env_rows` made (statements only: its rows were built without
        the store, on any thread)."""
        ids = rows.envs.get_column("run_id").to_list()
        self.update_runs(rows.updates)
        for table in RUN_ENV_TABLES:  # (the old ones first; one statement each)
            self.con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT unnest(?))", [ids])
        self.insert_rows("run_envs", rows.envs)
        if rows.entries.height:  # one statement, not one per key: DuckDB's inserts are per call
            self.insert("run_env", rows.entries)

    def link(self, table: str, source_path: str, run_id: str | None, method: str | None
             ) -> None:
        """Say which run the records of one file (benchmark, phase dump, trace) measured."""
        self.con.execute(
            f"UPDATE {stored(table)} SET run_id = ?, link_method = ? WHERE source_id = "
            "(SELECT source_id FROM sources WHERE path = ?) AND (run_id IS DISTINCT FROM ? "
            "OR link_method IS DISTINCT FROM ?)", [run_id, method, source_path, run_id, method])

    def append_to_last_error(self, source_path: str, text: str) -> None:
        """Lines that continue the last error event of a file (a traceback cut by the
        end of a block) join its message."""
        self.con.execute(
            f"UPDATE {stored('events')} SET message = message || chr(10) || $2 "
            "WHERE source_id = $1 AND line_no = (SELECT max(line_no) FROM "
            f"{stored('events')} WHERE source_id = $1 AND kind = 'error')",
            [self.source_id(source_path), text])

    def derive_profiled(self) -> None:
        """``runs.profiled``, from its evidence and nothing else (so it is cleared when the
        evidence goes): a profiler started in the log and never stopped, a trace linked to
        a run with no bounded profiler window, a phase dump taken with device
        synchronisation, ``CUDA_LAUNCH_BLOCKING=1`` or the tag ``profiled`` in its
        environment.  A profiler window the log bounds (``Profiling starts`` …
        ``Stop profiling`` / ``Profiling done``, as ``/start_profile`` with ``num_steps``
        leaves) profiles only its batch lines (``batch_states.state = 'profiled'``), not
        the launch."""
        self.con.execute(PROFILED_SQL)



PROFILED_SQL = f"""
UPDATE {INTERNAL}.runs SET profiled = d.profiled
FROM (
    SELECT r.run_id,
           coalesce(r.run_id IN (SELECT s.run_id FROM {INTERNAL}.events s
                                 WHERE s.kind = 'profiling_start' AND s.run_id IS NOT NULL
                                   AND NOT EXISTS (
                                       SELECT 1 FROM {INTERNAL}.events e
                                       WHERE e.run_id = s.run_id AND e.kind = 'profiling_stop'
                                         AND e.line_no > s.line_no))
        OR r.run_id IN (SELECT run_id FROM {INTERNAL}.traces WHERE run_id IS NOT NULL
                        AND run_id NOT IN (SELECT run_id FROM {INTERNAL}.events
                                           WHERE kind = 'profiling_stop'
                                             AND run_id IS NOT NULL))
        OR r.run_id IN (SELECT run_id FROM {INTERNAL}.phase_timings
                        WHERE synchronized AND run_id IS NOT NULL)
        OR r.run_id IN (SELECT run_id FROM run_env
                        WHERE (key = 'CUDA_LAUNCH_BLOCKING' AND trim(value) = '1')
                           OR (key = 'tag.profiled'
                               AND lower(trim(value)) IN ('1', 'true', 'yes'))), false)
           AS profiled
    FROM {INTERNAL}.runs r
) d
WHERE runs.run_id = d.run_id AND runs.profiled IS DISTINCT FROM d.profiled
"""
"""Every run's ``profiled`` from its evidence (:meth:`Store.derive_profiled`)."""
