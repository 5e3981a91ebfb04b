"""Where the time went: the decomposition an engineer writes by hand before tuning a
speculative run, computed from the stored rows.

For a speculative run and its same-environment baseline (the pairing ``compare`` uses):

- the baseline's time per decode step, from its steady decode lines at the compared
  running-request level (``1000 × running / gen_throughput``);
- the speculative cycle, split into its phases (share and ms per cycle) from the run's
  phase dumps (``phase_timings``); where logpipe's hook recorded each iteration's period
  in both arms, the cycle and the step are those periods (the scheduler's time between
  forwards measured in each arm, like for like); or, where only profiler traces exist,
  the device span of its marked steps (``trace_steps``), which leaves out host time
  and says so;
- tokens per cycle: the steady median accept length;
- the speedup those imply, ``accept_len × step_ms / cycle_ms − 1``, against the observed
  one, agreeing within the launch noise or with the unexplained part named;
- the break-even accept length, ``cycle_ms / step_ms``;
- over the runs of one environment that differ in their draft-token count, a fitted
  verify cost ``fixed + per_token × draft_tokens`` and the draft-token count it predicts
  best, beside the measured best.

Every figure carries the rows it came from (:attr:`Explanation.sources`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from logpipe.analysis.step_phases import phases as step_phases

if TYPE_CHECKING:
    from logpipe.analysis.results import Comparison
    from logpipe.db import StoreOrPath
    from logpipe.store import Store

SPEC_STEP_KINDS = ("VERIFY", "DRAFT", "DRAFT_EXTEND", "DRAFT_LOOP")
"""Step kinds of one speculative cycle in ``trace_steps``."""


@dataclass
class PhaseCost:
    phase: str
    ms_per_cycle: float
    share: float


@dataclass
class SweepPoint:
    run: str
    draft_tokens: int
    verify_ms: float
    other_ms: float
    """The rest of the cycle (draft, draft extend, other phases)."""
    accept_len: float | None
    measured_tps: float | None
    predicted_tps: float | None = None


@dataclass
class SweepFit:
    fixed_ms: float
    per_token_ms: float
    points: list[SweepPoint]
    predicted_best: int | None
    """Draft tokens of the run the fitted costs predict fastest."""
    measured_best: int | None
    """Draft tokens of the run that measured fastest (steady decode)."""


@dataclass
class Explanation:
    spec_run: str
    baseline_run: str | None
    stratum: int | None = None
    method: str = ""
    """``phase dump`` | ``trace steps`` | empty when the cycle is unknown."""
    base_step_ms: float | None = None
    cycle_ms: float | None = None
    phases: list[PhaseCost] = field(default_factory=list)
    synchronized: bool = False
    accept_len: float | None = None
    implied_speedup: float | None = None
    observed_speedup: float | None = None
    noise_sd: float | None = None
    """The environment's launch noise (log SD) at the stratum, when measured."""
    noise_text: str | None = None
    """That noise as compare states it (1 SD, the A/A pairs it rests on)."""
    refused: str | None = None
    """Why the cycle was not set against the baseline's step (unlike batch sizes)."""
    agreement: str = ""
    break_even_accept_len: float | None = None
    sweep: SweepFit | None = None
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain(store: Store, c: Comparison) -> Explanation:
    """The decomposition of the speculative pair that ``c`` judged."""
    spec_block = c.speculation or {}
    spec_name = spec_block.get("speculative_run") or c.candidate
    ex = Explanation(spec_name, spec_block.get("baseline_run"))
    if "speedup" not in spec_block:
        ex.notes.append(f"no speculative pair to explain ({c.verdict or c.env_status}: "
                        + "; ".join(c.notes[:2]) + ")" if c.notes else
                        "no speculative pair to explain: the runs are not a speculative "
                        "run and a baseline with a steady decode throughput")
        return ex
    arms = c.arms
    spec_ids = _run_ids(store, arms.get(spec_name, [spec_name]))
    base_ids = _run_ids(store, arms.get(ex.baseline_run or "", [ex.baseline_run or ""]))
    s = ex.stratum = spec_block.get("stratum")
    base_tps, spec_tps = spec_block["baseline_tps"], spec_block["spec_tps"]
    ex.observed_speedup = spec_block["speedup"]
    ex.accept_len = spec_block.get("accept_len")
    running = s or 1
    ex.base_step_ms = 1000.0 * running / base_tps
    ex.sources["base_step_ms"] = (f"steady decode lines of {ex.baseline_run} at {running} "
                                  f"running: 1000 × {running} / {base_tps:.2f} tok/s")
    ex.sources["observed_speedup"] = (f"steady decode medians at {running} running: "
                                      f"{spec_tps:.2f} / {base_tps:.2f} tok/s")
    if ex.accept_len is not None:
        ex.sources["accept_len"] = f"median accept len of {spec_name}'s steady decode lines"
    if _cycle_from_dumps(store, spec_ids, ex):
        if not _iterations_from_periods(store, spec_ids, base_ids, ex, spec_tps):
            _step_from_dumps(store, base_ids, ex, spec_tps)
    else:
        _cycle_from_traces(store, spec_ids, base_ids, ex)
    if ex.cycle_ms and ex.accept_len and not ex.refused:
        ex.implied_speedup = ex.accept_len * ex.base_step_ms / ex.cycle_ms - 1
        ex.break_even_accept_len = ex.cycle_ms / ex.base_step_ms
        ex.sources["break_even_accept_len"] = "cycle_ms / base_step_ms"
    _hook_cost(store, [(ex.spec_run, spec_ids), (ex.baseline_run or "", base_ids)], ex)
    noise = c.noise.get(s) if s is not None else None
    ex.noise_sd = noise.log_sd if noise is not None else None
    # one environment, one noise: the figure and pair count compare prints for it
    ex.noise_text = f"{noise.describe()} (@ {s} running)" if noise is not None else None
    ex.agreement = _agreement(ex)
    ex.sweep = sweep_fit(store, spec_ids[0]) if spec_ids else None
    return ex


