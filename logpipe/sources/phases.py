"""Phase-timing dumps of speculative decoding (``schemas/phase_timings.md``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from logpipe.sources import Source, register
from logpipe.sources.records import first_json_object, json_objects, too_big

KNOWN = {"v", "ts", "batch_size", "phases_ms", "accepted_tokens", "synchronized", "rank"}


def sniff(head: str) -> bool:
    obj = first_json_object(head)
    return obj is not None and isinstance(obj.get("phases_ms"), dict)


SOURCE = register(Source(
    name="phase_timings",
    description="speculative-decoding phase timings, one JSON object per cycle",
    sniff=sniff,
    samples=("profiles/eagle3-profiled/phase_timings.jsonl",
             "mission/eagle3-untuned/phase_timings.jsonl"),
    specificity=25,
    table="phase_timings",
    parse=lambda text, keep_text: parse(text),
))


def _ts(value: Any) -> datetime | None:
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
        except (ValueError, OverflowError, OSError):  # nan, inf, past year 9999: no time
            return None
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        # an instant with its offset: kept as UTC (the offset is not just dropped)
        return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when
    return None


def _is_count(value: Any) -> bool:
    """Whether ``value`` is a count or missing: an integer, a whole number written as a
    float (``4.0``), or None (not a string, a fraction, inf or nan)."""
    if value is None or type(value) is int:
        return True
    return isinstance(value, float) and value.is_integer()


def parse(text: str) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str, str]]]:
    """One row per (cycle, phase); rejects for lines that are not cycles."""
    rows: list[tuple[int, dict[str, Any]]] = []
    rejects: list[tuple[int, str, str]] = []
    for i, obj, line in json_objects(text, rejects):
        phases = obj.get("phases_ms")
        if not isinstance(phases, dict) or not phases:
            rejects.append((i, "no phases_ms object", line[:2000]))
            continue
        try:
            values = {str(k): float(v) for k, v in phases.items()}
        except (TypeError, ValueError):
            rejects.append((i, "a phase duration is not a number", line[:2000]))
            continue
        cycle = sum(values.values())
        extra = json.dumps({k: v for k, v in obj.items() if k not in KNOWN}, default=str)
        counts = {k: obj.get(k) for k in ("rank", "batch_size", "accepted_tokens")}
        odd = next((k for k, v in counts.items() if not _is_count(v)), None)
        if odd is not None:
            rejects.append((i, f"a phase record whose {odd} is not a count", line[:2000]))
            continue
        counts = {k: int(v) if isinstance(v, float) else v for k, v in counts.items()}
        big = too_big(counts, frozenset({"rank"}))
        if big is not None:
            rejects.append((i, f"a phase record whose {big} is too big for its column",
                            line[:2000]))
            continue
        for phase, ms in values.items():
            rows.append((i, {
                "ts": _ts(obj.get("ts")), **counts,
                "synchronized": bool(obj.get("synchronized", False)), "phase": phase, "ms": ms,
                "cycle_ms": cycle, "extra": extra,
            }))
    return rows, rejects
