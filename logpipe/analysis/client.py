"""The client family: what users of a server feel, from each launch's linked benchmark.

The server log explains; the client's benchmark is what users see (output throughput,
TTFT, TPOT, ITL, end-to-end latency, failed requests).  Each launch gives one value per
metric (the median over its benchmark records, where several), judged by the same
launch rule as the server log (statistics.md §2b, §2c).  This module reads those values
and the environment's client-side launch noise, chooses the deciding metric, and checks
the known causes of a disagreement between the two families.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from logpipe.analysis.client_metrics import (
    BY_COLUMN,
    CLIENT_METRICS,
    DEFAULT_CLIENT_PRIMARY,
    PRIMARY_CHOICES,
    SERVER_PRIMARY,
    ClientMetric,
    metric_label,
    parse_primary,
)
from logpipe.analysis.launches import Noise, pool_noise
from logpipe.store import Store

_FACTS = ("completed", "num_prompts", "max_concurrency", "request_rate", "mean_ttft_ms")


@dataclass
class Bench:
    """A launch's client-side figures (median over its benchmark records) and the facts
    that say whether two launches ran the same workload."""

    values: dict[str, float] = field(default_factory=dict)
    records: int = 0
    completed: float | None = None
    num_prompts: float | None = None
    max_concurrency: float | None = None
    request_rate: float | None = None
    mean_ttft_ms: float | None = None
    client: str | None = None
    """The bench client and its version where the record says it (``tool version``)."""

    @property
    def failed(self) -> int | None:
        if self.completed is None or self.num_prompts is None:
            return None
        return max(0, int(self.num_prompts - self.completed))


def bench_of(store: Store, run_id: str) -> Bench:
    """The launch's benchmark, from its linked ``bench_results`` (the public view: a console
    summary that repeats a JSONL record counts once)."""
    cols = [m.column for m in CLIENT_METRICS] + list(_FACTS)
    row = store.one(
        "SELECT count(*), " + ", ".join(f"median({c})" for c in cols)
        + ", string_agg(DISTINCT tool || coalesce(' ' || sglang_version, ''), ', ') "
        "FROM bench_results WHERE run_id = ? AND duplicate_of IS NULL", [run_id])
    if row is None or not row[0]:
        return Bench()
    values = dict(zip(cols, row[1:-1], strict=True))
    b = Bench({m.column: float(values[m.column]) for m in CLIENT_METRICS
               if values[m.column] is not None}, int(row[0]), client=row[-1])
    for fact in _FACTS:
        v = values[fact]
        setattr(b, fact, float(v) if v is not None else None)
    return b


def default_primary(benches: Sequence[Bench | None], workloads: Sequence[str | None]
                    ) -> tuple[str, str]:
    """The deciding metric when none is declared, and why: the client's output throughput
    when every launch judged has a benchmark of one workload (what users feel), else the
    server log's decode throughput."""
    have = [b is not None and DEFAULT_CLIENT_PRIMARY in b.values for b in benches]
    if benches and all(have) and len(set(workloads)) == 1 and workloads[0]:
        return DEFAULT_CLIENT_PRIMARY, ("default: every launch has a benchmark of one "
                                        "workload")
    if not any(have):
        return SERVER_PRIMARY, "default: no launch has a benchmark the verdict may use"
    if len(set(workloads)) > 1:
        return SERVER_PRIMARY, "default: the launches' benchmarks are of different workloads"
    return SERVER_PRIMARY, (f"default: {have.count(False)} of {len(have)} launches have no "
                            "benchmark the verdict may use")


def client_noise(store: Store, groups: dict[str, list[str]]) -> dict[str, Noise]:
    """The environment's launch noise of each client metric: the pooled spread of the
    benchmark values of each group of repeat launches (``compare.repeat_groups``), the
    launches whose bench ran a profiler window left out."""
    if not groups:
        return {}
    cols = ", ".join(f"median({m.column})" for m in CLIENT_METRICS)
    values = {row[0]: row[1:] for row in store.all(
        f"SELECT run_id, {cols} FROM bench_results WHERE list_contains(?::VARCHAR[], "
        "run_id) AND run_id NOT IN (SELECT run_id FROM run_env WHERE key = "
        "'launch.profile') GROUP BY run_id", [[r for g in groups.values() for r in g]])}
    out: dict[str, Noise] = {}
    for i, m in enumerate(CLIENT_METRICS):
        per_group = {label: [float(values[r][i]) for r in members
                             if r in values and values[r][i] is not None]
                     for label, members in groups.items()}
        noise = pool_noise(per_group)
        if noise is not None:
            out[m.column] = noise
    return out