def _hook_cost(store: Store, arms: list[tuple[str, list[str]]], ex: Explanation) -> None:
    """What logpipe's phase hook itself spent per record in each arm (its ``hook_ms``),
    and the clock it timed with: measured, not assumed."""
    said = []
    for name, ids in arms:
        if not ids:
            continue
        row = store.one(
            "SELECT median(h), count(*), string_agg(DISTINCT c, ', '), any_value(k) FROM ("
            "SELECT source_id, line_no, any_value(TRY_CAST(extra->>'hook_ms' AS DOUBLE)) AS h, "
            "any_value(coalesce(extra->>'clock', 'host')) AS c, any_value(extra->>'kind') AS k "
            "FROM logpipe_internal.phase_timings WHERE list_contains(?::VARCHAR[], run_id) "
            "GROUP BY 1, 2) WHERE h IS NOT NULL", [ids])
        if row is None or not row[1]:
            continue
        said.append(f"{row[0]:.3f} ms per {row[3] or 'record'} in {name} ({row[1]} records, "
                    f"timed by {row[2]})")
    if said:
        ex.notes.append("the phase hook's own cost (median): " + "; ".join(said))


def _run_ids(store: Store, names: list[str]) -> list[str]:
    rows = store.all("SELECT run_id FROM runs WHERE list_contains(?::VARCHAR[], name) "
                     "ORDER BY name", [names])
    return [r[0] for r in rows]


def _cycle_from_dumps(store: Store, run_ids: list[str], ex: Explanation) -> bool:
    """The mean cycle and its phases from the runs' phase dumps: the cycles at the
    compared batch size when the dump has them (a cycle's cost grows with the batch)."""
    where = "list_contains(?::VARCHAR[], run_id)"
    params: list[Any] = [run_ids]
    at = ""
    if ex.stratum is not None and store.one(
            f"SELECT 1 FROM phase_timings WHERE {where} AND batch_size = ? LIMIT 1",
            [run_ids, ex.stratum]):
        where += " AND batch_size = ?"
        params.append(ex.stratum)
        at = f" with {ex.stratum} in the batch"
    n, cycle, sync = store.one(
        "WITH c AS (SELECT source_path, line_no, any_value(synchronized) AS sync, "
        f"sum(ms) AS cycle FROM phase_timings WHERE {where} GROUP BY ALL) "
        "SELECT count(*), avg(cycle), bool_or(sync) FROM c", params) or (0, None, None)
    if not n:
        return False
    ex.method, ex.cycle_ms, ex.synchronized = "phase dump", float(cycle), bool(sync)
    for phase, ms in store.all(
            f"SELECT phase, sum(ms) / ? FROM phase_timings WHERE {where} "
            "GROUP BY 1 ORDER BY 2 DESC", [n, *params]):
        ex.phases.append(PhaseCost(str(phase), float(ms), float(ms) / ex.cycle_ms))
    ex.sources["cycle_ms"] = f"mean of {n} cycles{at} in phase_timings of {ex.spec_run}"
    if ex.synchronized:
        ex.notes.append("the phase dump was taken with device synchronisation: the "
                        "shares are exact but the cycle is slower than the server's")
    return True


