"""The copies test's line hashes (:func:`logpipe.readers.line_hashes`) say the same in C
(``logpipe/_lines.c``) as in Python: which lines of which files are equal once each prefix
is taken off, over blocks that cut lines, compressed files, a last line without its
newline, carriage returns, empty lines and lines without the prefix."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from logpipe import readers

pytestmark = pytest.mark.skipif(readers._lines is None, reason="logpipe._lines was not built")

CUTS = (b"", b"[srv] ", b"srv | ")


def _lines(rnd: random.Random, n: int) -> list[bytes]:
    words = [b"", b"decode batch", b"x" * 300, b"\r", b"a\rb", b"\xff\xfe", b"srv | x", b"[srv]"]
    out = []
    for _ in range(n):
        body = b" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 3)))
        out.append(rnd.choice([b"", b"", b"[srv] ", b"srv | "]) + body)
    return out


def _classes(files: list[list[int]]) -> list[list[int]]:
    """Each hash as the index of the first (file, line) that has it: the partition into
    equal lines, whatever the hash's values."""
    first: dict[int, int] = {}
    return [[first.setdefault(h, len(first)) for h in hashes] for hashes in files]


@pytest.mark.parametrize("seed", range(6))
def test_c_and_python_hash_lines_alike(tmp_path: Path, seed: int,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    paths = []
    for k in range(2):
        data = b"\n".join(_lines(rnd, rnd.choice([0, 1, 50, 600])))
        if data and rnd.random() < 0.5:
            data += b"\n"
        path = tmp_path / (f"f{k}.log.gz" if seed % 2 else f"f{k}.log")
        path.write_bytes(gzip.compress(data) if seed % 2 else data)
        paths.append(path)
    monkeypatch.setattr(readers, "BLOCK_BYTES", rnd.choice([7, 256, 1 << 20]))  # (lines cut)
    got = {}
    for lane in ("1", "0"):
        monkeypatch.setenv("LOGPIPE_FASTLANE", lane)
        per_file = [readers.line_hashes(p, CUTS) for p in paths]
        assert all(h is not None for h in per_file)
        # each file with each prefix off, and every file as it is (the other side of a
        # relay's comparison): one partition
        got[lane] = _classes([list(h[c]) for h in per_file for c in range(len(CUTS))]
                             + [list(readers.line_hashes(p)[0]) for p in paths])
    assert got["1"] == got["0"]
    lines = sum(len(x) for x in got["1"])
    assert lines == 0 or len({v for x in got["1"] for v in x}) > 1


def test_a_relayed_line_hashes_as_the_line_it_relays(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "driver.log", tmp_path / "server.log"
    mine.write_bytes(b"[srv] Decode batch. #running-req: 3\nnot relayed\n")
    theirs.write_bytes(b"Decode batch. #running-req: 3\n\nnot relayed")
    (relayed, kept), (plain,) = (readers.line_hashes(mine, (b"", b"[srv] ")),
                                 readers.line_hashes(theirs))
    assert relayed[0] != plain[0] and kept[0] == plain[0]  # the tag taken off: the same line
    assert relayed[1] == plain[2]  # (a line without the tag, as it is)
    assert kept[1] != plain[2]  # (with the tag to take off, it is no line of the server's)
    assert len(plain) == 3


def test_a_driver_relaying_under_many_tags_is_hashed_under_each(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """A copy's first lines may carry many relay tags (one a server): every one is a
    prefix to take off, however many, in C as in Python."""
    tags = tuple(f"[srv{k}] ".encode() for k in range(40))
    path = tmp_path / "driver.log"
    path.write_bytes(b"".join(t + b"Decode batch\n" for t in tags))
    got = {}
    for lane in ("1", "0"):
        monkeypatch.setenv("LOGPIPE_FASTLANE", lane)
        hashes = readers.line_hashes(path, (b"", *tags))
        assert hashes is not None and len(hashes) == 41
        got[lane] = _classes([list(h) for h in hashes])
    assert got["1"] == got["0"]
    # line k with its own tag taken off: the same text for every k
    assert len({got["1"][k + 1][k] for k in range(40)}) == 1


@pytest.mark.parametrize("seed", range(4))
def test_a_window_of_lines_hashes_as_those_lines_of_the_whole(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines ``first`` to ``last`` alone (the copies test's window: a short paste of a long
    log is set against the log's lines of its time) are the same hashes as those lines of
    the whole file, in C (blocks before the window counted, not hashed; none read after
    it) as in Python, over blocks that cut lines, a compressed file, a last line without
    its newline, and windows before, across and past the file's end."""
    rnd = random.Random(seed)
    data = b"\n".join(_lines(rnd, 300)) + (b"\n" if seed % 2 else b"")
    path = tmp_path / ("f.log.gz" if seed >= 2 else "f.log")
    path.write_bytes(gzip.compress(data) if seed >= 2 else data)
    total = len(data.split(b"\n")) - (1 if data.endswith(b"\n") else 0)
    windows = [(1, total), (1, 1), (total, total), (1, 0), (5, 4), (total + 1, total + 9),
               *[tuple(sorted(rnd.sample(range(1, total + 20), 2))) for _ in range(6)]]
    for lane in ("1", "0"):
        monkeypatch.setenv("LOGPIPE_FASTLANE", lane)
        monkeypatch.setattr(readers, "BLOCK_BYTES", rnd.choice([31, 256, 4096]))
        whole = readers.line_hashes(path, CUTS)
        assert whole is not None and len(whole[0]) == total
        for first, last in windows:
            part = readers.line_hashes(path, CUTS, (first, last))
            assert part is not None
            for c in range(len(CUTS)):
                assert list(part[c]) == list(whole[c])[first - 1:max(last, first - 1)], (
                    lane, first, last)

