"""SGLang release numbers, parsed and compared (PEP 440, through ``packaging``).

Apart from :mod:`logpipe.engines.sglang.era` (which reads the features of lines
with polars), so that the environment's version rules need no polars: an ingest of
unchanged files imports no parser.
"""

from __future__ import annotations


def release(version: str) -> tuple[int, int, int] | None:
    """``"0.5.10rc1"`` → ``(0, 5, 10)``: a version's release numbers (PEP 440, through
    ``packaging``; pre-releases, dev and local parts dropped).  None when it is not one.
    (``packaging`` is imported here: the record-only commands need none of it.)"""
    from packaging.version import InvalidVersion, Version

    try:
        parts = Version(str(version).strip().lstrip("v")).release
    except InvalidVersion:
        return None
    return (tuple(parts) + (0, 0, 0))[:3]  # type: ignore[return-value]


def in_range(version: str, first: str, last: str | None) -> bool:
    """Whether ``version`` lies in releases ``first``–``last`` (None: newest)."""
    v, lo = release(version), release(first)
    hi = release(last) if last else None
    return v is not None and lo is not None and lo <= v and (hi is None or v <= hi)
