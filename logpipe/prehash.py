"""The SHA-256 of the big logs a command was given, computed while the process starts.

An ingest records the SHA-256 of the bytes it read of each file (``sources.sha256``: of a
new log, every complete line).  Hashed beside the parse, a 256 MB log's ~0.23 CPU-s
compete with the parse for the two cores; the process's start (the imports of the CLI,
DuckDB and polars: ~0.35 s on one core) leaves the second core idle.  ``logpipe ingest``
calls :func:`start` with the files it was given before it imports the ingest, and
:func:`logpipe.ingest.logfile.read_log` takes the hash (:func:`take`) of a file it reads
from its first byte where the file is still the one hashed (size, modification time and
inode, as the change detection compares them).  A file that grew past the hashed bytes
(a live log) has only its new bytes hashed by the reader; a file that changed otherwise is
hashed again whole, as it would have been without this.

Measured on the 256 MB EAGLE-3 mix, alternately with the code before: 3.49-3.65 s
against 3.71-3.75 s; an unchanged big file's re-ingest pays the hashing it no longer
needs beside its start (0.47-0.48 s against 0.43-0.45 s: :func:`forget` stops it, most
of it done by then).

Light on purpose: imported before the ingest's imports (``hashlib``, ``os``,
``threading`` and the readers' module), the thread started at once.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from logpipe.readers import reads_raw

MIN_BYTES = 16 * 1024 * 1024
"""Files smaller than this are hashed by their reader (a small file's hash is a few ms)."""
CHUNK_BYTES = 64 * 1024 * 1024
"""Bytes read and hashed at a time: the thread takes the interpreter's lock between
chunks, each time waiting for the importing main thread to give it up (256 MB hashed
beside the imports in ~0.4 s in 16 MB chunks, ~0.34 s in 64 MB ones)."""


class Hashed:
    """A file's hash ahead: the SHA-256 state after its last complete line."""

    def __init__(self, key: tuple[int, int, int]) -> None:
        self.key = key
        """Size, modification time (ns) and inode when the hashing began."""
        self.done = threading.Event()
        self.cancelled = False
        self.cut: int | None = None
        """Bytes hashed (through the last newline); None: the file changed while it was
        hashed, or could not be read."""
        self.state: Any = None

    def cancel(self) -> None:
        """Not needed: stop hashing it (its reader reads it otherwise)."""
        self.cancelled = True

    def through(self, path: Path, offset: int) -> Any:
        """A ``hashlib`` object holding the first ``offset`` bytes of ``path``: the state
        hashed ahead, with the bytes past it (a file that grew) read and hashed here; the
        whole prefix read and hashed here where the file changed otherwise."""
        self.done.wait()
        if self.cut is not None and self.cut <= offset:
            hasher, start = self.state.copy(), self.cut
        else:
            hasher, start = hashlib.sha256(), 0
        if start < offset:
            with open(path, "rb") as fh:
                fh.seek(start)
                left = offset - start
                while left > 0:
                    data = fh.read(min(CHUNK_BYTES, left))
                    if not data:
                        break
                    hasher.update(data)
                    left -= len(data)
        return hasher


_lock = threading.Lock()
_ahead: dict[tuple[int, int], Hashed] = {}
"""The files to hash or hashed, by device and inode."""


def start(paths: Iterable[Path]) -> None:
    """Hash each plain file of ``paths`` of at least :data:`MIN_BYTES` (folders and small
    files are left to their readers) on a thread of its own, one after another."""
    todo: list[tuple[str, Hashed]] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not os.path.isfile(path) or st.st_size < MIN_BYTES or not reads_raw(Path(path)):
            continue
        ident = (st.st_dev, st.st_ino)
        with _lock:
            if ident in _ahead:
                continue
            entry = _ahead[ident] = Hashed((st.st_size, st.st_mtime_ns, st.st_ino))
        todo.append((str(path), entry))
    if todo:
        threading.Thread(target=_hash_all, args=(todo,), daemon=True,
                         name="logpipe-prehash").start()


def take(stat: os.stat_result) -> Hashed | None:
    """The hash ahead of the file ``stat`` describes, where it is still the file hashed
    (it leaves the registry: one reader takes it).  Call :meth:`Hashed.cancel` where it
    is not used after all."""
    with _lock:
        entry = _ahead.pop((stat.st_dev, stat.st_ino), None)
    if entry is None:
        return None
    if entry.key != (stat.st_size, stat.st_mtime_ns, stat.st_ino):
        entry.cancel()
        return None
    return entry


def forget(stat: os.stat_result) -> None:
    """The file ``stat`` describes is not read (unchanged since the last ingest): its hash
    ahead is stopped."""
    entry = take(stat)
    if entry is not None:
        entry.cancel()


def _hash_all(todo: list[tuple[str, Hashed]]) -> None:
    buf = bytearray(CHUNK_BYTES)
    view = memoryview(buf)
    for path, entry in todo:
        try:
            if not entry.cancelled:
                _hash_one(path, entry, buf, view)
        except OSError:
            entry.cut = None
        finally:
            entry.done.set()


def _hash_one(path: str, entry: Hashed, buf: bytearray, view: memoryview) -> None:
    """The SHA-256 of ``path`` through its last newline (what a reader of its complete
    lines reads) of the bytes it had when it was listed, where it did not change
    meanwhile."""
    hasher = hashlib.sha256()
    pos, cut, state = 0, 0, hasher.copy()
    with open(path, "rb", buffering=0) as fh:
        st = os.fstat(fh.fileno())
        if (st.st_size, st.st_mtime_ns, st.st_ino) != entry.key:
            return
        size = entry.key[0]
        while pos < size and not entry.cancelled:
            n = fh.readinto(view[:min(CHUNK_BYTES, size - pos)])
            if not n:
                break
            last = buf.rfind(b"\n", 0, n)
            if last < 0:
                hasher.update(view[:n])
            else:
                hasher.update(view[:last + 1])
                cut, state = pos + last + 1, hasher.copy()
                hasher.update(view[last + 1:n])
            pos += n
        after = os.fstat(fh.fileno())
    if entry.cancelled or pos != entry.key[0] or (
            after.st_size, after.st_mtime_ns, after.st_ino) != entry.key:
        return
    entry.cut, entry.state = cut, state
