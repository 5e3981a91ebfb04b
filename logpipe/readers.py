"""Reading input files: transparent decompression and blocks of complete lines.

A block always ends with ``\\n``; bytes after the last newline of a file (a line still
being written) are never returned, so they are read by the next ingest instead.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import threading
import zlib
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from logpipe.lanes import lane_enabled

try:  # (built where a C compiler was at install)
    import logpipe._lines as _lines
except ImportError:  # pragma: no cover - a build without a compiler
    _lines = None  # type: ignore[assignment]

BLOCK_BYTES = 16 * 1024 * 1024
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".xz")

_damage: dict[str, str] = {}
_damage_lock = threading.Lock()


def take_damage(path: Path | str) -> str | None:
    """What was wrong with the compressed file ``path`` when it was last read (and forget
    it): None when it decompressed cleanly."""
    with _damage_lock:
        return _damage.pop(str(Path(path).resolve()), None)


def _decompress_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [EOFError, zlib.error, gzip.BadGzipFile,
                                         lzma.LZMAError, OSError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover - a dependency
        pass
    return tuple(errors)


class Guarded(io.RawIOBase):
    """A decompressing stream that ends where the archive is damaged instead of raising:
    a truncated ``.gz`` is a log cut short, so the lines before the damage are read and
    the damage is recorded (:func:`take_damage`) for the ingest to report."""

    def __init__(self, inner: Any, path: Path) -> None:
        super().__init__()
        self._inner = inner
        self._key = str(path.resolve())
        self.damage: str | None = None
        self._errors = _decompress_errors()

    def _failed(self, exc: BaseException) -> None:
        text = str(exc) or type(exc).__name__
        self.damage = f"{type(exc).__name__}: {text}" if str(exc) else text
        with _damage_lock:
            _damage[self._key] = self.damage

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, b: Any) -> int:
        """Fill ``b`` piece by piece (``read1``), so that what was decompressed before the
        damage is returned rather than lost with the call that met it."""
        view = memoryview(b).cast("B")
        got = 0
        while got < len(view) and self.damage is None:
            try:
                piece = self._inner.read1(min(len(view) - got, 1 << 20))
            except self._errors as exc:
                self._failed(exc)
                break
            if not piece:
                break
            view[got:got + len(piece)] = piece
            got += len(piece)
        return got

    def read(self, size: int = -1) -> bytes:
        out = bytearray()
        while (size < 0 or len(out) < size) and self.damage is None:
            want = 1 << 20 if size < 0 else min(size - len(out), 1 << 20)
            buf = bytearray(want)
            got = self.readinto(buf)
            if not got:
                break
            out += buf[:got]
        return bytes(out)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


PROSE_SUFFIXES = (".md", ".markdown", ".rst", ".html", ".htm", ".ipynb")
"""Notes, not logs: only the lines of their code blocks are read (:func:`code_lines`)."""
PROSE_MAX_BYTES = 64 * 1024 * 1024

_FENCE = re.compile(rb"^[ \t]*(```|~~~)")
_INLINE = re.compile(rb"`([^`\n]+)`")
_COMPLETE_RECORD = re.compile(
    rb"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] (?:Decode|Prefill) batch[.,].*"
    rb"(?:throughput|#running-req)"
    rb"|Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s,"
    rb" Running: \d+ reqs")
"""A whole record line, stamp and values: quoted inline in a note (a footnote), it is read
as the log line it is; a fragment of one is prose."""
_PRE_OPEN = re.compile(rb"<pre\b[^>]*>", re.I)
_PRE_CLOSE = re.compile(rb"</pre\s*>", re.I)


def is_prose(path: Path) -> bool:
    name = path.name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    return name.endswith(PROSE_SUFFIXES)


def code_lines(data: bytes, html: bool) -> bytes:
    """``data`` (a Markdown, reST or HTML file) with every line outside a fenced code block
    (or ``<pre>``) blanked, but for a whole record line set in inline code (a footnote
    quoting one decode line): line numbers are kept, and a log line mentioned in prose is
    never read as a record.  A notebook (``html`` False, no fences) keeps nothing."""
    out = []
    inside = False
    for line in data.split(b"\n"):
        if html:
            opened = _PRE_OPEN.search(line)
            closed = _PRE_CLOSE.search(line)
            if inside and closed:
                inside = False
                out.append(line[:closed.start()])
            elif not inside and opened and not (closed and closed.start() > opened.end()):
                inside = True
                out.append(line[opened.end():])
            else:
                out.append(line if inside else b"")
            continue
        if _FENCE.match(line):
            inside = not inside
            out.append(b"")
            continue
        if inside:
            out.append(line)
            continue
        whole = [m.group(1) for m in _INLINE.finditer(line)
                 if _COMPLETE_RECORD.search(m.group(1))]
        out.append(whole[0] if len(whole) == 1 else b"")
    return b"\n".join(out)


def _open_prose(path: Path) -> BinaryIO:
    name = path.name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        name = name.removesuffix(suffix)
    with _open_file(path) as fh:
        data = fh.read(PROSE_MAX_BYTES)
    if name.endswith(".ipynb"):
        data = b"\n" * data.count(b"\n")
    else:
        data = code_lines(data, html=name.endswith((".html", ".htm")))
    return io.BytesIO(data)


def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for reading, decompressing ``.gz``, ``.zst``, ``.bz2`` and ``.xz`` on
    the fly (a damaged archive reads up to its damage: :class:`Guarded`).  Notes
    (Markdown, reST, HTML, notebooks) give only the lines of their code blocks."""
    if is_prose(path):
        return _open_prose(path)
    return _open_file(path)


