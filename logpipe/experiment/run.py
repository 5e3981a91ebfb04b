"""``logpipe ab``: every launch of a plan in turn, then one judgement of the campaign, from
one store opened for the whole of it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logpipe.errors import InputError, LogpipeError
from logpipe.experiment.launch import LaunchOptions, LaunchResult, launch
from logpipe.experiment.plan import Arm, Plan, check_plan, replayed_prompts, warmup_default
from logpipe.experiment.supervise import STOP_WAIT_S, Echo


@dataclass
class PlanResult:
    plan: Plan
    launches: list[tuple[int, Arm, LaunchResult]]
    comparisons: list[Any] = field(default_factory=list)
    rounds: dict[str, dict[int, float | None]] = field(default_factory=dict)
    """Per arm: each round's steady decode throughput (median; at ``rounds_stratum`` once
    judged)."""
    rounds_stratum: int | None = None
    sweep: Any = None
    """The sweep over the plan's ``[sweep]`` key, among its runs (:mod:`logpipe.analysis.sweep`)."""
    checks: list[tuple[str, str, list[dict[str, Any]]]] = field(default_factory=list)
    """The pairing and regression checks: (check, status, its failing rows that name a run
    of this plan)."""
    notes: list[str] = field(default_factory=list)
    exit_code: int = 0


def _launch_status(folder: Path) -> str | None:
    """The status a launch folder's manifest recorded (``ok``, ``failed``, ``starting`` for
    one killed before it finished...); None when it has no manifest."""
    try:
        return str(json.loads((folder / "env.json").read_text()).get("launch", {})
                   .get("status"))
    except (OSError, ValueError, AttributeError):
        return None


def _ingested(db: Any, name: str) -> list[str]:
    """The run ids a launch of this name has in the database ``db`` (a store held open,
    or a path: none without a file)."""
    if isinstance(db, Path) and not db.exists():
        return []
    try:
        from logpipe.db import using
    except ImportError:  # a bare machine (record-only): nothing was ingested here
        return []
    with using(db, read_only=True) as store:
        return [r for (r,) in store.all("SELECT run_id FROM runs WHERE name = ? "
                                        "ORDER BY run_seq", [name])]


def resume_plan(plan: Plan, out: Path, db: Any, resume: bool, notes: list[str],
                record_only: bool = False) -> dict[str, LaunchResult]:
    """The launches of ``plan`` already in ``out``: with ``resume``, every complete one
    (kept, not launched again) by name, and each partial one (a launch killed part-way)
    moved aside, said in ``notes``; without it, a campaign folder that already holds
    launches is refused, saying which are complete, partial and ingested."""
    done: dict[str, LaunchResult] = {}
    found = [(plan.run_name(arm, r), out / plan.run_name(arm, r)) for r, arm in plan.schedule()]
    found = [(n, f) for n, f in found if f.is_dir() and any(f.iterdir())]
    if not found:
        return done
    if not resume:
        said = []
        for name, folder in found:
            status = _launch_status(folder)
            said.append(f"{name} ({'complete' if status == 'ok' else 'partial: ' + str(status)}"
                        f"{', ingested' if _ingested(db, name) else ', never ingested'})")
        raise InputError(f"the campaign folder {out} already holds launches of this plan: "
                         + "; ".join(said),
                         hint="`logpipe ab PLAN --resume` continues it (complete launches "
                         "kept, a partial one moved aside), or give another --out")
    for name, folder in found:
        status = _launch_status(folder)
        if status == "ok":
            ids = _ingested(db, name)
            if not ids and not record_only:
                from logpipe.ingest import ingest_paths

                ingest_paths([folder], db)  # a campaign killed before it ingested it
                ids = _ingested(db, name)
                notes.append(f"{name}: complete but never ingested: ingested now")
            done[name] = LaunchResult(name, folder, "ok", run_ids=ids)
            continue
        aside = folder.with_name(f"{name}.partial-{time.strftime('%Y%m%d-%H%M%S')}")
        folder.rename(aside)
        notes.append(f"{name}: a partial launch (status {status}) moved aside to "
                     f"{aside.name}; launched again")
    if done:
        notes.append(f"resumed: {len(done)} complete launch(es) kept: " + ", ".join(done))
    return done


def run_plan(plan: Plan, db: Path, *, echo: Echo | None = None,
             stop_waits: tuple[float, float] = STOP_WAIT_S,
             options: Any = None, record_only: bool = False,
             resume: bool = False) -> PlanResult:
    """Launch every arm of ``plan`` in turn, then compare each candidate (its rounds
    pooled) with the baseline (its rounds pooled).  ``resume``: keep the complete
    launches a killed campaign left in its folder and run the rest.  The database is
    opened once, for writing, for the whole campaign (none when ``record_only``)."""
    check_plan(plan)
    if record_only:
        return _run_plan(plan, db, None, echo, stop_waits, options, record_only, resume)
    from logpipe.store import Store

    with Store.open(db) as store:
        return _run_plan(plan, db, store, echo, stop_waits, options, record_only, resume)


