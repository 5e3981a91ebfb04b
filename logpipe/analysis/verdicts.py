"""Verdicts of speculative runs against their baselines, kept between checks.

Judging a pair loads both runs' steady lines and runs ``compare``'s statistics: about
0.2 s a pair, minutes for the hundreds of pairs of a database of 1,000 runs, and ``check``
runs after every ingest.  A verdict changes only when what it was computed from does, so
it is stored in ``pair_verdict_cache`` under a key over all of it:

- each run's ``data_key`` (its batch lines and the events that bound its steady state,
  from ``run_summary_cache``, which ``check`` refreshes first), its record (name, role,
  environment, era, layout) and the rows linked to it: its benchmark, counters and
  traces (all that :func:`logpipe.analysis.load.load_runs` reads: a benchmark linked to
  a run after its verdict was kept gives a new key, and the client's numbers are judged);
- the options of the comparison;
- the rules: the sources of the modules that load and judge runs, and ``views.sql``.

A change in any of them gives a new key, so a stale verdict is never read; it is
replaced when its pair is judged again.  ``check`` reads the database read-only: the
verdicts it computes are written afterwards, when the database can be opened for
writing (otherwise they are computed again next time).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from typing import Any

import duckdb

from logpipe.db import StoreOrPath, using
from logpipe.rules import rules_key
from logpipe.store import Store

Verdict = tuple[str, float | None, str]
"""(verdict, speedup, detail) of one pair."""

_RUN_KEYS_SQL = """
WITH linked AS (
    SELECT run_id, 'bench ' || count(*) || ' ' || sum(hash(b)) AS part
    FROM bench_results b WHERE run_id IS NOT NULL GROUP BY run_id
    UNION ALL
    SELECT run_id, 'counters ' || count(*) || ' ' || sum(hash(m))
    FROM metric_snapshots m WHERE run_id IS NOT NULL GROUP BY run_id
    UNION ALL
    SELECT x.run_id, 'traces ' || count(*) || ' ' || sum(hash(x, s.sha256))
    FROM traces x LEFT JOIN sources s ON s.path = x.source_path
    WHERE x.run_id IS NOT NULL GROUP BY x.run_id)
SELECT r.run_id,
       c.data_key || '|' || sha256(CAST(row(r.name, r.role, r.spec_algorithm, r.profiled,
           r.env, r.env_complete, r.format_era, r.era_mask, r.engine_version, r.engine,
           r.tp_size, r.dp_size, r.pp_size, r.ep_size) AS VARCHAR))
       || '|' || coalesce(l.parts, '')
FROM runs r JOIN logpipe_internal.run_summary_cache c USING (run_id)
LEFT JOIN (SELECT run_id, string_agg(part, '|' ORDER BY part) AS parts FROM linked
           GROUP BY run_id) l USING (run_id)
