"""vLLM's server log, line by line: every era of ``shared``'s format reference (0.2.x to
0.33), through the wrappers its lines arrive in.

A record is found by vLLM's own prefix (``LEVEL MM-DD HH:MM:SS [file.py:N] ``, with the
process prefix ``(APIServer pid=N) `` of late releases) anywhere in a physical line, so a
docker, journald, compose, Python-logging or tqdm wrapper in front of it, and several
records glued on one line, read the same.  Fields are taken by label, never by position:
the V0 and V1 stats lines differ (``Swapped``/``Pending`` vs ``Waiting``), V1's optional
fields come and go, the device label of the KV cache varies.

The parser is streaming and resumable: :class:`LogState` holds what a later line needs
(the run, the year, the last stats line per engine) and is stored with the file.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from typing import Any

from logpipe.sources.records import too_big

# -------------------------------------------------------------------------- the prefix

ANSI = re.compile(r"\x1b\[[0-9;]*m|(?<![\w\]])\[(?:\d+;)*\d+m")
"""Colour codes, and the same with the ESC byte lost in a paste (``[36m``)."""
_ANSI_HINT = re.compile(r"\[\d")
"""What every match of :data:`ANSI` without an ESC byte holds: a line with neither is
left as it is (a substitution scans the whole line, ~8 us a stats line)."""
PREFIX = re.compile(
    r"(?=[(DIWEC])"  # (the first characters it can start with: re then skips to them)
    r"(?:\((?P<proc>[A-Za-z_][\w\[\]]*?) (?:rank=\d+ )?pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) +(?P<md>\d\d-\d\d) "
    r"(?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? \[?(?P<file>[\w./-]+\.py):(?P<lineno>\d+)\] ")
"""vLLM's own prefix in every release (``[file:line]`` from 0.8, without brackets
before; the process prefix is optional).  Searched for anywhere in a line: the lookahead
halves the search (a stats line 8.5 -> 4.2 us; every line of the samples finds the same
matches)."""


def _may_start(message: str) -> bool:
    """Whether ``message`` can hold one of :data:`STARTUP_MARKERS`: each holds one of
    these words (three scans instead of a generator over five, on every message)."""
    return "vLLM" in message or "Initializing" in message or "non-default" in message


def _prefixes(text: str) -> list[re.Match[str]]:
    """Every match of :data:`PREFIX` in ``text``: the first, and the others only where
    the text after it holds a level name, which every match does (a stats line's message
    holds none: the scan of its 200 characters for a second prefix was ~6 us of ~21)."""
    first = PREFIX.search(text)
    if first is None:
        return []
    rest = text[first.end():]
    if not ("INFO" in rest or "WARNING" in rest or "ERROR" in rest or "DEBUG" in rest
            or "CRITICAL" in rest):  # (PREFIX's level names)
        return [first]
    return list(PREFIX.finditer(text))


WRAPPER_DATE = re.compile(r"(?P<y>20\d\d)-(?P<m>\d\d)-(?P<d>\d\d)[T ]\d\d:\d\d:\d\d")
"""A full date in front of vLLM's prefix (docker --timestamps, Python logging, a bracket
time): the year of the line."""
UVICORN = re.compile(
    r"(?:^|\s|\) )INFO: +(?P<client>\S+):(?P<port>\d+) - \"(?P<method>[A-Z]+) (?P<path>\S+) "
    r"(?P<proto>HTTP/[\d.]+)\" (?P<status>\d{3})(?: (?P<text>[^\r\n]*))?")
"""uvicorn's access line (no stamp of its own)."""
UVICORN_READY = "Application startup complete."

# -------------------------------------------------------------------------- stats line

NUM = r"(nan|-?\d+(?:\.\d+)?)"
_NUMBERS = re.compile(NUM)
STATS_HEAD = "Avg prompt throughput:"
STATS_FIELDS: dict[str, re.Pattern[str]] = {
    "prompt_tps": re.compile(r"Avg prompt throughput: " + NUM + " tokens/s"),
    "gen_tps": re.compile(r"Avg generation throughput: " + NUM + " tokens/s"),
    "running": re.compile(r"Running: (\d+) reqs"),
    "swapped": re.compile(r"Swapped: (\d+) reqs"),
    "pending": re.compile(r"Pending: (\d+) reqs"),
    "waiting": re.compile(r"Waiting: (\d+) reqs"),
    "deferred": re.compile(r"Deferred: (\d+) reqs"),
    "preemptions": re.compile(r"Preemptions: (\d+)"),
    "corrupted": re.compile(r"Corrupted: (\d+) reqs"),
    "prefix_hit_rate": re.compile(r"Prefix cache hit rate: " + NUM + "%"),  # case: not External
    "external_prefix_hit_rate": re.compile(r"External prefix cache hit rate: " + NUM + "%"),
    "mm_hit_rate": re.compile(r"MM cache hit rate: " + NUM + "%"),
    "kv_fetch": re.compile(r"KV fetch: (\d+ waiting to start, \d+ in progress, \d+ "
                           r"completed waiting)"),
}
KV_USAGE = re.compile(r"(?P<dev>[A-Z]{2,4}) KV cache usage: " + NUM + "%")
STATS_V1 = re.compile(
    r"(?:Engine (?P<idx>\d{3}): )?Avg prompt throughput: " + NUM + r" tokens/s, "
    r"Avg generation throughput: " + NUM + r" tokens/s, Running: (\d+) reqs, "
    r"Waiting: (\d+) reqs, (?P<dev>[A-Z]{2,4}) KV cache usage: " + NUM + "%"
    r"(?:, Prefix cache hit rate: " + NUM + "%)?")
