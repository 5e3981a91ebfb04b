"""Peer: one polars streaming regex that extracts decode lines only (``--vllm``: vLLM's
periodic stats lines)."""

import sys

import polars as pl

PATTERN = (
    r"Decode batch.*?#running-req: (?P<running>\d+), #token: (?P<token>\d+), "
    r"token usage: (?P<usage>[\d.]+), .*?gen throughput \(token/s\): (?P<gen>[\d.]+), "
    r"#queue-req: (?P<queue>\d+)"
)
VLLM = (
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation throughput: "
    r"(?P<gen>[\d.]+) tokens/s, Running: (?P<running>\d+) reqs, Waiting: (?P<queue>\d+) reqs, "
    r"\w+ KV cache usage: (?P<usage>[\d.]+)%"
)
vllm = "--vllm" in sys.argv[2:]
lines = pl.scan_csv(sys.argv[1], has_header=False, separator="\x1f", quote_char=None,
                    new_columns=["line"], schema_overrides={"line": pl.String},
                    truncate_ragged_lines=True, encoding="utf8-lossy")
marker = "Engine 000:" if vllm else "Decode batch"
out = (lines.filter(pl.col("line").str.contains(marker, literal=True))
       .select(pl.col("line").str.extract_groups(VLLM if vllm else PATTERN).alias("g"))
       .unnest("g")
       .filter(pl.col("gen").is_not_null())
       .select(pl.len()).collect(engine="streaming"))
print(out.item())
