"""The Python API for notebooks and scripts: the same library the CLI calls, returning
the result objects the CLI renders.

    import logpipe

    db = logpipe.open("logpipe.duckdb")          # a DuckDB file or a Parquet lake
    db.ingest(["logs/"])                          # what `logpipe ingest logs/` does
    runs = db.runs()                              # polars DataFrame of the runs table
    steps = db.samples("baseline-untuned")        # its server samples (server_samples)
    verdict = db.compare("baseline-untuned", "eagle3-untuned")
    verdict.exit_code, verdict.to_dict()          # as `compare --format json`
    db.check().to_dict()                          # as `check --format json`

Each result prints as the CLI's text and shows as HTML in Jupyter.  A handle holds the
path, not a connection: each call opens the database for as long as it needs it, so an
ingest from another process is never locked out by an idle notebook.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

__all__ = ["CheckResult", "Comparisons", "Database", "IngestSummary", "open"]


class _Rendered:
    """A result that prints as the CLI's text and shows as preformatted HTML."""

    def __str__(self) -> str:
        return self.text()

    def text(self) -> str:
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.text())}</pre>"


@dataclass
class Comparisons(_Rendered):
    """The verdicts of one ``compare`` (one per candidate arm)."""

    comparisons: list[Any]
    exit_code: int

    def to_dict(self) -> dict[str, Any]:
        from logpipe.report import comparisons_json

        return json.loads(comparisons_json(self.comparisons, self.exit_code))  # type: ignore[no-any-return]

    def text(self) -> str:
        from logpipe.report import comparison_text

        return "\n".join(comparison_text(c) for c in self.comparisons)

    @property
    def verdicts(self) -> list[str]:
        return [c.verdict for c in self.comparisons]


@dataclass
class CheckResult(_Rendered):
    report: Any

    @property
    def exit_code(self) -> int:
        return int(self.report.exit_code)

    def to_dict(self) -> dict[str, Any]:
        from logpipe.report import check_json

        return json.loads(check_json(self.report))  # type: ignore[no-any-return]

    def text(self) -> str:
        from logpipe.report import check_text

        return check_text(self.report)


@dataclass
class IngestSummary(_Rendered):
    result: Any

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {"files": [{"path": f.path, "status": f.status, "kind": f.kind,
                           "rows": f.rows, "detail": f.detail} for f in r.files],
                "failed": [f.path for f in r.failed], "unlinked_bench": list(r.unlinked)}

    def text(self) -> str:
        from logpipe.report import ingest_summary

        return ingest_summary(self.result)


class Database:
    """A logpipe database (file or lake) by path."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)

    def __repr__(self) -> str:
        return f"logpipe.Database({self.path!r})"

    def sql(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """A read-only query over the documented tables and views, as a DataFrame."""
        from logpipe.db import open_db

        with open_db(self.path, read_only=True) as store:
            return store.con.sql(query, params=list(params or [])).pl()

    def runs(self) -> pl.DataFrame:
        """The ``runs`` table, oldest first."""
        return self.sql("SELECT * FROM runs ORDER BY started_at NULLS LAST, name")

    def samples(self, run: str) -> pl.DataFrame:
        """The server samples (``server_samples``) of one run (name, id or id prefix)."""
        from logpipe.db import open_db
        from logpipe.query import resolve_run

        with open_db(self.path, read_only=True) as store:
            run_id = resolve_run(store, run)
            return store.con.sql("SELECT * FROM server_samples WHERE run_id = ? "
                                 "ORDER BY source_path, line_no", params=[run_id]).pl()

    def compare(self, *arms: str | Sequence[str], campaign: str | None = None,
                **options: Any) -> Comparisons:
        """``compare``: two or more arms (a run, or a list of launches of one arm), one
        speculative run against its nearest same-environment baseline, or an ``ab``
        campaign; ``options`` are :class:`logpipe.analysis.compare.Options` fields
        (``alpha``, ``threshold``, ``allow_env_diff``, ...)."""
        from logpipe.analysis.compare import (
            compare,
            compare_campaign,
            compare_with_baseline,
            overall_exit,
        )
        from logpipe.analysis.results import Options

        if "allow_env_diff" in options:
            options["allow_env_diff"] = frozenset(options["allow_env_diff"])
        opts = Options(**options)
        refs = [a if isinstance(a, str) else ",".join(a) for a in arms]
        if campaign is not None:
            if refs:
                raise ValueError("give runs or a campaign, not both")
            results = compare_campaign(self.path, campaign, opts)
        elif len(refs) > 1:
            results = compare(self.path, refs, opts)
        elif len(refs) == 1:
            results = [compare_with_baseline(self.path, refs[0], opts)]
        else:
            raise ValueError("compare needs runs or a campaign")
        return Comparisons(results, overall_exit(results))

    def check(self, suites: Iterable[str] | None = None,
              suite_files: Iterable[str | Path] | None = None) -> CheckResult:
        """``check``: the built-in suites (or those named) and your own suite files."""
        from logpipe.checks import load_suites, run_checks

        return CheckResult(run_checks(self.path, load_suites(
            list(suites or []), [Path(p) for p in suite_files or []])))

    def ingest(self, paths: Iterable[str | Path], **options: Any) -> IngestSummary:
        """``ingest``: files and folders into this database (a DuckDB file); ``options``
        are :func:`logpipe.ingest.ingest_paths` keywords (``env``, ``tags``, ...)."""
        from logpipe.ingest import ingest_paths

        return IngestSummary(ingest_paths(list(paths), self.path, **options))


def open(path: str | Path = "logpipe.duckdb") -> Database:  # noqa: A001 - logpipe.open
    """The database at ``path`` (a DuckDB file, created on the first ingest, or a lake)."""
    return Database(path)