PERIODS_SQL = """
WITH it AS (
    SELECT run_id, source_path, line_no, any_value(cycle_ms) AS forward,
           any_value((extra->>'period_ms')::DOUBLE) AS period
    FROM phase_timings
    WHERE list_contains(?::VARCHAR[], run_id) AND batch_size = ?
      AND extra->>'kind' = ? AND extra->>'period_ms' IS NOT NULL
    GROUP BY ALL)
SELECT run_id, count(*), median(period), avg(period), avg(forward) FROM it
GROUP BY 1 ORDER BY 1"""
"""Per launch, its decode iterations of one kind (``cycle`` or ``step``) at one batch size
whose record has a period (the hook's time from the previous decode iteration's start):
how many, their median and mean period, and their mean timed forward."""

PHASES_SQL = """
SELECT run_id, phase, sum(ms) FROM phase_timings
WHERE list_contains(?::VARCHAR[], run_id) AND batch_size = ? AND extra->>'kind' = 'cycle'
  AND extra->>'period_ms' IS NOT NULL
GROUP BY 1, 2"""


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _iterations_from_periods(store: Store, spec_ids: list[str], base_ids: list[str],
                             ex: Explanation, spec_tps: float) -> bool:
    """Where the hook recorded each decode iteration's period in both arms, the whole
    iteration is measured: the cycle is the speculative arm's period (its timed phases
    plus the scheduler's time between them) and the step the baseline's, like for like,
    with no scheduler time assumed from one arm for the other.  The launch is the unit,
    as for the observed speedup (the geometric mean of the launches' median decode
    throughputs): each arm's period is the geometric mean of its launches' median
    periods, and a phase's share the mean of its per-launch shares of the mean period."""
    if ex.stratum is None:
        return False
    spec = store.all(PERIODS_SQL, [spec_ids, ex.stratum, "cycle"])
    base = store.all(PERIODS_SQL, [base_ids, ex.stratum, "step"])
    if not spec or not base:
        return False
    sums: dict[str, dict[str, float]] = {}
    for rid, phase, ms in store.all(PHASES_SQL, [spec_ids, ex.stratum]):
        sums.setdefault(str(rid), {})[str(phase)] = float(ms)
    shares: dict[str, float] = {}
    for rid, n, _median, mean, _forward in spec:
        for phase, total in sums.get(rid, {}).items():
            shares[phase] = shares.get(phase, 0.0) + total / n / mean / len(spec)
    ex.cycle_ms = _geomean([float(r[2]) for r in spec])
    ex.phases = sorted((PhaseCost(phase, share * ex.cycle_ms, share)
                        for phase, share in shares.items()), key=lambda p: -p.share)
    rest = max(1.0 - sum(shares.values()), 0.0)
    ex.phases.append(PhaseCost("scheduler", rest * ex.cycle_ms, rest))
    log_step = ex.base_step_ms
    ex.base_step_ms = _geomean([float(r[2]) for r in base])
    at = f"with {ex.stratum} in the batch in phase_timings"

    def launches(rows: list[tuple[Any, ...]], what: str, name: str | None) -> str:
        return (f"geometric mean over {len(rows)} launch(es) of {name} of each one's "
                f"median period of its back-to-back decode {what} {at} ("
                + ", ".join(f"{r[2]:.2f} ms over {r[1]}" for r in rows) + ")")

    ex.sources["cycle_ms"] = launches(spec, "cycles", ex.spec_run)
    ex.sources["base_step_ms"] = launches(base, "steps", ex.baseline_run)
    ex.sources["scheduler_ms"] = ("each launch's own: the share of its mean period outside "
                                  "the timed phases")
    forward = sum(float(r[4]) for r in base) / len(base)
    note = (f"the hook measures whole iterations (from one decode iteration's start to the "
            f"next's): a baseline step is {forward:.2f} ms of forward and the rest scheduler")
    if log_step is not None and ex.accept_len and spec_tps:
        # where a gap between implied and observed lies: each arm's hook against its log
        log_cycle = 1000.0 * ex.stratum * ex.accept_len / spec_tps
        note += (f"; against the logs, the hook's step is {ex.base_step_ms / log_step - 1:+.1%}"
                 f" ({log_step:.2f} ms by the log) and its cycle "
                 f"{ex.cycle_ms / log_cycle - 1:+.1%} ({log_cycle:.2f} ms by the log)")
    ex.notes.append(note)
    return True