"""The stats line V1 prints by default (0.8 to 0.33, no optional field but the prefix
cache's), whole: read by one match (groups: prompt, generation, running, waiting, KV
usage, prefix hit rate), the rows it gives those of :data:`STATS_FIELDS` (~3x faster a
line; any other line is read field by field)."""
STATS_V1_SAME: dict[str, Any] = {
    "engines_aggregated": None, "swapped": None, "deferred": None, "preemptions": None,
    "corrupted": None, "cpu_kv_usage": None, "external_prefix_hit_rate": None,
    "mm_hit_rate": None, "kv_fetch": None, "engine_version": "V1"}
"""The fields a :data:`STATS_V1` line's row has the same whatever the line (the C lane's
rows take them from here too: ``logparser``)."""
ENGINE_PREFIX = re.compile(r"^(?:Engine (?P<idx>\d{3}): |(?P<agg>\d+) Engines Aggregated: )")
V0_PREFIX_LINE = re.compile(r"^Prefix cache hit rate: GPU: " + NUM + "%, CPU: " + NUM + "%")

# -------------------------------------------------------------------------- spec line

SPEC_HEADS = ("SpecDecoding metrics:", "Speculative metrics:")
SPEC_FIELDS: dict[str, re.Pattern[str]] = {
    "rate": re.compile(r"(?<!Avg )Draft acceptance rate: " + NUM + "(%?)"),
    "avg_rate": re.compile(r"Avg Draft acceptance rate: " + NUM + "(%?)"),
    "mean_len": re.compile(r"Mean acceptance length: " + NUM),
    "accepted_tps": re.compile(r"Accepted throughput: " + NUM + " tokens/s"),
    "drafted_tps": re.compile(r"Drafted throughput: " + NUM + " tokens/s"),
    "accepted": re.compile(r"(?:Accepted: (\d+) tokens|Number of accepted tokens: (\d+))"),
    "drafted": re.compile(r"(?:Drafted: (\d+) tokens|Number of draft tokens(?: tokens)?: (\d+))"),
    "emitted": re.compile(r"Number of emitted tokens(?: tokens)?: (\d+)"),
    "spec_tokens": re.compile(r"Number of speculative tokens: (\d+)"),
    "efficiency": re.compile(r"System efficiency: " + NUM),
    "per_position": re.compile(r"Per-position acceptance rate: ((?:" + NUM + r"(?:, )?)+)"),
}

SPEC_V1 = re.compile(
    r"\s*(?:Engine (?P<idx>\d{3}): )?Mean acceptance length: " + NUM + ", "
    r"Accepted throughput: " + NUM + r" tokens/s, Drafted throughput: " + NUM + r" tokens/s, "
    r"Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: (?P<pp>(?:" + NUM + r"(?:, )?)+)"
    r"Avg Draft acceptance rate: " + NUM + "%")
"""The speculative line of 0.10.2/0.11 to 0.33 after its head, whole: read by one match
(groups: mean length, accepted and drafted throughput, accepted, drafted, the
per-position rates, the average rate), the row it gives that of :data:`SPEC_FIELDS`."""
SPEC_V1_SAME: dict[str, Any] = {"form": "v1-0.11", "cumulative": False, "emitted_tokens": None,
                                "spec_tokens": None, "system_efficiency": None}
"""The fields a :data:`SPEC_V1` line's row has the same whatever the line (as
:data:`STATS_V1_SAME`)."""

# -------------------------------------------------------------------------- startup facts

ENGINE_CONFIG = re.compile(
    r"Initializing an? (?:V1 )?LLM engine(?: \(v(?P<version>[^)\s]+)\))? with config: (?P<cfg>.*)")
