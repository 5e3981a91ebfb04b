"""The ``logpipe`` command: parse options, call one library function, render, exit.

Exit codes mean one thing each: 0 success / no regression, 1 regression or failed check,
2 error, 3 incomparable environments, 4 insufficient data.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

from logpipe._version import __version__
from logpipe.errors import InputError, LogpipeError

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
LakeOption = Annotated[
    Path | None,
    typer.Option("--lake", help="Read this Parquet lake (`logpipe export`, `ingest --lake`) "
                                "instead of --db."),
]
PROGRESS_MIN_BYTES = 64 * 1024 * 1024
_state = {"debug": False, "json": False}


def _fail(exc: LogpipeError) -> None:
    if _state["debug"]:
        raise exc
    if _state.get("json"):
        # a script asked for JSON: it gets the error as JSON on stdout (and the text below)
        import json as _json

        typer.echo(_json.dumps({"error": str(exc), "hint": exc.hint,
                                "exit": exc.exit_code}))
    err.print(f"Error: {exc}", markup=False, highlight=False, soft_wrap=True)
    if exc.hint:
        err.print(f"Hint: {exc.hint}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(exc.exit_code)


def _print_version(value: bool) -> None:
    if not value:
        return
    from logpipe import classify
    from logpipe.engines import engines
    from logpipe.sources import load

    parser = "; ".join(load(e.about)() for e in engines() if e.about) or "polars"
    typer.echo(f"logpipe {__version__} (parser: {parser}; judged counts: {classify.about()})")
    raise typer.Exit(0)


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Re-raise errors with a traceback.")]
    = False,
    version: Annotated[bool, typer.Option(
        "--version", help="Print the version and the active parser.", is_eager=True,
        callback=_print_version)] = False,
) -> None:
    _state["debug"] = debug


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    out = {}
    for item in values or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            _fail(LogpipeError(f"{option} expects KEY=VALUE, got {item!r}",
                               hint=f"e.g. {option} NCCL_ALGO=Ring"))
        out[key.strip()] = value
    return out


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (searched recursively).")],
    db: DbOption = DEFAULT_DB,
    env: Annotated[list[str] | None, typer.Option(
        "--env", help="KEY=VALUE environment fact for every run ingested (repeatable).")] = None,
    tag: Annotated[list[str] | None, typer.Option(
        "--tag", help="key=value tag for every run ingested (repeatable).")] = None,
    tiers: Annotated[Path | None, typer.Option(
        "--tiers", help="TOML file of tier rules tried before schemas/tiers.toml.")] = None,
    run: Annotated[str | None, typer.Option(
        "--run", help="Link the benchmark files of this ingest to this run.")] = None,
    keep_request_text: Annotated[bool, typer.Option(
        "--keep-request-text",
        help="Also store prompt and output text of request records (off: never stored).")]
    = False,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace the rows of files edited in place (otherwise kept).")]
    = False,
    tz: Annotated[str | None, typer.Option(
        "--tz", help="Zone of the SGLang stamps (UTC, +02:00, Europe/Berlin), over what the "
                     "manifest says.")] = None,
    lake: Annotated[Path | None, typer.Option(
        "--lake", help="Write a Parquet lake here instead of the database (fleet ingest: "
                       "one task per folder).")] = None,
    runner: Annotated[str | None, typer.Option(
        "--runner", help="With --lake: where the tasks run, local (this process) or ray.")]
    = None,
    engine_alias: Annotated[str | None, typer.Option(
        "--engine", hidden=True,
        help="Deprecated spelling of --runner (an engine is SGLang or vLLM).")] = None,
    address: Annotated[str | None, typer.Option(
        "--address", help="With --runner ray: the Ray cluster (auto: the one this host "
                          "belongs to); default a local Ray of --workers CPUs.")] = None,
    workers: Annotated[int, typer.Option(
        "--workers", help="CPUs of a local Ray (--runner ray without --address).")] = 2,
    timings: Annotated[bool, typer.Option(
        "--timings", help="Also say where the time went: reading and parsing, loading the "
                          "bulky rows, environments, copies and links, judged counts, "
                          "commits, the rest.")] = False,
) -> None:
    """Detect and parse every file under PATHS into the database, idempotently.

    Unchanged files are skipped and appended lines are added.  A truncated file
    (copytruncate, `> server.log`) keeps its rows and is read on from its new content; a
    rotated file's rows follow it.  Rows are deleted only with --replace.
    Environment manifests (<log>.env.json, env.json in the folder or a parent, and
    collect_env.txt reports) are attached to their runs.  Exit 0 when every file was
    ingested or skipped, 2 when any failed.
    """
    from logpipe.ingest import ingest_paths
    from logpipe.report import fleet_summary, ingest_summary

    env_pairs, tag_pairs = _pairs(env, "--env"), _pairs(tag, "--tag")
    if engine_alias is not None:
        if runner is not None and runner != engine_alias:
            _fail(InputError(f"--runner {runner} and --engine {engine_alias} disagree",
                             hint="--engine is the old spelling of --runner: give one"))
        err.print("logpipe: --engine is deprecated for ingest: use --runner "
                  f"{engine_alias} (an engine is the server: SGLang, vLLM)", style="yellow")
        runner = engine_alias
    if lake is not None:
        from logpipe.fleet import ingest_to_lake

        if run or replace or timings:
            _fail(LogpipeError("--run, --replace and --timings are not available with --lake",
                               hint="ingest into a database for them, then logpipe export"))
        try:
            fleet = ingest_to_lake(list(paths), lake, runner=runner or "local",
                                   address=address,
                                   workers=workers, env=env_pairs, tags=tag_pairs,
                                   tiers_file=tiers, keep_request_text=keep_request_text,
                                   tz=tz)
        except LogpipeError as exc:
            _fail(exc)
        typer.echo(fleet_summary(fleet), nl=False)
        if fleet.files_failed or fleet.tasks_failed:
            raise typer.Exit(2)
        return
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

    from logpipe.ingest import IngestInterrupted
    from logpipe.interrupts import catch_signals

    try:
        with catch_signals():
            result = ingest_paths(paths, db, env=env_pairs, tags=tag_pairs, tiers_file=tiers,
                                  bench_run=run, keep_request_text=keep_request_text,
                                  replace=replace, tz=tz, on_total=on_total,
                                  progress=lambda n: progress.advance(task, n))
    except IngestInterrupted as stop:
        progress.stop()
        typer.echo(ingest_summary(stop.result, timings), nl=False)
        _fail(stop)
    except LogpipeError as exc:
        _fail(exc)
    finally:
        progress.stop()
    typer.echo(ingest_summary(result, timings), nl=False)
    if result.failed or result.damaged:
        raise typer.Exit(2)
    if all(f.status == "skipped" for f in result.files):
        _fail(InputError(
            "nothing ingested: " + (f"none of the {len(result.files)} file(s) under "
                                    if result.files else "no file under ")
            + ", ".join(str(p) for p in paths) + " is a server log, benchmark, trace or "
            "manifest logpipe reads",
            hint="`logpipe doctor PATH` says what a file looks like to logpipe"))


env_app = typer.Typer(no_args_is_help=True, help="Capture, show and diff run environments.")
app.add_typer(env_app, name="env")


@env_app.command("capture", context_settings={"allow_extra_args": True,
                                              "ignore_unknown_options": True})
def env_capture(
    ctx: typer.Context,
    output: Annotated[Path | None, typer.Option("-o", "--output",
                                                help="Write the manifest here (else stdout).")]
    = None,
) -> None:
    """Record this host's environment as a manifest, right before launching the server.

    Put the launch command after `--` to record it and its arguments:
    `logpipe env capture -o env.json -- python -m sglang.launch_server --tp 8 ...`.
    Secret-looking values are redacted.
    """
    import json

    from logpipe.env import capture

    manifest = capture(list(ctx.args) or None)
    text = json.dumps(manifest, indent=2, default=str) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    output.write_text(text)
    gpu = manifest["gpu"]
    gpus = f"{len(gpu['devices'])} GPU(s)" if gpu.get("available") else "no GPU found"
    typer.echo(f"Wrote {output}: {len(manifest['env'])} variable(s), "
               f"{len(manifest['packages'])} package(s), {gpus}")


@env_app.command("show")
def env_show(
    run: Annotated[str, typer.Option("--run", help="Run name, id or id prefix.")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Show a run's environment: every key with its tier, value and source."""
    _check_format("env show", fmt)
    from logpipe.query import load_run_env

    try:
        name, env = load_run_env(db, run)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("env show", fmt, name, env), nl=False)