def _step_from_dumps(store: Store, base_ids: list[str], ex: Explanation,
                     spec_tps: float) -> None:
    """For dumps without periods (older hook records): where the baseline's launches
    logged their decode steps through the same hook (``kind`` step), the hook's forward
    time splits the baseline's step (by its log's throughput) into the forward and the
    scheduler's time around it.  That scheduler time, measured on the baseline, is added
    to the speculative cycle as a phase of its own: the cycle the phases predict then
    leaves nothing of the speculative run's throughput in the prediction."""
    if ex.stratum is None or ex.base_step_ms is None or not ex.cycle_ms:
        return
    n, step = store.one(
        "SELECT count(*), avg(cycle_ms) FROM phase_timings "
        "WHERE list_contains(?::VARCHAR[], run_id) AND phase = 'decode' "
        "AND extra->>'kind' = 'step' AND batch_size = ?", [base_ids, ex.stratum]) or (0, None)
    if not n or not step or step >= ex.base_step_ms:
        return
    sched = ex.base_step_ms - float(step)
    forward = ex.cycle_ms
    ex.cycle_ms = forward + sched
    ex.phases.append(PhaseCost("scheduler", sched, 0.0))
    for p in ex.phases:
        p.share = p.ms_per_cycle / ex.cycle_ms
    ex.sources["scheduler_ms"] = (
        f"{ex.baseline_run}'s step by its log ({ex.base_step_ms:.2f} ms) less its forward "
        f"(mean of {n} decode steps with {ex.stratum} in the batch in phase_timings: "
        f"{float(step):.2f} ms)")
    ex.sources["cycle_ms"] += f", plus the scheduler time per iteration ({sched:.2f} ms)"
    if ex.accept_len:
        log_cycle = 1000.0 * ex.stratum * ex.accept_len / spec_tps
        ex.notes.append(
            f"the hook times the forward calls ({float(step):.2f} ms per baseline step, "
            f"{forward:.2f} ms per speculative cycle); the scheduler's {sched:.2f} ms per "
            f"iteration is the baseline's, assumed the same for the speculative run (its "
            f"own log implies {log_cycle - forward:.2f} ms)")


def _cycle_from_traces(store: Store, spec_ids: list[str], base_ids: list[str],
                       ex: Explanation) -> bool:
    from logpipe.analysis.step_phases import load_steps

    spec = [p for rid in spec_ids[:1] for p in step_phases(load_steps(store, rid))]
    base = [p for rid in base_ids[:1] for p in step_phases(load_steps(store, rid))]
    cycle = [p for p in spec if p.kind in SPEC_STEP_KINDS and p.span_ms]
    decode = [p for p in base if p.kind == "DECODE" and p.span_ms]
    if not cycle:
        ex.notes.append(f"{ex.spec_run} has neither a phase dump nor marked profiler "
                        "steps: its cycle is not decomposed (`launch --profile STEPS`)")
        return False
    ex.method = "trace steps"
    ex.cycle_ms = sum(p.span_ms or 0.0 for p in cycle)
    for p in cycle:
        ex.phases.append(PhaseCost(p.kind, p.span_ms or 0.0, (p.span_ms or 0.0) / ex.cycle_ms))
    ex.sources["cycle_ms"] = ("median device span of " + ", ".join(
        f"{p.steps} {p.kind} step(s)" for p in cycle) + f" in trace_steps of {ex.spec_run}")
    unlike = _unlike_batches(cycle, decode)
    if unlike:
        ex.refused = unlike
        ex.notes.append(unlike)
        return True
    if decode and decode[0].span_ms:
        # like for like: the baseline's device span per decode step, not its log cadence
        log_step = ex.base_step_ms
        ex.base_step_ms = decode[0].span_ms
        ex.sources["base_step_ms"] = (f"median device span of {decode[0].steps} DECODE "
                                      f"step(s) in trace_steps of {ex.baseline_run}")
        if log_step:
            ex.notes.append(f"device spans leave host time out: the baseline's log implies "
                            f"{log_step:.2f} ms per decode step, its trace "
                            f"{ex.base_step_ms:.2f} ms on the device")
    return True


