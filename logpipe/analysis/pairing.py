"""Judge the keys two runs differ in the way a careful engineer of their engine would.

An identity difference makes two runs incomparable, but two kinds of server argument need
judgement rather than a plain "differs":

- **Capacity keys** (tier ``capacity`` in ``schemas/tiers.toml``: running-request, graph
  batch-size, token and memory limits) only matter when the workload reaches them.  When
  both runs stayed below both limits, a difference is a caveat printed with the numbers;
  when a run reached a limit the other did not have, the comparison is refused and the key,
  the limits and the observed load are named.
- **Settings the engine derives from the treatment** (each engine's
  :class:`logpipe.engines.CapacityRules`).  With speculative decoding SGLang resets
  ``max_running_requests`` (to 48), captures another CUDA-graph batch-size list, and sizes
  memory differently.  A difference in such a key between a speculative run and its
  baseline follows from the treatment when the user did not set the key in the speculative
  run (its launch command, where a manifest recorded one, does not name it; or SGLang's own
  log line says it changed it): it is shown as "derived from the treatment", never a
  refusal.

Pure: :func:`judge` takes two loaded runs and their environment diff; which keys are
capacity keys, what measures their load and what speculation derives are the run's
engine's rules (:func:`logpipe.engines.capacity_rules`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from logpipe.engines import CapacityRules, capacity_rules, engine_named
from logpipe.env import EnvDiff, RunEnv, launch_args
from logpipe.store import Store

KV_FULL = 0.95
"""Token usage at or above this share of the KV pool: the pool was the limit."""


@dataclass(frozen=True)
class Load:
    """What a run's workload reached (over its batch lines after the server was ready)."""

    running: int | None = None
    queued: int | None = None
    batch: int | None = None
    prefill: int | None = None
    kv_tokens: int | None = None
    token_usage: float | None = None
    retracted: bool = False

    def words(self, measure: str) -> str:
        if measure == "running":
            return (f"peaked at {self.running} running request(s)" if self.running is not None
                    else "no running-request counts") + (
                f", {self.queued} queued" if self.queued else "")
        if measure == "queued":
            return f"peaked at {self.queued or 0} queued request(s)"
        if measure == "batch":
            return (f"peaked at a decode batch of {self.batch}" if self.batch is not None
                    else "no decode batches")
        if measure == "prefill":
            return (f"peaked at {self.prefill} new prefill token(s) per batch"
                    if self.prefill is not None else "no prefill batches")
        usage = (f"peaked at token usage {self.token_usage:.2f}" if self.token_usage is not None
                 else "no token usage printed")
        return usage + (", requests retracted" if self.retracted else "")


_LOAD_SQL = """
WITH ready AS (SELECT run_id, min(line_no) AS line FROM events
               WHERE kind = 'ready' AND in_runs(run_id, $2, $1) GROUP BY run_id),
s AS (SELECT s.run_id,
             max(s.running_req) FILTER (WHERE s.kind IN ('decode', 'window')) AS running,
             max(s.queue_req) AS queued, max(s.token_usage) AS usage
      FROM run_samples_in($2, $1) s LEFT JOIN ready r USING (run_id)
      WHERE s.line_no >= coalesce(r.line, 0) GROUP BY s.run_id),
b AS (SELECT b.run_id, max(b.new_token) FILTER (WHERE b.kind = 'prefill') AS prefill,
             max(b.num_token) AS kv
      FROM batches b LEFT JOIN ready r USING (run_id)
      WHERE in_runs(b.run_id, $2, $1) AND b.line_no >= coalesce(r.line, 0)
      GROUP BY b.run_id),
x AS (SELECT DISTINCT run_id FROM events WHERE kind = 'retract' AND in_runs(run_id, $2, $1))
SELECT i.run_id, s.running, s.queued, s.running, b.prefill, b.kv, s.usage,
       x.run_id IS NOT NULL
FROM (SELECT unnest(coalesce($1::VARCHAR[], [$2::VARCHAR])) AS run_id) i
LEFT JOIN s USING (run_id) LEFT JOIN b USING (run_id) LEFT JOIN x USING (run_id)
"""
"""Each run's load, of the runs of the list ``$1`` or of the run ``$2`` (``$1`` NULL: its
equality is pushed into the scans, as ``in_runs`` says)."""