@env_app.command("diff")
def env_diff(
    run: Annotated[list[str], typer.Option("--run", help="Two runs: A then B.")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
) -> None:
    """Key-by-key environment differences, identity first.

    Exit 0 when both environments are known and their identity tiers match, 3 otherwise.
    """
    _check_format("env diff", fmt)
    from logpipe.query import diff_runs

    if len(run) != 2:
        _fail(LogpipeError(f"env diff needs exactly two --run values, got {len(run)}"))
    try:
        d = diff_runs(db, run[0], run[1])
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("env diff", fmt, d), nl=False)
    raise typer.Exit(0 if d.comparable else 3)


@app.command()
def compare(
    run: Annotated[list[str] | None, typer.Option(
        "--run", help="Reference first, then one or more candidates (name, id or prefix); "
                      "A1,A2,A3 is one arm of several launches.")] = None,
    campaign: Annotated[str | None, typer.Option(
        help="Judge an `ab` campaign (its plan's name): each candidate arm against the "
             "baseline arm, paired by round.")] = None,
    db: DbOption = DEFAULT_DB,
    threshold: Annotated[float, typer.Option(
        min=0.0, max=1.0,
        help="Practical threshold δ: changes smaller than this are no change.")] = 0.03,
    alpha: Annotated[float, typer.Option(
        min=1e-6, max=0.5,
        help="Significance level of the U test.")] = 0.05,
    allow_env_diff: Annotated[str | None, typer.Option(
        "--allow-env-diff", help="KEY[,KEY...] identity keys allowed to differ.")] = None,
    allow_unknown_env: Annotated[bool, typer.Option(
        help="Compare runs without a captured environment.")] = False,
    allow_profiled: Annotated[bool, typer.Option(
        help="Compare a profiled run with an unprofiled one.")] = False,
    primary: Annotated[str | None, typer.Option(
        "--primary", metavar="METRIC",
        help="The deciding metric, declared before the data: output_throughput, "
             "request_throughput, median_ttft_ms, p99_ttft_ms, median_tpot_ms, p99_tpot_ms, "
             "median_itl_ms, p99_itl_ms, median_e2e_latency_ms, p99_e2e_latency_ms (the "
             "client's benchmark) or decode_throughput (the server log).  Default: the "
             "client's output throughput when every launch has a benchmark of one "
             "workload, else the server log; a campaign's plan may declare it.")] = None,
    warmup_lines: Annotated[int, typer.Option(
        help="Also drop the first N steady decode lines of each run.")] = 0,
    warmup_seconds: Annotated[float, typer.Option(
        help="Also drop lines in the first S seconds after the server was ready.")] = 0.0,
    fmt: Annotated[str, typer.Option("--format", help="table, markdown or json.")] = "table",
    lake: LakeOption = None,
) -> None:
    """Compare runs: environment first, then a verdict on one value per launch.

    The launch is the unit: each arm's launches (--run A1,A2 --run B1,B2, or --campaign)
    pair by round and the verdict comes from the per-round ratios; one launch each is
    judged against the environment's measured launch noise, or labelled unreplicated.
    Two launches of one configuration are an A/A pair: launch noise, never a regression.
    With one --run, a speculative run is compared with its nearest same-environment
    baseline (which one and why is said; with none, the near misses).  Exit 0 no
    regression, 1 regression, 2 error, 3 incomparable environments (or a profiled run
    against an unprofiled one), 4 insufficient data.
    """
    _state["json"] = fmt == "json"
    from logpipe.analysis.client_metrics import parse_primary
    from logpipe.analysis.compare import compare as run_compare
    from logpipe.analysis.compare import compare_campaign, compare_with_baseline, overall_exit
    from logpipe.analysis.results import Options
    from logpipe.analysis.steady import Warmup

    if not run and not campaign:
        _fail(LogpipeError("compare needs --run values or --campaign",
                           hint="logpipe compare --run BASELINE --run CANDIDATE, --run "
                           "A1,A2 --run B1,B2, --campaign PLAN, or --run SPECULATIVE_RUN "
                           "alone to pair it with its nearest baseline"))
    if run and campaign:
        _fail(LogpipeError("give --run values or --campaign, not both"))
    _check_format("compare", fmt)
    allowed = frozenset(k.strip() for k in (allow_env_diff or "").split(",") if k.strip())
    try:
        options = Options(alpha=alpha, threshold=threshold, allow_env_diff=allowed,
                          allow_unknown_env=allow_unknown_env, allow_profiled=allow_profiled,
                          warmup=Warmup(warmup_lines, warmup_seconds),
                          primary=parse_primary(primary))
    except LogpipeError as exc:
        _fail(exc)
    source = str(lake if lake is not None else db)
    try:
        if campaign:
            results = compare_campaign(source, campaign, options)
        elif len(run or []) > 1:
            results = run_compare(source, run or [], options)
        else:
            results = [compare_with_baseline(source, (run or [""])[0], options)]
    except LogpipeError as exc:
        _fail(exc)
    code = overall_exit(results)
    typer.echo(render("compare", fmt, results, code), nl=False)
    raise typer.Exit(code)


