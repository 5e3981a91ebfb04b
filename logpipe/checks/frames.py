"""Frames computed by the library for checks that SQL alone cannot express.

Each takes the open store, the suite's params and the check's verdict cache (used by
the frames that judge pairs) and returns a small polars frame.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import polars as pl

from logpipe.analysis.compare import judge_campaign
from logpipe.analysis.decide import deciding_metric, metric_name
from logpipe.analysis.judge import compare_runs
from logpipe.analysis.load import Environment, EnvNoise, load_runs, pair_noises
from logpipe.analysis.results import Comparison, Options, RunSamples
from logpipe.analysis.verdicts import Verdict, VerdictCache
from logpipe.changepoints import change_points, judge_history
from logpipe.errors import LogpipeError
from logpipe.store import Store

Frame = Callable[[Store, dict[str, Any], VerdictCache | None], pl.DataFrame]


_NEAREST_BASELINE_SQL = """
WITH p AS (
    SELECT sp.name AS spec, sp.run_id AS spec_id, r.started_at AS t,
           unnest(sp.baselines) AS base
    FROM spec_pairing sp JOIN runs r USING (run_id)
    WHERE sp.status = 'paired' AND NOT coalesce(r.profiled, false)
)
SELECT spec, base, spec_id, base_id FROM (
    SELECT p.spec, p.base, p.spec_id, b.run_id AS base_id, row_number() OVER (
        PARTITION BY p.spec
        ORDER BY abs(epoch(b.started_at) - epoch(p.t)) NULLS LAST, p.base) AS rk
    FROM p LEFT JOIN runs b ON b.name = p.base)
WHERE rk = 1
ORDER BY spec
"""


def speculation_vs_baseline(store: Store, params: dict[str, Any],
                            cache: VerdictCache | None = None) -> pl.DataFrame:
    """Each paired speculative run against its nearest same-environment baseline in time
    (of those `spec_pairing` lists), judged by `compare`'s rule: one launch each, against
    the environment's measured launch noise where the database has A/A pairs for it
    (else the within-launch verdict, labelled unreplicated).  One pair per speculative
    run keeps the check linear in the number of runs; drift between baselines is the
    history checks' business.  Verdicts whose inputs (the noise included) are unchanged
    come from ``cache``."""
    options = Options(threshold=float(params.get("threshold", 0.03)))
    cache = cache or VerdictCache()
    rows = []
    nearest = store.all(_NEAREST_BASELINE_SQL)
    environments = {str(r): (fp, model) for r, fp, model in store.all(
        "SELECT run_id, env_fingerprint, model FROM runs "
        "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [[p[3] for p in nearest]])}
    workloads = {str(r): w for r, w in store.all(
        "SELECT run_id, workload FROM run_configs_of(NULL, ?)",
        [[r for p in nearest for r in (p[2], p[3]) if r is not None]])}

    def judged_in(spec_id: str, base_id: str) -> tuple[Environment, str | None]:
        """The pair's environment (its baseline's) and the workload both launches ran."""
        both = {workloads.get(spec_id), workloads.get(base_id)}
        return (environments.get(base_id, (None, None)),
                next(iter(both)) if len(both) == 1 else None)

    # campaigns first: each speculative arm against its baseline arm, with every launch of
    # each, through compare's own function (the launch is the unit, rounds paired)
    # (a campaign's verdicts are kept as a pair's are, by everything they are judged from)
    judged: set[str] = set()
    for plan, members in store.all(
            "SELECT p.value, list(r.run_id) FROM run_env p JOIN runs r USING (run_id) "
            "WHERE p.key = 'launch.plan' GROUP BY 1 HAVING bool_or(r.role = 'speculative') "
            "ORDER BY 1"):
        key = cache.campaign_key(str(plan), options)
        arm_rows = cache.get_campaign(key)
        if arm_rows is None:
            try:
                comparisons = judge_campaign(store, str(plan), options)
            except LogpipeError:
                continue  # not a campaign with one baseline arm: judged pair by pair below
            arm_rows = [_arm_row(c) for c in comparisons]
            cache.put_campaign(key, str(plan), arm_rows)
        rows.extend(arm_rows)
        judged.update(members)
    # the other pairs' launch noise (the server's and the client's), as `compare` borrows
    # it, read together
    alone = [p for p in nearest if p[2] not in judged]
    noises = pair_noises(store, [judged_in(p[2], p[3]) for p in alone])
    pairs = []
    for spec_name, base_name, spec_id, base_id in alone:
        measured = noises[judged_in(spec_id, base_id)]
        key = cache.key(spec_id, base_id, options, repr(sorted(measured.server.items()))
                        + repr(sorted(measured.client.items())))
        pairs.append((spec_name, base_name, spec_id, base_id, measured, key, cache.get(key)))
    # the runs of the pairs judged now, loaded together (a verdict kept needs none)
    names = list(dict.fromkeys(n for p in pairs if p[6] is None for n in (p[1], p[0])))
    loaded: dict[str, RunSamples] = dict(zip(names, load_runs(store, names), strict=True))
    judged_now = iter(judge_all([(loaded[p[1]], loaded[p[0]], options, p[4])
                                 for p in pairs if p[6] is None]))
    for spec_name, base_name, spec_id, base_id, _, key, verdict in pairs:
        if verdict is None:
            verdict = next(judged_now)
            cache.put(key, spec_id, base_id, verdict)
        rows.append({"spec_run": spec_name, "baseline_run": base_name, "verdict": verdict[0],
                     "speedup": verdict[1], "detail": verdict[2]})
    return pl.DataFrame(rows, schema={"spec_run": pl.String, "baseline_run": pl.String,
                                      "verdict": pl.String, "speedup": pl.Float64,
                                      "detail": pl.String})


def _arm_row(c: Comparison) -> dict[str, Any]:
    """A campaign's arm against its baseline arm as a check row: the runs, the deciding
    metric's ratio and how it was replicated (the noise it rests on)."""
    m = deciding_metric(c)
    ratio = m.launch.ratio if m is not None and m.launch is not None else None
    launches = "; ".join(f"{arm}: {', '.join(names)}" for arm, names in c.arms.items())
    detail = (f"ratio {ratio:.3f} ({metric_name(m)}); " if ratio is not None else "") \
        + f"{c.replication}; launches {launches}"
    return {"spec_run": c.candidate, "baseline_run": c.reference, "verdict": c.verdict,
            "speedup": round(ratio - 1, 4) if ratio is not None else None, "detail": detail}


