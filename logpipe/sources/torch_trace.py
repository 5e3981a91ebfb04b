"""PyTorch profiler (Kineto) Chrome traces, as SGLang writes them (reference §6.3).

A trace is one JSON object: a few metadata keys (``schemaVersion``, ``deviceProperties``,
``distributedInfo``, ``baseTimeNanoseconds``, ...) and ``traceEvents``, an array that holds
almost all of the bytes.  :func:`read_trace` walks it **streaming**: it decodes one event
at a time from a bounded text buffer (``json``'s C decoder on each event, never the
whole document), so memory stays flat however large the file is.  Events are handed out
in batches of typed rows for three tables (``trace_kernels``, ``trace_annotations``,
``trace_ops``); metadata and flow events are counted, not stored.

Invariants: ``event_no`` is the event's 0-based position in ``traceEvents``; a trace cut
off mid-write keeps every complete event read before the cut and reports where it ends;
a malformed event is reported with its line and the rest of the file is not guessed at.
"""

from __future__ import annotations

import codecs
import json
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, BinaryIO

from logpipe.sources import Source, register

CHUNK_CHARS = 1 << 20
MAX_EVENT_CHARS = 64 << 20
"""An event (or metadata value) larger than this is treated as malformed."""
BATCH_ROWS = 50_000

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
ANNOTATION_SIDES = {"user_annotation": "cpu", "gpu_user_annotation": "gpu"}
SKIPPED_PHASES = {"M", "s", "t", "f"}

NAME_RE = re.compile(
    r"^(?:(?P<merged>merged)-)?(?P<stem>.*?)"
    r"(?:-TP-(?P<tp>\d+))?(?:-DP-(?P<dp>\d+))?(?:-PP-(?P<pp>\d+))?(?:-EP-(?P<ep>\d+))?"
    r"(?:-(?P<stage>EXTEND|DECODE|PREFILL))?(?:\.trace)?\.json(?:\.gz|\.zst|\.zstd)?$"
)


def sniff(head: str) -> bool:
    text = head.lstrip()
    return text.startswith("{") and '"traceEvents"' in text and (
        '"schemaVersion"' in text or '"deviceProperties"' in text or '"ph"' in text)


SOURCE = register(Source(
    name="torch_trace",
    description="PyTorch profiler Chrome trace (.json / .json.gz), read streaming",
    sniff=sniff,
    samples=("traces/cpu-decode/1777885700.1-TP-0.trace.json.gz",
             "traces/h200-decode/1777885800.5-TP-0.trace.json.gz"),
    specificity=30,
    reader="logpipe.ingest.records:ingest_trace",
))


class TraceFormatError(ValueError):
    """The trace is not well-formed JSON at ``line`` (``at_end``: it stops there)."""

    def __init__(self, message: str, line: int, at_end: bool = False) -> None:
        super().__init__(message)
        self.line = line
        self.at_end = at_end


# ------------------------------------------------------------------ file name and classes

def name_parts(filename: str) -> dict[str, Any]:
    """Profile id, ranks and stage from SGLang's trace file name
    (``[prefix-]{profile_id}-TP-{r}[-DP-{d}][-PP-{p}][-EP-{e}][-STAGE].trace.json.gz``)."""
    m = NAME_RE.match(filename)
    if m is None:
        return {"profile_id": filename, "tp_rank": None, "dp_rank": None, "pp_rank": None,
                "ep_rank": None, "stage": None, "merged": False}

    def num(group: str) -> int | None:
        value = m.group(group)
        return int(value) if value is not None else None

    return {"profile_id": m.group("stem") or None, "tp_rank": num("tp"), "dp_rank": num("dp"),
            "pp_rank": num("pp"), "ep_rank": num("ep"), "stage": m.group("stage"),
            "merged": m.group("merged") is not None}


@lru_cache(maxsize=4)
def kernel_classes(path: Path | None = None) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """``(class, compiled pattern)`` in order, from ``schemas/kernel_classes.toml``."""
    if path is None:
        from logpipe.resources import schemas_dir

        path = schemas_dir() / "kernel_classes.toml"
    data = tomllib.loads(path.read_text())
    return tuple((c["name"], re.compile("|".join(f"(?:{p})" for p in c["patterns"]), re.I))
                 for c in data["classes"])


def classify(name: str, category: str = "kernel") -> str:
    """The kernel class of a device activity: gemm, attention, communication, memory or
    other."""
    if category in ("gpu_memcpy", "gpu_memset"):
        return "memory"
    for label, pattern in kernel_classes():
        if pattern.search(name):
            return label
    return "other"


# ------------------------------------------------------------------ streaming JSON

