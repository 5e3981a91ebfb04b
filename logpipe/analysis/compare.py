"""Compare runs: environment first, then statistics, then a verdict.  Pure: never prints.

:func:`compare` loads runs from the database and returns one :class:`Comparison` per
candidate (each against the first run, the reference).  The order of judgement is fixed:

1. **Environment.** Identity tiers must match (``--allow-env-diff`` names keys that may
   differ, and is stamped on the report); an environment without a captured manifest is
   unknown and not comparable unless ``allow_unknown_env``.  A profiled run is never
   compared with an unprofiled one unless ``allow_profiled``.  → exit 3
2. **Statistics** per metric (:mod:`logpipe.stats`): steady decode throughput per matched
   concurrency stratum (``running_req``), prefill input throughput, accept length, accept
   rate (only under one definition), graph coverage, token usage.
   The client family (:mod:`logpipe.analysis.client`): each launch's linked benchmark
   (output and request throughput, TTFT, TPOT, ITL, E2E at p50 and p99), judged by the
   same launch rule.
3. **Verdict** by one deciding metric, declared (``Options.primary``) or by default the
   client's output throughput when every launch has a benchmark of one workload, else the
   server log's decode throughput (its strata through Holm's correction); the other
   metrics are secondary.  A regression exits 1 only when it is replicated or beyond the
   environment's measured launch noise; unreplicated, it exits 4.  Server and client
   families that disagree are said, with the known causes that apply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from logpipe.analysis import client as clients
from logpipe.analysis.decide import primary_metric
from logpipe.analysis.judge import compare_arms, judge_environment
from logpipe.analysis.load import (
    WARMUP_RUNS,
    arm_refs,
    environment_noise,
    load_run,
    load_runs,
    load_sides,
)
from logpipe.analysis.results import (
    DEFAULTS,
    EXIT_INCOMPARABLE,
    EXIT_OK,
    NO_WARMUP,
    SEVERITY,
    Comparison,
    Options,
    RunSamples,
)
from logpipe.analysis.steady import Warmup
from logpipe.db import StoreOrPath, using
from logpipe.env import RunEnv, diff
from logpipe.env.diff import NCCL_DEBUG_INFO
from logpipe.errors import InputError
from logpipe.store import Store


def compare(db: StoreOrPath, refs: Sequence[str], options: Options = DEFAULTS) -> list[Comparison]:
    """Each arm of ``refs[1:]`` against the arm ``refs[0]`` (an arm: one run, or several
    launches given as a comma-separated list)."""
    arms = arm_refs(refs)
    with using(db, read_only=True) as store:
        loaded = list(_load_arms(store, dict(enumerate(arms)), options.warmup).values())
        _distinct(loaded)
        noise = environment_noise(store, loaded[0][0], loaded)
    return [compare_arms(loaded[0], cand, options, noise.server, client_noise=noise.client,
                         pooled=noise.pooled) for cand in loaded[1:]]


def _distinct(arms: Sequence[Sequence[RunSamples]]) -> None:
    seen: dict[str, str] = {}
    for arm in arms:
        for r in arm:
            if r.run_id in seen:
                raise InputError(
                    f"run {r.name} ({r.run_id}) is given twice"
                    + (f" (as {seen[r.run_id]!r})" if seen[r.run_id] != r.name else "")
                    + ": a run compared with itself says nothing",
                    hint="give two different launches; two launches of one configuration "
                    "are an A/A pair, which measures the launch noise")
            seen[r.run_id] = r.name


def campaign_arms(store: Store, plan: str, warmup: Warmup = NO_WARMUP
                  ) -> tuple[list[RunSamples], dict[str, list[RunSamples]]]:
    """The launches of ``ab`` campaign ``plan`` from their manifests: the baseline arm and
    each candidate arm, each in round order (the last run of a launch that restarted)."""
    rows = store.all(
        "SELECT r.run_id, "
        "max(CASE WHEN e.key = 'launch.arm' THEN e.value END) AS arm, "
        "max(CASE WHEN e.key = 'launch.role' THEN e.value END) AS role, "
        "max(CASE WHEN e.key = 'launch.round' THEN e.value END) AS round "
        "FROM runs r JOIN run_env e USING (run_id) "
        "WHERE r.run_id IN (SELECT run_id FROM run_env WHERE key = 'launch.plan' "
        f"AND value = ?) AND r.run_id NOT IN ({WARMUP_RUNS}) "
        "GROUP BY r.run_id, r.started_at, r.run_seq "
        "ORDER BY r.started_at NULLS LAST, r.run_seq", [plan])
    if not rows:
        known = [p for (p,) in store.all(
            "SELECT DISTINCT value FROM run_env WHERE key = 'launch.plan' ORDER BY 1")]
        raise InputError(f"no campaign named {plan!r} in the database",
                         hint="campaigns: " + (", ".join(known) or "none (run `logpipe ab`)"))
    last: dict[tuple[str, str], tuple[str, str]] = {}
    for run_id, arm, role, round_ in rows:
        last[(str(arm), str(round_))] = (run_id, str(role))
    base_arm: list[str] = []
    arms: dict[str, list[tuple[int, str]]] = {}
    for (arm, round_), (run_id, role) in last.items():
        arms.setdefault(arm, []).append((int(round_) if round_.isdigit() else 0, run_id))
        if role == "baseline" and arm not in base_arm:
            base_arm.append(arm)
    if len(base_arm) != 1:
        raise InputError(f"campaign {plan!r} has {len(base_arm)} baseline arms",
                         hint="compare its arms with --run A1,A2 --run B1,B2")
    loaded = _load_arms(store, {arm: [rid for _, rid in sorted(members)]
                                for arm, members in arms.items()}, warmup)
    base = loaded.pop(base_arm[0])
    return base, loaded


def _load_arms(store: Store, arms: Mapping[Any, Sequence[str]], warmup: Warmup
               ) -> dict[Any, list[RunSamples]]:
    """Each arm's launches loaded (all of them together: :func:`load_runs`)."""
    every = iter(load_runs(store, [rid for ids in arms.values() for rid in ids], warmup))
    return {arm: [next(every) for _ in ids] for arm, ids in arms.items()}


