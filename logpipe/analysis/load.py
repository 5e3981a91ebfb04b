"""Loading runs for judging: a run's steady samples, launches pooled into an arm, and the
environment's measured launch noise (configurations repeated in it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from logpipe import summaries
from logpipe.analysis import client as clients
from logpipe.analysis.client import Bench, bench_of
from logpipe.analysis.counters import LaunchCounters, counter_noise, launch_counters
from logpipe.analysis.launches import (
    Noise,
    pool_noise,
)
from logpipe.analysis.levels import launch_levels, server_levels
from logpipe.analysis.pairing import LOADS_ONE_BY_ONE, Load, Side, loads_of
from logpipe.analysis.results import NO_WARMUP, RunSamples
from logpipe.analysis.steady import DECODE_KINDS, JUDGED, Warmup, steady_lines
from logpipe.analysis.step_phases import load_steps
from logpipe.env import RunEnv
from logpipe.errors import InputError
from logpipe.query import resolve_runs
from logpipe.store import Store

# ------------------------------------------------------------------------------ load



Counts = list[tuple[str, int | None, float | None, str | None, int]]
"""A run's batch lines as judging reads them: ``(series, stratum, value, label, n)`` rows
of ``run_judged_counts`` (``schemas/views.sql`` names the series)."""


def judged_counts(store: Store, run_id: str, warmup: Warmup = NO_WARMUP) -> Counts:
    """What judging reads of a run's lines, counted: the counts ingest kept where they are
    current, else computed now; with a configured warm-up, counted from the lines
    (:func:`count_lines`)."""
    return judged_counts_of_runs(store, [run_id], warmup)[run_id]


def judged_counts_of_runs(store: Store, run_ids: Sequence[str],
                          warmup: Warmup = NO_WARMUP) -> dict[str, Counts]:
    """:func:`judged_counts` of each of ``run_ids``: those of the runs whose kept counts are
    current in two statements for all of them, the others' computed run by run."""
    if warmup.lines > 0 or warmup.seconds > 0:
        return {r: count_lines(steady_lines(store, r, warmup, JUDGED)) for r in run_ids}
    kept = summaries.kept_of(store, list(run_ids))
    out: dict[str, Counts] = {r: [] for r in run_ids}
    # (judged_counts_of(NULL, ids): the kept rows of ids; (id, NULL): one run's, counted now)
    statements = ([[None, sorted(kept)]] if kept else []) + [[r, None] for r in run_ids
                                                             if r not in kept]
    for params in statements:
        for rid, a, b, c, d, n in store.all(
                "SELECT run_id, series, stratum, value, label, n FROM judged_counts_of(?, ?)",
                params):
            out[str(rid)].append((str(a), b, c, d, int(n)))
    return out


def count_lines(lines: pl.DataFrame) -> Counts:
    """``run_judged_counts``' rows of the series judging reads, counted from a run's lines
    (:func:`~logpipe.analysis.steady.steady_lines`, where a warm-up is configured)."""
    out: Counts = []

    def add(series: str, frame: pl.DataFrame, stratum: str | None, value: str | None,
            label: str | None = None) -> None:
        keys = [c for c in (stratum, value, label) if c is not None]
        for row in frame.group_by(keys).len().iter_rows(named=True):
            out.append((series, row[stratum] if stratum else None,
                        row[value] if value else None, row[label] if label else None,
                        int(row["len"])))

    steady = lines.filter(pl.col("state") == "steady")
    sd = steady.filter(pl.col("kind").is_in(DECODE_KINDS))
    add("decode", sd, "running_req", "gen_throughput")
    for name in ("accept_len", "accept_rate", "token_usage"):
        add(name, sd.filter(pl.col(name).is_not_null()), None, name)
    add("prefill", steady.filter((pl.col("kind") == "prefill")
                                 & pl.col("input_throughput").is_not_null()),
        None, "input_throughput")
    graph = lines.filter(pl.col("kind").is_in(DECODE_KINDS) & pl.col("cuda_graph").is_not_null()
                         ).with_columns(pl.col("past_warmup").fill_null(False).cast(pl.Int64),
                                        pl.col("cuda_graph").cast(pl.Float64))
    add("graph", graph, "past_warmup", "cuda_graph")
    add("excluded", lines.filter(pl.col("state") != "steady"), None, None, "reason")
    return out