@app.command()
def explain(
    run: Annotated[list[str], typer.Option(
        "--run", help="The speculative run; optionally its baseline as a second --run "
                      "(else the nearest same-environment one).  A, B, C: one arm of "
                      "several launches.")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    lake: LakeOption = None,
    allow_env_diff: Annotated[str | None, typer.Option(
        "--allow-env-diff", help="KEY[,KEY...] identity keys allowed to differ.")] = None,
    allow_unknown_env: Annotated[bool, typer.Option(
        help="Explain runs without a captured environment.")] = False,
) -> None:
    """Where the time went: baseline step time, the speculative cycle by phase (phase
    dumps, else profiler steps), tokens per cycle, the speedup they imply against the
    observed one, the break-even accept length, and the verify cost fitted over a sweep
    of draft tokens.  Every figure names its rows."""
    _check_format("explain", fmt)
    from logpipe.analysis.explain import explain_runs
    from logpipe.analysis.results import Options

    options = Options(allow_env_diff=frozenset(
        k.strip() for k in (allow_env_diff or "").split(",") if k.strip()),
        allow_unknown_env=allow_unknown_env)
    try:
        ex = explain_runs(str(lake if lake is not None else db), run, options)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("explain", fmt, ex), nl=False)
    raise typer.Exit(0 if ex.cycle_ms is not None else 1)


