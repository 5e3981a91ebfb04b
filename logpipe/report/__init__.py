"""Formatting results for humans and machines: the only place that does.

Library functions return plain result objects; these functions turn them into text
(rich tables, CSV, JSON, JSON lines).  Nothing here computes a number.  Rooms:
:mod:`.tables` (rows as text), :mod:`.comparisons` (a comparison), :mod:`.formats` (the
format registry), :mod:`.html` (``logpipe report``); the rest of the results here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from logpipe.report.comparisons import (
    comparison_dict,
    comparison_markdown,
    comparison_text,
    comparisons_json,
)
from logpipe.report.tables import FORMATS, num_text, rows_text, value_text
from logpipe.timings import PHASES

__all__ = [
    "FORMATS",
    "check_json",
    "check_junit",
    "check_markdown",
    "check_text",
    "comparison_dict",
    "comparison_markdown",
    "comparison_text",
    "comparisons_json",
    "doctor_text",
    "env_diff",
    "env_show",
    "export_summary",
    "fleet_summary",
    "ingest_summary",
    "launch_text",
    "num_text",
    "plan_json",
    "plan_text",
    "rows_text",
    "sweep_text",
    "value_text",
]

if TYPE_CHECKING:  # importing ingest would pull polars into every command's start-up
    from logpipe.fleet import FleetResult
    from logpipe.ingest import IngestResult
    from logpipe.lake import ExportResult


def _display(path: str) -> str:
    """``path`` relative to the current folder when it lies inside it."""
    from pathlib import Path

    try:
        return str(Path(path).relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def export_summary(result: ExportResult) -> str:
    """What an export wrote."""
    total = sum(result.rows.values())
    text = (f"Exported to {result.lake}: {result.units_written} part(s) written "
            f"({result.files_written} file(s)), {result.units_kept} unchanged, "
            f"{result.units_dropped} dropped (no longer in this database); {total} rows in "
            f"{sum(1 for n in result.rows.values() if n)} tables\n")
    if result.units_others:
        text += (f"  kept {result.units_others} part(s) other exports wrote: "
                 + ", ".join(sorted(result.others)[:3])
                 + (" ..." if len(result.others) > 3 else "")
                 + " (`export --replace` makes the lake this database's alone)\n")
    return text


def fleet_summary(result: FleetResult) -> str:
    """What a fleet ingest into a lake did."""
    lines = [f"Ingested into the lake {result.lake} with {result.runner}"
             + (f" ({result.workers} workers)" if result.runner == "ray" else "")
             + f": {result.groups} folder(s) read, {result.groups_skipped} unchanged",
             f"  files: {result.files}, {result.bytes_read / 1e6:.1f} MB; parts: "
             f"{result.units_written} written, {result.units_kept} unchanged",
             f"  time: {result.seconds:.2f} s"]
    if result.rows:
        lines.insert(2, "  lake rows: " + ", ".join(
            f"{result.rows.get(t, 0)} {t}" for t in ("runs", "batches", "events")))
    for what, items in (("duplicates (not read)", result.duplicates),
                        ("failed files", result.files_failed),
                        ("failed tasks (nothing of theirs was committed)",
                         result.tasks_failed)):
        if items:
            lines.append(f"  {what}: " + "; ".join(items[:5])
                         + (" ..." if len(items) > 5 else ""))
    return "\n".join(lines) + "\n"


def timings_line(spent: dict[str, float], total: float) -> str:
    """``phases: read and parse 1.69 s, load 0.60 s, ..., other 0.10 s`` (every phase of
    :data:`logpipe.timings.PHASES`, in order; other: the rest of ``total``)."""
    parts = [(name, spent.get(name, 0.0)) for name in PHASES]
    parts.append(("other", max(0.0, total - sum(s for _, s in parts))))
    return "phases: " + ", ".join(f"{name} {s:.2f} s" for name, s in parts)


def ingest_summary(result: IngestResult, timings: bool = False) -> str:
    """A few lines saying what an ingest did; ``timings``: and where its time went."""
    statuses = ["new", "appended", "truncated", "rewritten", "changed", "moved", "unchanged",
                "duplicate", "skipped", "failed"]
    seen = ", ".join(f"{result.count(s)} {s}" for s in statuses if result.count(s))
    lines = [
        f"Ingested into {result.db}: {len(result.files)} file(s) ({seen or 'none'})",
        f"  runs: {result.runs_created} new",
        "  rows: " + ", ".join(
            f"{result.rows(t)} {t}" for t in ("batches", "events", "http_requests")
        ) + "".join(f", {result.rows(t)} {t}" for t in ("vllm_stats", "vllm_spec_metrics")
                    if result.rows(t)),
        f"  rejects: {result.rows('rejects')} line(s)"
        + ("  (see the rejects table)" if result.rows("rejects") else ""),
        f"  noise: {sum(f.noise for f in result.files)} line(s) counted in sources",
        f"  time: {result.seconds:.2f} s",
    ]
    if timings:
        lines.append("  " + timings_line(result.timings, result.seconds))
    if result.rows("bench_results"):
        dup = len(result.duplicates)
        lines.insert(3, f"  benchmark records: {result.rows('bench_results')}" + (
            f" ({dup} console summar{'y' if dup == 1 else 'ies'} of a benchmark whose "
            "JSONL record is here too: one result each, the JSONL kept)" if dup else ""))
    if result.rows("trace_kernels") or result.rows("trace_ops"):
        lines.insert(3, "  profiler traces: " + ", ".join(
            f"{result.rows(t)} {t}" for t in ("trace_kernels", "trace_annotations",
                                              "trace_ops")))
    unread = sorted((f for f in result.files if f.unread), key=lambda f: -f.unread)
    if unread:
        lines.append(f"  record-like lines not read: {sum(f.unread for f in unread)} in "
                     + ", ".join(f"{_display(f.path)} ({f.unread})" for f in unread[:3])
                     + (f" and {len(unread) - 3} more file(s)" if len(unread) > 3 else "")
                     + " (see `logpipe doctor FILE`)")
    for f in result.files:
        if f.status != "failed" and f.detail and f.kind == "torch_trace":
            lines.append(f"  note: {_display(f.path)}: {f.detail}")
    for f in result.files:
        if f.status in ("failed", "duplicate", "changed"):
            lines.append(f"  {f.status}: {_display(f.path)}: {f.detail}")
    skipped = [f for f in result.files if f.status == "skipped" and not f.damaged]
    if skipped:
        reasons: dict[str, list[str]] = {}
        for f in skipped:
            reasons.setdefault(f.detail or "not read", []).append(_display(f.path))
        for why, names in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  skipped ({why}): " + ", ".join(names[:5])
                         + (f" and {len(names) - 5} more" if len(names) > 5 else ""))
    for f in result.damaged:
        lines.append(f"  damaged: {_display(f.path)}: {f.damaged}"
                     + (f" (the {f.lines} line(s) before the damage were read)" if f.lines
                        else " (nothing could be read)"))
    if getattr(result, "interrupted", False):
        lines.append(f"  interrupted: {len(result.files)} file(s) committed; not committed: "
                     + (", ".join(_display(p) for p in result.pending[:3])
                        + (" ..." if len(result.pending) > 3 else "")
                        if result.pending else "the linking of records to runs"))
    for c in getattr(result, "copies", []):
        lines.append(f"  copy, no run: {_display(c.path)}: its {c.lines} record line(s) all "
                     f"repeat lines of {_display(c.of)} (counted as copies in sources)")
    if result.unlinked:
        lines.append(f"  unlinked benchmark records ({len(result.unlinked)}): "
                     + ", ".join(_display(u) for u in result.unlinked[:5])
                     + (" ..." if len(result.unlinked) > 5 else "")
                     + " (link them with `logpipe ingest FILE --run NAME`)")
    return "\n".join(lines) + "\n"


def env_show(name: str, env: Any, fmt: str) -> str:
    """A run's environment, identity first."""
    from logpipe.env import TIERS

    order = {t: i for i, t in enumerate(TIERS)}
    items = sorted(env.entries.items(), key=lambda kv: (order[kv[1].tier], kv[0]))
    if fmt == "json":
        return json.dumps({"run": name, "complete": env.complete,
                           "fingerprint": env.fingerprint(),
                           "env": {k: e.as_json() for k, e in items}}, indent=2,
                          default=str) + "\n"
    head = (f"Environment of {name}: fingerprint {env.fingerprint()}"
            + ("" if env.complete else " (incomplete: no captured manifest)") + "\n")
    rows = [(e.tier, k, value_text(e.value), e.source, e.conflict or "") for k, e in items]
    return head + rows_text(["tier", "key", "value", "source", "conflict"], rows, "table")