NON_DEFAULT = re.compile(r"non-default args: (?P<args>\{.*\})[\s`]*$")  # a paste's closing `
SERVER_VERSION = re.compile(r"(?:vLLM API server version|vLLM server version) (?P<v>[\w.+-]+)"
                            r"|^\s*(?:\S+\s+)*version (?P<logo>\d+\.\d+[\w.+-]*)\s*$")
STARTUP_MARKERS = ("non-default args:", "vLLM API server version", "vLLM server version",
                   "Initializing a V1 LLM engine", "Initializing an LLM engine")
FACTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("kv_cache", re.compile(
        r"(?P<device>[A-Z]{2,4})(?: \+ host)? KV cache size: (?P<num_tokens>[\d,]+) tokens")),
    ("concurrency", re.compile(
        r"Maximum concurrency for (?P<tokens_per_request>[\d,]+) tokens per request: "
        r"(?P<max_concurrency>[\d.]+)x")),
    ("kv_cache", re.compile(r"# (?P<device>[A-Z]{2,4}) blocks: (?P<gpu_blocks>\d+), "
                            r"# CPU blocks: (?P<cpu_blocks>\d+)")),
    ("kv_memory", re.compile(r"Available KV cache memory: (?P<gib>[\d.]+) GiB")),
    ("graph_capture", re.compile(r"Graph capturing finished in (?P<seconds>\d+) secs"
                                 r"(?:, took (?P<gib>[\d.]+) GiB)?")),
    ("engine_init", re.compile(r"init engine \(profile, create kv cache, warmup model\) took "
                               r"(?P<seconds>[\d.]+) s")),
    ("load_weight", re.compile(r"Model loading took (?P<gib>[\d.]+) GiB (?:memory )?and "
                               r"(?P<seconds>[\d.]+) seconds"
                               r"|Loading model weights took (?P<gb>[\d.]+) GB")),
    ("torch_compile", re.compile(r"torch\.compile (?:takes|took) (?P<seconds>[\d.]+) s in total")),
    ("attention_backend", re.compile(
        r"Using (?P<backend>[\w-]+) (?:attention )?backend(?: on V1 engine)?(?:\.| out of)")),
    ("server_start", re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on (?P<addr>\S+)")),
    ("chunked_prefill", re.compile(
        r"Chunked prefill is enabled with max_num_batched_tokens=(?P<max_num_batched_tokens>\d+)")),
    ("max_model_len", re.compile(r"Using max model len (?P<max_model_len>\d+)")),
    ("shutdown", re.compile(r"\[shutdown\]|Shutting down")),
)
INT_ATTRS = {"num_tokens", "tokens_per_request", "gpu_blocks", "cpu_blocks", "seconds_int",
             "max_num_batched_tokens", "max_model_len"}


@dataclass
class LogState:
    """What the next line needs from the lines before it."""

    lines: int = 0
    run_seq: int = -1
    """The current launch (-1: none yet)."""
    run_has_data: bool = False
    year: int | None = None
    year_from: str | None = None
    last_md: str | None = None
    last_ts: str | None = None
    last_stats: dict[str, int] = field(default_factory=dict)
    """Per engine index (as text): the line of its last stats line not yet claimed by a
    spec line."""
    pending: str | None = None
    """A stats message cut by a terminal wrap, waiting for its continuation."""
    pending_line: int = 0
    pending_ts: str | None = None
    pending_from: str | None = None
    pending_raw: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | None) -> LogState:
        if not text:
            return cls()
        data = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


FAST_ROW = "_fast_row"
"""The key of a stats or spec row whose values the C lane read: its row in the lane's
table of the block (:meth:`Parser.stats_record`)."""


@dataclass
class Parsed:
    """Rows of a stretch of lines, by table, each with ``run_seq``."""

    stats: list[dict[str, Any]] = field(default_factory=list)
    spec: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    http: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    """run_seq -> what the lines say of that launch (first line and stamp, last stamp,
    version, config, arguments)."""
    noise: int = 0


def _num(text: str | None) -> float | None:
    if text is None or text == "nan":
        return None
    return float(text)


def _infinite(value: object) -> bool:
    """A float, or a list of them, holding an infinity."""
    if type(value) is float:
        return math.isinf(value)
    return type(value) is list and any(type(v) is float and math.isinf(v) for v in value)


def _pct(text: str | None) -> float | None:
    value = _num(text)
    return None if value is None else round(value / 100.0, 6)


