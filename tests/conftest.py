"""Shared fixtures.  Tests run with TZ=America/Los_Angeles: a zone that is not UTC (and has
daylight saving), so that nothing silently assumes the ingesting host runs on UTC."""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

os.environ["TZ"] = "America/Los_Angeles"
if hasattr(time, "tzset"):
    time.tzset()

# new databases start as a copy of an empty one kept in a cache (logpipe.store.template):
# the suite's own, not the user's, made by the first database a test process creates
_CACHE = tempfile.mkdtemp(prefix="logpipe-test-cache-")
os.environ["LOGPIPE_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "test.duckdb"


def _samples_key() -> str:
    """What the samples database is made from: the package (its code, schemas and built
    lanes), the samples where they lie (the database keeps their paths, and the stat that
    tells an unchanged file from one to read again: another checkout of the same content,
    even at the same path, makes its own), the settings that change an ingest
    (``LOGPIPE_*``), Python and the libraries that parse and store."""
    import sys
    from importlib.metadata import version

    digest = hashlib.sha256(sys.version.encode())
    for lib in ("duckdb", "polars", "pyarrow", "numpy"):
        digest.update(f"{lib}={version(lib)}\0".encode())
    digest.update(str(SAMPLES).encode() + b"\0")
    for base in (ROOT / "logpipe", SAMPLES):
        for path in sorted(base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
                digest.update(path.read_bytes())
                if base == SAMPLES:
                    st = path.stat()
                    digest.update(f"{st.st_mtime_ns}:{st.st_ino}\0".encode())
    for name, value in sorted(os.environ.items()):
        if name.startswith("LOGPIPE_") and name != "LOGPIPE_CACHE":
            digest.update(f"{name}={value}\0".encode())
    return digest.hexdigest()[:16]


_SHARED_DAYS = 2
"""Shared samples databases of other keys older than this are removed when one is made."""


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled samples ingested once (read-only use; each test process gets its own
    copy).  The database is made once for every test process and every test command of
    this checkout (the workers of ``-n 2``, the slow tests' command and the suite's): the
    first makes it under a lock in the system's temporary folder, keyed by
    :func:`_samples_key`, and the others copy it (~10 s of ingest each, saved)."""
    from logpipe.ingest import ingest_paths

    shared = Path(tempfile.gettempdir()) / f"logpipe-test-samples-{_samples_key()}"
    shared.mkdir(exist_ok=True)
    made = shared / "samples.duckdb"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            making = shared / "making.duckdb"
            for left in (making, making.with_name("making.duckdb.wal")):
                left.unlink(missing_ok=True)
            result = ingest_paths([SAMPLES], making)
            assert not result.failed
            assert not making.with_name("making.duckdb.wal").exists()
            os.replace(making, made)
            for old in shared.parent.glob("logpipe-test-samples-*"):
                if old != shared and time.time() - old.stat().st_mtime > _SHARED_DAYS * 86400:
                    shutil.rmtree(old, ignore_errors=True)
    path = tmp_path_factory.mktemp("samples") / "samples.duckdb"
    shutil.copyfile(made, path)
    return path


def load_generator():  # type: ignore[no-untyped-def]
    """scripts/make_sample_logs.py as a module (the samples' own generator)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("make_sample_logs",
                                                  ROOT / "scripts" / "make_sample_logs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def query(db_path: Path, sql: str, params: list | None = None) -> list[tuple]:
    import duckdb

    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()