def judged_samples(counts: Counts) -> dict[str, Any]:
    """:class:`RunSamples`' fields of the lines, from their counts: each value repeated as
    many times as lines have it, in ascending order (no statistic judging computes
    depends on the lines' order)."""
    rows: dict[str, list[tuple[int | None, float | None, str | None, int]]] = {}
    for series, stratum, value, label, n in counts:
        rows.setdefault(series, []).append((stratum, value, label, n))

    def values(series: str, stratum: int | None = None) -> np.ndarray:
        got = sorted((v, n) for s, v, _, n in rows.get(series, ())
                     if v is not None and (stratum is None or s == stratum))
        return np.repeat(np.array([v for v, _ in got], dtype=float),
                         np.array([n for _, n in got], dtype=np.int64))

    strata = sorted({int(s) for s, v, _, _ in rows.get("decode", ())
                     if s is not None and v is not None})
    graph = rows.get("graph", [])
    counted = [(v, n) for s, v, _, n in graph if s == 1]
    excluded: dict[str, int] = {}
    for _, _, label, n in rows.get("excluded", ()):
        excluded[str(label)] = excluded.get(str(label), 0) + n
    return {
        "decode": {s: values("decode", s) for s in strata},
        "accept_len": values("accept_len"), "accept_rate": values("accept_rate"),
        "prefill": values("prefill"), "token_usage": values("token_usage"),
        "graph_on": sum(n for v, n in counted if v), "graph_total": sum(n for _, n in counted),
        "graphs_off": graphs_off(counts),
        "excluded": dict(sorted(excluded.items())),
    }


def graphs_off(counts: Counts) -> bool:
    """:attr:`RunSamples.graphs_off` from a run's counts: it has decode lines with a graph
    flag and none ran on the graph."""
    graph = [value for series, _, value, _, _ in counts if series == "graph"]
    return bool(graph) and not any(graph)