class Parser:
    """Feeds lines into :class:`Parsed` rows, keeping :class:`LogState`."""

    def __init__(self, state: LogState, fallback: date) -> None:
        self.state = state
        self.fallback = fallback
        """The file's modification date: the year of a stamp with no better evidence (a
        stamp later in the year than it belongs to the year before)."""
        self.out = Parsed()

    def take(self) -> Parsed:
        """The rows parsed since the last call."""
        out, self.out = self.out, Parsed()
        return out

    def finish(self) -> None:
        """The end of what the file holds now: a wrapped stats line still waiting is
        read as it is."""
        st = self.state
        if st.pending is not None:
            ts = datetime.fromisoformat(st.pending_ts) if st.pending_ts else None
            message, start = st.pending, st.pending_line
            st.pending = None
            self._stats(start, message, ts, st.pending_from, final=True, ts_raw=st.pending_raw)

    # ------------------------------------------------------------------ time

    def _stamp(self, md: str, hms: str, before: str) -> tuple[datetime | None, str]:
        wrapper = WRAPPER_DATE.search(before)
        return self._stamp_at(md, hms, None if wrapper is None
                              else (int(wrapper["y"]), int(wrapper["m"])))

    def _stamp_at(self, md: str, hms: str, wrapper: tuple[int, int] | None
                  ) -> tuple[datetime | None, str]:
        """The time of a stamp ``MM-DD`` ``HH:MM:SS``; ``wrapper``: the year and month of
        a full date in front of the record (:data:`WRAPPER_DATE`)."""
        st = self.state
        month, day = int(md[:2]), int(md[3:])
        if wrapper is not None:
            year, wm = wrapper
            if wm == 1 and month == 12:  # the wrapper's clock is past New Year already
                year -= 1
            elif wm == 12 and month == 1:
                year += 1
            source = "wrapper"
        elif st.year is not None and st.year_from in ("wrapper", "carried"):
            year = st.year + (1 if st.last_md and md < st.last_md else 0)
            source = "carried"
        else:
            fb = self.fallback
            year = fb.year - (1 if (month, day) > (fb.month, fb.day) else 0)
            source = "mtime"
        st.year, st.year_from, st.last_md = year, source, md
        try:
            ts = datetime.fromisoformat(f"{year:04d}-{md} {hms}")
        except ValueError:
            return None, source
        st.last_ts = ts.isoformat()
        return ts, source

    # ------------------------------------------------------------------ lines

    def feed(self, line_no: int, raw: str) -> None:
        st = self.state
        st.lines = line_no
        text = raw.rstrip("\r\n")
        if "\x1b" in text or _ANSI_HINT.search(text):
            text = ANSI.sub("", text)
        text = text.rstrip("\r")
        matches = _prefixes(text)
        if st.pending is not None:
            message, start = st.pending, st.pending_line
            ts = datetime.fromisoformat(st.pending_ts) if st.pending_ts else None
            st.pending = None
            if not matches and text.strip():  # the rest of the wrapped line
                self._stats(start, _unwrap(message, text.strip()), ts, st.pending_from,
                            final=True, ts_raw=st.pending_raw)
                return
            self._stats(start, message, ts, st.pending_from, final=True,
                        ts_raw=st.pending_raw)
        if not matches:
            self._plain(line_no, text, raw)
            return
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            message = text[m.end():end].rstrip()
            before = text[:m.start()]
            ts, year_from = self._stamp(m["md"], m["hms"], before)
            self._message(line_no, message, ts, year_from, m["level"], f"{m['md']} {m['hms']}")

    def _plain(self, line_no: int, text: str, raw: str) -> None:
        """A line without vLLM's prefix: an access line, the ready line, a stats line
        under a caller's own format, or noise."""
        access = UVICORN.search(text)
        if access is not None:
            self._access(line_no, access)
            return
        if UVICORN_READY in text:
            self._event(line_no, None, "ready", text.strip()[-200:], {})
            return
        if STATS_HEAD in text:  # a host program's own logging format
            # the engine's own prefix (``Engine 000: ``) is part of the message
            start = text.index(STATS_HEAD) - _engine_prefix_len(text)
            self._message(line_no, text[start:], None, None, "INFO", "")
            return
        for head in SPEC_HEADS:
            if head in text:
                self._message(line_no, text[text.index(head):], None, None, "INFO", "")
                return
        self.out.noise += 1

    def _message(self, line_no: int, message: str, ts: datetime | None,
                 year_from: str | None, level: str, ts_raw: str) -> None:
        if _may_start(message) and any(marker in message for marker in STARTUP_MARKERS):
            self._startup(line_no, message, ts)
        run = self._run(line_no, ts)
        if STATS_HEAD in message:
            self._stats(line_no, message, ts, year_from, ts_raw=ts_raw, run=run)
            return
        for head in SPEC_HEADS:
            if head in message:
                self._spec(line_no, message[message.index(head) + len(head):], ts, run, head)
                return
        v0 = V0_PREFIX_LINE.search(message)
        if v0 is not None:  # V0's second line of an interval: its stats line's hit rate
            last = self.out.stats[-1] if self.out.stats else None
            if last is not None and last["run_seq"] == run and \
                    line_no - last["line_no"] <= 2:
                last["prefix_hit_rate"] = _pct(v0.group(1))
            return
        if UVICORN_READY in message:
            self._event(line_no, ts, "ready", message[:200], {})
            return
        access = UVICORN.search(message)
        if access is not None:
            self._access(line_no, access, ts)
            return
        if self._facts(line_no, message, ts):
            return
        if level in ("WARNING", "ERROR", "CRITICAL"):
            self._event(line_no, ts, "warning" if level == "WARNING" else "error",
                        message[:2000], {"level": level})
            return
        self.out.noise += 1

    # ------------------------------------------------------------------ runs

    def _startup(self, line_no: int, message: str, ts: datetime | None) -> None:
        st = self.state
        if st.run_seq < 0 or st.run_has_data:
            st.run_seq += 1
            st.run_has_data = False
            st.last_stats = {}
        info = self._run_info(line_no, ts)
        cfg = ENGINE_CONFIG.search(message)
        if cfg is not None:
            if cfg["version"]:
                info["version"] = cfg["version"]
            info["config"] = parse_config(cfg["cfg"])
            info["config_raw"] = cfg["cfg"][:8000]
        args = NON_DEFAULT.search(message)
        if args is not None:
            info["args"] = parse_args(args["args"])
            info["args_raw"] = args["args"][:8000]
        version = SERVER_VERSION.search(message)
        if version is not None and (version["v"] or version["logo"]):
            info.setdefault("version", version["v"] or version["logo"])

    def _run(self, line_no: int, ts: datetime | None) -> int:
        st = self.state
        if st.run_seq < 0:
            st.run_seq = 0
        self._run_info(line_no, ts)
        return st.run_seq

    def _run_info(self, line_no: int, ts: datetime | None) -> dict[str, Any]:
        seq = max(self.state.run_seq, 0)
        info = self.out.runs.setdefault(seq, {"first_line": line_no, "first_ts": ts,
                                              "last_ts": ts})
        if ts is not None:
            if info["first_ts"] is None or ts < info["first_ts"]:
                info["first_ts"] = ts
            if info["last_ts"] is None or ts > info["last_ts"]:
                info["last_ts"] = ts
        return info

    # ------------------------------------------------------------------ records

    def _stats(self, line_no: int, message: str, ts: datetime | None, year_from: str | None,
               final: bool = False, ts_raw: str = "", run: int | None = None) -> None:
        st = self.state
        body = message[message.index(STATS_HEAD) - _engine_prefix_len(message):] \
            if STATS_HEAD in message else message
        # the default form first: a whole match holds its KV usage, so it is never a
        # line cut by a terminal wrap (the search for the usage, ~1 us, is spared)
        whole = STATS_V1.fullmatch(body)
        kv = list(KV_USAGE.finditer(body)) if whole is None else []
        if whole is None and not kv and not final:  # cut by a terminal wrap inside a
            # label: wait for the rest
            st.pending, st.pending_line, st.pending_from = message, line_no, year_from
            st.pending_ts, st.pending_raw = (ts.isoformat() if ts else None), ts_raw
            return
        run = self._run(line_no, ts) if run is None else run
        if whole is not None:
            self._stats_row({
                "run_seq": run, "line_no": line_no, "ts": ts, "ts_raw": ts_raw or None,
                "year_from": year_from,
                "engine_index": _count(whole["idx"]) if whole["idx"] else None,
                "prompt_tps": _num(whole.group(2)), "gen_tps": _num(whole.group(3)),
                "running": _count(whole.group(4)), "waiting": _count(whole.group(5)),
                "kv_device": whole["dev"], "kv_usage": _pct(whole.group(7)),
                "prefix_hit_rate": _pct(whole.group(8)), **STATS_V1_SAME,
            }, message)
            return
        values = {name: pat.search(body) for name, pat in STATS_FIELDS.items()}
        if values["prompt_tps"] is None or values["gen_tps"] is None or \
                values["running"] is None:
            self._reject(line_no, run, "a vLLM stats line without its throughputs and "
                         "Running count", message)
            return
        engine = ENGINE_PREFIX.search(body)
        v0 = values["swapped"] is not None or values["pending"] is not None
        row: dict[str, Any] = {
            "run_seq": run, "line_no": line_no, "ts": ts, "ts_raw": ts_raw or None,
            "year_from": year_from,
            "engine_index": _count(engine["idx"]) if engine and engine["idx"] else None,
            "engines_aggregated": _count(engine["agg"]) if engine and engine["agg"] else None,
            "prompt_tps": _num(values["prompt_tps"].group(1)),
            "gen_tps": _num(values["gen_tps"].group(1)),
            "running": _count(values["running"].group(1)),
            "waiting": _int(values["waiting"] or values["pending"]),
            "swapped": _int(values["swapped"]),
            "deferred": _int(values["deferred"]),
            "preemptions": _int(values["preemptions"]),
            "corrupted": _int(values["corrupted"]),
            "kv_device": kv[0]["dev"] if kv else None,
            "kv_usage": _pct(kv[0].group(2)) if kv else None,
            "cpu_kv_usage": (_pct(next((k.group(2) for k in kv[1:] if k["dev"] == "CPU"),
                                       None)) if v0 else None),
            "prefix_hit_rate": _pct(values["prefix_hit_rate"].group(1))
            if values["prefix_hit_rate"] else None,
            "external_prefix_hit_rate": _pct(values["external_prefix_hit_rate"].group(1))
            if values["external_prefix_hit_rate"] else None,
            "mm_hit_rate": _pct(values["mm_hit_rate"].group(1))
            if values["mm_hit_rate"] else None,
            "kv_fetch": values["kv_fetch"].group(1) if values["kv_fetch"] else None,
            "engine_version": "V0" if v0 else "V1",
        }
        self._stats_row(row, message)

    def _stats_row(self, row: dict[str, Any], raw: str | None = None) -> None:
        """``raw``: the line's message, where its values were read here (a count too big
        for its column rejects it)."""
        st = self.state
        if raw is not None and self._too_big(row, "stats", raw):
            return
        self.out.stats.append(row)
        self._run_info(row["line_no"], row["ts"]).setdefault("shape", row["engine_version"])
        st.run_has_data = True
        st.last_stats[str(row["engine_index"])] = row["line_no"]

    def _spec(self, line_no: int, body: str, ts: datetime | None, run: int,
              head: str) -> None:
        whole = SPEC_V1.fullmatch(body) if head == "SpecDecoding metrics:" else None
        if whole is not None:
            engine_index = whole["idx"]
            fields: dict[str, Any] = {
                **SPEC_V1_SAME,
                "accepted_tokens": _count(whole.group(5)), "drafted_tokens": _count(whole.group(6)),
                "acceptance_rate": _pct(whole.group(9)),
                "mean_acceptance_length": _num(whole.group(2)),
                "accepted_tps": _num(whole.group(3)), "drafted_tps": _num(whole.group(4)),
                "per_position": [float(x) for x in _NUMBERS.findall(whole["pp"])
                                 if x != "nan"],
            }
        else:
            spec = self._spec_fields(line_no, body, run, head)
            if spec is None:
                return
            engine_index, fields = spec
        index = _count(engine_index) if engine_index else None
        if not self._too_big({"line_no": line_no, "run_seq": run, "engine_index": index,
                              **fields}, "speculative-decoding", head + body):
            self._spec_row(line_no, ts, run, index, fields)

    def _too_big(self, row: dict[str, Any], what: str, raw: str) -> bool:
        """Whether a count of ``row`` is too big for its column (64 bits, 32 for an
        engine's), or a number too big for a double (400 digits read as inf: the numbers
        read here are digits, never the word): the line is then a reject, not a block that
        cannot be written or an infinity the log never printed."""
        key = too_big(row, _NARROW)
        if key is not None:
            self._reject(row["line_no"], row["run_seq"],
                         f"a vLLM {what} line whose {key} is too big for its column", raw)
            return True
        key = next((k for k, v in row.items() if _infinite(v)), None)
        if key is not None:
            self._reject(row["line_no"], row["run_seq"],
                         f"a vLLM {what} line whose {key} is too big for a double", raw)
        return key is not None

    def _spec_row(self, line_no: int, ts: datetime | None, run: int, index: int | None,
                  fields: dict[str, Any]) -> None:
        st = self.state
        stats_line = st.last_stats.pop(str(index), None)
        if stats_line is None and index is None and st.last_stats:
            # the spec line names no engine (as printed before 0.33): it follows the
            # stats line logged just before it
            key = max(st.last_stats, key=lambda k: st.last_stats[k])
            stats_line = st.last_stats.pop(key)
        self.out.spec.append({"run_seq": run, "line_no": line_no, "ts": ts,
                              "stats_line_no": stats_line, "engine_index": index, **fields})
        st.run_has_data = True

    def _spec_fields(self, line_no: int, body: str, run: int, head: str
                     ) -> tuple[str | None, dict[str, Any]] | None:
        """A speculative line read field by field: its engine (as printed) and its
        values; None: rejected."""
        f = {name: pat.search(body) for name, pat in SPEC_FIELDS.items()}
        accepted = _first_int(f["accepted"])
        drafted = _first_int(f["drafted"])
        if accepted is None and f["mean_len"] is None and f["rate"] is None \
                and f["avg_rate"] is None:
            self._reject(line_no, run, "a vLLM speculative-decoding line without acceptance "
                         "counts or rates", head + body)
            return None
        cumulative = f["efficiency"] is not None  # V0 prints System efficiency
        if cumulative:
            form = "v0"
        elif head == "Speculative metrics:":
            form = "v1-0.8.0"
        elif f["avg_rate"] is not None:
            form = "v1-0.11"
        elif f["mean_len"] is not None:
            form = "v1-0.8.5"
        else:
            form = "v1-0.8.3"
        rate_match = f["avg_rate"] or f["rate"]
        rate = None
        if rate_match is not None:
            rate = _pct(rate_match.group(1)) if rate_match.group(2) == "%" \
                else _num(rate_match.group(1))
        per_pos = None
        if f["per_position"] is not None:
            per_pos = [float(x) for x in re.findall(NUM, f["per_position"].group(1))
                       if x != "nan"]
        engine = ENGINE_PREFIX.search(body.lstrip())
        return (engine["idx"] if engine else None), {
            "form": form, "cumulative": cumulative,
            "accepted_tokens": accepted, "drafted_tokens": drafted,
            "emitted_tokens": _first_int(f["emitted"]),
            "spec_tokens": _first_int(f["spec_tokens"]),
            "acceptance_rate": rate,
            "mean_acceptance_length": _num(f["mean_len"].group(1)) if f["mean_len"] else None,
            "system_efficiency": _num(f["efficiency"].group(1)) if f["efficiency"] else None,
            "accepted_tps": _num(f["accepted_tps"].group(1)) if f["accepted_tps"] else None,
            "drafted_tps": _num(f["drafted_tps"].group(1)) if f["drafted_tps"] else None,
            "per_position": per_pos,
        }

    def _facts(self, line_no: int, message: str, ts: datetime | None) -> bool:
        found = False
        for kind, pattern in FACTS:
            m = pattern.search(message)
            if m is None:
                continue
            attrs: dict[str, Any] = {}
            for k, v in m.groupdict().items():
                if v is None:
                    continue
                if k in INT_ATTRS or k in ("num_tokens",):
                    digits = v.replace(",", "")  # (a count too long for a number: its text)
                    attrs[k] = int(digits) if len(digits) <= COUNT_DIGITS else v
                elif k in ("seconds", "gib", "gb", "max_concurrency"):
                    try:
                        attrs[k] = float(v)
                    except ValueError:  # (digits and dots that are no number: its text)
                        attrs[k] = v
                else:
                    attrs[k] = v
            self._event(line_no, ts, kind, message[:2000], attrs)
            found = True
        return found

    def stats_record(self, ts_raw: str, wrapper: tuple[int, int] | None,
                     engine_index: int | None, row: int) -> None:
        """The next line, a stats line in the default form :data:`STATS_V1` reads under
        one prefix, as the C lane found it (its stamp ``MM-DD HH:MM:SS``, the year and
        month of docker's stamp in front, its engine): what :meth:`feed` does with it,
        but the reading of its values, which the caller takes from the lane's row
        ``row`` (the row here holds ``FAST_ROW``).  Only while no wrapped stats line is
        waiting (:attr:`LogState.pending`: the line may be its rest)."""
        line_no = self.state.lines = self.state.lines + 1
        ts, year_from = self._stamp_at(ts_raw[:5], ts_raw[6:], wrapper)
        run = self._run(line_no, ts)
        self._stats_row({"run_seq": run, "line_no": line_no, "ts": ts, "ts_raw": ts_raw,
                         "year_from": year_from, "engine_index": engine_index,
                         "engine_version": STATS_V1_SAME["engine_version"], FAST_ROW: row})

    def spec_record(self, ts_raw: str, wrapper: tuple[int, int] | None,
                    engine_index: int | None, row: int) -> None:
        """The next line, a SpecDecoding line :data:`SPEC_V1` reads whole, as the C lane
        found it: as :meth:`stats_record`."""
        line_no = self.state.lines = self.state.lines + 1
        ts, _ = self._stamp_at(ts_raw[:5], ts_raw[6:], wrapper)
        self._spec_row(line_no, ts, self._run(line_no, ts), engine_index, {FAST_ROW: row})

    def access_lines(self, n: int) -> tuple[int, int, datetime | None]:
        """The next ``n`` lines, each a plain access line (``logparser.plain_access``):
        what :meth:`feed` does with each, at once.  Returns their run, the first line's
        number and their time (no stamp of their own: each takes the last one); the caller
        makes the rows."""
        first = self.state.lines + 1
        run = self._run(first, None)
        ts = datetime.fromisoformat(self.state.last_ts) if self.state.last_ts else None
        self.state.lines = first + n - 1
        return run, first, ts

    def _access(self, line_no: int, m: re.Match[str], ts: datetime | None = None) -> None:
        run = self._run(line_no, ts)
        self.out.http.append({
            "run_seq": run, "line_no": line_no,
            "ts": ts if ts is not None else (datetime.fromisoformat(self.state.last_ts)
                                             if self.state.last_ts else None),
            "client": f"{m['client']}:{m['port']}", "method": m["method"], "path": m["path"],
            "protocol": m["proto"], "status": int(m["status"]),
            "status_text": (m["text"] or "").strip() or None,
        })
        if m["method"] == "POST" and m["path"] in ("/start_profile", "/stop_profile"):
            kind = "profiling_start" if m["path"] == "/start_profile" else "profiling_stop"
            self._event(line_no, ts, kind, m.group(0).strip(), {})

    def _event(self, line_no: int, ts: datetime | None, kind: str, message: str,
               attrs: dict[str, Any]) -> None:
        run = self._run(line_no, ts)
        if ts is None and self.state.last_ts:
            ts = datetime.fromisoformat(self.state.last_ts)
        self.out.events.append({"run_seq": run, "line_no": line_no, "ts": ts, "kind": kind,
                                "message": message, "end_line": line_no,
                                "attrs": json.dumps(attrs) if attrs else None})

    def _reject(self, line_no: int, run: int, reason: str, raw: str) -> None:
        self.out.rejects.append({"run_seq": run, "line_no": line_no, "reason": reason,
                                 "raw": raw[:2000]})