@app.command()
def check(
    suite: Annotated[list[str] | None, typer.Option(
        "--suite", help="Run only these suites (repeatable): data_quality, pairing, "
                        "regressions, or a name from --suite-file.")] = None,
    suite_file: Annotated[list[Path] | None, typer.Option(
        "--suite-file", help="Your own suite (TOML, same format as schemas/checks/).")] = None,
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="text, markdown or json.")] = "text",
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
    rescan: Annotated[bool, typer.Option(
        "--rescan", help="Read every batch line instead of the per-run ranges ingest keeps "
                         "(after changing values in the tables by hand).")] = False,
    update_cache: Annotated[bool, typer.Option(
        "--update-cache", help="Keep the statistics and pair verdicts computed (opens the "
                               "database for writing; migrates an older one).")] = False,
    lake: LakeOption = None,
) -> None:
    """Validate the database with great-expectations suites.  Read-only unless
    --update-cache.

    Data quality, pairing (every speculative run has a same-environment baseline) and
    regressions.  One line per expectation with its failing rows.  Exit 0 all pass
    (warnings allowed), 1 a check failed, 2 error.
    """
    _state["json"] = fmt == "json"
    from logpipe.checks import load_suites, run_checks
    from logpipe.report import check_junit

    _check_format("check", fmt)
    try:
        report = run_checks(lake if lake is not None else db, load_suites(suite, suite_file),
                            rescan=rescan, update_cache=update_cache and lake is None)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("check", fmt, report), nl=False)
    if junit is not None:
        junit.write_text(check_junit(report))
    raise typer.Exit(report.exit_code)


