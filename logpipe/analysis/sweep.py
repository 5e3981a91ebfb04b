"""Parameter sweeps: the same environment, one key varied, the best value found.

:func:`sweep` groups runs whose identity tier is equal except for the swept key (a
treatment key such as ``speculative_num_steps``, or an identity key the user names on
purpose such as ``NCCL_ALGO``), pools the steady decode samples of each value in the most
common concurrency stratum, and reports per value the median throughput with its 95% CI,
each launch's own median (the launch is the unit, statistics.md §2b), the accept length
and the break-even accept length against the group's own baseline.  The best value is the
highest median; values that `compare`'s launch rule cannot tell apart from it are reported
as tied, and the optimum is said to be replicated only when it was judged across launches
(several launches per value, or one each against the environment's measured launch
noise); otherwise it is labelled unreplicated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.stats as sps

from logpipe.analysis.launches import MIN_LAUNCH_LINES, UNREPLICATED, judge_launches
from logpipe.analysis.load import load_runs, noise_for
from logpipe.db import StoreOrPath, using
from logpipe.env import canonical, fingerprint
from logpipe.errors import LogpipeError
from logpipe.stats import compare_samples
from logpipe.store import Store


@dataclass
class SweepPoint:
    value: str
    runs: list[str]
    n: int
    median: float | None
    ci_low: float | None
    ci_high: float | None
    accept_len: float | None
    break_even_accept_len: float | None
    speedup: float | None
    launches: list[float | None] = field(default_factory=list)
    """Each launch's steady median at the group's stratum, in the order of ``runs``."""


@dataclass
class SweepGroup:
    key: str
    stratum: int | None
    baseline_runs: list[str]
    baseline_median: float | None
    points: list[SweepPoint]
    best: list[str] = field(default_factory=list)
    verdict: str = ""
    replicated: bool = False
    """The optimum was judged across launches, not from the lines of single launches."""


@dataclass
class SweepResult:
    key: str
    groups: list[SweepGroup]
    excluded: list[tuple[str, str]]


def _resolve_key(store: Store, by: str) -> str:
    for candidate in (by, f"arg.{by}"):
        if store.one("SELECT 1 FROM run_env WHERE key = ? LIMIT 1", [candidate]):
            return candidate
    raise LogpipeError(f"no run has a value for {by!r}",
                       hint="keys are listed by `logpipe env show --run R`")


def _ci_of_median(x: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The distribution-free confidence interval of the median (order statistics of the
    binomial, scipy's ``quantile_test``): exact, O(n log n), no resampling."""
    if len(x) < 2:
        return float(x[0]), float(x[0])
    ci = sps.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(confidence)
    lo = float(ci.low) if np.isfinite(ci.low) else float(np.min(x))
    hi = float(ci.high) if np.isfinite(ci.high) else float(np.max(x))
    return lo, hi


def sweep(db: StoreOrPath, by: str, where: str | None = None, threshold: float = 0.03,
          alpha: float = 0.05, run_ids: Sequence[str] | None = None) -> SweepResult:
    """Sweep over ``by`` among the runs matching ``where`` (the user's SQL condition on
    ``runs``, from the command line) and, given ``run_ids``, among those runs only (a
    parameter: callers never build SQL from run names)."""
    with using(db, read_only=True) as store:
        key = _resolve_key(store, by)
        sql = "SELECT run_id, name, env_complete, profiled, role FROM runs WHERE true"
        params: list[Any] = []
        if run_ids is not None:
            sql += " AND list_contains(?, run_id)"
            params.append(list(run_ids))
        if where:
            sql += f" AND ({where})"
        _, rows = store.query(sql + " ORDER BY started_at NULLS LAST, name", params)
        excluded: list[tuple[str, str]] = []
        groups: dict[str, list[tuple[str, str, str | None, str]]] = {}
        for run_id, name, complete, profiled, role in rows:
            if not complete:
                excluded.append((name, "environment unknown (no captured manifest)"))
                continue
            if profiled:
                excluded.append((name, "profiled run"))
                continue
            env = {k: v for k, v, t in store.all(
                "SELECT key, value, tier FROM run_env WHERE run_id = ?", [run_id])
                if t == "identity" or k == key}
            value = env.pop(key, None)
            groups.setdefault(fingerprint(env), []).append(
                (run_id, name, None if value is None else canonical(value), role))
        result = SweepResult(key, [], excluded)
        for members in groups.values():
            values = {v for _, _, v, role in members if role != "baseline" or
                      not key.startswith("arg.speculative")}
            values.discard(None)
            values.discard("null")
            if len(values) < 2:
                excluded += [(m[1], f"no other value of {key} in its environment")
                             for m in members]
                continue
            result.groups.append(_group(store, key, members, threshold, alpha))
    return result