_NARROW = frozenset({"engine_index", "engines_aggregated"})
"""The counts of a stats or spec row that are 32-bit columns (the others are 64-bit)."""


def _unwrap(head: str, rest: str) -> str:
    """A stats line a terminal wrapped, put back together.  The wrap fell inside a word
    (``usa`` | ``ge``) or between two (``cache`` | ``usage``, the space lost): of the two
    joins, the one whose fields read more (a device's KV usage above all) is the line."""
    tight, spaced = head + rest, head.rstrip() + " " + rest

    def fields(text: str) -> tuple[int, int]:
        return (len(KV_USAGE.findall(text)),
                sum(1 for pat in STATS_FIELDS.values() if pat.search(text)))

    return spaced if fields(spaced) > fields(tight) else tight


def _engine_prefix_len(message: str) -> int:
    i = message.index(STATS_HEAD)
    m = re.search(r"(?:Engine \d{3}: |\d+ Engines Aggregated: )$", message[:i])
    return len(m.group(0)) if m else 0


COUNT_DIGITS = 40
"""Digits of a count read as printed; a longer one (no column holds it) reads as 2**64."""


def _count(text: str) -> int:
    """``int(text)`` of a count as printed; one of more than :data:`COUNT_DIGITS` digits
    reads as 2**64, which the row's check rejects by its name (:meth:`Parser._too_big`),
    as it rejects a count of 20 digits: ``int`` raises past 4,300 digits, and a line
    failed its file."""
    return int(text) if len(text) <= COUNT_DIGITS else 1 << 64


