"""Ingest's judged counts, computed outside SQL: ``run_judged_counts_in``'s rows.

The steady-state rules are defined once, in SQL (``run_batch_states_in`` and
``run_judged_counts_in`` in ``schemas/views.sql``): what users query, and what every read
command falls back on.  Ingest keeps each changed run's counts (``run_judged_cache``), and
there DuckDB's window over a run's lines was a third of an ingest's CPU (0.43 CPU-s a run of
320,000 lines: a sort of every column of the lines by rank, nine aggregations).  Here the
same rows come from the lines' columns alone, read once: each line's reason (the first rule
that holds, in the SQL's order), whether it is past the warm-up and its step from the stamp
before, by a kernel, then the counts by polars' group-bys.  Two kernels give the same rows:
C (``logpipe/_classify.c``: a counting sort by partition and two walks of each, ~0.015 s a
run of 320,000 lines), built where a C compiler was at install, and numpy (the previous
row after a stable sort, the last decode line before a row by a running maximum of row
numbers, the reasons as masks: ~0.09 s), where it was not or ``LOGPIPE_FASTLANE=0``.  A
run of 320,000 lines: ~0.07 s in all with C, ~0.14 s with numpy.

An engine may read its lines for this from its stored table, texts as their label ids
(:attr:`logpipe.engines.Engine.coded_samples_sql`: SGLang's), ~4x faster than through
``run_samples_in``.

``tests/test_classify.py`` holds both kernels and both reads equal to the SQL, row for
row, on every run of the samples and on the samples' lines damaged at each rule's edge
(nulls, lines out of order, idle lines, NaN and -0.0, kinds and graphs flipped, ready and
profiling events added), so a change of a rule made in SQL alone fails it, and the two
kernels equal on random lines.
(Two lines of one partition with the same ``line_no`` and ``ts`` are in no defined order,
in SQL either; a log's lines never are.)
Passes of more than :data:`MAX_LINES` lines are left to the SQL, which spills to disk where
this holds the lines in memory.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import polars as pl
import pyarrow as pa

from logpipe.lanes import lane_enabled

try:  # (built where a C compiler was at install: numpy's kernel otherwise, the same rows)
    import logpipe._classify as _classify
except ImportError:  # pragma: no cover - a build without a compiler
    _classify = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from logpipe.store import Store

MAX_LINES = 650_000
"""Lines of a pass (one run, or several) up to which it is counted here: counting holds
~280 bytes a line at its peak beside the ~90 of the lines read (numpy's arrays and polars'
group-bys: 90 MB for a run of 320,000 lines), ~240 MB at most.  A bigger pass is counted
by the SQL macro, which spills to disk past ingest's memory bound."""

COUNTS = pl.Schema({"run_id": pl.String, "series": pl.String, "stratum": pl.Int64,
                    "value": pl.Float64, "label": pl.String, "n": pl.Int64})
"""The counts' columns, as ``run_judged_counts_in`` types them."""

REASONS = (
    "before the server was ready",
    "inside a profiled interval",
    "no running requests",
    "decode ran off the graph",
    "first decode line",
    "first stats window (its interval includes the start of the load)",
    "first decode after idle (window includes the idle time)",
    "first stats window after idle (its interval includes idle time)",
    "last stats window before idle (its requests ended inside it)",
    "first decode after a gap (window includes the idle time)",
)
"""``run_batch_states_in``'s reasons, in the order its CASE tests them."""

_SAMPLES_SQL = """
SELECT run_id, line_no, epoch_us(ts) AS us, kind, rank_tag, running_req, gen_throughput,
       input_throughput, accept_len, accept_rate, token_usage, cuda_graph
FROM run_samples_in(?, ?)
"""

_EVENTS_SQL = """
SELECT s.run_id, s.kind, s.line_no,
       CASE WHEN s.kind = 'profiling_start' THEN
         coalesce((SELECT min(e.line_no) FROM events e
                   WHERE e.run_id = s.run_id AND e.kind = 'profiling_stop'
                     AND e.line_no > s.line_no), 9223372036854775807) END AS stop_line
FROM events s WHERE s.kind IN ('ready', 'profiling_start') AND in_runs(s.run_id, ?, ?)
"""