def _group(store: Store, key: str, members: list[tuple[str, str, str | None, str]],
           threshold: float, alpha: float) -> SweepGroup:
    ids = [rid for rid, _, _, _ in members]
    runs = dict(zip(ids, load_runs(store, ids), strict=True))
    strata: Counter[int] = Counter()
    for r in runs.values():
        for s, x in r.decode.items():
            strata[s] += len(x)
    stratum = strata.most_common(1)[0][0] if strata else -1
    speculative_key = key.startswith("arg.speculative")
    base_ids = [rid for rid, _, v, role in members
                if speculative_key and role == "baseline"]
    base = np.concatenate([runs[r].decode.get(stratum, np.array([])) for r in base_ids]) \
        if base_ids else np.array([])
    base_med = float(np.median(base)) if len(base) else None
    by_value: dict[str, list[str]] = {}
    for rid, _, v, _role in members:
        if rid in base_ids or v in (None, "null"):
            continue
        by_value.setdefault(v, []).append(rid)
    points, samples = [], {}
    for v in sorted(by_value, key=_sort_key):
        ids = by_value[v]
        x = np.concatenate([runs[r].decode.get(stratum, np.array([])) for r in ids])
        al = np.concatenate([runs[r].accept_len for r in ids])
        samples[v] = x
        med = float(np.median(x)) if len(x) else None
        lo, hi = _ci_of_median(x) if len(x) >= 2 else (None, None)
        acc = float(np.median(al)) if len(al) else None
        be = acc * base_med / med if acc and base_med and med else None
        per_launch: list[float | None] = []
        for rid in ids:
            d = runs[rid].decode.get(stratum)
            per_launch.append(float(np.median(d)) if d is not None
                              and len(d) >= MIN_LAUNCH_LINES else None)
        points.append(SweepPoint(v, [runs[r].name for r in ids], len(x), med, lo, hi, acc, be,
                                 med / base_med - 1 if med and base_med else None,
                                 per_launch))
    group = SweepGroup(key, stratum if stratum >= 0 else None,
                       [runs[r].name for r in base_ids], base_med, points)
    scored = [p for p in points if p.median is not None]
    if not scored:
        group.verdict = "insufficient data"
        return group
    top = max(scored, key=lambda p: p.median or 0)
    first = next(iter(runs.values()))
    noise = noise_for(store, first.fingerprint, first.model).get(stratum)
    tied = [top.value]
    methods = set()
    for p in scored:
        if p is top:
            continue
        within = compare_samples(samples[top.value], samples[p.value], higher_is_better=True,
                                 alpha=alpha, threshold=threshold)
        t = judge_launches(top.runs, top.launches, p.runs, p.launches, higher_is_better=True,
                           paired=False, noise=noise, within=within, alpha=alpha,
                           threshold=threshold)
        methods.add(t.method)
        if t.verdict in ("no significant change", "insufficient data"):
            tied.append(p.value)
    group.best = sorted(tied, key=_sort_key)
    group.replicated = bool(methods) and not methods & {"unreplicated", "insufficient data"}
    label = "" if group.replicated else f" ({UNREPLICATED}: one launch per value)"
    if len(tied) == 1:
        group.verdict = f"best {key.removeprefix('arg.')} = {top.value}{label}"
    else:
        group.verdict = (f"best {key.removeprefix('arg.')} ∈ {{{', '.join(group.best)}}}: "
                         f"statistically indistinguishable{label}")
    return group


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def sweep_dict(result: SweepResult) -> dict[str, Any]:
    return {
        "key": result.key,
        "groups": [{
            "stratum_running_req": g.stratum, "baseline_runs": g.baseline_runs,
            "baseline_median": g.baseline_median, "best": g.best, "verdict": g.verdict,
            "replicated": g.replicated,
            "points": [p.__dict__ for p in g.points],
        } for g in result.groups],
        "excluded": [{"run": n, "reason": r} for n, r in result.excluded],
    }