def judge_campaign(store: Store, plan: str, options: Options = DEFAULTS,
                   launches: dict[str, list[str]] | None = None,
                   baseline: str | None = None) -> list[Comparison]:
    """Each candidate arm of an ``ab`` campaign against its baseline arm, launch by launch
    (paired by round).  The launches are read from the manifests in the database, or given
    (``launches``: arm → run ids in round order, ``baseline``: its arm).  ``logpipe ab``,
    ``compare --campaign`` and the report judge a campaign with this one function, with the
    options its plan recorded in the launches' manifests (the deciding metric, the
    declared treatment and allowed keys) added to ``options``."""
    options = campaign_options(store, plan, options)
    if launches is None:
        base, candidates = campaign_arms(store, plan, options.warmup)
        base_name = base[0].arm or "baseline"
    else:
        assert baseline is not None
        loaded = _load_arms(store, launches, options.warmup)
        base, base_name = loaded.pop(baseline), baseline
        candidates = loaded
    noise = environment_noise(store, base[0], [base, *candidates.values()])
    return [compare_arms(base, runs, options, noise.server, client_noise=noise.client,
                         names=(f"{plan}-{base_name}", f"{plan}-{arm}"), pooled=noise.pooled)
            for arm, runs in candidates.items()]


def campaign_options(store: Store, plan: str, options: Options) -> Options:
    """``options`` with what campaign ``plan`` recorded: its deciding metric (unless one is
    given), and the keys its own commands set differently (its declared treatment) and
    its ``allow_env_diff`` added to the keys allowed to differ."""
    recorded: dict[str, set[str]] = {}
    for key, value in store.all(
            "SELECT key, value FROM run_env WHERE key IN ('launch.primary', "
            "'launch.allow_env_diff', 'launch.treatment') AND run_id IN (SELECT run_id "
            "FROM run_env WHERE key = 'launch.plan' AND value = ?)", [plan]):
        recorded.setdefault(key, set()).update(
            v.strip() for v in str(value or "").split(",") if v.strip())
    allowed = recorded.get("launch.allow_env_diff", set()) | recorded.get(
        "launch.treatment", set())
    primaries = recorded.get("launch.primary", set())
    primary = options.primary
    if primary is None and len(primaries) == 1:
        primary = clients.parse_primary(next(iter(primaries)))
    if not allowed - options.allow_env_diff and primary == options.primary:
        return options
    return dataclasses.replace(options, allow_env_diff=options.allow_env_diff | allowed,
                               primary=primary)


def compare_campaign(db: StoreOrPath, plan: str, options: Options = DEFAULTS) -> list[Comparison]:
    with using(db, read_only=True) as store:
        return judge_campaign(store, plan, options)


