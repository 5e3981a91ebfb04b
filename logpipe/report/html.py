"""`logpipe report`: one self-contained HTML file, readable offline.

Everything shown comes from the library's own results —
:func:`logpipe.analysis.steady.steady_lines`, :func:`logpipe.analysis.compare.compare`,
:func:`logpipe.checks.run_checks`, :func:`logpipe.analysis.sweep.sweep`,
:func:`logpipe.env.diff` — never a second implementation of a
statistic.  plotly.js is embedded (no CDN).  Every piece of text from logs, manifests or
the user is HTML-escaped, and figure JSON is written with ``<``, ``>`` and ``&`` as
unicode escapes, so no log line can inject markup or script.
"""

from __future__ import annotations

import functools
import html
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from logpipe import summaries
from logpipe._version import __version__
from logpipe.db import StoreOrPath, using
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
        return "–"  # a missing value reads as one, not as JSON's null
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


def _pick_runs(store: Store, refs: list[str] | None,
               plan: str | None = None) -> list[tuple[str, str]]:
    from logpipe.query import resolve_run

    if refs:
        out = []
        for ref in refs:
            rid = resolve_run(store, ref)
            out.append((rid, str(store.one("SELECT name FROM runs WHERE run_id = ?",
                                            [rid])[0])))  # type: ignore[index]
        return out
    if plan is not None:
        rows = store.all(
            "SELECT r.run_id, r.name FROM runs r JOIN run_env e USING (run_id) "
            "WHERE e.key = 'launch.plan' AND e.value = ? ORDER BY r.started_at, r.name",
            [plan])
        if not rows:
            raise LogpipeError(f"no run of an `ab` campaign named {plan!r}",
                               hint="campaigns are named by their plan: logpipe ab PLAN.toml")
        return [(str(r), str(n)) for r, n in rows]
    rows = store.all(
        "SELECT run_id, name FROM run_summary WHERE steady_decode_lines > 0 "
        "ORDER BY env_complete DESC, started_at NULLS LAST, name LIMIT ?", [MAX_DEFAULT_RUNS])
    if not rows:
        raise LogpipeError("no run with steady decode lines to report on",
                           hint="ingest logs first: logpipe ingest PATH")
    return [(str(r), str(n)) for r, n in rows]