class _Stream:
    """A window over the decoded text of a file, refilled as values are consumed."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.json = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.line_base = 1

    def line(self) -> int:
        return self.line_base + self.buf.count("\n", 0, self.pos)

    def _fill(self) -> bool:
        if self.eof:
            return False
        data = self.fh.read(CHUNK_CHARS)
        self.line_base += self.buf.count("\n", 0, self.pos)
        if data:
            self.buf = self.buf[self.pos:] + self.decoder.decode(data)
        else:
            self.eof = True
            self.buf = self.buf[self.pos:] + self.decoder.decode(b"", final=True)
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file)."""
        while True:
            buf, n = self.buf, len(self.buf)
            pos = self.pos
            while pos < n and buf[pos] in " \t\r\n":
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self._fill():
                return ""

    def take(self, expected: str) -> None:
        if self.peek() != expected:
            found = self.peek() or "the end of the file"
            raise TraceFormatError(f"expected {expected!r}, found {found!r}", self.line())
        self.pos += 1

    def value(self) -> Any:
        """Decode the next JSON value; refill and retry while it runs past the buffer."""
        self.peek()
        while True:
            try:
                obj, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # incomplete: the text stops inside the value (more may come); a
                # cut-off literal or number fails within a few characters of the end
                incomplete = exc.msg.startswith("Unterminated string") or \
                    len(self.buf) - exc.pos <= 64
                if incomplete and len(self.buf) - self.pos <= MAX_EVENT_CHARS and self._fill():
                    continue
                if incomplete:
                    raise TraceFormatError("the file ends inside this value", self.line(),
                                           at_end=True) from None
                raise TraceFormatError(f"not JSON: {exc.msg}",
                                       self.line_base + exc.doc.count("\n", 0, exc.pos)
                                       ) from None
            if end == len(self.buf) and self._fill():
                continue  # a number may go on in the next chunk
            self.pos = end
            return obj


def iter_trace(fh: BinaryIO) -> Iterator[tuple[str, Any]]:
    """``("meta", (key, value))`` for each top-level key and ``("event", (n, event))`` for
    each element of ``traceEvents``; ``("truncated", line)`` when the file stops early."""
    s = _Stream(fh)
    first = s.peek()
    if first == "[":  # the JSON Array Format of the Chrome trace spec
        yield from _events(s)
        return
    s.take("{")
    while True:
        c = s.peek()
        if c == "}":
            return
        if c == "":
            yield "truncated", s.line()
            return
        key = s.value()
        s.take(":")
        if key == "traceEvents":
            stopped = False
            for item in _events(s):
                stopped = stopped or item[0] == "truncated"
                yield item
            if stopped:
                return
        else:
            yield "meta", (key, s.value())
        c = s.peek()
        if c == ",":
            s.pos += 1
        elif c == "":
            yield "truncated", s.line()
            return
        elif c != "}":
            raise TraceFormatError(f"expected ',' or '}}', found {c!r}", s.line())


def _events(s: _Stream) -> Iterator[tuple[str, Any]]:
    s.take("[")
    n = 0
    while True:
        c = s.peek()
        if c == "]":
            s.pos += 1
            return
        if c == "":
            yield "truncated", s.line()
            return
        try:
            event = s.value()
        except TraceFormatError as exc:
            if exc.at_end:  # cut off inside the last event: keep what came before
                yield "truncated", exc.line
                return
            raise
        yield "event", (n, event)
        n += 1
        c = s.peek()
        if c == ",":
            s.pos += 1
        elif c not in ("]", ""):
            raise TraceFormatError(f"expected ',' or ']' after event {n - 1}, found {c!r}",
                                   s.line())


# ------------------------------------------------------------------ rows

def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _label(value: Any) -> str | None:
    return None if value is None else str(value)


KERNEL_ARGS = {"device", "stream", "correlation", "External id", "grid", "block",
               "registers per thread", "shared memory", "bytes"}
ID_ARGS = {"correlation", "External id"}


