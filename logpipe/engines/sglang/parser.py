"""SGLang server logs, every release 0.2.15–0.5.23, with the wrappers found in real logs.

:func:`parse_chunk` turns a block of complete lines into the rows of ``batches``,
``events``, ``http_requests`` and ``rejects``, vectorised with polars.  State that crosses
block boundaries (which run a line belongs to, midnight roll-over of time-only stamps, a
traceback that continues an error) lives in :class:`LogState`, which the store keeps per
file so an appended log resumes exactly where the last ingest stopped.

:func:`prepare_block` first lets the C fast lane (:mod:`logpipe.engines.sglang.fastlane`) read the
plain batch and access lines; this module parses the rest and merges the two (run of each
fast row, midnight roll-over, era features), with the same rows either way.

Invariants: no Python loop per line except over the (rare) event lines; a line is a batch
row, an event, an HTTP row, a reject, a continuation of an error, an informational line or
noise, and exactly one of these; nothing raises on bad input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl

from logpipe.engines.sglang import era, fastlane
from logpipe.engines.sglang.batches import COLUMNS, RECORD_LIKE_RE, parse_batches
from logpipe.engines.sglang.events import ERROR_START, classify, event_attrs, parse_http
from logpipe.engines.sglang.kind import NAME, SOURCE, sniff  # noqa: F401  (re-exported)
from logpipe.engines.sglang.prefix import (
    OUTER_TS_RE,
    PID_RE,
    SERVICE_RE,
    split_prefixes,
    timestamps,
)
from logpipe.engines.sglang.records import is_record, parse_records
from logpipe.engines.sglang.slowlines import MESSAGE_LIMIT, EventRead, read_event

RAW_LIMIT = 2000

@dataclass
class LogState:
    """What parsing needs to remember between blocks and between ingests of one file."""

    run_seq: int = 0
    run_has_args: bool = False
    prev_time_s: float | None = None
    day_offset: int = 0
    open_error_line: int | None = None
    lines: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | None) -> LogState:
        return cls(**json.loads(text)) if text else cls()


RUN_STRIDE = 1 << 32
"""Several files parsed as one block (:class:`Files`) number their runs ``file *
RUN_STRIDE + run_seq`` while they are finished, so that every grouping by run stays
within its file."""


@dataclass
class Files:
    """New files parsed as one block, each from its first line with a fresh state: a
    small file's parse is ~100 polars calls whatever its lines, so fifty small logs cost
    about what one does.  Everything that follows a file (its runs, the days of its
    time-only stamps, the lines a traceback continues) stays within each file: the rows
    are those of each file parsed alone (:func:`split_files` gives them back by file)."""

    starts: np.ndarray
    """The block's number of each file's first line, ascending (the first is 1)."""
    ends: np.ndarray
    """The block's number of each file's last line."""
    states: list[LogState] = field(default_factory=list)
    """Each file's state after it (as :func:`finish_chunk` leaves one file's)."""
    noise: list[int] = field(default_factory=list)
    unread: list[int] = field(default_factory=list)

    @classmethod
    def of_lengths(cls, lines: list[int]) -> Files:
        """Files of ``lines`` lines each (at least one), one after another from line 1."""
        ends = np.cumsum(np.array(lines, dtype=np.int64))
        return cls(ends - np.array(lines, dtype=np.int64) + 1, ends,
                   [LogState() for _ in lines], [0] * len(lines), [0] * len(lines))

    def index(self, line_no: pl.Series) -> pl.Series:
        """The file of each line number."""
        return pl.Series("file", np.searchsorted(self.starts, line_no.to_numpy(),
                                                 side="right") - 1, dtype=pl.Int64)

    def counts(self, frame: pl.DataFrame) -> list[int]:
        """Rows of ``frame`` (with ``file``) in each file."""
        found = dict(frame.group_by("file").len().iter_rows())
        return [int(found.get(i, 0)) for i in range(len(self.starts))]


@dataclass
class Launch:
    run_seq: int
    line_no: int
    args: dict[str, Any] | None
    redacted: str
    """The ``server_args`` line's text, its secrets redacted."""
    args_json: str | None
    """The arguments, their secrets redacted, as JSON (None without arguments)."""


@dataclass
class ParsedChunk:
    batches: pl.DataFrame
    events: pl.DataFrame
    http: pl.DataFrame
    rejects: pl.DataFrame
    runs: pl.DataFrame
    """Per ``run_seq``: first/last timestamp and era feature flags."""
    launches: list[Launch] = field(default_factory=list)
    continuation: str | None = None
    """Text continuing the error event left open by the previous block."""
    noise: int = 0
    requests: pl.DataFrame = field(default_factory=pl.DataFrame)
    """``request_metrics`` rows from request-log lines (``run_seq``, ``line_no``, ...)."""
    phases: pl.DataFrame = field(default_factory=pl.DataFrame)
    """``phase_timings`` rows from ``phase_timings:`` lines."""
    unread: int = 0
    """Lines that look like records (a batch head, a throughput) but were not read."""
    prefixes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=PREFIX_SCHEMA))
    """``line_prefixes`` rows: the outer prefix of record lines found by SGLang's signature
    (``run_seq``, ``line_no``, ``prefix``, ``outer_ts``, ``service``, ``pid``)."""


