"""Startup, lifecycle and HTTP lines of an SGLang server log (reference §3).

Lines are classified with one vectorised pass (:data:`EVENT_KINDS` are regexes over the
message, first match wins); the few lines that are events are then turned into
``attrs`` in Python, which is cheap because events are rare next to batch lines.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from logpipe.engines.sglang.server_args import parse_server_args, redact
from logpipe.sources.records import loads

# kind → regex on the message (after every prefix is peeled).  Order matters.
EVENT_KINDS: list[tuple[str, str]] = [
    ("server_args", r"^server_args\s*="),
    ("ready", r"The server is fired up and ready to roll"),
    ("dist_init", r"^Init torch distributed (?:begin|ends)"),
    ("nccl_version", r"(?:^sglang is using nccl==|NCCL INFO NCCL version \S)"),
    # NCCL_DEBUG=INFO: the variables NCCL read from the environment
    ("nccl_env", r"NCCL INFO [A-Z][A-Z0-9_]+ set by environment to "),
    # SGLang changing a setting itself (mostly because of speculative decoding)
    ("setting_adjusted", r"(?:is reset to \S+ for speculative decoding"
                         r"|^\S+ is adjusted to |^\S+ is set to \S+ by default for "
                         r"|^Overlap schedule(?:r)? is (?:not implemented|disabled)"
                         r"|^(?:The )?[Mm]ixed chunked prefill (?:is|are) disabled"
                         r"|^Cuda graph is disabled because|overriding speculative_\w+=)"),
    ("attention_backend", r"^Attention backend not (?:set|specified)\. Use \S+ backend"),
    ("load_weight", r"^Load weight (?:begin|end)\."),
    ("kv_cache", r"(?:KV Cache is allocated\.|KV Cache VA upper bound\.|^Using KV cache dtype)"),
    ("memory_pool", r"^Memory pool end\."),
    ("graph_capture", r"^Capture .*graph (?:begin|end)\b|^Capture cuda graph bs "),
    ("capacity", r"^max_total_num_tokens="),
    ("startup_timings", r"^Engine startup timings \(s\): "),
    ("profiling_start", r"^Profiling (?:starts|enabled)"),
    ("profiling_stop", r"^(?:Stop profiling|Profiling done)"),
    ("retract", r"(?:KV cache pool is full\. Retract requests|Decode out of memory happened)"),
    ("error", r"(?:hit an exception|Exception in ASGI application|^Traceback \(most recent call"
              r" last\)|Received sigquit|^ERROR:)"),
    ("shutdown", r"(?:SIGTERM received|Gracefully exiting|^(?:INFO:\s+)?Shutting down$"
                 r"|^(?:INFO:\s+)?Finished server process)"),
    ("server_start", r"^(?:INFO:\s+)?(?:Started server process|Uvicorn running on)"),
    ("crash_dump", r"^(?:Dumping requests before crash|Dumped \d+ finished)"),
]

# The phrases of EVENT_KINDS that may occur anywhere in a message (the rest are anchored at
# its start).  The C fast lane leaves any line containing one to the polars parser, so a
# batch or access line that also reads as an event is classified exactly as here.
UNANCHORED_EVENT_PHRASES: tuple[str, ...] = (
    "The server is fired up and ready to roll",
    "KV Cache is allocated.",
    "KV Cache VA upper bound.",
    "KV cache pool is full. Retract requests",
    "Decode out of memory happened",
    "hit an exception",
    "Exception in ASGI application",
    "Received sigquit",
    "SIGTERM received",
    "Gracefully exiting",
    "NCCL INFO NCCL version ",
    " set by environment to ",
    " for speculative decoding",
    "overriding speculative_",
)

HTTP_RE = (
    r"^(?:INFO|WARNING|ERROR):\s+(?P<client>\S+) - \"(?P<method>[A-Z]+) (?P<path>\S+) "
    r"(?P<protocol>HTTP/[\d.]+)\" (?P<status>\d{3})(?: (?P<status_text>.*))?$"
)
ERROR_START = r"^Traceback \(most recent call last\)"


_ANY_EVENT = "|".join(f"(?:{regex})" for _, regex in EVENT_KINDS)
"""One pass that finds the lines any of :data:`EVENT_KINDS` matches (few: most lines are
batch, access and request lines, a request line a few KB)."""


def classify(lines: pl.DataFrame) -> pl.DataFrame:
    """Add ``event_kind`` (or null) to ``lines`` (needs ``msg``).  The lines any kind
    matches are found in one pass, and only they are tested kind by kind: a chain of
    ``when`` tests every kind on every line (the slow lines of 256 MB of docker launches,
    ~100 MB of request records among them: 1.3 s of the second core)."""
    hit = lines.get_column("msg").str.contains(_ANY_EVENT)
    if not hit.any():
        return lines.with_columns(pl.lit(None, dtype=pl.String).alias("event_kind"))
    expr: pl.Expr = pl.lit(None, dtype=pl.String)
    for kind, regex in reversed(EVENT_KINDS):
        expr = pl.when(pl.col("msg").str.contains(regex)).then(pl.lit(kind)).otherwise(expr)
    kinds = lines.filter(hit).select(expr.alias("event_kind")).get_column("event_kind")
    column = pl.repeat(None, lines.height, dtype=pl.String, eager=True).alias("event_kind")
    return lines.with_columns(column.scatter(hit.arg_true(), kinds))


def parse_http(lines: pl.DataFrame) -> pl.DataFrame:
    """Uvicorn access lines → ``row, client, method, path, protocol, status, status_text``."""
    hits = lines.filter(pl.col("msg").str.starts_with("INFO:")
                        | pl.col("msg").str.starts_with("WARNING:")
                        | pl.col("msg").str.starts_with("ERROR:"))
    parsed = hits.select("row", pl.col("msg").str.extract_groups(HTTP_RE).alias("h")).unnest("h")
    return parsed.filter(pl.col("method").is_not_null()).with_columns(
        pl.col("status").cast(pl.Int32)
    )


_KV_RE = re.compile(
    r"(?P<k>[A-Za-z#_][\w #]*?)\s*(?:=|: )\s*(?P<v>\[[^\]]*\]|[^,\s]+)(?P<unit> GB| s\b)?"
)
_PHASE_RE = re.compile(r"\b(begin|end|ends|starts|done)\b", re.IGNORECASE)
_GRAPH_BS_RE = re.compile(r"^Capture cuda graph bs (\[[\d, ]*\])")
_TIMING_RE = re.compile(r"(\w+)=([\d.]+)")
_GRAPH_RE = re.compile(r"^Capture (?P<what>.*?) graph (?P<phase>begin|end)", re.IGNORECASE)


_GRAPH_NAMES = {"": "decode", "target decode": "decode", "target verify": "target_verify",
                "target prefill": "prefill", "piecewise": "prefill", "draft": "draft_decode",
                "draft decode": "draft_decode", "draft extend": "draft_extend"}


def graph_name(target: str) -> str:
    """Which graph a capture line is about, across releases: ``cuda graph`` (≤0.5.13) and
    ``target decode CUDA graph`` (0.5.14+) are the decode graphs, ``target verify`` the
    speculative verify graphs, ``draft [decode|extend]`` the draft model's."""
    words = target.lower().split()
    if words and words[-1] in {"cuda", "cpu", "npu", "xpu", "hpu", "musa"}:
        words = words[:-1]
    key = " ".join(words)
    return _GRAPH_NAMES.get(key, key.replace(" ", "_"))


