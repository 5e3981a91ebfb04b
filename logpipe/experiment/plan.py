"""``ab`` plans: arms, rounds and order, read from TOML or flags and checked before anything
starts."""

from __future__ import annotations

import os
import random
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logpipe.analysis.client_metrics import metric_label, parse_primary
from logpipe.env import Tiers, launch_args
from logpipe.errors import InputError

# ------------------------------------------------------------------------------ plans

@dataclass
class Arm:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    name: str
    baseline: Arm
    candidates: list[Arm]
    bench: str
    rounds: int = 2
    order: str = "abba"
    seed: int = 0
    ready_timeout: float = 600.0
    out: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    allow_env_diff: frozenset[str] = frozenset()
    bench_timeout: float | None = None
    sweep_key: str | None = None
    """The server argument a ``[sweep]`` varies across the candidates."""
    fail_fast: bool = True
    """Stop the campaign when an arm's first launch fails (``--keep-going``: go on)."""
    profile: int | None = None
    """Profile this many busy steps in the first launch of every arm (``launch --profile``)."""
    phases: str | None = None
    """Time every launch's phases (``launch --phases``): ``host`` or ``sync``."""
    primary: str | None = None
    """The deciding metric, declared before the data (``--primary``; None: the default)."""
    declared: frozenset[str] = frozenset()
    """Identity keys the arms differ in because the plan's own commands or ``[env]`` set
    them differently: the declared treatment (filled by :func:`check_plan`)."""
    warmup_launch: bool | None = None
    """An unjudged launch of the baseline before round 1; None: the default (on when the
    plan profiles or the engine compiles kernels at first use)."""
    levels: tuple[float, ...] = ()
    """Load levels: every launch runs the bench once per level, in this order, with
    ``--<level_by> LEVEL`` set (``ab --levels``); the verdicts are then per level."""
    level_by: str = "max_concurrency"
    """The bench flag a level sets: ``max_concurrency`` or ``request_rate``."""

    @property
    def arms(self) -> list[Arm]:
        return [self.baseline, *self.candidates]

    def schedule(self) -> list[tuple[int, Arm]]:
        """``(round, arm)`` in launch order: ABBA alternates the order every round (so a
        drift over the session hits the arms alike); random shuffles each round with the
        seed."""
        rng = random.Random(self.seed)
        out = []
        for r in range(1, self.rounds + 1):
            arms = list(self.arms)
            if self.order == "random":
                rng.shuffle(arms)
            elif r % 2 == 0:
                arms.reverse()
            out += [(r, a) for a in arms]
        return out

    def run_name(self, arm: Arm, round_: int) -> str:
        return f"{self.name}-{arm.name}-r{round_}"


def _words(value: Any, where: str) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        return shlex.split(os.path.expandvars(value))
    raise InputError(f"{where} must be a command string or a list of words")


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def split_env(command: list[str]) -> tuple[dict[str, str], list[str]]:
    """``env A=1 B=2 python -m ...`` or ``A=1 python -m ...`` (the shell's ways to set a
    variable for one command) as ``({"A": "1", "B": "2"}, ["python", "-m", ...])``: the
    variables belong to the environment, the program is ``python``."""
    words = list(command)
    env: dict[str, str] = {}
    if words and Path(words[0]).name == "env":
        words = words[1:]
        while words and words[0] in ("-", "--"):
            words = words[1:]
    while words and _ASSIGNMENT.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def _arm(name: str, command: Any, env: Mapping[str, Any] | None, where: str) -> Arm:
    set_here, words = split_env(_words(command, where))
    if not words:
        raise InputError(f"{where} has no program after its variables")
    return Arm(name, words, {**set_here, **{k: str(v) for k, v in (env or {}).items()}})


def phases_key(value: Any) -> str | None:
    """The plan's ``phases``: true (host timers), "sync", or false/absent."""
    if value in (None, False):
        return None
    if value is True or value == "host":
        return "host"
    if value == "sync":
        return "sync"
    raise InputError(f"phases = {value!r} in the plan", hint='use true, "sync" or false')