class Lines(NamedTuple):
    """A pass's lines as :func:`read` gives them to :func:`count_lines`."""

    samples: pl.DataFrame
    """The columns of :data:`_SAMPLES_SQL`; of an engine's coded read (``labels``),
    ``kind_code`` and ``rank_tag_code`` for ``kind`` and ``rank_tag``, and ``run_id``
    only where the pass has several runs."""
    events: list[tuple]
    """Each ready line and profiling start of the runs (``run_id, kind, line_no,
    stop_line``)."""
    labels: dict[int, str] | None = None
    """A coded read's label texts by label id (None: the samples hold the texts)."""
    run_ids: tuple[str, ...] = ()
    """The pass's runs."""


def read(store: Store, run_ids: list[str]) -> Lines | None:
    """The lines and events of ``run_ids`` that :func:`count_lines` counts, read on the
    store's connection (inside its transaction); None past :data:`MAX_LINES` lines, which
    are left to the SQL (read batch by batch: what is held stops there).

    The runs of one engine that has a coded read
    (:attr:`logpipe.engines.Engine.coded_samples_sql`) are read by it: the same rows,
    their texts as label ids (a run of 320,000 SGLang lines: 0.011 s against 0.035 s
    through ``run_samples_in``'s label joins and union of the engines, and ~0.01 s less
    to count without the texts)."""
    one = len(run_ids) == 1
    rid, ids = (run_ids[0], None) if one else (None, list(run_ids))
    coded = _coded_sql(store, rid, ids)
    labels = None
    sql = _SAMPLES_SQL
    if coded is not None:
        # (one run's id is not read: a text of every row, the same)
        sql = f"SELECT * EXCLUDE (run_id) FROM ({coded})" if one else coded
        labels = store.label_texts()
    reader = store.con.sql(sql, params=[rid, ids]).to_arrow_reader(1 << 17)
    # (each batch to polars as it comes: the Arrow batches are not held beside it; polars,
    # not pyarrow.compute, reads them: the latter's import costs 0.1 s, its fill_null
    # imports pandas, 0.3 s of an ingest)
    frames, held = [], 0
    for batch in reader:
        held += batch.num_rows
        if held > MAX_LINES:
            return None
        frames.append(pl.DataFrame(batch))
    samples = (pl.concat(frames, rechunk=False) if frames
               else pl.DataFrame(pa.Table.from_batches([], schema=reader.schema)))
    return Lines(samples, store.all(_EVENTS_SQL, [rid, ids]), labels, tuple(run_ids))


def _coded_sql(store: Store, rid: str | None, ids: list[str] | None) -> str | None:
    """The coded read of the runs' engine, where they are all of one engine that has one
    (its ``?`` parameters: ``rid, ids``, as ``in_runs``)."""
    from logpipe.engines import engine_named

    names = store.all("SELECT DISTINCT engine FROM runs WHERE in_runs(run_id, ?, ?)",
                      [rid, ids])
    engine = engine_named(str(names[0][0])) if len(names) == 1 and names[0][0] else None
    if engine is None or engine.coded_samples_sql is None:
        return None
    return _sql_text(engine.coded_samples_sql)


@functools.cache
def _sql_text(spec: str) -> str:
    from logpipe.engines import resource

    return resource(spec).read_text()


def counts(store: Store, run_ids: list[str]) -> pl.DataFrame | None:
    """``run_judged_counts_in(NULL, run_ids)``'s rows (``run_id, series, stratum, value,
    label, n``), in no particular order; None past :data:`MAX_LINES` lines."""
    lines = read(store, run_ids)
    return None if lines is None else count_lines(*lines)


class _Rows(NamedTuple):
    """A pass's lines as the kernels read them, in the rows' own order (nulls filled, with
    masks where a null counts), and its runs' facts."""

    part: np.ndarray        # int64: the window's partition, (run, rank) coded, 0 .. parts-1
    parts: int
    line: np.ndarray        # int64 line_no (null: 0)
    us: np.ndarray          # int64 epoch_us(ts) (null: 0)
    no_ts: np.ndarray       # bool
    running: np.ndarray     # int64 running_req (null: 0)
    no_running: np.ndarray  # bool
    graph: np.ndarray       # bool cuda_graph (null: false)
    no_graph: np.ndarray    # bool
    kind: np.ndarray        # int8: DECODE, WINDOW, PREFILL or 0
    run: np.ndarray         # int32: the run's code
    ready: np.ndarray       # int64 a run: its first ready line (none: int64's max)
    has_ready: np.ndarray   # bool a run
    spans: np.ndarray       # int64 (k, 3): a profiled span's run, begin, end (open ends)


