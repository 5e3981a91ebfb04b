"""The ``logpipe`` command: parse options, call one library function, render, exit.

Exit codes mean one thing each: 0 success / no regression, 1 regression or failed check,
2 error, 3 incomparable environments, 4 insufficient data.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

from logpipe import __version__
from logpipe.errors import LogpipeError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="SGLang logs, benchmarks and profiles as DuckDB tables tagged with their environment.",
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)

DbOption = Annotated[
    Path,
    typer.Option("--db", envvar="LOGPIPE_DB", help="DuckDB file (env LOGPIPE_DB).",
                 show_default=True),
]
DEFAULT_DB = Path("logpipe.duckdb")
PROGRESS_MIN_BYTES = 64 * 1024 * 1024
_state = {"debug": False}


def _fail(exc: LogpipeError) -> None:
    if _state["debug"]:
        raise exc
    err.print(f"Error: {exc}", markup=False, highlight=False, soft_wrap=True)
    if exc.hint:
        err.print(f"Hint: {exc.hint}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(exc.exit_code)


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Re-raise errors with a traceback.")]
    = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    _state["debug"] = debug
    if version:
        typer.echo(f"logpipe {__version__}")
        raise typer.Exit(0)


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (searched recursively).")],
    db: DbOption = DEFAULT_DB,
) -> None:
    """Detect and parse every file under PATHS into the database, idempotently.

    Unchanged files are skipped, appended lines are added, rewritten files are replaced.
    Exit 0 when every file was ingested or skipped, 2 when any failed.
    """
    from logpipe.ingest import ingest_paths
    from logpipe.report import ingest_summary

    show = err.is_terminal
    progress = Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
        TimeRemainingColumn(), console=err, transient=True, disable=not show,
    )
    task = progress.add_task("ingest", total=None)

    def on_total(total: int) -> None:
        progress.update(task, total=total)
        if show and total >= PROGRESS_MIN_BYTES:
            progress.start()

    try:
        result = ingest_paths(paths, db, on_total=on_total,
                              progress=lambda n: progress.advance(task, n))
    except LogpipeError as exc:
        _fail(exc)
    finally:
        progress.stop()
    typer.echo(ingest_summary(result), nl=False)
    if result.failed:
        raise typer.Exit(2)


@app.command()
def runs(
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or jsonl.")] = "table",
) -> None:
    """List runs: name, id, start, model, layout, speculation, format era, batch rows."""
    from logpipe.query import list_runs
    from logpipe.report import rows_text

    _check_format(fmt)
    try:
        columns, rows = list_runs(db)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(rows_text(columns, rows, fmt), nl=False)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL to run (read-only).")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or jsonl.")] = "table",
) -> None:
    """Run read-only SQL on the database (tables and views: schemas/README.md)."""
    from logpipe.query import run_sql
    from logpipe.report import rows_text

    _check_format(fmt)
    try:
        columns, rows = run_sql(db, query)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(rows_text(columns, rows, fmt), nl=False)


def _check_format(fmt: str) -> None:
    from logpipe.report import FORMATS

    if fmt not in FORMATS:
        _fail(LogpipeError(f"unknown format {fmt!r}", hint="use one of: " + ", ".join(FORMATS)))


def main() -> None:
    try:
        app()
    except LogpipeError as exc:  # raised outside a command's own handler
        err.print(f"Error: {exc}", markup=False, soft_wrap=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
