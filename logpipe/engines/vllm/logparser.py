"""vLLM's server log, block by block, for the ingest's file protocol
(:mod:`logpipe.engines.parsing`).

vLLM prints a stats line per logging interval (10 s by default), so its logs are small
beside SGLang's per-batch lines: each block streams through the line parser, and its rows
of the tables that grow with the log (:data:`SPOOLED`) are spooled."""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from logpipe.engines.clane import columns_frame
from logpipe.engines.parsing import Chunk, Era, RunSeen
from logpipe.engines.vllm.parser import (
    FAST_ROW,
    SPEC_V1_SAME,
    STATS_V1_SAME,
    LogState,
    Parser,
)
from logpipe.lanes import lane_enabled
from logpipe.redaction import is_secret_key
from logpipe.sources.records import loads

SCHEMAS: dict[str, dict[str, Any]] = {
    "vllm_stats": {
        "run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
        "ts_raw": pl.String, "year_from": pl.String, "engine_index": pl.Int32,
        "engines_aggregated": pl.Int32, "prompt_tps": pl.Float64, "gen_tps": pl.Float64,
        "running": pl.Int64, "waiting": pl.Int64, "swapped": pl.Int64, "deferred": pl.Int64,
        "preemptions": pl.Int64, "corrupted": pl.Int64, "kv_device": pl.String,
        "kv_usage": pl.Float64, "cpu_kv_usage": pl.Float64, "prefix_hit_rate": pl.Float64,
        "external_prefix_hit_rate": pl.Float64, "mm_hit_rate": pl.Float64,
        "kv_fetch": pl.String, "engine_version": pl.String},
    "vllm_spec_metrics": {
        "run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
        "stats_line_no": pl.Int64, "engine_index": pl.Int32, "form": pl.String,
        "cumulative": pl.Boolean, "accepted_tokens": pl.Int64, "drafted_tokens": pl.Int64,
        "emitted_tokens": pl.Int64, "spec_tokens": pl.Int64, "acceptance_rate": pl.Float64,
        "mean_acceptance_length": pl.Float64, "system_efficiency": pl.Float64,
        "accepted_tps": pl.Float64, "drafted_tps": pl.Float64,
        "per_position": pl.List(pl.Float64)},
    "events": {"run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
               "kind": pl.String, "message": pl.String, "attrs": pl.String},
    "http_requests": {"run_seq": pl.Int64, "line_no": pl.Int64, "ts": pl.Datetime("us"),
                      "client": pl.String, "method": pl.String, "path": pl.String,
                      "protocol": pl.String, "status": pl.Int32, "status_text": pl.String},
    "rejects": {"run_seq": pl.Int64, "line_no": pl.Int64, "reason": pl.String,
                "raw": pl.String},
}
SPOOLED = ("http_requests", "vllm_stats", "vllm_spec_metrics")
"""The tables whose rows are held until the file's end and loaded in one statement each:
the access lines, which grow with the requests, and the stats and speculative lines, few
but many blocks' worth in a long log (an insert per block and table cost ~6-9 ms whatever
its rows: 0.3 s of a 256 MB log of 17 blocks)."""

try:
    from logpipe.engines.vllm import _fastlane  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler
    _fastlane = None
_ACCESS_KINDS: dict[str, str] = dict(_fastlane.ACCESS_COLUMNS) if _fastlane else {}
_STATS_KINDS: dict[str, str] = dict(_fastlane.STATS_COLUMNS) if _fastlane else {}
_SPEC_KINDS: dict[str, str] = dict(_fastlane.SPEC_COLUMNS) if _fastlane else {}


BLOCK_BYTES = 8 * 1024 * 1024
"""Bytes of lines parsed between writes (memory stays flat on a long access log)."""

PLAIN_ACCESS = (
    r"^(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z )?INFO: +"
    r"(?P<client>[0-9A-Za-z._:-]+):(?P<port>\d+) - \"(?P<method>[A-Z]+) "
    r"(?P<path>[^\s\"\[\x1b]+) (?P<protocol>HTTP/[\d.]+)\" (?P<status>\d{3})"
    r"(?: (?P<text>[A-Za-z ]*))?\r?$")
"""An access line the line parser would read as uvicorn's and nothing else: alone on its
line (or behind ``docker logs --timestamps``), no colour, no bracket, a status text of
words.  Such a line has no stamp of its own and changes no state but the line count, so a
stretch of them is read at once; any other line, and the profiler's two POSTs (which are
also events), goes through :meth:`Parser.feed`."""


