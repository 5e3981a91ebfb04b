"""Read-only questions to the database: the runs list and user SQL."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from logpipe.db import StoreOrPath, using
from logpipe.env import EnvDiff, RunEnv, diff
from logpipe.errors import RunNotFoundError
from logpipe.store import Store

RUNS_SQL = """
SELECT r.name, r.run_id, r.started_at, r.model,
       concat_ws(' ',
         'tp' || r.tp_size,
         CASE WHEN r.dp_size > 1 THEN 'dp' || r.dp_size END,
         CASE WHEN r.ep_size > 1 THEN 'ep' || r.ep_size END,
         CASE WHEN r.pp_size > 1 THEN 'pp' || r.pp_size END) AS layout,
       CASE WHEN r.spec_algorithm IS NOT NULL THEN concat_ws(' ', r.spec_algorithm,
         's' || r.spec_num_steps, 'k' || r.spec_eagle_topk, 'd' || r.spec_num_draft_tokens)
       END AS speculation,
       r.format_era AS era,
       (SELECT count(*) FROM batches b WHERE b.run_id = r.run_id) AS rows
FROM runs r
ORDER BY r.started_at NULLS LAST, r.name
"""


def list_runs(db: str | Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    """One row per run: name, id, start, model, layout, speculation, era, batch rows."""
    with using(db, read_only=True) as store:
        return store.query(RUNS_SQL)


def run_sql(db: StoreOrPath, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run ``sql`` on a read-only connection to ``db``."""
    with using(db, read_only=True) as store:
        return store.query(sql)


def resolve_runs(store: Store, refs: Sequence[str]) -> list[str]:
    """:func:`resolve_run` of each of ``refs``: those a name or an id names exactly found in
    one statement, the others one by one."""
    rows = store.all("SELECT run_id, name FROM runs WHERE name IN (SELECT unnest($1)) "
                     "OR run_id IN (SELECT unnest($1))", [list(refs)])
    exact: dict[str, list[str]] = {}
    for run_id, name in rows:
        for key in {str(run_id), str(name)}:
            exact.setdefault(key, []).append(str(run_id))
    return [found[0] if len(found := exact.get(ref, [])) == 1 else resolve_run(store, ref)
            for ref in refs]


def resolve_run(store: Store, ref: str) -> str:
    """A run id from a name, an id or a unique prefix of an id or a name."""
    rows = store.all("SELECT run_id, name FROM runs WHERE name = ? OR run_id = ?", [ref, ref])
    if not rows:
        rows = store.all("SELECT run_id, name FROM runs WHERE starts_with(run_id, ?) "
                         "OR starts_with(name, ?) ORDER BY name", [ref, ref])
    if len(rows) == 1:
        return str(rows[0][0])
    if not rows:
        import difflib

        every = [str(r[0]) for r in store.all("SELECT name FROM runs ORDER BY name")]
        near = difflib.get_close_matches(ref, every, n=3, cutoff=0.6)
        raise RunNotFoundError(
            f"no run named {ref!r}" + (f": did you mean {' or '.join(map(repr, near))}?"
                                       if near else ""),
            hint="known runs: " + (", ".join(every[:20]) + (" ..." if len(every) > 20 else "")
                                   or "none") + " (`logpipe runs` lists them)")
    listed = ", ".join(f"{name} ({rid})" for rid, name in rows[:20])
    raise RunNotFoundError(f"run reference {ref!r} is ambiguous: {len(rows)} runs match",
                           hint=f"candidates: {listed}")


# ---------------------------------------------------------------------- from the store

def load_run_env(db: StoreOrPath, ref: str) -> tuple[str, RunEnv]:
    """The name and environment of run ``ref`` (name, id or unique id prefix)."""

    with using(db, read_only=True) as store:
        run_id = resolve_run(store, ref)
        row = store.one("SELECT name, env, env_complete FROM runs WHERE run_id = ?", [run_id])
        assert row is not None
        return str(row[0]), RunEnv.from_json(row[1], bool(row[2]))


def diff_runs(db: StoreOrPath, ref_a: str, ref_b: str) -> EnvDiff:
    """:func:`diff` of two stored runs."""
    name_a, a = load_run_env(db, ref_a)
    name_b, b = load_run_env(db, ref_b)
    return diff(name_a, a, name_b, b)
