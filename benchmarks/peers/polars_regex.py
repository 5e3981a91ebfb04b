"""Peer: one polars streaming regex that extracts decode lines only."""

import sys

import polars as pl

PATTERN = (
    r"Decode batch.*?#running-req: (?P<running>\d+), #token: (?P<token>\d+), "
    r"token usage: (?P<usage>[\d.]+), .*?gen throughput \(token/s\): (?P<gen>[\d.]+), "
    r"#queue-req: (?P<queue>\d+)"
)
lines = pl.scan_csv(sys.argv[1], has_header=False, separator="\x1f", quote_char=None,
                    new_columns=["line"], schema_overrides={"line": pl.String},
                    truncate_ragged_lines=True, encoding="utf8-lossy")
out = (lines.filter(pl.col("line").str.contains("Decode batch", literal=True))
       .select(pl.col("line").str.extract_groups(PATTERN).alias("g")).unnest("g")
       .filter(pl.col("gen").is_not_null())
       .select(pl.len()).collect(engine="streaming"))
print(out.item())
