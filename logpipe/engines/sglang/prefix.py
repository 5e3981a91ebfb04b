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

# SGLang's own signature, found anywhere in a line that no known wrapper explains: its
# bracket (optional date, time, optional fraction, rank tags) followed by the message, not
# by another stamp.  Everything before it is the outer prefix (a compose service, syslog,
# a host logger's stamp, a progress bar glued by \r, a quote mark, a label).
STAMP = (r"\[(?:(?P<sdate>\d{4}-\d{2}-\d{2}) )?(?P<stime>\d{2}:\d{2}:\d{2})"
         r"(?:\.(?P<sms>\d{1,6}))?(?P<ranks>(?: [A-Za-z][A-Za-z_]*\d+)*)\]")
SIGNATURE_RE = r"^(?P<outer>.*?)" + STAMP + r" ?(?P<msg>(?:[^\[\s]|\[[^\d]).*)$"
STARTS_WITH_STAMP_RE = (r"^\[(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?"
                        r"(?: [A-Za-z][A-Za-z_]*\d+)*\] ?\S")
# Releases before 0.2.14 printed "[gpu_id=N] " (0.1.20-0.2.8) or "[gpu=N] " (0.2.9-0.2.13)
# and no time at all (logging format "%(message)s").
OLD_RANK_RE = r"^\[gpu(?:_id)?=(?P<gpu>\d+)\] (?P<msg>.*)$"
# What the outer prefix says: a stamp (ISO with an optional zone, or syslog's "Jul 02
# 09:04:11"), a compose service ("name  | "), a process and pid ("python3[4242]:",
# "pid=4242").
OUTER_TS_RE = (r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
               r"|\b[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2})")
SERVICE_RE = r"^\s*([\w][\w.\-]*)\s+\|(?:\s|$)"
PID_RE = r"(?:\[(\d+)\]:|pid=(\d+))"


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
    out = pl.concat([fast, slow], how="diagonal_relaxed").sort("row").drop("_pos")
    out = _anchor_on_signature(out).drop("_c")
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
    out = out.with_columns(rank_cols)
    return out.with_columns(pl.coalesce(pl.col("tp_rank"), pl.col("gpu").cast(pl.Int32))
                            .alias("tp_rank")).drop("gpu")


def _anchor_on_signature(out: pl.DataFrame) -> pl.DataFrame:
    """Lines no known wrapper explains, found by SGLang's own signature anywhere in them:
    no SGLang stamp where the wrappers end, or a message that starts with a second stamp
    (a host logger's stamp, then SGLang's).  Adds ``outer`` (the text before the
    signature) and ``gpu`` (the rank of releases before 0.2.14)."""
    if "outer" not in out.columns:
        out = out.with_columns(pl.lit(None, dtype=pl.String).alias("outer"))
    out = out.with_columns(pl.lit(None, dtype=pl.String).alias("gpu"))
    no_stamp = pl.col("stime").is_null() & pl.col("_c").str.contains(STAMP)
    second = pl.col("stime").is_not_null() & pl.col("msg").str.contains(STARTS_WITH_STAMP_RE)
    old = pl.col("stime").is_null() & pl.col("msg").str.contains(OLD_RANK_RE)
    pick = out.with_columns(
        pl.when(no_stamp).then(pl.lit(1)).when(second).then(pl.lit(2))
        .when(old).then(pl.lit(3)).otherwise(pl.lit(0)).alias("_how"))
    todo = pick.filter(pl.col("_how") > 0)
    if todo.height == 0:
        return out
    keep = [c for c in out.columns]
    sig_cols = ["outer", "sdate", "stime", "sms", "ranks", "msg"]
    # whole line for lines with no stamp yet; for a second stamp, the wrappers peeled so
    # far plus the first stamp become the outer prefix
    whole = todo.filter(pl.col("_how") == 1).with_columns(
        pl.col("_c").str.extract_groups(SIGNATURE_RE).alias("_s"))
    twice = todo.filter(pl.col("_how") == 2).with_columns(
        pl.col("msg").str.extract_groups(SIGNATURE_RE).alias("_s"),
        pl.col("_c").str.slice(0, pl.col("_c").str.len_chars() - pl.col("msg").str.len_chars())
        .alias("_before"))
    parts = []
    for frame in (whole, twice):
        if frame.height == 0:
            continue
        found = frame.filter(pl.col("_s").struct.field("msg").is_not_null())
        if "_before" in found.columns:
            found = found.with_columns(
                pl.concat_str([pl.col("_before"), pl.col("_s").struct.field("outer")])
                .alias("_outer"))
        else:
            found = found.with_columns(pl.col("_s").struct.field("outer").alias("_outer"))
        found = found.with_columns(
            [pl.col("_s").struct.field(c).alias(c) for c in sig_cols if c != "outer"]
        ).with_columns(pl.col("_outer").str.strip_chars().alias("outer"))
        # an outer stamp found only now takes the wrappers' place as the line's date
        found = found.with_columns(
            pl.coalesce(pl.col("pyts"), pl.col("outer").str.extract(OUTER_TS_RE, 1)
                        .str.replace(r"(Z|[+-]\d{2}:?\d{2})$", "")).alias("pyts")
            if "pyts" in found.columns else pl.lit(None))
        parts.append(found.select(keep))
    olds = todo.filter(pl.col("_how") == 3).with_columns(
        pl.col("msg").str.extract_groups(OLD_RANK_RE).alias("_g")).with_columns(
        pl.col("_g").struct.field("msg").alias("msg"),
        pl.col("_g").struct.field("gpu").alias("gpu"),
        pl.concat_str([pl.lit("gpu_id="), pl.col("_g").struct.field("gpu")]).alias("ranks"),
    )
    if olds.height:
        parts.append(olds.select(keep))
    if not parts:
        return out
    fixed = pl.concat(parts, how="vertical_relaxed")
    return pl.concat([out.join(fixed.select("row"), on="row", how="anti"), fixed],
                     how="vertical_relaxed").sort("row")


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