def _open_file(path: Path) -> BinaryIO:
    name = path.name.lower()
    if name.endswith(".gz"):
        return Guarded(gzip.open(path, "rb"), path)  # type: ignore[return-value]
    if name.endswith(".bz2"):
        return Guarded(bz2.open(path, "rb"), path)  # type: ignore[return-value]
    if name.endswith(".xz"):
        return Guarded(lzma.open(path, "rb"), path)  # type: ignore[return-value]
    if name.endswith(".zst") or name.endswith(".zstd"):
        return Guarded(_Zstd(path), path)  # type: ignore[return-value]
    return open(path, "rb")  # noqa: SIM115


class _Zstd:
    """Frames of a ``.zst`` file decompressed one after another; a file that ends inside a
    frame raises (zstandard's stream reader returns nothing for it, without a word)."""

    CHUNK = 1 << 20

    def __init__(self, path: Path) -> None:
        import zstandard

        self._zstd = zstandard
        self._raw = open(path, "rb")  # noqa: SIM115 (closed with the reader)
        self._obj = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._started = False

    def read1(self, size: int) -> bytes:
        while not self._pending:
            chunk = self._raw.read(self.CHUNK)
            if not chunk:
                if self._started and not self._obj.eof:
                    raise EOFError("the file ends inside a zstd frame (truncated)")
                return b""
            while chunk:
                self._started = True
                self._pending += self._obj.decompress(chunk)
                chunk = b""
                if self._obj.eof:  # a frame ended: the rest starts the next one
                    chunk = self._obj.unused_data
                    self._obj = self._zstd.ZstdDecompressor().decompressobj()
                    self._started = bool(chunk)
        out, self._pending = self._pending[:size], self._pending[size:]
        return out

    def close(self) -> None:
        self._raw.close()


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


def line_blocks(fh: BinaryIO, block_bytes: int | Callable[[], int] = BLOCK_BYTES
                ) -> Iterator[bytearray]:
    """Yield blocks of complete lines; a trailing partial line is held back.  ``block_bytes``:
    the size of every block, or what gives the next one's.

    Each block is read straight into its own buffer, the partial line carried from the
    previous block at its front (no copy of the block itself: at 32 MB blocks, the copies
    of ``carry + block`` and of the cut cost more than reading the file)."""
    carry = b""
    while True:
        size = block_bytes() if callable(block_bytes) else block_bytes
        buf = bytearray(len(carry) + _room(fh, size))
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


def line_hashes(path: Path, cuts: tuple[bytes, ...] = (b"",),
                lines: tuple[int, int] | None = None) -> list[array[int]] | None:
    """For each prefix of ``cuts``, a hash of every line of a file (decompressed, without
    its newline; item ``n - 1`` of line ``n``) with the prefix taken off, the same for the
    same bytes within this process (only equality is read from it).  A line that does not
    start with the prefix gets a hash of its own (of itself behind a newline, which no line
    holds; in C, under another seed).  ``lines``: only the lines ``first`` to ``last``
    (item ``n - first`` of line ``n``): the blocks before them are counted, not hashed,
    and the file is read no further.  None if the file cannot be read.  Memory: 8 bytes a
    line and prefix.  In C where it was built (``logpipe/_lines.c``: a 256 MB log in
    0.33-0.43 s against 0.62 s with one prefix, 0.33 s against 1.94 s with two), else
    Python's ``hash`` of bytes a line at a time."""
    first, last = lines if lines is not None else (1, None)
    out = [array("q") for _ in cuts]
    try:
        with open_binary(path) as fh:
            if _lines is not None and lane_enabled():
                carry = b""
                seen = 0  # (the lines before the block)
                while last is None or seen < last:
                    chunk = fh.read(BLOCK_BYTES)
                    block = carry + chunk if carry else chunk
                    if chunk and seen + 1 < first:  # (the window not reached: count)
                        n = _lines.count(block)
                        if seen + n < first:  # (every complete line before the first)
                            seen += n
                            carry = block[block.rfind(b"\n") + 1:]
                            continue
                    got, used = _lines.hashes(block, cuts, not chunk)
                    n = len(got[0]) // 8
                    lo = max(first - seen - 1, 0)
                    hi = n if last is None else max(min(n, last - seen), lo)
                    for hashes, raw in zip(out, got, strict=True):
                        hashes.frombytes(raw[8 * lo:8 * hi])
                    seen += n
                    carry = block[used:]
                    if not chunk:
                        break
                return out
            if lines is None and cuts == (b"",):
                out[0].extend(hash(raw.rstrip(b"\n")) for raw in fh)
                return out
            for no, raw in enumerate(fh, 1):
                if no < first:
                    continue
                if last is not None and no > last:
                    break
                line = raw.rstrip(b"\n")
                for cut, hashes in zip(cuts, out, strict=True):
                    hashes.append(hash(line[len(cut):]) if line.startswith(cut)
                                  else hash(b"\n" + line))
    except (OSError, EOFError, ValueError):
        return None
    return out


def lines_at(path: Path, wanted: set[int]) -> dict[int, bytes]:
    """The lines numbered ``wanted`` (from 1) of a file, decompressed, without their
    newline; read up to the last one wanted.  A file that cannot be read gives none."""
    out: dict[int, bytes] = {}
    last = max(wanted, default=0)
    try:
        with open_binary(path) as fh:
            for no, raw in enumerate(fh, 1):
                if no in wanted:
                    out[no] = raw.rstrip(b"\n")
                if no >= last:
                    break
    except (OSError, EOFError, ValueError):
        return {}
    return out