def _int(m: re.Match[str] | None) -> int | None:
    return _count(m.group(1)) if m is not None else None


def _first_int(m: re.Match[str] | None) -> int | None:
    if m is None:
        return None
    return next(_count(g) for g in m.groups() if g is not None)


# -------------------------------------------------------------------------- config text

def split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets and quotes (engine configs are reprs of nested
    dicts and objects, up to a few KB: never ``eval``)."""
    out: list[str] = []
    depth, quote, start = 0, "", 0
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth = max(depth - 1, 0)
        elif c == sep and depth == 0:
            out.append(text[start:i])
            start = i + 1
        i += 1
    out.append(text[start:])
    return [p.strip() for p in out if p.strip()]


def _literal(value: str) -> Any:
    v = value.strip()
    if v in ("None", "True", "False") or v[:1] in "'\"0123456789-[{(":
        try:
            return ast.literal_eval(v)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return v


def parse_config(text: str) -> dict[str, Any]:
    """``key=value, ...`` of an engine-config line: literals where they are literals, the
    text otherwise (``<CompilationMode.NONE: 0>``, ``SpeculativeConfig(...)``)."""
    out: dict[str, Any] = {}
    for part in split_top(text.rstrip(") ")):
        key, eq, value = part.partition("=")
        if eq and re.fullmatch(r"[a-z_][a-z0-9_]*", key.strip()):
            out[key.strip()] = _literal(value)
    return out


def parse_args(text: str) -> dict[str, Any]:
    """The ``non-default args: {...}`` dict, literals only."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        out: dict[str, Any] = {}
        for part in split_top(text.strip()[1:-1]):
            key, colon, val = part.partition(":")
            if colon:
                out[str(_literal(key))] = _literal(val)
        return out
    return value if isinstance(value, dict) else {}