def _roll_days(df: pl.DataFrame, state: LogState, fast: pl.DataFrame | None = None,
               files: Files | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Add a day to time-only stamps each time the clock runs backwards by > 12 h.

    ``fast`` (``line_no``, ``s``: seconds of day) are time-only lines the fast lane read;
    they take part in the sequence, and their days come back as ``(line_no, days)``."""
    secs = (
        pl.col("ts").dt.hour().cast(pl.Int64) * 3600
        + pl.col("ts").dt.minute().cast(pl.Int64) * 60
        + pl.col("ts").dt.second().cast(pl.Int64)
    ).cast(pl.Float64)
    only = df.filter(pl.col("ts_raw").is_not_null() & pl.col("ts").is_not_null()).select(
        "line_no", secs.alias("s"))
    if fast is not None and fast.height:
        only = pl.concat([only, fast.select("line_no", "s")]).sort("line_no")
    days = _day_numbers(only, state, files)
    if days is None:
        return df, None
    return df.join(days, on="line_no", how="left", maintain_order="left").with_columns(
        pl.when(pl.col("days").is_not_null())
        .then(pl.col("ts") + pl.duration(days=pl.col("days")))
        .otherwise(pl.col("ts"))
        .alias("ts")
    ).drop("days"), days


def _day_numbers(only: pl.DataFrame, state: LogState, files: Files | None = None
                 ) -> pl.DataFrame | None:
    """``(line_no, days)`` of time-only stamps (``line_no``, ``s``: seconds of day, in line
    order): a day more each time the clock runs backwards by > 12 h.  None: there are none
    (or none that is a valid time).  ``files``: each file's days on their own."""
    if only.height == 0:
        return None
    if files is not None:
        only = only.with_columns(files.index(only["line_no"]))
        before = pl.col("s").shift(1).over("file")
        only = only.with_columns(
            (pl.col("s") < before.fill_null(pl.col("s")) - 43200).cast(pl.Int64).cum_sum()
            .over("file").alias("days"))
        for file, s, days in only.group_by("file").agg(
                pl.col("s").last(), pl.col("days").last()).iter_rows():
            files.states[file].prev_time_s = float(s)
            files.states[file].day_offset = int(days)
        return only.select("line_no", "days")
    prev = only["s"].shift(1, fill_value=state.prev_time_s if state.prev_time_s is not None
                           else only["s"][0])
    only = only.with_columns(((pl.col("s") < prev - 43200).cast(pl.Int64).cum_sum()
                              + state.day_offset).alias("days"))
    state.prev_time_s = float(only["s"][-1])
    state.day_offset = int(only["days"][-1])
    return only.select("line_no", "days")


@dataclass
class PreparedChunk:
    """The part of parsing that needs no state: it can run ahead, on another thread."""

    lines: pl.DataFrame
    batches: pl.DataFrame
    rejects: pl.DataFrame
    http: pl.DataFrame
    fast: fastlane.Lanes | None = None
    """Rows the C fast lane read (``lines`` then holds only the other lines)."""
    requests: Mapping[int, tuple[dict[str, Any] | None, str | None]] | None = None
    """Request records already read (:func:`records.request_row` by ``row``: by a worker
    process, :class:`logpipe.engines.sglang.logparser.SGLangLogParser`)."""
    events: Mapping[int, EventRead] | None = None
    """Event lines already read (:func:`read_event` by ``row``, likewise)."""


def prepare_chunk(text: str, first_line_no: int, fallback_date: str,
                  line_nos: np.ndarray | None = None) -> PreparedChunk:
    """Prefixes, timestamps, line kinds, batch and HTTP fields of complete lines (``text``
    ends with ``\\n``; ``first_line_no`` is 1-based, or ``line_nos`` numbers each line).
    Pure: polars releases the GIL, so the ingest prepares the next block while it finishes
    and writes this one."""
    raw = pl.Series("raw", text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"))
    df = pl.DataFrame([raw]).with_row_index("row")
    if line_nos is None:
        df = df.with_columns((pl.col("row").cast(pl.Int64) + first_line_no).alias("line_no"))
    else:
        df = df.with_columns(pl.Series("line_no", line_nos, dtype=pl.Int64))
    df = classify(timestamps(split_prefixes(df), fallback_date))
    batches, rejects = parse_batches(df)
    return PreparedChunk(df, batches, rejects, parse_http(df))


def prepare_block(data: bytes | bytearray, first_line_no: int, fallback_date: str
                  ) -> PreparedChunk:
    """:func:`prepare_chunk` of a block of bytes, with the plain batch and access lines read
    by the C fast lane when it is built (same rows, several times faster)."""
    if not fastlane.enabled():
        return prepare_chunk(data.decode("utf-8", errors="replace"), first_line_no,
                             fallback_date)
    lanes = fastlane.split_block(data, first_line_no, fallback_date)
    if not lanes.slow_text:  # the usual block of a long log: nothing for the slow parser
        none = pl.DataFrame()
        return PreparedChunk(none, none, none, none, fast=lanes)
    prepared = prepare_chunk(lanes.slow_text, first_line_no, fallback_date,
                             line_nos=lanes.slow_line_nos)
    prepared.fast = lanes
    return prepared


BATCH_COLUMNS = ("run_seq", "line_no", "ts", "ts_raw", "kind", "dp_rank", "tp_rank",
                 "pp_rank", "ep_rank", "rank_tag", "forward_iter", "mixed_chunk", *COLUMNS,
                 "extra")
"""The columns of a parsed block's ``batches``, in order."""
HTTP_COLUMNS = ("run_seq", "line_no", "ts", "client", "method", "path", "protocol", "status",
                "status_text")


def parse_chunk(text: str, first_line_no: int, state: LogState, fallback_date: str,
                keep_text: bool = False) -> ParsedChunk:
    """Parse complete lines (``text`` ends with ``\\n``); ``first_line_no`` is 1-based.
    ``keep_text`` keeps the prompt and output text of request-log lines.

    ``state`` is updated in place to describe the position after this block.
    """
    return finish_chunk(prepare_chunk(text, first_line_no, fallback_date), state, keep_text)


def finish_chunk(prepared: PreparedChunk, state: LogState, keep_text: bool = False,
                 files: Files | None = None) -> ParsedChunk:
    """The part of parsing that follows the file: day roll-over of time-only stamps, the
    run each line belongs to, tracebacks continued across blocks.  Updates ``state``.

    ``files``: the block is several new files (:class:`Files`; ``state`` is unused,
    each file's is in ``files.states``): runs are numbered ``file * RUN_STRIDE +
    run_seq`` and line numbers are the block's (:func:`split_files` gives each file's)."""
    if prepared.fast is not None and not prepared.fast.slow_text:
        if files is not None:
            raise ValueError("files without a slow line: parse them one by one")
        return _finish_fast_only(prepared.fast, state, keep_text, prepared.requests)
    fast_times = fastlane.time_only(prepared.fast) if prepared.fast is not None else None
    df = prepared.lines
    if files is not None:
        state = LogState()
        df = df.with_columns(files.index(df["line_no"]))
    df, days = _roll_days(df, state, fast_times, files)
    batches, rejects, http = prepared.batches, prepared.rejects, prepared.http
    run_before = state.run_seq

    # Which run each line belongs to: a server_args line starts a launch.
    is_launch = (pl.col("event_kind") == "server_args").fill_null(False).cast(pl.Int64)
    launches_before = is_launch.cum_sum()
    if files is not None:  # each file from its start: as ``run_has_args`` False below
        run_seq = (pl.max_horizontal(launches_before.over("file") - 1, pl.lit(0))
                   + pl.col("file") * RUN_STRIDE)
    elif state.run_has_args:
        run_seq = launches_before + state.run_seq
    else:
        run_seq = pl.max_horizontal(launches_before - 1, pl.lit(0)) + state.run_seq
    kinds = (
        batches.select("row", pl.lit("batch").alias("cat"))
        .vstack(rejects.select("row", pl.lit("reject").alias("cat")))
        .vstack(http.select("row", pl.lit("http").alias("cat")))
    )
    df = df.join(kinds, on="row", how="left", maintain_order="left").with_columns(
        run_seq.alias("run_seq"),
        pl.when(pl.col("cat").is_not_null()).then(pl.col("cat"))
        .when(is_record(pl.col("msg"))).then(pl.lit("record"))
        .when(pl.col("event_kind").is_not_null()).then(pl.lit("event"))
        .alias("cat"),
    )
    record_lines = df.filter(pl.col("cat") == "record").select("row", "line_no", "run_seq",
                                                                 "msg")
    fast_records = prepared.fast is not None and bool(prepared.fast.records)
    if fast_records:  # (both lanes' records read as one, in line order)
        assert prepared.fast is not None
        record_lines = pl.concat([record_lines, _fast_records(
            prepared.fast, df.height, df, run_before, files)]).sort("line_no")
    requests, phase_rows, record_rejects = parse_records(record_lines, keep_text,
                                                         prepared.requests)
    # ``row`` indexes this block's slow lines (which lines those are depends on the lane);
    # the records keep their line numbers
    requests = requests.drop("row", strict=False)
    phase_rows = phase_rows.drop("row", strict=False)
    # Continuations: unprefixed, unrecognised lines belong to the preceding leader line.
    leader = (pl.col("has_prefix") | pl.col("cat").is_not_null()
              | pl.col("msg").str.contains(ERROR_START))
    df = df.with_columns(leader.alias("leader")).with_columns(
        pl.col("leader").cast(pl.Int64).cum_sum().alias("grp")
    )
    if files is not None:  # a file's lines before its first leader continue nothing
        df = df.with_columns(
            pl.when(pl.col("leader").cast(pl.Int64).cum_sum().over("file") == 0)
            .then(pl.lit(0, pl.Int64)).otherwise(pl.col("grp")).alias("grp"))
    leaders = df.filter(pl.col("leader")).select(
        "grp", pl.col("event_kind").alias("leader_kind"), pl.col("line_no").alias("leader_line")
    )
    df = df.join(leaders, on="grp", how="left", maintain_order="left")
    follow = df.filter(~pl.col("leader"))
    attaches = ((pl.col("leader_kind") == "error")
                | (pl.col("grp") == 0) & pl.lit(state.open_error_line is not None))
    attached = follow.filter(attaches)
    noise = len(follow) - len(attached)
    if files is not None:
        files.noise = files.counts(follow.filter(~attaches.fill_null(False)))

    continuation = None
    head_cont = attached.filter(pl.col("grp") == 0)
    if len(head_cont):
        continuation = "\n".join(head_cont["raw"].str.replace_all("\r", "").to_list())
    cont_text = (
        attached.filter(pl.col("grp") > 0)
        .group_by("grp")
        .agg(pl.col("raw").str.replace_all("\r", "").str.join("\n").alias("cont"))
    )

    # Events: few lines, so attrs are built in Python.
    ev = (
        df.filter(pl.col("cat") == "event")
        .join(cont_text, on="grp", how="left", maintain_order="left")
        .select("row", "line_no", "ts", "run_seq", pl.col("event_kind").alias("kind"),
                "msg", "cont", "ts_raw", *(["file"] if files is not None else []))
    )
    launches: list[Launch] = []
    attrs: list[str] = []
    messages: list[str] = []
    event_kinds: list[str] = []
    interrupted = _interrupted(ev["kind"].to_list(), ev["cont"].to_list(),
                               ev["file"].to_list() if files is not None else None)
    read = prepared.events or {}
    for i, (row, kind, msg, cont, line_no, rseq) in enumerate(zip(
        ev["row"], ev["kind"], ev["msg"], ev["cont"], ev["line_no"], ev["run_seq"],
        strict=True
    )):
        if kind == "error" and cont:
            a = event_attrs(kind, msg)
            tail = [t.strip() for t in cont.splitlines() if t.strip()
                    and not t.strip().startswith(_CHAINED)]
            if tail:
                a["exception"] = tail[-1][:500]
            if i in interrupted:
                # the traceback a Python process prints when SIGINT stops it (Ctrl-C,
                # `logpipe launch` stopping the server): the shutdown, not a failure
                kind = "shutdown"
            attrs.append(json.dumps(a, default=str))
            messages.append((msg + "\n" + cont)[:MESSAGE_LIMIT])
        else:  # (read by the worker, or now)
            attrs_json, args, redacted, args_json = read.get(row) or read_event(kind, msg)
            attrs.append(attrs_json)
            if kind == "server_args":
                launches.append(Launch(rseq, line_no, args, redacted or "", args_json))
                messages.append((redacted or "")[:MESSAGE_LIMIT])
            else:
                messages.append((msg + ("\n" + cont if cont else ""))[:MESSAGE_LIMIT])
        event_kinds.append(kind)
    events = ev.select("line_no", "ts", "run_seq").with_columns(
        pl.Series("kind", event_kinds, dtype=pl.String),
        pl.Series("message", messages, dtype=pl.String),
        pl.Series("attrs", attrs, dtype=pl.String),
    )

    # Batch rows with their prefix facts.
    line_facts = df.select("row", "line_no", "ts", "ts_raw", "run_seq", "dp_rank", "tp_rank",
                           "pp_rank", "ep_rank", pl.col("ranks").alias("rank_tag"))
    batches = line_facts.join(batches, on="row", how="inner", maintain_order="left").select(
        BATCH_COLUMNS)
    http = line_facts.join(http, on="row", how="inner", maintain_order="left").select(
        HTTP_COLUMNS)
    rejects = df.join(
        pl.concat([rejects.select("row", "reason"), record_rejects.select("row", "reason")]),
        on="row", how="inner", maintain_order="left").select(
        "run_seq", "line_no", "reason",
        pl.col("raw").str.replace_all("\r", "").str.slice(0, RAW_LIMIT).alias("raw"),
    )
    if fast_records and record_rejects.height:
        assert prepared.fast is not None
        rejects = pl.concat([rejects, _fast_record_rejects(prepared.fast, df.height,
                                                           record_rejects)])

    # Era features and time span per run (joined with batch kind for the predicates).
    feat = df.join(batches.select("line_no", pl.col("kind").alias("bkind")), on="line_no",
                   how="left", maintain_order="left")
    runs = era.feature_flags(feat, "run_seq").join(
        df.group_by("run_seq").agg(
            pl.col("ts").min().alias("first_ts"), pl.col("ts").max().alias("last_ts"),
            (pl.col("event_kind") == "profiling_start").any().alias("profiled"),
            pl.col("line_no").min().alias("first_line"),
        ),
        on="run_seq",
    )

    prefixes = outer_prefixes(df.filter(pl.col("cat").is_not_null()))
    unread_lines = df.filter(pl.col("cat").is_null()
                             & pl.col("msg").str.contains(RECORD_LIKE_RE))
    unread = unread_lines.height
    if files is not None:
        files.unread = files.counts(unread_lines)

    if prepared.fast is not None:
        batches, http, runs, outer = _merge_fast(prepared.fast, df, days, run_before, batches,
                                                 http, runs, files)
        if outer.height:
            prefixes = pl.concat([prefixes, outer])

    # Carry state forward.
    if files is not None:
        _carry_files(files, df, launches, prepared.fast)
    elif len(df):
        last = df.tail(1)
        state.run_seq = int(last["run_seq"][0])
        state.run_has_args = state.run_has_args or bool(launches)
        last_leader = df.filter(pl.col("leader")).tail(1)
        if len(last_leader):
            state.open_error_line = (
                int(last_leader["line_no"][0])
                if last_leader["event_kind"][0] == "error" else None
            )
        state.lines = int(last["line_no"][0])
    if files is None and prepared.fast is not None and prepared.fast.ends_fast:
        _past_fast_end(state, prepared.fast)
    return ParsedChunk(batches=batches, events=events, http=http, rejects=rejects, runs=runs,
                       launches=launches, continuation=continuation, noise=noise,
                       requests=requests, phases=phase_rows, prefixes=prefixes,
                       unread=unread)


PREFIX_SCHEMA: dict[str, pl.DataType] = {
    "run_seq": pl.Int64(), "line_no": pl.Int64(), "prefix": pl.String(),
    "outer_ts": pl.Datetime("us"), "outer_ts_utc": pl.Boolean(), "service": pl.String(),
    "pid": pl.Int64()}


_CHAINED = ("During handling of the above exception", "The above exception was the direct")


def _interrupted(kinds: list[str], conts: list[str | None],
                 files: list[int] | None = None) -> set[int]:
    """Indexes of error events that are a KeyboardInterrupt traceback, or a traceback
    chained into one ("During handling of the above exception..."); ``files``: the file
    of each event (a traceback is chained only to one of its own file)."""
    out: set[int] = set()
    nxt = False
    for i in range(len(kinds) - 1, -1, -1):
        if files is not None and i + 1 < len(kinds) and files[i] != files[i + 1]:
            nxt = False
        lines = [t.strip() for t in (conts[i] or "").splitlines() if t.strip()]
        if kinds[i] != "error" or not lines:
            nxt = False
            continue
        if lines[-1] == "KeyboardInterrupt" or (lines[-1].startswith(_CHAINED) and nxt):
            out.add(i)
            nxt = True
        else:
            nxt = False
    return out


def outer_prefixes(lines: pl.DataFrame) -> pl.DataFrame:
    """What the outer prefix of each line says (lines whose ``outer`` is set): the text,
    a stamp (UTC when it names its zone; a syslog stamp takes the year of SGLang's), a
    compose service, a pid.  A prefix is read once for the lines that repeat it one after
    another (a syslog prefix repeats on every line of its second: reading every line took
    0.76 s of a 256 MB journald log's 1.7 s parse, 0.48 s now)."""
    if "outer" not in lines.columns:
        return pl.DataFrame(schema=PREFIX_SCHEMA)
    rows = lines.filter(pl.col("outer").is_not_null() & (pl.col("outer") != ""))
    if rows.height == 0:
        return pl.DataFrame(schema=PREFIX_SCHEMA)
    # consecutive lines with the same prefix and the same year of SGLang's stamp (which a
    # syslog stamp takes) read as one: the first of each such stretch is read
    year = pl.col("ts").dt.year()
    new = ((pl.col("outer") != pl.col("outer").shift())
           | year.ne_missing(year.shift())).fill_null(True)
    rows = rows.select("run_seq", "line_no", "outer", year.alias("_year"),
                       (new.cum_sum() - 1).alias("_stretch"), new.alias("_first"))
    stamp = pl.col("outer").str.extract(OUTER_TS_RE, 1)
    iso = stamp.str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
    zoned = iso.str.contains(r"(Z|[+-]\d{2}:?\d{2})$")
    parsed = (
        pl.when(zoned).then(
            iso.str.replace(r"Z$", "+00:00").str.replace(r"(\.\d{6})\d+", "$1")
            .str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", time_unit="us", strict=False)
            .dt.convert_time_zone("UTC").dt.replace_time_zone(None))
        .otherwise(pl.coalesce(
            iso.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False),
            pl.concat_str([pl.col("_year").cast(pl.String), pl.lit(" "), stamp])
            .str.to_datetime("%Y %b %d %H:%M:%S", time_unit="us", strict=False)))
    )
    pid = pl.col("outer").str.extract_groups(PID_RE)
    read = rows.filter(pl.col("_first")).select(
        parsed.alias("outer_ts"), zoned.fill_null(False).alias("outer_ts_utc"),
        pl.col("outer").str.extract(SERVICE_RE, 1).alias("service"),
        pl.coalesce(pid.struct.field("1"), pid.struct.field("2")).cast(pl.Int64, strict=False)
        .alias("pid"),
    )
    return pl.concat([rows.select("run_seq", "line_no", pl.col("outer").alias("prefix")),
                      read[rows["_stretch"]]], how="horizontal")


def _finish_fast_only(lanes: fastlane.Lanes, state: LogState, keep_text: bool = False,
                      read: Mapping[int, tuple[dict[str, Any] | None, str | None]] | None
                      = None) -> ParsedChunk:
    """:func:`finish_chunk` of a block whose every line the fast lane read (the usual block
    of a long log): no launch, event or continuation is in it, so its rows are in the run
    the block began in, and the slow parser's tables stay empty but for the request
    records the lane read (``read``: those read already, by row)."""
    days = _day_numbers(fastlane.time_only(lanes), state)
    batches, http, runs, outer = _merge_fast(lanes, None, days, state.run_seq, None, None,
                                             None)
    empty = _no_slow_rows()
    requests, rejects = empty["requests"], empty["rejects"]
    if lanes.records:
        requests, _, record_rejects = parse_records(
            _fast_records(lanes, 0, None, state.run_seq, None), keep_text, read)
        requests = requests.drop("row", strict=False)
        if record_rejects.height:
            rejects = _fast_record_rejects(lanes, 0, record_rejects)
    _past_fast_end(state, lanes)
    return ParsedChunk(batches=batches, events=empty["events"], http=http,
                       rejects=rejects, runs=runs, requests=requests,
                       phases=empty["phases"], prefixes=outer)


def _past_fast_end(state: LogState, lanes: fastlane.Lanes) -> None:
    """The block ends with fast rows, which the slow lines do not reach: the file is read
    to its last line, and no traceback is open past it (a fast row is a leader and no
    error).  The run does not change (launch lines are always slow)."""
    state.lines = lanes.last_line_no
    state.open_error_line = None


def _carry_files(files: Files, df: pl.DataFrame, launches: list[Launch],
                 fast: fastlane.Lanes | None) -> None:
    """Each file's state after its lines, as :func:`finish_chunk` leaves one file's: its
    last line read, its last run, whether it had a launch line, and its open traceback
    (none when its last line is a fast row)."""
    last_run = dict(df.group_by("file").agg(pl.col("run_seq").last()).iter_rows())
    leaders = df.filter(pl.col("leader")).group_by("file").agg(
        pl.col("event_kind").last(), pl.col("line_no").last())
    open_error = {f: line for f, kind, line in leaders.iter_rows() if kind == "error"}
    last_slow = set(df["line_no"].to_list()) if fast is not None else set()
    launched = {launch.run_seq // RUN_STRIDE for launch in launches}
    for i, state in enumerate(files.states):
        start, end = int(files.starts[i]), int(files.ends[i])
        state.run_seq = int(last_run.get(i, i * RUN_STRIDE)) - i * RUN_STRIDE
        state.run_has_args = i in launched
        state.lines = end - start + 1
        ends_fast = fast is not None and end not in last_slow
        line = open_error.get(i)
        state.open_error_line = (None if ends_fast or line is None
                                 else int(line) - start + 1)


def split_files(chunk: ParsedChunk, files: Files) -> list[ParsedChunk]:
    """:func:`finish_chunk`'s rows of several files, by file, numbered as each file's
    (line numbers from 1, runs from 0): each file's as if it had been parsed alone."""
    n = len(files.starts)
    offsets = pl.Series("offset", files.starts - 1, dtype=pl.Int64)

    def by_file(frame: pl.DataFrame) -> list[pl.DataFrame]:
        if frame.height == 0 or "line_no" not in frame.columns:
            return [frame.clear()] * n
        idx = files.index(frame["line_no"])
        local = frame.with_columns(
            pl.col("line_no") - offsets.gather(idx),
            *([pl.col("run_seq") - idx * RUN_STRIDE] if "run_seq" in frame.columns else []))
        parts = local.with_columns(idx).partition_by("file", as_dict=True, include_key=False)
        empty = frame.clear()
        return [parts.get((i,), empty) for i in range(n)]

    tables = {name: by_file(getattr(chunk, name))
              for name in ("batches", "events", "http", "rejects", "requests", "phases",
                           "prefixes")}
    run_file = (chunk.runs["run_seq"] // RUN_STRIDE).alias("file")
    runs = chunk.runs.with_columns(
        pl.col("run_seq") - run_file * RUN_STRIDE,
        pl.col("first_line") - offsets.gather(run_file), run_file)
    run_parts = runs.partition_by("file", as_dict=True, include_key=False)
    launches: list[list[Launch]] = [[] for _ in range(n)]
    for launch in chunk.launches:
        i = launch.run_seq // RUN_STRIDE
        launches[i].append(Launch(launch.run_seq - i * RUN_STRIDE,
                                  launch.line_no - int(files.starts[i]) + 1,
                                  launch.args, launch.redacted, launch.args_json))
    out = []
    for i in range(n):
        out.append(ParsedChunk(
            batches=tables["batches"][i], events=tables["events"][i],
            http=tables["http"][i], rejects=tables["rejects"][i],
            runs=run_parts.get((i,), runs.clear()).sort("run_seq"), launches=launches[i],
            noise=files.noise[i], requests=tables["requests"][i],
            phases=tables["phases"][i], unread=files.unread[i],
            prefixes=tables["prefixes"][i]))
    return out


@lru_cache(maxsize=1)
def _no_slow_rows() -> dict[str, pl.DataFrame]:
    """The slow parser's tables of a block with none of its lines: empty, typed as it types
    them (found once, by parsing one empty line)."""
    chunk = finish_chunk(prepare_chunk("\n", 1, "2000-01-01"), LogState())
    return {name: getattr(chunk, name).clear()
            for name in ("events", "rejects", "requests", "phases", "prefixes")}


def _run_seqs(frame: pl.DataFrame, df: pl.DataFrame | None, run_before: int,
              files: Files | None) -> pl.DataFrame:
    """``frame`` (fast rows, ``line_no`` ascending) with ``run_seq``: the run of the slow
    line before each (``df``'s, with ``run_seq``; launch lines are always slow), else the
    run the block began in (``files``: its file's first run)."""
    anchors = df.select("line_no", "run_seq") if df is not None else None
    # the usual block starts no launch: every fast row is in the run the block began in
    if files is None and (anchors is None or anchors.height == 0 or (
            anchors["run_seq"].min() == run_before and anchors["run_seq"].max() == run_before)):
        return frame.with_columns(pl.lit(run_before, dtype=pl.Int64).alias("run_seq"))
    if files is not None:
        assert df is not None
        return frame.with_columns(files.index(frame["line_no"])).join_asof(
            df.select("line_no", "run_seq", "file"), on="line_no", by="file",
            strategy="backward", check_sortedness=False).with_columns(
            pl.col("run_seq").fill_null(pl.col("file") * RUN_STRIDE)).drop("file")
    assert anchors is not None
    return frame.join_asof(anchors, on="line_no", strategy="backward").with_columns(
        pl.col("run_seq").fill_null(run_before))


def _fast_records(lanes: fastlane.Lanes, first_row: int, df: pl.DataFrame | None,
                  run_before: int, files: Files | None) -> pl.DataFrame:
    """The request records the C lane read, as :func:`records.parse_records` reads a block's
    record lines: ``row`` (from ``first_row``: past the slow lines' rows), ``line_no``,
    ``run_seq`` (:func:`_run_seqs`) and ``msg``."""
    rows = lanes.quiet.filter(pl.col("record")).select("line_no").with_columns(
        pl.Series("msg", lanes.records, dtype=pl.String),
        (pl.int_range(pl.len(), dtype=pl.UInt32) + first_row).alias("row"))
    return _run_seqs(rows, df, run_before, files).select("row", "line_no", "run_seq", "msg")


def _fast_record_rejects(lanes: fastlane.Lanes, first_row: int, rejects: pl.DataFrame
                         ) -> pl.DataFrame:
    """``rejects`` (of :func:`records.parse_records`) of the records the C lane read (rows
    from ``first_row``) as ``rejects`` rows: ``run_seq``, ``line_no``, ``reason`` and the
    line's text (``raw``, cut as the polars parser cuts it)."""
    mine = rejects.filter(pl.col("row") >= first_row)
    at = lanes.quiet.filter(pl.col("record")).select("line_off", "msg_off", "msg_len")
    raw = [bytes(lanes.data[at["line_off"][i]:at["msg_off"][i] + at["msg_len"][i]])
           .decode()[:RAW_LIMIT] for i in (mine["row"] - first_row).to_list()]
    return mine.select("run_seq", "line_no", "reason",
                       pl.Series("raw", raw, dtype=pl.String))


def _merge_fast(lanes: fastlane.Lanes, df: pl.DataFrame | None, days: pl.DataFrame | None,
                run_before: int, batches: pl.DataFrame | None, http: pl.DataFrame | None,
                runs: pl.DataFrame | None, files: Files | None = None
                ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Add the fast lane's rows: each takes the run of the slow line before it (launch
    lines are always slow), time-only stamps their midnight roll-over, and their era
    features and time span join the runs.  ``df``, ``batches``, ``http`` and ``runs``
    None: the slow parser had no line of the block.  Returns the batch, HTTP and run
    rows, and the ``line_prefixes`` rows of fast lines with an outer prefix.  ``files``:
    a row before its file's first slow line is in its file's first run."""
    # the usual block with time-only stamps does not cross midnight: one day for all
    day, same_day = 0, True
    if days is not None:
        first, last = days.select(pl.col("days").min().alias("first"),
                                  pl.col("days").max().alias("last")).row(0)
        day, same_day = int(first), first == last

    def with_runs(frame: pl.DataFrame) -> pl.DataFrame:
        if days is not None and not same_day:
            frame = frame.join(days, on="line_no", how="left", maintain_order="left")
            frame = frame.with_columns(
                (pl.col("ts") + pl.duration(days=pl.col("days").fill_null(0)))
                .alias("ts")).drop("days")
        elif day:  # (``days`` numbers exactly the time-only rows of both lanes)
            frame = frame.with_columns(
                pl.when(~pl.col("dated") & pl.col("stamped"))
                .then(pl.col("ts") + pl.duration(days=day)).otherwise(pl.col("ts")).alias("ts"))
        return _run_seqs(frame, df, run_before, files)

    fb, fh = with_runs(lanes.batches), with_runs(lanes.http)
    # quiet rows (a request log's ``Receive:`` and ``Finish:`` lines) join their runs'
    # spans and era features (their prefixes'); the records' rows are read above
    fq = with_runs(lanes.quiet) if lanes.quiet.height else None
    reps = pl.concat([fastlane.representatives(fb, lanes.data, bkind=True),
                      fastlane.representatives(fh, lanes.data, bkind=False),
                      *([fastlane.representatives(fq, lanes.data, bkind=False)]
                        if fq is not None else [])])
    if reps.height or runs is None:
        span = pl.concat([f.select("run_seq", "ts", "line_no")
                          for f in (fb, fh, fq) if f is not None]).group_by("run_seq").agg(
            pl.col("ts").min().alias("first_ts"), pl.col("ts").max().alias("last_ts"),
            pl.lit(False).alias("profiled"), pl.col("line_no").min().alias("first_line"))
        fast_runs = era.feature_flags(reps, "run_seq").join(span, on="run_seq")
        if runs is None:
            runs = fast_runs.sort("run_seq")
        else:
            names = [name for name, _, _ in era.FEATURES]
            runs = pl.concat([runs, fast_runs.select(runs.columns)]).group_by(
                "run_seq", maintain_order=True).agg(
                *[pl.col(n).any() for n in names],
                pl.col("first_ts").min(), pl.col("last_ts").max(), pl.col("profiled").any(),
                pl.col("first_line").min(),
            ).select(runs.columns).sort("run_seq")
    # (a request record is read, so its line's prefix is kept; a receipt is not)
    records = [fq.filter(pl.col("record"))] if fq is not None else []
    wrapped = pl.concat([f.select("run_seq", "line_no", "ts", "outer").filter(
        pl.col("outer").is_not_null()) for f in (fb, fh, *records)])
    return (_merged(batches, fb, BATCH_COLUMNS), _merged(http, fh, HTTP_COLUMNS), runs,
            outer_prefixes(wrapped))


def _merged(slow: pl.DataFrame | None, fast: pl.DataFrame, columns: tuple[str, ...]
            ) -> pl.DataFrame:
    """Both lanes' rows of one table: the slow lane's, then the fast lane's (rows are
    stored unordered; every reader orders by ``line_no``)."""
    fast = fast.select(columns)
    if slow is None or slow.height == 0:
        return fast
    return pl.concat([slow, fast], rechunk=False)
