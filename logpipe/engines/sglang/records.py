"""Per-request and per-cycle records printed inside an SGLang server log.

- **Request logs** (``--log-requests``, reference §3.5): ``in=..., out={...}`` (0.2.15–
  0.4.0) and ``Finish: obj=..., out={...}`` (0.4.1+) text lines (Python reprs, long
  values cut as ``'abc' ... 'xyz'``), and the JSON
  events of ``--log-requests-format json`` (0.5.7+: ``{"timestamp": ..., "event":
  "request.finished", "rid": ..., "out": {...}}``).  The ``meta_info`` of ``out`` becomes a
  ``request_metrics`` row; prompt and output text are never kept.
- **Phase records**: ``phase_timings: {json}``, the plain-text form of a phase-timing
  dump record (``schemas/phase_timings.md``) written through a logger, e.g. by
  ``PhaseRecorder(log=logger.info)``.

Both are rare next to batch lines, so each is parsed in Python.  A record that cannot be
read becomes a reject with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import polars as pl

from logpipe.reprs import literal
from logpipe.sources import phases, request_metrics
from logpipe.sources.records import loads

FINISH = "Finish: "
OLD_FINISH = "in="
PHASE_PREFIX = "phase_timings: "
JSON_FINISHED = '"event": "request.finished"'


def is_record(msg: pl.Expr) -> pl.Expr:
    """Lines this module reads (a cheap vectorised test on the message)."""
    return (msg.str.starts_with(FINISH) | msg.str.starts_with(PHASE_PREFIX)
            | (msg.str.starts_with(OLD_FINISH) & msg.str.contains("'meta_info': {",
                                                                  literal=True))
            | (msg.str.starts_with("{") & msg.str.contains(JSON_FINISHED, literal=True)))


_OUTSIDE = re.compile(r"""['"{}\[\]()]""")
_INSIDE = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}


def _closing(text: str, start: int) -> int:
    """Index just past the bracket that closes ``text[start]`` (quote-aware), or -1.
    Jumps from one bracket, quote or (inside quotes) backslash to the next: a request's
    repr runs to kilobytes."""
    depth, i, quote = 0, start, ""
    while True:
        m = (_INSIDE[quote] if quote else _OUTSIDE).search(text, i)
        if m is None:
            return -1
        i = m.start()
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            else:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "{[(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1


def _value_end(body: str, j: int, stop: re.Pattern[str]) -> int:
    """Where the value starting at ``body[j]`` ends: at ``stop`` outside brackets and
    quotes, or the end of ``body``; -1 when a bracket or quote is left open."""
    n = len(body)
    while j < n:
        c = body[j]
        if c in "{[(":
            j = _closing(body, j)
            if j < 0:
                return -1
        elif c in "'\"":
            k = body.find(c, j + 1)
            while k > 0 and body[k - 1] == "\\":
                k = body.find(c, k + 1)
            if k < 0:
                return -1
            j = k + 1
        elif stop.match(body, j):
            break
        else:
            j += 1
    return j


_NEXT_KEY_RE = re.compile(r", ['\"]")
_KWARG_RE = re.compile(r", [A-Za-z_]\w*=")


def _top_level_items(body: str) -> list[tuple[str, str]]:
    """``'key': value`` pairs of a dict repr's body, values left as text."""
    items: list[tuple[str, str]] = []
    i, n = 0, len(body)
    while i < n:
        while i < n and body[i] in " ,":
            i += 1
        if i >= n or body[i] not in "'\"":
            break
        end = body.find(body[i], i + 1)
        if end < 0 or body[end + 1: end + 3] != ": ":
            break
        key, i = body[i + 1: end], end + 3
        j = _value_end(body, i, _NEXT_KEY_RE)
        if j < 0:
            break
        items.append((key, body[i:j].strip()))
        i = j
    return items