LOADS_ONE_BY_ONE = 16
"""Runs up to which :func:`loads_of` reads each run by its own statement (its equality is
pushed into the scans; a list reads every run's lines, 1.2 s on a database of 27 M batch
lines), the list in one statement past it (a check judging 792 pairs spent 15 ms a run
on a database of 1,586 launches)."""


def load_of(store: Store, run_id: str) -> Load:
    return _load(store.con.execute(_LOAD_SQL, [None, run_id]).fetchall()[0][1:])


def loads_of(store: Store, run_ids: Sequence[str]) -> dict[str, Load]:
    """:func:`load_of` of each of ``run_ids``."""
    if len(run_ids) <= LOADS_ONE_BY_ONE:
        return {rid: load_of(store, rid) for rid in run_ids}
    return {str(r[0]): _load(r[1:]) for r in store.con.execute(
        _LOAD_SQL, [list(dict.fromkeys(run_ids)), None]).fetchall()}


def _load(row: Sequence[Any]) -> Load:
    running, queued, batch, prefill, kv, usage, retracted = row
    return Load(running, queued, batch, prefill, kv, usage, bool(retracted))


@dataclass
class KeyJudgement:
    key: str
    a: Any
    b: Any
    status: str
    """derived | below the load | reached | unknown limit"""
    note: str
    blocks: bool


@dataclass
class Side:
    """What :func:`judge` needs of one run."""

    name: str
    role: str
    env: RunEnv
    load: Load
    graphs_off: bool = False
    engine: str | None = None
    """``runs.engine``: whose rules judge its keys."""
    run_id: str = ""
    profiled: bool = False


def user_set(env: RunEnv) -> set[str] | None:
    """Server arguments the launch command names (None: no command was recorded)."""
    entry = env.entries.get("command")
    if entry is None or not entry.value:
        return None
    try:
        return set(launch_args(shlex.split(str(entry.value))))
    except ValueError:
        return None


def limit(key: str, env: RunEnv, rules: CapacityRules) -> float | None:
    """The limit a capacity key set in a run: its value, a list's largest entry, a graph
    config's decode ``max_bs``, or (left auto) the effective value the engine printed."""
    entry = env.entries.get(f"arg.{key}")
    value = entry.value if entry else None
    if isinstance(value, str) and value.strip().startswith(("[", "{")):
        try:
            value = json.loads(value.replace("'", '"').replace("None", "null"))
        except ValueError:
            pass
    if isinstance(value, dict):
        decode = value["decode"] if isinstance(value.get("decode"), dict) else value
        value = decode.get("max_bs")
    if isinstance(value, list | tuple):
        nums = [v for v in value if isinstance(v, int | float)]
        value = max(nums) if nums else None
    if value in (None, "", "None") and key in rules.effective:
        eff = env.entries.get(f"effective.{rules.effective[key]}")
        value = eff.value if eff else None
    try:
        return float(value) if value not in (None, "", "None") else None
    except (TypeError, ValueError):
        return None


def _derived(key: str, spec: Side, base: Side, rules: CapacityRules,
             display: str) -> str | None:
    """Why ``key`` follows from the treatment in ``spec`` (None: it may not)."""
    if key not in rules.derived_by_speculation:
        return None
    named = user_set(spec.env)
    if named is not None and key in named:
        return None  # the user set it for the speculative run: it is the user's choice
    base_named = user_set(base.env)
    if base_named is not None and key in base_named:
        return None  # the baseline's value was chosen, not a default
    said = spec.env.entries.get(f"adjusted.{key}")
    if said is not None:
        return f"{display}'s log says it set it to {said.value} for speculative decoding"
    if named is not None:
        return f"not in the speculative run's launch command: {display} derived it"
    return (f"{display} derives it when speculation is on (no launch command recorded to "
            "show the user set it)")


