"""One clock: the instants behind the stamps of different sources.

SGLang prints its stamps in the server host's local time with no zone; docker's stamps,
profiler traces and zoned outer stamps are UTC; file modification times are the ingesting
host's.  Stored stamps stay as they were printed, and each run carries the offset of its
stamps from UTC (``runs.utc_offset_s``) with where it came from, so that anything that
compares times across sources (linking a trace or a benchmark file to a run) compares
instants.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from logpipe.errors import InputError

QUARTER_HOUR = 900
_OFFSET_RE = re.compile(r"^(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?$")


def offset_of(zone: str, at: datetime | None = None) -> int:
    """Seconds east of UTC of ``zone`` (``UTC``, ``+02:00``, ``-0700``, or an IANA name,
    whose offset at ``at``, local wall time, counts daylight saving)."""
    text = zone.strip()
    if text.upper() in ("UTC", "Z", "GMT"):
        return 0
    m = _OFFSET_RE.match(text)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return sign * (int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60)
    try:
        tz = ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InputError(f"unknown time zone {zone!r}",
                         hint="give an IANA name (Europe/Berlin), UTC, or +HH:MM") from exc
    offset = (at or datetime.now()).replace(tzinfo=tz).utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def host_offset(at: datetime | None = None) -> int:
    """This host's offset from UTC at local wall time ``at`` (now when None)."""
    local = (at or datetime.now()).astimezone()
    offset = local.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


OFFSET_LIMIT_S = (1 << 31) - 1
"""The largest offset ``runs.utc_offset_s`` (32 bits) holds: 68 years."""


def rounded(seconds: float) -> int | None:
    """An offset learned from two clocks, to the quarter hour zones are made of (a host
    clock set days off still aligns its stamps with the other clock); None where they
    differ by more than 68 years (a stamp of a year no clock shows, in a damaged line:
    no offset, rather than a run row that cannot be written and a file that fails)."""
    if not abs(seconds) <= OFFSET_LIMIT_S:  # (nan too)
        return None
    offset = int(round(seconds / QUARTER_HOUR) * QUARTER_HOUR)
    return offset if abs(offset) <= OFFSET_LIMIT_S else None


def to_utc(local: datetime | None, offset_s: int | None) -> datetime | None:
    """The instant (naive UTC) of a local stamp; an unknown offset is this host's."""
    if local is None:
        return None
    off = offset_s if offset_s is not None else host_offset(local)
    return local - timedelta(seconds=off)


def file_time_utc(mtime: datetime | None) -> datetime | None:
    """The instant of a modification time stored as this host's local time."""
    if mtime is None:
        return None
    return mtime.astimezone(UTC).replace(tzinfo=None)