"""
"""Each run's key: its lines' (``data_key``), its record's, and a hash over the rows
linked to it that a judge reads besides its lines: its benchmark (the client's numbers,
its load levels), its counters (``metric_snapshots``, their level windows) and its traces
(with their files' contents)."""


_CAMPAIGN_RUNS_SQL = """
WITH m AS (SELECT run_id FROM run_env WHERE key = 'launch.plan' AND value = ?)
SELECT r.run_id, r.run_id IN (SELECT run_id FROM m) AS member,
       CAST(r.started_at AS VARCHAR), r.run_seq
FROM runs r
WHERE r.run_id IN (SELECT run_id FROM m)
   OR EXISTS (SELECT 1 FROM runs c WHERE c.run_id IN (SELECT run_id FROM m)
              AND c.env_fingerprint = r.env_fingerprint
              AND c.model IS NOT DISTINCT FROM r.model)
ORDER BY r.run_id
"""
"""A campaign's launches and the launches of their environments, whose repeats are its
launch noise (:func:`logpipe.analysis.load.environment_noise`)."""

CAMPAIGN_COLUMNS = ("spec_run", "baseline_run", "verdict", "speedup", "detail")
"""A campaign's row in ``check``: a candidate arm against the baseline arm."""


def _canonical(options: Any) -> str:
    """The options as text that is the same in every process (sets sorted)."""
    def plain(value: Any) -> Any:
        return sorted(map(str, value)) if isinstance(value, set | frozenset) else str(value)

    data = (dataclasses.asdict(options) if dataclasses.is_dataclass(options)
            and not isinstance(options, type) else options)
    return json.dumps(data, sort_keys=True, default=plain)


class VerdictCache:
    """The cached verdicts of one database, read once; new ones are held until
    :meth:`save`.  ``unkeyed`` runs (statistics not refreshed) are never cached."""

    def __init__(self, store: Store | None = None, unkeyed: Iterable[str] = ()) -> None:
        self.known: dict[str, Verdict] = {}
        self.new: list[tuple[str, str, str, str, float | None, str]] = []
        self.campaigns: dict[str, list[dict[str, Any]]] = {}
        """A campaign's rows (``CAMPAIGN_COLUMNS``) by its key."""
        self.new_campaigns: list[tuple[str, str, list[dict[str, Any]]]] = []
        self._rules = ""
        self._store = store
        self._skip = set(unkeyed)
        self._run_keys: dict[str, str] | None = {} if store is None else None
        if store is None:
            return
        try:
            self.known = {str(k): (str(v), s, str(d)) for k, v, s, d in store.all(
                "SELECT pair_key, verdict, speedup, detail "
                "FROM logpipe_internal.pair_verdict_cache")}
            for key, *row in store.all(
                    "SELECT campaign_key, spec_run, baseline_run, verdict, speedup, detail "
                    "FROM logpipe_internal.campaign_verdict_cache ORDER BY campaign_key, "
                    "position"):
                self.campaigns.setdefault(str(key), []).append(
                    dict(zip(CAMPAIGN_COLUMNS, row, strict=True)))
        except duckdb.Error:  # a database without the caches: nothing is kept
            self.known, self.campaigns, self._run_keys = {}, {}, {}
            return
        self._rules = rules_key()

    def run_keys(self) -> dict[str, str]:
        """Each keyed run's key, read when a pair's key is first asked (a hash of every
        run's environment: 0.5 s on a database of 1,586 launches, which a check of runs
        without a pair never asks)."""
        if self._run_keys is None:
            assert self._store is not None  # (a cache without a store has none to read)
            try:
                self._run_keys = {str(r): str(k) for r, k in self._store.all(_RUN_KEYS_SQL)
                                  if r not in self._skip and k is not None}
            except duckdb.Error:  # (nothing kept)
                self._run_keys = {}
        return self._run_keys

    def key(self, spec_run_id: str, baseline_run_id: str, options: Any,
            extra: str = "") -> str | None:
        """The key of a pair judged with ``options`` (and ``extra``: other inputs of the
        verdict, as text); None when it cannot be cached."""
        keys = self.run_keys()
        spec, base = keys.get(spec_run_id), keys.get(baseline_run_id)
        if spec is None or base is None:
            return None
        text = "\n".join([self._rules, _canonical(options), extra, spec, base])
        return hashlib.sha256(text.encode()).hexdigest()

    def campaign_key(self, plan: str, options: Any) -> str | None:
        """The key of campaign ``plan`` judged with ``options``: its launches (and their
        order) and every launch of their environments (fingerprint and model: the repeats
        its launch noise is measured from), each by its run key; None when one of them
        cannot be keyed."""
        if self._store is None:  # (a cache of this process alone: campaigns not kept)
            return None
        keys = self.run_keys()
        runs = self._store.all(_CAMPAIGN_RUNS_SQL, [plan])
        if not runs or any(str(r) not in keys for r, *_ in runs):
            return None
        text = "\n".join([self._rules, "campaign", plan, _canonical(options),
                          *(f"{r} {member} {at} {seq} {keys[str(r)]}"
                            for r, member, at, seq in runs)])
        return hashlib.sha256(text.encode()).hexdigest()

    def get_campaign(self, key: str | None) -> list[dict[str, Any]] | None:
        return self.campaigns.get(key) if key is not None else None

    def put_campaign(self, key: str | None, plan: str, rows: list[dict[str, Any]]) -> None:
        if key is not None:
            self.campaigns[key] = rows
            self.new_campaigns.append((key, plan, rows))

    def get(self, key: str | None) -> Verdict | None:
        return self.known.get(key) if key is not None else None

    def put(self, key: str | None, spec_run_id: str, baseline_run_id: str,
            verdict: Verdict) -> None:
        if key is not None:
            self.known[key] = verdict
            self.new.append((key, spec_run_id, baseline_run_id, *verdict))

    def save(self, db: StoreOrPath) -> int:
        """Write the new verdicts, replacing the pairs' and campaigns' old ones and dropping
        those of runs and campaigns gone; returns the number written (0 when the database
        is busy, or is a store open read-only)."""
        if not (self.new or self.new_campaigns) or (isinstance(db, Store) and db.read_only):
            return 0
        try:
            with using(db) as store, store.transaction():
                def each(sql: str, rows: list[list[Any]]) -> None:
                    if rows:  # (DuckDB's executemany refuses no rows)
                        store.con.executemany(sql, rows)

                each("DELETE FROM logpipe_internal.campaign_verdict_cache WHERE plan = ?",
                     [[plan] for _, plan, _ in self.new_campaigns])
                each("INSERT INTO logpipe_internal.campaign_verdict_cache "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     [[key, plan, i, *(row[c] for c in CAMPAIGN_COLUMNS)]
                      for key, plan, rows in self.new_campaigns for i, row in enumerate(rows)])
                store.con.execute(
                    "DELETE FROM logpipe_internal.campaign_verdict_cache WHERE plan NOT IN "
                    "(SELECT value FROM run_env WHERE key = 'launch.plan')")
                each("DELETE FROM logpipe_internal.pair_verdict_cache WHERE spec_run_id = ? "
                     "AND baseline_run_id = ?", [[s, b] for _, s, b, *_ in self.new])
                each("INSERT INTO logpipe_internal.pair_verdict_cache VALUES (?, ?, ?, ?, ?, ?)",
                     [list(row) for row in self.new])
                store.con.execute(
                    "DELETE FROM logpipe_internal.pair_verdict_cache WHERE spec_run_id NOT IN "
                    "(SELECT run_id FROM runs) OR baseline_run_id NOT IN "
                    "(SELECT run_id FROM runs)")
        except (duckdb.Error, OSError):
            return 0
        return len(self.new) + len(self.new_campaigns)