PLAN_KEYS = ("name", "rounds", "order", "seed", "ready_timeout", "bench_timeout", "out",
             "allow_env_diff", "bench", "env", "baseline", "candidates", "sweep",
             "fail_fast", "profile", "phases", "primary", "warmup_launch", "levels",
             "level_by")
ARM_KEYS = ("name", "command", "env")


def _known_keys(data: Mapping[str, Any], known: tuple[str, ...], where: str,
                path: Path) -> None:
    """Refuse a key the plan format does not have (``round = 3`` ran 2 rounds, silently)."""
    import difflib

    for key in data:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            raise InputError(f"unknown key {key!r} in {where}" + (
                f": did you mean {near[0]!r}?" if near else ""), path=path,
                hint="the keys are listed in schemas/plan.md: " + ", ".join(known))


def _with_flag(command: list[str], key: str, value: Any) -> list[str]:
    """``command`` with ``--key-as-flag value`` set (replaced when present)."""
    flag = "--" + key.replace("_", "-")
    out, skip = [], False
    for i, word in enumerate(command):
        if skip:
            skip = False
            continue
        if word == flag:
            skip = i + 1 < len(command) and not command[i + 1].startswith("--")
            continue
        if word.startswith(flag + "="):
            continue
        out.append(word)
    return [*out, flag, str(value)]