_NCCL_VERSION_RE = re.compile(r"(?:nccl==|NCCL version )(\S+)")
_NCCL_ENV_RE = re.compile(r"NCCL INFO ([A-Z][A-Z0-9_]+) set by environment to (.*)$")

# SGLang's own words when it changes a setting → (server argument, value or None)
_ADJUSTED: list[tuple[re.Pattern[str], str | None, Any]] = [
    (re.compile(r"Max running requests is reset to (\d+)"), "max_running_requests", None),
    (re.compile(r"^(speculative_\w+) is adjusted to (.+?)(?: when|$)"), None, None),
    (re.compile(r"^(speculative_\w+) is set to (\d+) by default"), None, None),
    (re.compile(r"overriding (speculative_\w+)=\S+ to (\d+)"), None, None),
    (re.compile(r"^Overlap schedule(?:r)? is (?:not implemented|disabled)"),
     "disable_overlap_schedule", True),
    (re.compile(r"[Mm]ixed chunked prefill (?:is|are) disabled"), "enable_mixed_chunk", False),
    (re.compile(r"^Cuda graph is disabled because"), "disable_cuda_graph", True),
    (re.compile(r"^Attention backend not (?:set|specified)\. Use (\S+) backend"),
     "attention_backend", None),
]


def adjusted_setting(message: str) -> dict[str, Any]:
    """``{"arg": name, "value": v, "reason": message}`` for a line in which SGLang says it
    set or changed a server argument itself (empty when the line names none)."""
    for regex, arg, value in _ADJUSTED:
        m = regex.search(message)
        if not m:
            continue
        groups = m.groups()
        if arg is None:  # the argument's name is in the message
            arg, raw = groups[0], groups[1]
        else:
            raw = groups[0] if groups else None
        if value is None and raw is not None:
            value = _number(raw.strip())
        return {"arg": arg, "value": value, "reason": message.strip()[:300]}
    return {}