def _run_plan(plan: Plan, db: Path, store: Any, echo: Echo | None,
              stop_waits: tuple[float, float], options: Any, record_only: bool,
              resume: bool) -> PlanResult:
    out = plan.out if plan.out is not None else Path("runs") / plan.name
    resumed_notes: list[str] = []
    done = resume_plan(plan, out, store or db, resume, resumed_notes, record_only)
    launches: list[tuple[int, Arm, LaunchResult]] = []
    say = echo or (lambda _line: None)
    schedule = plan.schedule()
    stopped = ""
    # how the campaign is to be judged travels in every launch's manifest: `compare
    # --campaign` on the recorded folders, ingested anywhere, judges it as `ab` does
    judging = {"primary": plan.primary or "",
               "allow_env_diff": ",".join(sorted(plan.allow_env_diff)),
               "treatment": ",".join(sorted(plan.declared))}
    def run(arm: Arm, name: str, info: dict[str, Any], profile: int | None = None
            ) -> LaunchResult:
        return launch(arm.command, LaunchOptions(
            name=name, out=out / name, ready_timeout=plan.ready_timeout, bench=plan.bench,
            bench_timeout=plan.bench_timeout, db=db, env={**plan.env, **arm.env},
            stop_waits=stop_waits, echo=echo, record_only=record_only, phases=plan.phases,
            profile_steps=profile, store=store, levels=plan.levels, level_by=plan.level_by,
            launch_info={"plan": plan.name, "arm": arm.name, **info, **judging}))

    warm, why = warmup_default(plan)
    # every arm once: each compiles its own kernels at first use (a GPU campaign's first
    # NGRAM launch, after a warm-up of the baseline alone, still ran its bench cold)
    for arm in plan.arms if warm and not done else ():
        name = f"{plan.name}-warmup-{arm.name}"
        say(f"logpipe: [warm-up] {name} ({why}; not judged)")
        res = run(arm, name, {"arm": f"warmup-{arm.name}", "round": 0, "role": "warmup"})
        if res.status == "interrupted":
            return PlanResult(plan, [], notes=[f"interrupted during the warm-up launch {name}"],
                              exit_code=130)
    for i, (round_, arm) in enumerate(schedule, 1):
        name = plan.run_name(arm, round_)
        if name in done:
            say(f"logpipe: [{i}/{len(schedule)}] {name} (complete: kept)")
            launches.append((round_, arm, done[name]))
            continue
        say(f"logpipe: [{i}/{len(schedule)}] {name}")
        res = run(arm, name, {"round": round_,
                              "role": "baseline" if arm is plan.baseline else "candidate"},
                  plan.profile if all(a is not arm for _, a, _ in launches) else None)
        launches.append((round_, arm, res))
        if res.status == "interrupted":
            break
        first = sum(1 for _, a, _ in launches if a is arm) == 1
        if plan.fail_fast and first and res.status in ("failed", "timeout"):
            stopped = (f"stopped after {name}: the first launch of arm {arm.name!r} "
                       f"{'failed' if res.status == 'failed' else 'timed out'}"
                       + (f" ({res.message})" if res.message else "")
                       + f"; {len(schedule) - i} launch(es) not run (--keep-going runs them)")
            say(f"logpipe: {stopped}")
            break
    result = PlanResult(plan, launches, notes=list(resumed_notes))
    if warm and not done:
        result.notes.append(f"a warm-up launch of each arm ran before round 1 ({why}); "
                            "they are not judged")
    replayed = replayed_prompts(plan)
    if replayed:
        result.notes.append(replayed)
    if stopped:
        result.notes.append(stopped)
    if record_only:
        for round_, arm, res in launches:
            result.rounds.setdefault(arm.name, {})[round_] = None
            if res.status != "ok":
                result.notes.append(f"{res.name}: {res.status}"
                                    + (f" ({res.message})" if res.message else ""))
        result.notes.append(f"recorded only: ingest {out} and judge it with `logpipe compare "
                            f"--campaign {plan.name}` (anywhere logpipe is installed)")
        failed = any(res.status != "ok" for _, _, res in launches) or bool(stopped)
        result.exit_code = 2 if failed else 0
        return result
    _judge_plan(result, store, options)
    return result


