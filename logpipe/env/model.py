"""A run's environment as values with their sources: built from manifests, the server's
arguments, what its log states and the variables its engine forces; fingerprinted over
the identity tier."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logpipe.env.keys import REDACTED
from logpipe.env.manifests import flatten_manifest
from logpipe.env.tiers import Tiers
from logpipe.redaction import is_secret_key
from logpipe.releases import in_range

# ------------------------------------------------------------------ build, fingerprint

@dataclass
class Entry:
    value: Any
    source: str
    tier: str = "annotation"
    conflict: str | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"value": self.value, "source": self.source, "tier": self.tier}
        if self.conflict:
            out["conflict"] = self.conflict
        return out


@dataclass
class RunEnv:
    entries: dict[str, Entry] = field(default_factory=dict)
    complete: bool = False
    manifests: list[str] = field(default_factory=list)

    def fingerprint(self) -> str:
        return fingerprint({k: e.value for k, e in self.entries.items()
                            if e.tier == "identity"})

    def to_json(self) -> str:
        """``json.dumps`` of the entries by key, each entry's text made once per process
        (the launches of a file repeat nearly all of their ~600 entries)."""
        return "{" + ", ".join(_entry_json(k, e) for k, e in sorted(self.entries.items())) \
            + "}"

    @classmethod
    def from_json(cls, text: str | None, complete: bool = False) -> RunEnv:
        data = json.loads(text) if text else {}
        return cls({k: Entry(v.get("value"), v.get("source", "?"), v.get("tier", "annotation"),
                             v.get("conflict")) for k, v in data.items()}, complete)


_MEMO_MAX = 100_000
_entry_texts: dict[tuple[Any, ...], str] = {}
_canonicals: dict[tuple[Any, ...], str] = {}


def _typed(value: Any) -> tuple[Any, ...] | None:
    """A memo key for ``value`` that tells apart what ``==`` does not (``1``, ``1.0`` and
    ``True``; ``0.0`` and ``-0.0``), or None for a value that is not memoised."""
    if value is None or isinstance(value, str | int):
        return (type(value), value)
    if isinstance(value, float):
        return (float, repr(value))
    return None


def _memo(memo: dict[tuple[Any, ...], str], key: tuple[Any, ...]) -> str | None:
    if len(memo) > _MEMO_MAX:
        memo.clear()
    return memo.get(key)


def _entry_json(key: str, entry: Entry) -> str:
    """``"key": {...}`` as ``json.dumps`` writes the item of a dict."""
    typed = _typed(entry.value)
    memo_key = None if typed is None else (key, *typed, entry.source, entry.tier,
                                           entry.conflict)
    text = None if memo_key is None else _memo(_entry_texts, memo_key)
    if text is None:
        text = f"{json.dumps(key)}: {json.dumps(entry.as_json(), default=str)}"
        if memo_key is not None:
            _entry_texts[memo_key] = text
    return text


def canonical(value: Any) -> str:
    """One text per meaning (memoised for plain values: a fingerprint reads hundreds)."""
    typed = _typed(value)
    if typed is None:
        return _canonical(value)
    text = _memo(_canonicals, typed)
    if text is None:
        text = _canonicals[typed] = _canonical(value)
    return text


def _canonical(value: Any) -> str:
    """One text per meaning: ``8``, ``"8"`` and ``8.0`` agree; so do ``True`` and ``"true"``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        f = float(value)
        return str(int(f)) if f.is_integer() else repr(f)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    text = str(value).strip()
    if text in ("True", "False", "true", "false"):
        return text.lower()
    if text in ("None", "null"):
        return "null"
    try:
        return canonical(float(text)) if text.lower() not in ("nan", "inf", "-inf") else text
    except ValueError:
        return text


def fingerprint(identity: Mapping[str, Any]) -> str:
    """Stable hash of identity keys and values (order and value types don't matter)."""
    items = sorted((k, canonical(v)) for k, v in identity.items())
    blob = json.dumps(items, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def forced_variables(engine: str | None, entries: Mapping[str, Entry]
                     ) -> list[tuple[str, str, str, str]]:
    """``(variable, value, engine name, engine and release)`` an engine sets itself at launch (its
    :class:`logpipe.engines.CapacityRules`), for the release of its package in
    ``entries``: the run's engine's, or every engine's whose package is there where the
    run's engine is not known."""
    from logpipe.engines import engine_named, engines

    known = engine_named(engine) if engine else None
    out = []
    for e in [known] if known is not None else engines():
        version = entries.get(f"pkg.{e.packages[0]}") if e.packages else None
        if version is None or not version.value:
            continue
        for var, first, last, value in e.capacity.forced_variables:
            if in_range(str(version.value), first, last):
                out.append((var, value, e.name, f"{e.display} {version.value}"))
    return out


CAPACITY_FACTS = ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens",
                  "max_running_requests", "context_len")


