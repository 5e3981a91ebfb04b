"""How rows are stored (migration 0017): under an integer ``source_id`` in the schema
``logpipe_internal``, shown in ``main`` with ``source_path`` as before; ``SHOW TABLES`` is
the documented contract; ``runs.profiled`` follows its evidence."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest

from logpipe.env.model import Entry, Rendered, RunEnv, render
from logpipe.ingest import ingest_paths
from logpipe.store import FEW_LABELS, INTERNAL, Store, data_tables, migrations
from tests.conftest import ROOT, SAMPLES, query

STEADY = SAMPLES / "eras" / "v0.5.23.log"


def documented_names() -> set[str]:
    return set(re.findall(r"^### `(\w+)`", (ROOT / "schemas" / "README.md").read_text(), re.M))


def test_show_tables_is_the_documented_contract(db: Path) -> None:
    ingest_paths([STEADY], db)
    shown = {name for (name,) in query(db, "SHOW TABLES")}
    assert shown == documented_names()
    base = {name for (name,) in query(
        db, "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'")}
    assert base == {"sources", "run_env"}
    internal = {name for (name,) in query(
        db, "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [INTERNAL])}
    assert {"runs", "run_envs", *data_tables(), "run_summary_cache", "run_judged_cache",
            "pair_verdict_cache", "campaign_verdict_cache", "run_batch_ranges_cache",
            "schema_migrations", "schema_views",
            "source_generations", "labels", "engine_migrations", "settled_sources"} == internal


def test_rows_are_stored_by_source_id_and_shown_with_their_path(db: Path) -> None:
    ingest_paths([STEADY], db)
    (sid,) = query(db, "SELECT source_id FROM sources WHERE path = ?", [str(STEADY.resolve())])[0]
    stored = query(db, f"SELECT DISTINCT source_id FROM {INTERNAL}.batches")
    assert stored == [(sid,)]
    columns = [c for (c,) in query(db, f"SELECT column_name FROM information_schema.columns "
                                       f"WHERE table_schema = '{INTERNAL}' AND "
                                       "table_name = 'batches'")]
    assert "source_path" not in columns and "source_id" in columns
    assert query(db, "SELECT DISTINCT source_path FROM batches") == [(str(STEADY.resolve()),)]


def test_a_moved_file_is_one_row_update(tmp_path: Path, db: Path) -> None:
    log = tmp_path / "a" / "server.log"
    log.parent.mkdir()
    shutil.copy(STEADY, log)
    ingest_paths([tmp_path], db)
    before = query(db, f"SELECT source_id, line_no, kind_code FROM {INTERNAL}.batches "
                       "ORDER BY 2")
    (sid,) = query(db, "SELECT source_id FROM sources")[0]
    moved = tmp_path / "b" / "server.log.1"
    moved.parent.mkdir()
    log.rename(moved)
    result = ingest_paths([tmp_path], db)
    assert [f.status for f in result.files] == ["moved"]
    # the stored rows did not change at all; the path lives in one row of sources
    assert query(db, f"SELECT source_id, line_no, kind_code FROM {INTERNAL}.batches "
                     "ORDER BY 2") == before
    assert query(db, "SELECT source_id, path FROM sources") == [(sid, str(moved.resolve()))]
    assert query(db, "SELECT DISTINCT source_path FROM batches") == [(str(moved.resolve()),)]
    assert query(db, "SELECT source_path FROM runs") == [(str(moved.resolve()),)]


def migrated_to(db: Path, last: int) -> duckdb.DuckDBPyConnection:
    """A new database as a logpipe whose last migration was ``last`` left it."""
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_migrations "
                "(version INTEGER PRIMARY KEY, name VARCHAR, applied_at TIMESTAMP)")
    for version, name, sql in migrations():
        if version > last:
            break
        con.execute(sql)
        schema = INTERNAL if version >= 17 else "main"  # 0017 moved the bookkeeping
        con.execute(f"INSERT INTO {schema}.schema_migrations VALUES (?, ?, now())",
                    [version, name])
    return con


def test_a_database_of_migration_16_moves_its_rows_without_losing_one(db: Path) -> None:
    con = migrated_to(db, 16)
    con.execute("INSERT INTO sources (path, kind, lines) VALUES ('/logs/a.log', "
                "'sglang_server_log', 3)")
    con.execute("INSERT INTO runs (run_id, name, source_path, run_seq, role) VALUES "
                "('r1', 'a', '/logs/a.log', 0, 'baseline')")
    for line in (1, 2, 3):
        con.execute("INSERT INTO batches (run_id, source_path, line_no, kind, gen_throughput) "
                    "VALUES ('r1', '/logs/a.log', ?, 'decode', ?)", [line, 10.0 * line])
    # a row whose file lost its sources row keeps its path
    con.execute("INSERT INTO events (run_id, source_path, line_no, kind) VALUES "
                "('r1', '/logs/gone.log', 7, 'ready')")
    con.close()
    with Store.open(db) as store:
        assert not store.outdated()
    assert query(db, "SELECT source_path, line_no, gen_throughput FROM batches ORDER BY 2") == [
        ("/logs/a.log", 1, 10.0), ("/logs/a.log", 2, 20.0), ("/logs/a.log", 3, 30.0)]
    assert query(db, "SELECT name, source_path FROM runs") == [("a", "/logs/a.log")]
    assert query(db, "SELECT source_path, line_no FROM events") == [("/logs/gone.log", 7)]
    assert query(db, "SELECT count(DISTINCT source_id), count(source_id) FROM sources") == [
        (2, 2)]
    assert query(db, f"SELECT max(version) FROM {INTERNAL}.schema_migrations") == [
        (len(migrations()),)]


def test_run_env_keeps_its_rows_without_the_index_and_one_row_a_run_and_key(
        db: Path, sample_db: Path) -> None:
    """Migration 0026 drops ``run_env``'s primary-key index (it cost more than the rows):
    a database of migration 25 keeps every row and column; and ingest still writes one
    row per run and key, re-ingests and rewritten environments included."""
    con = migrated_to(db, 25)
    con.execute("INSERT INTO run_env VALUES ('r1', 'arg.tp_size', '8', 'identity', "
                "'server_args', NULL), ('r1', 'NCCL_ALGO', 'Ring', 'identity', 'm.json', "
                "'server_args says Tree')")
    con.close()
    with Store.open(db) as store:
        assert not store.outdated()
    assert sorted(query(db, "SELECT * FROM run_env")) == [
        ("r1", "NCCL_ALGO", "Ring", "identity", "m.json", "server_args says Tree"),
        ("r1", "arg.tp_size", "8", "identity", "server_args", None)]
    assert query(db, "SELECT constraint_type FROM duckdb_constraints() WHERE table_name = "
                     "'run_env' AND constraint_type <> 'NOT NULL'") == []
    assert query(sample_db, "SELECT count(*) FROM run_env")[0][0] > 1000
    assert query(sample_db, "SELECT run_id, key FROM run_env GROUP BY ALL "
                            "HAVING count(*) > 1") == []
    log = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"
    target = db.parent / "again.duckdb"
    ingest_paths([log], target)
    before = sorted(query(target, "SELECT * FROM run_env"))
    ingest_paths([log], target, env={"NCCL_ALGO": "Tree"})  # (an environment rewritten)
    after = query(target, "SELECT run_id, key, value FROM run_env")
    assert len(after) == len(before) + len({r[0] for r in before})
    assert len(set((r, k) for r, k, _ in after)) == len(after)


LABELLED = {"batches": ("kind", "rank_tag", "graph_label"),
            "http_requests": ("method", "protocol", "status_text")}


def stored_columns(db: Path, table: str) -> list[str]:
    return [c for (c,) in query(db, "SELECT column_name FROM information_schema.columns "
                                    "WHERE table_schema = ? AND table_name = ? "
                                    "ORDER BY ordinal_position", [INTERNAL, table])]


def test_repeated_texts_are_stored_once_and_shown_as_text(db: Path) -> None:
    """kind, rank tags, graph label, HTTP method, protocol and reason phrase are stored as
    codes into ``labels`` (migration 0019); the views show the texts the lines printed."""
    eras = SAMPLES / "eras"
    ingest_paths([eras / "v0.5.23.log", eras / "v0.2.15.log", eras / "v0.5.10.log"], db)
    for table, names in LABELLED.items():
        columns = stored_columns(db, table)
        for name in names:
            assert f"{name}_code" in columns and name not in columns
    assert query(db, f"SELECT count(*), count(DISTINCT label) FROM {INTERNAL}.labels")[0][0] \
        == query(db, f"SELECT count(DISTINCT label) FROM {INTERNAL}.labels")[0][0]
    shown = set(query(db, "SELECT DISTINCT kind, rank_tag, graph_label FROM batches"))
    assert {k for k, _, _ in shown} == {"prefill", "decode"}
    assert ("decode", "TP0", "cuda graph") in shown
    assert {(m, p, t) for m, p, t in query(
        db, "SELECT DISTINCT method, protocol, status_text FROM http_requests")} >= {
        ("POST", "HTTP/1.1", "OK"), ("GET", "HTTP/1.1", "OK")}
    # every code names a label, and a null text is a null code
    for table, names in LABELLED.items():
        for name in names:
            assert query(db, f"SELECT count(*) FROM {INTERNAL}.{table} t LEFT JOIN "
                             f"{INTERNAL}.labels l ON l.label_id = t.{name}_code "
                             f"WHERE t.{name}_code IS NOT NULL AND l.label IS NULL") == [(0,)]
    # a label id past a gap names its own text (the view does not count on dense ids)
    shown_before = query(db, "SELECT * FROM batches ORDER BY source_path, line_no")
    con = duckdb.connect(str(db))
    (top,) = con.execute(f"SELECT max(label_id) FROM {INTERNAL}.labels").fetchone() or (0,)
    con.execute(f"INSERT INTO {INTERNAL}.labels VALUES (?, 'TP9 (far)')", [top + 50])
    con.execute(f"UPDATE {INTERNAL}.batches SET rank_tag_code = ? WHERE line_no = "
                f"(SELECT min(line_no) FROM {INTERNAL}.batches)", [top + 50])
    con.close()
    shown_after = query(db, "SELECT * FROM batches ORDER BY source_path, line_no")
    changed = [(a, b) for a, b in zip(shown_before, shown_after, strict=True) if a != b]
    assert len(changed) == len(query(db, f"SELECT 1 FROM {INTERNAL}.batches WHERE "
                                         "rank_tag_code = ?", [top + 50]))
    assert all("TP9 (far)" in after for _, after in changed)
    # the lines themselves say what the view shows
    lines = (eras / "v0.5.23.log").read_text().splitlines()
    path = str((eras / "v0.5.23.log").resolve())
    for line_no, kind, tag in query(db, "SELECT line_no, kind, rank_tag FROM batches WHERE "
                                        "source_path = ? ORDER BY 1", [path]):
        line = lines[line_no - 1]
        assert f"{kind.capitalize()} batch" in line
        assert tag is None or f" {tag}]" in line or tag == "TP9 (far)"


@pytest.mark.parametrize("texts", [
    ["decode", "prefill", None, "decode"],             # a few: coded by comparisons
    [f"label {i % (FEW_LABELS + 3)}" for i in range(40)] + [None],  # more: by a hash
    [None, None, None],                                 # no text at all
    ["one"] * 5,
])
def test_coded_texts_name_their_labels(db: Path, texts: list[str | None]) -> None:
    """Both ways of coding a column give each row the ``label_id`` of its own text."""
    import polars as pl

    with Store.open(db) as store, store.transaction():
        store.label_ids(["already here"])  # codes do not start at 1 for these texts
        codes = store._coded(pl.Series("kind", texts, dtype=pl.String))
        labels = dict(store.all(f"SELECT label_id, label FROM {INTERNAL}.labels"))
    assert codes.dtype == pl.Int32 and codes.name == "kind"
    assert [labels.get(c) if c is not None else None for c in codes.to_list()] == texts


def test_a_failed_ingest_leaves_no_new_label(tmp_path: Path, db: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose ingest fails after its texts got codes leaves ``labels`` as it was,
    and the next file of the same ingest that prints those texts gets codes that name
    them (no code of the rolled-back transaction is kept)."""
    from logpipe.ingest import group
    from logpipe.store import Spool

    monkeypatch.setattr(group, "GROUP_FILES", 1)  # a transaction per file
    ingest_paths([SAMPLES / "eras" / "v0.2.15.log"], db)
    before = query(db, f"SELECT * FROM {INTERNAL}.labels ORDER BY 1")
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    for path, src in ((first, "v0.5.23.log"), (second, "v0.5.10.log")):
        path.write_text((SAMPLES / "eras" / src).read_text().replace(" TP0]", " DP3 TP7 EP7]"))
    original, calls = Spool.load, {"n": 0}

    def failing_once(self: Spool, tables: list[str] | None = None) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk full (injected)")
        original(self, tables)

    monkeypatch.setattr(Spool, "load", failing_once)
    result = ingest_paths([first], db)
    assert [f.status for f in result.files] == ["failed"]
    assert query(db, f"SELECT * FROM {INTERNAL}.labels ORDER BY 1") == before
    calls["n"] = 0
    result = ingest_paths([first, second], db)  # one store: the first fails again
    assert [f.status for f in result.files] == ["failed", "new"]
    assert query(db, "SELECT DISTINCT rank_tag FROM batches WHERE source_path = ?",
                 [str(second.resolve())]) == [("DP3 TP7 EP7",)]