def plain_access(lines: list[str]) -> pl.DataFrame:
    """The plain access lines of a block: ``idx`` (the line's index) and the row fields
    the line parser gives them (``client`` with its port, ``status_text`` stripped).
    A line is told by :data:`PLAIN_ACCESS` (a match, no captures) and then cut at its
    fixed separators: half the time of the regex's captures."""
    text = pl.Series("line", lines, dtype=pl.String)
    found = pl.DataFrame({"idx": pl.int_range(0, len(lines), eager=True, dtype=pl.Int64),
                          "line": text}).filter(
        text.str.contains("INFO:", literal=True)).filter(
        pl.col("line").str.contains(PLAIN_ACCESS))
    # 'client:port - "METHOD path HTTP/x" status[ text]' after "INFO:" and its spaces
    rest = (pl.col("line").str.splitn("INFO:", 2).struct.field("field_1")
            .str.strip_chars_start(" ").str.splitn(' - "', 2))
    parts = found.select("idx", rest.struct.field("field_0").alias("client"),
                         rest.struct.field("field_1").str.splitn('" ', 2).alias("b")
                         ).unnest("b").select(
        "idx", "client", pl.col("field_0").str.splitn(" ", 3).alias("request"),
        pl.col("field_1").alias("st")).unnest("request")
    profiler = (pl.col("method") == "POST") & pl.col("path").is_in(
        ["/start_profile", "/stop_profile"])
    return parts.select(
        "idx", "client", pl.col("field_0").alias("method"), pl.col("field_1").alias("path"),
        pl.col("field_2").alias("protocol"),
        pl.col("st").str.slice(0, 3).cast(pl.Int32).alias("status"),
        pl.col("st").str.slice(4).str.strip_chars().replace("", None).alias("status_text"),
    ).filter(~profiler)


def about() -> str:
    """What ``logpipe --version`` says of the vLLM parser."""
    if _fastlane is None:
        return "vLLM: line parser (C lane not built)"
    return "vLLM: C lane (access, stats, spec lines) + line parser" if lane_enabled() else \
        "vLLM: line parser (LOGPIPE_FASTLANE=0)"


def fast_enabled() -> bool:
    """Whether blocks are split by the C lane (``_fastlane.c``: built, not turned off)."""
    return _fastlane is not None and lane_enabled()


SLOW, STATS, SPEC = 0, 1, 2
"""What a line of :meth:`Lines.items` is: one for the line parser, or a stats or spec line
the C lane read."""