def cold_launches(names: Sequence[str], benches: Sequence[Bench | None]) -> list[str]:
    """Launches of one arm whose mean TTFT is far above the arm's other launches (a cold
    first launch: kernel and JIT caches filled during its bench): more than twice the
    median of the others, and by more than 10 robust deviations of theirs where they
    have a spread (hyperfine's cold-run rule)."""
    ttft = [(n, b.mean_ttft_ms if b is not None else None) for n, b in zip(
        names, benches, strict=True)]
    known = [(n, v) for n, v in ttft if v is not None and v > 0]
    if len(known) < 2:
        return []
    cold = []
    for i, (name, v) in enumerate(known):
        others = np.array([x for j, (_, x) in enumerate(known) if j != i])
        med = float(np.median(others))
        mad = float(np.median(np.abs(others - med))) * 1.4826
        if v > 2 * med and (mad == 0 or (v - med) / mad > 10):
            cold.append(f"{name} (mean TTFT {v:.0f} ms against {med:.0f} ms for the arm's "
                        "other launches)")
    return cold


def disagreement_causes(ref: Sequence[Any], cand: Sequence[Any]) -> list[str]:
    """The known causes of a server/client disagreement that apply to these launches
    (``RunSamples``: ``bench``, ``client_disturbed`` and ``name``)."""
    causes = []
    profiled = [r.name for r in (*ref, *cand) if r.client_disturbed]
    if profiled:
        causes.append("a profiler window inside the bench of " + ", ".join(profiled)
                      + " (its client numbers include the stall)")
    for arm in (ref, cand):
        cold = cold_launches([r.name for r in arm], [r.bench for r in arm])
        if cold:
            causes.append("a cold launch: " + "; ".join(cold))
    failed = [f"{r.name} ({r.bench.failed} of {r.bench.num_prompts:.0f})"
              for r in (*ref, *cand) if r.bench.failed]
    if failed:
        causes.append("failed requests: " + ", ".join(failed))
    missing = [r.name for r in (*ref, *cand) if not r.bench.records]
    if missing:
        causes.append("no benchmark linked to " + ", ".join(missing))

    def facts(runs: Sequence[Any], attr: str) -> set[Any]:
        return {getattr(r.bench, attr) for r in runs if r.bench.records}

    for attr, what in (("completed", "completed requests"),
                       ("max_concurrency", "concurrency"), ("request_rate", "request rate")):
        a, b = facts(ref, attr), facts(cand, attr)
        if a and b and a != b:
            causes.append(f"different {what}: {_set(a)} against {_set(b)}")
    a, b = facts(ref, "client"), facts(cand, "client")
    if a and b and a != b:
        causes.append(f"different bench clients: {_set(a)} against {_set(b)} (their "
                      "timings may not be comparable: vLLM 0.34's client stamps TTFT at the "
                      "first reasoning token)")
    return causes


def _set(values: set[Any]) -> str:
    shown = sorted(("–" if v is None else f"{v:g}" if isinstance(v, float) else str(v))
                   for v in values)
    return "/".join(shown)


def disagree(server_ratio: float, client_ratio: float, threshold: float,
             spread: float | None) -> bool:
    """The families disagree when their ratios point opposite ways beyond the practical
    threshold, or lie further apart (on the log scale) than twice their combined launch
    noise, and never by less than three thresholds (a client that sees +12% where the log
    says +5% is not news)."""
    ls, lc = math.log(server_ratio), math.log(client_ratio)
    floor = math.log1p(threshold)
    if (ls > floor and lc < -floor) or (ls < -floor and lc > floor):
        return True
    return abs(ls - lc) > max(3 * floor, 2 * (spread or 0.0))


__all__ = ["BY_COLUMN", "CLIENT_METRICS", "DEFAULT_CLIENT_PRIMARY", "PRIMARY_CHOICES",
           "SERVER_PRIMARY", "Bench", "ClientMetric", "bench_of", "client_noise",
           "cold_launches", "default_primary", "disagree", "disagreement_causes",
           "metric_label", "parse_primary"]
