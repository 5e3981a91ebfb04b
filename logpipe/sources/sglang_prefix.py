"""Peel the wrappers off SGLang log lines, vectorised with polars.

A line as found on disk may carry, outside in: leading indentation (kubectl output pasted
into notes), a container runtime timestamp (``docker logs --timestamps``: RFC 3339 with
nanoseconds; Docker Desktop: local ``YYYY-mm-dd HH:MM:SS``), a Ray actor prefix
``(Name pid=N[, ip=…])`` with ANSI colours, a Python-logging prefix of a custom logging
config (``2026-06-07 10:59:31,659 [INFO] sglang…: `` or ``… INFO 151972 [file.py:287] ``),
and finally SGLang's own ``[date time(.ms) RANKS] ``.  :func:`split_prefixes` returns the
message with every wrapper removed plus what each wrapper said.

Invariants: nothing here loops over lines in Python; a line that matches no wrapper is
returned unchanged as its own message; ``\\r`` and ANSI escapes never reach the message.
"""

from __future__ import annotations

import polars as pl

ANSI_RE = r"\x1b\[[0-9;?]*[A-Za-z]"
RAY_REPEAT_RE = r"\s*\[repeated \d+x across cluster\]\s*$"

# One anchored regex, every part optional.  Named groups become struct fields.
PREFIX_RE = (
    r"^(?P<indent>[ \t]*)"
    # container runtime: RFC 3339 with a zone (docker logs --timestamps)
    r"(?:(?P<wts>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}))\s+)?"
    # Ray actor prefix, with or without ip=
    r"(?:\((?P<actor>[^\s()]+) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s*)?"
    # Python logging / Docker Desktop local time, optional level, pid, [file:line], logger
    r"(?:(?P<pyts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d+)?)\s+"
    r"(?:\[?(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?:?\s+)?"
    r"(?:\d+\s+)?(?:\[[\w.\-]+:\d+\]\s*)?(?:sglang[\w.]*:\s+)?)?"
    # SGLang's own prefix: [date? time(.ms)? RANKS]
    r"(?:\[(?:(?P<sdate>\d{4}-\d{2}-\d{2}) )?(?P<stime>\d{2}:\d{2}:\d{2})(?:\.(?P<sms>\d{1,6}))?"
    r"(?P<ranks>(?: [A-Za-z][A-Za-z_]*\d+)*)\] ?)?"
    r"(?P<msg>.*)$"
)

RANK_NAMES = ("dp", "tp", "pp", "ep")


def clean(lines: pl.Expr) -> pl.Expr:
    """Strip ``\\r``, ANSI escapes and NUL bytes from raw lines."""
    return (
        lines.str.replace_all(ANSI_RE, "")
        .str.replace_all("\r", "", literal=True)
        .str.replace_all("\x00", "\ufffd", literal=True)
    )


# The same prefix ending in SGLang's mandatory bracket, matched against the text up to the
# first "] " only: most lines take this fast path (a short string, no message capture).
HEAD_RE = PREFIX_RE.replace(r"(?P<msg>.*)$", "$").replace(
    r"(?P<ranks>(?: [A-Za-z][A-Za-z_]*\d+)*)\] ?)?", r"(?P<ranks>(?: [A-Za-z][A-Za-z_]*\d+)*)\])")


def split_prefixes(df: pl.DataFrame, raw: str = "raw") -> pl.DataFrame:
    """Add ``msg``, the wrapper fields, ``has_prefix`` and the rank columns to ``df``.

    ``has_prefix`` is true when any timestamp (SGLang's or a wrapper's) was found: lines
    without one are continuation lines (tracebacks) or noise.  ``df`` needs a ``row``
    column; the result is in ``row`` order.
    """
    base = df.with_columns(clean(pl.col(raw)).alias("_c")).with_columns(
        pl.col("_c").str.find("] ", literal=True).alias("_pos"))
    fast = (
        base.filter(pl.col("_pos").is_not_null())
        .with_columns(pl.col("_c").str.slice(0, pl.col("_pos") + 1).str.extract_groups(HEAD_RE)
                      .alias("_p"))
        .unnest("_p")
        .filter(pl.col("stime").is_not_null())
        .with_columns(pl.col("_c").str.slice(pl.col("_pos") + 2).alias("msg"))
    )
    slow = (
        base.join(fast.select("row"), on="row", how="anti")
        .with_columns(pl.col("_c").str.extract_groups(PREFIX_RE).alias("_p"))
        .unnest("_p")
    )
    out = pl.concat([fast, slow], how="diagonal_relaxed").sort("row").drop("_c", "_pos")
    out = out.with_columns(
        pl.col("msg").str.replace(RAY_REPEAT_RE, ""),
        pl.col("ranks").str.strip_chars().replace("", None).alias("ranks"),
        (
            pl.col("stime").is_not_null()
            | pl.col("pyts").is_not_null()
            | pl.col("wts").is_not_null()
        ).alias("has_prefix"),
    )
    rank_cols = [
        pl.col("ranks").str.extract(rf"(?:^| ){name.upper()}(\d+)(?: |$)")
        .cast(pl.Int32, strict=False)
        .alias(f"{name}_rank")
        for name in RANK_NAMES
    ]
    return out.with_columns(rank_cols)


def timestamps(df: pl.DataFrame, fallback_date: str) -> pl.DataFrame:
    """Add ``ts`` (the line's time) and ``ts_raw`` (the printed stamp when it was repaired).

    Preference: SGLang's bracket time, then a Python-logging time, then the container
    runtime's time (zone dropped; docker prints UTC).  A time-only SGLang stamp (0.2.15–0.3.2)
    takes its date from a wrapper on the same line, else ``fallback_date``; ``ts_raw`` keeps
    the printed text.  Midnight roll-over is handled by the caller (:func:`roll_days`).
    """
    wrapper_date = pl.coalesce(pl.col("pyts").str.slice(0, 10), pl.col("wts").str.slice(0, 10))
    sdate = pl.coalesce(pl.col("sdate"), wrapper_date, pl.lit(fallback_date))
    sglang = pl.when(pl.col("stime").is_not_null()).then(
        pl.concat_str([sdate, pl.lit(" "), pl.col("stime"), pl.lit("."),
                       pl.col("sms").fill_null("0")])
    )
    py = pl.col("pyts").str.replace(",", ".", literal=True).str.replace("T", " ", literal=True)
    # docker prints UTC with nanoseconds: drop the zone, keep microseconds
    docker = (
        pl.col("wts").str.replace(r"(Z|[+-]\d{2}:?\d{2})$", "")
        .str.replace(r"(\.\d{6})\d+$", "$1").str.replace("T", " ", literal=True)
    )
    text = pl.coalesce(sglang, py, docker)
    return df.with_columns(
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False).alias("ts"),
        pl.when(pl.col("stime").is_not_null() & pl.col("sdate").is_null())
        .then(pl.concat_str([pl.col("stime"), pl.lit("."), pl.col("sms")], ignore_nulls=True)
              .str.strip_suffix("."))
        .alias("ts_raw"),
    )
