"""Shared fixtures.  Tests run with TZ=America/Los_Angeles: a zone that is not UTC (and has
daylight saving), so that nothing silently assumes the ingesting host runs on UTC."""

from __future__ import annotations

import atexit
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


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled samples ingested once for the whole session (read-only use)."""
    from logpipe.ingest import ingest_paths

    path = tmp_path_factory.mktemp("samples") / "samples.duckdb"
    result = ingest_paths([SAMPLES], path)
    assert not result.failed
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