def _unlike_batches(cycle: list[Any], decode: list[Any]) -> str | None:
    """A cycle is decomposed only against a baseline step of the same batch size (within
    10%, at least one request): a step at batch 1 says nothing of a cycle at batch 32."""
    a = next((p.batch_size for p in cycle if p.batch_size), None)
    b = next((p.batch_size for p in decode if p.batch_size), None)
    if a is None or b is None or abs(a - b) <= max(1.0, 0.1 * max(a, b)):
        return None
    return (f"unlike batches: the speculative cycle was profiled at batch {a:g} "
            f"({cycle[0].kind} bs={a:g}) and the baseline's step at batch {b:g} (DECODE "
            f"bs={b:g}); no implied speedup from them. Profile both at the bench's "
            "concurrency (`launch --profile` waits for it when the bench sets "
            "--max-concurrency)")


def _agreement(ex: Explanation) -> str:
    if ex.refused:
        return "not computed: " + ex.refused
    if ex.implied_speedup is None or ex.observed_speedup is None:
        return "not computed: " + ("no cycle" if ex.cycle_ms is None else "no accept length")
    gap = math.log((1 + ex.implied_speedup) / (1 + ex.observed_speedup))
    if ex.noise_sd is not None:
        # two launches' medians: their log ratio varies by √2 launch SDs (95%: 1.96 of them)
        bound = 1.96 * math.sqrt(2) * ex.noise_sd
        noise = (f"±{bound:.1%}, the 95% range of two launches' difference under the "
                 f"{ex.noise_text or 'launch noise'}")
        if abs(gap) <= bound:
            return (f"the phases explain the observed speedup (log gap {gap:+.1%}, within "
                    f"{noise})")
        return (f"unexplained: the phases imply {ex.implied_speedup:+.1%}, a log gap of "
                f"{gap:+.1%} from the observed {ex.observed_speedup:+.1%}, beyond {noise}")
    return (f"gap {math.expm1(gap):+.1%} between implied and observed (launch noise "
            "unknown: repeat launches, or `logpipe ab`, to judge it)")


def sweep_fit(store: Store, spec_run_id: str) -> SweepFit | None:
    """The verify cost against draft tokens over unprofiled runs of ``spec_run_id``'s
    environment, model and algorithm that have phase dumps; None below two distinct
    draft-token counts."""
    rows = store.all(
        "WITH me AS (SELECT env_fingerprint, model, spec_algorithm FROM runs "
        "WHERE run_id = ?), "
        "cyc AS (SELECT run_id, source_path, line_no, sum(ms) AS cycle, "
        "sum(ms) FILTER (phase = 'verify') AS verify FROM phase_timings "
        "WHERE NOT coalesce(synchronized, false) GROUP BY ALL) "
        "SELECT r.name, r.spec_num_draft_tokens, avg(c.verify), avg(c.cycle - c.verify), "
        "s.steady_accept_len, s.steady_gen_throughput "
        "FROM runs r JOIN me ON r.env_fingerprint IS NOT DISTINCT FROM me.env_fingerprint "
        "AND r.model IS NOT DISTINCT FROM me.model "
        "AND r.spec_algorithm IS NOT DISTINCT FROM me.spec_algorithm "
        "JOIN cyc c ON c.run_id = r.run_id JOIN run_summary s ON s.run_id = r.run_id "
        "WHERE r.spec_num_draft_tokens IS NOT NULL AND NOT r.profiled "
        "AND c.verify IS NOT NULL GROUP BY ALL ORDER BY 2, 1", [spec_run_id])
    points = [SweepPoint(str(n), int(d), float(v), float(o),
                         float(al) if al is not None else None,
                         float(t) if t is not None else None)
              for n, d, v, o, al, t in rows]
    xs = [p.draft_tokens for p in points]
    if len(set(xs)) < 2:
        return None
    ys = [p.verify_ms for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
             / sum((x - mx) ** 2 for x in xs))
    fixed = my - slope * mx
    for p in points:
        if p.accept_len:
            p.predicted_tps = 1000 * p.accept_len / (fixed + slope * p.draft_tokens + p.other_ms)
    predicted = [p for p in points if p.predicted_tps is not None]
    measured = [p for p in points if p.measured_tps is not None]
    return SweepFit(
        fixed_ms=fixed, per_token_ms=slope, points=points,
        predicted_best=max(predicted, key=lambda p: p.predicted_tps or 0).draft_tokens
        if predicted else None,
        measured_best=max(measured, key=lambda p: p.measured_tps or 0).draft_tokens
        if measured else None)


