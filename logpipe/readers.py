"""Reading input files: transparent decompression and blocks of complete lines.

A block always ends with ``\\n``; bytes after the last newline of a file (a line still
being written) are never returned, so they are read by the next ingest instead.
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

BLOCK_BYTES = 16 * 1024 * 1024
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd")


def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for reading, decompressing ``.gz`` and ``.zst`` on the fly."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if name.endswith(".zst") or name.endswith(".zstd"):
        import zstandard

        raw = open(path, "rb")  # noqa: SIM115 (closed with the reader)
        reader = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
        return io.BufferedReader(reader)  # type: ignore[arg-type]
    return open(path, "rb")  # noqa: SIM115


def read_head(path: Path, size: int) -> bytes:
    with open_binary(path) as fh:
        return fh.read(size)


def read_exact(fh: BinaryIO, n: int, sink: object | None = None) -> int:
    """Read ``n`` bytes from ``fh`` feeding ``sink.update``; returns the bytes read."""
    got = 0
    while got < n:
        block = fh.read(min(BLOCK_BYTES, n - got))
        if not block:
            break
        if sink is not None:
            sink.update(block)  # type: ignore[attr-defined]
        got += len(block)
    return got


def skip_to(fh: BinaryIO, path: Path, offset: int) -> int:
    """Position ``fh`` (opened by :func:`open_binary`) at decompressed ``offset``: a seek
    for plain files, reading through for compressed ones.  Returns the offset reached."""
    if fh.seekable() and not path.name.lower().endswith(COMPRESSED_SUFFIXES):
        fh.seek(offset)
        return offset
    return read_exact(fh, offset)


def line_blocks(fh: BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[bytearray]:
    """Yield blocks of complete lines; a trailing partial line is held back.

    Each block is read straight into its own buffer, the partial line carried from the
    previous block at its front (no copy of the block itself: at 32 MB blocks, the copies
    of ``carry + block`` and of the cut cost more than reading the file)."""
    carry = b""
    while True:
        buf = bytearray(len(carry) + _room(fh, block_bytes))
        buf[:len(carry)] = carry
        got = fh.readinto(memoryview(buf)[len(carry):])  # type: ignore[attr-defined]
        if not got:
            return
        end = len(carry) + got
        cut = buf.rfind(b"\n", 0, end)
        if cut < 0:
            carry = bytes(buf[:end])
            continue
        carry = bytes(buf[cut + 1:end])
        del buf[cut + 1:]
        yield buf


def _room(fh: BinaryIO, block_bytes: int) -> int:
    """Bytes to make room for in the next block: at most what is left of a plain file
    (a small file or an append is not given a zeroed 32 MB buffer, ~26 ms each), plus
    one so that a file that grew meanwhile is read on; ``block_bytes`` for a stream."""
    raw = getattr(fh, "raw", None)
    if not isinstance(raw, io.FileIO):  # decompressing, or in memory: size unknown
        return block_bytes
    try:
        left = os.fstat(raw.fileno()).st_size - fh.tell()
    except OSError:
        return block_bytes
    return max(1, min(block_bytes, left + 1))
