"""Load levels: where speculation pays and where it costs.

Speculative decoding helps at low load and can hurt at high load.  A launch benched at
several loads (``ab`` with ``levels``, or a user's shell loop over ``--max-concurrency``
or ``--request-rate``) has one benchmark record per level; each record says its level
(``max_concurrency``, ``request_rate``).  Per level, each launch gives one value (the
median of its records at that level) and the arms are judged by the launch rule
(statistics.md §2b: paired by round where the rounds are recorded); the levels in load
order then locate the crossover, or say that the intervals do not.

The environment's client-side launch noise is not borrowed here: it is measured on
launches' medians over all their records, which mix levels; a level is judged on its own
rounds, and a level with one launch a side is unreplicated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from logpipe.analysis.client_metrics import (
    CLIENT_METRICS,
    SERVER_PRIMARY,
    higher_is_better,
    metric_label,
)
from logpipe.analysis.launches import MIN_LAUNCH_LINES, LaunchTest, judge_launches

if TYPE_CHECKING:
    from logpipe.store import Store


@dataclass(frozen=True)
class Level:
    """One load: the bench's request concurrency cap and request rate (None: unbounded,
    every request sent at once)."""

    concurrency: float | None
    rate: float | None

    @property
    def label(self) -> str:
        parts = []
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency:g}")
        if self.rate is not None:
            parts.append(f"rate {self.rate:g}/s")
        return ", ".join(parts) or "unbounded"

    @property
    def load(self) -> tuple[float, float]:
        """Sort key, lightest first: by concurrency, then rate (unbounded is heaviest)."""
        return (self.concurrency if self.concurrency is not None else math.inf,
                self.rate if self.rate is not None else math.inf)


def finite_level(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isinf(x) or math.isnan(x) else x


def launch_levels(store: Store, run_id: str) -> dict[Level, dict[str, float]]:
    """Each load level the launch's benchmark ran, with the median of each client metric
    over its records at that level (a console summary repeating a JSONL record counts
    once)."""
    cols = [m.column for m in CLIENT_METRICS]
    rows = store.all(
        "SELECT max_concurrency, request_rate, "
        + ", ".join(f"median({c})" for c in cols)
        + " FROM bench_results WHERE run_id = ? AND duplicate_of IS NULL "
        "GROUP BY ALL ORDER BY 1 NULLS LAST, 2 NULLS LAST", [run_id])
    out: dict[Level, dict[str, float]] = {}
    for row in rows:
        level = Level(finite_level(row[0]), finite_level(row[1]))
        out[level] = {c: float(v) for c, v in zip(cols, row[2:], strict=True)
                      if v is not None}
    return out


def server_levels(store: Store, run_id: str) -> dict[Level, dict[str, float]]:
    """Each load level's steady decode median of the server log, from the lines inside
    the level's window (``level_windows``: the counter snapshots around its bench); a
    level with fewer than :data:`MIN_LAUNCH_LINES` steady lines has none."""
    if store.one("SELECT 1 FROM level_windows WHERE run_id = ? LIMIT 1", [run_id]) is None:
        return {}  # no snapshots timed its levels (and its batch states cost a scan)
    rows = store.all(
        "SELECT w.level, w.level_by, median(b.gen_throughput), count(*) "
        "FROM run_batch_states(?) b JOIN level_windows w ON w.run_id = b.run_id "
        "AND b.ts >= w.began_at AND b.ts <= w.ended_at "
        "WHERE b.kind IN ('decode', 'window') AND b.state = 'steady' "
        "AND b.gen_throughput IS NOT NULL GROUP BY ALL", [run_id])
    out: dict[Level, dict[str, float]] = {}
    for level, level_by, median, n in rows:
        if n >= MIN_LAUNCH_LINES and median is not None:
            out[level_of(level, level_by)] = {SERVER_PRIMARY: float(median)}
    return out


def level_of(level: Any, level_by: str | None) -> Level:
    """The :class:`Level` a launch's ``--levels`` value is, by what it sets."""
    return Level(finite_level(level) if level_by == "max_concurrency" else None,
                 finite_level(level) if level_by == "request_rate" else None)


@dataclass
class LevelResult:
    """One level: the arms' launch values of the metric and their launch-level test."""

    level: Level
    metric: str
    test: LaunchTest

    def to_dict(self) -> dict[str, Any]:
        t = self.test
        return {"level": self.level.label, "max_concurrency": self.level.concurrency,
                "request_rate": self.level.rate, "metric": self.metric,
                "verdict": t.verdict, "ratio": t.ratio, "ci_low": t.ci_low,
                "ci_high": t.ci_high, "p_value": t.p_value, "method": t.method,
                "values_a": t.values_a, "values_b": t.values_b,
                "round_ratios": t.round_ratios}


