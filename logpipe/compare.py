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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from logpipe.analysis import client as clients
from logpipe.analysis.client import SERVER_PRIMARY, Bench, bench_of
from logpipe.analysis.step_phases import Phase, Step, load_steps, phases
from logpipe.db import open_db
from logpipe.engines import engine_named, engine_specific
from logpipe.env import EnvDiff, RunEnv, diff
from logpipe.errors import InputError
from logpipe.launches import (
    MIN_LAUNCH_LINES,
    OUT_OF_FAMILY,
    UNREPLICATED,
    UNREPLICATED_HINT,
    LaunchTest,
    Noise,
    judge_launches,
    pool_noise,
)
from logpipe.pairing import KeyJudgement, Load, Side, judge, load_of
from logpipe.query import resolve_run
from logpipe.sources import load
from logpipe.stats import Test, compare_proportions, compare_samples, needed_per_run
from logpipe.steady import DECODE_KINDS, Warmup, steady_lines
from logpipe.store import Store

EXIT_OK, EXIT_REGRESSION, EXIT_ERROR, EXIT_INCOMPARABLE, EXIT_INSUFFICIENT = 0, 1, 2, 3, 4
# when several candidates are compared, the reported exit code is the most severe
SEVERITY = [EXIT_ERROR, EXIT_INCOMPARABLE, EXIT_REGRESSION, EXIT_INSUFFICIENT, EXIT_OK]

DIFFERENT_EXPERIMENT_KEYS = frozenset({
    "arg.model_path", "arg.served_model_name", "arg.tokenizer_path", "arg.tp_size",
    "arg.dp_size", "arg.ep_size", "arg.pp_size", "arg.nnodes", "arg.quantization",
    "arg.dtype", "model"})
"""Keys whose difference makes two runs different experiments, not one experiment in two
environments: a refusal never suggests allowing them."""


KNOWN_MATCH_LISTED = 24
"""Up to this many identity keys known to match are named in a note; more are counted (a
run without a manifest can match hundreds: the list drowned the verdict)."""


@dataclass(frozen=True)
class Options:
    alpha: float = 0.05
    threshold: float = 0.03
    allow_env_diff: frozenset[str] = frozenset()
    allow_unknown_env: bool = False
    allow_profiled: bool = False
    warmup: Warmup = Warmup()
    primary: str | None = None
    """The deciding metric, declared before the data (``--primary``, the plan's
    ``primary``): a client metric's column or ``decode_throughput``; None: the default."""


@dataclass
class RunSamples:
    run_id: str
    name: str
    role: str
    spec_algorithm: str | None
    profiled: bool
    env: RunEnv
    format_era: str | None
    era_mask: int | None
    engine_version: str | None
    decode: dict[int, np.ndarray]
    accept_len: np.ndarray
    accept_rate: np.ndarray
    prefill: np.ndarray
    token_usage: np.ndarray
    graph_on: int
    graph_total: int
    excluded: dict[str, int]
    graphs_off: bool = False
    """Every decode line ran off the graph (graphs disabled, or a device without them):
    those lines are the run's steady state."""
    load: Load = field(default_factory=Load)
    fingerprint: str | None = None
    model: str | None = None
    config_key: str | None = None
    """Every identity, treatment and capacity key with its value, hashed (``run_configs``):
    two launches with the same key and workload are repeats of one configuration."""
    workload: str | None = None
    """The linked benchmark's workload (tool, dataset, rate, concurrency, prompts)."""
    plan: str | None = None
    arm: str | None = None
    round: int | None = None
    """The ``ab`` campaign, arm and round the launch belongs to (its manifest)."""
    steps: tuple[Step, ...] = ()
    """The scheduler steps marked in the launch's profiler traces (``trace_steps``)."""
    engine: str | None = None
    """``runs.engine``: whose log the samples come from."""
    layout: tuple[int | None, ...] = ()
    """``(tp, dp, pp, ep)`` sizes of the launch."""
    bench: Bench = field(default_factory=Bench)
    """The launch's client-side benchmark (its linked ``bench_results``), what users see
    and the one measure every engine shares."""
    profile_window: bool = False
    """A profiler window ran inside the launch's bench (``launch --profile``): its log
    lines outside the window are steady state, its client numbers include the stall."""

    @property
    def client_disturbed(self) -> bool:
        """A profiler ran during this launch's bench: its client numbers include the
        stall, so they are left out of verdicts (its log outside the window is kept)."""
        return self.profile_window or self.profiled

    def side(self) -> Side:
        return Side(self.name, self.role, self.env, self.load, self.graphs_off)

    def accept_rate_definition(self) -> str:
        engine = engine_named(self.engine) if self.engine else None
        if engine is None:
            return "unknown (no engine)"
        if engine.accept_rate is not None:
            return engine.accept_rate
        if engine.accept_rate_by_release is not None:
            return str(load(engine.accept_rate_by_release)(self.engine_version, self.era_mask))
        return "unknown"


@dataclass
class Metric:
    name: str
    unit: str
    higher_is_better: bool | None
    test: Test
    stratum: int | None = None
    gates: bool = True
    """Performance metrics decide the verdict and the exit code; diagnostics (graph
    coverage, token usage, accept length and rate) are reported beside them."""
    family: str = "server"
    """``server`` (the engine's log) or ``client`` (the linked benchmark)."""
    key: str | None = None
    """The deciding-metric name this metric answers to (``decode_throughput``, a client
    metric's column); None for diagnostics."""
    secondary: bool = False
    """Judged, shown, but not the declared deciding metric: it does not set the verdict."""
    launch: LaunchTest | None = None
    """The launch-level test (one value per launch) that decides a performance metric's
    verdict; ``test`` is then the within-launch detail."""

    @property
    def verdict(self) -> str:
        return self.launch.verdict if self.launch is not None else self.test.verdict