def _judge_plan(result: PlanResult, store: Any, options: Any) -> None:
    from logpipe.analysis.compare import judge_campaign, overall_exit
    from logpipe.analysis.results import EXIT_ERROR, Options

    plan = result.plan
    options = options or Options(allow_env_diff=plan.allow_env_diff, primary=plan.primary)
    by_arm: dict[str, list[str]] = {}
    for round_, arm, res in result.launches:
        result.rounds.setdefault(arm.name, {})[round_] = res.steady_tps
        if res.status != "ok":
            result.notes.append(f"{res.name}: {res.status}" + (f" ({res.message})"
                                                               if res.message else ""))
        if res.run_ids:
            by_arm.setdefault(arm.name, []).append(res.run_ids[-1])
    judged = [cand for cand in plan.candidates if cand.name in by_arm]
    for cand in plan.candidates:
        if plan.baseline.name not in by_arm or cand.name not in by_arm:
            result.notes.append(
                f"{cand.name}: no ingested run of "
                f"{'the baseline' if plan.baseline.name not in by_arm else cand.name} "
                "to judge")
            result.exit_code = EXIT_ERROR
    if plan.baseline.name in by_arm and judged:
        result.comparisons = judge_campaign(
            store, plan.name, options,
            launches={plan.baseline.name: by_arm[plan.baseline.name],
                      **{c.name: by_arm[c.name] for c in judged}},
            baseline=plan.baseline.name)
    _rounds_at_stratum(result)
    _plan_checks(result, store)
    if plan.sweep_key is not None:
        from logpipe.analysis.sweep import sweep

        try:
            result.sweep = sweep(store, plan.sweep_key,
                                 run_ids=[r for _, _, res in result.launches
                                          for r in res.run_ids])
        except LogpipeError as exc:
            result.notes.append(f"no sweep over {plan.sweep_key}: {exc}")
    if result.comparisons:
        code = overall_exit(result.comparisons)
        result.exit_code = result.exit_code or code
    if any(res.status in ("bench failed", "failed", "timeout")
           for _, _, res in result.launches) and result.exit_code == 0:
        result.exit_code = EXIT_ERROR


def _plan_checks(result: PlanResult, store: Any) -> None:
    """The pairing and regression suites, with their failing rows cut to this plan's runs
    (the database may hold other campaigns)."""
    from logpipe.checks import load_suites, run_checks

    names = {res.name for _, _, res in result.launches}
    # a campaign's arms are judged arm against arm: their rows are named PLAN-ARM
    names |= {f"{result.plan.name}-{arm.name}" for arm in result.plan.arms}
    try:
        report = run_checks(store, load_suites(["pairing", "regressions"]))
    except LogpipeError as exc:
        result.notes.append(f"checks not run: {exc}")
        return
    allowed = _allowed_pairings(result, store) if result.plan.allow_env_diff else set()
    for r in report.results:
        mine = [row for row in r.failing if names & {str(v) for v in row.values()}]
        if r.check.suite == "pairing":
            # a spec run whose nearest baseline differs only in keys the plan allows is
            # paired, as the judgement pairs it
            mine = [row for row in mine if str(row.get("run")) not in allowed]
        status = r.status if (mine or r.status in ("ERROR", "PASS", "SKIP")) else "PASS"
        result.checks.append((f"{r.check.suite}: {r.check.name}", status, mine))


def _allowed_pairings(result: PlanResult, store: Any) -> set[str]:
    """This plan's speculative runs that have a complete-environment, unprofiled,
    workload-overlapping baseline of this plan differing only in the allowed keys."""
    names = sorted({res.name for _, _, res in result.launches})
    allowed = sorted(result.plan.allow_env_diff)
    rows = store.con.execute(
        "SELECT DISTINCT spec_name FROM run_pairs WHERE spec_env_complete "
        "AND baseline_env_complete AND workload_overlap "
        "AND NOT coalesce(baseline_profiled, false) "
        "AND list_has_all(?::VARCHAR[], differing_keys) "
        "AND list_contains(?::VARCHAR[], spec_name) "
        "AND list_contains(?::VARCHAR[], baseline_name)",
        [allowed, names, names]).fetchall()
    return {r[0] for r in rows}


def _rounds_at_stratum(result: PlanResult) -> None:
    """Each arm's rounds as the judgement sees them (:func:`campaign_rounds`)."""
    from logpipe.analysis.compare import campaign_rounds

    plan = result.plan
    stratum, rounds = campaign_rounds(result.comparisons, plan.name, plan.baseline.name)
    if stratum is not None:
        result.rounds_stratum = stratum
    for arm, values in rounds.items():
        result.rounds.setdefault(arm, {}).update(values)
