"""A comparison as text, markdown and JSON: the deciding metric first, the client's numbers
beside the server's, the launches, the speculation and phase figures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from logpipe.report.tables import num_text, rows_text, value_text

if TYPE_CHECKING:  # importing ingest would pull polars into every command's start-up
    pass


def _metric_label(m: Any) -> str:
    family = "client " if getattr(m, "family", "server") == "client" else ""
    return family + m.name + (f" @ {m.stratum} running" if m.stratum is not None else "")


def _metric_verdict(m: Any) -> str:
    """A diagnostic's verdict is shown, marked as one that does not decide; so is a
    secondary metric's (judged, but not the declared deciding metric)."""
    if not m.gates:
        return f"{m.test.verdict} (diagnostic)"
    return f"{m.verdict} (secondary)" if getattr(m, "secondary", False) else m.verdict


def _decision_lines(c: Any) -> list[str]:
    """The treatment, the deciding metric with its numbers, and a disagreement between
    the server log and the client: what an engineer reads first."""
    from logpipe.analysis.client import metric_label
    from logpipe.analysis.decide import deciding_metric

    out = []
    if c.same_configuration:
        out.append("Treatment: none (same configuration: an A/A pair)")
    elif c.treatment:
        out.append("Treatment: " + "; ".join(c.treatment))
    if not c.metrics:
        return out
    m = deciding_metric(c)
    line = f"Deciding metric: {metric_label(c.primary)} ({c.primary_reason})"
    if m is not None and m.launch is not None and m.launch.ratio is not None:
        typical = m.launch.typical()
        if typical is not None:
            line += f": {num_text(typical[0])} → {num_text(typical[1])} {m.unit}"
        line += f", ratio {m.launch.ratio:.3f}"
        if m.launch.ci_low is not None:
            line += f" [{num_text(m.launch.ci_low, 3)}–{num_text(m.launch.ci_high, 3)}]"
        if m.stratum is not None:
            line += f" @ {m.stratum} running"
    out.append(line + "; the other metrics are secondary")
    if c.disagreement:
        out.append(f"Disagreement: {c.disagreement}")
    return out


def _launch_cells(m: Any) -> tuple[str, str, str, str]:
    """(launches, ratio, 95% CI, p) of the launch-level test; the within-launch test's
    numbers where the metric has none (diagnostics)."""
    t = m.launch
    if t is None:
        return ("–", num_text(m.test.ratio, 3),
                (f"{num_text(m.test.ci_low, 3)}–{num_text(m.test.ci_high, 3)}"
                 if m.test.ci_low is not None else "–"),
                f"{m.test.p_value:.2g}" if m.test.p_value is not None else "–")
    ka, kb = t.launches
    return (f"{ka} / {kb}", num_text(t.ratio, 3),
            f"{num_text(t.ci_low, 3)}–{num_text(t.ci_high, 3)}" if t.ci_low is not None else "–",
            f"{t.p_value:.2g}" if t.p_value is not None else "–")


def _launch_json(t: Any) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"method": t.method, "launches": {"reference": t.names_a, "candidate": t.names_b},
            "values": [t.values_a, t.values_b], "ratio": t.ratio,
            "ci95": [t.ci_low, t.ci_high], "p_value": t.p_value, "df": t.df,
            "round_ratios": t.round_ratios, "verdict": t.verdict, "detail": t.detail,
            "label": t.label, "disagreeing_round": t.disagreeing}


def _launch_lines(c: Any) -> list[str]:
    """The launches of each arm, how the verdict is replicated, and the round ratios."""
    out = []
    if c.replication:
        out.append(f"Launches: {c.replication}")
    if any(len(v) > 1 for v in c.arms.values()):
        for side, names in zip(("reference", "candidate"), c.arms.values(), strict=False):
            out.append(f"  {side} launches: " + ", ".join(names))
    m = next((m for m in c.metrics if m.launch is not None and m.launch.round_ratios
              and m.name == "decode throughput" and m is _primary(c)), None)
    if m is not None:
        out.append(f"  round ratios @ {m.stratum} running (candidate / reference): "
                   + ", ".join(f"{r:.3f}" for r in m.launch.round_ratios))
    bench = next((m for m in c.metrics if m.name == "output throughput"
                  and m.launch is not None and m.launch.round_ratios), None)
    if m is None and bench is not None:  # engines compared on their benchmark
        out.append("  round ratios of output throughput (candidate / reference): "
                   + ", ".join(f"{r:.3f}" for r in bench.launch.round_ratios))
    if c.noise and c.unreplicated is False and any(
            m.launch is not None and m.launch.method == "launch noise" for m in c.metrics):
        p = _primary(c)
        if p is not None and p.stratum in c.noise:
            out.append(f"  {c.noise[p.stratum].describe()} (@ {p.stratum} running)")
    return out


def _primary(c: Any) -> Any:
    from logpipe.analysis.decide import primary_metric

    return primary_metric(c)