class Lines:
    """A block's lines as :meth:`VLLMLogParser.finish` reads them: every line decoded
    (the polars lane), or the lines the C lane left, decoded, the stats and spec lines it
    read (``stats``, ``spec``: its columns), and the block's bytes for the rare line the
    line parser must read after all (one that may end a wrapped stats line)."""

    def __init__(self, lines: list[str] | None = None, slow_idx: list[int] | None = None,
                 slow: list[str] | None = None, block: bytes | bytearray = b"",
                 access: pl.DataFrame | None = None, count: int = 0,
                 stats: pl.DataFrame | None = None, spec: pl.DataFrame | None = None,
                 per_position: pl.Series | None = None) -> None:
        self.all = lines
        self.slow_idx = slow_idx or []
        self.slow = slow or []
        self.block = block
        self.access = access
        self.count = len(lines) if lines is not None else count
        self.stats = stats if stats is not None and stats.height else None
        self.spec = spec if spec is not None and spec.height else None
        self.per_position = per_position
        self._order: tuple[list[int], list[tuple[int, int]]] | None = None
        self._stamps: dict[int, list[tuple[str, tuple[int, int] | None, int | None]]] = {}

    def between(self, start: int, stop: int) -> Iterable[str]:
        """The lines ``start`` to ``stop`` (indexes in the block), none of them a plain
        access line of a stretch, where the C lane read no stats or spec line."""
        if self.all is not None:
            return self.all[start:stop]
        lo, hi = bisect_left(self.slow_idx, start), bisect_left(self.slow_idx, stop)
        return self.slow[lo:hi]

    @property
    def records(self) -> bool:
        """Whether the C lane read stats or spec lines of the block."""
        return self.stats is not None or self.spec is not None

    def items(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The lines ``start`` to ``stop``, none of them a plain access line of a
        stretch, in order: ``(SLOW, i)``, line ``i`` of :attr:`slow`, or ``(STATS, i)``
        or ``(SPEC, i)``, row ``i`` of the lane's table."""
        if self._order is None:
            idx = [(i, SLOW, k) for k, i in enumerate(self.slow_idx)]
            for kind, table in ((STATS, self.stats), (SPEC, self.spec)):
                if table is not None:
                    idx += [(i, kind, k) for k, i in enumerate(table["idx"].to_list())]
            idx.sort()
            self._order = [i for i, _, _ in idx], [(kind, k) for _, kind, k in idx]
        at, order = self._order
        return order[bisect_left(at, start):bisect_left(at, stop)]

    def stamps(self, kind: int) -> list[tuple[str, tuple[int, int] | None, int | None]]:
        """Per row of the lane's stats (``STATS``) or spec table: its stamp ``MM-DD
        HH:MM:SS``, the year and month of docker's stamp in front of it (None: none) and
        its engine, as :meth:`Parser.stats_record` takes them."""
        got = self._stamps.get(kind)
        if got is None:
            table = self.stats if kind == STATS else self.spec
            assert table is not None
            got = self._stamps[kind] = [
                (ts, None if y is None else (y, m), engine) for ts, y, m, engine in zip(
                    table["ts_raw"].to_list(), table["wrapper_year"].to_list(),
                    table["wrapper_month"].to_list(), table["engine_index"].to_list(),
                    strict=True)]
        return got

    def record_line(self, kind: int, row: int) -> str:
        """The text of the stats (``STATS``) or spec line of the lane's row ``row``."""
        return self._text(self.stats if kind == STATS else self.spec, row)

    def access_line(self, index: int, row: int) -> str:
        """The text of line ``index``, the plain access line of ``access`` row ``row``."""
        return self.all[index] if self.all is not None else self._text(self.access, row)

    def _text(self, table: pl.DataFrame | None, row: int) -> str:
        """The text of the line of a lane's table's row (its ``off`` and ``len``)."""
        assert table is not None
        off, n = table["off"][row], table["len"][row]
        return bytes(self.block[off:off + n]).decode("utf-8", errors="replace")


def split_block(block: bytes | bytearray) -> tuple[Lines, pl.DataFrame]:
    """The C lane: the block's plain access lines as :func:`plain_access` gives them
    (with each line's ``off`` and ``len`` in the block), its default stats and spec lines
    (:attr:`Lines.stats`, :attr:`Lines.spec`), and every other line."""
    assert _fastlane is not None
    out = _fastlane.scan_access(block)
    access = columns_frame(out["access"], _ACCESS_KINDS)
    slow = out["slow"].decode("utf-8", errors="replace").split("\n")
    slow.pop()  # (each line ends in a newline)
    spec = columns_frame(out["spec"], _SPEC_KINDS)
    per_position = None
    if spec.height:
        values = columns_frame(out["per_position"], {"value": "f64"})["value"].to_arrow()
        offsets = np.zeros(spec.height + 1, dtype=np.int32)
        np.cumsum(spec["per_position_n"].to_numpy(), out=offsets[1:])
        # (the offsets' buffer as it is: pa.array of a numpy array imports pandas)
        per_position = pl.Series("per_position", pa.ListArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)]),
            values), dtype=pl.List(pl.Float64))
    return Lines(slow_idx=np.frombuffer(out["slow_idx"], dtype=np.int64).tolist(), slow=slow,
                 block=block, access=access, count=out["lines"],
                 stats=columns_frame(out["stats"], _STATS_KINDS), spec=spec,
                 per_position=per_position), access


def _stretch_rows(access: pl.DataFrame,
                  stretches: list[tuple[int, int, int, int, datetime | None]]) -> pl.DataFrame:
    """The ``http_requests`` rows of stretches of ``access``: (first row, rows, run,
    first line's number, time)."""
    first, n, run, line, ts = (list(c) for c in zip(*stretches, strict=True))
    counts = np.array(n, dtype=np.int64)
    rows = np.arange(counts.sum(), dtype=np.int64)
    # each row's position in its stretch, then its row of ``access`` and its line number
    within = rows - np.repeat(np.cumsum(counts) - counts, counts)
    take = np.repeat(np.array(first, dtype=np.int64), counts) + within
    line_no = np.repeat(np.array(line, dtype=np.int64), counts) + within
    # (rows ascending, each once: all of them is the usual block, kept as it is)
    taken = access if len(take) == access.height else access[take]
    stamps = np.array([np.datetime64(t, "us") if t is not None else np.datetime64("NaT")
                       for t in ts], dtype="datetime64[us]")
    return taken.select(
        pl.Series("run_seq", np.repeat(np.array(run, dtype=np.int64), counts)),
        pl.Series("line_no", line_no),
        pl.Series("ts", np.repeat(stamps, counts), dtype=pl.Datetime("us")),
        "client", "method", "path", "protocol", "status", "status_text")