def log_facts(events: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Environment facts a server log states, from its ``(kind, attrs)`` events: NCCL's
    variables and version, the settings the engine changed itself, its effective limits.
    The kinds are the neutral event vocabulary of ``events`` (``schemas/README.md``) that
    every engine's parser emits (SGLang's and vLLM's both give ``load_weight``,
    ``kv_cache``, ``graph_capture``, ``attention_backend``)."""
    facts: dict[str, Any] = {}
    for kind, attrs in events:
        if kind == "nccl_env" and attrs.get("variable"):
            facts[str(attrs["variable"])] = attrs.get("value")
            facts["nccl.debug_info"] = True
        elif kind == "nccl_version" and attrs.get("nccl_version"):
            facts["nccl.version"] = str(attrs["nccl_version"]).split("+")[0]
            if attrs.get("nccl_debug_info"):
                # NCCL INFO lines are there (NCCL_DEBUG=INFO): every variable NCCL read
                # from the environment says "set by environment"; the others are unset
                facts["nccl.debug_info"] = True
        elif kind in ("setting_adjusted", "attention_backend") and attrs.get("arg"):
            facts[f"adjusted.{attrs['arg']}"] = attrs.get("value")
        elif kind == "capacity":
            for name in CAPACITY_FACTS:
                if attrs.get(name) is not None:
                    facts.setdefault(f"effective.{name}", attrs[name])
        elif kind == "load_weight":
            if attrs.get("phase") == "begin" and attrs.get("avail_mem_gb") is not None:
                facts.setdefault("effective.avail_mem_gb_at_load", attrs["avail_mem_gb"])
            if attrs.get("dtype"):
                facts.setdefault("effective.weight_dtype", attrs["dtype"])
            if attrs.get("mem_usage_gb") is not None and attrs.get("phase") == "end":
                facts.setdefault("effective.weight_mem_gb", attrs["mem_usage_gb"])
        elif kind == "kv_cache":
            if attrs.get("dtype"):
                facts.setdefault("effective.kv_cache_dtype", attrs["dtype"])
            if attrs.get("num_tokens") is not None:
                facts.setdefault("effective.kv_cache_tokens", attrs["num_tokens"])
        elif kind == "graph_capture" and isinstance(attrs.get("bs"), list):
            facts.setdefault("effective.cuda_graph_bs", attrs["bs"])
        elif kind == "startup_timings":
            for name, value in attrs.items():
                facts.setdefault(f"startup.{name}", value)
    return facts


def build_env(
    *,
    tiers: Tiers,
    manifests: Iterable[tuple[str, Mapping[str, Any]]] = (),
    server_args: Mapping[str, Any] | None = None,
    format_era: str | None = None,
    cli_env: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | None = None,
    log_facts: Mapping[str, Any] | None = None,
    engine: str | None = None,
) -> RunEnv:
    """Merge every source of a run's environment (lowest precedence first).

    ``manifests`` are ``(source label, manifest)`` pairs, lowest precedence first.  The
    server's printed arguments are the effective values of ``arg.*`` keys: where a
    manifest's launch command disagrees, the printed value wins and the conflict is noted.
    ``log_facts`` (:func:`log_facts`) are what the log says about its environment: where a
    manifest says otherwise, both are kept (the conflict is noted) and the log's effective
    value wins.
    """
    env = RunEnv()
    entries = env.entries
    for label, manifest in manifests:
        # a report without the run's variables (torch's collect_env) leaves them unknown
        env.complete = env.complete or bool(manifest.get("env_captured", True))
        env.manifests.append(label)
        for key, value in flatten_manifest(manifest).items():
            entries[key] = Entry(value, label)
    for key, value in (server_args or {}).items():
        k = f"arg.{key}"
        value = REDACTED if is_secret_key(key) and value not in (None, "", False) else value
        previous = entries.get(k)
        conflict = None
        if previous is not None and canonical(previous.value) != canonical(value):
            conflict = f"{previous.source} says {previous.value!r}"
        entries[k] = Entry(value, "server_args", conflict=conflict)
    if format_era:
        entries[f"{engine or 'server'}.format_era"] = Entry(format_era, "log format")
    for var, forced, name, who in forced_variables(engine, entries):
        declared = entries.get(var)
        if declared is None or canonical(declared.value) != canonical(forced):
            note = (f"{declared.source} says {declared.value!r}; " if declared else "") + \
                f"{who} sets it at launch"
            entries[var] = Entry(forced, f"{name} launch", conflict=note)
    for key, value in (log_facts or {}).items():
        value = REDACTED if is_secret_key(key) and value not in (None, "") else value
        previous = entries.get(key)
        conflict = None
        if previous is not None and canonical(previous.value) != canonical(value):
            conflict = (f"{previous.source} says {previous.value!r}; the log shows the value "
                        "in effect")
        entries[key] = Entry(value, "log", conflict=conflict)
    for key, value in (cli_env or {}).items():
        entries[key] = Entry(REDACTED if is_secret_key(key) else value, "command line")
    for key, value in (tags or {}).items():
        entries[f"tag.{key}"] = Entry(value, "command line")
    for key, entry in entries.items():
        entry.tier = tiers.tier(key)
    return env