def comparison_dict(c: Any) -> dict[str, Any]:
    """Every number of a comparison, for ``--format json``."""
    d = c.env_diff
    return {
        "reference": {"name": c.reference, "run_id": c.reference_id},
        "candidate": {"name": c.candidate, "run_id": c.candidate_id},
        "verdict": c.verdict,
        "exit_code": c.exit_code,
        "environment": {
            "status": c.env_status,
            "allowed_keys": c.allowed_keys,
            "complete": ({c.reference: d.complete_a, c.candidate: d.complete_b} if d else None),
            "differences": ([{"key": i.key, "tier": i.tier, "reference": i.a, "candidate": i.b,
                              "reference_source": i.a_source, "candidate_source": i.b_source}
                             for i in d.items] if d else []),
        },
        "profiled": c.profiled,
        "options": {"alpha": c.options.alpha, "threshold": c.options.threshold,
                    "warmup_lines": c.options.warmup.lines,
                    "warmup_seconds": c.options.warmup.seconds},
        "treatment": c.treatment,
        "deciding_metric": {"metric": c.primary, "why": c.primary_reason},
        "disagreement": c.disagreement,
        "metrics": [{
            "metric": m.name, "family": m.family, "secondary": m.secondary,
            "stratum_running_req": m.stratum, "unit": m.unit,
            "higher_is_better": m.higher_is_better,
            "n": [m.test.n_a, m.test.n_b], "median": [m.test.median_a, m.test.median_b],
            "iqr": [m.test.iqr_a, m.test.iqr_b], "ratio": m.test.ratio,
            "ci95": [m.test.ci_low, m.test.ci_high], "p_value": m.test.p_value,
            "within_launch": {"n": [m.test.n_a, m.test.n_b],
                              "verdict": m.test.verdict, "detail": m.test.detail},
            "launch_level": _launch_json(m.launch),
            "verdict": m.verdict, "detail": (m.launch or m.test).detail, "gates": m.gates,
        } for m in c.metrics],
        "arms": c.arms,
        "replication": c.replication,
        "same_configuration": c.same_configuration,
        "launch_noise": {str(s): {"log_sd": n.log_sd, "df": n.df, "launches": n.launches,
                                  "pairs": n.pairs}  # (in order: the same text each time)
                          for s, n in sorted(c.noise.items())},
        "client_launch_noise": {k: {"log_sd": n.log_sd, "df": n.df, "launches": n.launches,
                                    "pairs": n.pairs} for k, n in sorted(c.client_noise.items())},
        "unmatched_strata": c.unmatched_strata,
        "excluded_lines": c.excluded,
        "speculation": c.speculation,
        "load_levels": [r.to_dict() for r in c.levels],
        "crossover": c.crossover,
        "phases": {side: [p.to_dict() for p in ps] for side, ps in c.phases.items()},
        "notes": c.notes,
    }


def comparisons_json(comparisons: Sequence[Any], exit_code: int) -> str:
    return json.dumps({"exit_code": exit_code,
                       "comparisons": [comparison_dict(c) for c in comparisons]},
                      indent=2, default=str) + "\n"


def _speculation_lines(c: Any) -> list[str]:
    s = c.speculation
    if not s or "speedup" not in s:
        return []
    which = ("its same-environment baseline" if s.get("same_environment")
             else "a baseline from ANOTHER environment")
    out = [f"Speculation ({s['algorithm']}): {s['speculative_run']} vs {which} "
           f"{s['baseline_run']}: {s['spec_tps']:.1f} vs {s['baseline_tps']:.1f} tok/s, "
           f"speedup {s['speedup'] * 100:+.1f}%"]
    if "accept_len" in s:
        out.append(f"  accept length {s['accept_len']:.2f}; break-even accept length "
                   f"{s['break_even_accept_len']:.2f} (speculation pays while the accept "
                   "length stays above it)")
    out.append(f"  accept rate means: {s['accept_rate_definition']}")
    return out


def _phase_lines(c: Any) -> list[str]:
    """Per-phase time from the profiler traces' step annotations (``trace_steps``)."""
    from logpipe.analysis.step_phases import phase_line

    if not c.phases:
        return []
    out = ["Per-phase time per step, from the profiler traces (trace_steps; medians):"]
    for side, ps in c.phases.items():
        out.append(f"  {side}: " + ("; ".join(phase_line(p) for p in ps) if ps
                                   else "no marked steps (not profiled)"))
    return out


def _head_label(c: Any) -> str:
    if c.unreplicated and c.exit_code in (0, 1) and not c.same_configuration \
            and c.verdict in ("regression", "improvement", "no significant change"):
        return " [unreplicated: launch noise unknown]"
    return ""