def _stretches(access: pl.DataFrame) -> list[tuple[int, int, int]]:
    """Runs of consecutive plain access lines: (first line index, index past the last,
    first row of ``access``)."""
    if access.height == 0:
        return []
    idx = access["idx"].to_numpy()
    # (in numpy: a busy server's 8 MB block holds ~80,000 access lines and a few hundred
    # stretches; a Python list of every index took 0.1 s of a 256 MB log's 1.2 s parse)
    new = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = np.concatenate(([0], new)).tolist()
    ends = np.concatenate((new, [access.height])).tolist()
    return [(int(idx[a]), int(idx[b - 1]) + 1, a) for a, b in zip(starts, ends, strict=True)]


class VLLMLogParser:
    """vLLM's lines, block by block (:class:`logpipe.engines.parsing.LogParser`)."""

    block_bytes = BLOCK_BYTES
    spooled = frozenset(SPOOLED)
    linked: frozenset[str] = frozenset()

    def __init__(self, state_json: str | None, fallback_date: str,
                 keep_text: bool = False) -> None:
        self.state = LogState.from_json(state_json)
        self.parser = Parser(self.state, date.fromisoformat(fallback_date))

    @property
    def lines(self) -> int:
        return self.state.lines

    def count_lines(self, block: bytes | bytearray) -> int:
        # (memchr's vector loop in C; ``bytes.count`` reads a byte at a time)
        return _fastlane.count_lines(block) if _fastlane is not None else block.count(b"\n")

    def prepare(self, block: bytes | bytearray, first_line_no: int
                ) -> tuple[Lines, pl.DataFrame]:
        """The block's lines, and its plain access lines read at once (on the thread that
        prepares blocks ahead; the C lane and polars release the GIL)."""
        if fast_enabled():
            return split_block(block)
        lines = block.decode("utf-8", errors="replace").split("\n")
        lines.pop()  # a block ends with its last line's newline
        return Lines(lines), plain_access(lines)

    def finish(self, prepared: tuple[Lines, pl.DataFrame]) -> Chunk:
        """Every line through the line parser, except stretches of plain access lines
        (most of a busy server's log: one a request), which take their rows at once, and
        the stats and spec lines the C lane read, which take their values from it."""
        lines, access = prepared
        pos = 0
        stretches: list[tuple[int, int, int, int, datetime | None]] = []
        for start, stop, first in _stretches(access):
            self._read(lines, pos, start)
            if self.state.pending is not None:  # the first may finish a wrapped stats line
                self.parser.feed(self.state.lines + 1, lines.access_line(start, first))
                start, first = start + 1, first + 1
            if start < stop:
                stretches.append((first, stop - start, *self.parser.access_lines(stop - start)))
            pos = stop
        self._read(lines, pos, lines.count)
        return self._take(_stretch_rows(access, stretches) if stretches else None, lines)

    def _read(self, lines: Lines, start: int, stop: int) -> None:
        """Lines ``start`` to ``stop`` of the block, none of them a plain access line of
        a stretch, in order."""
        feed, st = self.parser.feed, self.state
        if not lines.records:
            for text in lines.between(start, stop):
                feed(st.lines + 1, text)
            return
        for kind, i in lines.items(start, stop):
            if kind == SLOW:
                feed(st.lines + 1, lines.slow[i])
            elif st.pending is not None:  # it may be a wrapped stats line's rest
                feed(st.lines + 1, lines.record_line(kind, i))
            elif kind == STATS:
                self.parser.stats_record(*lines.stamps(STATS)[i], i)
            else:
                self.parser.spec_record(*lines.stamps(SPEC)[i], i)

    def end(self) -> Chunk | None:
        self.parser.finish()
        return self._take()

    def workers(self) -> AbstractContextManager[None]:
        return nullcontext()  # (its slow lines are few: stats lines every 10 s)

    def state_json(self) -> str:
        return self.state.to_json()

    def era(self, previous: Era | None, seen: RunSeen) -> Era:
        before = previous[0] if previous is not None else None
        # the printed version, once seen, outlasts the generation a later block's stats
        # lines show (a block need not hold the version line)
        if before and not _is_shape(before) and (seen.era is None or _is_shape(seen.era)):
            return before, None
        return seen.era or before, None

    def quotation(self, path: Path, rows: Mapping[str, int], noise: int) -> str | None:
        return None

    def _take(self, access: pl.DataFrame | None = None, lines: Lines | None = None) -> Chunk:
        """The rows parsed since the last call, with ``access``: rows of stretches of
        plain access lines, and the values of the stats and spec lines the C lane read
        (of ``lines``)."""
        out = self.parser.take()
        tables: dict[str, pl.DataFrame] = {}
        for table, rows in (("vllm_stats", out.stats), ("vllm_spec_metrics", out.spec),
                            ("events", out.events), ("http_requests", out.http),
                            ("rejects", out.rejects)):
            frames = []
            if lines is not None and lines.records and table in _FAST_TABLES:
                fast = [r for r in rows if FAST_ROW in r]
                if fast:
                    rows = [r for r in rows if FAST_ROW not in r]
                    frames.append(_fast_rows(table, fast, lines))
            if rows:
                frames.insert(0, pl.DataFrame({k: [r.get(k) for r in rows]
                                               for k in SCHEMAS[table]}, schema=SCHEMAS[table]))
            if len(frames) > 1:  # (in line order)
                tables[table] = pl.concat(frames).sort("line_no", maintain_order=True)
            elif frames:
                tables[table] = frames[0]
        if access is not None:
            tables["http_requests"] = (pl.concat([tables["http_requests"], access])
                                       if "http_requests" in tables else access)
        runs = [RunSeen(seq, info["first_line"], info["first_ts"], info["last_ts"],
                        era=_era(info), facts=_launch_facts(info))
                for seq, info in sorted(out.runs.items())]
        return Chunk(tables=tables, runs=runs, noise=out.noise, may_hold_console=False)