def compare_with_baseline(db: StoreOrPath, ref: str, options: Options = DEFAULTS) -> Comparison:
    """A speculative run against its nearest same-environment baseline (same model, an
    environment that passes the identity and capacity judgement, not profiled; nearest in
    start time), saying which it chose and why; with none, the near misses and what
    differs.

    A baseline whose identity differs from the run's beyond what ``options`` allow can
    never pass, whatever its lines: it is told by the two environments alone (those alike
    in what decides it diffed once: :func:`_identity_differences`) and not judged.  On a
    database of 1,586 launches, one run's baseline search loaded every one of its 794
    candidates (~0.3 s each) to find none.  The near misses are the same: the candidates
    with the fewest blocking differences, judged in order of their identity differences (a
    lower bound of their blocking ones) until no other can rank among the first three.  A
    candidate is judged by what judging its environment reads (:func:`load_sides`); only
    the one chosen is loaded whole."""
    with using(db, read_only=True) as store:
        spec = load_run(store, ref, options.warmup)
        rows = store.all(
            "SELECT b.run_id, b.name, abs(epoch(b.started_at) - epoch(s.started_at)) AS gap "
            "FROM runs b, runs s WHERE s.run_id = ? AND b.role = 'baseline' "
            "AND b.model IS NOT DISTINCT FROM s.model AND b.run_id <> s.run_id "
            f"AND b.run_id NOT IN ({WARMUP_RUNS}) "
            "ORDER BY gap NULLS LAST, b.name", [spec.run_id])
        differing = _identity_differences(store, spec, [str(r[0]) for r in rows], options)
        tried: list[tuple[int, Comparison, str]] = []  # (candidate's order, judgement, name)
        screened = sorted((differing[str(r[0])], i, str(r[0])) for i, r in enumerate(rows)
                          if differing[str(r[0])])  # (identity differences, order, run)
        alike = [(i, str(r[0])) for i, r in enumerate(rows) if not differing[str(r[0])]]
        size = 1  # judged in order, in batches (their environments read together) that
        while alike:  # double up to _PROBE_BATCH: few judged beyond the first that passes
            batch, alike = alike[:size], alike[size:]
            size = min(2 * size, _PROBE_BATCH)
            for (i, run_id), (probe, name) in zip(
                    batch, _probe(store, [r for _, r in batch], spec, options), strict=True):
                if probe is None:
                    # judged like `compare --run BASE --run SPEC`: against the launch noise
                    # (the client's of the workload both ran)
                    base = load_run(store, run_id, options.warmup)
                    noise = environment_noise(store, base, [[base], [spec]])
                    c = compare_arms([base], [spec], options, noise.server,
                                     client_noise=noise.client)
                    c.notes.insert(0, f"baseline chosen: {base.name}, the nearest in time of "
                                      f"the baselines of the same model whose environment "
                                      f"matches ({len(rows)} baseline(s) of that model)")
                    return c
                tried.append((i, probe, name))
        while screened:
            ranked = sorted((_blocking(p), j) for j, p, _ in tried)
            if len(ranked) >= _NEAR_MISSES and ranked[_NEAR_MISSES - 1] < screened[0][:2]:
                break  # every candidate left blocks at least as much as its identity
            # judged a few at a time (their environments read together): as many as could
            # still rank among the nearest misses
            near = screened[:max(1, _NEAR_MISSES - len(ranked))]
            del screened[:len(near)]
            for (_, i, _), (probe, name) in zip(
                    near, _probe(store, [r for _, _, r in near], spec, options), strict=True):
                assert probe is not None  # (its identity differs: it cannot pass)
                tried.append((i, probe, name))
    c = Comparison("(none)", spec.name, "", spec.run_id, "incomparable", None,
                   options=options, verdict="incomparable", exit_code=EXIT_INCOMPARABLE)
    if spec.role != "speculative":
        c.notes.append(f"{spec.name} is not a speculative run: give its baseline as well "
                       "(compare --run BASELINE --run CANDIDATE)")
    if not tried:
        c.notes.append(f"no baseline of the same model as {spec.name} is in the database")
        return c
    c.notes.append(f"no same-environment baseline for {spec.name}; the nearest misses:")
    for _, _, probe, name in sorted((_blocking(p), i, p, n) for i, p, n in tried
                                    )[:_NEAR_MISSES]:
        why = [n for n in probe.notes if not n.startswith(("profiled", "compared"))]
        c.notes.append(f"  {name}: " + (" ".join(why) if why else
                                        "profiled: never used as a baseline"))
    return c


_NEAR_MISSES = 3
"""The baselines a run without one is shown as its nearest misses."""
_PROBE_BATCH = 8
"""The most candidates a baseline search judges at once (by their environments)."""


