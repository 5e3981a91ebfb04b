"""The counters family: a launch's values from its engine's own Prometheus counters.

``logpipe launch`` snapshots ``GET /metrics`` before and after each bench (each load
level); the ``counter_deltas`` view takes after minus before.  Those are exact totals
over the bench: the tokens generated, the verify steps and accepted tokens, the
latency histograms' sums and counts.  They give a launch a value where the server log
has too few stats windows (vLLM prints one every 10 s) and an acceptance length exact for
the level, not a window average.  One value per launch (per level), judged by the same
launch rule as the other families.  Throughput is per second of the bench's own
duration (its record's), not of the snapshots' window: that also holds the bench
client's start-up (5 s of imports for vLLM's client against 1-7 s benches here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from logpipe.analysis.client_metrics import COUNTERS_PRIMARY
from logpipe.analysis.launches import Noise, pool_noise
from logpipe.analysis.levels import Level, finite_level, level_of
from logpipe.store import Store


@dataclass(frozen=True)
class CounterMetric:
    key: str
    name: str
    unit: str
    higher_is_better: bool | None
    """None: a diagnostic, never gating (the acceptance length explains a speedup)."""


COUNTER_METRICS = (
    CounterMetric(COUNTERS_PRIMARY, "output throughput (counters)", "tok/s", True),
    CounterMetric("counter_mean_ttft_ms", "mean TTFT (counters)", "ms", False),
    CounterMetric("counter_mean_itl_ms", "mean ITL (counters)", "ms", False),
    CounterMetric("counter_accept_length", "accept length (counters)", "tokens/step", None),
)


@dataclass
class LaunchCounters:
    """A launch's counter values: over all its benches, and per load level."""

    values: dict[str, float]
    levels: dict[Level, dict[str, float]]
    source: str | None
    """The engine's metrics the throughput is counted from (``vllm:generation_tokens_total``)."""


def _values(totals: dict[str, float], window_s: float | None, rule: str | None
            ) -> dict[str, float]:
    out: dict[str, float] = {}
    tokens = totals.get("generated_tokens")
    if tokens and window_s and window_s > 0:
        out[COUNTERS_PRIMARY] = tokens / window_s
    for key, metric in (("counter_mean_ttft_ms", "ttft_seconds"),
                        ("counter_mean_itl_ms", "itl_seconds")):
        n = totals.get(f"{metric}:count")
        if n:
            out[key] = 1000.0 * totals.get(f"{metric}:sum", 0.0) / n
    drafts = totals.get("spec_drafts")
    if drafts:
        if rule == "accepted" and "spec_accepted_tokens" in totals:
            out["counter_accept_length"] = 1.0 + totals["spec_accepted_tokens"] / drafts
        elif rule == "generated" and tokens:
            out["counter_accept_length"] = tokens / drafts
    return out


