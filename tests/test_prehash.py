"""A big log's SHA-256 hashed while the process starts (:mod:`logpipe.prehash`) is the one
its reader would have recorded: through the last complete line, for a new file, a file
whose last line is cut, one that changed or grew after it was hashed, an append, and
through the CLI; compressed and small files are left to their readers."""

from __future__ import annotations

import gzip
import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from logpipe import prehash
from logpipe.cli import app
from logpipe.ingest import ahead, group, ingest_paths
from tests.conftest import SAMPLES

LOG = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int | None, int]]]:
    """Every file hashed ahead, in chunks that cut lines, and read as a big file (in
    blocks, not parsed ahead); yields each use of a hash ahead: ``(bytes it held, bytes
    the reader read)``."""
    monkeypatch.setattr(prehash, "MIN_BYTES", 0)
    for module in (ahead, group):
        monkeypatch.setattr(module, "SMALL_FILE_BYTES", 16 * 1024)
    monkeypatch.setattr(prehash, "CHUNK_BYTES", 4099)
    uses: list[tuple[int | None, int]] = []
    through = prehash.Hashed.through

    def spy(self: prehash.Hashed, path: Path, offset: int) -> Any:
        self.done.wait()
        uses.append((self.cut, offset))
        return through(self, path, offset)

    monkeypatch.setattr(prehash.Hashed, "through", spy)
    yield uses
    prehash._ahead.clear()


def _source(db: Path) -> tuple:
    con = duckdb.connect(str(db), read_only=True)
    try:
        (row,) = con.execute("SELECT sha256, bytes_ingested, tail_sha256, head_sha256, "
                             "lines FROM sources").fetchall()
        return row
    finally:
        con.close()


def _without(path: Path, db: Path) -> tuple:
    """The source row of ``path`` ingested with nothing hashed ahead."""
    prehash._ahead.clear()
    ingest_paths([path], db)
    return _source(db)


def _wait(path: Path) -> prehash.Hashed:
    st = path.stat()
    entry = prehash._ahead[(st.st_dev, st.st_ino)]
    assert entry.done.wait(10)
    return entry


@pytest.mark.parametrize("cut_last_line", [False, True])
def test_the_hash_ahead_is_the_one_the_reader_records(
        tmp_path: Path, cut_last_line: bool, small_chunks: list[tuple[int | None, int]]
        ) -> None:
    path = tmp_path / "server.log"
    data = LOG.read_bytes()
    if cut_last_line:
        data += b"[2026-12-01 09:00:00] a line still being writ"
    path.write_bytes(data)
    prehash.start([path])
    ingest_paths([path], tmp_path / "ahead.duckdb")
    got = _source(tmp_path / "ahead.duckdb")
    complete = data[:data.rfind(b"\n") + 1]
    assert small_chunks == [(len(complete), len(complete))]  # (used, nothing read again)
    assert got[0] == hashlib.sha256(complete).hexdigest()
    assert got == _without(path, tmp_path / "plain.duckdb")


def test_a_file_changed_after_it_was_hashed_is_hashed_by_its_reader(
        tmp_path: Path, small_chunks: list[tuple[int | None, int]]) -> None:
    path = tmp_path / "server.log"
    shutil.copy(LOG, path)
    prehash.start([path])
    _wait(path)
    with path.open("ab") as fh:  # (its size and mtime are not those hashed)
        fh.write(b"[2026-12-01 09:00:00] one more line\n")
    ingest_paths([path], tmp_path / "ahead.duckdb")
    assert small_chunks == []
    assert _source(tmp_path / "ahead.duckdb") == _without(path, tmp_path / "plain.duckdb")


def test_bytes_past_the_hash_ahead_are_hashed_on(tmp_path: Path) -> None:
    """A file that grew between the hash and the end of its reading (a live log): the
    bytes past the hash are read and hashed on; a hash of a file that changed while it
    was hashed is not used (the prefix is read again)."""
    path = tmp_path / "server.log"
    shutil.copy(LOG, path)
    prehash.start([path])
    entry = _wait(path)
    assert entry.cut == path.stat().st_size
    with path.open("ab") as fh:
        fh.write(b"[2026-12-01 09:00:00] grown\n" * 3)
    data = path.read_bytes()
    assert entry.through(path, len(data)).hexdigest() == hashlib.sha256(data).hexdigest()
    assert entry.through(path, 1000).hexdigest() == hashlib.sha256(data[:1000]).hexdigest()
    entry.cut = None
    assert entry.through(path, len(data)).hexdigest() == hashlib.sha256(data).hexdigest()


def test_an_append_is_hashed_by_its_reader(tmp_path: Path,
                                           small_chunks: list[tuple[int | None, int]]
                                           ) -> None:
    data = LOG.read_bytes()
    half = data.find(b"\n", len(data) // 2) + 1
    dbs = {}
    for name in ("ahead", "plain"):
        path = tmp_path / name / "server.log"
        path.parent.mkdir()
        path.write_bytes(data[:half])
        dbs[name] = tmp_path / f"{name}.duckdb"
        ingest_paths([path], dbs[name])
        with path.open("ab") as fh:
            fh.write(data[half:])
        if name == "ahead":
            prehash.start([path])
            entry = _wait(path)
        ingest_paths([path], dbs[name])
    assert small_chunks == [] and entry.cancelled
    assert _source(dbs["ahead"]) == _source(dbs["plain"])


def test_compressed_small_and_folder_paths_are_left_to_their_readers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packed = tmp_path / "server.log.gz"
    packed.write_bytes(gzip.compress(LOG.read_bytes()))
    note = tmp_path / "notes.md"
    note.write_bytes(LOG.read_bytes())
    small = tmp_path / "small.log"
    small.write_bytes(b"x\n")
    monkeypatch.setattr(prehash, "MIN_BYTES", 3)
    prehash.start([packed, note, small, tmp_path, tmp_path / "missing.log"])
    assert prehash._ahead == {}


def test_the_cli_hashes_the_logs_it_is_given_ahead(
        tmp_path: Path, small_chunks: list[tuple[int | None, int]]) -> None:
    path = tmp_path / "server.log"
    shutil.copy(LOG, path)
    result = CliRunner().invoke(app, ["ingest", str(path), "--db", str(tmp_path / "a.duckdb")])
    assert result.exit_code == 0, result.output
    size = path.stat().st_size
    assert small_chunks == [(size, size)]
    assert _source(tmp_path / "a.duckdb") == _without(path, tmp_path / "plain.duckdb")


def test_an_unchanged_file_stops_its_hash_ahead(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "server.log"
    shutil.copy(LOG, path)
    db = tmp_path / "a.duckdb"
    ingest_paths([path], db)
    cancelled: list[prehash.Hashed] = []
    cancel = prehash.Hashed.cancel

    def spy(self: prehash.Hashed) -> None:
        cancelled.append(self)
        cancel(self)

    monkeypatch.setattr(prehash.Hashed, "cancel", spy)
    prehash.start([path])
    assert ingest_paths([path], db).count("unchanged") == 1
    assert len(cancelled) == 1 and prehash._ahead == {}