_IDENTITY_VIEW_SQL = """
WITH c AS (SELECT unnest(?::VARCHAR[]) AS run_id),
s AS (SELECT key FROM run_env WHERE run_id = ? AND tier = 'identity')
SELECT e.run_id,
       md5(string_agg(e.key || chr(31) || e.source || chr(31) || coalesce(e.value, chr(0)),
                      chr(30) ORDER BY e.key) FILTER (WHERE e.tier = 'identity')),
       md5(string_agg(e.key, chr(30) ORDER BY e.key)
           FILTER (WHERE e.tier <> 'identity' AND e.key IN (SELECT key FROM s))),
       bool_or(e.key = ?)
FROM run_env e SEMI JOIN c USING (run_id) GROUP BY e.run_id
"""
"""What of each candidate's environment its identity differences from the spec run's
depend on (:func:`logpipe.env.diff`: an item's tier is the candidate's entry's where it
has one): its identity entries (key, source, value), its other entries of keys in the
spec run's identity, and whether its log printed NCCL's variables."""


def _identity_differences(store: Store, spec: RunSamples, candidates: list[str],
                          options: Options) -> dict[str, int]:
    """Each candidate's identity differences from ``spec`` beyond what ``options``
    allow, diffed once for each distinct :data:`_IDENTITY_VIEW_SQL` view (with its
    fingerprint and completeness): candidates alike there have the same differences.  A
    file of 1,586 launches holds 794 baselines of ~54 KB environments in 91 such views:
    every environment read and diffed took ~1.3 s of each search, ~0.4 s so."""
    if not candidates:
        return {}
    views = {str(r[0]): tuple(r[1:]) for r in store.all(
        _IDENTITY_VIEW_SQL, [candidates, spec.run_id, NCCL_DEBUG_INFO])}
    if spec.env.entries and store.one("SELECT 1 FROM run_env WHERE run_id = ? LIMIT 1",
                                      [spec.run_id]) is None:
        views = {}  # the run's identity keys unknown to SQL: every candidate its own
    facts = {str(r): (name, fp, bool(complete)) for r, name, fp, complete in store.all(
        "SELECT run_id, name, env_fingerprint, env_complete FROM runs "
        "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [candidates])}
    # (a run without entries in run_env, e.g. of a database older than it, is its own)
    key_of = {rid: (views.get(rid, rid), facts[rid][1:]) for rid in candidates}
    first: dict[tuple[Any, Any], str] = {}
    for rid in candidates:
        first.setdefault(key_of[rid], rid)
    envs = store.env_texts(list(first.values()))
    counts: dict[str, int] = {}
    for rid, env in envs.items():
        name, _, complete = facts[rid]
        d = diff(str(name), RunEnv.from_json(env, complete), spec.name, spec.env)
        counts[rid] = len(set(d.identity_keys()) - options.allow_env_diff)
    return {rid: counts[first[key_of[rid]]] for rid in candidates}


def _probe(store: Store, run_ids: list[str], spec: RunSamples, options: Options
           ) -> list[tuple[Comparison | None, str]]:
    """Candidate baselines judged against ``spec`` by their environments
    (:func:`load_sides`): for each, (None, its name) where it can be the baseline, else
    (the judgement saying why not, its name)."""
    out: list[tuple[Comparison | None, str]] = []
    for base in load_sides(store, run_ids, options.warmup):
        probe = Comparison(base.name, spec.name, base.run_id, spec.run_id, "comparable", None,
                           options=options)
        ok = judge_environment(base, spec.side(), probe, options) and not base.profiled
        out.append((None if ok else probe, base.name))
    return out


def _blocking(p: Comparison) -> int:
    """What keeps a near miss from being the baseline: its identity differences and its
    blocking capacity ones."""
    d = p.env_diff
    return len(d.identity) + sum(j.blocks for j in p.capacity) if d else 0


def overall_exit(comparisons: Sequence[Comparison]) -> int:
    codes = {c.exit_code for c in comparisons}
    return next((c for c in SEVERITY if c in codes), EXIT_OK)




def campaign_rounds(comparisons: Sequence[Comparison], plan: str, baseline: str
                    ) -> tuple[int | None, dict[str, dict[int, float | None]]]:
    """Each arm's rounds as the judgement saw them: every launch's steady decode median
    at the stratum the verdict leads with (one definition of a launch's throughput, for
    ``ab``, ``compare --campaign`` and the report alike).  Returns the stratum and
    ``{arm: {round: value}}``; launches are named ``PLAN-ARM-rN``."""
    stratum: int | None = None
    rounds: dict[str, dict[int, float | None]] = {}
    for c in comparisons:
        m = primary_metric(c)
        if m is None or m.launch is None:
            continue
        stratum = m.stratum
        for arm, names, values in ((baseline, m.launch.names_a, m.launch.values_a),
                                   (c.candidate.removeprefix(plan + "-"), m.launch.names_b,
                                    m.launch.values_b)):
            for name, value in zip(names, values, strict=True):
                round_ = name.rsplit("-r", 1)[-1]
                if round_.isdigit():
                    rounds.setdefault(arm, {})[int(round_)] = value
    return stratum, rounds