@app.command()
def sweep(
    by: Annotated[str, typer.Option("--by", help="Key to sweep: a server argument such as "
                                                 "speculative_num_steps, or a variable.")],
    where: Annotated[str | None, typer.Option(
        help="SQL condition on the runs table, e.g. \"model LIKE '%235B%'\".")] = None,
    db: DbOption = DEFAULT_DB,
    threshold: Annotated[float, typer.Option(help="Practical threshold δ for ties.")] = 0.03,
    fmt: Annotated[str, typer.Option("--format", help="table, markdown or json.")] = "table",
) -> None:
    """Find the best value of KEY among runs of one environment.

    Per value: steady decode throughput with its CI, accept length, break-even accept
    length against the same-environment baseline; then the best value, or the tied ones.
    """
    _state["json"] = fmt == "json"
    from logpipe.analysis.sweep import sweep as run_sweep

    _check_format("sweep", fmt)
    try:
        result = run_sweep(str(db), by, where=where, threshold=threshold)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("sweep", fmt, result), nl=False)


@app.command()
def report(
    run: Annotated[list[str] | None, typer.Option(
        "--run", help="Runs to show (first is the reference); default: up to 8.")] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write.")]
    = Path("report.html"),
    db: DbOption = DEFAULT_DB,
    checks: Annotated[bool, typer.Option(help="Include the check suites.")] = True,
    plan: Annotated[str | None, typer.Option(
        help="Only the runs of this `ab` campaign (its plan's name).")] = None,
) -> None:
    """Write a self-contained HTML report whose plots work offline.

    It leads with the experiment: each `ab` campaign's candidates against its baseline
    (rounds side by side) and each speculative run against its same-environment baseline
    (verdict, ratio with CI, speedup, break-even accept length); then the sweep curve, the
    environment groups, throughput over time with warm-up, idle and profiled intervals
    shaded, steady-state distributions, request latency, checks and phase shares.
    """
    from logpipe.report.html import build_report

    try:
        result = build_report(db, output, run, with_checks=checks, plan=plan)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(f"Wrote {result.path}: {len(result.runs)} run(s), {result.figures} plot(s)")


@app.command()
def runs(
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or jsonl.")] = "table",
) -> None:
    """List runs: name, id, start, model, layout, speculation, format era, batch rows."""
    _state["json"] = fmt == "json"
    from logpipe.query import list_runs

    _check_format("rows", fmt)
    try:
        columns, rows = list_runs(db)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("rows", fmt, columns, rows), nl=False)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL to run (read-only).")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or jsonl.")] = "table",
    lake: LakeOption = None,
) -> None:
    """Run read-only SQL on the database or lake (tables and views: schemas/README.md)."""
    _state["json"] = fmt == "json"
    from logpipe.query import run_sql

    _check_format("rows", fmt)
    try:
        columns, rows = run_sql(lake if lake is not None else db, query)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("rows", fmt, columns, rows), nl=False)