def load_sides(store: Store, run_ids: Sequence[str], warmup: Warmup = NO_WARMUP
               ) -> list[Side]:
    """What judging the environments of ``run_ids`` reads of them
    (:func:`~logpipe.analysis.judge.judge_environment`), in their order: a baseline search
    judges its candidates so and loads only the one it chooses (a whole load read its
    counters, levels, benchmark and steps as well: ~0.12 s a run on a database of 1,586
    launches)."""
    rows = {str(r[0]): r[1:] for r in store.all(
        "SELECT run_id, name, role, profiled, env_complete, engine FROM runs "
        "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)])}
    envs = store.env_texts(run_ids)
    counts = judged_counts_of_runs(store, run_ids, warmup)
    loads = loads_of(store, run_ids)
    out = []
    for rid in run_ids:
        name, role, profiled, complete, engine = rows[rid]
        out.append(Side(str(name), str(role), RunEnv.from_json(envs[rid], bool(complete)),
                        loads[rid], graphs_off(counts[rid]), engine, rid, bool(profiled)))
    return out


def load_run(store: Store, ref: str, warmup: Warmup = NO_WARMUP) -> RunSamples:
    return load_runs(store, [ref], warmup)[0]


_FACTS_SQL = """
SELECT c.run_id, c.env_fingerprint, c.model, c.config_key, c.workload,
       max(CASE WHEN e.key = 'launch.plan' THEN e.value END),
       max(CASE WHEN e.key = 'launch.arm' THEN e.value END),
       max(CASE WHEN e.key = 'launch.round' THEN e.value END),
       count(CASE WHEN e.key = 'launch.profile' THEN 1 END) > 0
FROM run_configs_of(NULL, ?) c LEFT JOIN run_env e ON e.run_id = c.run_id
 AND e.key IN ('launch.plan', 'launch.arm', 'launch.round', 'launch.profile')
GROUP BY ALL
"""
"""Each run's configuration and the launch facts ``ab`` recorded in its environment, of
the runs of a list (``run_configs_of``: only their environments aggregated; the view
``run_configs`` filtered by a list aggregated every run's, 0.17 s on a database of 1,586
launches)."""


def load_runs(store: Store, refs: Sequence[str], warmup: Warmup = NO_WARMUP
              ) -> list[RunSamples]:
    """The runs ``refs`` name (names or ids), loaded for judging, in their order: what
    every run needs (its ``runs`` row, configuration, counts and whether they are current)
    read in a few statements for all of them (a check judges dozens of launches, and a
    dozen statements a run were ~65 ms of each), the rest run by run."""
    ids = resolve_runs(store, refs)
    todo = list(dict.fromkeys(ids))
    rows = {str(r[0]): r[1:] for r in store.all(
        "SELECT run_id, name, role, spec_algorithm, profiled, env_complete, format_era, "
        "era_mask, engine_version, engine, tp_size, dp_size, pp_size, ep_size FROM runs "
        "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [todo])}
    envs = store.env_texts(todo)
    facts = {str(r[0]): r[1:] for r in store.all(_FACTS_SQL, [todo])}
    counts = judged_counts_of_runs(store, todo, warmup)
    loads = loads_of(store, todo)
    having = _having(store, todo) if len(todo) > LOADS_ONE_BY_ONE else None
    loaded = {rid: _run_samples(store, rid, rows[rid], envs[rid],
                                facts.get(rid, (None,) * 8), counts[rid], loads[rid], having)
              for rid in todo}
    return [loaded[rid] for rid in ids]


_HAVING = ("bench_results", "metric_snapshots", "traces")
"""The tables of a run's benchmark, counters (and its levels' windows) and traces: a run
without rows in one has none of what is read from it."""


def _having(store: Store, run_ids: list[str]) -> dict[str, set[str]]:
    """Of ``run_ids``, those with rows in each of :data:`_HAVING` (a check loading 1,584
    launches without any read each one's in five statements, ~40 ms a launch)."""
    return {table: {str(r) for (r,) in store.all(
        f"SELECT DISTINCT run_id FROM {table} WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
        [run_ids])} for table in _HAVING}


def _run_samples(store: Store, run_id: str, row: tuple[Any, ...], env_json: str,
                 facts: tuple[Any, ...], counts: Counts, load: Load,
                 having: dict[str, set[str]] | None = None) -> RunSamples:
    name, role, algo, profiled, complete, era_label, mask, version, engine = row[:9]
    layout = tuple(row[9:])
    fp, model, config_key, workload, plan, arm, round_, windowed = facts

    def has(table: str) -> bool:
        return having is None or run_id in having[table]

    counters = (launch_counters(store, run_id) if has("metric_snapshots")
                else LaunchCounters({}, {}, None))
    levels = launch_levels(store, run_id) if has("bench_results") else {}
    for found in (counters.levels,  # one table per level
                  server_levels(store, run_id) if has("metric_snapshots") else {}):
        for level, values in found.items():
            levels.setdefault(level, {}).update(values)
    judged = judged_samples(counts)
    return RunSamples(
        run_id=run_id, name=str(name), role=str(role), spec_algorithm=algo,
        profiled=bool(profiled), env=RunEnv.from_json(env_json, bool(complete)),
        format_era=era_label, era_mask=mask, engine_version=version, **judged,
        load=load, fingerprint=fp, model=model, config_key=config_key,
        workload=workload, plan=plan, arm=arm,
        round=int(round_) if round_ is not None and str(round_).isdigit() else None,
        steps=tuple(load_steps(store, run_id)) if has("traces") else (), engine=engine,
        layout=layout, bench=bench_of(store, run_id) if has("bench_results") else Bench(),
        profile_window=bool(windowed),
        levels=levels, counters=counters,
    )


def pool(name: str, runs: Sequence[RunSamples]) -> RunSamples:
    """Several runs of one arm (the rounds of an ``ab`` campaign) as one sample: lines of
    the same concurrency stratum are pooled.  Identity comes from the first run; the
    rounds share it by construction (one plan, one session)."""
    first = runs[0]
    if len(runs) == 1:
        return first if first.name == name else dataclasses.replace(first, name=name)
    decode: dict[int, np.ndarray] = {}
    for r in runs:
        for s, v in r.decode.items():
            decode[s] = np.concatenate([decode[s], v]) if s in decode else v
    excluded: dict[str, int] = {}
    for r in runs:
        for k, n in r.excluded.items():
            excluded[k] = excluded.get(k, 0) + n

    def cat(attr: str) -> np.ndarray:
        return np.concatenate([getattr(r, attr) for r in runs])

    loads = [r.load for r in runs]

    def peak(attr: str) -> Any:
        vals = [getattr(x, attr) for x in loads if getattr(x, attr) is not None]
        return max(vals) if vals else None

    return RunSamples(
        run_id=first.run_id, name=name, role=first.role, spec_algorithm=first.spec_algorithm,
        profiled=any(r.profiled for r in runs), env=first.env, format_era=first.format_era,
        era_mask=first.era_mask, engine_version=first.engine_version, decode=decode,
        accept_len=cat("accept_len"), accept_rate=cat("accept_rate"), prefill=cat("prefill"),
        token_usage=cat("token_usage"), graph_on=sum(r.graph_on for r in runs),
        graph_total=sum(r.graph_total for r in runs), excluded=excluded,
        graphs_off=all(r.graphs_off for r in runs),
        load=Load(peak("running"), peak("queued"), peak("batch"), peak("prefill"),
                  peak("kv_tokens"), peak("token_usage"), any(x.retracted for x in loads)),
        fingerprint=first.fingerprint, model=first.model, config_key=first.config_key,
        workload=first.workload, plan=first.plan, arm=first.arm,
        steps=tuple(s for r in runs for s in r.steps), engine=first.engine,
        layout=first.layout, bench=first.bench,
        profile_window=any(r.profile_window for r in runs))


def arm_refs(refs: Sequence[str]) -> list[list[str]]:
    """``--run`` values as arms: a comma-separated list is one arm of several launches."""
    arms = [[x.strip() for x in r.split(",") if x.strip()] for r in refs]
    if any(not a for a in arms):
        raise InputError("an empty --run value", hint="--run NAME or --run NAME1,NAME2")
    return arms


WARMUP_RUNS = "SELECT run_id FROM run_env WHERE key = 'launch.role' AND value = 'warmup'"
"""The warm-up launches of ``ab`` campaigns (cold caches): never judged, never a baseline,
never launch noise."""


def config_label(config_key: str | None, workload: str | None) -> str:
    """One configuration run on one workload: what two repeat launches share."""
    return f"{config_key}|{workload or ''}"


Environment = tuple[str | None, str | None]
"""An environment whose launches are repeats of each other: (fingerprint, model)."""


def repeat_groups(store: Store, fingerprint: str | None, model: str | None,
                  exclude: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """The run ids of each group of two or more repeat launches (one configuration and
    workload, :func:`config_label`) of an environment (fingerprint and model), in one
    order on any storage: unprofiled, no warm-up launch, and none of ``exclude`` (those
    being judged)."""
    return repeat_groups_of(store, [(fingerprint, model)], exclude)[(fingerprint, model)]


def repeat_groups_of(store: Store, environments: Sequence[Environment],
                     exclude: frozenset[str] = frozenset()
                     ) -> dict[Environment, dict[str, list[str]]]:
    """:func:`repeat_groups` of each of ``environments``, in three statements for all."""
    out: dict[Environment, dict[tuple[str, str], list[str]]] = {e: {} for e in environments}
    known = [e for e in dict.fromkeys(environments) if e[0] is not None]
    # the launches first (from `runs`), then their configurations (`run_configs`
    # filtered by the fingerprint aggregated every run's environment: on a file of 1,586
    # launches from logs alone, none of them with a complete environment, 0.23 s and
    # 190 MB of each `compare`, to find none)
    launches = {str(r): (fp, model) for r, fp, model in store.all(
        "SELECT r.run_id, e.fp, e.model FROM runs r "
        "JOIN (SELECT unnest(?::VARCHAR[]) AS fp, unnest(?::VARCHAR[]) AS model) e "
        "ON r.env_fingerprint = e.fp AND r.model IS NOT DISTINCT FROM e.model "
        "WHERE r.env_complete AND NOT coalesce(r.profiled, false) "
        f"AND r.run_id NOT IN ({WARMUP_RUNS})",
        [[fp for fp, _ in known], [model for _, model in known]])
        if str(r) not in exclude} if known else {}
    configs = store.all("SELECT run_id, config_key, coalesce(workload, '') "
                        "FROM run_configs_of(NULL, ?)", [list(launches)]) if launches else []
    for run_id, key, workload in sorted(configs):
        out[launches[str(run_id)]].setdefault((key, workload), []).append(str(run_id))
    return {e: {config_label(key, workload): members
                for (key, workload), members in sorted(out[e].items()) if len(members) > 1}
            for e in environments}


def noise_for(store: Store, fingerprint: str | None, model: str | None,
              exclude: frozenset[str] = frozenset(),
              groups: dict[str, list[str]] | None = None) -> dict[int, Noise]:
    """The measured launch noise of an environment per stratum: the ``launch_noise`` view,
    computed over the runs of that fingerprint and model only (the view reads every
    run's lines), the runs in ``exclude`` (those being judged) left out; ``groups``: its
    :func:`repeat_groups`, where already known."""
    if groups is None:
        groups = repeat_groups(store, fingerprint, model, exclude)
    return _noise(groups, summaries.launch_values(store, _members(groups)))


def noises_for(store: Store, environments: Sequence[Environment]
               ) -> dict[Environment, dict[int, Noise]]:
    """:func:`noise_for` of each of ``environments``, their launches read together (a
    check pairing launches of 90 environments read each one's in ~8 statements): the
    server's part of :func:`pair_noises`."""
    return {e: noise.server for (e, _), noise in
            pair_noises(store, [(e, None) for e in environments]).items()}


def pair_noises(store: Store, pairs: Sequence[tuple[Environment, str | None]]
                ) -> dict[tuple[Environment, str | None], EnvNoise]:
    """:func:`environment_noise` of launches judged one against one, for many pairs at
    once (``pairs``: each one's environment and the workload both its launches ran, None
    where they ran different ones): the environment's server noise, and its client's of
    that workload, as ``compare --run BASELINE --run CANDIDATE`` borrows them."""
    wanted = list(dict.fromkeys(pairs))
    groups = repeat_groups_of(store, [e for e, _ in wanted])
    found = summaries.launch_values(store, [r for g in groups.values() for r in _members(g)])
    return {(e, w): EnvNoise(_noise(groups[e], found), _client_noise(store, groups[e], w))
            for e, w in wanted}


def _client_noise(store: Store, groups: dict[str, list[str]], workload: str | None
                  ) -> dict[str, Noise]:
    """The client's launch noise (and the counters') of an environment's repeat
    ``groups``: borrowed only from repeats of the judged ``workload`` (none without one)."""
    same = {label: members for label, members in groups.items()
            if workload and label.split("|", 1)[1] == workload}
    return {**clients.client_noise(store, same), **counter_noise(store, same)}


def _members(groups: dict[str, list[str]]) -> list[str]:
    return [r for members in groups.values() for r in members]


def _noise(groups: dict[str, list[str]], found: dict[str, list[tuple[int, float]]]
           ) -> dict[int, Noise]:
    """Each stratum's launch noise pooled over ``groups`` from their launches' values."""
    by_stratum: dict[int, dict[str, list[float]]] = {}
    for label, members in groups.items():
        values: dict[int, list[float]] = {}
        for run_id in members:
            for stratum, tps in found.get(run_id, []):
                values.setdefault(int(stratum), []).append(float(tps))
        for stratum, vals in values.items():
            by_stratum.setdefault(stratum, {})[label] = vals
    out = {}
    for stratum, gs in by_stratum.items():
        n = pool_noise(gs)
        if n is not None:
            out[stratum] = n
    return out


@dataclass(frozen=True)
class EnvNoise:
    """An environment's measured launch noise: per server stratum and per client metric."""

    server: dict[int, Noise] = field(default_factory=dict)
    client: dict[str, Noise] = field(default_factory=dict)
    """Per client metric (``bench_results`` columns) and per counter metric (``counter_*``:
    the same repeat launches' engine counters)."""
    pooled: EnvNoise | None = None
    """The same without the launches being judged: what replicated arms pool their own
    rounds with (their launches are not counted twice)."""


def environment_noise(store: Store, run: RunSamples,
                      launches: Sequence[Sequence[RunSamples]] = ()) -> EnvNoise:
    """The launch noise of ``run``'s environment (fingerprint and model), both families.
    When the arms judged are replicated (``launches``: each arm of two or more), their
    own launches are left out: their rounds are pooled with the environment's noise, not
    counted twice; a launch judged alone against the noise keeps its own A/A pairs."""
    # the client's launch noise depends on the workload (a 2-second bench of 24 prompts is
    # noisier than a long one; a launch benched at several levels pools them): it is
    # borrowed only from repeats of the judged launches' own workload
    workloads = {r.workload for arm in launches for r in arm} or {run.workload}
    workload = next(iter(workloads)) if len(workloads) == 1 else None

    def measured(exclude: frozenset[str] = frozenset()) -> EnvNoise:
        groups = repeat_groups(store, run.fingerprint, run.model, exclude)
        return EnvNoise(noise_for(store, run.fingerprint, run.model, groups=groups),
                        _client_noise(store, groups, workload))

    full = measured()
    if not (len(launches) > 1 and all(len(arm) > 1 for arm in launches)):
        return full
    return dataclasses.replace(full, pooled=measured(
        frozenset(r.run_id for arm in launches for r in arm)))