def launch_counters(store: Store, run_id: str) -> LaunchCounters:
    """The launch's counter deltas (``counter_deltas``): each level's values, and the
    launch's over all its benches.  Tokens are per second of the bench's own duration at
    the level (the span of its requests, from its record); without a record, of the
    window between the two snapshots, which also holds the bench client's start-up."""
    from logpipe.engines import engine_named

    rows = store.all(
        "SELECT level, level_by, engine, metric, part, sum(delta), max(window_s) "
        "FROM counter_deltas WHERE run_id = ? AND part <> 'bucket' "
        "GROUP BY ALL ORDER BY 1 NULLS LAST", [run_id])
    if not rows:
        return LaunchCounters({}, {}, None)
    per_level: dict[tuple[Any, Any], dict[str, float]] = {}
    windows: dict[tuple[Any, Any], float] = {}
    engine = None
    for level, level_by, eng, metric, part, delta, window in rows:
        engine = engine or eng
        key = metric if part == "total" else f"{metric}:{part}"
        per_level.setdefault((level, level_by), {})[key] = float(delta or 0.0)
        if window is not None:
            windows[(level, level_by)] = float(window)
    # the time base: the bench's own duration at the level (its requests' span), else the
    # snapshots' window (which also holds the bench client's start-up: seconds of idle)
    durations: dict[Level | None, float] = {}
    for conc, rate, dur in store.all(
            "SELECT max_concurrency, request_rate, sum(duration_s) FROM bench_results "
            "WHERE run_id = ? AND duplicate_of IS NULL AND duration_s > 0 GROUP BY ALL",
            [run_id]):
        durations[Level(finite_level(conc), finite_level(rate))] = float(dur)
    timed_by_bench = True
    for key in list(windows):
        level, level_by = key
        lv = level_of(level, level_by) if level is not None else None
        bench = durations.get(lv) if lv is not None else (
            next(iter(durations.values())) if len(durations) == 1 else None)
        if bench is not None:
            windows[key] = bench
        else:
            timed_by_bench = False
    found = engine_named(engine) if engine else None
    rule = found.counters.accept_length if found else None
    totals: dict[str, float] = {}
    for values in per_level.values():
        for k, v in values.items():
            totals[k] = totals.get(k, 0.0) + v
    window_s = sum(windows.values())
    levels: dict[Level, dict[str, float]] = {}
    for (level, level_by), values in per_level.items():
        if level is None:
            continue
        levels[level_of(level, level_by)] = _values(values, windows.get((level, level_by)),
                                                    rule)
    source = None
    if found is not None:
        names = [n for n, neutral in found.counters.names.items()
                 if neutral == "generated_tokens"]
        source = (f"{names[0]}_total" if names else "the engine's counters") + (
            " over each bench's duration (GET /metrics before and after)" if timed_by_bench
            else " over the window between the snapshots before and after each bench "
            "(it includes the bench client's start-up)")
    return LaunchCounters(_values(totals, window_s, rule), levels, source)


def counter_noise(store: Store, groups: dict[str, list[str]]) -> dict[str, Noise]:
    """The environment's launch noise of each counter metric: the pooled spread of the
    counter values of each group of repeat launches, profiled launches left out."""
    members = [r for g in groups.values() for r in g]
    counted = {r for (r,) in store.all(
        "SELECT DISTINCT run_id FROM metric_snapshots WHERE phase IS NOT NULL AND "
        "list_contains(?::VARCHAR[], run_id) AND run_id NOT IN (SELECT run_id FROM run_env "
        "WHERE key = 'launch.profile')", [members])} if members else set()
    values = {r: launch_counters(store, r).values for r in counted}
    out: dict[str, Noise] = {}
    for m in COUNTER_METRICS:
        if m.higher_is_better is None:
            continue
        noise = pool_noise({label: [values[r][m.key] for r in members
                                    if m.key in values.get(r, {})]
                            for label, members in groups.items()})
        if noise is not None:
            out[m.key] = noise
    return out


def have_counters(launches: Sequence[Any]) -> bool:
    """Every launch has a counted output throughput."""
    return bool(launches) and all(COUNTERS_PRIMARY in r.counters.values for r in launches)


def describe_accept_length(ref: Sequence[Any], cand: Sequence[Any]) -> str:
    """The acceptance length the counters give each arm that speculates: the median over
    its launches, and per load level."""
    parts = []
    for arm in (ref, cand):
        values = [r.counters.values["counter_accept_length"] for r in arm
                  if "counter_accept_length" in r.counters.values]
        if not values:
            continue
        levels: dict[Level, list[float]] = {}
        for r in arm:
            for lv, vals in r.counters.levels.items():
                if "counter_accept_length" in vals:
                    levels.setdefault(lv, []).append(vals["counter_accept_length"])
        per = ", ".join(f"{lv.label} {float(np.median(v)):.2f}"
                        for lv, v in sorted(levels.items(), key=lambda kv: kv[0].load))
        name = arm[0].arm or arm[0].name
        parts.append(f"{name} {float(np.median(values)):.2f}" + (f" ({per})" if per else ""))
    return ("accept length from the engine's counters (tokens a request gains per verify "
            "step, exact over each bench; median of the launches): " + "; ".join(parts))
