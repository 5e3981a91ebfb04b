"""Per-request metrics of ``--export-metrics-to-file`` (reference §6.1): JSON Lines, one
object per finished request — ``request_parameters`` (a JSON *string*) merged with every
``meta_info`` key.  Text (prompts, messages, outputs, token ids) is not stored unless the
user asks for it (``ingest --keep-request-text``).
"""

from __future__ import annotations

import json
from typing import Any

from logpipe.sources import Source, register
from logpipe.sources.records import RAW_LIMIT, first_json_object, json_objects, loads, too_big

TEXT_KEYS = {"text", "prompt", "prompt_text", "output_text", "messages", "input_ids",
             "output_ids", "input_embeds", "image_data", "audio_data", "video_data",
             "generated_text"}
COLUMNS = {"prompt_tokens": int, "completion_tokens": int, "cached_tokens": int,
           "spec_verify_ct": int, "spec_accept_length": float}


def sniff(head: str) -> bool:
    obj = first_json_object(head)
    return obj is not None and ("request_parameters" in obj or {
        "prompt_tokens", "completion_tokens", "e2e_latency"} <= set(obj))


SOURCE = register(Source(
    name="request_metrics",
    description="SGLang --export-metrics-to-file request metrics (JSON Lines)",
    sniff=sniff,
    samples=("mission/baseline-untuned/sglang-request-metrics-20260504_09.log",),
    specificity=22,
    table="request_metrics",
    parse=lambda text, keep_text: parse(text, keep_text=keep_text),
))


def _without_text(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_text(v) if isinstance(v, dict) else v
                for k, v in value.items() if k not in TEXT_KEYS}
    return value


def _kept(value: Any) -> Any:
    return value


_ENCODE = json.JSONEncoder(default=str).encode
"""``json.dumps(value, default=str)``, its encoder made once (``json.dumps`` with an
argument makes one a call: ~1 us of a request's row)."""
_KNOWN = frozenset({"id", "rid", "finish_reason", "e2e_latency", "request_parameters",
                    *COLUMNS})


def parse(text: str, keep_text: bool = False
          ) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str, str]]]:
    """One ``request_metrics`` row per JSON line of ``text``; rejects for other lines."""
    rejects: list[tuple[int, str, str]] = []
    rows = []
    for i, obj, line in json_objects(text, rejects):
        row = to_row(obj, keep_text)
        big = too_big(row)
        if big is None:
            rows.append((i, row))
        else:
            rejects.append((i, f"a request record whose {big} is too big for its column",
                            line[:RAW_LIMIT]))
    return rows, rejects


def to_row(obj: dict[str, Any], keep_text: bool = False) -> dict[str, Any]:
    """A request's metrics (``meta_info`` keys, ``request_parameters``) as a row; text
    keys are dropped unless ``keep_text``."""
    clean = _kept if keep_text else _without_text
    params = obj.get("request_parameters")
    if isinstance(params, str):
        try:
            params = loads(params)
        except ValueError:
            params = None
    reason, latency = obj.get("finish_reason"), obj.get("e2e_latency")
    row: dict[str, Any] = {
        "rid": obj.get("id") or obj.get("rid") or (params or {}).get("rid"),
        "finish_reason": _ENCODE(reason) if isinstance(reason, dict) else reason,
        "e2e_latency_s": float(latency) if isinstance(latency, int | float) else None,
        "request_parameters": _ENCODE(clean(params)) if isinstance(params, dict) else None,
    }
    for col, cast in COLUMNS.items():
        value = obj.get(col)
        try:
            row[col] = cast(value) if isinstance(value, int | float) else None
        except (ValueError, OverflowError):  # an inf or nan count: no count
            row[col] = None
    row["extra"] = _ENCODE(clean({k: v for k, v in obj.items() if k not in _KNOWN}))
    return row