def _literal(text: str) -> Any:
    try:
        return literal(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        if text in ("inf", "-inf", "nan"):
            return float(text)
        return text  # a cut or non-literal value, kept as printed


def _split_finish(msg: str) -> tuple[str | None, str | None]:
    """``(obj call body, out dict body)`` of ``Finish: obj=Name(...)[, headers={...}],
    out={...}`` or ``in=Name(...), out={...}``, found by bracket matching (text inside the
    values may contain anything)."""
    eq = msg.find("=")
    paren = msg.find("(", eq)
    if eq < 0 or paren < 0:
        return None, None
    obj_end = _closing(msg, paren)
    if obj_end < 0:
        return None, None
    obj_body, rest = msg[paren + 1: obj_end - 1], obj_end
    if msg.startswith(", headers={", rest):
        rest = _closing(msg, rest + len(", headers="))
        if rest < 0:
            return obj_body, None
    if not msg.startswith(", out={", rest):
        return obj_body, None
    out_start = rest + len(", out=")
    out_end = _closing(msg, out_start)
    return obj_body, (msg[out_start + 1: out_end - 1] if out_end > 0 else None)


_META_KEY = "'meta_info': {"


def _meta_info_last(msg: str) -> dict[str, Any] | None:
    """``meta_info`` where it is the last item of ``out`` and ``out`` ends the line, as
    SGLang prints it (``out={'text': ..., 'meta_info': {...}}``, or 0.5.23's
    ``out={'meta_info': {...}}``): the text from the last ``'meta_info': {`` (after ``, ``
    or ``out={``) to the line's last brace, where it reads as one dict; else None (read
    item by item: :func:`_split_finish`).  The request's call and output text, a few KB
    before it, are not walked (a 2 KB line of 0.5.23: ~63 -> ~20 us)."""
    line = msg.rstrip()
    at = line.rfind(_META_KEY)
    if at < 0 or not line.endswith("}}") \
            or not (line.endswith(", ", 0, at) or line.endswith("out={", 0, at)):
        return None
    try:
        value = literal(line[at + len(_META_KEY) - 1: -1])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _call_kwarg(body: str, name: str) -> str | None:
    """The text of keyword ``name`` in a call body (``a=1, text='x' ... 'y', rid='r'``)."""
    m = re.search(rf"(?:^|, ){re.escape(name)}=", body)
    if m is None:
        return None
    end = _value_end(body, m.end(), _KWARG_RE)
    return body[m.end(): end].strip() if end >= 0 else None


def finish_meta_info(msg: str) -> dict[str, Any] | None:
    """The ``meta_info`` dict of a ``Finish:`` / ``in=`` line, or None when it has none."""
    last = _meta_info_last(msg)
    if last is not None:
        return last
    _, out = _split_finish(msg)
    if out is None:
        return None
    text = dict(_top_level_items(out)).get("meta_info")
    if text is None or not text.startswith("{"):
        return None
    try:
        value = literal(text)
        if isinstance(value, dict):
            return value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    return {k: _literal(v) for k, v in _top_level_items(text[1:-1])}


def request_row(msg: str, keep_text: bool = False
                ) -> tuple[dict[str, Any] | None, str | None]:
    """``(request_metrics row, None)`` or ``(None, reason)`` for a request-log line.
    ``keep_text`` adds the prompt and output text (``prompt_text``, ``output_text``)."""
    if msg.startswith((FINISH, OLD_FINISH)):
        meta = finish_meta_info(msg)
        if meta is None:
            return None, "Finish line without a readable meta_info"
        obj: dict[str, Any] = dict(meta)
        if keep_text:
            obj_body, out_body = _split_finish(msg)
            prompt = _call_kwarg(obj_body or "", "text")
            output = dict(_top_level_items(out_body or "")).get("text")
            obj["prompt_text"] = _literal(prompt) if prompt else None
            obj["output_text"] = _literal(output) if output else None
    else:
        try:
            event = loads(msg)
        except ValueError as exc:
            return None, f"request event is not JSON: {exc}"
        out = event.get("out") if isinstance(event, dict) else None
        meta = out.get("meta_info") if isinstance(out, dict) else None
        if not isinstance(meta, dict):
            return None, "request event without out.meta_info"
        obj = dict(meta)
        obj.setdefault("rid", event.get("rid"))
        if keep_text:
            req = event.get("obj")
            obj["prompt_text"] = req.get("text") if isinstance(req, dict) else None
            obj["output_text"] = out.get("text") if isinstance(out, dict) else None
    return request_metrics.to_row(obj, keep_text), None


def is_request(msg: pl.Expr) -> pl.Expr:
    """The record lines :func:`request_row` reads (every record but phase records)."""
    return is_record(msg) & ~msg.str.starts_with(PHASE_PREFIX)


def parse_records(df: pl.DataFrame, keep_text: bool = False,
                  read: Mapping[int, tuple[dict[str, Any] | None, str | None]] | None = None
                  ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """``(requests, phase rows, rejects)`` from the record lines of ``df`` (columns
    ``row, line_no, run_seq, msg``); each frame keeps ``row``, ``line_no`` and ``run_seq``.
    ``read``: :func:`request_row` of request lines already read, by ``row``."""
    hits = df.filter(is_record(pl.col("msg")))
    requests: list[dict[str, Any]] = []
    phase_rows: list[dict[str, Any]] = []
    rejects: list[tuple[int, int, int, str]] = []
    for row, line_no, run_seq, msg in zip(hits["row"], hits["line_no"], hits["run_seq"],
                                          hits["msg"], strict=True):
        where = {"row": row, "line_no": line_no, "run_seq": run_seq}
        if msg.startswith(PHASE_PREFIX):
            got, bad = phases.parse(msg[len(PHASE_PREFIX):])
            if bad:
                rejects.append((row, line_no, run_seq, f"phase record: {bad[0][1]}"))
            phase_rows.extend({**where, **r} for _, r in got)
            continue
        done = read.get(row) if read is not None else None
        req, reason = done if done is not None else request_row(msg, keep_text)
        if req is None:
            rejects.append((row, line_no, run_seq, reason or "unreadable request record"))
        else:
            requests.append({**where, **req})
    return (_frame(requests), _frame(phase_rows),
            pl.DataFrame(rejects, schema={"row": pl.UInt32, "line_no": pl.Int64,
                                          "run_seq": pl.Int64, "reason": pl.String},
                         orient="row"))


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema={"row": pl.UInt32, "line_no": pl.Int64, "run_seq": pl.Int64})
    return pl.DataFrame(rows, infer_schema_length=None)
