"""Prefill/Decode batch lines → typed rows, vectorised with polars.

The body of a batch line is a list of ``key: value`` pairs joined by ``", "``.  SGLang has
reordered, renamed, inserted and suffixed those pairs in nearly every release (reference
§2, §8), so the body is *tokenised*, never matched by one fixed regex: known keys become
the typed columns of ``batches`` (:data:`CANONICAL`), every other pair is kept in ``extra``
as JSON under its printed key, with numbers as numbers (a trailing ``%`` is dropped, the
value stays in percent) and ``True``/``False`` as booleans.

A line whose head says it is a batch line but whose fields cannot be read (a known key
with a value of the wrong type, a piece without ``key: value``) is returned as a reject
with its reason; it never raises.
"""

from __future__ import annotations

import re

import polars as pl

# Head: "Prefill batch. " (≤0.5.3), "Decode batch, " (0.5.4+), " [N]" forward iteration
# (0.5.4+), "Prefill batch(mixed #running-req: N). " (mixed chunk, ≤0.3.4).
HEAD_RE = (
    r"^(?P<bkind>Prefill|Decode) batch"
    r"(?:\(mixed #running-req: (?P<mixed>[^)]*)\))?"
    r"(?: ?\[(?P<iter>[^\]]*)\])?"
    r"[.,]$"
)
# The head up to and including its "." or ","; the body follows after one space.
HEAD_ONLY_RE = r"^(?:Prefill|Decode) batch(?:\(mixed #running-req: [^)]*\))?(?: ?\[[^\]]*\])?[.,]"
HEAD_SCAN = 96
LOOKS_LIKE_BATCH_RE = r"^(?:Prefill|Decode) batch\b"

RECORD_LIKE_PHRASES = ("prefill batch", "decode batch", "throughput")
"""What a line that may hold a measurement says, in any case: ingest counts such lines it
did not read, and ``logpipe doctor`` lists them (:data:`RECORD_LIKE_RE`; the C lane leaves
a line that says one to the polars parser, which counts it)."""
RECORD_LIKE_RE = "(?i)" + "|".join(re.escape(p) for p in RECORD_LIKE_PHRASES)


INT, FLOAT, BOOL = pl.Int64, pl.Float64, pl.Boolean

# printed key → (column, dtype).  Hybrid pools report their full-attention pool as the
# canonical usage; the other pools stay in ``extra``.
CANONICAL: dict[str, tuple[str, pl.DataType]] = {
    "#new-seq": ("new_seq", INT()),
    "#new-token": ("new_token", INT()),
    "#cached-token": ("cached_token", INT()),
    "#running-req": ("running_req", INT()),
    "#queue-req": ("queue_req", INT()),
    "#token": ("num_token", INT()),
    "#full token": ("num_token", INT()),
    "token usage": ("token_usage", FLOAT()),
    "full token usage": ("token_usage", FLOAT()),
    "gen throughput (token/s)": ("gen_throughput", FLOAT()),
    "input throughput (token/s)": ("input_throughput", FLOAT()),
    "accept len": ("accept_len", FLOAT()),
    "accept rate": ("accept_rate", FLOAT()),
}
GRAPH_SUFFIX = " graph"  # "cuda graph", "cpu graph", "npu graph", "musa graph", ...

COLUMNS: dict[str, pl.DataType] = {
    "new_seq": INT(),
    "new_token": INT(),
    "cached_token": INT(),
    "running_req": INT(),
    "queue_req": INT(),
    "num_token": INT(),
    "token_usage": FLOAT(),
    "cuda_graph": BOOL(),
    "graph_label": pl.String(),
    "gen_throughput": FLOAT(),
    "input_throughput": FLOAT(),
    "accept_len": FLOAT(),
    "accept_rate": FLOAT(),
}

_NUMBER_RE = r"^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?%?$"


def _json_string(expr: pl.Expr) -> pl.Expr:
    escaped = (
        expr.str.replace_all("\\", "\\\\", literal=True)
        .str.replace_all('"', '\\"', literal=True)
        .str.replace_all(r"[\x00-\x1f]", " ")
    )
    return pl.concat_str([pl.lit('"'), escaped, pl.lit('"')])


def _json_value(value: pl.Expr) -> pl.Expr:
    v = value.str.strip_chars()
    return (
        pl.when(v.str.contains(_NUMBER_RE))
        .then(v.str.strip_suffix("%").str.replace(r"^(-?)0+(\d)", "$1$2"))
        .when(v == "True")
        .then(pl.lit("true"))
        .when(v == "False")
        .then(pl.lit("false"))
        .when(v == "None")
        .then(pl.lit("null"))
        .otherwise(_json_string(v))
    )