def _reached(measure: str, lim: float, load: Load) -> bool:
    if measure == "running":
        return load.running is not None and (load.running >= lim or bool(load.queued)
                                             and load.running >= lim * 0.9)
    if measure == "queued":
        return load.queued is not None and load.queued >= lim
    if measure == "batch":
        return load.batch is not None and load.batch > lim
    if measure == "prefill":
        return load.prefill is not None and load.prefill >= lim
    # kv: the pool (sized by max_total_tokens or mem_fraction_static) filled up
    return load.retracted or (load.token_usage is not None and load.token_usage >= KV_FULL) \
        or (lim > 1 and load.kv_tokens is not None and load.kv_tokens >= lim * KV_FULL)


def _fmt(x: float | None) -> str:
    if x is None:
        return "auto"
    return f"{x:g}"


def _shown(value: Any, lim: float | None) -> str:
    """A limit as the run set it: ``48``, ``auto (2048 in effect)``."""
    if value in (None, "", "None", "null"):
        return "auto" + (f" ({lim:g} in effect)" if lim is not None else "")
    return _fmt(lim) if lim is not None else str(value)


def judge(a: Side, b: Side, d: EnvDiff) -> list[KeyJudgement]:
    """Judgements of every capacity key ``a`` and ``b`` differ in."""
    out: list[KeyJudgement] = []
    roles = {a.role, b.role}
    spec, base = (a, b) if a.role == "speculative" else (b, a)
    rules = capacity_rules(spec.engine or base.engine)
    known_engine = engine_named(spec.engine or base.engine or "")
    display = known_engine.display if known_engine is not None else "the engine"
    for item in d.capacity:
        key = item.key.removeprefix("arg.")
        measure = rules.measures.get(key, "kv")
        la, lb = limit(key, a.env, rules), limit(key, b.env, rules)
        pair = f"{_shown(item.a, la)} vs {_shown(item.b, lb)}"
        loads = f"{a.name} {a.load.words(measure)}, {b.name} {b.load.words(measure)}"
        why = _derived(key, spec, base, rules, display) \
            if roles == {"speculative", "baseline"} else None
        if why is not None:
            out.append(KeyJudgement(item.key, item.a, item.b, "derived",
                                    f"{key} {pair}: derived from the treatment ({why}); "
                                    f"{loads}", False))
            continue
        if measure == "batch" and a.graphs_off and b.graphs_off:
            out.append(KeyJudgement(item.key, item.a, item.b, "below the load",
                                    f"{key} {pair}: graphs were off in both runs, so graph "
                                    "batch sizes did not apply", False))
            continue
        known = [x for x in (la, lb) if x is not None]
        if not known:
            out.append(KeyJudgement(item.key, item.a, item.b, "unknown limit",
                                    f"{key} {item.a!r} vs {item.b!r}: the limits cannot be "
                                    "read as numbers, so the load cannot be judged", True))
            continue
        low = min(known)
        hit = [r.name for r in (a, b) if _reached(measure, low, r.load)]
        if hit:
            out.append(KeyJudgement(item.key, item.a, item.b, "reached",
                                    f"{key} {pair}: the load reached the lower limit "
                                    f"({_fmt(low)}) in {', '.join(hit)}; {loads}", True))
        elif len(known) < 2:
            out.append(KeyJudgement(item.key, item.a, item.b, "below the load",
                                    f"{key} {pair}: one limit was left to {display} and "
                                    f"not printed; both runs stayed below the other: {loads}",
                                    False))
        else:
            out.append(KeyJudgement(item.key, item.a, item.b, "below the load",
                                    f"{key} {pair}; both runs stayed below both limits: "
                                    f"{loads}", False))
    return out