JUDGE_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Pairs judged at once (a first check of a fleet judges hundreds: numpy's draws, gathers
and sorts of the bootstrap release the GIL)."""


def judge_all(work: list[tuple[RunSamples, RunSamples, Options, EnvNoise]]
              ) -> list[Verdict]:
    """:func:`_judge` of each ``(base, spec, options, noise)``, in order, on
    :data:`JUDGE_THREADS` threads (each pair's statistics are its own: the same verdicts
    as one by one)."""
    if len(work) < 2 or JUDGE_THREADS == 1:
        return [_judge(*w) for w in work]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(JUDGE_THREADS, thread_name_prefix="logpipe-judge") as pool:
        return list(pool.map(lambda w: _judge(*w), work))


def _judge(base: RunSamples, spec: RunSamples, options: Options,
           noise: EnvNoise) -> Verdict:
    c = compare_runs(base, spec, options, noise.server, client_noise=noise.client)
    decode = [m for m in c.metrics if m.name == "decode throughput"]
    detail = "; ".join(f"@{m.stratum} running: {(m.launch or m.test).detail}" for m in decode)
    speedup = (c.speculation or {}).get("speedup")
    return (c.verdict, round(speedup, 4) if speedup is not None else None,
            detail or "; ".join(c.notes))


_SERIES_SQL = """
SELECT s.name, s.started_at, s.env_fingerprint, s.model, s.tp_size, s.dp_size, s.ep_size,
       s.pp_size, coalesce(s.spec_algorithm, 'baseline') AS spec,
       r.spec_num_steps, r.spec_eagle_topk, r.spec_num_draft_tokens,
       s.steady_gen_throughput AS tps, s.steady_stratum AS stratum
