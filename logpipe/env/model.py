"""A run's environment as values with their sources: built from manifests, the server's
arguments, what its log states and the variables its engine forces; fingerprinted over
the identity tier."""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from logpipe.env.keys import REDACTED
from logpipe.env.manifests import flatten_manifest
from logpipe.env.tiers import Tiers
from logpipe.redaction import is_secret_key
from logpipe.releases import in_range

# ------------------------------------------------------------------ build, fingerprint

@dataclass(frozen=True)
class Entry:
    """One value of a run's environment and where it came from.  Frozen: the entries a
    file's launches have in common are one object each (:func:`build_env`), and their
    texts are made once (:attr:`json_text`, :attr:`value_text`, :attr:`canonical_value`)."""

    value: Any
    source: str
    tier: str = "annotation"
    conflict: str | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"value": self.value, "source": self.source, "tier": self.tier}
        if self.conflict:
            out["conflict"] = self.conflict
        return out

    @cached_property
    def json_text(self) -> str:
        """``json.dumps(self.as_json())``: the entry's text in ``runs.env``."""
        return json.dumps(self.as_json(), default=str)

    @cached_property
    def value_text(self) -> str:
        """``run_env.value``: a string as it is, anything else as JSON."""
        value = self.value
        return value if isinstance(value, str) else json.dumps(value, default=str)

    @cached_property
    def canonical_value(self) -> str:
        """:func:`canonical` of the value, as the fingerprint reads it."""
        return canonical(self.value)


_MEMO_MAX = 100_000
_key_texts: dict[str, str] = {}
_canonicals: dict[tuple[Any, ...], str] = {}


def _entries_of(tiers: Tiers) -> dict[tuple[Any, ...], Entry]:
    """The entries made with ``tiers`` (kept with it: a tier follows from its rules),
    one object per distinct entry, so that the ~600 entries the launches of a file mostly
    share are built, and their texts made, once."""
    memo: dict[tuple[Any, ...], Entry] | None = tiers.__dict__.get("_entries")
    if memo is None or len(memo) > _MEMO_MAX:
        memo = tiers.__dict__["_entries"] = {}
    return memo


def _entry_key(key: str, value: Any, source: str) -> tuple[Any, ...] | None:
    """A memo key of an entry (:func:`_typed`), or None for one not memoised."""
    typed = _typed(value)
    return None if typed is None else (key, source, *typed)


@dataclass
class RunEnv:
    entries: dict[str, Entry] = field(default_factory=dict)
    complete: bool = False
    manifests: list[str] = field(default_factory=list)

    def fingerprint(self) -> str:
        return fingerprint({k: e.value for k, e in self.entries.items()
                            if e.tier == "identity"})

    def to_json(self) -> str:
        """``json.dumps`` of the entries by key."""
        return render(self).json

    @classmethod
    def from_json(cls, text: str | None, complete: bool = False) -> RunEnv:
        data = json.loads(text) if text else {}
        return cls({k: Entry(v.get("value"), v.get("source", "?"), v.get("tier", "annotation"),
                             v.get("conflict")) for k, v in data.items()}, complete)


@dataclass(frozen=True)
class Rendered:
    """A run's environment written out, as it was when rendered (:func:`render`): its
    entries by key, their ``runs.env`` texts and the identity values its fingerprint
    hashes, each in key order."""

    entries: dict[str, Entry]
    keys: list[str]
    texts: list[str]
    identity: list[tuple[str, str]]
    complete: bool
    same_identity: Rendered | None = field(default=None, compare=False, repr=False)
    """A rendering whose identity values are these (its fingerprint is this one's)."""

    @cached_property
    def json(self) -> str:
        """``runs.env``: ``json.dumps`` of the entries by key."""
        return "{" + ", ".join(self.texts) + "}"

    @cached_property
    def fingerprint(self) -> str:
        if self.same_identity is not None:
            return self.same_identity.fingerprint
        return _digest(self.identity)


