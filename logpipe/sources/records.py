"""Shared reading of JSON Lines record files (benchmarks, phase dumps, request metrics)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

RAW_LIMIT = 2000


def loads(text: str) -> Any:
    """``json.loads(text)``; a value nested too deeply for the decoder (thousands of
    brackets in one line: a damaged or hostile record) raises ``ValueError``, as any other
    text that is no JSON does, so that its line is a reject, not its file's failure."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


_INT64 = 1 << 63


def too_big(row: dict[str, Any], narrow: frozenset[str] = frozenset()) -> str | None:
    """The first column of ``row`` whose integer its column cannot hold: 64 bits, 32 for
    those ``narrow`` names (a record's count of 20 digits: the frame of its file could not
    be built, or not inserted), or None.  Its line is a reject that names it, as the log
    parsers reject such a line."""
    for key, value in row.items():
        if type(value) is int:
            bound = 1 << 31 if key in narrow else _INT64
            if not -bound <= value < bound:
                return key
    return None


def first_json_object(head: str) -> dict[str, Any] | None:
    """The first line of ``head`` as a JSON object, or None."""
    line = head.lstrip().split("\n", 1)[0]
    if not line.startswith("{"):
        return None
    try:
        obj = loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def json_objects(text: str, rejects: list[tuple[int, str, str]]
                 ) -> Iterator[tuple[int, dict[str, Any], str]]:
    """``(line number, object, raw line)`` for each JSON-object line of ``text``; other
    non-empty lines are appended to ``rejects`` as ``(line, reason, raw)``."""
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            rejects.append((i, f"not JSON: {reason}", line[:RAW_LIMIT]))
            continue
        if not isinstance(obj, dict):
            rejects.append((i, "not a JSON object", line[:RAW_LIMIT]))
            continue
        yield i, obj, line