FROM run_summary s JOIN runs r USING (run_id)
WHERE s.env_complete AND NOT coalesce(s.profiled, false)
  AND s.steady_gen_throughput IS NOT NULL AND s.started_at IS NOT NULL
ORDER BY s.started_at, s.name
"""


def _series(store: Store, keys: list[str]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    cur = store.con.execute(_SERIES_SQL)
    names = [d[0] for d in cur.description]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in cur.fetchall():
        rec = dict(zip(names, row, strict=True))
        groups.setdefault(tuple(rec[k] for k in keys), []).append(rec)
    return groups


def _label(rec: dict[str, Any], with_fp: bool) -> str:
    layout = f"tp{rec['tp_size']}" + "".join(
        f" {k}{rec[f'{k}_size']}" for k in ("dp", "ep", "pp") if (rec[f"{k}_size"] or 1) > 1)
    spec = rec["spec"] if rec["spec"] == "baseline" else (
        f"{rec['spec']} s{rec['spec_num_steps']} k{rec['spec_eagle_topk']} "
        f"d{rec['spec_num_draft_tokens']}")
    text = f"{rec['model']} {layout} {spec} @{rec['stratum']} running"
    return text + (f" env {rec['env_fingerprint']}" if with_fp else "")


SERIES_KEYS = ["model", "tp_size", "dp_size", "ep_size", "pp_size", "spec", "spec_num_steps",
               "spec_eagle_topk", "spec_num_draft_tokens", "stratum"]


def history(store: Store, params: dict[str, Any],
            cache: VerdictCache | None = None) -> pl.DataFrame:
    """Per fingerprint and workload: change points in per-run steady decode throughput."""
    threshold = float(params.get("threshold", 0.03))
    rows = []
    for _, recs in _series(store, ["env_fingerprint", *SERIES_KEYS]).items():
        verdict = judge_history([float(r["tps"]) for r in recs], threshold=threshold)
        rows.append({"series": _label(recs[0], True), "runs": len(recs),
                     "status": verdict.status, "detail": verdict.detail})
    return pl.DataFrame(rows, schema={"series": pl.String, "runs": pl.Int64,
                                      "status": pl.String, "detail": pl.String})


def history_across_environments(store: Store, params: dict[str, Any],
                                cache: VerdictCache | None = None) -> pl.DataFrame:
    """Per model, layout and workload across fingerprints: each change point labelled as an
    environment shift when the fingerprint changes there, else a change within one
    environment (a drop at the end of the series is reported as a regression)."""
    threshold = float(params.get("threshold", 0.03))
    rows = []
    for _, recs in _series(store, SERIES_KEYS).items():
        fps = [r["env_fingerprint"] for r in recs]
        if len(set(fps)) < 2:
            continue  # one environment: the per-fingerprint history covers it
        values = [float(r["tps"]) for r in recs]
        if len(values) < 6:
            rows.append({"series": _label(recs[0], False), "runs": len(recs),
                         "status": "insufficient data",
                         "detail": f"{len(values)} run(s); need ≥ 6 for change points"})
            continue
        labels, status = [], "ok"
        points = change_points(values, min_magnitude=threshold)
        for cp in points:
            shift = fps[cp.index] != fps[cp.index - 1]
            kind = "environment shift" if shift else "change within one environment"
            labels.append(f"{cp.magnitude * 100:+.1f}% at run #{cp.index + 1} "
                          f"({recs[cp.index]['name']}): {kind}")
            if not shift and cp is points[-1] and cp.magnitude < -threshold \
                    and len(values) - cp.index >= 2:
                status = "regression"
        if points and status == "ok" and all(
                fps[cp.index] != fps[cp.index - 1] for cp in points):
            status = "environment shift"
        rows.append({"series": _label(recs[0], False), "runs": len(recs), "status": status,
                     "detail": "; ".join(labels) or "no change point"})
    return pl.DataFrame(rows, schema={"series": pl.String, "runs": pl.Int64,
                                      "status": pl.String, "detail": pl.String})


FRAMES: dict[str, Frame] = {
    "speculation_vs_baseline": speculation_vs_baseline,
    "history": history,
    "history_across_environments": history_across_environments,
}
