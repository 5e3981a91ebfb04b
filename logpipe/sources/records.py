"""Shared reading of JSON Lines record files (benchmarks, phase dumps, request metrics)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

RAW_LIMIT = 2000


def first_json_object(head: str) -> dict[str, Any] | None:
    """The first line of ``head`` as a JSON object, or None."""
    line = head.lstrip().split("\n", 1)[0]
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
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
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            rejects.append((i, f"not JSON: {exc.msg}", line[:RAW_LIMIT]))
            continue
        if not isinstance(obj, dict):
            rejects.append((i, "not a JSON object", line[:RAW_LIMIT]))
            continue
        yield i, obj, line
