"""`logpipe check`: suites of expectations over the database, validated by
great-expectations.

A suite is a TOML file (built-ins in ``schemas/checks/``; users add their own files).  Each
check names a frame — a SQL ``query`` aggregated in DuckDB, or a ``frame`` computed by the
library (:mod:`logpipe.checks.frames`) — a great-expectations expectation with its
``kwargs``, the ``rows`` columns that identify a failing row and the ``show`` columns to
print with it.  ``:name`` in queries and string kwargs is replaced by the suite's
``[params]``.  A check of ``severity = "warning"`` is reported but does not fail the run.

great-expectations is imported lazily (it costs seconds), only when checks run, and frames
are small (per run, per source, per pair): never millions of raw rows.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from logpipe import summaries
from logpipe.analysis.verdicts import VerdictCache
from logpipe.db import StoreOrPath, open_db
from logpipe.errors import DatabaseError, InputError, LogpipeError
from logpipe.store import Store, schemas_dir

SEVERITIES = ("error", "warning")


@dataclass
class Check:
    suite: str
    name: str
    expectation: str
    kwargs: dict[str, Any]
    query: str | None = None
    frame: str | None = None
    rows: list[str] = field(default_factory=list)
    show: list[str] = field(default_factory=list)
    severity: str = "error"
    description: str | None = None


@dataclass
class Suite:
    name: str
    description: str
    path: str
    params: dict[str, Any]
    checks: list[Check]


@dataclass
class CheckResult:
    check: Check
    success: bool
    failing: list[dict[str, Any]]
    evaluated: int
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error:
            return "ERROR"
        if self.success and self.evaluated == 0:
            return "SKIP"  # a check over no rows tested nothing
        if self.success:
            return "PASS"
        return "WARN" if self.check.severity == "warning" else "FAIL"


@dataclass
class CheckReport:
    results: list[CheckResult]

    @property
    def exit_code(self) -> int:
        if any(r.error for r in self.results):
            return 2
        return 1 if any(r.status == "FAIL" for r in self.results) else 0


def _camel(name: str) -> str:
    if name[:1].isupper():
        return name
    return "".join(part.capitalize() for part in name.split("_"))


def _substitute(value: Any, params: dict[str, Any]) -> Any:
    if isinstance(value, str):
        m = re.fullmatch(r":(\w+)", value)
        if m and m.group(1) in params:
            return params[m.group(1)]
        return re.sub(r":(\w+)", lambda x: str(params.get(x.group(1), x.group(0))), value)
    if isinstance(value, list):
        return [_substitute(v, params) for v in value]
    return value


def load_suite(path: Path) -> Suite:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read suite: {exc}", path=path) from exc
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        raise InputError(f"suite is not valid TOML: {exc}", path=path, line=line) from exc
    name = str(data.get("name") or path.stem)
    params = dict(data.get("params", {}))
    checks = []
    for i, raw in enumerate(data.get("checks", []), 1):
        where = f"check #{i}"
        if "expectation" not in raw or not ("query" in raw or "frame" in raw):
            raise InputError(f"{where} needs an expectation and a query or a frame", path=path,
                             hint="see schemas/checks/data_quality.toml for the format")
        severity = raw.get("severity", "error")
        if severity not in SEVERITIES:
            raise InputError(f"{where}: unknown severity {severity!r}", path=path,
                             hint="use error or warning")
        checks.append(Check(
            suite=name,
            name=_substitute(str(raw.get("name", where)), params),
            expectation=str(raw["expectation"]),
            kwargs={k: _substitute(v, params) for k, v in raw.get("kwargs", {}).items()},
            query=_substitute(raw["query"], params) if "query" in raw else None,
            frame=raw.get("frame"),
            rows=list(raw.get("rows", [])),
            show=list(raw.get("show", [])),
            severity=severity,
            description=raw.get("description"),
        ))
    return Suite(name, str(data.get("description", "")), str(path), params, checks)


def builtin_suite_files() -> list[Path]:
    return sorted((schemas_dir() / "checks").glob("*.toml"))


def load_suites(names: list[str] | None = None, files: list[Path] | None = None) -> list[Suite]:
    """Built-in suites plus ``files``; ``names`` selects by name (all when empty)."""
    suites = [load_suite(p) for p in builtin_suite_files()]
    suites += [load_suite(p) for p in files or []]
    if names:
        known = {s.name for s in suites}
        missing = [n for n in names if n not in known]
        if missing:
            raise LogpipeError(f"unknown suite(s): {', '.join(missing)}",
                               hint="suites: " + ", ".join(sorted(known)))
        suites = [s for s in suites if s.name in names]
    return suites


class _Validator:
    """One ephemeral great-expectations context for a whole `logpipe check`."""

    def __init__(self) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.context.data_sources.add_pandas("logpipe")
        self.n = 0

    def validate(self, frame: Any, check: Check) -> tuple[bool, list[int]]:
        self.n += 1
        asset = self.source.add_dataframe_asset(f"frame_{self.n}")
        batch = asset.add_batch_definition_whole_dataframe("all").get_batch(
            batch_parameters={"dataframe": frame})
        cls = getattr(self.gx.expectations, _camel(check.expectation), None)
        if cls is None:
            raise LogpipeError(f"unknown expectation {check.expectation!r}",
                               hint="use a great-expectations 1.x expectation name")
        result = batch.validate(cls(**check.kwargs), result_format="COMPLETE")
        index = result.result.get("unexpected_index_list") or []
        return bool(result.success), [i for i in index if isinstance(i, int)]


def run_checks(db: StoreOrPath, suites: list[Suite], options: Any = None, *,
               rescan: bool = False, update_cache: bool = False) -> CheckReport:
    """Evaluate every check of ``suites`` against the database ``db``; ``rescan`` reads
    every batch line instead of the per-run ranges ingest keeps (after editing the
    tables by hand).  The database is only read: stale per-run statistics and new pair
    verdicts are computed for this check alone, unless ``update_cache`` asks for them to
    be kept (which opens the database for writing).  A database an older logpipe wrote is
    refused with how to bring it up to date.

    The frames are computed first, while great-expectations (seconds to import) loads on
    another thread; then each frame is validated.  An open store (``db``) is used as it is
    and left open: ``update_cache`` then needs it open for writing."""
    # opened (once) before great-expectations loads: a missing database fails at once
    if isinstance(db, Store):
        store, stale = db, _current(db, rescan, update_cache)
        owned: AbstractContextManager[Any] = _shadows_dropped(db)
    else:
        store, stale = _open_current(db, rescan, update_cache)
        owned = store
    with owned, ThreadPoolExecutor(1) as pool:
        loading = pool.submit(_Validator)
        frames, verdicts = _frames(store, stale, suites)
        validator = loading.result()
    if update_cache:
        verdicts.save(db)
    results: list[CheckResult] = []
    for check, frame, error in frames:
        if frame is None:
            results.append(CheckResult(check, False, [], 0, error=error))
            continue
        try:
            success, index = validator.validate(frame, check)
        except LogpipeError as exc:
            results.append(CheckResult(check, False, [], 0, error=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - a broken user check is reported
            results.append(CheckResult(check, False, [], 0,
                                       error=f"{type(exc).__name__}: {exc}"))
            continue
        cols = [c for c in [*check.rows, *check.show] if c in frame.columns]
        failing = [
            {c: _plain(frame.iloc[i][c]) for c in cols}
            for i in index if 0 <= i < len(frame)
        ]
        results.append(CheckResult(check, success, failing, len(frame)))
    return CheckReport(results)


def _frames(store: Store, stale: list[str], suites: list[Suite]
            ) -> tuple[list[tuple[Check, Any, str | None]], VerdictCache]:
    """(check, pandas frame or None, error) for every check, in order, and the pair
    verdicts computed meanwhile."""
    from logpipe.checks.frames import FRAMES

    out: list[tuple[Check, Any, str | None]] = []
    summaries.shadow(store, stale)
    verdicts = VerdictCache(store, unkeyed=stale)
    for suite in suites:
        for check in suite.checks:
            try:
                if check.query is not None:
                    out.append((check, store.con.sql(check.query).df(), None))
                    continue
                make = FRAMES.get(str(check.frame))
                if make is None:
                    raise LogpipeError(f"unknown frame {check.frame!r}",
                                       hint="frames: " + ", ".join(sorted(FRAMES)))
                out.append((check, make(store, suite.params, verdicts).to_pandas(), None))
            except LogpipeError as exc:
                out.append((check, None, str(exc)))
            except Exception as exc:  # noqa: BLE001 - a broken user check is reported
                out.append((check, None, f"{type(exc).__name__}: {exc}"))
    return out, verdicts


def _current(store: Store, rescan: bool, update_cache: bool) -> list[str]:
    """:func:`_open_current` for a store the caller opened (and keeps open): the stale
    runs; repaired in place with ``update_cache`` (the store must be open for writing)."""
    if store.outdated() and not update_cache:
        raise _outdated(store.path)
    if store.outdated():
        store.migrate()
    kept = _scan_once(store, rescan)
    stale = [run_id for run_id, _ in summaries.stale(store)]
    if (stale or not kept) and update_cache:
        with store.transaction():
            _repair(store, rescan)
        return []
    return stale


def _outdated(path: str | Path) -> DatabaseError:
    return DatabaseError(
        "the database was written by an older logpipe (its schema needs a migration); "
        "read commands never write", path=path,
        hint="bring it up to date with `logpipe check --update-cache` (or any "
             "`logpipe ingest` into it)")


def _repair(store: Store, rescan: bool) -> None:
    """Kept ranges and per-run statistics brought up to date (``--update-cache``)."""
    summaries.repair_ranges(store, every_column=rescan)
    _scan_once(store)  # repaired: the kept ranges give the keys
    summaries.refresh(store)


@contextmanager
def _shadows_dropped(store: Store) -> Iterator[None]:
    """The temporary tables a check lays over views (``run_summary``, ``launch_values``,
    ``run_batch_ranges``) dropped after it: the store goes on serving its opener."""
    try:
        yield
    finally:
        summaries.unshadow(store)
        store.con.execute("DROP TABLE IF EXISTS temp.run_batch_ranges")


def _open_current(db: str | Path, rescan: bool = False,
                  update_cache: bool = False) -> tuple[Store, list[str]]:
    """``db`` open read-only for the checks.  Returns the store and the runs whose kept
    statistics are stale (changed by hand, or written before they were kept):
    :func:`summaries.shadow` computes them for this check only.  With ``update_cache`` the
    stale statistics and drifted ranges are repaired in the database first.  A database
    of an older logpipe (migrations or views missing) is refused, saying how to update it.

    ``run_batch_ranges`` (the keys that find stale statistics and the ranges the
    data-quality checks test) is read once, as a temporary table that shadows the view:
    from the copy ingest keeps, unless its line counts disagree with the batches table
    (lines added or deleted by hand) or ``rescan`` asks for every line to be read."""
    store = open_db(db, read_only=True)
    stale: list[str] = []
    if store.outdated() and not update_cache:
        store.close()
        raise _outdated(db)
    try:
        if not store.outdated():
            kept = _scan_once(store, rescan)
            stale = [run_id for run_id, _ in summaries.stale(store)]
            if (not stale and kept) or not update_cache:
                return store, stale
    except duckdb.Error:
        pass  # written by an older logpipe: opening it for writing migrates it
    store.close()
    try:
        with open_db(db) as writer, writer.transaction():
            _repair(writer, rescan)
        stale = []
    except (duckdb.Error, LogpipeError):
        pass
    store = open_db(db, read_only=True)
    try:
        _scan_once(store)
    except duckdb.Error:
        pass  # a database without the view: its checks report the error themselves
    return store, stale


def _scan_once(store: Store, rescan: bool = False) -> bool:
    """``run_batch_ranges`` as a temporary table; returns whether ingest's copy was right
    (False: some runs drifted, and every line was read)."""
    if rescan:
        store.con.execute("CREATE OR REPLACE TEMP TABLE run_batch_ranges AS "
                          "SELECT * FROM main.run_batch_ranges")
        return not summaries.ranges_drifted(store, "temp.run_batch_ranges")
    kept = not summaries.ranges_drifted(store)
    source = "logpipe_internal.run_batch_ranges_cache" if kept else "main.run_batch_ranges"
    store.con.execute(f"CREATE OR REPLACE TEMP TABLE run_batch_ranges AS SELECT * FROM {source}")
    return kept


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        try:
            return value.item()
        except (ValueError, AttributeError):
            pass
    try:
        import pandas as pd

        if pd.isna(value) is True:
            return None
    except (TypeError, ValueError):  # lists and other non-scalars
        pass
    return value
