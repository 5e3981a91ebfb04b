"""Steady state: which batch lines measure the server, and why the others don't.

The classification itself is the ``batch_states`` view (``schemas/views.sql``), so SQL
users and the library see the same thing.  :func:`steady_lines` adds the configurable
warm-up (the first N steady decode lines, or the first S seconds after the server was
ready) on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import duckdb
import polars as pl

from logpipe.store import Store


@dataclass(frozen=True)
class Warmup:
    """Extra warm-up to drop: the first ``lines`` steady decode lines and/or everything in
    the first ``seconds`` after the server was ready (or after the run's first line)."""

    lines: int = 0
    seconds: float = 0.0


NO_WARMUP = Warmup()


DECODE_KINDS = ("decode", "window")
"""Sample kinds that measure decoding: SGLang's decode batch lines and vLLM's stats
windows (an interval average of generation throughput)."""


JUDGED = ("line_no", "ts", "kind", "running_req", "gen_throughput", "input_throughput",
          "accept_len", "accept_rate", "token_usage", "cuda_graph", "state", "reason",
          "past_warmup")
"""The columns of :func:`steady_lines` that judging reads (a run of a million lines is
~100 MB of them, against ~1 GB of every column)."""


def steady_lines(store: Store, run_id: str, warmup: Warmup = NO_WARMUP,
                 columns: tuple[str, ...] | None = None) -> pl.DataFrame:
    """Every batch line of a run with ``state`` and ``reason``, warm-up applied;
    ``columns``: only those (each of :data:`JUDGED`; default every column)."""
    cols = ", ".join(columns) if columns else "*"
    try:
        df = store.con.sql(
            f"SELECT {cols} FROM run_batch_states($1) ORDER BY line_no, ts",
            params=[run_id]).pl()
    except duckdb.CatalogException:  # a database last written before the macro existed
        df = store.con.sql("SELECT * FROM batch_states WHERE run_id = $1 "
                           "ORDER BY line_no, ts", params=[run_id]).pl()
    if df.height == 0 or (warmup.lines <= 0 and warmup.seconds <= 0):
        return df
    if warmup.seconds > 0:
        ready = store.one("SELECT min(ts) FROM events WHERE run_id = ? AND kind = 'ready'",
                          [run_id])
        start = ready[0] if ready and ready[0] is not None else df["ts"].min()
        if start is not None:
            cutoff = start + timedelta(seconds=warmup.seconds)
            early = (pl.col("state") == "steady") & (pl.col("ts") < cutoff)
            df = df.with_columns(
                pl.when(early).then(pl.lit("warmup")).otherwise(pl.col("state")).alias("state"),
                pl.when(early).then(pl.lit(f"configured warm-up ({warmup.seconds:g} s)"))
                .otherwise(pl.col("reason")).alias("reason"),
            )
    if warmup.lines > 0:
        rank = (
            pl.when((pl.col("state") == "steady") & pl.col("kind").is_in(DECODE_KINDS))
            .then(pl.lit(1)).otherwise(pl.lit(0)).cum_sum()
        )
        early = (pl.col("state") == "steady") & pl.col("kind").is_in(DECODE_KINDS) & (
            rank <= warmup.lines)
        df = df.with_columns(
            pl.when(early).then(pl.lit("warmup")).otherwise(pl.col("state")).alias("state"),
            pl.when(early).then(pl.lit(f"configured warm-up (first {warmup.lines} lines)"))
            .otherwise(pl.col("reason")).alias("reason"),
        )
    return df