@app.command()
def export(
    lake: Annotated[Path, typer.Argument(help="Folder of the lake (created if missing).")],
    db: DbOption = DEFAULT_DB,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Make the lake this database's alone (drop what other databases "
                          "exported into it).")] = False,
) -> None:
    """Export the database as a hive-partitioned Parquet lake that Spark, Trino, ClickHouse
    and DuckDB read (layout: schemas/README.md).  Incremental: only the files whose rows
    changed since the last export are written; an interrupted export leaves the previous
    one readable.  Several databases export into one lake: each keeps what the others
    wrote (a source file both hold takes the latest export's rows)."""
    from logpipe.lake import export as run_export
    from logpipe.report import export_summary

    try:
        result = run_export(db, lake, replace=replace)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(export_summary(result), nl=False)


def _echo_to_stderr(quiet: bool) -> Callable[[str], None]:
    def echo(line: str) -> None:
        if not quiet or line.startswith("logpipe: "):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
    return echo


@app.command()
def doctor(
    files: Annotated[list[Path], typer.Argument(
        help="Files to examine (a folder: every file ingest would read in it).")],
) -> None:
    """Say what a file gives and what it does not: lines of each kind, the wrappers peeled
    off them, rejected lines with their reasons, and lines that look like records (a batch
    head, a throughput) but were not read.  Needs no database.  Exit 1 when any line was
    rejected or left unread, or the file is damaged (a truncated or corrupt archive), 0
    otherwise."""
    from logpipe.doctor import diagnose
    from logpipe.ingest.walk import walk
    from logpipe.report import doctor_text

    lost = False
    expanded: list[Path] = []
    for path in files:
        expanded += [f for f, _ in walk([path])] if path.is_dir() else [path]
    for path in expanded:
        try:
            d = diagnose(path)
        except LogpipeError as exc:
            _fail(exc)
        typer.echo(doctor_text(d), nl=False)
        lost = lost or bool(d.unread_total or d.rejects_total or d.damaged)
    raise typer.Exit(1 if lost else 0)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def launch(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Option(help="Run name (default: the --out folder's "
                                                  "name, or run-DATE-TIME).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Folder for the run's files (default: runs/NAME).")] = None,
    ready_timeout: Annotated[float, typer.Option(
        help="Seconds to wait for the server to be ready.")] = 600.0,
    bench: Annotated[str | None, typer.Option(
        help="Bench command run once the server is ready ({out}, {port}, {name}, {host} "
             "are filled in); without it the server stays up until Ctrl-C.")] = None,
    bench_timeout: Annotated[float | None, typer.Option(
        help="Seconds after which the bench is stopped (the run is then failed).")] = None,
    db: DbOption = DEFAULT_DB,
    quiet: Annotated[bool, typer.Option(
        help="Show only logpipe's progress lines, not the server's output.")] = False,
    record_only: Annotated[bool, typer.Option(
        "--record-only", help="Write the run folder, ingest nothing (needs only the "
                              "standard library and typer: a bare GPU machine).")] = False,
    profile: Annotated[int | None, typer.Option(
        "--profile", metavar="STEPS", min=1,
        help="Profile STEPS busy scheduler steps during the bench (/start_profile with "
             "num_steps); the trace goes to the run folder's profile/, and only that "
             "window is marked profiled.")] = None,
    phases: Annotated[str | None, typer.Option(
        "--phases", metavar="host|sync",
        help="Time the server's speculative phases (a plain server's decode steps) with "
             "logpipe's phase hook, logged as phase_timings records; sync synchronises the "
             "device at each phase boundary (exact, slower: the run is profiled).")] = None,
) -> None:
    """Run one experiment: capture the environment, start the server (command after `--`),
    wait until it is ready, run the bench, stop it, ingest the run (with --record-only,
    leave the folder to be ingested elsewhere).

    The run folder holds env.json (written first), server.log, server_info.json, the
    bench's console output and whatever the bench writes under {out}.  Exit 0 when the
    server came up and the bench passed, 2 otherwise (the run is ingested either way).
    """
    from logpipe.experiment.launch import LaunchOptions
    from logpipe.experiment.launch import launch as run_launch
    from logpipe.report import launch_text

    try:
        result = run_launch(list(ctx.args), LaunchOptions(
            name=name, out=out, ready_timeout=ready_timeout, bench=bench,
            bench_timeout=bench_timeout, db=Path(db), echo=_echo_to_stderr(quiet),
            record_only=record_only, profile_steps=profile, phases=phases))
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(launch_text(result), nl=False)
    raise typer.Exit(result.exit_code)