@dataclass
class TraceBatch:
    """Rows of one batch, column lists per table."""

    kernels: list[tuple[Any, ...]] = field(default_factory=list)
    annotations: list[tuple[Any, ...]] = field(default_factory=list)
    ops: list[tuple[Any, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.kernels) + len(self.annotations) + len(self.ops)


@cache
def row_schema(table: str) -> dict[str, Any]:
    """Columns (in order) and types of the row tuples :func:`read_trace` yields for
    ``table`` (polars is imported here: telling what a file is needs none)."""
    import polars as pl

    return {
        "trace_kernels": {
            "event_no": pl.Int64, "ts_us": pl.Float64, "dur_us": pl.Float64,
            "category": pl.String, "name": pl.String, "kernel_class": pl.String,
            "device": pl.Int32, "stream": pl.Int64, "correlation": pl.Int64,
            "external_id": pl.Int64, "grid": pl.String, "block": pl.String,
            "registers": pl.Int32, "shared_memory": pl.Int64, "bytes": pl.Int64,
            "args": pl.String},
        "trace_annotations": {
            "event_no": pl.Int64, "ts_us": pl.Float64, "dur_us": pl.Float64, "side": pl.String,
            "name": pl.String, "pid": pl.String, "tid": pl.String, "external_id": pl.Int64,
            "args": pl.String},
        "trace_ops": {
            "event_no": pl.Int64, "ts_us": pl.Float64, "dur_us": pl.Float64, "ph": pl.String,
            "category": pl.String, "name": pl.String, "pid": pl.String, "tid": pl.String,
            "correlation": pl.Int64, "external_id": pl.Int64, "args": pl.String},
    }[table]


@dataclass
class TraceSummary:
    """What :func:`read_trace` saw besides the rows."""

    metadata: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    kernels: int = 0
    annotations: int = 0
    ops: int = 0
    skipped: int = 0
    truncated_at: int | None = None
    """Line where a trace cut off mid-write ends."""
    bad_events: list[tuple[int, str, str]] = field(default_factory=list)
    """``(event_no, reason, raw)`` for events that are not objects."""


def read_trace(fh: BinaryIO, summary: TraceSummary) -> Iterator[TraceBatch]:
    """Stream ``fh`` as batches of rows; metadata and counts go to ``summary``."""
    batch = TraceBatch()
    cached_class: dict[tuple[str, str], str] = {}
    for kind, item in iter_trace(fh):
        if kind == "meta":
            key, value = item
            summary.metadata[key] = value
            continue
        if kind == "truncated":
            summary.truncated_at = item
            continue
        n, ev = item
        summary.events += 1
        if not isinstance(ev, dict):
            summary.bad_events.append((n, "event is not a JSON object", json.dumps(ev)[:2000]))
            continue
        ph = ev.get("ph")
        if ph in SKIPPED_PHASES:
            summary.skipped += 1
            continue
        cat = ev.get("cat")
        cat = cat if isinstance(cat, str) else None
        name = _label(ev.get("name")) or ""
        raw_args = ev.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        ts, dur = _num(ev.get("ts")), _num(ev.get("dur"))
        if ph == "X" and cat in DEVICE_CATEGORIES:
            key = (name, cat)
            klass = cached_class.get(key)
            if klass is None:
                klass = cached_class[key] = classify(name, cat)
            rest = {k: v for k, v in args.items() if k not in KERNEL_ARGS}
            grid, block = args.get("grid"), args.get("block")
            batch.kernels.append((
                n, ts, dur, cat, name, klass, _int(args.get("device")),
                _int(args.get("stream")), _int(args.get("correlation")),
                _int(args.get("External id")),
                json.dumps(grid) if grid is not None else None,
                json.dumps(block) if block is not None else None,
                _int(args.get("registers per thread")), _int(args.get("shared memory")),
                _int(args.get("bytes")), json.dumps(rest) if rest else None))
            summary.kernels += 1
        elif ph == "X" and cat in ANNOTATION_SIDES:
            rest = {k: v for k, v in args.items() if k != "External id"}
            batch.annotations.append((
                n, ts, dur, ANNOTATION_SIDES[cat], name, _label(ev.get("pid")),
                _label(ev.get("tid")), _int(args.get("External id")),
                json.dumps(rest) if rest else None))
            summary.annotations += 1
        else:
            rest = {k: v for k, v in args.items() if k not in ID_ARGS}
            batch.ops.append((
                n, ts, dur if ph == "X" else None, _label(ph), cat, name,
                _label(ev.get("pid")), _label(ev.get("tid")), _int(args.get("correlation")),
                _int(args.get("External id")), json.dumps(rest, default=str) if rest else None))
            summary.ops += 1
        if len(batch) >= BATCH_ROWS:
            yield batch
            batch = TraceBatch()
    if len(batch):
        yield batch


def base_time_us(metadata: dict[str, Any]) -> float | None:
    """Microseconds to add to an event's ``ts`` for wall-clock time: Kineto writes
    ``baseTimeNanoseconds`` (torch 2.x); older traces carry epoch microseconds already."""
    base = metadata.get("baseTimeNanoseconds")
    if isinstance(base, int | float) and not isinstance(base, bool):
        return base / 1000.0
    return None


def device_facts(metadata: dict[str, Any]) -> dict[str, Any]:
    """Environment facts from ``deviceProperties`` and friends (``gpu.*`` match the keys
    of a manifest; the rest are ``trace.*`` annotations)."""
    out: dict[str, Any] = {}
    devices = [d for d in metadata.get("deviceProperties") or [] if isinstance(d, dict)]
    if devices:
        names = sorted({str(d.get("name")) for d in devices})
        out["gpu.model"] = names[0] if len(names) == 1 else ", ".join(names)
        first = devices[0]
        if first.get("computeMajor") is not None:
            out["trace.gpu.compute_capability"] = \
                f"{first.get('computeMajor')}.{first.get('computeMinor')}"
        for key, label in (("totalGlobalMem", "total_memory_bytes"), ("numSms", "sms")):
            if first.get(key) is not None:
                out[f"trace.gpu.{label}"] = first[key]
        out["trace.gpu.devices_in_trace"] = len(devices)
    for key, label in (("cuda_runtime_version", "cuda_runtime_version"),
                       ("cuda_driver_version", "cuda_driver_version"),
                       ("cupti_version", "cupti_version")):
        if metadata.get(key) is not None:
            out[f"trace.{label}"] = metadata[key]
    dist = metadata.get("distributedInfo")
    if isinstance(dist, dict):
        for key in ("backend", "world_size", "nccl_version"):
            if dist.get(key) is not None:
                out[f"trace.dist.{key}"] = dist[key]
    return out
