"""Change detection: what is new in a file, decided from its ``sources`` row.

See :mod:`logpipe.ingest` for the cases.  A file is its (device, inode) plus the hashes of
what was read from it (first 4 KiB, last 1 MiB), as logrotate-aware tailers keep it.
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from logpipe.readers import COMPRESSED_SUFFIXES, open_binary, read_exact, skip_to
from logpipe.store import Store

HEAD_HASH_BYTES = 4096
TAIL_HASH_BYTES = 1 << 20


def head_sha(head: bytes) -> str:
    """The hash ``sources.head_sha256`` keeps of a file's head."""
    return hashlib.sha256(head[:HEAD_HASH_BYTES]).hexdigest()


def stat_key(stat: os.stat_result) -> tuple[int, int, int]:
    """Size, mtime and inode: what says a file is still the one read."""
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


def same_stat(known: dict[str, Any] | None, stat: os.stat_result) -> bool:
    """A server log whose size and mtime are those of its ``sources`` row, on the same
    inode where the row has one: unchanged, not re-read."""
    return (known is not None and known["size_bytes"] == stat.st_size
            and known["mtime"] == datetime.fromtimestamp(stat.st_mtime)
            and known.get("inode") in (None, stat.st_ino))


def window_sha(path: Path, end: int, size: int) -> str | None:
    """SHA-256 of the ``size`` bytes before offset ``end`` (decompressed), or None when
    the file is shorter."""
    start = max(0, end - size)
    with open_binary(path) as fh:
        if skip_to(fh, path, start) != start:
            return None
        data = fh.read(end - start)
    return hashlib.sha256(data).hexdigest() if len(data) == end - start else None


def _same_prefix(path: Path, row: dict[str, Any]) -> bool:
    """Does ``path`` still begin with the bytes ingested for ``row``?  Checked by the hash
    of the first 4 KiB and of the last (up to) 1 MiB ingested, not by re-reading it all."""
    n = int(row["bytes_ingested"] or 0)
    if row.get("tail_sha256") is None:  # rows written before migration 0003
        h = hashlib.sha256()
        with open_binary(path) as fh:
            got = read_exact(fh, n, h)
        return got == n and h.hexdigest() == row["sha256"]
    head = window_sha(path, min(n, HEAD_HASH_BYTES), HEAD_HASH_BYTES)
    return head == row["head_sha256"] and window_sha(path, n, TAIL_HASH_BYTES) == \
        row["tail_sha256"]


BEGINS_WITH = "begins with the content of "
"""The detail of a new file whose first bytes are all of another file's, read already."""


def _longer(path: Path, stat: os.stat_result, row: dict[str, Any]) -> bool:
    """Does ``path`` hold more than the bytes ingested for ``row`` (of a file it begins
    with)?  Its size, or for a compressed file, a byte past them."""
    n = int(row["bytes_ingested"] or 0)
    if not path.name.lower().endswith(COMPRESSED_SUFFIXES):
        return stat.st_size > n
    with open_binary(path) as fh:
        return skip_to(fh, path, n) == n and bool(fh.read(1))


def same_bytes(path: Path, stat: os.stat_result, row: dict[str, Any]) -> bool:
    """Does ``path`` hold exactly the bytes ingested for ``row``, whatever its mtime (a
    fresh clone, a copy that kept no times)?  By the hashes its row keeps."""
    return (row["size_bytes"] == stat.st_size and _same_prefix(path, row)
            and not _longer(path, stat, row))


def _retire(store: Store, key: str, existing: dict[str, Any]) -> None:
    """Set the rows of a file that no longer lives at ``key`` aside under a path of their
    own (``key`` plus the old file's identity), so that its rotated copy takes them."""
    aside = f"{key} (replaced file {existing.get('device')}:{existing.get('inode')})"
    store.move_source(key, aside)