def parse_batches(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split batch lines out of ``lines`` (needs ``row`` and ``msg``).

    Returns ``(batches, rejects)``: ``batches`` has ``row``, ``kind``, ``forward_iter``,
    ``mixed_chunk``, the typed :data:`COLUMNS` and ``extra`` (JSON text); ``rejects`` has
    ``row`` and ``reason``.
    """
    candidates = lines.filter(pl.col("msg").str.contains(LOOKS_LIKE_BATCH_RE))
    if candidates.height == 0:
        # the usual case when the fast lane read the batch lines: planning the ~60
        # expressions below costs ~20 ms per call even on no rows; their empty result
        # depends only on the input's types
        key = (candidates.schema["row"], candidates.schema["msg"])
        if key not in _EMPTY:
            _EMPTY[key] = _parse_candidates(candidates)
        batches, rejects = _EMPTY[key]
        return batches.clear(), rejects.clear()
    return _parse_candidates(candidates)


_EMPTY: dict[tuple[pl.DataType, pl.DataType], tuple[pl.DataFrame, pl.DataFrame]] = {}


def _parse_candidates(candidates: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    # the head regex runs on the first characters only; the body is cut off by length
    head_text = pl.col("msg").str.slice(0, HEAD_SCAN).str.extract(HEAD_ONLY_RE, 0)
    candidates = candidates.select(
        "row", pl.col("msg"), head_text.alias("_head"),
    ).with_columns(
        pl.col("_head").str.extract_groups(HEAD_RE).alias("h"),
    ).unnest("h").with_columns(
        pl.col("msg").str.slice(pl.col("_head").str.len_chars()).str.strip_prefix(" ")
        .alias("body"),
    ).drop("msg", "_head")
    bad_head = candidates.filter(pl.col("bkind").is_null()).select(
        "row", pl.lit("unrecognised batch-line head").alias("reason")
    )
    heads = candidates.filter(pl.col("bkind").is_not_null()).with_columns(
        pl.col("body").fill_null("").str.replace(r"[,\s]+$", "").alias("body")
    )

    # Split on ", " (literal, fast); a piece without ": " continues the one before it
    # (0.4.9's "#token: full=12, swa=3"), except at the start of a line.
    pieces = (
        heads.select("row", pl.col("body").str.split(", "))
        .explode("body")
        .filter(pl.col("body") != "")
    )
    if pieces.select((~pl.col("body").str.contains(": ", literal=True)).any()).item():
        pieces = (
            pieces.with_columns(
                pl.col("body").str.contains(": ", literal=True).cum_sum().alias("_g"))
            .group_by("row", "_g", maintain_order=True)
            .agg(pl.col("body").str.join(", "))
            .drop("_g")
        )
    pieces = (
        # the first ": " ends the key; the value keeps any later one (split_exact would
        # drop what follows a second ": ", the C lane keeps it)
        pieces.with_columns(pl.col("body").str.splitn(": ", 2).alias("kv"))
        .unnest("kv")
        .rename({"field_0": "key", "field_1": "value"})
        .with_columns(pl.col("key").str.strip_chars(), pl.col("value").str.strip_chars())
        .with_columns(pl.col("key").replace_strict(
            {k: c for k, (c, _) in CANONICAL.items()}, default=None, return_dtype=pl.String
        ).alias("canon"))
        .with_columns(
            pl.when(pl.col("key").str.ends_with(GRAPH_SUFFIX))
            .then(pl.lit("cuda_graph"))
            .otherwise(pl.col("canon"))
            .alias("canon")
        )
    )
    no_colon = pieces.filter(pl.col("value").is_null()).select(
        "row",
        pl.concat_str([pl.lit("field without 'key: value' form: '"),
                       pl.col("key").str.slice(0, 80), pl.lit("'")]).alias("reason"),
    )

    # Typed values of known keys: one pivot to a wide frame, then one cast per column.
    # A raw value that does not cast is a reject.
    sub_full = pl.col("value").str.extract(r"^full=([-\d.]+)")  # 0.4.9 "full=12, swa=3"
    typed = pieces.filter(pl.col("canon").is_not_null() & pl.col("value").is_not_null())
    typed = typed.select(
        "row", "canon",
        pl.concat_str([pl.col("key"), pl.lit("\x1f"),
                       pl.coalesce(sub_full, pl.col("value")).str.strip_suffix("%")]).alias("kv"),
    )
    wide = typed.pivot(on="canon", index="row", values="kv", aggregate_function="first")
    for col in COLUMNS:
        if col not in wide.columns and col != "graph_label":
            wide = wide.with_columns(pl.lit(None, dtype=pl.String).alias(col))
    raw_of = {c: pl.col(c).str.split_exact("\x1f", 1).struct.field("field_1") for c in COLUMNS}
    key_of = {c: pl.col(c).str.split_exact("\x1f", 1).struct.field("field_0") for c in COLUMNS}
    casts = []
    for col, dtype in COLUMNS.items():
        if col == "graph_label":
            continue
        cast: pl.Expr
        if col == "cuda_graph":
            raw = raw_of[col]
            cast = pl.when(raw == "True").then(True).when(raw == "False").then(False)
        else:
            cast = raw_of[col].cast(dtype, strict=False)
            if dtype == FLOAT():  # a number past a double's range (1e400, 400 digits) is
                # malformed, not infinite; "inf" printed stays
                cast = pl.when(cast.is_infinite() & ~raw_of[col].str.contains("(?i)inf")
                               ).then(None).otherwise(cast)
        casts.append(cast.alias(col))
    bad = [
        pl.when(pl.col(c).is_not_null() & pl.col(f"_t_{c}").is_null()).then(
            pl.concat_str([pl.lit("malformed value for '"), key_of[c], pl.lit("': '"),
                           raw_of[c].str.slice(0, 80), pl.lit("'")]))
        for c in COLUMNS if c != "graph_label"
    ]
    wide = wide.with_columns([c.name.prefix("_t_") for c in casts]).with_columns(
        pl.coalesce(bad).alias("_reason"),
        key_of["cuda_graph"].alias("graph_label"),
    )
    bad_value = wide.filter(pl.col("_reason").is_not_null()).select(
        "row", pl.col("_reason").alias("reason"))
    known = wide.select(
        "row", "graph_label",
        *[pl.col(f"_t_{c}").alias(c) for c in COLUMNS if c != "graph_label"],
    )

    # Everything else (and composite values of known keys) goes to ``extra``.
    extra_pairs = pieces.filter(
        pl.col("value").is_not_null()
        & (pl.col("canon").is_null() | pl.col("value").str.contains("=", literal=True))
    ).select(
        "row",
        pl.concat_str([_json_string(pl.col("key")), pl.lit(": "), _json_value(pl.col("value"))])
        .alias("pair"),
    )
    extra = extra_pairs.group_by("row").agg(
        pl.concat_str([pl.lit("{"), pl.col("pair").str.join(", "), pl.lit("}")]).first()
        .alias("extra")
    )

    empty_body = heads.filter(pl.col("body") == "").select(
        "row", pl.lit("batch line with no fields").alias("reason")
    )
    rejects = pl.concat([bad_head, empty_body, no_colon, bad_value]).unique("row", keep="first")
    rejects = rejects.sort("row")

    batches = (
        heads.select(
            "row",
            pl.col("bkind").str.to_lowercase().alias("kind"),
            pl.col("iter").cast(pl.Int64, strict=False).alias("forward_iter"),
            pl.col("mixed").cast(pl.Int64, strict=False).alias("mixed_running"),
            pl.col("mixed").is_not_null().alias("mixed_chunk"),
            (pl.col("iter").is_not_null() & pl.col("iter").cast(pl.Int64, strict=False).is_null()
             | pl.col("mixed").is_not_null() & pl.col("mixed").cast(pl.Int64, strict=False)
             .is_null()).alias("_bad_head_value"),
        )
        .join(known, on="row", how="left", maintain_order="left")
        .join(extra, on="row", how="left", maintain_order="left")
        .with_columns(pl.coalesce(pl.col("running_req"), pl.col("mixed_running"))
                      .alias("running_req"))
    )
    bad_head_value = batches.filter(pl.col("_bad_head_value")).select(
        "row", pl.lit("malformed forward iteration or mixed-chunk count in head").alias("reason")
    )
    rejects = pl.concat([rejects, bad_head_value]).unique("row", keep="first").sort("row")
    batches = batches.drop("mixed_running", "_bad_head_value").join(rejects, on="row",
                                                                      how="anti")
    return batches.sort("row"), rejects