@app.command()
def ab(
    plan_file: Annotated[Path | None, typer.Argument(
        help="A plan (TOML, schemas/plan.md); or give the arms with the options.")] = None,
    baseline: Annotated[str | None, typer.Option(help="Baseline server command.")] = None,
    candidate: Annotated[list[str] | None, typer.Option(
        help="Candidate server command (repeatable).")] = None,
    bench: Annotated[str | None, typer.Option(
        help="Bench command ({out}, {port}, {name}, {host} filled in).")] = None,
    rounds: Annotated[int, typer.Option(help="Launches of each arm.")] = 2,
    order: Annotated[str, typer.Option(help="abba or random.")] = "abba",
    seed: Annotated[int, typer.Option(help="Seed of the random order.")] = 0,
    name: Annotated[str | None, typer.Option(help="Plan name (runs are "
                                                  "PLAN-ARM-rK).")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder of the runs "
                                                 "(default: runs/PLAN).")] = None,
    ready_timeout: Annotated[float, typer.Option(
        help="Seconds to wait for each server to be ready.")] = 600.0,
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    quiet: Annotated[bool, typer.Option(
        help="Show only logpipe's progress lines, not the servers' output.")] = False,
    phases: Annotated[str | None, typer.Option(
        "--phases", metavar="host|sync",
        help="Time every launch's speculative phases (as launch --phases; plan key "
             "phases).")] = None,
    fail_fast: Annotated[bool | None, typer.Option(
        "--fail-fast/--keep-going",
        help="Stop the campaign when an arm's first launch fails (default), or run the "
             "other launches anyway.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the schedule and the identity check; launch nothing.")]
    = False,
    allow_env_diff: Annotated[str | None, typer.Option(
        "--allow-env-diff", help="KEY[,KEY...] identity keys the arms may differ in "
                                 "(added to the plan's allow_env_diff).")] = None,
    primary: Annotated[str | None, typer.Option(
        "--primary", metavar="METRIC",
        help="The deciding metric (as compare --primary; plan key primary).")] = None,
    warmup_launch: Annotated[bool | None, typer.Option(
        "--warmup-launch/--no-warmup-launch",
        help="An unjudged launch of the baseline before round 1 (plan key warmup_launch; "
             "default on when the plan profiles or an engine compiles kernels at first use "
             "on a GPU).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue a campaign that was stopped part-way: its complete "
                         "launches are kept, a partial one is moved aside and run again.")]
    = False,
    record_only: Annotated[bool, typer.Option(
        "--record-only", help="Launch and record every run folder; ingest and judge "
                              "nothing (later, elsewhere: `logpipe ingest DIR` and "
                              "`logpipe compare --campaign PLAN`).")] = False,
    levels: Annotated[str | None, typer.Option(
        "--levels", metavar="L1,L2,...",
        help="Load levels: every launch runs the bench once per level with "
             "--max-concurrency LEVEL (or --level-by request_rate); verdicts per level and "
             "the crossover (plan keys levels, level_by).")] = None,
    level_by: Annotated[str | None, typer.Option(
        "--level-by", help="max_concurrency (default) or request_rate.")] = None,
) -> None:
    """A/B experiment in one session: baseline and candidates launched in turn (ABBA or
    seeded random order), each through `launch`, then judged launch by launch (the rounds
    of the arms paired).  Refuses to start when the arms differ in an identity key that is
    not the treatment.  Exit codes follow `compare` (0, 1 regression, 2 error, 3
    incomparable, 4 insufficient data).
    """
    _state["json"] = fmt == "json"
    from logpipe.analysis.client_metrics import parse_primary
    from logpipe.experiment.plan import (
        check_plan,
        load_plan,
        parse_levels,
        phases_key,
        plan_from_flags,
        schedule_text,
    )
    from logpipe.experiment.run import run_plan

    _check_format("ab", fmt)
    try:
        if plan_file is not None:
            plan = load_plan(plan_file, check=False)
            if out is not None:
                plan.out = out
        else:
            if not (baseline and candidate and bench):
                raise LogpipeError("ab needs a PLAN.toml, or --baseline, --candidate and "
                                   "--bench", hint="logpipe ab --baseline CMD --candidate CMD "
                                   "--bench CMD")
            plan = plan_from_flags(baseline=baseline, candidates=candidate, bench=bench,
                                   rounds=rounds, order=order, seed=seed, name=name, out=out,
                                   ready_timeout=ready_timeout, check=False)
        if allow_env_diff:
            plan.allow_env_diff = plan.allow_env_diff | {
                k.strip() for k in allow_env_diff.split(",") if k.strip()}
        if fail_fast is not None:
            plan.fail_fast = fail_fast
        if phases is not None:
            plan.phases = phases_key(phases)
        if primary is not None:
            plan.primary = parse_primary(primary)
        if warmup_launch is not None:
            plan.warmup_launch = warmup_launch
        if levels is not None:
            plan.levels = parse_levels(levels)
        if level_by is not None:
            plan.level_by = level_by.replace("-", "_")
        check_plan(plan)
        if dry_run:
            typer.echo(schedule_text(plan), nl=False)
            raise typer.Exit(0)
        result = run_plan(plan, Path(db), echo=_echo_to_stderr(quiet or fmt == "json"),
                          record_only=record_only, resume=resume)
    except LogpipeError as exc:
        _fail(exc)
    typer.echo(render("ab", fmt, result), nl=False)
    raise typer.Exit(result.exit_code)