def test_a_database_of_migration_18_keeps_its_texts(db: Path) -> None:
    con = migrated_to(db, 18)
    con.execute("INSERT INTO sources (path, kind, source_id) VALUES ('/logs/a.log', "
                "'sglang_server_log', 1)")
    rows = [(1, "prefill", "TP0", None), (2, "decode", "TP0", "cuda graph"),
            (3, "decode", None, "npu graph")]
    for line, kind, tag, label in rows:
        con.execute(f"INSERT INTO {INTERNAL}.batches (run_id, source_id, line_no, kind, "
                    "rank_tag, graph_label) VALUES ('r1', 1, ?, ?, ?, ?)",
                    [line, kind, tag, label])
    con.execute(f"INSERT INTO {INTERNAL}.http_requests (run_id, source_id, line_no, method, "
                "protocol, status, status_text) VALUES ('r1', 1, 4, 'GET', 'HTTP/1.1', 503, "
                "'Service Unavailable'), ('r1', 1, 5, NULL, NULL, NULL, NULL)")
    con.close()
    with Store.open(db) as store:
        assert not store.outdated()
    assert query(db, "SELECT line_no, kind, rank_tag, graph_label FROM batches ORDER BY 1") \
        == rows
    assert query(db, "SELECT line_no, method, protocol, status, status_text FROM "
                     "http_requests ORDER BY 1") == [
        (4, "GET", "HTTP/1.1", 503, "Service Unavailable"), (5, None, None, None, None)]
    assert {t for (t,) in query(db, f"SELECT label FROM {INTERNAL}.labels")} == {
        "prefill", "decode", "TP0", "cuda graph", "npu graph", "GET", "HTTP/1.1",
        "Service Unavailable"}