def load_plan(path: Path, check: bool = True) -> Plan:
    """A plan file (``schemas/plan.md``); ``check``: refuse it now when its arms differ in
    an identity key that is not the treatment (:func:`check_plan`)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"cannot read plan: {exc}", path=path,
                         hint="see schemas/plan.md for the format") from exc
    _known_keys(data, PLAN_KEYS, "the plan", path)
    for where, arm_data in [("[baseline]", data.get("baseline") or {})] + [
            (f"[[candidates]] #{i + 1}", c) for i, c in enumerate(data.get("candidates", []))]:
        if isinstance(arm_data, dict):
            _known_keys(arm_data, ARM_KEYS, where, path)
    try:
        base = data["baseline"]
        candidates = [_arm(str(c.get("name") or f"candidate{i + 1}"), c["command"],
                           c.get("env"), "candidates.command")
                      for i, c in enumerate(data.get("candidates", []))]
        plan = Plan(
            name=str(data.get("name") or path.stem),
            baseline=_arm(str(base.get("name") or "baseline"), base["command"],
                          base.get("env"), "baseline.command"),
            candidates=candidates, bench=str(data["bench"]),
            fail_fast=bool(data.get("fail_fast", True)),
            profile=int(data["profile"]) if data.get("profile") else None,
            phases=phases_key(data.get("phases")),
            primary=parse_primary(data.get("primary")),
            warmup_launch=(bool(data["warmup_launch"]) if "warmup_launch" in data else None),
            rounds=int(data.get("rounds", 2)), order=str(data.get("order", "abba")),
            seed=int(data.get("seed", 0)),
            ready_timeout=float(data.get("ready_timeout", 600)),
            out=Path(os.path.expandvars(data["out"])) if data.get("out") else None,
            env={k: str(v) for k, v in (data.get("env") or {}).items()},
            allow_env_diff=frozenset(data.get("allow_env_diff", [])),
            bench_timeout=float(data["bench_timeout"]) if data.get("bench_timeout") else None,
            levels=parse_levels(data.get("levels")),
            level_by=str(data.get("level_by", "max_concurrency")))
    except KeyError as exc:
        raise InputError(f"plan is missing {exc.args[0]!r}", path=path,
                         hint="a plan needs baseline.command, bench and at least one "
                         "[[candidates]]") from exc
    sweep = data.get("sweep") or {}
    if sweep:
        expanded = []
        for cand in plan.candidates:
            for key, values in sweep.items():
                for v in values:
                    short = key.removeprefix("speculative_")
                    expanded.append(Arm(f"{cand.name}-{short}{v}",
                                        _with_flag(cand.command, key, v), dict(cand.env)))
        plan.candidates = expanded
        plan.sweep_key = next(iter(sweep))
    if check:
        check_plan(plan)
    return plan


LEVEL_FLAGS = ("max_concurrency", "request_rate")
"""What a load level sets on the bench command."""


def parse_levels(value: Any) -> tuple[float, ...]:
    """``levels`` of a plan (a list) or ``--levels 1,4,16``: positive numbers, in order."""
    if value is None or value == "" or value == []:
        return ()
    words = value.split(",") if isinstance(value, str) else list(value)
    try:
        levels = tuple(float(w) for w in words)
    except (TypeError, ValueError) as exc:
        raise InputError(f"levels must be numbers, not {value!r}",
                         hint="levels = [1, 4, 16] (--levels 1,4,16)") from exc
    if any(v <= 0 for v in levels) or len(set(levels)) != len(levels):
        raise InputError(f"levels must be distinct positive numbers, not {value!r}")
    return levels


def replayed_prompts(plan: Plan) -> str | None:
    """Why the levels of a plan would replay one set of prompts, or None: a bench seeded
    once (``--seed 1``) sends the same prompts at every level of a launch, so a cache that
    learns them at the first level (NGRAM's n-gram store, the radix cache) is warm at the
    others, and the levels are not judged alike."""
    if len(plan.levels) < 2 or "{level}" in plan.bench:
        return None
    if not any(w == "--seed" or w.startswith("--seed=") for w in shlex.split(plan.bench)):
        return None
    return ("every load level of a launch replays the same prompts (the bench is seeded "
            "once): NGRAM's n-gram store and the radix cache learn them at the first level "
            "and are warm at the others (on sample_logs/real-cpu-levels NGRAM's "
            "accept length went from 1.4 at concurrency 1 to 7.1-7.7 at 4 and 10.6 at 16); "
            "give each level its own prompts with --seed {level}")


def level_command(bench: list[str], level_by: str, level: float) -> list[str]:
    """The bench command of one load level: ``--max-concurrency 4`` (or the rate) set."""
    return _with_flag(bench, level_by, f"{level:g}")


def check_plan(plan: Plan) -> None:
    """Refuse a plan whose arms differ in an identity key that is not the treatment: the
    experiment would not measure what it says it does."""
    if not plan.candidates:
        raise InputError("a plan needs at least one candidate")
    if plan.order not in ("abba", "random"):
        raise InputError(f"order must be abba or random, not {plan.order!r}")
    if plan.rounds < 1:
        raise InputError("rounds must be at least 1")
    if plan.level_by not in LEVEL_FLAGS:
        raise InputError(f"level_by must be one of {', '.join(LEVEL_FLAGS)}, not "
                         f"{plan.level_by!r}")
    names = [a.name for a in plan.arms]
    if len(set(names)) != len(names):
        raise InputError("arm names must be unique: " + ", ".join(names))
    tiers = Tiers.load()

    def keys(arm: Arm) -> dict[str, Any]:
        found = {f"arg.{k}": v for k, v in launch_args(arm.command).items()}
        found.update({k: v for k, v in {**plan.env, **arm.env}.items()})
        found["command.program"] = " ".join(arm.command[:3])
        return found

    from logpipe.engines import engine_of_command, engine_specific

    base = keys(plan.baseline)
    base_engine = engine_of_command(plan.baseline.command)
    for cand in plan.candidates:
        other = keys(cand)
        # arms of two engines: the engine is the treatment, with its arguments, packages
        # and variables; the machine, the model and the other variables must match
        cross = engine_of_command(cand.command) is not base_engine
        differing = sorted(k for k in set(base) | set(other)
                           if base.get(k) != other.get(k) and k not in plan.allow_env_diff
                           and not (cross and engine_specific(k))
                           and (k == "command.program" or tiers.tier(k) == "identity"))
        # a key the plan's own commands or [env] set differently is what the plan varies:
        # the declared treatment (a CUDA-graph or NCCL experiment), recorded in every
        # launch's manifest so that the campaign is judged with it wherever it is ingested
        plan.declared = plan.declared | {k for k in differing if k != "command.program"}
        bad = [k for k in differing if k == "command.program"]
        if bad:
            raise InputError(
                f"arm {cand.name!r} differs from {plan.baseline.name!r} in identity key(s) "
                + ", ".join(f"{k} ({base.get(k, '(unset)')!r} vs {other.get(k, '(unset)')!r})"
                            for k in bad)
                + ": that is not the treatment, so the comparison would be refused",
                hint="make the arms differ only in the treatment (speculative_*), or list the "
                "keys in the plan's allow_env_diff")


def warmup_default(plan: Plan) -> tuple[bool, str]:
    """Whether ``plan`` runs an unjudged warm-up launch of each arm before round 1, and
    why: as the plan says; by default when it profiles (the first launch's caches and the profiler's
    own start-up) or when an arm's engine compiles kernels at first use (SGLang and vLLM
    on a GPU: Triton, FlashInfer and torch.compile caches; a first launch on a fresh
    machine ran its bench at 0.56x the next one's)."""
    if plan.warmup_launch is not None:
        return plan.warmup_launch, ("the plan's warmup_launch" if plan.warmup_launch else "")
    if plan.profile:
        return True, "default: the plan profiles"
    from logpipe.engines import engine_of_command

    for arm in plan.arms:
        engine = engine_of_command(arm.command)
        words = " ".join(arm.command)
        if engine is not None and "--device cpu" not in words and "--device=cpu" not in words:
            return True, (f"default: {engine.name} compiles kernels at first use on a GPU "
                          "(cold caches)")
    return False, ""


def plan_from_flags(*, baseline: str, candidates: list[str], bench: str, rounds: int,
                    order: str, seed: int, name: str | None, out: Path | None,
                    ready_timeout: float, check: bool = True) -> Plan:
    plan = Plan(name=name or "ab", baseline=_arm("baseline", baseline, None, "--baseline"),
                candidates=[_arm("candidate" if len(candidates) == 1 else f"candidate{i + 1}",
                                 c, None, "--candidate") for i, c in enumerate(candidates)],
                bench=bench, rounds=rounds, order=order, seed=seed, out=out,
                ready_timeout=ready_timeout)
    if check:
        check_plan(plan)
    return plan


def schedule_text(plan: Plan) -> str:
    """What ``ab --dry-run`` prints: the launches in order, each arm's command and
    variables, and that the identity check passed (it raises before otherwise)."""
    lines = [f"Plan {plan.name}: {len(plan.schedule())} launch(es), {plan.rounds} round(s), "
             f"order {plan.order}" + (", stops when an arm's first launch fails"
                                      if plan.fail_fast else ", keeps going on failures")]
    warm, why = warmup_default(plan)
    for arm in plan.arms if warm else ():
        lines.append(f"  [0] {plan.name}-warmup-{arm.name} (not judged: {why})")
    seen: set[str] = set()
    for i, (round_, arm) in enumerate(plan.schedule(), 1):
        profiled = plan.profile and arm.name not in seen
        seen.add(arm.name)
        lines.append(f"  [{i}] {plan.run_name(arm, round_)}"
                     + (f" (profiles {plan.profile} busy steps)" if profiled else ""))
    for arm in plan.arms:
        env = {**plan.env, **arm.env}
        lines.append(f"{arm.name}: {shlex.join(arm.command)}")
        if env:
            lines.append("  env: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())))
    lines.append(f"bench: {plan.bench}")
    if plan.levels:
        flag = "--" + plan.level_by.replace("_", "-")
        replayed = replayed_prompts(plan)
        if replayed:
            lines.append(f"warning: {replayed}")
        lines.append(f"load levels: the bench once per level, {flag} "
                     + ", ".join(f"{v:g}" for v in plan.levels) + ", in that order")
    lines.append("Deciding metric: " + (metric_label(plan.primary) + " (declared)"
                                         if plan.primary else "the default (compare --help)"))
    lines.append("Identity check: the arms differ only in the treatment"
                 + (" (declared by the plan's commands: " + ", ".join(sorted(plan.declared))
                    + ")" if plan.declared else "")
                 + (" and the allowed keys " + ", ".join(sorted(plan.allow_env_diff))
                    if plan.allow_env_diff else "")
                 + " (nothing was launched: --dry-run)")
    return "\n".join(lines) + "\n"
