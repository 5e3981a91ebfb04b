"""The C fast lane in front of the polars log parser.

:func:`split_block` hands a block of complete lines to ``_fastlane`` (one pass in C,
``logpipe/engines/sglang/_fastlane.c``), which reads the plain batch lines and uvicorn
access lines that make up nearly all of a long log (also behind ``docker logs
--timestamps`` and behind an outer prefix no known wrapper explains, journald's or a
compose service's, whose text comes back in ``outer`` for ``line_prefixes``), and a
request log's lines (``Receive:``, whose stamps alone count, and ``Finish:``, the request
records, whose text the records' reader reads: :data:`ANY_LINE`), and returns everything
else as text for the polars parser.  The contract: for every line it takes,
the fast lane produces exactly the row the polars parser would (``tests/test_fastlane.py``
parses every sample and generated logs both ways and compares the tables); whenever a
line has anything unusual in it, it leaves the line to the polars parser.

The extension is optional: without a C compiler at install time, :data:`AVAILABLE` is
false and every line takes the polars path.  ``LOGPIPE_FASTLANE=0`` turns it off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from logpipe.engines.clane import columns_frame
from logpipe.engines.sglang.batches import CANONICAL, COLUMNS, GRAPH_SUFFIX, RECORD_LIKE_PHRASES
from logpipe.engines.sglang.era import ANY_LINE_PHRASES
from logpipe.engines.sglang.events import UNANCHORED_EVENT_PHRASES
from logpipe.lanes import lane_enabled
from logpipe.sources.bench import CONSOLE_BANNER

try:
    from logpipe.engines.sglang import _fastlane  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler
    _fastlane = None

_SLOT_TYPES = {"int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}


def _keys(lane: Any) -> tuple[tuple[bytes, int], ...]:
    """The printed keys of a batch line as the C lane reads them: ``(key, slot)`` pairs
    from :data:`batches.CANONICAL`, the one table of both lanes.  Raises ``ValueError``
    where the lane's slots (``CANON_SLOTS``: column and type) are not the table's columns
    (an extension built from another version of the source)."""
    slots = {name: i for i, (name, _) in enumerate(lane.CANON_SLOTS)}
    for name, kind in lane.CANON_SLOTS:
        if COLUMNS.get(name) != _SLOT_TYPES[kind]:
            raise ValueError(f"the C lane's column {name} ({kind}) is not batches.COLUMNS'")
    keys = []
    for printed, (column, dtype) in CANONICAL.items():
        if column not in slots or COLUMNS[column] != dtype:
            raise ValueError(f"batches.CANONICAL's {printed!r} -> {column} has no C slot")
        keys.append((printed.encode(), slots[column]))
    if "cuda_graph" not in slots:
        raise ValueError("the C lane has no graph flag")
    return tuple(keys)


UNAVAILABLE = "built without a C compiler" if _fastlane is None else ""
"""Why the C lane is off ("" where it is on)."""
_KEYS: tuple[tuple[bytes, int], ...] = ()
_GRAPH_SUFFIX = GRAPH_SUFFIX.encode()
if _fastlane is not None:
    try:
        _KEYS = _keys(_fastlane)
    except (ValueError, AttributeError, KeyError) as exc:  # every line takes polars then
        UNAVAILABLE, _fastlane = f"the built extension does not match the source: {exc}", None

AVAILABLE = _fastlane is not None
# a line holding a benchmark's console banner is always left to the polars parser, so the
# ingest looks for summaries printed into a server log in the slow lines only
_PHRASES = tuple(p.encode() for p in (*UNANCHORED_EVENT_PHRASES, CONSOLE_BANNER))
ANY_LINE = tuple(p.lower().encode() for p in ANY_LINE_PHRASES)
"""A request log's lines are the C lane's, as quiet rows (their stamps join their runs'
spans, their prefixes their era features): its ``Receive:`` lines (kilobytes of a request's
repr each, which no table reads) and its ``Finish:`` lines (the request records, whose text
the lane hands to the records' reader, :func:`records.parse_records`), unless a line says
one of these (in any case: what the era features read in any message) or an event phrase;
a receipt also unless it says one of :data:`RECORD_LIKE` (the polars parser counts such a
line, not read).  Such a line, and any other, is the polars parser's."""
RECORD_LIKE = tuple(p.lower().encode() for p in RECORD_LIKE_PHRASES)


def enabled() -> bool:
    return AVAILABLE and lane_enabled()


def count_lines(data: bytes | bytearray) -> int:
    """The newlines in ``data``: memchr's vector loop in C where the extension is built
    (``bytes.count`` reads a byte at a time: ~1 s per GB on the ingest's main thread)."""
    return _fastlane.count_lines(data) if _fastlane is not None else data.count(b"\n")


@dataclass
class Lanes:
    """One block split between the lanes."""

    batches: pl.DataFrame
    """Fast batch rows: ``line_no``, the ``batches`` columns, ``shape``/``msg_off``/
    ``msg_len``/``ms_present``/``rank_tag`` for era features, and ``outer``: the text
    before SGLang's stamp that no known wrapper explains (journald, a compose service),
    null on most lines (both lanes' ``line_prefixes`` rows are made from it)."""
    http: pl.DataFrame
    quiet: pl.DataFrame
    """Quiet rows (``Receive:`` and ``Finish:`` lines): ``line_no``, the stamp columns,
    ``shape``/``msg_off``/``msg_len``/``rank_tag`` for era features (their prefix's), and
    ``record`` (a ``Finish:`` line), ``outer`` and ``line_off`` (the line's start)."""
    records: list[str]
    """The messages of the quiet rows that are records, in their order."""
    slow_text: str
    """The lines left to the polars parser, each ending in ``\\n``."""
    slow_line_nos: np.ndarray
    data: bytes | bytearray
    """The block (messages of representative lines are read from it)."""
    last_line_no: int
    """The number of the block's last line."""

    @property
    def ends_fast(self) -> bool:
        """The block's last line is a fast row (the slow lines do not reach it)."""
        return not (len(self.slow_line_nos) and self.slow_line_nos[-1] == self.last_line_no)


NO_STAMP = 16
"""``stamp`` of an access line printed without SGLang's prefix (uvicorn's own logger)."""

def _kept(cols: dict[str, tuple[bytes, bytes, bytes | None]], kinds: dict[str, str]
          ) -> pl.DataFrame:
    """The rows of one table the fast lane keeps (a row whose line it also handed on to the
    slow parser is not kept; most blocks have none, and then nothing is copied)."""
    table = columns_frame(cols, kinds)
    return table.filter(pl.col("keep") == 1) if b"\x00" in cols["keep"][0] else table


# the buffers' types, as the extension says
_BATCH_KINDS: dict[str, str] = dict(_fastlane.BATCH_COLUMNS) if _fastlane is not None else {}
_HTTP_KINDS: dict[str, str] = dict(_fastlane.HTTP_COLUMNS) if _fastlane is not None else {}
_QUIET_KINDS: dict[str, str] = dict(_fastlane.QUIET_COLUMNS) if _fastlane is not None else {}


def _stamp_columns(fallback_date: str, time_only: bool) -> list[pl.Expr]:
    """``ts``, ``ts_raw``, ``tod_s`` and the stamp flags of fast rows.  A time-only stamp
    takes ``fallback_date`` here; the midnight roll-over is added by the caller.
    ``time_only`` False: no row has a time-only stamp (each is dated or has none).
    ``ts_raw``, a time-only stamp's text, comes from the scan."""
    stamped = pl.col("stamp") != NO_STAMP
    dated = (pl.col("stamp") % 2) == 1
    digits = pl.col("stamp") // 2
    flags = [(stamped & (digits > 0)).alias("ms_present"), dated.alias("dated"),
             stamped.alias("stamped")]
    if not time_only:  # the usual case
        return [pl.when(stamped).then(pl.col("ts")).cast(pl.Datetime("us")).alias("ts"),
                pl.col("ts_raw"), pl.lit(None, pl.Float64).alias("tod_s"), *flags]
    tod = pl.col("ts") % 86_400_000_000
    base = int(pl.Series([fallback_date]).str.to_datetime("%Y-%m-%d", time_unit="us")
               .cast(pl.Int64)[0])
    return [
        pl.when(dated).then(pl.col("ts")).when(stamped).then(pl.col("ts") + base)
        .cast(pl.Datetime("us")).alias("ts"),
        pl.col("ts_raw"),
        pl.when(~dated & stamped).then((tod // 1_000_000).cast(pl.Float64)).alias("tod_s"),
        *flags,
    ]


def _any_time_only(cols: dict[str, tuple[bytes, bytes, bytes | None]]) -> bool:
    """Whether a row of the table (kept or not) has a time-only stamp (its date and
    seconds of day are computed then; dated rows, and rows without a stamp, need none)."""
    stamp = np.frombuffer(cols["stamp"][0], dtype=np.uint8)
    return bool((((stamp & 1) == 0) & (stamp != NO_STAMP)).any())


def split_block(data: bytes | bytearray, first_line_no: int, fallback_date: str) -> Lanes:
    """Split a block of complete lines (``first_line_no`` is the first line's number)."""
    assert _fastlane is not None
    out: dict[str, Any] = _fastlane.scan(data, _PHRASES, _KEYS, _GRAPH_SUFFIX, ANY_LINE,
                                         RECORD_LIKE)
    line_no = (pl.col("idx") + first_line_no).alias("line_no")
    fb, fh = _kept(out["batch"], _BATCH_KINDS), _kept(out["http"], _HTTP_KINDS)
    fq = _kept(out["quiet"], _QUIET_KINDS)
    stamp = _stamp_columns(fallback_date, _any_time_only(out["batch"]))
    batches = fb.select(
        line_no, *stamp[:2],
        pl.when(pl.col("kind") == 1).then(pl.lit("decode")).otherwise(pl.lit("prefill"))
        .alias("kind"),
        "dp_rank", "tp_rank", "pp_rank", "ep_rank", "rank_tag", "forward_iter",
        (pl.col("mixed_chunk") == 1).alias("mixed_chunk"),
        *((pl.col(c) == 1).alias(c) if dtype == pl.Boolean else pl.col(c)
          for c, dtype in COLUMNS.items()),
        "extra", "shape", "msg_off", "msg_len", "outer", *stamp[2:],
    )
    stamp = _stamp_columns(fallback_date, _any_time_only(out["http"]))
    http = fh.select(
        line_no, *stamp[:2], "client", "method", "path", "protocol",
        "status", "status_text", "shape", "msg_off", "msg_len", "rank_tag", "outer",
        *stamp[2:],
    )
    stamp = _stamp_columns(fallback_date, _any_time_only(out["quiet"]))
    quiet = fq.select(line_no, *stamp[:2], "shape", "msg_off", "msg_len", "rank_tag",
                      (pl.col("kind") == 2).alias("record"), "outer", "line_off", *stamp[2:])
    records = quiet.filter(pl.col("record"))
    msgs = [data[o:o + n].decode() for o, n in zip(records["msg_off"], records["msg_len"],
                                                   strict=True)]  # (plain ASCII lines)
    slow = out["slow"].decode("utf-8", errors="replace")
    nos = np.frombuffer(out["slow_idx"], dtype=np.int64) + first_line_no
    return Lanes(batches, http, quiet, msgs, slow, nos, data, first_line_no + out["lines"] - 1)


def time_only(lanes: Lanes) -> pl.DataFrame:
    """``line_no`` and seconds of day of the fast rows with a time-only stamp."""
    timed = ~pl.col("dated") & pl.col("stamped")
    return pl.concat([f.filter(timed).select("line_no", pl.col("tod_s").alias("s"))
                      for f in (lanes.batches, lanes.http, lanes.quiet)]).sort("line_no")


def representatives(frame: pl.DataFrame, data: bytes | bytearray, bkind: bool) -> pl.DataFrame:
    """One line per (run, shape) of fast rows (``frame`` has ``run_seq``), with the columns
    :data:`logpipe.engines.sglang.era.FEATURES` reads.  Lines of one shape differ only in
    their digits, which no era feature looks at, so the features of the representative are those of
    every line of its shape."""
    seqs = frame["run_seq"]
    one_run = not seqs.null_count() and seqs.min() == seqs.max()
    # the first line of each shape, in order (one run: by shape alone, ~5x cheaper)
    first = (pl.col("shape") if one_run else pl.struct("run_seq", "shape")).is_first_distinct()
    reps = frame.filter(first)
    msgs = [data[o:o + n].decode() for o, n in zip(reps["msg_off"], reps["msg_len"],
                                                    strict=True)]
    return reps.select(
        "run_seq", "ts", "line_no",
        pl.Series("msg", msgs, dtype=pl.String),
        pl.when(pl.col("stamped")).then(pl.lit("00:00:00")).alias("stime"),
        pl.when(pl.col("dated")).then(pl.lit("2000-01-01")).alias("sdate"),
        pl.when(pl.col("ms_present")).then(pl.lit("0")).alias("sms"),
        pl.col("rank_tag").alias("ranks"),
        (pl.col("kind") if bkind else pl.lit(None, pl.String)).alias("bkind"),
    )


def about() -> str:
    """The parser ``logpipe --version`` names: the C fast lane with polars, or polars
    alone and why."""
    return ("C fast lane + polars" if enabled() else
            "polars only (C fast lane not built)" if not AVAILABLE else
            "polars only (LOGPIPE_FASTLANE=0)")
