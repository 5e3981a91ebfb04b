"""Two environments side by side: the keys they differ in, by tier, and what neither
states."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from logpipe.env.keys import ENGINE_PACKAGE, ENV_VARIABLES, MANIFEST_IDENTITY_KEYS, TIERS
from logpipe.env.model import RunEnv, canonical

# -------------------------------------------------------------------------------- diff

@dataclass
class DiffItem:
    key: str
    tier: str
    a: Any
    b: Any
    a_source: str | None
    b_source: str | None


@dataclass
class EnvDiff:
    run_a: str
    run_b: str
    complete_a: bool
    complete_b: bool
    items: list[DiffItem]

    @property
    def identity(self) -> list[DiffItem]:
        return [i for i in self.items if i.tier == "identity"]

    unknown: dict[str, list[str]] = field(default_factory=dict)
    """Per run without a manifest: the identity facts nothing states (a server log never
    gives the GPU, driver, CUDA or package versions; environment variables only where
    NCCL printed them)."""
    known_match: list[str] = field(default_factory=list)
    """Identity keys both runs state, with the same value."""
    missing: dict[str, list[str]] = field(default_factory=dict)
    """Per run with a manifest: the identity facts it does not state (no packages, no
    GPU): the runs are comparable only as far as what is known."""

    def missing_text(self) -> str:
        """``gpu.model, cuda.version unknown in both`` (or per run); empty when none."""
        a, b = self.missing.get(self.run_a, []), self.missing.get(self.run_b, [])
        both = [k for k in a if k in b]
        parts = []
        if both:
            parts.append(", ".join(both) + " unknown in both")
        for run, keys in ((self.run_a, a), (self.run_b, b)):
            only = [k for k in keys if k not in both]
            if only:
                parts.append(", ".join(only) + f" unknown in {run}")
        return "; ".join(parts)

    @property
    def comparable(self) -> bool:
        """True only when both environments are known and their identity tiers match."""
        return self.complete_a and self.complete_b and not self.identity

    @property
    def capacity(self) -> list[DiffItem]:
        return [i for i in self.items if i.tier == "capacity"]

    def identity_keys(self) -> list[str]:
        return [i.key for i in self.identity]


NCCL_DEBUG_INFO = "nccl.debug_info"
"""The fact a log's NCCL INFO lines were read: they list the NCCL variables set, so one
they omit is unset."""
UNSET = "(unset)"
UNKNOWN = "unknown"
FACTS = ("pkg.", "gpu.", "cuda.", "host.", "python.", "torch.", "driver.")
"""Keys that state a fact of the machine (a package version, the GPU): absent, they are
unknown, never unset."""


def _absent(env: RunEnv, key: str) -> str:
    """How a key one run does not have is shown: unknown where the run's environment is
    not fully captured or the key is a fact of the machine; unset otherwise (a variable
    or an argument the launch did not set)."""
    if key.startswith("NCCL_") and NCCL_DEBUG_INFO in env.entries:
        return UNSET  # NCCL's INFO lines list the variables set: one they omit is unset
    return UNKNOWN if not env.complete or key.startswith(FACTS) else UNSET


def diff(name_a: str, a: RunEnv, name_b: str, b: RunEnv) -> EnvDiff:
    """Key-by-key differences, identity first, then treatment, then annotation."""
    items = []
    for key in sorted(set(a.entries) | set(b.entries)):
        ea, eb = a.entries.get(key), b.entries.get(key)
        va = ea.value if ea else None
        vb = eb.value if eb else None
        if ea and eb and _same(va, vb):
            continue
        one = ea or eb
        if (ea is None or eb is None) and one is not None and one.source == "log" and not (
                key.startswith("NCCL_") and NCCL_DEBUG_INFO in (b if ea else a).entries):
            # one log says it and the other does not: unknown there, not known to differ
            # (an NCCL variable the other run's NCCL INFO lines do not list is unset)
            continue
        tier = (ea or eb).tier  # type: ignore[union-attr]
        items.append(DiffItem(key, tier, va if ea else _absent(a, key),
                              vb if eb else _absent(b, key),
                              ea.source if ea else None, eb.source if eb else None))
    order = {t: i for i, t in enumerate(TIERS)}
    items.sort(key=lambda i: (order.get(i.tier, len(order)), i.key))
    known_match = sorted(k for k in set(a.entries) & set(b.entries)
                         if a.entries[k].tier == "identity"
                         and _same(a.entries[k].value, b.entries[k].value))
    unknown = {name: unknown_identity(env) for name, env in ((name_a, a), (name_b, b))
               if not env.complete}
    missing = {name: _not_stated(env) for name, env in ((name_a, a), (name_b, b))
               if env.complete}
    return EnvDiff(name_a, name_b, a.complete, b.complete, items, unknown, known_match,
                   {k: v for k, v in missing.items() if v})


def _same(a: Any, b: Any) -> bool:
    """Whether two values mean the same (their canonical texts are equal); equal plain
    values of one type without canonicalising them (most of two environments' ~1,000
    entries: 4 ms a diff, ~800 for one run's baseline search)."""
    if type(a) is type(b) and (a is None or type(a) in (str, int, bool)) and a == b:
        return True
    return canonical(a) == canonical(b)


def _not_stated(env: RunEnv) -> list[str]:
    """The facts of :data:`MANIFEST_IDENTITY_KEYS` ``env`` does not state (the engine's
    package named after the engine whose log format the run has, where it has one)."""
    from logpipe.engines import engines, packages

    out = []
    for key in MANIFEST_IDENTITY_KEYS:
        if key == ENGINE_PACKAGE:
            if not any(f"pkg.{p}" in env.entries for p in packages()):
                own = [e for e in engines() if f"{e.name}.format_era" in env.entries]
                out.append(f"pkg.{own[0].packages[0]}" if own and own[0].packages else key)
        elif key not in env.entries:
            out.append(key)
    return out


def unknown_identity(env: RunEnv) -> list[str]:
    """The identity facts a run without a manifest leaves unknown."""
    out = _not_stated(env)
    if NCCL_DEBUG_INFO in env.entries:
        out.append(ENV_VARIABLES + " other than NCCL_* (NCCL_* from the log's NCCL INFO lines)")
    else:
        out.append(ENV_VARIABLES + " (NCCL_*, CUDA_*, SGLANG_*, ...)")
    return out