@dataclass
class Comparison:
    reference: str
    candidate: str
    reference_id: str
    candidate_id: str
    env_status: str  # same run | comparable | incomparable | unknown | allowed
    env_diff: EnvDiff | None
    allowed_keys: list[str] = field(default_factory=list)
    capacity: list[KeyJudgement] = field(default_factory=list)
    """Capacity keys the runs differ in, each judged against the observed load."""
    profiled: dict[str, bool] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    unmatched_strata: dict[str, list[int]] = field(default_factory=dict)
    speculation: dict[str, Any] | None = None
    excluded: dict[str, dict[str, int]] = field(default_factory=dict)
    verdict: str = ""
    exit_code: int = EXIT_OK
    notes: list[str] = field(default_factory=list)
    options: Options = field(default_factory=Options)
    arms: dict[str, list[str]] = field(default_factory=dict)
    """The launches of each side, reference first, in the order they pair."""
    replication: str = ""
    """How the verdict is replicated: paired rounds, unpaired arms, one launch each
    against the measured launch noise, or unreplicated."""
    same_configuration: bool = False
    """An A/A comparison: no identity, treatment or capacity key differs and the workload
    is the same, so the difference is launch-to-launch variation."""
    noise: dict[int, Noise] = field(default_factory=dict)
    """The environment's measured launch noise per stratum (``launch_noise``)."""
    phases: dict[str, list[Phase]] = field(default_factory=dict)
    """Per side, the time of one marked scheduler step by kind, from its launches'
    profiler traces (``trace_steps``); empty when neither side was traced."""
    primary: str = SERVER_PRIMARY
    """The deciding metric (a client metric's column or ``decode_throughput``)."""
    primary_reason: str = ""
    """Why it decides: declared (``--primary``, the plan) or the default and its ground."""
    client_noise: dict[str, Noise] = field(default_factory=dict)
    """The environment's measured launch noise per client metric."""
    treatment: list[str] = field(default_factory=list)
    """Every key the arms differ in that is the experiment's treatment (tags, arguments,
    allowed environment keys, the workload), as ``key: reference → candidate``."""
    disagreement: str | None = None
    """One line when the server and client families disagree, with the known causes."""
    pooled: Any = None
    """The environment's noise without the launches judged (:class:`EnvNoise`): what
    paired rounds pool with."""

    @property
    def unreplicated(self) -> bool:
        return self.replication.startswith(UNREPLICATED)


# ------------------------------------------------------------------------------ load

NO_WARMUP = Warmup()
DEFAULTS = Options()