def _launch_facts(store: Store, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per run: the ``launch.*`` facts its manifest holds (plan, arm, round, status)."""
    out: dict[str, dict[str, Any]] = {}
    marks = ", ".join("?" for _ in run_ids)
    for rid, key, value in store.all(
            f"SELECT run_id, key, value FROM run_env WHERE key LIKE 'launch.%' "
            f"AND run_id IN ({marks})", run_ids):
        out.setdefault(str(rid), {})[str(key)[7:]] = value
    return out


def _ratio_cells(c: Any) -> list[Any]:
    from logpipe.analysis.decide import primary_metric

    m = primary_metric(c)
    if m is None:
        return ["–", "–", "–"]
    t = m.launch or m.test
    ci = f"{t.ci_low:.3f}–{t.ci_high:.3f}" if t.ci_low is not None else "–"
    return [f"@{m.stratum} running", None if t.ratio is None else round(t.ratio, 3), ci]


def _spec_cells(c: Any) -> list[Any]:
    s = c.speculation or {}
    return [None if s.get("speedup") is None else f"{s['speedup'] * 100:+.1f}%",
            None if s.get("accept_len") is None else round(s["accept_len"], 2),
            None if s.get("break_even_accept_len") is None
            else round(s["break_even_accept_len"], 2)]


def _experiments(store: Store, runs: list[tuple[str, str]]
                 ) -> tuple[list[tuple[str, str]], list[Any]]:
    """What an engineer asks first: each campaign's candidates against its baseline with
    the rounds side by side, and each speculative run against its same-environment
    baseline.  Returns the sections and the comparisons judged (their load levels are
    plotted)."""
    from logpipe.analysis.compare import campaign_rounds, judge_campaign
    from logpipe.analysis.decide import primary_metric
    from logpipe.errors import LogpipeError

    sections: list[tuple[str, str]] = []
    compared: list[Any] = []
    ids = [rid for rid, _ in runs]
    facts = _launch_facts(store, ids)
    plans: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for rid, name in runs:
        f = facts.get(rid, {})
        if f.get("plan"):
            plans.setdefault(str(f["plan"]), []).append((rid, name, f))
    in_plan = {rid for members in plans.values() for rid, _, _ in members}
    for plan, members in plans.items():
        arms: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
        for m in members:
            arms.setdefault(str(m[2].get("arm")), []).append(m)
        rounds = sorted({int(f.get("round") or 0) for _, _, f in members})
        base_arm = next((a for a, ms in arms.items()
                         if any(f.get("role") == "baseline" for _, _, f in ms)), None)
        verdicts = []
        judged: list[Any] = []
        if base_arm is not None:
            try:
                judged = judge_campaign(store, plan)
            except LogpipeError as exc:
                verdicts.append(["–", base_arm, "not judged", "–", "–", "–", "–", "–", "–",
                                 str(exc)])
            compared += judged
            for c in judged:
                lead = primary_metric(c)
                ratios = (", ".join(f"{r:.3f}" for r in lead.launch.round_ratios)
                          if lead is not None and lead.launch is not None else "")
                verdicts.append([c.candidate.removeprefix(plan + "-"), base_arm, c.verdict,
                                 *_ratio_cells(c), *_spec_cells(c),
                                 "; ".join(([f"round ratios {ratios}"] if ratios else [])
                                           + [c.replication] + c.notes[:2])])
        # the rounds as the judgement saw them (as `ab` prints them); a launch it did not
        # judge shows its steady median from the run summary
        stratum, judged_rounds = campaign_rounds(judged, plan, base_arm or "")
        tps = {rid: v for rid, v in store.all(
            f"SELECT run_id, steady_gen_throughput FROM run_summary WHERE run_id IN "
            f"({', '.join('?' for _ in members)})", [m[0] for m in members])}
        rows = []
        for arm, ms in arms.items():
            cells: list[Any] = [arm]
            by_round = {int(f.get("round") or 0): (rid, f) for rid, _, f in ms}
            for r in rounds:
                if r not in by_round:
                    cells.append("")
                    continue
                rid, f = by_round[r]
                value = judged_rounds.get(arm, {}).get(r, tps.get(rid))
                cells.append((f"{value:.1f}" if value is not None else "–") + (
                    "" if f.get("status") in (None, "ok") else f" ({f.get('status')})"))
            rows.append(cells)
        at = f" @ {stratum} running" if stratum is not None else ""
        table = _table([f"arm (steady decode tok/s{at})", *[f"round {r}" for r in rounds]],
                       rows)
        body = table + (_table(["candidate", "baseline", "verdict", "stratum",
                                "decode ratio", "95% CI", "speedup", "accept length",
                                "break-even accept length", "notes"], verdicts)
                        if verdicts else "<p>No baseline arm among these runs.</p>")
        sections.append((f"Campaign {plan}: rounds side by side, judged launch by launch",
                         body))
    from logpipe.analysis.compare import compare_with_baseline

    rows = []
    for rid, name in runs:
        if rid in in_plan or store.one("SELECT role FROM runs WHERE run_id = ?",
                                       [rid]) != ("speculative",):
            continue
        c = compare_with_baseline(store, rid)
        compared.append(c)
        rows.append([name, c.reference, c.verdict, *_ratio_cells(c), *_spec_cells(c),
                     "; ".join(c.notes[:2])])
    if rows:
        sections.append(("Speculative runs against their same-environment baselines",
                         _table(["speculative run", "baseline", "verdict", "stratum",
                                 "decode ratio", "95% CI", "speedup", "accept length",
                                 "break-even accept length", "notes"], rows)))
    if not sections:
        sections.append(("Experiments", "<p>No speculative run or `ab` campaign among "
                                        "these runs.</p>"))
    return sections, compared


def _environment_groups(store: Store, runs: list[tuple[str, str]]) -> tuple[str, str]:
    """One group per identity fingerprint (runs without a manifest apart), and the
    identity keys in which the groups differ."""
    from logpipe.env import RunEnv, diff

    groups: dict[str, list[tuple[str, RunEnv]]] = {}
    for rid, name in runs:
        env_json, complete, fp = store.one(
            "SELECT env, env_complete, env_fingerprint FROM runs WHERE run_id = ?",
            [rid]) or (None, False, None)
        env = RunEnv.from_json(env_json, bool(complete))
        key = str(fp) if complete else "unknown (no manifest)"
        groups.setdefault(key, []).append((name, env))
    rows = [[g, len(members), ", ".join(n for n, _ in members)]
            for g, members in groups.items()]
    body = _table(["environment (identity fingerprint)", "runs", "names"], rows)
    reps = [(g, members[0]) for g, members in groups.items()]
    diffs = []
    for i in range(1, len(reps)):
        g0, (n0, e0) = reps[0]
        g, (n, e) = reps[i]
        d = diff(n0, e0, n, e)
        keys = [f"{it.key}: {it.a} → {it.b}" for it in d.identity]
        diffs.append([g0, g, "; ".join(keys) or
                      ("identity unknown: " + ", ".join(d.unknown.get(n, []) or
                                                        d.unknown.get(n0, [])))])
    if diffs:
        body += _table(["group", "against group", "identity differences"], diffs)
    return (f"Environment groups ({len(groups)})", body)


MAX_CDF_POINTS = 500
"""Points of a run's latency curve at most (evenly spaced in rank)."""


def _latency(store: Store, runs: list[tuple[str, str]]) -> dict[str, Any] | None:
    """Cumulative distributions of request latency (request records), per run."""
    traces = []
    for rid, name in runs:
        values = sorted(v for (v,) in store.all(
            "SELECT e2e_latency_s FROM request_metrics WHERE run_id = ? AND e2e_latency_s "
            "IS NOT NULL", [rid]))
        if not values:
            continue
        n = len(values)
        keep = sorted({int(k) for k in np.linspace(0, n - 1, min(n, MAX_CDF_POINTS))})
        traces.append({"type": "scatter", "mode": "lines", "name": name,
                       "x": [values[k] * 1000 for k in keep], "y": [(k + 1) / n for k in keep],
                       "line": {"shape": "hv"}})
    if not traces:
        return None
    return {"data": traces, "layout": {
        "title": {"text": "Request end-to-end latency (ms), cumulative share of requests"},
        "height": 380, "xaxis": {"type": "log"}, "yaxis": {"range": [0, 1]},
        "margin": {"l": 60, "r": 20, "t": 50, "b": 40}}}


MAX_TIMELINE_POINTS = 2000
"""A run's decode lines shown in the timeline at most: a longer run's lines of one state
are shown as medians of consecutive groups (2 M lines plotted point by point made a 97 MB
page that headless Chromium took 147 s to draw: benchmarks/RESULTS-report.md)."""


MAX_SHADED = 1000
"""Shaded stretches (warm-up, idle, profiled) drawn per run at most, the first ones."""


def _timeline(store: Store, runs: list[tuple[str, str]]) -> dict[str, Any]:
    """Decode throughput over time per run; non-steady windows shaded by state."""
    from logpipe.analysis.steady import DECODE_KINDS, steady_lines

    traces, shapes = [], []
    for i, (rid, name) in enumerate(runs):
        df = steady_lines(store, rid, columns=("line_no", "ts", "kind", "gen_throughput",
                                               "state", "reason")
                          ).filter(pl.col("kind").is_in(DECODE_KINDS))
        if df.height == 0:
            continue
        use_ts = df["ts"].null_count() < df.height
        xs = df["ts"] if use_ts else df["line_no"]

        def x_at(rows: list[int], xs: pl.Series = xs, use_ts: bool = use_ts) -> list[Any]:
            picked = xs.gather(rows)
            return [str(t) for t in picked] if use_ts else picked.to_list()

        axis = "" if i == 0 else str(i + 1)
        df = df.with_row_index("k")
        for state, color in STATE_COLORS.items():
            part = df.filter(pl.col("state") == state)
            n = part.height
            if not n:
                continue
            points = (max(50, MAX_TIMELINE_POINTS * n // df.height)
                      if df.height > MAX_TIMELINE_POINTS else n)
            # consecutive lines of the state in groups of near-equal size: each its middle
            # line's time and the group's median throughput (one line each when few)
            grouped = part.with_columns((pl.int_range(n) * points // n).alias("g")).group_by(
                "g", maintain_order=True).agg(
                pl.col("k").gather(pl.len() // 2).first().alias("mid"),
                pl.col("gen_throughput").median().alias("y"), pl.len().alias("n"),
                pl.col("reason").first().alias("reason"))
            traces.append({
                "type": "scatter", "mode": "markers", "name": f"{name}: {state}",
                "x": x_at(grouped["mid"].to_list()), "y": grouped["y"].to_list(),
                "text": [(r or "steady") if c == 1 else f"median of {c} lines"
                         for r, c in zip(grouped["reason"], grouped["n"], strict=True)],
                "marker": {"color": color, "size": 5}, "xaxis": f"x{axis}",
                "yaxis": f"y{axis}", "legendgroup": state,
                "hovertemplate": "%{y:.1f} tok/s<br>%{text}<extra>" + html.escape(name)
                                 + "</extra>",
            })
        # one shaded band per stretch of warm-up, idle or profiled lines
        stretches = df.with_columns(pl.col("state").rle_id().alias("stretch")).group_by(
            "stretch", maintain_order=True).agg(pl.col("state").first(),
                                                pl.col("k").min().alias("first"),
                                                pl.col("k").max().alias("last")).filter(
            pl.col("state").is_in(list(SHADE)))
        stretches = stretches.head(MAX_SHADED)  # a page of bands says no more
        starts = x_at([max(0, k - 1) for k in stretches["first"]])
        ends = x_at(stretches["last"].to_list())
        for state, x0, x1 in zip(stretches["state"], starts, ends, strict=True):
            shapes.append({"type": "rect", "xref": f"x{axis}", "yref": f"y{axis} domain",
                           "x0": x0, "x1": x1, "y0": 0, "y1": 1, "fillcolor": SHADE[state],
                           "line": {"width": 0}, "layer": "below"})
    n = len(runs)
    layout: dict[str, Any] = {"height": max(260, 220 * n), "shapes": shapes,
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


MAX_BOXES_PER_RUN = 12
"""A run with more running-request levels than this has them binned (1, 2, 3-4, 5-8, ...)
in the distributions figure: sixty boxes are unreadable."""


def _strata_bins(strata: list[int]) -> dict[int, str]:
    """Each stratum's label in the figure: itself, or its power-of-two bin when a run has
    more than :data:`MAX_BOXES_PER_RUN`."""
    if len(strata) <= MAX_BOXES_PER_RUN:
        return {s: f"{s}" for s in strata}
    out = {}
    for s in strata:
        hi = 1 << max(0, int(s - 1).bit_length()) if s > 1 else s
        lo = hi // 2 + 1 if hi > 2 else hi
        out[s] = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return out


def _box(label: str, values: np.ndarray) -> dict[str, Any]:
    """A box drawn from its quantiles, not from every line (the page stays small on any
    database): quartiles, median, mean, and the 5th and 95th percentiles as whiskers."""
    q = np.percentile(values, [5, 25, 50, 75, 95])
    return {"type": "box", "name": label, "x": [label], "q1": [float(q[1])],
            "median": [float(q[2])], "q3": [float(q[3])], "lowerfence": [float(q[0])],
            "upperfence": [float(q[4])], "mean": [float(np.mean(values))],
            "hovertemplate": f"{len(values)} lines<extra>{html.escape(label)}</extra>"}


def _distributions(store: Store, runs: list[tuple[str, str]]) -> dict[str, Any]:
    from logpipe.analysis.launches import MIN_LAUNCH_LINES
    from logpipe.analysis.load import load_runs

    traces = []
    names, medians = [], []
    for (_, name), r in zip(runs, load_runs(store, [rid for rid, _ in runs]), strict=True):
        bins = _strata_bins(sorted(r.decode))
        grouped: dict[str, list[np.ndarray]] = {}
        for stratum, values in sorted(r.decode.items()):
            grouped.setdefault(bins[stratum], []).append(values)
            if len(values) >= MIN_LAUNCH_LINES:
                names.append(f"{name} @{bins[stratum]}")
                medians.append(float(np.median(values)))
        for label, arrays in grouped.items():
            traces.append(_box(f"{name} @{label}", np.concatenate(arrays)))
    # the unit every verdict is decided on: one point per launch and stratum
    traces.append({"type": "scatter", "mode": "markers", "x": names, "y": medians,
                   "name": "launch median (the verdict's unit)",
                   "marker": {"symbol": "diamond", "size": 11, "color": "black"}})
    return {"data": traces, "layout": {
        "title": {"text": "Steady decode throughput (tok/s) by run and running requests: "
                          "lines (boxes: quartiles, 5th-95th percentile whiskers) and each "
                          "launch's median per level (diamonds)"},
        "height": 420, "showlegend": False, "margin": {"l": 60, "r": 20, "t": 50, "b": 120}}}


def _levels_figure(c: Any) -> dict[str, Any]:
    """The candidate's ratio to the reference against load, each level with its 95%
    interval, and the break-even line: where speculation stops paying."""
    from logpipe.analysis.client_metrics import metric_label

    pts = [r for r in c.levels if r.test.ratio is not None]
    x = [r.level.label for r in pts]
    y = [r.test.ratio for r in pts]
    data = [{
        "type": "scatter", "mode": "lines+markers", "name": "candidate / reference",
        "x": x, "y": y, "text": [r.test.verdict for r in pts],
        "error_y": {"type": "data", "symmetric": False,
                    "array": [(r.test.ci_high or r.test.ratio) - r.test.ratio for r in pts],
                    "arrayminus": [r.test.ratio - (r.test.ci_low or r.test.ratio)
                                   for r in pts]},
    }, {"type": "scatter", "mode": "lines", "name": "break-even", "x": x, "y": [1.0] * len(x),
        "line": {"dash": "dash"}}]
    what = metric_label(c.levels[0].metric)
    return {"data": data, "layout": {
        "title": {"text": f"{c.candidate} vs {c.reference} by load: {c.crossover or ''}"[:160]},
        "height": 420, "xaxis": {"title": {"text": "load level"}, "type": "category"},
        "yaxis": {"title": {"text": f"ratio of {what} (95% CI)"}},
        "margin": {"l": 60, "r": 30, "t": 50, "b": 50}}}


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


@functools.cache
def _plotly_loader() -> str:
    """plotly.js, embedded gzipped (4.8 MB of script is 1.4 MB compressed) and unpacked
    by the browser's own ``DecompressionStream`` (Chromium 80+, Firefox 113+, Safari
    16.4+): the report still needs no network.  Figures wait for it (``logpipePlot``)."""
    import base64
    import gzip

    from plotly.offline import get_plotlyjs

    packed = base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()
    return (
        "window.logpipeQueue=[];window.logpipePlot=function(f){window.Plotly?f():"
        "window.logpipeQueue.push(f)};(async function(){const b=Uint8Array.from(atob('"
        + packed + "'),function(c){return c.charCodeAt(0)});const t=await new Response("
        "new Blob([b]).stream().pipeThrough(new DecompressionStream('gzip'))).text();"
        "const s=document.createElement('script');s.text=t;document.head.appendChild(s);"
        "window.logpipeQueue.splice(0).forEach(function(f){f()})})();")


def build_report(db: StoreOrPath, out: str | Path, refs: list[str] | None = None,
                 with_checks: bool = True, plan: str | None = None) -> ReportResult:
    """Write the HTML report for ``refs`` (default: up to 8 runs, captured ones first;
    ``plan``: the runs of one ``ab`` campaign).  It leads with the experiment: campaigns
    and speculative runs against their baselines, then the sweep curve, the environment
    groups, the timelines with warm-up shaded, distributions and latency.  One store
    serves all of it (opened here from a path, or the caller's)."""
    with using(db, read_only=True) as store:
        # the checks first: they lay their own tables over the views and drop them after
        sections = _checks_section(store) if with_checks else []
        with summaries.shadowed(store):  # the views of every run's statistics, read once
            runs = _pick_runs(store, refs, plan)
            blocks = _figures(store, runs)
            sections += _tables(store, runs)
        source = store.path
    names = [n for _, n in runs]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>logpipe report: {_e(', '.join(names))}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
        "table{border-collapse:collapse;margin:8px 0 24px;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
        "th{background:#f3f3f3}h2{margin-top:32px}</style>",
        f"<script type='text/javascript'>{_plotly_loader()}</script></head><body>",
        f"<h1>logpipe report</h1><p>Runs: {_e(', '.join(names))}. Generated "
        f"{_e(datetime.now().isoformat(timespec='seconds'))} by logpipe {_e(__version__)} "
        f"from {_e(source)}.</p>",
    ]
    blocks += [("section", title, body) for title, body in sections]
    figures = 0
    for what, key, value in blocks:
        if what == "section":
            parts.append(f"<h2>{_e(key)}</h2>{value}")
            continue
        figures += 1
        parts.append(f"<div id='fig-{key}' class='logpipe-figure'></div>")
        parts.append(f"<script>logpipePlot(() => Plotly.newPlot('fig-{key}', "
                     f"{_safe_json(value['data'])}, {_safe_json(value['layout'])}, "
                     "{responsive: true}));</script>")
    parts.append("</body></html>")
    Path(out).write_text("\n".join(parts), encoding="utf-8")
    return ReportResult(str(out), names, figures,
                        [str(k) for w, k, _ in blocks if w == "section"])


def _figures(store: Store, runs: list[tuple[str, str]]) -> list[tuple[str, Any, Any]]:
    """The experiments, the sweep curve, the environment groups and the figures, in order:
    ``("section", title, html)`` or ``("figure", id, figure)``."""
    from logpipe.analysis.sweep import sweep

    blocks: list[tuple[str, Any, Any]] = []
    sections, compared = _experiments(store, runs)
    for title, body in sections:
        blocks.append(("section", title, body))
    for i, c in enumerate(c for c in compared if c.levels):
        blocks.append(("figure", f"levels-{i}", _levels_figure(c)))
    try:
        result = sweep(store, "speculative_num_steps", run_ids=[r for r, _ in runs])
    except LogpipeError:
        result = None
    fig = _sweep_figure(result) if result is not None else None
    if fig is not None:
        blocks.append(("figure", "sweep", fig))
    title, body = _environment_groups(store, runs)
    blocks.append(("section", title, body))
    blocks.append(("figure", "timeline", _timeline(store, runs)))
    blocks.append(("figure", "distributions", _distributions(store, runs)))
    latency = _latency(store, runs)
    if latency is not None:
        blocks.append(("figure", "latency", latency))
    return blocks


def _checks_section(store: Store) -> list[tuple[str, str]]:
    """The checks' section (the closing sections follow it: launch noise, phase shares,
    profiling overhead, top kernels, :func:`_tables`)."""
    from logpipe.checks import load_suites, run_checks

    report = run_checks(store, load_suites())
    rows = [[r.status, r.check.suite, r.check.name,
             "; ".join(", ".join(f"{k}={v}" for k, v in row.items())
                       for row in r.failing[:10]) or (r.error or "")]
            for r in report.results]
    return [(f"Checks (exit {report.exit_code})",
             _table(["status", "suite", "check", "failing rows"], rows))]


def _tables(store: Store, runs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Launch noise, phase shares, profiling overhead and top kernels."""
    sections: list[tuple[str, str]] = []
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
    noise_rows = store.all(
        "SELECT n.env_fingerprint, n.model, n.stratum, n.launches, n.pairs, "
        "n.configurations, round(n.spread * 100, 1), round(n.max_pair_diff * 100, 1) "
        "FROM launch_noise n WHERE n.env_fingerprint IN (SELECT env_fingerprint FROM runs "
        f"WHERE run_id IN ({marks})) ORDER BY 1, 2, 3", ids)
    sections.append(("Launch noise (A/A pairs: launches of one configuration)", _table(
        ["environment", "model", "running requests", "launches", "A/A pairs",
         "configurations", "1 SD between launches (%)", "largest pair difference (%)"],
        [list(r) for r in noise_rows]) if noise_rows else
        "<p>No A/A pair in these runs' environments: differences between single launches "
        "are unreplicated (launch noise unknown); <code>logpipe ab --rounds 3</code> "
        "measures it.</p>"))
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
    return sections