def test_profiled_follows_its_evidence_and_clears_with_it(tmp_path: Path, db: Path) -> None:
    """A phase dump taken with device synchronisation makes its run profiled; the dump
    rewritten without synchronisation makes it unprofiled again (nothing sticks)."""
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(STEADY, folder / "server.log")
    dump = folder / "phase_timings.jsonl"
    src = (SAMPLES / "profiles" / "eagle3-profiled" / "phase_timings.jsonl").read_text()
    records = [json.loads(line) for line in src.splitlines() if line.strip()]
    assert any(r.get("synchronized") for r in records)
    dump.write_text(src)
    ingest_paths([folder], db)
    assert query(db, "SELECT profiled FROM runs") == [(True,)]
    for r in records:
        r["synchronized"] = False
    dump.write_text("".join(json.dumps(r) + "\n" for r in records))
    ingest_paths([folder], db)
    assert query(db, "SELECT count(*) FROM phase_timings WHERE synchronized") == [(0,)]
    assert query(db, "SELECT profiled FROM runs") == [(False,)]


def test_check_works_on_a_read_only_database_file(sample_db: Path, tmp_path: Path) -> None:
    import os
    import stat

    from typer.testing import CliRunner

    from logpipe.cli import app

    frozen = tmp_path / "frozen.duckdb"
    shutil.copy(sample_db, frozen)
    frozen.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)  # no WAL or marker can be written either
    try:
        before = frozen.read_bytes()
        result = CliRunner().invoke(app, ["check", "--db", str(frozen), "--format", "json"])
        assert result.exit_code == 1, result.output  # the real NGRAM regression fails
        assert json.loads(result.stdout)["results"]
        sql = CliRunner().invoke(app, ["sql", "SELECT count(*) FROM runs", "--db",
                                       str(frozen), "--format", "csv"])
        assert sql.exit_code == 0 and sql.stdout.splitlines()[1].isdigit()
        assert frozen.read_bytes() == before and os.listdir(tmp_path) == ["frozen.duckdb"]
    finally:
        tmp_path.chmod(stat.S_IRWXU)


