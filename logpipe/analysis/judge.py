"""The pure judge: two arms of loaded launches in, one :class:`Comparison` out, in a fixed
order (environment, then statistics per family).  Never reads the database, never prints."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from logpipe.analysis import client as clients
from logpipe.analysis import counters
from logpipe.analysis.client import SERVER_PRIMARY
from logpipe.analysis.client_metrics import COUNTERS_PRIMARY
from logpipe.analysis.decide import (
    decide,
    deciding_metric,
    disagreement,
    exit_needs_evidence,
    speculation_metrics,
)
from logpipe.analysis.launches import (
    MIN_LAUNCH_LINES,
    UNREPLICATED,
    UNREPLICATED_HINT,
    Noise,
    judge_launches,
)
from logpipe.analysis.levels import crossover, judge_levels
from logpipe.analysis.load import EnvNoise, config_label, pool
from logpipe.analysis.pairing import Side, judge
from logpipe.analysis.results import (
    DEFAULTS,
    DIFFERENT_EXPERIMENT_KEYS,
    EXIT_INCOMPARABLE,
    EXIT_INSUFFICIENT,
    EXIT_OK,
    EXIT_REGRESSION,
    KNOWN_MATCH_LISTED,
    Comparison,
    Metric,
    Options,
    RunSamples,
)
from logpipe.analysis.step_phases import phases
from logpipe.engines import engine_specific
from logpipe.env import diff
from logpipe.stats import compare_proportions, compare_samples

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
    if not judge_environment(ref[0].side(), cand[0].side(), c, options):
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
    _counter_family(ref, cand, c, options, paired_by)
    _choose_primary(ref, cand, c, options)
    _load_levels(ref, cand, c, options, paired_by)
    speculation_metrics(a, b, c)
    if a.steps or b.steps:
        c.phases = {a.name: phases(a.steps), b.name: phases(b.steps)}
    decide(c, options)
    disagreement(ref, cand, c, options)
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


def _counter_family(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                    options: Options, paired_by: str) -> None:
    """Each counter metric (the engine's own ``/metrics`` over each bench) judged on one
    value per launch, by the launch rule, against the environment's launch noise of the
    same counters."""
    kw = {"alpha": options.alpha, "threshold": options.threshold}
    names_a, names_b = [r.name for r in ref], [r.name for r in cand]
    for cm in counters.COUNTER_METRICS:
        va = [r.counters.values.get(cm.key) for r in ref]
        vb = [r.counters.values.get(cm.key) for r in cand]
        xa = np.array([v for v in va if v is not None], dtype=float)
        xb = np.array([v for v in vb if v is not None], dtype=float)
        if cm.higher_is_better is None and (len(xa) or len(xb)):
            c.notes.append(counters.describe_accept_length(ref, cand))
        if not len(xa) or not len(xb):
            continue
        m = Metric(cm.name, cm.unit, cm.higher_is_better,
                   compare_samples(xa, xb, higher_is_better=cm.higher_is_better, **kw),
                   family="counters", key=cm.key)
        if cm.higher_is_better is None:
            m.gates = False  # a mechanism (the acceptance length), shown, never deciding
        else:
            m.launch = judge_launches(
                names_a, va, names_b, vb, higher_is_better=cm.higher_is_better,
                paired=bool(paired_by),
                noise=(c.pooled.client if paired_by else c.client_noise).get(cm.key),
                within=None, configs=_configs(ref, cand), **kw)
        c.metrics.append(m)


def _log_has_no_launch_value(c: Comparison) -> bool:
    """The server log gives no decode verdict: no shared stratum, or too few steady lines
    in every one for a launch's median."""
    decode = [m for m in c.metrics if m.name == "decode throughput"]
    return all(m.verdict == "insufficient data" for m in decode)


def _load_levels(ref: list[RunSamples], cand: list[RunSamples], c: Comparison,
                 options: Options, paired_by: str) -> None:
    """The deciding metric judged per load level every launch benched, and the crossover
    they locate: the client's, the counters' over each level's window, or the server log's
    lines inside each level's window (the client's output throughput where the log's lines
    are not split by level: no counter snapshots timed the levels)."""
    metric = c.primary
    if metric == SERVER_PRIMARY and not all(
            SERVER_PRIMARY in values for r in (*ref, *cand) for values in r.levels.values()):
        metric = clients.DEFAULT_CLIENT_PRIMARY  # the log's lines are not split by level
    kept = [(r.name, {} if r.client_disturbed else r.levels) for r in ref], \
        [(r.name, {} if r.client_disturbed else r.levels) for r in cand]
    c.levels = judge_levels(*kept, metric, paired=bool(paired_by), alpha=options.alpha,
                            threshold=options.threshold)
    c.crossover = crossover(c.levels)
    if c.levels:
        pooled = ("its median over all its records" if metric in clients.BY_COLUMN else
                  "its tokens over all its benches' time" if metric == COUNTERS_PRIMARY else
                  "its median over all its steady lines")
        c.notes.append(f"every launch benched {len(c.levels)} load levels: a launch's value "
                       f"in the metrics above is {pooled} (the levels pooled); the per-level "
                       "verdicts judge each load alone")


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
    if c.primary == SERVER_PRIMARY and _log_has_no_launch_value(c) \
            and counters.have_counters([*ref, *cand]):
        source = next((r.counters.source for r in (*ref, *cand) if r.counters.source), None)
        c.primary = COUNTERS_PRIMARY
        c.primary_reason += ("; the server log has too few steady windows for a launch "
                             "value, so the engine's own counters decide"
                             + (f": {source}" if source else ""))
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
    exit_needs_evidence(c, m)
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


def judge_environment(a: Side, b: Side, c: Comparison, options: Options) -> bool:
    """Whether the two runs may be compared (their identities, capacities and profilers),
    saying why not in ``c``."""
    if a.run_id == b.run_id:
        c.env_status = "same run"
    else:
        d = diff(a.name, a.env, b.name, b.env)
        c.env_diff = d
        unknown = [r.name for r in (a, b) if not r.env.complete]
        c.capacity = judge(a, b, d)
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