_FAST_TABLES = {"vllm_stats": STATS, "vllm_spec_metrics": SPEC}
_FROM_PARSER = {"vllm_stats": ("run_seq", "line_no", "ts", "ts_raw", "year_from"),
                "vllm_spec_metrics": ("run_seq", "line_no", "ts", "stats_line_no")}
"""What the line parser gives a row of a line the C lane read (the run, the line, the
time, the stats line a spec line goes with); the values are the lane's."""
_CONSTANT = {"vllm_stats": STATS_V1_SAME, "vllm_spec_metrics": SPEC_V1_SAME}
"""The fields a row of the lines the C lane reads has the same in every line, from the line
parser's (one place)."""


def _fast_rows(table: str, rows: list[dict[str, Any]], lines: Lines) -> pl.DataFrame:
    """``table``'s rows of the lines the C lane read: ``rows`` (the line parser's part of
    each, :data:`_FROM_PARSER`, and the lane's row) with the lane's values."""
    kind = _FAST_TABLES[table]
    schema = SCHEMAS[table]
    source = lines.stats if kind == STATS else lines.spec
    assert source is not None
    take = [r[FAST_ROW] for r in rows]
    lane = source[take]
    columns: list[pl.Series | pl.Expr] = [
        pl.Series(name, [r[name] for r in rows], dtype=schema[name])
        for name in _FROM_PARSER[table]]
    columns += [pl.lit(v, dtype=schema[name]).alias(name)
                for name, v in _CONSTANT[table].items()]
    if kind == SPEC:
        assert lines.per_position is not None
        columns.append(lines.per_position.gather(take))
    else:
        # a V0 hit-rate line after it sets the row's prefix hit rate (as the line parser
        # does its last row's)
        set_by = [r for r in rows if "prefix_hit_rate" in r]
        if set_by:
            columns.append(pl.when(pl.Series([("prefix_hit_rate" in r) for r in rows]))
                           .then(pl.Series([r.get("prefix_hit_rate") for r in rows],
                                           dtype=pl.Float64))
                           .otherwise(pl.col("prefix_hit_rate")).alias("prefix_hit_rate"))
    return lane.with_columns(columns).select(
        [pl.col(name).cast(dtype) for name, dtype in schema.items()])


def make_parser(state_json: str | None, fallback_date: str,
                keep_text: bool = False) -> VLLMLogParser:
    return VLLMLogParser(state_json, fallback_date, keep_text)