def _check_format(kind: str, fmt: str) -> None:
    """``--format`` of a command printing results of ``kind`` (:mod:`logpipe.report.formats`),
    checked before the command does any work."""
    _state["json"] = fmt == "json"
    from logpipe.report.formats import check

    try:
        check(kind, fmt)
    except LogpipeError as exc:
        _fail(exc)


def render(kind: str, fmt: str, *result: Any) -> str:
    from logpipe.report.formats import render as render_format

    return render_format(kind, fmt, *result)


def main() -> None:
    """The ``logpipe`` command (the process's entry point: it ends with it)."""
    try:
        app()
    except LogpipeError as exc:  # raised outside a command's own handler
        err.print(f"Error: {exc}", markup=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug: exit 2 (error), never 1 (which means regression)
        if _state["debug"]:
            raise
        err.print(f"Error: internal error: {type(exc).__name__}: {exc}", markup=False,
                  soft_wrap=True)
        err.print("Hint: rerun with --debug for the traceback, and please report it",
                  markup=False, soft_wrap=True)
        sys.exit(2)
    finally:
        # the process ends next: what is alive now is left to the operating system, not
        # traversed by the collector's passes at the interpreter's exit (the objects of
        # polars, DuckDB, typer and pydantic: an ingest's exit 0.12-0.13 s -> 0.04-0.05 s).
        # Every store, pool and temporary directory is closed by now (by its `with`)
        gc.freeze()


if __name__ == "__main__":
    main()