def render(env: RunEnv, like: Rendered | None = None) -> Rendered:
    """``env`` written out; from ``like`` (the rendering of a similar environment: the
    launch before in the same file) where few entries differ, changing only those.
    Entries are compared by identity (:func:`build_env` gives the launches of a file one
    object per shared entry), so ~600 entries cost a comparison each, not a text each
    (1,586 docker launches, text and fingerprint included: 0.55-0.75 ms a launch alone,
    0.26-0.39 ms from the one before)."""
    entries = dict(env.entries)
    if like is None:
        return _render_all(entries, env.complete)
    old = like.entries
    removed = old.keys() - entries.keys()
    changed = [k for k, e in entries.items() if old.get(k) is not e]
    if 2 * (len(changed) + len(removed)) > len(entries):
        return _render_all(entries, env.complete)
    keys, texts, identity = like.keys.copy(), like.texts.copy(), like.identity.copy()
    moved = False  # (whether an identity value changed: else the fingerprint is like's)
    for k in removed:
        i = bisect_left(keys, k)
        del keys[i], texts[i]
        if old[k].tier == "identity":
            del identity[bisect_left(identity, (k,))]
            moved = True
    for k in changed:
        e, was = entries[k], old.get(k)
        text = f"{_key_text(k)}: {e.json_text}"
        i = bisect_left(keys, k)
        if was is not None:
            texts[i] = text
        else:
            keys.insert(i, k)
            texts.insert(i, text)
        was_identity = was is not None and was.tier == "identity"
        if was_identity or e.tier == "identity":
            moved = True
            j = bisect_left(identity, (k,))
            if was_identity and e.tier == "identity":
                identity[j] = (k, e.canonical_value)
            elif was_identity:
                del identity[j]
            else:
                identity.insert(j, (k, e.canonical_value))
    return Rendered(entries, keys, texts, identity, env.complete,
                    None if moved else like.same_identity or like)


def _render_all(entries: dict[str, Entry], complete: bool) -> Rendered:
    keys = sorted(entries)
    ordered = [entries[k] for k in keys]
    return Rendered(entries, keys,
                    [f"{_key_text(k)}: {e.json_text}" for k, e in zip(keys, ordered, strict=True)],
                    [(k, e.canonical_value) for k, e in zip(keys, ordered, strict=True)
                     if e.tier == "identity"], complete)


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


def _key_text(key: str) -> str:
    text = _key_texts.get(key)
    if text is None:
        if len(_key_texts) > _MEMO_MAX:
            _key_texts.clear()
        text = _key_texts[key] = json.dumps(key)
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
    return _digest(sorted((k, canonical(v)) for k, v in identity.items()))


_pair_texts: dict[tuple[str, str], str] = {}


