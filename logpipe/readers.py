"""Reading input files: transparent decompression and blocks of complete lines.

A block always ends with ``\\n``; bytes after the last newline of a file (a line still
being written) are never returned, so they are read by the next ingest instead.
"""

from __future__ import annotations

import gzip
import io
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


def line_blocks(fh: BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Yield blocks of complete lines; a trailing partial line is held back."""
    carry = b""
    while True:
        block = fh.read(block_bytes)
        if not block:
            return
        data = carry + block
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1:]
        yield data[: cut + 1]