def _number(text: str) -> Any:
    text = text.rstrip(".,")
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def event_attrs(kind: str, message: str) -> dict[str, Any]:
    """Structured facts of one event line (numbers as numbers, units in the key)."""
    if kind == "server_args":
        args = parse_server_args(message)
        return {"server_args": redact(args)} if args is not None else {"parse_error": True}
    attrs: dict[str, Any] = {}
    if kind == "error":
        return attrs  # filled from the traceback by the caller
    if kind == "nccl_version":
        m = _NCCL_VERSION_RE.search(message)
        attrs["nccl_version"] = m.group(1) if m else message.split("==", 1)[-1].strip()
        if "NCCL INFO" in message:  # printed only with NCCL_DEBUG=INFO
            attrs["nccl_debug_info"] = True
        return attrs
    if kind == "nccl_env":
        m = _NCCL_ENV_RE.search(message)
        if m:
            attrs["variable"], attrs["value"] = m.group(1), m.group(2).strip()
        return attrs
    if kind in ("setting_adjusted", "attention_backend"):
        return adjusted_setting(message)
    if kind == "graph_capture":
        m = _GRAPH_RE.match(message)
        if m:
            attrs["target"] = m.group("what").lower()
            attrs["graph"] = graph_name(attrs["target"])
            attrs["phase"] = m.group("phase").lower()
        sizes = _GRAPH_BS_RE.match(message)
        if sizes:  # "Capture cuda graph bs [1, 2, 4, ...]" (0.4.7-0.5.13)
            try:
                attrs["bs"] = loads(sizes.group(1))
            except ValueError:
                pass
            return attrs
    if kind == "startup_timings":  # "load_weight=0.07, ..., cuda_graph={prefill=0.00, ...}"
        body = message.split(":", 1)[1]
        for key, value in _TIMING_RE.findall(re.sub(r"\{[^}]*\}", "", body)):
            attrs[f"{key}_s"] = _number(value)
        for group, inner in re.findall(r"(\w+)=\{([^}]*)\}", body):  # cuda_graph={decode=..}
            for key, value in _TIMING_RE.findall(inner):
                attrs[f"{group}_{key}_s"] = _number(value)
        return attrs
    else:
        p = _PHASE_RE.search(message)
        if p and kind in {"dist_init", "load_weight"}:
            attrs["phase"] = "begin" if p.group(1).lower() == "begin" else "end"
    for m in _KV_RE.finditer(message):
        key = m.group("k").strip().lower().replace(" ", "_")
        if key.startswith("#"):
            key = "num_" + key[1:]
        if key in {"this_can_take_up_to_several_minutes"}:
            continue
        value = m.group("v")
        unit = (m.group("unit") or "").strip()
        if value.startswith("["):
            try:
                attrs[key] = loads(value)
            except ValueError:
                attrs[key] = value
            continue
        attrs[key + ("_gb" if unit == "GB" else "_s" if unit == "s" else "")] = _number(value)
    return attrs