def decide(store: Store, path: Path, key: str, stat: os.stat_result, head_sha: str,
            replace: bool, unknown: bool = False
            ) -> tuple[str, dict[str, Any] | None, str | None]:
    """``(status, existing source row to continue from, detail)`` for a log file; the
    status is one of the module docstring's.  Moves and set-asides happen here.
    ``unknown``: the caller knows the store has no row for ``key``."""
    existing = None if unknown else store.source(key)
    if existing is not None and existing.get("inode") not in (None, stat.st_ino) and \
            not _same_prefix(path, existing):
        _retire(store, key, existing)  # rotated by rename: another file lives here now
        existing = None
    if existing is None:
        for other in store.sources_with_head(head_sha):
            if not _same_prefix(path, other):
                continue
            old = Path(other["path"])
            if old.exists() and _same_prefix(old, other):
                if _longer(path, stat, other):
                    # the same log, copied earlier (or kept longer): read whole, it is a
                    # new file; of the two, the one with fewer records is then the copy
                    return "new", None, f"{BEGINS_WITH}{other['path']}"
                return "duplicate", None, f"same content as {other['path']}"
            store.move_source(other["path"], key)
            return "moved", store.source(key), None
        for gen in store.generations_with_head(head_sha):
            n = int(gen[2] or 0)
            if window_sha(path, n, TAIL_HASH_BYTES) == gen[3]:
                extra = stat.st_size - n
                return "duplicate", None, (
                    f"rotated copy of {gen[0]} before its truncation, already ingested"
                    + (f"; {extra} byte(s) after the ingested part are not read (written "
                       "between the last ingest and the rotation)" if extra > 0 else ""))
        return "new", None, None
    if _same_prefix(path, existing):
        return "appended", existing, None
    if replace:
        store.delete_source(key)
        return "rewritten", None, None
    compressed = path.name.lower().endswith(COMPRESSED_SUFFIXES)
    if not compressed and stat.st_size < int(existing["bytes_ingested"] or 0):
        # (a compressed file's size is not comparable with the bytes read from it)
        store.end_generation(existing)
        return "truncated", existing, None
    return "changed", None, (
        "the bytes ingested earlier changed in place; its rows are kept as they were. "
        "Pass --replace to replace them with the file's content")


def record_log_source(store: Store, key: str, path: Path, *, kind: str,
                      stat: os.stat_result, existing: dict[str, Any] | None, status: str,
                      head: bytes, tail: bytes | bytearray, offset: int,
                      hasher: Any, previous_sha: str | None, lines: int, new_lines: int,
                      rejected: int, noise: int, state_json: str, generations: Any,
                      parser_version: str) -> None:
    """Write a server log's ``sources`` row after an engine's parser read it up to
    ``offset``: the hashes :func:`decide` compares next time (``head``: the file's first
    bytes; ``tail``: the last bytes read; ``hasher``: this read's bytes, chained onto
    ``previous_sha`` on an append) and the parser's resumable state.  A read that added no line
    keeps the row's hashes (nothing new was hashed)."""
    if existing is not None and new_lines == 0 and status != "truncated":
        tail_sha, sha = existing["tail_sha256"], existing["sha256"]
    else:
        tail = bytes(tail[-TAIL_HASH_BYTES:])
        tail_sha = (hashlib.sha256(tail).hexdigest()
                    if len(tail) >= min(offset, TAIL_HASH_BYTES)
                    else window_sha(path, offset, TAIL_HASH_BYTES))
        # the first ingest hashes everything; each append chains the hash of its own bytes
        sha = hasher.hexdigest() if previous_sha is None else hashlib.sha256(
            (previous_sha + hasher.hexdigest()).encode()).hexdigest()
    store.upsert_source({
        "path": key, "kind": kind, "size_bytes": stat.st_size, "sha256": sha,
        "bytes_ingested": offset, "lines": lines, "rejected": rejected,
        "noise_lines": noise, "ingested_at": datetime.now(), "parser_version": parser_version,
        # of the bytes read (a partial last line is not): what _same_prefix compares
        "head_sha256": hashlib.sha256(head[:min(offset, HEAD_HASH_BYTES)]).hexdigest(),
        "tail_sha256": tail_sha,
        "mtime": datetime.fromtimestamp(stat.st_mtime), "state": state_json,
        "device": stat.st_dev, "inode": stat.st_ino, "generations": generations,
    })