@pytest.mark.slow
def test_a_reader_during_an_ingest_sees_the_last_committed_state(tmp_path: Path,
                                                                 db: Path) -> None:
    """A reader that finds an ingest holding the file gets in between two of its files
    (the ingest lets go when a reader waits) and sees the files committed so far."""
    import os
    import subprocess
    import sys
    import time
    from datetime import datetime, timedelta

    logs = tmp_path / "logs"
    source = (SAMPLES / "eras" / "v0.5.23.log").read_text()
    # (small files ingest in ~3.5 ms each: 300 of them were done ~1.4 s in, when the reader
    # came; 800 leave it room on a fast machine, and a slow one takes longer over each)
    FILES = 800
    for n in range(FILES):  # one file (or a group of them) after another
        folder = logs / f"node-{n:02d}"
        folder.mkdir(parents=True)
        # (a day each: the same records on one day would make every file a copy)
        day = (datetime(2024, 1, 1) + timedelta(days=n)).strftime("%Y-%m-%d")
        (folder / "server.log").write_text(f"node {n} starting\n"
                                           + source.replace("2026-03-01", day))
    env = {**os.environ, "LOGPIPE_LOCK_WAIT": "120"}
    ingest = subprocess.Popen([sys.executable, "-m", "logpipe.cli", "ingest", str(logs),
                               "--db", str(db)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not db.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the ingest is under way
        reader = subprocess.run(
            [sys.executable, "-m", "logpipe.cli", "sql", "SELECT count(*) FROM sources",
             "--db", str(db), "--format", "csv"], capture_output=True, text=True, env=env,
            timeout=120)
        still_ingesting = ingest.poll() is None
        out, err = ingest.communicate(timeout=300)
    finally:
        if ingest.poll() is None:
            ingest.kill()
    assert ingest.returncode == 0, err
    assert reader.returncode == 0, reader.stderr
    seen = int(reader.stdout.splitlines()[1])
    assert still_ingesting, "the ingest ended before the reader got in: no test"
    assert 0 < seen < FILES
    assert query(db, "SELECT count(*) FROM sources") == [(FILES,)]
    assert not Path(f"{db}.readers-waiting").exists()


def test_a_store_held_through_a_launch_lets_a_reader_in(tmp_path: Path) -> None:
    """``ab`` holds the database open for writing for its whole campaign; while a launch
    runs (:meth:`Store.lent`), a reader in another process gets in instead of waiting for
    the campaign to end, and the writer has its connection back afterwards."""
    import os
    import subprocess
    import sys

    path = tmp_path / "db.duckdb"
    reader = ("from logpipe.store import Store\n"
              f"with Store.open({str(path)!r}, read_only=True) as s:\n"
              "    print(s.one('SELECT count(*) FROM runs')[0])\n")
    env = {**os.environ, "LOGPIPE_LOCK_WAIT": "30"}
    with Store.open(path) as store:
        with store.lent(every_s=0.05):
            done = subprocess.run([sys.executable, "-c", reader], capture_output=True,
                                  text=True, timeout=120, env=env, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "0"
        assert store.one("SELECT count(*) FROM runs") == (0,)  # the writer's again
        # without lending, the reader would wait for the writer: it gives up, saying so
        held = subprocess.run([sys.executable, "-c", reader], capture_output=True, text=True,
                              timeout=120, env={**env, "LOGPIPE_LOCK_WAIT": "1"}, cwd=ROOT)
        assert held.returncode != 0 and "another process holds it" in held.stderr


def _rendered(value: str) -> Rendered:
    """An environment of one identity entry ``k``: ``value``."""
    return render(RunEnv({"k": Entry(value, "test", "identity")}))


def test_a_runs_arguments_and_environment_written_again_keep_the_rest_of_its_row(
        tmp_path: Path, db: Path) -> None:
    """``update_runs`` of a wide column (``WIDE_RUN_COLUMNS``: the row is deleted and
    inserted again) on committed runs sets what it is given and keeps every other column,
    the runs' names and keys unique; a rolled-back one leaves the rows as they were.  An
    environment written again (``set_run_envs``: a row of ``run_envs``) shows in the
    ``runs`` view in place of the one before, the other runs' as they were."""
    shutil.copytree(SAMPLES / "real-cpu", tmp_path / "logs")
    ingest_paths([tmp_path / "logs"], db)
    internal = f"{INTERNAL}.runs"
    with Store.open(db) as store:
        cols = [c for c, _ in store.columns("runs", INTERNAL)]
        before = {r[0]: dict(zip(cols, r, strict=True))
                  for r in store.all(f"SELECT * FROM {internal}")}
        envs_before = dict(store.all("SELECT run_id, (env::VARCHAR, env_fingerprint) FROM runs"))
        chosen = sorted(before)[:3]
        assert len(before) > 3 and all(before[r]["server_args"] for r in chosen)
        with store.transaction():
            store.update_runs([(r, {"server_args_raw": "raw " + r, "env_complete": True})
                               for r in chosen])
            store.set_run_envs([(r, _rendered(r), {"tags": json.dumps({"t": r})})
                                for r in chosen[:2]])
        with pytest.raises(RuntimeError), store.transaction():
            store.update_runs([(chosen[0], {"server_args_raw": "taken back"})])
            store.set_run_envs([(chosen[0], _rendered("taken back"), {})])
            raise RuntimeError("rolled back")
        after = {r[0]: dict(zip(cols, r, strict=True))
                 for r in store.all(f"SELECT * FROM {internal}")}
        envs_after = dict(store.all("SELECT run_id, (env::VARCHAR, env_fingerprint) FROM runs"))
        (names,) = store.one(f"SELECT count(DISTINCT name) FROM {internal}") or (0,)
        (kept,) = store.one(f"SELECT count(*) FROM {INTERNAL}.run_envs") or (0,)
    assert after.keys() == before.keys() and names == len(before) and kept == len(before)
    for rid, row in after.items():
        changed = ({"server_args_raw": "raw " + rid, "env_complete": True} if rid in chosen
                   else {})
        if rid in chosen[:2]:
            changed["tags"] = json.dumps({"t": rid})
        assert row == {**before[rid], **changed}, rid
        assert envs_after[rid] == ((_rendered(rid).json, _rendered(rid).fingerprint)
                                   if rid in chosen[:2] else envs_before[rid]), rid


def test_a_database_of_migration_26_keeps_its_runs_environments(db: Path) -> None:
    """Migration 0027 moves ``env`` and ``env_fingerprint`` beside the runs' rows: each
    run shows what it had, in the columns' places; a run without an environment shows the
    defaults ('{}', NULL)."""
    con = migrated_to(db, 26)
    con.execute("INSERT INTO sources (path, kind, source_id) VALUES ('/logs/a.log', "
                "'sglang_server_log', 1)")
    con.execute(f"INSERT INTO {INTERNAL}.runs (run_id, name, source_id, run_seq, role, "
                "env_fingerprint, env, tags) VALUES "
                "('r1', 'a', 1, 0, 'baseline', 'fp1', '{\"NCCL_ALGO\": \"Ring\"}', '{}'), "
                "('r2', 'b', 1, 1, 'spec', NULL, '{}', '{}')")
    con.close()
    with Store.open(db) as store:
        assert not store.outdated()
        columns = [c for c, _ in store.columns("runs")]
    assert columns[columns.index("role") + 1] == "env_fingerprint"
    assert columns[columns.index("server_args_raw") + 1] == "env"
    assert query(db, "SELECT run_id, name, role, env_fingerprint, env::VARCHAR, "
                     "typeof(env) FROM runs ORDER BY 1") == [
        ("r1", "a", "baseline", "fp1", '{"NCCL_ALGO": "Ring"}', "JSON"),
        ("r2", "b", "spec", None, "{}", "JSON")]
    assert query(db, f"SELECT run_id FROM {INTERNAL}.run_envs") == [("r1",)]


def test_a_commit_under_a_memory_bound_runs_under_it_and_restores_the_setting(
        db: Path) -> None:
    """``transaction(commit_memory=...)``: the commit (which reads back what the
    transaction spilled) runs under the bound; the connection's setting comes back."""
    with Store.open(db) as store:
        (unbounded,) = store.one("SELECT current_setting('memory_limit')") or ("",)
        con = store.con
        at_commit: list[str] = []

        class Spy:
            def execute(self, sql: str, *args: object) -> object:
                if sql == "COMMIT":
                    at_commit.append(con.execute(
                        "SELECT current_setting('memory_limit')").fetchall()[0][0])
                return con.execute(sql, *args)

            def __getattr__(self, name: str) -> object:
                return getattr(con, name)

        store.con = Spy()  # type: ignore[assignment]
        with store.transaction(commit_memory="256MB"):
            store.con.execute("CREATE TABLE spied AS SELECT 1 AS x")
        with store.transaction():
            store.con.execute("INSERT INTO spied VALUES (2)")
        store.con = con
        (now,) = store.one("SELECT current_setting('memory_limit')") or ("",)
    assert at_commit == ["244.1 MiB", unbounded]  # 256 MB as DuckDB prints it; then none
    assert now == unbounded