def explain_text(ex: Explanation) -> str:
    """What ``logpipe explain`` prints."""
    lines = [f"Explain {ex.spec_run} against {ex.baseline_run or 'no baseline'}"
             + (f" @ {ex.stratum} running" if ex.stratum is not None else "")]
    if ex.base_step_ms is not None:
        lines.append(f"  baseline step:     {ex.base_step_ms:.2f} ms per decode step "
                     f"[{ex.sources.get('base_step_ms', '')}]")
    if ex.cycle_ms is not None:
        lines.append(f"  speculative cycle: {ex.cycle_ms:.2f} ms ({ex.method}) "
                     f"[{ex.sources.get('cycle_ms', '')}]")
        for p in ex.phases:
            lines.append(f"    {p.phase:<14} {p.ms_per_cycle:8.2f} ms  {p.share:6.1%}")
    if ex.accept_len is not None:
        lines.append(f"  tokens per cycle:  {ex.accept_len:.2f} (accept length) "
                     f"[{ex.sources.get('accept_len', '')}]")
    if ex.implied_speedup is not None:
        lines.append(f"  implied speedup:   {ex.implied_speedup:+.1%} "
                     "(accept_len × step / cycle − 1)")
    if ex.observed_speedup is not None:
        lines.append(f"  observed speedup:  {ex.observed_speedup:+.1%} "
                     f"[{ex.sources.get('observed_speedup', '')}]")
    if ex.agreement:
        lines.append(f"  agreement:         {ex.agreement}")
    if ex.break_even_accept_len is not None:
        lines.append(f"  break-even:        accept length {ex.break_even_accept_len:.2f} "
                     "(cycle / step: speculation pays above it)")
    if ex.sweep is not None:
        f = ex.sweep
        lines.append(f"  verify cost over draft tokens: {f.fixed_ms:.2f} ms fixed + "
                     f"{f.per_token_ms:.3f} ms per draft token (least squares over "
                     f"{len(f.points)} run(s) with phase dumps)")
        for pt in f.points:
            lines.append(f"    {pt.run:<24} {pt.draft_tokens} draft tokens: verify "
                         f"{pt.verify_ms:6.2f} ms, rest {pt.other_ms:5.2f} ms, measured "
                         + (f"{pt.measured_tps:6.1f}" if pt.measured_tps else "     –")
                         + " tok/s, predicted "
                         + (f"{pt.predicted_tps:6.1f}" if pt.predicted_tps else "     –"))
        lines.append(f"    best by the fit: {f.predicted_best} draft tokens; "
                     f"measured best: {f.measured_best} draft tokens")
    lines += [f"  Note: {n}" for n in ex.notes]
    return "\n".join(lines) + "\n"


def explain_runs(db: StoreOrPath, refs: list[str], options: Any = None) -> Explanation:
    """``logpipe explain``: one speculative run against its nearest same-environment
    baseline (as ``compare --run SPEC``), or ``[SPEC, BASELINE]`` in either order (a
    comma-separated value is one arm of several launches)."""
    from logpipe.analysis.compare import compare, compare_with_baseline
    from logpipe.analysis.results import DEFAULTS
    from logpipe.db import using

    options = options or DEFAULTS
    if len(refs) not in (1, 2):
        from logpipe.errors import InputError

        raise InputError("explain takes one speculative run, or it and its baseline",
                         hint="logpipe explain --run SPEC [--run BASELINE]")
    with using(db, read_only=True) as store:
        c = compare_with_baseline(store, refs[0], options) if len(refs) == 1 else \
            compare(store, [refs[1], refs[0]], options)[0]
        ex = explain(store, c)
    if ex.observed_speedup is not None and c.env_status not in (
            "comparable", "same run", "allowed"):
        ex.notes.insert(0, f"the pair is {c.env_status}: " + "; ".join(c.notes[:2]))
    return ex
