"""A bad file never stops an ingest: damaged archives are read up to their damage and
reported, and an interrupted ingest says what it committed."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zstandard
from typer.testing import CliRunner

from logpipe import interrupts
from logpipe.cli import app
from logpipe.ingest import IngestInterrupted, group, ingest_files, ingest_paths, walk
from logpipe.ingest.base import EnvOptions
from logpipe.store import Store
from tests.conftest import ROOT, SAMPLES, query

REAL_LOG = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"
runner = CliRunner()

COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress,
            ".zst": lambda b: zstandard.ZstdCompressor().compress(b)}


def _folder(tmp_path: Path, suffix: str, cut: float) -> Path:
    """A truncated archive of a real server log beside an intact plain copy of another."""
    folder = tmp_path / "logs"
    (folder / "a").mkdir(parents=True)
    (folder / "b").mkdir()
    data = REAL_LOG.read_bytes()
    packed = COMPRESS[suffix](data)
    (folder / "a" / f"server.log{suffix}").write_bytes(packed[:int(len(packed) * cut)])
    shutil.copy(SAMPLES / "real-cpu" / "real-cpu-ngram-r1" / "server.log",
                folder / "b" / "server.log")
    return folder


def test_a_truncated_gz_keeps_its_lines_and_the_other_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path, ".gz", 0.8)
    db = tmp_path / "db.duckdb"
    result = runner.invoke(app, ["ingest", str(folder), "--db", str(db)])
    assert result.exit_code == 2, result.output  # something was damaged: said at the end
    assert "Aborted" not in result.output and "internal error" not in result.output
    assert "damaged: " in result.stdout and "server.log.gz: EOFError: Compressed file ended" \
        in result.stdout
    assert "line(s) before the damage were read" in result.stdout
    # the other file is whole, and the truncated one gave the lines before its damage
    rows = dict(query(db, "SELECT source_path, count(*) FROM batches GROUP BY 1"))
    intact = [n for p, n in rows.items() if p.endswith("b/server.log")]
    cut = [n for p, n in rows.items() if p.endswith("server.log.gz")]
    assert intact == [131] and len(cut) == 1 and 0 < cut[0] < 166
    # every line the damaged file gave is a whole line of the original: nothing invented
    original = REAL_LOG.read_text().splitlines()
    for (raw,) in query(db, "SELECT raw FROM rejects"):
        assert raw in original


@pytest.mark.parametrize("suffix", [".bz2", ".xz", ".zst"])
def test_other_damaged_archives_are_reported_not_fatal(tmp_path: Path, suffix: str) -> None:
    folder = _folder(tmp_path, suffix, 0.5)
    result = ingest_paths([folder], tmp_path / "db.duckdb")
    (damaged,) = result.damaged
    assert damaged.path.endswith(f"server.log{suffix}")
    assert not result.failed
    assert query(tmp_path / "db.duckdb", "SELECT count(*) FROM batches WHERE source_path "
                                         "LIKE '%b/server.log'") == [(131,)]


def test_garbage_with_an_archive_name_is_damaged(tmp_path: Path) -> None:
    (tmp_path / "notes.log.zst").write_bytes(b"this is not zstd\n" * 20)
    result = ingest_paths([tmp_path], tmp_path / "db.duckdb")
    (f,) = result.files
    assert f.damaged is not None and "Unknown frame descriptor" in f.damaged


def test_doctor_says_what_is_wrong_with_a_damaged_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path, ".gz", 0.8)
    result = runner.invoke(app, ["doctor", str(folder / "a" / "server.log.gz")])
    assert "damaged: EOFError: Compressed file ended" in result.stdout, result.output
    assert result.exit_code == 1
    assert "internal error" not in result.output


@pytest.mark.parametrize("grouped", [False, True])
def test_an_interrupt_reports_what_was_committed(tmp_path: Path, grouped: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the second file is read: the first is committed and said so, the
    second rolled back (one transaction per file), and a second ingest reads the rest.
    Small files written as one group are one transaction: the stop rolls back the group,
    and the report says that none of it was committed."""
    if not grouped:
        monkeypatch.setattr(group, "GROUP_FILES", 1)
    folder = _folder(tmp_path, ".gz", 1.0)
    db = tmp_path / "db.duckdb"
    seen = []

    def progress(n: int) -> None:
        seen.append(n)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(IngestInterrupted) as stop:
        files = walk([folder], exclude=[db])
        ingest_files(files, db, EnvOptions(), progress=progress)
    result = stop.value.result
    assert stop.value.exit_code == 130
    committed = query(db, "SELECT DISTINCT source_path FROM batches")
    again = ingest_paths([folder], db)
    if grouped:
        assert result.files == [] and len(result.pending) == 2 and committed == []
        assert sorted(f.status for f in again.files) == ["new", "new"]
        return
    assert len(result.files) == 1 and result.files[0].status == "new"
    assert len(result.pending) == 1
    assert committed == [(result.files[0].path,)]
    assert sorted(f.status for f in again.files) == ["new", "unchanged"]


def test_a_stop_that_meets_a_commit_still_counts_that_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT delivered while the first file's commit is being recorded: the commit and
    its record are done whole, the stop comes after them, and the report's committed
    files are exactly the files in the database (a stop between the two once left a
    committed file counted as pending)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are installed from the main thread only")
    monkeypatch.setattr(group, "GROUP_FILES", 1)  # a transaction per file
    folder = _folder(tmp_path, ".gz", 1.0)
    db = tmp_path / "db.duckdb"
    real = Store.transaction

    signalled = []

    @contextmanager
    def transaction(self: Store, on_commit: Callable[[], None] | None = None
                    ) -> Iterator[None]:
        if on_commit is None or signalled:  # (the schema's, and the files' after the first)
            with real(self, on_commit=on_commit):
                yield
            return

        def signal_then_record() -> None:
            signalled.append(1)
            os.kill(os.getpid(), signal.SIGINT)  # lands now, between commit and record
            time.sleep(0.05)
            on_commit()

        with real(self, on_commit=signal_then_record):
            yield

    monkeypatch.setattr(Store, "transaction", transaction)
    with interrupts.catch_signals(), pytest.raises(IngestInterrupted) as stop:
        ingest_files(walk([folder], exclude=[db]), db, EnvOptions())
    result = stop.value.result
    assert [f.status for f in result.files] == ["new"]
    assert len(result.pending) == 1 and result.pending[0] != result.files[0].path
    assert query(db, "SELECT DISTINCT source_path FROM batches") == [
        (result.files[0].path,)]


def test_sigterm_to_a_running_ingest_exits_130_with_the_committed_files(
        tmp_path: Path) -> None:
    logs = tmp_path / "many"
    data = REAL_LOG.read_bytes()
    for i in range(150):
        (logs / f"r{i:03d}").mkdir(parents=True)
        # each launch its own file (the first line differs: not a copy of another)
        (logs / f"r{i:03d}" / "server.log").write_bytes(f"run {i}\n".encode() + data)
    db = tmp_path / "db.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "logpipe.cli", "ingest", str(logs),
                             "--db", str(db)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not db.exists():
        time.sleep(0.1)
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the ingest finished before the signal")
    assert proc.returncode == 130, (out, err)
    assert "interrupted: " in out and "internal error" not in err
    assert "Error: interrupted:" in err and "run the same ingest again" in err
    committed = int(out.split("Ingested into ")[1].split(": ")[1].split(" file")[0])
    assert query(db, "SELECT count(DISTINCT source_path) FROM batches") == [(committed,)]
