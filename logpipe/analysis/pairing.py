"""Judge the keys two runs differ in the way a careful SGLang engineer would.

An identity difference makes two runs incomparable, but two kinds of server argument need
judgement rather than a plain "differs":

- **Capacity keys** (tier ``capacity`` in ``schemas/tiers.toml``: running-request, graph
  batch-size, token and memory limits) only matter when the workload reaches them.  When
  both runs stayed below both limits, a difference is a caveat printed with the numbers;
  when a run reached a limit the other did not have, the comparison is refused and the key,
  the limits and the observed load are named.
- **Settings SGLang derives from the treatment.**  With speculative decoding SGLang resets
  ``max_running_requests`` (to 48), captures another CUDA-graph batch-size list, and sizes
  memory differently.  A difference in such a key between a speculative run and its
  baseline follows from the treatment when the user did not set the key in the speculative
  run (its launch command, where a manifest recorded one, does not name it; or SGLang's own
  log line says it changed it): it is shown as "derived from the treatment", never a
  refusal.

Pure: :func:`judge` takes two loaded runs and their environment diff.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from logpipe.env import EnvDiff, RunEnv, launch_args
from logpipe.store import Store

# capacity key (server argument) → what the load is measured by
MEASURES: dict[str, str] = {
    "max_running_requests": "running",
    "max_queued_requests": "queued",
    "cuda_graph_max_bs": "batch",
    "cuda_graph_bs": "batch",
    "cuda_graph_config": "batch",
    "cuda_graph_max_bs_decode": "batch",
    "cuda_graph_bs_decode": "batch",
    "torch_compile_max_bs": "batch",
    "chunked_prefill_size": "prefill",
    "max_prefill_tokens": "prefill",
    "max_total_tokens": "kv",
    "mem_fraction_static": "kv",
}
# the effective value SGLang prints on its capacity line, where the argument was left auto
EFFECTIVE = {"max_running_requests": "max_running_requests",
             "chunked_prefill_size": "chunked_prefill_size",
             "max_prefill_tokens": "max_prefill_tokens",
             "max_total_tokens": "max_total_num_tokens"}
# what SGLang derives by itself when speculative decoding is on (reference §4)
DERIVED_BY_SPECULATION = frozenset({
    "max_running_requests", "cuda_graph_max_bs", "cuda_graph_bs", "cuda_graph_config",
    "cuda_graph_max_bs_decode", "cuda_graph_bs_decode", "mem_fraction_static",
})
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
WITH ready AS (SELECT coalesce(min(line_no), 0) AS line FROM events
               WHERE run_id = $1 AND kind = 'ready'),
s AS (SELECT * FROM run_samples($1) WHERE line_no >= (SELECT line FROM ready)),
b AS (SELECT * FROM batches WHERE run_id = $1 AND line_no >= (SELECT line FROM ready))
SELECT (SELECT max(running_req) FILTER (WHERE kind IN ('decode', 'window')) FROM s),
       (SELECT max(queue_req) FROM s),
       (SELECT max(running_req) FILTER (WHERE kind IN ('decode', 'window')) FROM s),
       (SELECT max(new_token) FILTER (WHERE kind = 'prefill') FROM b),
       (SELECT max(num_token) FROM b),
       (SELECT max(token_usage) FROM s),
       (SELECT count(*) > 0 FROM events WHERE run_id = $1 AND kind = 'retract')
"""


def load_of(store: Store, run_id: str) -> Load:
    row = store.con.execute(_LOAD_SQL, [run_id]).fetchall()
    if not row:
        return Load()
    running, queued, batch, prefill, kv, usage, retracted = row[0]
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


def user_set(env: RunEnv) -> set[str] | None:
    """Server arguments the launch command names (None: no command was recorded)."""
    entry = env.entries.get("command")
    if entry is None or not entry.value:
        return None
    try:
        return set(launch_args(shlex.split(str(entry.value))))
    except ValueError:
        return None


def limit(key: str, env: RunEnv) -> float | None:
    """The limit a capacity key set in a run: its value, a list's largest entry, a graph
    config's decode ``max_bs``, or (left auto) the effective value SGLang printed."""
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
    if value in (None, "", "None") and key in EFFECTIVE:
        eff = env.entries.get(f"effective.{EFFECTIVE[key]}")
        value = eff.value if eff else None
    try:
        return float(value) if value not in (None, "", "None") else None
    except (TypeError, ValueError):
        return None


def _derived(key: str, spec: Side, base: Side) -> str | None:
    """Why ``key`` follows from the treatment in ``spec`` (None: it may not)."""
    if key not in DERIVED_BY_SPECULATION:
        return None
    named = user_set(spec.env)
    if named is not None and key in named:
        return None  # the user set it for the speculative run: it is the user's choice
    base_named = user_set(base.env)
    if base_named is not None and key in base_named:
        return None  # the baseline's value was chosen, not a default
    said = spec.env.entries.get(f"adjusted.{key}")
    if said is not None:
        return f"SGLang's log says it set it to {said.value} for speculative decoding"
    if named is not None:
        return "not in the speculative run's launch command: SGLang derived it"
    return ("SGLang derives it when speculation is on (no launch command recorded to show "
            "the user set it)")


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
    for item in d.capacity:
        key = item.key.removeprefix("arg.")
        measure = MEASURES.get(key, "kv")
        la, lb = limit(key, a.env), limit(key, b.env)
        pair = f"{_shown(item.a, la)} vs {_shown(item.b, lb)}"
        loads = f"{a.name} {a.load.words(measure)}, {b.name} {b.load.words(measure)}"
        why = _derived(key, spec, base) if roles == {"speculative", "baseline"} else None
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
                                    f"{key} {pair}: one limit was left to SGLang and not "
                                    f"printed; both runs stayed below the other: {loads}",
                                    False))
        else:
            out.append(KeyJudgement(item.key, item.a, item.b, "below the load",
                                    f"{key} {pair}; both runs stayed below both limits: "
                                    f"{loads}", False))
    return out
