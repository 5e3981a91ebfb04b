"""Infer which SGLang releases could have printed a log (reference §0 and §8.1).

No SGLang log states its version.  Each tell-tale feature of a line narrows the set of
releases that could have printed it; a run's format era is the intersection over all its
lines, kept as a bit mask so that appended lines can narrow it further.  The era is shown
as ``first–last`` of the remaining releases (``0.5.11–0.5.21``), or one release.
"""

from __future__ import annotations

import polars as pl

from logpipe.releases import in_range, release

RELEASES: tuple[str, ...] = (
    ("0.2.15",)
    + tuple(f"0.3.{i}" for i in range(0, 7))
    + tuple(f"0.4.{i}" for i in range(0, 11))
    + tuple(f"0.5.{i}" for i in range(1, 24))
)
_INDEX = {v: i for i, v in enumerate(RELEASES)}
ALL = (1 << len(RELEASES)) - 1


def span(first: str, last: str | None = None) -> int:
    """Bit mask of the releases from ``first`` to ``last`` inclusive (``last`` None: newest)."""
    lo = _INDEX[first]
    hi = _INDEX[last] if last else len(RELEASES) - 1
    return sum(1 << i for i in range(lo, hi + 1))


def label(mask: int) -> str | None:
    """``"0.4.10–0.5.3"``, ``"0.5.10"``, or None when nothing (or everything) remains."""
    if mask in (0, ALL):
        return None
    members = [v for i, v in enumerate(RELEASES) if mask >> i & 1]
    if len(members) == 1:
        return members[0]
    return f"{members[0]}–{members[-1]}"


_msg = pl.col("msg")
_batch = pl.col("bkind").is_not_null()
_decode = pl.col("bkind") == "decode"
_prefill = pl.col("bkind") == "prefill"
_trailing = _msg.str.ends_with(", ")
_pd = _msg.str.contains(r"#(?:prealloc|unbootstrapped|bootstrap|transferring|inflight)-req")

# (name, line predicate, releases that print it).  A predicate that is true on any line
# of a run restricts the run to those releases.  Only features whose absence is normal
# are listed one way; two-sided features (head punctuation) are listed both ways.
FEATURES: list[tuple[str, pl.Expr, int]] = [
    ("time-only stamp", pl.col("stime").is_not_null() & pl.col("sdate").is_null(),
     span("0.2.15", "0.3.3")),
    ("dated stamp", pl.col("sdate").is_not_null(), span("0.3.3")),
    ("millisecond stamp", pl.col("sms").is_not_null() & pl.col("sdate").is_not_null(),
     span("0.5.6")),
    ("rank-less batch line", _batch & pl.col("stime").is_not_null() & pl.col("ranks").is_null(),
     span("0.4.7")),
    ("EP rank tag", pl.col("ranks").str.contains(r"(?:^| )EP\d"), span("0.4.10")),
    ("PP before TP", pl.col("ranks").str.contains(r"PP\d+ .*TP\d"), span("0.5.6")),
    ("TP before PP", pl.col("ranks").str.contains(r"TP\d+ .*PP\d"), span("0.4.7", "0.5.5")),
    ("ATTN_CP/MOE_DP rank tag", pl.col("ranks").str.contains(r"ATTN_CP|MOE_DP"), span("0.5.9")),
    ("mixed-chunk head", _msg.str.starts_with("Prefill batch(mixed"), span("0.2.15", "0.3.5")),
    ("dot head", _batch & _msg.str.contains(r"^(?:Prefill|Decode) batch(?:\(mixed[^)]*\))?\. "),
     span("0.2.15", "0.5.3")),
    ("comma head", _batch & _msg.str.contains(r"^(?:Prefill|Decode) batch(?: ?\[\d+\])?, "),
     span("0.5.4")),
    ("trailing comma", _batch & ~_pd & _trailing,
     span("0.4.4", "0.4.5") | span("0.4.10", "0.5.8")),
    ("no trailing comma", _batch & ~_pd & ~_trailing,
     ALL & ~(span("0.4.4", "0.4.5") | span("0.4.10", "0.5.8"))),
    ("cache hit rate", _prefill & _msg.str.contains("cache hit rate: "), span("0.2.15", "0.4.3")),
    ("largest-len", _msg.str.contains("largest-len: "), span("0.4.4", "0.4.4")),
    ("accept len", _decode & _msg.str.contains("accept len: "), span("0.4.3")),
    ("accept rate", _decode & _msg.str.contains("accept rate: "), span("0.5.4")),
    ("cap len", _decode & _msg.str.contains(r"\bcap len: "), span("0.5.16")),
    ("decode graph flag", _decode & _msg.str.contains(r"\w+ graph: (?:True|False)"),
     span("0.4.7")),
    ("decode without graph flag", _decode & ~_msg.str.contains(r"\w+ graph: "),
     span("0.2.15", "0.4.6")),
    ("prefill graph flag", _prefill & _msg.str.contains(r"\w+ graph: (?:True|False)"),
     span("0.5.9")),
    ("input throughput before graph flag",
     _prefill & ~_pd & _msg.str.contains(r"#queue-req: \d+, input throughput \(token/s\): "
                                         r"[\d.]+, \w+ graph: "), span("0.5.9", "0.5.9")),
    ("graph flag right after queue",
     _prefill & ~_pd & _msg.str.contains(r"#queue-req: \d+, \w+ graph: \w+, input throughput"),
     span("0.5.10", "0.5.10")),
    ("#pending-token", _msg.str.contains("#pending-token: "), span("0.5.11")),
    ("#replay-token", _msg.str.contains("#replay-token: "), span("0.5.21")),
    ("fwd occupancy", _batch & _msg.str.contains("fwd occupancy: "), span("0.5.11")),
    ("TFLOPS estimate", _batch & _msg.str.contains(r"est\. \w+ TFLOPS"), span("0.5.10")),
    ("#swa token", _msg.str.contains("#swa token: "), span("0.4.10")),
    ("mamba usage", _msg.str.contains("mamba usage: "), span("0.5.4")),
    ("KV cache dtype in pool line", _msg.str.contains(r"KV Cache is allocated\. dtype: "),
     span("0.5.13")),
    ("KV cache #tokens first", _msg.str.contains(r"KV Cache is allocated\. #tokens: "),
     span("0.4.4", "0.5.12")),
    ("target CUDA graph capture", _msg.str.contains(r"^Capture target (?:decode|verify) \w+ graph"),
     span("0.5.14")),
    ("old CUDA graph capture", _msg.str.starts_with("Capture cuda graph begin."),
     span("0.2.15", "0.5.13")),
    ("load weight elapsed", _msg.str.starts_with("Load weight end. elapsed="), span("0.5.9")),
    ("server_args dict", _msg.str.starts_with("server_args={"), span("0.5.22")),
    ("server_args repr", _msg.str.starts_with("server_args=ServerArgs("),
     span("0.2.15", "0.5.21")),
]