def _level_lines(c: Any) -> list[str]:
    """Per load level: the arms' launch values, the ratio with its interval, the verdict;
    then the crossover."""
    if not c.levels:
        return []
    from logpipe.analysis.client_metrics import metric_label
    from logpipe.analysis.levels import settled

    out = [f"By load level ({metric_label(c.levels[0].metric)}, one value per launch per "
           "level, judged level by level):"]
    rows = []
    for r in c.levels:
        t = r.test
        rows.append((r.level.label,
                     ", ".join(num_text(v, 1) for v in t.values_a),
                     ", ".join(num_text(v, 1) for v in t.values_b),
                     num_text(t.ratio, 3),
                     f"{num_text(t.ci_low, 3)}–{num_text(t.ci_high, 3)}"
                     if t.ci_low is not None else "–",
                     t.verdict + ("" if settled(t) else f" ({t.method})")))
    out.append(rows_text(["level", "reference launches", "candidate launches", "ratio",
                          "95% CI", "verdict"], rows, "table").rstrip("\n").rsplit("\n", 1)[0])
    if c.crossover:
        out.append(f"Crossover: {c.crossover}")
    return out


def comparison_text(c: Any) -> str:
    head = (f"{c.candidate} vs {c.reference} (reference): {c.verdict.upper()}"
            f"{_head_label(c)} (exit {c.exit_code})")
    lines = [head, *_decision_lines(c)]
    if c.env_status == "same run":
        lines.append("Environment: same run")
    elif c.env_diff is not None:
        ident = c.env_diff.identity
        far = (f" as far as known ({c.env_diff.missing_text()})"
               if c.env_status == "comparable" and c.env_diff.missing else "")
        lines.append(f"Environment: {c.env_status}{far}" + (
            f" ({len(ident)} identity difference(s))" if ident else ""))
        for i in ident:
            lines.append(f"  {i.key}: {value_text(i.a)} → {value_text(i.b)}")
    if c.metrics:
        lines += _launch_lines(c)
        rows = [(_metric_label(m), *_launch_cells(m), _metric_verdict(m),
                 f"{m.test.n_a} / {m.test.n_b}",
                 f"{num_text(m.test.median_a)} / {num_text(m.test.median_b)}",
                 f"{m.test.p_value:.2g}" if m.test.p_value is not None else "–")
                for m in c.metrics]
        lines.append(rows_text(["metric", "launches", "ratio", "95% CI", "p", "verdict",
                                "lines (within launch)", "median ref / cand (within)",
                                "p (within)"], rows, "table")
                     .rstrip("\n").rsplit("\n", 1)[0])
    lines += _level_lines(c)
    lines += _speculation_lines(c)
    lines += _phase_lines(c)
    for name, strata in c.unmatched_strata.items():
        if strata:
            lines.append(f"Unmatched strata (running requests) only in {name}: {strata}")
    for note in c.notes:
        lines.append(f"Note: {note}")
    return "\n".join(lines) + "\n"


def comparison_markdown(c: Any) -> str:
    lines = [f"### {c.candidate} vs {c.reference}: **{c.verdict}**{_head_label(c)} "
             f"(exit {c.exit_code})", ""]
    if c.env_diff is not None and c.env_diff.identity:
        lines.append("| identity key | " + c.reference + " | " + c.candidate + " |")
        lines.append("|---|---|---|")
        for i in c.env_diff.identity:
            lines.append(f"| `{i.key}` | {value_text(i.a)} | {value_text(i.b)} |")
        lines.append("")
    lines += [f"- {x}" for x in _decision_lines(c)]
    if c.metrics:
        lines += [f"- {x.strip()}" for x in _launch_lines(c)]
        lines.append("")
        lines.append("| metric | launches | ratio | 95% CI | p | verdict | "
                     "lines (within launch) | median ref → cand (within) | p (within) |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for m in c.metrics:
            t = m.test
            p = f"{t.p_value:.2g}" if t.p_value is not None else "–"
            k, ratio, ci, lp = _launch_cells(m)
            lines.append(f"| {_metric_label(m)} | {k} | {ratio} | {ci} | {lp} | "
                         f"{_metric_verdict(m)} | {t.n_a} / {t.n_b} | {num_text(t.median_a)} → "
                         f"{num_text(t.median_b)} | {p} |")
        lines.append("")
    if c.levels:
        lines.append("| load level | ratio | 95% CI | verdict |")
        lines.append("|---|---|---|---|")
        for r in c.levels:
            t = r.test
            ci = f"{num_text(t.ci_low, 3)}–{num_text(t.ci_high, 3)}" if t.ci_low is not None \
                else "–"
            lines.append(f"| {r.level.label} | {num_text(t.ratio, 3)} | {ci} | {t.verdict} |")
        lines.append("")
        if c.crossover:
            lines.append(f"- Crossover: {c.crossover}")
    lines += [f"- {x}" for x in _speculation_lines(c)]
    lines += [f"- {x.strip()}" for x in _phase_lines(c)]
    lines += [f"- {n}" for n in c.notes]
    return "\n".join(lines).rstrip() + "\n"