DECODE, WINDOW, PREFILL = 1, 2, 3
"""``_Rows.kind``'s codes (the kinds the rules name; any other kind is 0)."""

_NO_LINE = np.iinfo(np.int64).max


def count_lines(samples: pl.DataFrame, events: Iterable[tuple[str, str, int, int | None]],
                labels: Mapping[int, str] | None = None, run_ids: Sequence[str] = ()
                ) -> pl.DataFrame:
    """The counts of ``samples`` (the columns of :data:`_SAMPLES_SQL`, or of a coded read
    with its ``labels``: :class:`Lines`) given the runs' ``events`` (``run_id, kind,
    line_no, stop_line``: each ready and profiling start)."""
    n = samples.height
    if n == 0:
        return pl.DataFrame(schema=COUNTS)
    col = {name: samples[name] for name in samples.columns}
    if "run_id" in col:
        run_names, run = _codes(col["run_id"])
    else:  # (a coded read of one run)
        run_names, run = [run_ids[0]], np.zeros(n, dtype=np.int32)
    if labels is None:
        rank_names, rank = _codes(col["rank_tag"].fill_null(""))
        kind_names, kind_of = _codes(col["kind"])
    else:
        rank_names, rank = _labelled(col["rank_tag_code"], labels, "")
        kind_names, kind_of = _labelled(col["kind_code"], labels, None)
    part = run.astype(np.int64) * len(rank_names) + rank
    del rank
    # the kinds the rules name, by code; the lines' own kinds are counted by their index
    kind_code = np.zeros(len(kind_names), dtype=np.int8)
    for code, name in ((DECODE, "decode"), (WINDOW, "window"), (PREFILL, "prefill")):
        kind_code[[i for i, k in enumerate(kind_names) if k == name]] = code
    kind = kind_code[kind_of]

    def values(name: str, fill: object, dtype: type) -> tuple[np.ndarray, np.ndarray]:
        series = col[name]
        return (np.ascontiguousarray(series.fill_null(fill).to_numpy(), dtype=dtype),
                np.ascontiguousarray(series.is_null().to_numpy()))

    # the runs' facts: ready line, profiled spans
    run_code = {name: i for i, name in enumerate(run_names)}
    ready = np.full(len(run_names), _NO_LINE, dtype=np.int64)
    has_ready = np.zeros(len(run_names), dtype=bool)
    spans: list[tuple[int, int, int]] = []
    for run_id, event, event_line, stop in events:
        r = run_code.get(run_id)
        if r is None:
            continue
        if event == "ready":
            ready[r] = min(ready[r], event_line)
            has_ready[r] = True
        else:
            spans.append((r, event_line, stop if stop is not None else _NO_LINE))
    rows = _Rows(part, int(part.max()) + 1,
                 np.ascontiguousarray(col["line_no"].fill_null(0).to_numpy(), dtype=np.int64),
                 *values("us", 0, np.int64), *values("running_req", 0, np.int64),
                 *values("cuda_graph", False, np.bool_), kind, run, ready, has_ready,
                 np.array(spans, dtype=np.int64).reshape(-1, 3))
    reason, past_warmup, ts_step = (_classify_c if _c_kernel() else _classify_numpy)(rows)
    is_decode = (kind == DECODE) | (kind == WINDOW)
    lines = pl.DataFrame({
        "run": run,
        "kind": kind_of,
        "is_decode": is_decode,
        "is_prefill": kind == PREFILL,
        "reason": reason,
        "past_warmup": past_warmup,
        "ts_step_s": pl.Series(ts_step).fill_nan(None),
    }).with_columns(col[c] for c in (
        "running_req", "gen_throughput", "input_throughput", "accept_len",
        "accept_rate", "token_usage", "cuda_graph"))
    return _grouped(lines, run_names, kind_names).cast(COUNTS)


