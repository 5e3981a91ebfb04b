"""`logpipe report`: one self-contained HTML file, readable offline.

Everything shown comes from the library's own results — :func:`logpipe.steady.steady_lines`,
:func:`logpipe.compare.compare`, :func:`logpipe.checks.run_checks`,
:func:`logpipe.sweep.sweep`, :func:`logpipe.env.diff` — never a second implementation of a
statistic.  plotly.js is embedded (no CDN).  Every piece of text from logs, manifests or
the user is HTML-escaped, and figure JSON is written with ``<``, ``>`` and ``&`` as
unicode escapes, so no log line can inject markup or script.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from logpipe import __version__
from logpipe.errors import LogpipeError
from logpipe.store import Store

STATE_COLORS = {"steady": "#1f77b4", "warmup": "#ff7f0e", "idle": "#7f7f7f",
                "profiled": "#d62728"}
SHADE = {"warmup": "rgba(255,127,14,0.12)", "idle": "rgba(127,127,127,0.12)",
         "profiled": "rgba(214,39,40,0.15)"}
MAX_DEFAULT_RUNS = 8


@dataclass
class ReportResult:
    path: str
    runs: list[str]
    figures: int
    sections: list[str] = field(default_factory=list)


def _e(text: Any) -> str:
    if text is None:
        return "null"
    if not isinstance(text, str):
        text = json.dumps(text, default=str)
    return html.escape(text, quote=True)


def _safe_json(obj: Any) -> str:
    text = json.dumps(obj, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{'' if v == '' else _e(v)}</td>" for v in r)
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pick_runs(store: Store, refs: list[str] | None) -> list[tuple[str, str]]:
    from logpipe.query import resolve_run

    if refs:
        out = []
        for ref in refs:
            rid = resolve_run(store, ref)
            out.append((rid, str(store.one("SELECT name FROM runs WHERE run_id = ?",
                                            [rid])[0])))  # type: ignore[index]
        return out
    rows = store.all(
        "SELECT run_id, name FROM run_summary WHERE steady_decode_lines > 0 "
        "ORDER BY env_complete DESC, started_at NULLS LAST, name LIMIT ?", [MAX_DEFAULT_RUNS])
    if not rows:
        raise LogpipeError("no run with steady decode lines to report on",
                           hint="ingest logs first: logpipe ingest PATH")
    return [(str(r), str(n)) for r, n in rows]


def _timeline(store: Store, runs: list[tuple[str, str]]) -> dict[str, Any]:
    """Decode throughput over time per run; non-steady windows shaded by state."""
    from logpipe.steady import steady_lines

    traces, shapes = [], []
    for i, (rid, name) in enumerate(runs):
        df = steady_lines(store, rid).filter(pl.col("kind") == "decode")
        if df.height == 0:
            continue
        use_ts = df["ts"].null_count() < df.height
        x = [str(t) for t in df["ts"]] if use_ts else df["line_no"].to_list()
        axis = "" if i == 0 else str(i + 1)
        for state, color in STATE_COLORS.items():
            idx = [k for k, s in enumerate(df["state"]) if s == state]
            if not idx:
                continue
            traces.append({
                "type": "scatter", "mode": "markers", "name": f"{name}: {state}",
                "x": [x[k] for k in idx], "y": [df["gen_throughput"][k] for k in idx],
                "text": [df["reason"][k] or "steady" for k in idx],
                "marker": {"color": color, "size": 5}, "xaxis": f"x{axis}",
                "yaxis": f"y{axis}", "legendgroup": state,
                "hovertemplate": "%{y:.1f} tok/s<br>%{text}<extra>" + html.escape(name)
                                 + "</extra>",
            })
        prev = None
        for k in range(df.height):
            state = df["state"][k]
            if state in SHADE:
                x0 = prev if prev is not None else x[k]
                shapes.append({"type": "rect", "xref": f"x{axis}", "yref": f"y{axis} domain",
                               "x0": x0, "x1": x[k], "y0": 0, "y1": 1,
                               "fillcolor": SHADE[state], "line": {"width": 0},
                               "layer": "below"})
            prev = x[k]
    n = len(runs)
    layout: dict[str, Any] = {"height": max(260, 220 * n), "shapes": shapes[:2000],
                              "title": {"text": "Decode throughput over time "
                                                "(shaded: warm-up, idle, profiled)"},
                              "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
                              "showlegend": True}
    for i, (_, name) in enumerate(runs):
        axis = "" if i == 0 else str(i + 1)
        top = 1 - i / n
        layout[f"yaxis{axis}"] = {"domain": [max(0, top - 1 / n + 0.06), top],
                                  "title": {"text": name[:30]}}
        layout[f"xaxis{axis}"] = {"anchor": f"y{axis}"}
    return {"data": traces, "layout": layout}


def _distributions(store: Store, runs: list[tuple[str, str]]) -> dict[str, Any]:
    from logpipe.compare import load_run

    traces = []
    for rid, name in runs:
        r = load_run(store, rid)
        for stratum, values in sorted(r.decode.items()):
            traces.append({"type": "box", "name": f"{name} @{stratum}", "y": values.tolist(),
                           "boxpoints": "outliers"})
    return {"data": traces, "layout": {
        "title": {"text": "Steady decode throughput (tok/s) by run and running requests"},
        "height": 420, "showlegend": False, "margin": {"l": 60, "r": 20, "t": 50, "b": 120}}}


def _sweep_figure(result: Any) -> dict[str, Any] | None:
    if not result.groups:
        return None
    g = result.groups[0]
    pts = [p for p in g.points if p.median is not None]
    x = [p.value for p in pts]
    data = [{
        "type": "scatter", "mode": "lines+markers", "name": "steady decode tok/s",
        "x": x, "y": [p.median for p in pts],
        "error_y": {"type": "data", "symmetric": False,
                    "array": [(p.ci_high or p.median) - p.median for p in pts],
                    "arrayminus": [p.median - (p.ci_low or p.median) for p in pts]},
    }, {
        "type": "scatter", "mode": "lines+markers", "name": "accept length", "x": x,
        "y": [p.accept_len for p in pts], "yaxis": "y2", "line": {"dash": "dot"},
    }]
    if g.baseline_median is not None:
        data.append({"type": "scatter", "mode": "lines", "name": "baseline tok/s",
                     "x": x, "y": [g.baseline_median] * len(x), "line": {"dash": "dash"}})
    key = result.key.removeprefix("arg.")
    return {"data": data, "layout": {
        "title": {"text": f"Sweep over {key}: {g.verdict}"}, "height": 420,
        "xaxis": {"title": {"text": key}, "type": "category"},
        "yaxis": {"title": {"text": "tok/s"}},
        "yaxis2": {"title": {"text": "accept length"}, "overlaying": "y", "side": "right"},
        "margin": {"l": 60, "r": 60, "t": 50, "b": 50}}}


TOP_KERNELS = 10


def _kernel_section(store: Store, runs: list[tuple[str, str]]) -> tuple[str, str]:
    """Top kernels, kernel classes and annotations of the runs' linked profiler traces."""
    ids = [rid for rid, _ in runs]
    marks = ", ".join("?" for _ in ids)
    top = store.all(
        "SELECT run, coalesce(CAST(tp_rank AS VARCHAR), '') AS tp, kernel_class, "
        "left(kernel, 90), launches, round(total_ms, 3), round(mean_us, 2), "
        "round(100 * share, 1) FROM (SELECT *, row_number() OVER (PARTITION BY source_path "
        f"ORDER BY total_ms DESC) AS n FROM kernel_summary WHERE run_id IN ({marks})) "
        f"WHERE n <= {TOP_KERNELS} ORDER BY run, tp, total_ms DESC", ids)
    if not top:
        return ("Kernel traces", "<p>No PyTorch profiler trace is linked to these runs.</p>")
    classes = store.all(
        "SELECT run, coalesce(CAST(tp_rank AS VARCHAR), ''), kernel_class, launches, "
        f"round(total_ms, 3), round(100 * share, 1) FROM kernel_class_summary "
        f"WHERE run_id IN ({marks}) ORDER BY 1, 2, total_ms DESC", ids)
    notes = store.all(
        "SELECT run, coalesce(CAST(tp_rank AS VARCHAR), ''), annotation, calls, "
        "round(cpu_ms, 3), kernels, round(kernel_ms, 3), round(100 * kernel_share, 1) "
        f"FROM annotation_summary WHERE run_id IN ({marks}) ORDER BY 1, 2, kernel_ms DESC",
        ids)
    body = (f"<p>Top {TOP_KERNELS} kernels by device time per trace.</p>"
            + _table(["run", "TP rank", "class", "kernel", "launches", "total ms", "mean µs",
                      "% of device time"], [list(r) for r in top])
            + _table(["run", "TP rank", "class", "launches", "total ms", "% of device time"],
                     [list(r) for r in classes])
            + _table(["run", "TP rank", "annotation", "calls", "CPU ms", "kernels",
                      "kernel ms", "% of annotated kernel time"], [list(r) for r in notes]))
    return ("Top kernels (profiler traces)", body)


