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


def _toy_log(path: Path, tps: float, lines: int = 40) -> None:
    out = ["2026-12-02T10:00:00 TOY ready model=/models/toy"]
    for i in range(lines):
        out.append(f"2026-12-02T10:00:{i + 1:02d} TOY stats kind=decode running=4 "
                   f"waiting=0 gen_tps={tps + (i % 5) * 0.5}")
    path.write_text("\n".join(out) + "\na line the toy does not print\n")


def test_a_toy_engine_from_an_entry_point_brings_its_table_and_is_compared(
        toy_installed: None, tmp_path: Path) -> None:
    from logpipe.analysis.compare import compare
    from logpipe.analysis.results import Options

    assert [e.name for e in engines.engines()] == ["sglang", "vllm", "toy"]
    logs = tmp_path / "logs"
    logs.mkdir()
    _toy_log(logs / "toy-a.log", 120.0)
    _toy_log(logs / "toy-b.log", 60.0)
    db = tmp_path / "db.duckdb"
    result = ingest_paths([logs], db)
    assert not result.failed, [f.detail for f in result.files]
    assert sorted((Path(f.path).name, f.kind) for f in result.files) == [
        ("toy-a.log", "toy_server_log"), ("toy-b.log", "toy_server_log")]
    assert query(db, "SELECT name, engine FROM runs ORDER BY name") == [
        ("toy-a", "toy"), ("toy-b", "toy")]
    # its rows are in its own table (its migration, recorded as the toy's), none in SGLang's
    assert query(db, "SELECT engine, version FROM logpipe_internal.engine_migrations") == [
        ("toy", 1)]
    assert query(db, "SELECT count(*), min(line_no) FROM toy_stats") == [(80, 2)]
    assert query(db, "SELECT count(*) FROM batches") == [(0,)]
    # and reach the neutral samples view through its fragment
    assert query(db, "SELECT engine, line_no, kind, running, waiting, gen_tps "
                     "FROM server_samples WHERE line_no <= 3 ORDER BY source_path, line_no"
                 ) == [("toy", 2, "decode", 4, 0, 120.0), ("toy", 3, "decode", 4, 0, 120.5),
                       ("toy", 2, "decode", 4, 0, 60.0), ("toy", 3, "decode", 4, 0, 60.5)]
    assert query(db, "SELECT line_no, reason FROM rejects ORDER BY 1 LIMIT 1") == [
        (42, "not a toy line")]
    # compare judges the toy's runs from its samples like any engine's
    (cmp,) = compare(str(db), ["toy-a", "toy-b"], Options(allow_unknown_env=True))
    assert cmp.metrics, cmp.notes
    tests = [m.test for m in cmp.metrics if m.test.median_a is not None
             and m.test.median_b is not None and m.higher_is_better]
    assert tests and all(t.median_b < t.median_a for t in tests), cmp.metrics
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