def env_diff(d: Any, fmt: str) -> str:
    """An environment diff: identity differences first, each value with its source."""
    if fmt == "json":
        return json.dumps({
            "run_a": d.run_a, "run_b": d.run_b, "complete_a": d.complete_a,
            "complete_b": d.complete_b, "comparable": d.comparable,
            "differences": [{"key": i.key, "tier": i.tier, "a": i.a, "b": i.b,
                             "a_source": i.a_source, "b_source": i.b_source}
                            for i in d.items],
            "known_match": d.known_match,
            "unknown": d.unknown,
            "missing": d.missing,
        }, indent=2, default=str) + "\n"
    lines = []
    for run, complete in ((d.run_a, d.complete_a), (d.run_b, d.complete_b)):
        if not complete:
            lines.append(f"Environment of {run} is unknown (no captured manifest): "
                         "comparability cannot be established.  Unknown: "
                         + ", ".join(d.unknown.get(run, [])) + ".")
    ident = d.identity
    if ident:
        lines.append(f"Identity differs in {len(ident)} key(s): {d.run_a} and {d.run_b} "
                     "are not comparable.")
    elif d.complete_a and d.complete_b and d.missing:
        lines.append(f"Identity tiers match as far as known: {d.run_a} and {d.run_b} are "
                     f"comparable as far as known ({d.missing_text()}).")
    elif d.complete_a and d.complete_b:
        lines.append(f"Identity tiers match: {d.run_a} and {d.run_b} are comparable.")
    if d.known_match and not (d.complete_a and d.complete_b):
        lines.append(f"Known to match: {len(d.known_match)} identity key(s)"
                     + (": " + ", ".join(d.known_match) if len(d.known_match) <= 24 else
                        " (`logpipe env diff` lists them)"))
    for tier in ("identity", "capacity", "treatment", "annotation"):
        items = [i for i in d.items if i.tier == tier]
        if not items:
            continue
        lines.append(f"{tier}:")
        for i in items:
            src = f"  [{i.a_source or '-'} → {i.b_source or '-'}]"
            lines.append(f"  {i.key}: {value_text(i.a)} → {value_text(i.b)}{src}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- doctor

def doctor_text(d: Any) -> str:
    """What ``logpipe doctor`` found in a file."""
    damage = (f"  damaged: {d.damaged} (ingest reads the lines before the damage and "
              "reports the file)\n" if getattr(d, "damaged", None) else "")
    if d.kind is None:
        return (f"{d.path}: not a recognised format (logpipe ingest skips it)\n" + damage)
    if not d.counts:
        return (f"{d.path}: {d.kind} (a record file: `logpipe ingest` reads it whole)\n"
                + damage)
    lines = [f"{d.path}: {getattr(d, 'display', None) or 'SGLang'} server log, "
             f"{d.lines} line(s)"]
    if damage:
        lines.append(damage.rstrip("\n"))
    for name, n in d.counts.items():
        lines.append(f"  {name}: {n}")
    if d.events:
        lines.append("  events by kind: " + ", ".join(
            f"{k} {n}" for k, n in sorted(d.events.items(), key=lambda kv: -kv[1])))
    lines.append("  wrappers peeled: " + (", ".join(f"{k} ({n} lines)" for k, n in
                                                  d.wrappers.items()) or "none"))
    lines.append(f"  rejected lines: {d.rejects_total}")
    lines += [f"    line {n}: {reason}: {raw}" for n, reason, raw in d.rejects]
    lines.append(f"  lines that look like records but were not read: {d.unread_total}")
    lines += [f"    line {n}: {raw}" for n, raw in d.unread]
    if d.unread_total > len(d.unread) or d.rejects_total > len(d.rejects):
        lines.append("  (the first lines of each kind are listed; the counts are complete)")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------- launch and ab

def launch_text(r: Any) -> str:
    """What ``logpipe launch`` did: the run, its outcome, its steady decode throughput."""
    at = (f" @ {r.steady_stratum} running" if getattr(r, "steady_stratum", None) is not None
          else "")
    tps = (f"steady decode throughput {r.steady_tps:.1f} tok/s{at}"
           if r.steady_tps is not None
           else "no steady decode throughput (too few decode lines)")
    lines = [f"Run {r.name}: {r.status}" + (f" ({r.message})" if r.message else ""),
             f"  folder: {r.out}", f"  {tps}"]
    if r.bench_exit is not None:
        lines.append(f"  bench exit code: {r.bench_exit}")
    if r.server_info is not None:
        version = r.server_info.get("version")
        lines.append("  server_info.json written" + (f" (version {version})" if version else ""))
    if r.tail:
        lines.append(f"  last {len(r.tail)} line(s) of the server log:")
        lines += [f"    {t}" for t in r.tail]
    return "\n".join(lines) + "\n"


def plan_text(result: Any) -> str:
    """An ``ab`` campaign: the launches, each arm's rounds side by side, the verdicts."""
    plan = result.plan
    lines = [f"Plan {plan.name}: {len(result.launches)} launch(es), order {plan.order}"]
    rounds = sorted({r for arm in result.rounds.values() for r in arm})
    rows = [(arm, *[(num_text(v, 1) if (v := result.rounds[arm].get(r)) is not None else "–")
                    for r in rounds]) for arm in result.rounds]
    at = (f" @ {result.rounds_stratum} running" if getattr(result, "rounds_stratum", None)
          is not None else "")
    lines.append(rows_text([f"arm (steady decode tok/s{at})", *[f"round {r}" for r in rounds]],
                           rows, "table").rstrip("\n").rsplit("\n", 1)[0])
    for _, _, res in result.launches:
        lines.append(f"  {res.name}: {res.status}"
                     + (f" (bench exit {res.bench_exit})" if res.bench_exit not in (None, 0)
                        else ""))
    for c in result.comparisons:
        lines.append("")
        lines.append(comparison_text(c).rstrip("\n"))
    if result.sweep is not None:
        lines.append("")
        lines.append(sweep_text(result.sweep).rstrip("\n"))
    if result.checks:
        lines.append("")
        for name, status, rows in result.checks:
            lines.append(f"{status:<5} {name}")
            lines += [f"      - {_row_text(row)}" for row in rows[:5]]
    for note in result.notes:
        lines.append(f"Note: {note}")
    lines.append(f"Exit {result.exit_code}")
    return "\n".join(lines) + "\n"


def plan_json(result: Any) -> str:
    return json.dumps({
        "plan": result.plan.name, "exit_code": result.exit_code,
        "runs": [{"name": res.name, "arm": arm.name, "round": r, "status": res.status,
                  "folder": str(res.out), "run_ids": res.run_ids,
                  "steady_decode_tps": res.steady_tps, "bench_exit": res.bench_exit,
                  "server_exit": res.server_exit}
                 for r, arm, res in result.launches],
        "rounds": result.rounds,
        "comparisons": [comparison_dict(c) for c in result.comparisons],
        "sweep": None if result.sweep is None else json.loads(sweep_text(result.sweep,
                                                                         "json")),
        "checks": [{"check": n, "status": st, "failing_rows": rows}
                   for n, st, rows in result.checks],
        "notes": result.notes,
    }, indent=2, default=str) + "\n"


# --------------------------------------------------------------------------- checks

def _row_text(row: dict[str, Any]) -> str:
    return ", ".join(f"{k}={value_text(v)}" for k, v in row.items())


def check_text(report: Any) -> str:
    """One line per expectation, then its failing rows."""
    lines = []
    for r in report.results:
        c = r.check
        lines.append(f"{r.status:5} {c.suite}: {c.name}"
                     + (f" ({r.evaluated} row(s))" if not r.error else ""))
        if r.error:
            lines.append(f"      error: {r.error}")
        for row in r.failing[:20]:
            lines.append(f"      - {_row_text(row)}")
        if len(r.failing) > 20:
            lines.append(f"      ... {len(r.failing) - 20} more")
    counts = {s: sum(1 for r in report.results if r.status == s)
              for s in ("PASS", "FAIL", "WARN", "SKIP", "ERROR")}
    lines.append(", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n or s == "FAIL")
                 + f" (exit {report.exit_code})")
    return "\n".join(lines) + "\n"


def check_json(report: Any) -> str:
    return json.dumps({
        "exit_code": report.exit_code,
        "results": [{
            "suite": r.check.suite, "check": r.check.name, "status": r.status,
            "severity": r.check.severity, "expectation": r.check.expectation,
            "kwargs": r.check.kwargs, "evaluated_rows": r.evaluated, "failing_rows": r.failing,
            "error": r.error,
        } for r in report.results],
    }, indent=2, default=str) + "\n"


def check_markdown(report: Any) -> str:
    icon = {"PASS": "✅", "FAIL": "❌", "WARN": "⚠️", "SKIP": "⏭️", "ERROR": "💥"}
    lines = [f"### logpipe check: exit {report.exit_code}", "",
             "| | suite | check | failing rows |", "|---|---|---|---|"]
    for r in report.results:
        failing = "<br>".join(_row_text(row).replace("|", "\\|") for row in r.failing[:10])
        if r.error:
            failing = r.error.replace("|", "\\|")
        lines.append(f"| {icon[r.status]} | {r.check.suite} | {r.check.name} | {failing} |")
    return "\n".join(lines) + "\n"


def check_junit(report: Any) -> str:
    """JUnit XML: a testsuite per suite, a testcase per check."""
    from xml.sax.saxutils import escape, quoteattr

    suites: dict[str, list[Any]] = {}
    for r in report.results:
        suites.setdefault(r.check.suite, []).append(r)
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<testsuites>"]
    for name, results in suites.items():
        fails = sum(1 for r in results if r.status == "FAIL")
        errors = sum(1 for r in results if r.status == "ERROR")
        skipped = sum(1 for r in results if r.status == "SKIP")
        out.append(f"  <testsuite name={quoteattr(name)} tests=\"{len(results)}\" "
                   f"failures=\"{fails}\" errors=\"{errors}\" skipped=\"{skipped}\">")
        for r in results:
            out.append(f"    <testcase classname={quoteattr('logpipe.' + name)} "
                       f"name={quoteattr(r.check.name)}>")
            body = escape("\n".join(_row_text(row) for row in r.failing))
            if r.status == "FAIL":
                out.append(f"      <failure message={quoteattr(r.check.expectation)}>{body}"
                           "</failure>")
            elif r.status == "ERROR":
                out.append(f"      <error message={quoteattr(r.error or '')}/>")
            elif r.status == "WARN":
                out.append(f"      <system-out>warning: {body}</system-out>")
            elif r.status == "SKIP":
                out.append("      <skipped message=\"no rows to check\"/>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- sweep

def sweep_text(result: Any, fmt: str = "table") -> str:
    from logpipe.analysis.sweep import sweep_dict

    if fmt == "json":
        return json.dumps(sweep_dict(result), indent=2, default=str) + "\n"
    key = result.key.removeprefix("arg.")
    out = []
    if not result.groups:
        out.append(f"No sweep over {key}: no environment has runs with two or more values.")
    for g in result.groups:
        base = (f"baseline {', '.join(g.baseline_runs)} at {g.baseline_median:.1f} tok/s"
                if g.baseline_median is not None else "no same-environment baseline")
        title = (f"Sweep over {key} @ {g.stratum} running request(s); {base}: {g.verdict}")
        rows = [(p.value, ", ".join(p.runs), p.n, num_text(p.median),
                 f"{num_text(p.ci_low)}–{num_text(p.ci_high)}" if p.ci_low is not None else "–",
                 ", ".join(num_text(v, 1) for v in p.launches) or "–",
                 num_text(p.accept_len), num_text(p.break_even_accept_len),
                 f"{p.speedup * 100:+.1f}%" if p.speedup is not None else "–",
                 "best" if p.value in g.best else "") for p in g.points]
        cols = [key, "runs", "n", "median tok/s", "95% CI", "per launch", "accept len",
                "break-even", "vs baseline", ""]
        if fmt == "markdown":
            out.append(f"### {title}\n")
            out.append("| " + " | ".join(cols) + " |")
            out.append("|" + "---|" * len(cols))
            out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
            out.append("")
        else:
            out.append(title)
            out.append(rows_text(cols, rows, "table").rstrip("\n").rsplit("\n", 1)[0])
    if result.excluded:
        out.append(f"Not in the sweep ({len(result.excluded)} run(s)):")
        reasons: dict[str, list[str]] = {}
        for name, reason in result.excluded:
            reasons.setdefault(reason, []).append(name)
        for reason, names in reasons.items():
            out.append(f"  {reason}: {', '.join(names)}")
    return "\n".join(out) + "\n"