def _codes(texts: pl.Series) -> tuple[list[str | None], np.ndarray]:
    """The distinct texts (None for null) and each row's index among them."""
    names = texts.unique(maintain_order=True)
    if names.len() == 1:
        return names.to_list(), np.zeros(texts.len(), dtype=np.int32)
    present = names.drop_nulls()
    coded = texts.cast(pl.Enum(present)).to_physical()
    if present.len() < names.len():  # (null: the last index)
        return [*present.to_list(), None], coded.fill_null(present.len()).to_numpy().astype(
            np.int32)
    return present.to_list(), coded.to_numpy().astype(np.int32)


def _labelled(ids: pl.Series, labels: Mapping[int, str], null: str | None
              ) -> tuple[list[str | None], np.ndarray]:
    """Label ids as :func:`_codes` gives texts: the distinct texts (``null`` for a null
    id, as the view's join gives NULL and the caller reads it) and each row's index."""
    raw = ids.fill_null(-1).to_numpy().astype(np.int64) + 1  # (0: null)
    seen = np.flatnonzero(np.bincount(raw))
    names: dict[str | None, int] = {}
    index = np.zeros(int(raw.max()) + 1, dtype=np.int32)
    for i in seen:
        index[i] = names.setdefault(labels.get(int(i) - 1, null) if i else null, len(names))
    return list(names), index[raw]


def about() -> str:
    """The kernel ``logpipe --version`` names."""
    return ("C" if _c_kernel() else "numpy (C kernel not built)" if _classify is None
            else "numpy (LOGPIPE_FASTLANE=0)")


def _c_kernel() -> bool:
    """Whether the C kernel counts (built, and ``LOGPIPE_FASTLANE`` not 0)."""
    return _classify is not None and lane_enabled()