def shared_levels(arms: Sequence[Sequence[dict[Level, dict[str, float]]]]) -> list[Level]:
    """The levels every launch of every arm ran, lightest first."""
    launches = [levels for arm in arms for levels in arm]
    if not launches:
        return []
    common = set(launches[0])
    for levels in launches[1:]:
        common &= set(levels)
    return sorted(common, key=lambda lv: lv.load)


def judge_levels(ref: Sequence[tuple[str, dict[Level, dict[str, float]]]],
                 cand: Sequence[tuple[str, dict[Level, dict[str, float]]]], metric: str,
                 *, paired: bool, alpha: float, threshold: float) -> list[LevelResult]:
    """Per level that every launch ran (two at least): the candidate arm against the
    reference, one value per launch, by the launch rule."""
    levels = shared_levels([[lv for _, lv in ref], [lv for _, lv in cand]])
    if len(levels) < 2:
        return []
    higher = higher_is_better(metric)
    out = []
    for level in levels:
        test = judge_launches(
            [n for n, _ in ref], [lv[level].get(metric) for _, lv in ref],
            [n for n, _ in cand], [lv[level].get(metric) for _, lv in cand],
            higher_is_better=higher, paired=paired, noise=None, alpha=alpha,
            threshold=threshold)
        out.append(LevelResult(level, metric, test))
    return out


def settled(test: LaunchTest) -> bool:
    """Whether a level's verdict rests on replicated launches (not one launch a side)."""
    return test.method not in ("unreplicated", "insufficient data")


def _pct(ratio: float, higher_is_better: bool) -> float:
    """The change users feel, in percent (positive: better)."""
    return (ratio - 1) * 100 if higher_is_better else (1 / ratio - 1) * 100


def crossover(results: Sequence[LevelResult]) -> str | None:
    """Where the candidate stops paying, from the per-level verdicts in load order: the
    heaviest level where it is better and the lightest where it is worse, when every
    better level is lighter than every worse one; else what the intervals show."""
    if len(results) < 2:
        return None
    metric = results[0].metric
    higher = higher_is_better(metric)
    # a level with one launch a side (or none) says nothing about where the crossover is
    judged = [r for r in results if settled(r.test)]
    better = [r for r in judged if r.test.verdict == "improvement"]
    worse = [r for r in judged if r.test.verdict == "regression"]
    span = f"{results[0].level.label} to {results[-1].level.label}"

    def changes(rs: Sequence[LevelResult]) -> str:
        vals = sorted(_pct(r.test.ratio, higher) for r in rs if r.test.ratio is not None)
        if not vals:
            return ""
        return (f"{vals[0]:+.0f}%" if len(vals) == 1 or round(vals[0]) == round(vals[-1])
                else f"{vals[0]:+.0f}% to {vals[-1]:+.0f}%")

    name = metric_label(metric)
    if not judged:
        return (f"no crossover located: no level has the launches to judge it ({span}; "
                "a level needs two rounds or more: one launch a side is unreplicated)")
    if better and not worse and len(better) == len(results):
        return f"the candidate pays at every level measured ({span}: {changes(better)} " \
               f"{name}); no crossover in range"
    if worse and not better and len(worse) == len(results):
        return f"the candidate costs at every level measured ({span}: {changes(worse)} " \
               f"{name}); no crossover in range"
    if better and worse:
        last_better = max(better, key=lambda r: r.level.load)
        first_worse = min(worse, key=lambda r: r.level.load)
        if last_better.level.load < first_worse.level.load:
            return (f"the candidate pays up to {last_better.level.label} ({changes(better)} "
                    f"{name}); from {first_worse.level.label} it costs "
                    f"({changes(worse)}): break-even between them")
        return ("no crossover located: better and worse levels interleave ("
                + ", ".join(f"{r.level.label}: {r.test.verdict}" for r in results) + ")")
    if better or worse:
        some, word = (better, "pays") if better else (worse, "costs")
        return (f"the candidate {word} at " + ", ".join(r.level.label for r in some)
                + f" ({changes(some)} {name}); no other level differs significantly: the "
                "intervals do not locate a break-even")
    return f"no level differs significantly ({span}): no crossover in range"