def _digest(items: list[tuple[str, str]]) -> str:
    """The fingerprint of ``(key, canonical value)`` pairs in key order: the hash of
    ``json.dumps(items, separators=(",", ":"))``, written from each pair's text (the same
    ~500 pairs recur launch after launch)."""
    if len(_pair_texts) > _MEMO_MAX:
        _pair_texts.clear()
    texts = []
    for item in items:
        text = _pair_texts.get(item)
        if text is None:
            text = _pair_texts[item] = json.dumps(item, separators=(",", ":"))
        texts.append(text)
    return hashlib.sha256(("[" + ",".join(texts) + "]").encode()).hexdigest()[:16]


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
    value wins.  (:func:`launch_layers`, then :func:`with_run_facts`: the launches of a
    file that repeat a configuration share the first.)
    """
    launch = launch_layers(tiers=tiers, manifests=manifests, server_args=server_args,
                           format_era=format_era, engine=engine)
    return with_run_facts(launch.env, tiers=tiers, log_facts=log_facts, cli_env=cli_env,
                          tags=tags)


@dataclass(frozen=True)
class LaunchLayers:
    """A launch's configuration layers (:func:`launch_layers`) with what the next launch
    of the same manifests, era and engine is built from."""

    env: RunEnv
    server_args: dict[str, Any]
    manifest_entries: dict[str, Entry]
    """The entries of the manifests alone (an argument's conflict is with them)."""
    forced_args: bool
    """Whether the engine forces an ``arg.*`` key (then never built from another)."""


def launch_layers(
    *,
    tiers: Tiers,
    manifests: Iterable[tuple[str, Mapping[str, Any]]] = (),
    server_args: Mapping[str, Any] | None = None,
    format_era: str | None = None,
    engine: str | None = None,
    like: LaunchLayers | None = None,
) -> LaunchLayers:
    """The layers of :func:`build_env` a launch's configuration decides: the manifests,
    the printed arguments, the log's format era and the variables the engine forces.
    From ``like`` (a launch of the same manifests, era and engine: the caller's promise)
    where few arguments differ, only their entries are made again (a file's launches
    differ in a seed or a swept argument, not in ~550)."""
    args = dict(server_args or {})
    if like is not None and not like.forced_args:
        before = like.server_args
        changed = [k for k, v in args.items() if not _same(before.get(k, _MISSING), v)]
        removed = before.keys() - args.keys()
        if 2 * (len(changed) + len(removed)) <= len(args):
            entries = dict(like.env.entries)
            for k in removed:
                kept = like.manifest_entries.get(f"arg.{k}")
                if kept is None:
                    del entries[f"arg.{k}"]
                else:
                    entries[f"arg.{k}"] = kept
            said = _setter(entries, tiers)
            for k in changed:
                _argument(said, like.manifest_entries, k, args[k])
            env = RunEnv(entries, like.env.complete, list(like.env.manifests))
            return LaunchLayers(env, args, like.manifest_entries, False)
    env = RunEnv()
    entries = env.entries
    said = _setter(entries, tiers)
    for label, manifest in manifests:
        # a report without the run's variables (torch's collect_env) leaves them unknown
        env.complete = env.complete or bool(manifest.get("env_captured", True))
        env.manifests.append(label)
        for key, value in flatten_manifest(manifest).items():
            said(key, value, label)
    manifest_entries = dict(entries)
    for key, value in args.items():
        _argument(said, manifest_entries, key, value)
    if format_era:
        said(f"{engine or 'server'}.format_era", format_era, "log format")
    forced_args = False
    for var, forced, name, who in forced_variables(engine, entries):
        declared = entries.get(var)
        forced_args = forced_args or var.startswith("arg.")
        if declared is None or declared.canonical_value != canonical(forced):
            note = (f"{declared.source} says {declared.value!r}; " if declared else "") + \
                f"{who} sets it at launch"
            said(var, forced, f"{name} launch", note)
    return LaunchLayers(env, args, manifest_entries, forced_args)


def _argument(said: Callable[..., None], manifest_entries: Mapping[str, Entry], key: str,
              value: Any) -> None:
    """The ``arg.<key>`` entry of a printed argument (its conflict with a manifest's)."""
    k = f"arg.{key}"
    value = REDACTED if is_secret_key(key) and value not in (None, "", False) else value
    previous = manifest_entries.get(k)
    conflict = None
    if previous is not None and previous.canonical_value != canonical(value):
        conflict = f"{previous.source} says {previous.value!r}"
    said(k, value, "server_args", conflict)


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """Whether two printed values make the same entry: of the same type and text (a list
    or dict by its repr, which tells 1, 1.0 and True apart and follows a dict's key
    order, as its JSON text does)."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is str or kind is int or kind is bool or a is None:
        return bool(a == b)
    if kind is float or kind is list or kind is dict:
        return repr(a) == repr(b)
    return False


def with_run_facts(
    launch: RunEnv,
    *,
    tiers: Tiers,
    log_facts: Mapping[str, Any] | None = None,
    cli_env: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | None = None,
) -> RunEnv:
    """A new environment: ``launch`` (:func:`launch_layers`, left as it is) with the layers
    of :func:`build_env` each run has its own: what its log says, then the command
    line's variables and tags."""
    env = RunEnv(dict(launch.entries), launch.complete, list(launch.manifests))
    entries = env.entries
    said = _setter(entries, tiers)
    for key, value in (log_facts or {}).items():
        value = REDACTED if is_secret_key(key) and value not in (None, "") else value
        previous = entries.get(key)
        conflict = None
        if previous is not None and previous.canonical_value != canonical(value):
            conflict = (f"{previous.source} says {previous.value!r}; the log shows the value "
                        "in effect")
        said(key, value, "log", conflict)
    for key, value in (cli_env or {}).items():
        said(key, REDACTED if is_secret_key(key) else value, "command line")
    for key, value in (tags or {}).items():
        said(f"tag.{key}", value, "command line")
    return env


def _setter(entries: dict[str, Entry], tiers: Tiers) -> Callable[..., None]:
    """``said(key, value, source, conflict=None)``: sets ``entries[key]``, one object per
    distinct entry without a conflict (:func:`_entries_of`)."""
    memo = _entries_of(tiers)

    def said(key: str, value: Any, source: str, conflict: str | None = None) -> None:
        memo_key = None if conflict is not None else _entry_key(key, value, source)
        found = None if memo_key is None else memo.get(memo_key)
        if found is None:
            found = Entry(value, source, tiers.tier(key), conflict)
            if memo_key is not None:
                memo[memo_key] = found
        entries[key] = found

    return said