def _classify_c(rows: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(reason, past_warmup, ts_step)`` of each row, in the rows' order, by the C
    kernel (``logpipe/_classify.c``: the numpy kernel's rows, in two walks a partition)."""
    n = len(rows.part)
    reason = np.empty(n, dtype=np.int8)
    past_warmup = np.empty(n, dtype=bool)
    ts_step = np.empty(n, dtype=np.float64)
    assert _classify is not None
    _classify.classify(rows.parts, rows.part, rows.line, rows.us, rows.no_ts, rows.running,
                       rows.no_running, rows.graph, rows.no_graph, rows.kind, rows.run,
                       rows.ready, rows.has_ready, np.ascontiguousarray(rows.spans),
                       reason, past_warmup, ts_step)
    return reason, past_warmup, ts_step


def _classify_numpy(rows: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(reason, past_warmup, ts_step)`` of each row, in the rows' order: the reason's
    index in :data:`REASONS` (-1: steady), whether a decode line is past the warm-up, and
    the seconds since the partition's last stamp before it (NaN: none)."""
    n = len(rows.part)
    part_of, parts, line, us, no_ts = rows.part, rows.parts, rows.line, rows.us, rows.no_ts
    running, no_running, graph, no_graph = (rows.running, rows.no_running, rows.graph,
                                            rows.no_graph)
    ready, has_ready = rows.ready, rows.has_ready
    is_decode_kind, is_window, is_prefill = (rows.kind == k for k in (DECODE, WINDOW, PREFILL))
    run = rows.run

    # the window's order: by partition, then line_no, then ts (nulls last); rows arrive in
    # line order, so a stable sort by partition alone is the usual case
    ts_key = np.where(no_ts, _NO_LINE, us)
    ordered = bool(np.all((line[1:] > line[:-1]) | ((line[1:] == line[:-1])
                                                    & (ts_key[1:] >= ts_key[:-1]))))
    if ordered:
        del ts_key
    if ordered and parts == 1:
        order = None
    elif ordered:  # (a radix sort where the partitions fit 16 bits)
        order = np.argsort(part_of.astype(np.uint16) if parts < 1 << 16 else part_of,
                           kind="stable")
    else:
        order = np.lexsort((ts_key, line, part_of))

    def sort(a: np.ndarray) -> np.ndarray:
        return a if order is None else a[order]

    part, line_s, us_s, no_ts_s = sort(part_of), sort(line), sort(us), sort(no_ts)
    run_s, running_s, no_running_s = sort(run), sort(running), sort(no_running)
    graph_s, no_graph_s = sort(graph), sort(no_graph)
    is_decode_kind, is_window, is_prefill = (sort(is_decode_kind), sort(is_window),
                                             sort(is_prefill))
    is_decode = is_decode_kind | is_window
    idx = np.arange(n, dtype=np.int32)
    first = np.ones(n, dtype=bool)
    first[1:] = part[1:] != part[:-1]
    last = np.ones(n, dtype=bool)
    last[:-1] = part[1:] != part[:-1]
    start = np.maximum.accumulate(np.where(first, idx, np.int32(0)))

    def before(mask: np.ndarray) -> np.ndarray:
        """The row of the last earlier row of the partition where ``mask``, else -1."""
        seen = np.maximum.accumulate(np.where(mask, idx, np.int32(-1)))
        prev = np.empty(n, dtype=np.int32)
        prev[0] = -1
        prev[1:] = seen[:-1]
        return np.where(prev >= start, prev, np.int32(-1))

    prev_decode = before(is_decode)                       # its line: prev_decode_line
    prev_decode_ts = before(is_decode & ~no_ts_s)         # prev_decode_ts
    prev_ts = before(~no_ts_s)                            # prev_ts
    seconds = us_s / 1e6                                  # DuckDB's epoch(ts)
    gap_ok = is_decode & (prev_decode_ts >= 0) & ~no_ts_s
    gap = np.where(gap_ok, seconds - seconds[np.maximum(prev_decode_ts, 0)], np.nan)
    median_gap = _medians(part, gap, gap_ok, parts)

    # the runs' graphs
    runs_n = len(ready)
    decode_graph = is_decode_kind & ~no_graph_s
    runs_graphs = np.zeros(runs_n, dtype=bool)
    np.logical_or.at(runs_graphs, run_s[decode_graph], graph_s[decode_graph])
    first_graph = np.full(runs_n, _NO_LINE, dtype=np.int64)
    on_graph = decode_graph & graph_s
    np.minimum.at(first_graph, run_s[on_graph], line_s[on_graph])

    reason = np.full(n, -1, dtype=np.int8)

    def test(i: int, mask: np.ndarray) -> None:
        reason[(reason < 0) & mask] = i

    test(0, has_ready[run_s] & (line_s < ready[run_s]))
    if len(rows.spans):
        profiled = np.zeros(n, dtype=bool)
        for r, begin, end in rows.spans:  # (a run's rows are together: sorted by run first)
            lo, hi = np.searchsorted(run_s, r, "left"), np.searchsorted(run_s, r, "right")
            profiled[lo:hi] |= (line_s[lo:hi] > begin) & (line_s[lo:hi] < end)
        test(1, profiled)
    test(2, is_decode & ~no_running_s & (running_s == 0))
    test(3, is_decode_kind & ~no_graph_s & ~graph_s & runs_graphs[run_s])
    test(4, is_decode_kind & (prev_decode < 0))
    test(5, is_window & (prev_decode < 0))
    prev = np.maximum(idx - 1, 0)
    prev_idle = ~first & ~no_running_s[prev] & (running_s[prev] == 0)
    test(6, is_decode_kind & prev_idle & is_prefill[prev])
    test(7, is_window & prev_idle)
    nxt = np.minimum(idx + 1, n - 1)
    test(8, is_window & (last | no_running_s[nxt] | (running_s[nxt] == 0)))
    limit = median_gap[part]
    with np.errstate(invalid="ignore"):
        test(9, is_decode & (limit > 0) & (gap > 3 * limit))

    has_prev_ts = (prev_ts >= 0) & ~no_ts_s
    ts_step = np.where(has_prev_ts, seconds - seconds[np.maximum(prev_ts, 0)], np.nan)
    past_warmup = (is_decode & (no_running_s | (running_s > 0))
                   & (~has_ready[run_s] | (line_s >= ready[run_s]))
                   & (line_s >= np.where(first_graph[run_s] == _NO_LINE, 0,
                                         first_graph[run_s])))

    # back to the rows' own order
    def unsorted(a: np.ndarray) -> np.ndarray:
        if order is None:
            return a
        out = np.empty_like(a)
        out[order] = a
        return out

    return unsorted(reason), unsorted(past_warmup), unsorted(ts_step)


def _medians(part: np.ndarray, gap: np.ndarray, ok: np.ndarray, parts: int) -> np.ndarray:
    """Each partition's median of ``gap`` where ``ok`` (NaN where none), as DuckDB's
    ``median`` of doubles interpolates: ``lo + (hi - lo) * 0.5``."""
    out = np.full(parts, np.nan)
    p, g = part[ok], gap[ok]
    if p.size == 0:
        return out
    order = np.lexsort((g, p))
    p, g = p[order], g[order]
    heads = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    sizes = np.diff(np.r_[heads, p.size])
    lo = heads + (sizes - 1) // 2
    hi = heads + sizes // 2
    out[p[heads]] = g[lo] + (g[hi] - g[lo]) * np.where(lo == hi, 0.0, 0.5)
    return out


def _grouped(lines: pl.DataFrame, run_names: list[str | None],
             kind_names: list[str | None]) -> pl.DataFrame:
    """The nine series of ``run_judged_counts_in`` from the classified lines (``run`` and
    ``kind``: indexes of ``run_names`` and ``kind_names``)."""
    steady, is_decode = pl.col("reason") < 0, pl.col("is_decode")
    n = pl.len().alias("n")
    none_f, none_i, none_s = (pl.lit(None, pl.Float64), pl.lit(None, pl.Int64),
                              pl.lit(None, pl.String))
    steady_decode = lines.lazy().filter(is_decode & steady)
    every = lines.lazy()
    parts = [
        every.group_by("run", steady.cast(pl.Int64).alias("stratum"), pl.col("kind").alias("label"))
        .agg(n).select("run", pl.lit("lines").alias("series"), "stratum",
                       none_f.alias("value"), "label", "n"),
        steady_decode.group_by("run", pl.col("running_req").alias("stratum"),
                               pl.col("gen_throughput").alias("value"))
        .agg(n).select("run", pl.lit("decode").alias("series"), "stratum", "value",
                       none_s.alias("label"), "n"),
        *(steady_decode.filter(pl.col(c).is_not_null())
          .group_by("run", pl.col(c).alias("value")).agg(n)
          .select("run", pl.lit(c).alias("series"), none_i.alias("stratum"), "value",
                  none_s.alias("label"), "n")
          for c in ("accept_len", "accept_rate", "token_usage")),
        every.filter(pl.col("is_prefill") & steady & pl.col("input_throughput").is_not_null())
        .group_by("run", pl.col("input_throughput").alias("value")).agg(n)
        .select("run", pl.lit("prefill").alias("series"), none_i.alias("stratum"), "value",
                none_s.alias("label"), "n"),
        every.filter(is_decode & pl.col("cuda_graph").is_not_null())
        .group_by("run", pl.col("past_warmup").cast(pl.Int64).alias("stratum"),
                  pl.col("cuda_graph").cast(pl.Float64).alias("value")).agg(n)
        .select("run", pl.lit("graph").alias("series"), "stratum", "value",
                none_s.alias("label"), "n"),
        every.filter(~steady).group_by("run", "reason").agg(n)
        .select("run", pl.lit("excluded").alias("series"), none_i.alias("stratum"),
                none_f.alias("value"), pl.col("reason").alias("label"), "n"),
        every.group_by("run").agg(pl.col("ts_step_s").min().alias("value"), n)
        .select("run", pl.lit("ts_step").alias("series"), none_i.alias("stratum"), "value",
                none_s.alias("label"), "n"),
    ]
    frames = [p.collect() for p in parts]
    # the codes back to their names (label: a kind's for 'lines', a reason's for 'excluded')
    runs = pl.Series(run_names, dtype=pl.String)
    reasons = pl.Series(REASONS, dtype=pl.String)
    kinds = pl.Series(kind_names, dtype=pl.String)
    named = []
    for frame in frames:
        series = frame["series"][0] if frame.height else None
        label = frame["label"]
        if series == "excluded":
            label = reasons.gather(label.cast(pl.Int64)).alias("label")
        elif series == "lines":
            label = kinds.gather(label.cast(pl.Int64)).alias("label")
        named.append(frame.with_columns(
            runs.gather(frame["run"].cast(pl.Int64)).alias("run_id"),
            label.cast(pl.String)).drop("run"))
    return pl.concat([f.select("run_id", "series", "stratum", "value", "label", "n")
                      for f in named], how="vertical_relaxed")