def _is_shape(label: str) -> bool:
    return label in ("vllm V0", "vllm V1")


def _era(info: dict[str, Any]) -> str | None:
    """``vllm <version>`` where the log prints it, else the engine generation its stats
    lines show (``vllm V0`` / ``vllm V1``)."""
    version = info.get("version")
    if version:
        return f"vllm {version}"
    return f"vllm {info['shape']}" if info.get("shape") else None


def _launch_facts(info: dict[str, Any]) -> dict[str, Any]:
    """``runs`` columns from what the startup lines said."""
    cfg: dict[str, Any] = info.get("config") or {}
    args: dict[str, Any] = dict(info.get("args") or {})
    if not cfg and not args and not info.get("version"):
        return {}
    out: dict[str, Any] = {}
    if info.get("version"):
        out["engine_version"] = str(info["version"])
    merged = _server_args(cfg, args)
    if merged:
        safe = {k: ("<redacted>" if is_secret_key(k) and v not in (None, "", False) else v)
                for k, v in merged.items()}
        out["server_args"] = json.dumps(safe, default=str, sort_keys=True)
        raw = info.get("args_raw") or info.get("config_raw") or ""
        for k in merged:
            if is_secret_key(k):
                raw = re.sub(rf"""(['"]?{re.escape(k)}['"]?\s*[:=]\s*)"""
                             r"""(\[[^\]]*\]|'[^']*'|"[^"]*"|[^,})]+)""",
                             lambda m: m.group(1) + "'<redacted>'", raw)
        out["server_args_raw"] = raw[:8000]
    model = args.get("model") or args.get("model_tag") or cfg.get("model")
    if model:
        out["model"] = str(model)
    for col, name in (("tp_size", "tensor_parallel_size"), ("pp_size", "pipeline_parallel_size"),
                      ("dp_size", "data_parallel_size")):
        value = merged.get(name)
        if isinstance(value, int):
            out[col] = value
        elif cfg or args:  # the args or config were printed: an absent size is the default
            out[col] = 1
    # expert parallelism spans the TP x DP ranks when it is on (--enable-expert-parallel)
    if cfg or args:
        out["ep_size"] = out["tp_size"] * out["dp_size"] if merged.get(
            "enable_expert_parallel") is True else 1
    spec = _spec_config(args.get("speculative_config"), cfg.get("speculative_config"))
    if spec is not None:
        out["spec_algorithm"] = spec.get("method")
        steps = spec.get("num_speculative_tokens")
        out["spec_num_draft_tokens"] = int(steps) if isinstance(steps, int) else None
        out["role"] = "speculative"
    elif cfg or args:
        out["role"] = "baseline"
    return out


def _spec_config(from_args: Any, from_config: Any) -> dict[str, Any] | None:
    for value in (from_args, from_config):
        if isinstance(value, dict) and value:
            return value
        if isinstance(value, str) and value not in ("None", ""):
            if value.strip().startswith("{"):
                try:
                    parsed = loads(value)
                    if isinstance(parsed, dict):
                        return parsed
                except ValueError:
                    pass
            method = _repr_field(value, "method")
            if method:
                tokens = _repr_field(value, "num_spec_tokens") or \
                    _repr_field(value, "num_speculative_tokens")
                return {"method": method,
                        "num_speculative_tokens": int(tokens) if tokens and
                        tokens.isdigit() else None}
    return None


def _repr_field(text: str, name: str) -> str | None:
    m = re.search(rf"\b{name}=['\"]?([\w.-]+)", text)
    return m.group(1) if m else None


CONFIG_KEYS = ("dtype", "max_seq_len", "tensor_parallel_size", "pipeline_parallel_size",
               "data_parallel_size", "quantization", "enforce_eager", "kv_cache_dtype",
               "device_config", "enable_prefix_caching", "enable_chunked_prefill",
               "disable_custom_all_reduce", "seed", "served_model_name", "load_format")
"""Keys of the engine-config line that describe what ran (the rest are paths, reprs of
nested configs, tokenizer details)."""


def _server_args(cfg: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The arguments a run's environment is built from: the engine config's settings,
    then the non-default arguments the user gave (which win)."""
    out: dict[str, Any] = {k: cfg[k] for k in CONFIG_KEYS if k in cfg}
    if "speculative_config" in cfg and cfg["speculative_config"] not in (None, "None"):
        out["speculative_config"] = cfg["speculative_config"]
    out.update({k: v for k, v in args.items() if k != "model_tag"})
    return out