def load_run(store: Store, ref: str, warmup: Warmup = NO_WARMUP) -> RunSamples:
    run_id = resolve_run(store, ref)
    row = store.one(
        "SELECT name, role, spec_algorithm, profiled, env, env_complete, format_era, "
        "era_mask, engine_version, engine, tp_size, dp_size, pp_size, ep_size FROM runs "
        "WHERE run_id = ?", [run_id])
    assert row is not None
    name, role, algo, profiled, env_json, complete, era_label, mask, version, engine = row[:10]
    layout = tuple(row[10:])
    facts = store.one(
        "SELECT c.env_fingerprint, c.model, c.config_key, c.workload, "
        "max(CASE WHEN e.key = 'launch.plan' THEN e.value END), "
        "max(CASE WHEN e.key = 'launch.arm' THEN e.value END), "
        "max(CASE WHEN e.key = 'launch.round' THEN e.value END), "
        "count(CASE WHEN e.key = 'launch.profile' THEN 1 END) > 0 "
        "FROM run_configs c LEFT JOIN run_env e ON e.run_id = c.run_id "
        "AND e.key IN ('launch.plan', 'launch.arm', 'launch.round', 'launch.profile') "
        "WHERE c.run_id = ? GROUP BY ALL", [run_id]) or (None,) * 8
    fp, model, config_key, workload, plan, arm, round_, windowed = facts
    lines = steady_lines(store, run_id, warmup)
    steady = lines.filter(pl.col("state") == "steady")
    dec = steady.filter(pl.col("kind").is_in(DECODE_KINDS))
    decode: dict[int, np.ndarray] = {}
    for (stratum,), group in dec.filter(pl.col("gen_throughput").is_not_null()).group_by(
            "running_req"):
        if stratum is not None:
            decode[int(stratum)] = group["gen_throughput"].to_numpy()
    pre = steady.filter((pl.col("kind") == "prefill") & pl.col("input_throughput").is_not_null())
    flagged = lines.filter(pl.col("kind").is_in(DECODE_KINDS)
                           & pl.col("cuda_graph").is_not_null())
    counted = (flagged.filter(pl.col("past_warmup")) if "past_warmup" in flagged.columns
               else flagged)
    excluded = {str(r): int(n) for r, n in sorted(
        lines.filter(pl.col("state") != "steady").group_by("reason").len().iter_rows(),
        key=lambda rn: str(rn[0]))}

    def col(frame: pl.DataFrame, name: str) -> np.ndarray:
        return frame[name].drop_nulls().to_numpy().astype(float)

    return RunSamples(
        run_id=run_id, name=str(name), role=str(role), spec_algorithm=algo,
        profiled=bool(profiled), env=RunEnv.from_json(env_json, bool(complete)),
        format_era=era_label, era_mask=mask, engine_version=version, decode=decode,
        accept_len=col(dec, "accept_len"), accept_rate=col(dec, "accept_rate"),
        prefill=col(pre, "input_throughput"), token_usage=col(dec, "token_usage"),
        graph_on=int(counted["cuda_graph"].sum()), graph_total=counted.height,
        excluded=excluded,
        graphs_off=flagged.height > 0 and not flagged["cuda_graph"].any(),
        load=load_of(store, run_id), fingerprint=fp, model=model, config_key=config_key,
        workload=workload, plan=plan, arm=arm,
        round=int(round_) if round_ is not None and str(round_).isdigit() else None,
        steps=tuple(load_steps(store, run_id)), engine=engine, layout=layout,
        bench=bench_of(store, run_id), profile_window=bool(windowed),
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


def repeat_groups(store: Store, fingerprint: str | None, model: str | None,
                  exclude: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """The run ids of each group of two or more repeat launches (one configuration and
    workload, :func:`config_label`) of an environment (fingerprint and model), in one
    order on any storage: unprofiled, no warm-up launch, and none of ``exclude`` (those
    being judged)."""
    if fingerprint is None:
        return {}
    groups: dict[tuple[str, str], list[str]] = {}
    for run_id, key, workload in store.all(
            "SELECT run_id, config_key, coalesce(workload, '') FROM run_configs "
            "WHERE env_fingerprint = ? AND model IS NOT DISTINCT FROM ? AND env_complete "
            f"AND NOT coalesce(profiled, false) AND run_id NOT IN ({WARMUP_RUNS}) "
            "ORDER BY run_id", [fingerprint, model]):
        if run_id not in exclude:
            groups.setdefault((key, workload), []).append(run_id)
    return {config_label(key, workload): members
            for (key, workload), members in sorted(groups.items()) if len(members) > 1}


def noise_for(store: Store, fingerprint: str | None, model: str | None,
              exclude: frozenset[str] = frozenset(),
              groups: dict[str, list[str]] | None = None) -> dict[int, Noise]:
    """The measured launch noise of an environment per stratum: the ``launch_noise`` view,
    computed over the runs of that fingerprint and model only (the view reads every
    run's lines), the runs in ``exclude`` (those being judged) left out; ``groups``: its
    :func:`repeat_groups`, where already known."""
    if groups is None:
        groups = repeat_groups(store, fingerprint, model, exclude)
    by_stratum: dict[int, dict[str, list[float]]] = {}
    for label, members in groups.items():
        values: dict[int, list[float]] = {}
        for run_id in members:
            for stratum, tps in store.all(
                    "SELECT stratum, steady_tps FROM launch_values_of(?)", [run_id]):
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
    pooled: EnvNoise | None = None
    """The same without the launches being judged: what replicated arms pool their own
    rounds with (their launches are not counted twice)."""


def environment_noise(store: Store, run: RunSamples,
                      launches: Sequence[Sequence[RunSamples]] = ()) -> EnvNoise:
    """The launch noise of ``run``'s environment (fingerprint and model), both families.
    When the arms judged are replicated (``launches``: each arm of two or more), their
    own launches are left out: their rounds are pooled with the environment's noise, not
    counted twice; a launch judged alone against the noise keeps its own A/A pairs."""
    def measured(exclude: frozenset[str] = frozenset()) -> EnvNoise:
        groups = repeat_groups(store, run.fingerprint, run.model, exclude)
        return EnvNoise(noise_for(store, run.fingerprint, run.model, groups=groups),
                        clients.client_noise(store, groups))

    full = measured()
    if not (len(launches) > 1 and all(len(arm) > 1 for arm in launches)):
        return full
    return dataclasses.replace(full, pooled=measured(
        frozenset(r.run_id for arm in launches for r in arm)))


def compare(db: str, refs: Sequence[str], options: Options = DEFAULTS) -> list[Comparison]:
    """Each arm of ``refs[1:]`` against the arm ``refs[0]`` (an arm: one run, or several
    launches given as a comma-separated list)."""
    arms = arm_refs(refs)
    with open_db(db, read_only=True) as store:
        loaded = [[load_run(store, r, options.warmup) for r in arm] for arm in arms]
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
    loaded = {arm: [load_run(store, rid, warmup) for _, rid in sorted(members)]
              for arm, members in arms.items()}
    base = loaded.pop(base_arm[0])
    return base, loaded


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
        loaded = {arm: [load_run(store, rid, options.warmup) for rid in ids]
                  for arm, ids in launches.items()}
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


def compare_campaign(db: str, plan: str, options: Options = DEFAULTS) -> list[Comparison]:
    with open_db(db, read_only=True) as store:
        return judge_campaign(store, plan, options)


def compare_with_baseline(db: str, ref: str, options: Options = DEFAULTS) -> Comparison:
    """A speculative run against its nearest same-environment baseline (same model, an
    environment that passes the identity and capacity judgement, not profiled; nearest in
    start time), saying which it chose and why; with none, the near misses and what
    differs."""
    with open_db(db, read_only=True) as store:
        spec = load_run(store, ref, options.warmup)
        rows = store.all(
            "SELECT b.run_id, b.name, abs(epoch(b.started_at) - epoch(s.started_at)) AS gap "
            "FROM runs b, runs s WHERE s.run_id = ? AND b.role = 'baseline' "
            "AND b.model IS NOT DISTINCT FROM s.model AND b.run_id <> s.run_id "
            f"AND b.run_id NOT IN ({WARMUP_RUNS}) "
            "ORDER BY gap NULLS LAST, b.name", [spec.run_id])
        tried: list[tuple[Comparison, RunSamples]] = []
        for run_id, _, _ in rows:
            base = load_run(store, run_id, options.warmup)
            probe = Comparison(base.name, spec.name, base.run_id, spec.run_id, "comparable",
                               None, options=options)
            if _environment(base, spec, probe, options) and not base.profiled:
                # judged like `compare --run BASE --run SPEC`: against the launch noise
                noise = environment_noise(store, base)
                c = compare_arms([base], [spec], options, noise.server,
                                 client_noise=noise.client)
                c.notes.insert(0, f"baseline chosen: {base.name}, the nearest in time of the "
                                  f"baselines of the same model whose environment matches "
                                  f"({len(rows)} baseline(s) of that model)")
                return c
            tried.append((probe, base))
    c = Comparison("(none)", spec.name, "", spec.run_id, "incomparable", None,
                   options=options, verdict="incomparable", exit_code=EXIT_INCOMPARABLE)
    if spec.role != "speculative":
        c.notes.append(f"{spec.name} is not a speculative run: give its baseline as well "
                       "(compare --run BASELINE --run CANDIDATE)")
    if not tried:
        c.notes.append(f"no baseline of the same model as {spec.name} is in the database")
        return c
    c.notes.append(f"no same-environment baseline for {spec.name}; the nearest misses:")

    def blocking(p: Comparison) -> int:
        d = p.env_diff
        return len(d.identity) + sum(j.blocks for j in p.capacity) if d else 0

    for probe, base in sorted(tried, key=lambda t: blocking(t[0]))[:3]:
        why = [n for n in probe.notes if not n.startswith(("profiled", "compared"))]
        c.notes.append(f"  {base.name}: " + (" ".join(why) if why else
                                             "profiled: never used as a baseline"))
    return c


def overall_exit(comparisons: Sequence[Comparison]) -> int:
    codes = {c.exit_code for c in comparisons}
    return next((c for c in SEVERITY if c in codes), EXIT_OK)


# --------------------------------------------------------------------------- compare

def compare_runs(a: RunSamples, b: RunSamples, options: Options = DEFAULTS,
                 noise: dict[int, Noise] | None = None,
                 client_noise: dict[str, Noise] | None = None) -> Comparison:
    """``b`` (candidate) against ``a`` (reference): one launch each."""
    return compare_arms([a], [b], options, noise, client_noise=client_noise)


def _arm_name(runs: Sequence[RunSamples]) -> str:
    return runs[0].name if len(runs) == 1 else ",".join(r.name for r in runs)


def _config_differences(a: RunSamples, b: RunSamples) -> list[str]:
    """The keys two launches differ in that make them different experiments (identity,
    treatment, capacity), the user's tags (``--tag build=...``: a difference the user
    declares, such as a code change no setting shows), and ``workload`` when their
    benchmarks differ."""
    d = diff(a.name, a.env, b.name, b.env)
    keys = [i.key for i in d.items if i.tier in ("identity", "treatment", "capacity")
            or i.key.startswith("tag.")]
    if (a.workload or None) != (b.workload or None):
        keys.append("workload")
    return keys


def _round_order(ref: list[RunSamples], cand: list[RunSamples]) -> str:
    """Pair the arms by their recorded ``ab`` rounds when both have one launch per round,
    else by the order given; returns how they were paired (and sorts in place)."""
    rounds_a, rounds_b = [r.round for r in ref], [r.round for r in cand]
    if (None not in rounds_a and None not in rounds_b and len(set(rounds_a)) == len(ref)
            and set(rounds_a) == set(rounds_b)):
        ref.sort(key=lambda r: r.round or 0)
        cand.sort(key=lambda r: r.round or 0)
        return "by recorded round"
    return "in the order given"


def compare_arms(ref: Sequence[RunSamples], cand: Sequence[RunSamples],
                 options: Options = DEFAULTS, noise: dict[int, Noise] | None = None,
                 names: tuple[str | None, str | None] = (None, None), *,
                 client_noise: dict[str, Noise] | None = None,
                 pooled: EnvNoise | None = None) -> Comparison:
    """Candidate arm ``cand`` against reference arm ``ref`` (each one or more launches):
    environment first, then each metric judged on one value per launch (the lines are the
    within-launch detail), then the verdict."""
    ref, cand = list(ref), list(cand)
    paired_by = _round_order(ref, cand) if len(ref) == len(cand) > 1 else ""
    a = pool(names[0] or _arm_name(ref), ref)
    b = pool(names[1] or _arm_name(cand), cand)
    c = Comparison(a.name, b.name, ref[0].run_id, cand[0].run_id, "comparable", None,
                   options=options, profiled={a.name: a.profiled, b.name: b.profiled},
                   excluded={a.name: a.excluded, b.name: b.excluded},
                   arms={a.name: [r.name for r in ref], b.name: [r.name for r in cand]},
                   noise=dict(noise or {}), client_noise=dict(client_noise or {}))
    c.pooled = pooled if pooled is not None else EnvNoise(c.noise, c.client_noise)
    if ref[0].engine and cand[0].engine and ref[0].engine != cand[0].engine:
        return _compare_engines(ref, cand, c, options, paired_by)
    if not _environment(ref[0], cand[0], c, options):
        return c
    if _arms_not_repeats(ref, cand, c):
        return c
    # an A/A pair needs both environments known: a log alone cannot show that two
    # launches shared their variables and packages
    c.same_configuration = (ref[0].env.complete and cand[0].env.complete
                            and not _config_differences(ref[0], cand[0]))
    c.treatment = _treatment(ref[0], cand[0], c)
    _statistics(a, b, c, options)
    _launch_level(ref, cand, c, options, paired_by)
    _client_family(ref, cand, c, options, paired_by)
    _choose_primary(ref, cand, c, options)
    _speculation(a, b, c)
    if a.steps or b.steps:
        c.phases = {a.name: phases(a.steps), b.name: phases(b.steps)}
    _verdict(c, options)
    _disagreement(ref, cand, c, options)
    return c


def _treatment(a: RunSamples, b: RunSamples, c: Comparison) -> list[str]:
    """What the experiment changed: every key of the treatment, capacity and identity
    tiers (the latter only where allowed) and every tag the two launches differ in, and
    the workload."""
    d = c.env_diff if c.env_diff is not None else diff(a.name, a.env, b.name, b.env)
    out = []
    for i in d.items:
        if i.tier in ("treatment", "capacity", "identity") or i.key.startswith("tag."):
            was, now = _shown(i.a), _shown(i.b)
            out.append(f"{i.key}: {was} → {now}" if was != now else
                       f"{i.key}: changed (`logpipe env diff` shows it)")
    if (a.workload or None) != (b.workload or None):
        out.append(f"workload: {a.workload or 'unknown'} → {b.workload or 'unknown'}")
    return out


TREATMENT_VALUE_CHARS = 60
"""A treatment value longer than this (an engine's whole CUDA-graph config) is not printed
in the Treatment line: `logpipe env diff` shows it."""


def _shown(value: Any) -> str:
    text = "unset" if value is None else str(value)
    return text if len(text) <= TREATMENT_VALUE_CHARS else "(long value)"


def _client_values(arm: Sequence[RunSamples], column: str) -> list[float | None]:
    """One client value per launch; None for a launch whose bench ran a profiler window."""
    return [None if r.client_disturbed else r.bench.values.get(column) for r in arm]


def _client_family(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                   options: Options, paired_by: str) -> None:
    """Each client metric judged on one value per launch, by the launch rule, against the
    environment's client-side launch noise."""
    kw = {"alpha": options.alpha, "threshold": options.threshold}
    names_a, names_b = [r.name for r in ref], [r.name for r in cand]
    windowed = [r.name for r in (*ref, *cand) if r.client_disturbed and r.bench.records]
    if windowed:
        c.notes.append("client numbers of " + ", ".join(windowed) + " left out of the "
                       "verdicts: a profiler ran during their bench (their server-log values "
                       "outside the profiled window are kept)")
    for cm in clients.CLIENT_METRICS:
        va, vb = _client_values(ref, cm.column), _client_values(cand, cm.column)
        xa = np.array([v for v in va if v is not None], dtype=float)
        xb = np.array([v for v in vb if v is not None], dtype=float)
        if not len(xa) or not len(xb):
            continue
        m = Metric(cm.name, cm.unit, cm.higher_is_better,
                   compare_samples(xa, xb, higher_is_better=cm.higher_is_better, **kw),
                   family="client", key=cm.column)
        m.launch = judge_launches(names_a, va, names_b, vb,
                                  higher_is_better=cm.higher_is_better,
                                  paired=bool(paired_by),
                                  noise=(c.pooled.client if paired_by else c.client_noise).get(
                                      cm.column),
                                  within=None, configs=_configs(ref, cand), **kw)
        c.metrics.append(m)


def _configs(ref: Sequence[RunSamples], cand: Sequence[RunSamples]
             ) -> tuple[str | None, str | None]:
    """Each arm's configuration label (its first launch's), whose earlier launches an arm
    of one launch is checked against."""
    return tuple(config_label(arm[0].config_key, arm[0].workload)  # type: ignore[return-value]
                 if arm and arm[0].config_key else None for arm in (ref, cand))


def _choose_primary(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                    options: Options, engines: bool = False) -> None:
    """Declare the deciding metric; every other performance metric is secondary."""
    if options.primary is not None:
        c.primary, c.primary_reason = options.primary, "declared"
    elif engines:
        c.primary, c.primary_reason = (clients.DEFAULT_CLIENT_PRIMARY, "default for two "
                                       "engines: the one measure both share")
    else:
        launches = [*ref, *cand]
        benches = [None if r.client_disturbed else r.bench for r in launches]
        c.primary, c.primary_reason = clients.default_primary(
            benches, [r.workload if r.bench.records else None for r in launches])
    for m in c.metrics:
        if m.gates and m.higher_is_better is not None and m.key != c.primary:
            m.secondary = True


# ---------------------------------------------------------------------- across engines

def _engine_environment(a: RunSamples, b: RunSamples, c: Comparison,
                        options: Options) -> bool:
    """Two engines: their arguments, packages and variables are the treatment; the machine,
    the model, the layout, the other variables and the workload must match."""
    full = diff(a.name, a.env, b.name, b.env)

    def engines_own(i: Any) -> bool:
        # a variable an engine sets itself at launch is its own too
        return engine_specific(i.key) or any(
            (src or "").endswith(" launch") for src in (i.a_source, i.b_source))

    own = [i for i in full.items if engines_own(i)]
    d = dataclasses.replace(full, items=[i for i in full.items if not engines_own(i)])
    c.env_diff = d
    unknown = [r.name for r in (a, b) if not r.env.complete]
    neutral = list(d.identity_keys())
    if a.model != b.model:
        neutral.append("model")
    if a.layout != b.layout:
        neutral.append("layout")
    if (a.workload or None) != (b.workload or None):
        neutral.append("workload")
    blocking = sorted(set(neutral) - options.allow_env_diff)
    if unknown and not options.allow_unknown_env:
        c.env_status, c.verdict, c.exit_code = "unknown", "incomparable", EXIT_INCOMPARABLE
        c.notes.append("environment unknown for " + ", ".join(unknown) + " (no captured "
                       "manifest): two engines are compared only on one machine with one "
                       "environment. Run them with `logpipe ab` (or pass --allow-unknown-env)")
        return False
    if blocking:
        c.env_status, c.verdict, c.exit_code = ("incomparable", "incomparable",
                                                EXIT_INCOMPARABLE)
        shown = {"model": f"model ({a.model} vs {b.model})",
                 "layout": f"layout (tp, dp, pp, ep {a.layout} vs {b.layout})",
                 "workload": f"workload ({a.workload} vs {b.workload})"}
        c.notes.append("the engines are the treatment, but " + ", ".join(
            shown.get(k, k) for k in blocking) + " differ too: an engine comparison needs "
            "one machine, one model and layout, the same variables besides the engines' own "
            "and one benchmark")
        return False
    c.env_status = "comparable"
    engine_keys = sorted({i.key for i in own if i.tier != "annotation"})
    c.notes.append(f"the treatment is the engine ({a.engine} {a.engine_version or '?'} vs "
                   f"{b.engine} {b.engine_version or '?'}), with its arguments, packages and "
                   f"variables ({len(engine_keys)} keys differ: `logpipe env diff` lists them); "
                   "judged on the client-side benchmark, the one measure both engines share")
    return True


def _arms_not_repeats(ref: list[RunSamples], cand: list[RunSamples], c: Comparison) -> bool:
    """Mark ``c`` incomparable when the launches of one arm are not repeats of one
    configuration (the launch is the unit: an arm's launches measure one thing)."""
    for arm in (ref, cand):
        for other in arm[1:]:
            keys = _config_differences(arm[0], other)
            if keys:
                c.env_status, c.verdict, c.exit_code = ("incomparable", "incomparable",
                                                        EXIT_INCOMPARABLE)
                c.notes.append(f"the launches of one arm must be repeats of one "
                               f"configuration: {other.name} differs from {arm[0].name} in "
                               + ", ".join(keys[:8]) + (" ..." if len(keys) > 8 else ""))
                return True
    return False


def _compare_engines(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                     options: Options, paired_by: str) -> Comparison:
    """Candidate engine against reference engine, launch by launch, on the benchmark
    (output throughput, TTFT, TPOT); the servers' own samples are detail only (a vLLM stats
    window and an SGLang batch line are not the same measurement)."""
    if not _engine_environment(ref[0], cand[0], c, options):
        return c
    if _arms_not_repeats(ref, cand, c):
        return c
    kw = {"alpha": options.alpha, "threshold": options.threshold}
    c.treatment = _treatment(ref[0], cand[0], c)
    _client_family(ref, cand, c, options, paired_by)
    if not c.metrics:
        c.notes.append("no benchmark figure is in the benchmark of every launch")
    a, b = pool(c.reference, ref), pool(c.candidate, cand)
    for s in sorted(set(a.decode) & set(b.decode)):
        c.metrics.append(Metric("server decode throughput", "tok/s", True, compare_samples(
            a.decode[s], b.decode[s], higher_is_better=True, **kw), stratum=s, gates=False))
    c.notes.append("server decode throughput is each engine's own sample (an SGLang batch "
                   "line, a vLLM stats window): shown as detail, it does not decide")
    c.replication = (f"{len(ref)} rounds, paired {paired_by}: verdict on the per-round ratios "
                     "of launch benchmarks (Student t)" if paired_by else
                     f"{len(ref)} and {len(cand)} launches, unpaired")
    _choose_primary(ref, cand, c, options, engines=True)
    m = deciding_metric(c)
    if m is None or m.launch is None or m.verdict == "insufficient data":
        c.verdict, c.exit_code = "insufficient data", EXIT_INSUFFICIENT
        c.notes.append("no benchmark linked to the launches of both engines (or too few "
                       "launches): run the same benchmark against each")
        return c
    c.verdict = m.verdict
    c.exit_code = EXIT_REGRESSION if m.verdict == "regression" else EXIT_OK
    _exit_needs_evidence(c, m)
    for x in c.metrics:
        if x.gates and x.launch is not None and x.launch.disagreeing and not x.secondary:
            c.notes.append(f"{x.name}: {x.launch.disagreeing}")
    return c


def _launch_value(x: np.ndarray | None) -> float | None:
    if x is None or len(x) < MIN_LAUNCH_LINES:
        return None
    return float(np.median(x))


def _launch_level(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                  options: Options, paired_by: str) -> None:
    """Each performance metric judged on one value per launch (statistics.md §2b)."""
    names_a, names_b = [r.name for r in ref], [r.name for r in cand]
    kw = {"alpha": options.alpha, "threshold": options.threshold}
    for m in c.metrics:
        if m.name == "decode throughput" and m.stratum is not None:
            va = [_launch_value(r.decode.get(m.stratum)) for r in ref]
            vb = [_launch_value(r.decode.get(m.stratum)) for r in cand]
            stratum_noise = (c.pooled.server if paired_by else c.noise).get(m.stratum)
        elif m.name == "prefill input throughput":
            va = [_launch_value(r.prefill) for r in ref]
            vb = [_launch_value(r.prefill) for r in cand]
            stratum_noise = None
        else:
            continue
        m.launch = judge_launches(names_a, va, names_b, vb,
                                  higher_is_better=m.higher_is_better,
                                  paired=bool(paired_by), noise=stratum_noise,
                                  within=m.test, configs=_configs(ref, cand), **kw)
    k_a, k_b = len(ref), len(cand)
    if paired_by:
        c.replication = (f"{k_a} rounds, paired {paired_by}: verdict on the per-round "
                         "ratios of launch medians (Student t"
                         + (", exact sign-flip p" if k_a >= 6 else "") + ")")
    elif k_a > 1 and k_b > 1:
        c.replication = (f"unpaired arms of {k_a} and {k_b} launches: Welch on per-launch "
                         "log medians")
    elif c.noise and any(m.launch is not None and m.launch.method == "launch noise"
                         for m in c.metrics):
        pairs = max(n.pairs for n in c.noise.values())
        c.replication = (f"{'one launch per arm' if k_a == k_b == 1 else 'an arm of one launch'}"
                         f": judged against this environment's launch noise, measured on "
                         f"{pairs} A/A pair(s)")
    else:
        c.replication = f"{UNREPLICATED} ({UNREPLICATED_HINT})"
    if not c.unreplicated:
        for m in c.metrics:
            if m.launch is not None and m.launch.method == "unreplicated" and m.gates:
                # no launch noise is measured for it: reported, but it does not decide
                m.gates = False
                c.notes.append(f"{m.name}: one launch each and no launch noise measured for "
                               "it, so it is shown as a diagnostic and does not decide")


def _environment(a: RunSamples, b: RunSamples, c: Comparison, options: Options) -> bool:
    if a.run_id == b.run_id:
        c.env_status = "same run"
    else:
        d = diff(a.name, a.env, b.name, b.env)
        c.env_diff = d
        unknown = [r.name for r in (a, b) if not r.env.complete]
        c.capacity = judge(a.side(), b.side(), d)
        differing = set(d.identity_keys()) | {j.key for j in c.capacity if j.blocks}
        for j in c.capacity:
            if not j.blocks:
                c.notes.append(j.note)
        if unknown and not options.allow_unknown_env and not differing - options.allow_env_diff:
            c.env_status = "unknown"
            c.verdict = "incomparable"
            c.exit_code = EXIT_INCOMPARABLE
            missing = "; ".join(f"{name}: {', '.join(keys)}" for name, keys in d.unknown.items())
            c.notes.append(
                "environment unknown for " + ", ".join(unknown) + " (no captured manifest): "
                "comparability cannot be established. Unknown identity facts: " + missing
                + (". Known to match: " + ", ".join(d.known_match)
                   if 0 < len(d.known_match) <= KNOWN_MATCH_LISTED else
                   f". {len(d.known_match)} identity keys known to match (`logpipe env "
                   "diff` lists them)" if d.known_match else "")
                + ". Capture a manifest with `logpipe env capture` (or run the experiment "
                "with `logpipe launch`), or pass --allow-unknown-env to compare anyway.")
            return False
        if differing - options.allow_env_diff:
            c.env_status = "incomparable"
            c.verdict = "incomparable"
            c.exit_code = EXIT_INCOMPARABLE
            keys = sorted(differing - options.allow_env_diff)
            for j in c.capacity:
                if j.blocks and j.key in keys:
                    c.notes.append(j.note)
            sources = {i.key: {i.a_source, i.b_source} for i in d.items}
            said = [k for k in keys if "log" in sources.get(k, set())]
            experiment = [k for k in keys if k in DIFFERENT_EXPERIMENT_KEYS]
            allowable = [k for k in keys if k not in DIFFERENT_EXPERIMENT_KEYS]
            c.notes.append("identity differs in " + ", ".join(keys)
                           + (" (" + ", ".join(said) + " as the log shows)" if said else "")
                           + (" in " + ", ".join(unknown) + " with no captured manifest"
                              if unknown else "")
                           + ": statistics cannot rescue a baseline from another environment."
                           + (" These are different experiments: they differ in "
                              + ", ".join(experiment) + " (the model or the layout); compare "
                              "runs of one model and layout." if experiment else "")
                           + (" Pass --allow-env-diff " + ",".join(allowable)
                              + " to compare anyway." if allowable and not experiment
                              else ""))
            return False
        if differing or unknown:
            c.env_status = "allowed"
            c.allowed_keys = sorted(differing)
            if differing:
                c.notes.append("compared across identity differences allowed by the user: "
                               + ", ".join(sorted(differing)))
            if unknown:
                c.notes.append("environment unknown for " + ", ".join(unknown)
                               + ": compared anyway (--allow-unknown-env)")
    if a.profiled != b.profiled and not options.allow_profiled:
        prof = a.name if a.profiled else b.name
        c.verdict = "incomparable"
        c.exit_code = EXIT_INCOMPARABLE
        c.env_status = "incomparable"
        c.notes.append(f"{prof} ran with a profiler and the other run did not: a profiled run "
                       "is a different experiment. Pass --allow-profiled to compare anyway.")
        return False
    if a.profiled or b.profiled:
        c.notes.append("profiled run(s) compared: their numbers are not production throughput")
    return True


def _statistics(a: RunSamples, b: RunSamples, c: Comparison, options: Options) -> None:
    kw = {"alpha": options.alpha, "threshold": options.threshold}
    matched = sorted(set(a.decode) & set(b.decode))
    c.unmatched_strata = {a.name: sorted(set(a.decode) - set(b.decode)),
                          b.name: sorted(set(b.decode) - set(a.decode))}
    for s in matched:
        c.metrics.append(Metric("decode throughput", "tok/s", True,
                                compare_samples(a.decode[s], b.decode[s],
                                                higher_is_better=True, **kw), stratum=s,
                                key=SERVER_PRIMARY))
    if len(a.prefill) or len(b.prefill):
        c.metrics.append(Metric("prefill input throughput", "tok/s", True,
                                compare_samples(a.prefill, b.prefill, higher_is_better=True,
                                                **kw)))
    if len(a.accept_len) and len(b.accept_len):
        c.metrics.append(Metric("accept length", "tokens", True,
                                compare_samples(a.accept_len, b.accept_len,
                                                higher_is_better=True, **kw), gates=False))
    if len(a.accept_rate) and len(b.accept_rate):
        da, db_ = a.accept_rate_definition(), b.accept_rate_definition()
        if da == db_ and not da.startswith(("ambiguous", "unknown")):
            c.metrics.append(Metric("accept rate", da, True,
                                    compare_samples(a.accept_rate, b.accept_rate,
                                                    higher_is_better=True, **kw), gates=False))
        else:
            c.notes.append(f"accept rates not compared: {a.name} means {da!r}, "
                           f"{b.name} means {db_!r}")
    if a.graph_total or b.graph_total:
        c.metrics.append(Metric("graph coverage", "share of decode lines after warm-up", True,
                                compare_proportions(a.graph_on, a.graph_total, b.graph_on,
                                                    b.graph_total, **kw), gates=False))
    for r in (a, b):
        if r.graphs_off:
            c.notes.append(f"graphs were off for the whole of {r.name} (every decode line ran "
                           "off the graph): its off-graph lines are its steady state")
    if len(a.token_usage) and len(b.token_usage):
        c.metrics.append(Metric("token usage", "share of KV pool", None,
                                compare_samples(a.token_usage, b.token_usage,
                                                higher_is_better=None, **kw), gates=False))


def _p_of(m: Metric) -> float | None:
    return m.launch.p_value if m.launch is not None else m.test.p_value


def headline_metrics(gating: list[Metric], alpha: float) -> tuple[list[Metric], list[str]]:
    """The gating metrics whose verdict may decide a server-log comparison's, and a note
    for each regression or improvement that may not.  Each metric and stratum is tested
    at α; the headline asks whether anything differs, a family of tests, so it takes them
    through Holm's step-down correction (the smallest p against α/k, the next against
    α/(k−1), ...): five strata at α = 0.05 would otherwise call a difference somewhere in about
    one comparison in five with no effect at all.  A metric without a p-value (judged by
    the practical threshold alone) is not in the family and keeps its verdict."""
    family = sorted((m for m in gating if _p_of(m) is not None),
                    key=lambda m: _p_of(m) or 0.0)
    counted = {id(m) for m in gating if _p_of(m) is None}
    notes: list[str] = []
    stopped = False
    for i, m in enumerate(family):
        p, limit = _p_of(m) or 0.0, alpha / (len(family) - i)
        if not stopped and p < limit:
            counted.add(id(m))
            continue
        stopped = True
        if m.verdict in ("regression", "improvement"):
            where = f" @ {m.stratum} running" if m.stratum is not None else ""
            notes.append(f"{m.name}{where}: {m.verdict} at p = {p:.2g} on its own, not "
                         f"after Holm's correction over the {len(family)} gating tests "
                         f"(needs p < {limit:.2g}): it does not decide the verdict")
    return [m for m in gating if id(m) in counted], notes


def primary_metric(c: Comparison) -> Metric | None:
    """The decode-throughput metric the verdict leads with: the stratum with most lines."""
    decode = [m for m in c.metrics if m.name == "decode throughput"]
    if not decode:
        return None
    return max(decode, key=lambda m: min(m.test.n_a, m.test.n_b))


def _speculation(a: RunSamples, b: RunSamples, c: Comparison) -> None:
    roles = {a.role, b.role}
    if roles != {"speculative", "baseline"}:
        return
    spec, base = (a, b) if a.role == "speculative" else (b, a)
    primary = primary_metric(c)
    block: dict[str, Any] = {
        "speculative_run": spec.name, "baseline_run": base.name,
        "algorithm": spec.spec_algorithm,
        "accept_rate_definition": spec.accept_rate_definition(),
    }
    if primary is not None and primary.test.median_a and primary.test.median_b:
        ref_tps, cand_tps = primary.test.median_a, primary.test.median_b
        typical = primary.launch.typical() if primary.launch is not None and \
            primary.launch.ratio is not None else None
        if typical is not None:  # the typical launch of each arm
            ref_tps, cand_tps = typical
        spec_tps = cand_tps if spec is b else ref_tps
        base_tps = ref_tps if spec is b else cand_tps
        block.update(stratum=primary.stratum, spec_tps=spec_tps, baseline_tps=base_tps,
                     speedup=spec_tps / base_tps - 1)
        if len(spec.accept_len):
            al = float(np.median(spec.accept_len))
            block.update(accept_len=al, break_even_accept_len=al * base_tps / spec_tps)
    block["same_environment"] = c.env_status in ("comparable", "same run")
    block["replication"] = c.replication
    c.speculation = block


def _verdict(c: Comparison, options: Options) -> None:
    """The verdict of the declared deciding metric; an unreplicated regression exits 4."""
    if c.primary == SERVER_PRIMARY:
        _server_verdict(c, options)
    else:
        _client_verdict(c, options)
    deciding = deciding_metric(c)
    if deciding is not None and deciding.launch is not None:
        if deciding.launch.method.endswith("environment noise"):
            c.replication += f"; {deciding.launch.pooled}"
    _exit_needs_evidence(c, deciding)


def _exit_needs_evidence(c: Comparison, deciding: Metric | None) -> None:
    """A regression that rests only on unreplicated launch tests (one launch each, no
    launch noise measured) is reported with its size and exits 4, not 1."""
    if c.verdict != "regression" or not _unreplicated(c):
        return
    size = (f"{(deciding.launch.ratio - 1) * 100:+.1f}%" if deciding is not None
            and deciding.launch is not None and deciding.launch.ratio else "a drop")
    c.verdict, c.exit_code = "unreplicated regression", EXIT_INSUFFICIENT
    c.notes.insert(0, f"unreplicated: {size} ({metric_name(deciding)}) from one launch "
                      "each, with no launch noise measured for this environment: "
                      "inconclusive, not a regression (exit 4). "
                      f"{UNREPLICATED_HINT[0].upper()}{UNREPLICATED_HINT[1:]}")


def _unreplicated(c: Comparison) -> bool:
    """The regression rests only on unreplicated launch tests (one launch each, no noise)."""
    deciding = [m for m in c.metrics if m.gates and not m.secondary
                and m.higher_is_better is not None and m.verdict == "regression"]
    return bool(deciding) and all(m.launch is None or m.launch.method == "unreplicated"
                                  for m in deciding)


def metric_name(m: Metric | None) -> str:
    if m is None:
        return "no metric"
    where = f" @ {m.stratum} running" if m.stratum is not None else ""
    return f"{m.family} {m.name}{where}"


def deciding_metric(c: Comparison) -> Metric | None:
    """The metric that sets the verdict: the declared client metric, or the server's
    decode throughput at its best-populated stratum."""
    if c.primary == SERVER_PRIMARY:
        return primary_metric(c)
    return next((m for m in c.metrics if m.family == "client" and m.key == c.primary), None)


def _client_verdict(c: Comparison, options: Options) -> None:
    m = deciding_metric(c)
    label = clients.metric_label(c.primary)
    if m is None or m.launch is None or m.verdict == "insufficient data":
        c.verdict, c.exit_code = "insufficient data", EXIT_INSUFFICIENT
        if m is not None and m.launch is not None and m.launch.label == OUT_OF_FAMILY:
            c.notes.append(f"the deciding metric, {label}, cannot decide: {m.launch.detail}")
            return
        c.notes.append(f"the deciding metric, {label}, has no value in "
                       + ("the launches of both arms" if m is None else m.launch.detail
                          if m.launch is not None else "every launch")
                       + " (declare another with --primary)")
        return
    c.replication = _client_replication(m.launch, c)
    if c.same_configuration:
        _same_configuration(c, m, [x for x in c.metrics if x.launch is not None])
        return
    c.verdict = m.verdict
    c.exit_code = EXIT_REGRESSION if m.verdict == "regression" else EXIT_OK
    if m.launch.disagreeing:
        c.notes.append(f"{label}: {m.launch.disagreeing}")


def _client_replication(t: LaunchTest, c: Comparison) -> str:
    ka, kb = t.launches
    if t.method.startswith("paired rounds"):
        return (f"{ka} rounds, paired: verdict on the per-round ratios of the launches' "
                "client values (Student t)")
    if t.method == "welch":
        return f"unpaired arms of {ka} and {kb} launches: Welch on per-launch log values"
    if t.method == "launch noise":
        noise = c.client_noise.get(c.primary)
        return ("one launch per arm: judged against this environment's launch noise, "
                f"measured on {noise.pairs if noise else '?'} A/A pair(s)")
    return f"{UNREPLICATED} ({UNREPLICATED_HINT})"


def _same_configuration(c: Comparison, deciding: Metric | None, gating: list[Metric]) -> None:
    """An A/A pair: launch noise, never a regression or an improvement."""
    ratio = deciding.launch.ratio if deciding and deciding.launch else None
    size = f"{(ratio - 1) * 100:+.1f}%" if ratio is not None else "unknown"
    c.verdict = "same configuration"
    c.exit_code = EXIT_OK
    c.replication = ("A/A: launches of one configuration (no identity, treatment or "
                     "capacity key differs, same workload)")
    for m in gating:
        if m.launch is not None:
            m.launch.verdict = "launch noise"
            m.launch.detail = "A/A: the difference is launch-to-launch variation"
    where = (f" at {deciding.stratum} running" if deciding is not None
             and deciding.stratum is not None else
             f" in {metric_name(deciding)}" if deciding is not None else "")
    c.notes.insert(0, f"same configuration: the difference, {size}{where}, is "
                      "launch-to-launch variation (an A/A pair feeds the launch_noise "
                      "view; it is never a regression or an improvement)")
    if deciding is None:
        return
    measured = (c.noise.get(deciding.stratum) if deciding.stratum is not None
                else c.client_noise.get(deciding.key or ""))
    if measured is not None and ratio is not None and measured.log_sd > 0:
        z = abs(np.log(ratio)) / (measured.log_sd * np.sqrt(2))
        if z > 3:
            c.notes.insert(1, f"the difference is {z:.1f}× the spread of two launches "
                              f"({measured.describe()}): if something not recorded "
                              "differs (a code change), tag the launches (`--tag "
                              "build=...`) so they are compared as different")


def _server_verdict(c: Comparison, options: Options) -> None:
    gating = [m for m in c.metrics if m.gates and m.higher_is_better is not None
              and not m.secondary]
    counted, uncounted = headline_metrics(gating, options.alpha)
    regressions = [m for m in counted if m.verdict == "regression"]
    decode = [m for m in c.metrics if m.name == "decode throughput"]
    if not decode:
        c.verdict = "insufficient data"
        c.exit_code = EXIT_INSUFFICIENT
        strata = c.unmatched_strata
        c.notes.append("no concurrency stratum (running requests) has steady decode lines in "
                       "both runs" + ("; unmatched: " + "; ".join(
                           f"{k}: {v}" for k, v in strata.items() if v) if any(
                           strata.values()) else ""))
        return
    if not regressions and all(m.verdict == "insufficient data" for m in decode):
        c.verdict = "insufficient data"
        c.exit_code = EXIT_INSUFFICIENT
        strays = [m for m in decode if m.launch is not None and m.launch.label == OUT_OF_FAMILY]
        if strays:
            c.notes.append(f"{strays[0].name} @ {strays[0].stratum} running cannot decide: "
                           f"{strays[0].launch.detail}")  # type: ignore[union-attr]
            return
        c.notes.append(f"need ≥ {needed_per_run(options.alpha)} steady decode lines per run "
                       f"in a shared stratum for α = {options.alpha:g} (and ≥ "
                       f"{MIN_LAUNCH_LINES} for a launch's median to count)")
        return
    if c.same_configuration:
        _same_configuration(c, primary_metric(c),
                            [m for m in c.metrics if m.gates and m.higher_is_better is not None])
        return
    if regressions:
        c.verdict = "regression"
        c.exit_code = EXIT_REGRESSION
    else:
        c.verdict = ("improvement" if any(m.verdict == "improvement" for m in counted)
                     else "no significant change")
        c.exit_code = EXIT_OK
    c.notes.extend(uncounted)
    for m in decode:
        if m.launch is not None and m.launch.disagreeing:
            c.notes.append(f"@{m.stratum} running: {m.launch.disagreeing}")


def _disagreement(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                  options: Options) -> None:
    """One line when the server log and the client's benchmark disagree: in sign, or by
    more than their launch noise; with the known causes that apply."""
    if c.same_configuration:
        return  # an A/A pair's two families are two views of launch noise
    server = primary_metric(c)
    client = next((m for m in c.metrics if m.family == "client"
                   and m.key == clients.DEFAULT_CLIENT_PRIMARY), None)
    if server is None or client is None or server.launch is None or client.launch is None:
        return
    rs, rc = server.launch.ratio, client.launch.ratio
    if not rs or not rc:
        return
    ns, nc = c.noise.get(server.stratum or -1), c.client_noise.get(client.key or "")
    k = max(1, min(len(ref), len(cand)))
    spread = (float(np.sqrt((ns.log_sd ** 2 + nc.log_sd ** 2) * 2 / k))
              if ns is not None and nc is not None else None)
    if not clients.disagree(rs, rc, options.threshold, spread):
        return
    typical = client.launch.typical()
    seen = (f" ({typical[0]:.1f} → {typical[1]:.1f} {client.unit})" if typical else "")
    causes = clients.disagreement_causes(ref, cand)
    c.disagreement = (
        f"server and client disagree: the server log says {(rs - 1) * 100:+.1f}% (decode "
        f"throughput @ {server.stratum} running) while the client saw {rc:.2f}x output "
        f"throughput{seen}; "
        + ("known causes that apply: " + "; ".join(causes) if causes else
           "no known cause applies (profiler window, cold launch, failed requests, "
           "workload, bench client): look at what the log's steady state leaves out"))
