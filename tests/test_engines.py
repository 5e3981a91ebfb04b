"""The engine seam: engines come from a registry that third parties join through entry
points; ingest dispatches through it, and the neutral ``server_samples`` view carries any
engine's samples."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from logpipe import engines
from logpipe.ingest import ingest_paths
from tests.conftest import ROOT, query

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture
def toy_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy engine installed as a distribution would be: its package importable and a
    dist-info whose entry_points.txt names it in the ``logpipe.engines`` group."""
    site = tmp_path / "site"
    dist = site / "toy_engine-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-engine\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[logpipe.engines]\ntoy = toy_engine:ENGINE\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(PLUGINS))
    engines.engines.cache_clear()
    yield
    engines.engines.cache_clear()
    sys.modules.pop("toy_engine", None)


def test_the_builtin_engine_is_sglang_and_owns_its_log_kind() -> None:
    (sglang,) = [e for e in engines.engines() if e.name == "sglang"]
    assert engines.engine_for_kind("sglang_server_log") is sglang
    assert engines.engine_for_kind("bench_jsonl") is None
    assert "SGLANG_" in engines.env_prefixes() and "sglang" in engines.packages()


def test_a_toy_engine_from_an_entry_point_is_ingested(toy_installed: None,
                                                      tmp_path: Path) -> None:
    assert [e.name for e in engines.engines()] == ["sglang", "vllm", "toy"]
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "toy-run.log").write_text(
        "2026-12-02T10:00:00 TOY ready model=/models/toy\n"
        "2026-12-02T10:00:01 TOY stats kind=decode running=4 waiting=0 gen_tps=120.5\n"
        "2026-12-02T10:00:02 TOY stats kind=decode running=5 waiting=1 gen_tps=131.0\n"
        "a line the toy does not print\n")
    db = tmp_path / "db.duckdb"
    result = ingest_paths([logs], db)
    assert not result.failed, [f.detail for f in result.files]
    assert [(Path(f.path).name, f.kind) for f in result.files] == [
        ("toy-run.log", "toy_server_log")]
    assert query(db, "SELECT name, engine FROM runs") == [("toy-run", "toy")]
    assert query(db, "SELECT engine, line_no, kind, running, waiting, gen_tps "
                     "FROM server_samples ORDER BY line_no") == [
        ("toy", 2, "decode", 4, 0, 120.5), ("toy", 3, "decode", 5, 1, 131.0)]
    assert query(db, "SELECT line_no, reason FROM rejects") == [(4, "not a toy line")]
    # the engine's words and variables join the neutral rules
    assert "toy" in engines.name_words() and "TOY_" in engines.env_prefixes()


def test_server_samples_carry_sglang_batches(sample_db: Path) -> None:
    (n_batches,) = query(sample_db, "SELECT count(*) FROM batches")[0]
    rows = query(sample_db, "SELECT engine, count(*), count(gen_tps), count(kv_usage) "
                            "FROM server_samples WHERE kind <> 'window' GROUP BY 1")
    assert rows[0][0] == "sglang" and rows[0][1] == n_batches and len(rows) == 1
    assert rows[0][2] > 0 and rows[0][3] > 0
    # vLLM's stats lines are windows, never batches, and come from the vLLM engine only
    windows = query(sample_db, "SELECT DISTINCT engine FROM server_samples "
                               "WHERE kind = 'window'")
    assert windows == [("vllm",)]


def test_no_engine_name_outside_its_folder() -> None:
    """Engine-neutral code never names an engine: ``'sglang'`` as a literal appears only
    under logpipe/engines/sglang/ and in migrations."""
    hits = []
    for path in (ROOT / "logpipe").rglob("*"):
        if path.suffix not in (".py", ".sql", ".toml") or "migrations" in path.parts:
            continue
        if path.is_relative_to(ROOT / "logpipe" / "engines" / "sglang"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "'sglang'" in line or '"sglang"' in line:
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == []


def test_no_engine_is_imported_outside_its_folder() -> None:
    """Structural: no module outside ``logpipe/engines/<name>/`` imports
    ``logpipe.engines.<name>`` (read with ``ast``, lazy imports included).  Neutral code
    reaches an engine through the registry (``Engine`` fields), never its modules."""
    import ast

    builtin = {p.name for p in (ROOT / "logpipe" / "engines").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert {"sglang", "vllm"} <= builtin
    hits = []
    for path in (ROOT / "logpipe").rglob("*.py"):
        rel = path.relative_to(ROOT / "logpipe")
        home = rel.parts[1] if rel.parts[0] == "engines" and len(rel.parts) > 2 else None
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{a.name}" for a in node.names]
                     if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["logpipe", "engines"] and len(parts) > 2 \
                        and parts[2] in builtin and parts[2] != home:
                    hits.append(f"{rel}:{node.lineno}: {name}")
    assert hits == []