ANY_LINE_PHRASES = ("largest-len: ", "#pending-token: ", "#replay-token: ", "#swa token: ",
                    "mamba usage: ", "KV Cache is allocated. ")
"""What the features of :data:`FEATURES` that read any line's message (not only a batch
line's, nor only its start) look for: the C lane's quiet lines (``Receive:``,
``Finish:``) hold none of these, so their messages show no feature (a feature of that kind
adds its phrase here)."""


def feature_flags(lines: pl.DataFrame, by: str) -> pl.DataFrame:
    """One row per ``by`` group with a boolean column per feature (true if any line has it)."""
    return lines.group_by(by).agg(
        [expr.fill_null(False).any().alias(name) for name, expr, _ in FEATURES]
    )


def mask_from_flags(flags: dict[str, bool], start: int = ALL) -> int:
    """Intersect ``start`` with the releases of every feature present in ``flags``."""
    mask = start
    for name, _, releases in FEATURES:
        if flags.get(name):
            mask &= releases
    return mask


# accept rate changed meaning three times under one label (reference §2.2)
ACCEPT_RATE_DEFINITIONS: list[tuple[str, str | None, str]] = [
    ("0.5.4", "0.5.9", "accepted / (steps + 1)"),
    ("0.5.10", "0.5.10", "accepted / num_draft_tokens"),
    ("0.5.11", None, "(accept_len − 1) / (num_draft_tokens − 1)"),
]


def accept_rate_definition(version: str | None, mask: int | None) -> str:
    """The meaning of ``accept rate`` for a run's release (exact, or from its era)."""
    if version and release(version) is not None:
        for first, last, text in ACCEPT_RATE_DEFINITIONS:
            if in_range(version, first, last):
                return text
        return "not printed before 0.5.4"
    if mask is None:
        return "unknown (no version, no format era)"
    found = []
    for first, last, text in ACCEPT_RATE_DEFINITIONS:
        if mask & span(first, last):
            found.append(text)
    if mask & span("0.2.15", "0.5.3"):
        found.append("not printed before 0.5.4")
    if len(found) == 1:
        return found[0]
    return "ambiguous: the format era spans " + " | ".join(found)