def build_report(db: str | Path, out: str | Path, refs: list[str] | None = None,
                 with_checks: bool = True) -> ReportResult:
    """Write the HTML report for ``refs`` (default: up to 8 runs, captured ones first)."""
    from plotly.offline import get_plotlyjs

    from logpipe.checks import load_suites, run_checks
    from logpipe.compare import Options, compare
    from logpipe.env import diff_runs
    from logpipe.report import comparison_dict
    from logpipe.sweep import sweep

    with Store.open(db, read_only=True) as store:
        runs = _pick_runs(store, refs)
        figures = [("timeline", _timeline(store, runs)),
                   ("distributions", _distributions(store, runs))]
    names = [n for _, n in runs]
    sections: list[tuple[str, str]] = []

    # environment diffs against the first run
    env_rows = []
    for name in names[1:]:
        d = diff_runs(db, names[0], name)
        status = "comparable" if d.comparable else (
            "unknown environment" if not (d.complete_a and d.complete_b) else "NOT comparable")
        for i in d.items:
            if i.tier != "annotation":
                env_rows.append([name, status, i.tier, i.key, i.a, i.b])
        if not any(i.tier != "annotation" for i in d.items):
            env_rows.append([name, status, "", "(no identity or treatment differences)", "",
                             ""])
    sections.append(("Environment vs " + names[0], _table(
        ["run", "status", "tier", "key", names[0], "run's value"], env_rows)
        if env_rows else "<p>Only one run selected.</p>"))

    # comparisons: each run against the first
    if len(names) > 1:
        comps = compare(str(db), names, Options())
        rows = []
        for c in comps:
            cd = comparison_dict(c)
            for m in cd["metrics"]:
                rows.append([c.candidate, c.verdict, m["metric"]
                             + (f" @{m['stratum_running_req']}" if m["stratum_running_req"]
                                is not None else ""),
                             m["n"], [None if v is None else round(v, 2) for v in m["median"]],
                             None if m["ratio"] is None else round(m["ratio"], 3),
                             m["verdict"], m["detail"]])
            if not cd["metrics"]:
                rows.append([c.candidate, c.verdict, "", "", "", "", "", "; ".join(c.notes)])
        sections.append((f"Comparisons against {names[0]}", _table(
            ["candidate", "verdict", "metric", "n", "medians", "ratio", "metric verdict",
             "detail"], rows)))

    # sweep when one applies among these runs
    quoted = ", ".join("'" + n.replace("'", "''") + "'" for n in names)
    try:
        result = sweep(str(db), "speculative_num_steps", where=f"name IN ({quoted})")
    except LogpipeError:
        result = None
    if result is not None:
        fig = _sweep_figure(result)
        if fig is not None:
            figures.append(("sweep", fig))

    if with_checks:
        report = run_checks(db, load_suites())
        rows = [[r.status, r.check.suite, r.check.name,
                 "; ".join(", ".join(f"{k}={v}" for k, v in row.items())
                           for row in r.failing[:10]) or (r.error or "")]
                for r in report.results]
        sections.append((f"Checks (exit {report.exit_code})",
                         _table(["status", "suite", "check", "failing rows"], rows)))
    with Store.open(db, read_only=True) as store:
        ids = [rid for rid, _ in runs]
        marks = ", ".join("?" for _ in ids)
        phase_rows = store.all(
            f"SELECT run, phase, synchronized, cycles, round(share, 3), round(ms_per_cycle, 2), "
            f"round(cycle_ms, 2), round(implied_tps, 1) FROM phase_summary "
            f"WHERE run_id IN ({marks}) ORDER BY run, share DESC", ids)
        overhead = store.all(
            "SELECT profiled_run, unprofiled_run, round(profiled_tps, 1), "
            "round(unprofiled_tps, 1), round(overhead_factor, 2) FROM profiling_overhead "
            "ORDER BY 1, 2")
        kernel_section = _kernel_section(store, runs)
    if phase_rows:
        sections.append(("Phase shares (speculative decoding)", _table(
            ["run", "phase", "synchronized", "cycles", "share of cycle", "ms per cycle",
             "cycle ms", "implied tok/s"], [list(r) for r in phase_rows])))
    else:
        sections.append(("Phase shares", "<p>No phase timings are ingested for these runs."
                                         "</p>"))
    if overhead:
        sections.append(("Profiling overhead", _table(
            ["profiled run", "unprofiled run", "profiled tok/s", "unprofiled tok/s",
             "slowdown"], [list(r) for r in overhead])))
    sections.append(kernel_section)

    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>logpipe report: {_e(', '.join(names))}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
        "table{border-collapse:collapse;margin:8px 0 24px;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
        "th{background:#f3f3f3}h2{margin-top:32px}</style>",
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
        f"<h1>logpipe report</h1><p>Runs: {_e(', '.join(names))}. Generated "
        f"{_e(datetime.now().isoformat(timespec='seconds'))} by logpipe {_e(__version__)} "
        f"from {_e(db)}.</p>",
    ]
    for k, (fid, fig) in enumerate(figures):
        parts.append(f"<div id='fig-{fid}' class='logpipe-figure'></div>")
        parts.append(f"<script>Plotly.newPlot('fig-{fid}', {_safe_json(fig['data'])}, "
                     f"{_safe_json(fig['layout'])}, {{responsive: true}});</script>")
        if k == 1:
            parts += [f"<h2>{_e(title)}</h2>{body}" for title, body in sections]
    parts.append("</body></html>")
    Path(out).write_text("\n".join(parts), encoding="utf-8")
    return ReportResult(str(out), names, len(figures), [t for t, _ in sections])
