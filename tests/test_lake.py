"""The Parquet lake: export, reading it back (DuckDB views, pyarrow, chdb), incremental and
interrupted exports, and fleet ingest (in-process and on a local Ray)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from logpipe import fleet, lake
from logpipe.cli import app
from logpipe.db import open_db
from logpipe.ingest import ingest_paths
from logpipe.store import Store
from tests.conftest import SAMPLES, query

runner = CliRunner()


def rows_of(store: Store, table: str, skip: tuple[str, ...] = ("ingested_at",)
            ) -> list[str]:
    """Every row of a public table, as text, sorted (the lake's columns only)."""
    cols = [c for c, _ in store.columns(table)
            if c not in skip and c not in lake.LOCAL_COLUMNS.get(table, ())]
    select = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in cols)
    return sorted(repr(r) for r in store.all(f"SELECT {select} FROM {table}"))


def assert_same_tables(a: Path, b: Path, tables: tuple[str, ...] = lake.tables(),
                       skip: tuple[str, ...] = ("ingested_at",)) -> None:
    with open_db(a, read_only=True) as one, open_db(b, read_only=True) as other:
        for table in tables:
            assert rows_of(one, table, skip) == rows_of(other, table, skip), table


def some_rows(source: Path, tables: tuple[str, ...]) -> dict[str, list[str]]:
    with open_db(source, read_only=True) as store:
        return {t: rows_of(store, t) for t in tables}


@pytest.fixture(scope="module")
def exported(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("lake") / "lake"
    result = lake.export(sample_db, out)
    assert result.units_written > 0 and result.units_kept == 0
    return out


def test_the_lake_holds_every_public_table_row_for_row(sample_db: Path, exported: Path
                                                       ) -> None:
    assert_same_tables(sample_db, exported,
                       (*lake.tables(), "run_summary", "run_pairs", "spec_pairing"))
    schema = json.loads((exported / lake.SCHEMA_FILE).read_text())
    assert schema["contract_version"] == json.loads(
        (exported / lake.MANIFEST_FILE).read_text())["contract_version"]
    assert schema["tables"]["batches"]["partition_by"] == ["engine", "run_id"]
    # partition columns live in the paths (hive) and, as text, in the files: a reader that
    # typed an all-digit run id from its path would read a number
    some = next(exported.glob("table=batches/engine=sglang/run_id=*/part-*.parquet"))
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema_of = pq.read_schema(some)
    assert "line_no" in schema_of.names
    assert schema_of.field("run_id").type == pa.string()
    assert schema_of.field("engine").type == pa.string()


def test_a_query_for_one_run_reads_only_that_runs_files(exported: Path) -> None:
    manifest = json.loads((exported / lake.MANIFEST_FILE).read_text())
    files = [f for e in manifest["tables"]["batches"].values() for f in e["files"]]
    runs = {f.split("run_id=")[1].split("/")[0] for f in files}
    assert len(runs) > 10
    one = sorted(runs)[0]
    mine = [f for f in files if f"run_id={one}/" in f]
    assert mine and len(mine) < len(files) / 5


DIGITS_RUN_ID = "123456789012"


def _with_a_digits_only_run_id(db: Path, tmp_path: Path) -> Path:
    """A copy of ``db`` whose first run has an all-digit id (run ids are hashes of paths:
    about one in 280 is all digits, which made a reader test fail at random)."""
    copy = tmp_path / "digits.duckdb"
    shutil.copy(db, copy)
    with open_db(copy) as store:
        # an SGLang run with batch lines (the first run id may be another engine's)
        (old,) = store.one("SELECT min(run_id) FROM batches")
        for schema, table in store.all(
                "SELECT c.table_schema, c.table_name FROM information_schema.columns c "
                "JOIN information_schema.tables t USING (table_schema, table_name) "
                "WHERE c.column_name = 'run_id' AND t.table_type = 'BASE TABLE'"):
            store.con.execute(f"UPDATE {schema}.{table} SET run_id = ? WHERE run_id = ?",
                              [DIGITS_RUN_ID, old])
    return copy


def test_pyarrow_and_chdb_read_the_same_counts(sample_db: Path, tmp_path: Path) -> None:
    import chdb
    import pyarrow.dataset as ds

    sample_db = _with_a_digits_only_run_id(sample_db, tmp_path)
    exported = tmp_path / "digits-lake"
    lake.export(sample_db, exported)
    one_run = exported / "table=batches" / "engine=sglang" / f"run_id={DIGITS_RUN_ID}"
    assert one_run.is_dir()
    # one run's files, as a user reads them: the run id is text, not a number from its path
    typed = chdb.query(f"SELECT DISTINCT toTypeName(run_id), run_id FROM file('{one_run}/"
                       "*.parquet', Parquet)", "CSV")
    # (text, nullable or not: a file's columns are marked required where DuckDB's
    # statistics knew them free of nulls, and one COPY of many units does not)
    assert str(typed).strip() in (f'"String","{DIGITS_RUN_ID}"',
                                  f'"Nullable(String)","{DIGITS_RUN_ID}"'), str(typed)

    with open_db(sample_db, read_only=True) as store:
        # each lake table holds what the database's view of that name holds
        # (bench_results: one row per benchmark; bench_results_all: its console copies too)
        want = {t: store.one(f"SELECT count(*) FROM {t}")[0] for t in lake.tables()}
        columns = lake.table_columns(store)
    manifest = json.loads((exported / lake.MANIFEST_FILE).read_text())
    for table in lake.tables():
        files = [str(exported / f) for e in manifest["tables"][table].values()
                 for f in e["files"]]
        if not files:
            assert want[table] == 0, table
            continue
        dataset = ds.dataset(files, format="parquet", partitioning="hive")
        assert dataset.count_rows() == want[table], table
        # ClickHouse reads a table's folder (after an export, only its named files are there)
        got = chdb.query(f"SELECT count() FROM file('{exported}/table={table}/**/*.parquet', "
                         "Parquet)", "CSV")
        assert int(str(got).strip()) == want[table], table
        if "run_id" in [c for c, _ in columns[table]]:
            typed = chdb.query(f"SELECT DISTINCT toTypeName(run_id) FROM file('{exported}/"
                               f"table={table}/**/*.parquet', Parquet)", "CSV")
            assert "Int" not in str(typed), (table, str(typed))
    # hive partitioning seen by pyarrow: the run ids of the paths
    batches = ds.dataset(str(exported / "table=batches"), format="parquet",
                         partitioning="hive")
    assert "run_id" in batches.schema.names


def test_export_is_incremental_and_drops_what_left(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "eras", logs)
    db, out = tmp_path / "db.duckdb", tmp_path / "lake"
    ingest_paths([logs], db)
    first = lake.export(db, out)
    again = lake.export(db, out)
    assert again.units_written == 0 and again.units_kept == first.units_written
    log = logs / "v0.5.23.log"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines + lines[-3:]))  # an append
    ingest_paths([logs], db)
    third = lake.export(db, out)
    # only the appended file's parts (its runs, batches, ... and its sources row) move
    assert 0 < third.units_written < first.units_written / 3
    assert_same_tables(db, out)
    with open_db(db) as store, store.transaction():
        store.delete_source(str((logs / "v0.4.7.log").resolve()))
    fourth = lake.export(db, out)
    assert fourth.units_dropped > 0
    assert_same_tables(db, out)
    named = {out / f for entries in json.loads((out / lake.MANIFEST_FILE).read_text())[
        "tables"].values() for e in entries.values() for f in e["files"]}
    assert set(out.glob("table=*/**/*.parquet")) == named  # nothing unnamed left
    assert not (out / lake.STAGING).exists()


def test_an_interrupted_export_leaves_the_previous_one_readable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "eras", logs)
    db, out = tmp_path / "db.duckdb", tmp_path / "lake"
    ingest_paths([logs], db)
    lake.export(db, out)
    before = some_rows(out, ("runs", "batches"))
    log = logs / "v0.5.23.log"
    log.write_text(log.read_text() + log.read_text().splitlines(keepends=True)[-1])
    ingest_paths([logs], db)
    original = lake._write_atomic

    def dies_at_the_manifest(path: Path, text: str) -> None:
        if path.name == lake.MANIFEST_FILE:
            raise KeyboardInterrupt  # killed after the new files were moved into place
        original(path, text)

    monkeypatch.setattr(lake, "_write_atomic", dies_at_the_manifest)
    with pytest.raises(KeyboardInterrupt):
        lake.export(db, out)
    monkeypatch.setattr(lake, "_write_atomic", original)
    assert some_rows(out, ("runs", "batches")) == before
    lake.export(db, out)
    assert_same_tables(db, out)


def test_cli_export_and_lake_commands(tmp_path: Path) -> None:
    # a paired campaign with its regression, the mission's runs and a damaged file: every
    # kind of check outcome, on a database small enough to check twice (a check reads the
    # lake's Parquet files for every run it loads: the whole samples take 30 s)
    sample_db = tmp_path / "db.duckdb"
    assert not ingest_paths([SAMPLES / "real-cpu", SAMPLES / "mission", SAMPLES / "unpaired",
                             SAMPLES / "damaged"], sample_db).failed
    out = tmp_path / "lake"
    first = runner.invoke(app, ["export", str(out), "--db", str(sample_db)])
    assert first.exit_code == 0, first.output
    assert "part(s) written" in first.stdout
    sql = ("SELECT name, count(*) FROM batches JOIN runs USING (run_id) "
           "GROUP BY 1 ORDER BY 1")
    on_db = runner.invoke(app, ["sql", sql, "--db", str(sample_db), "--format", "csv"])
    on_lake = runner.invoke(app, ["sql", sql, "--lake", str(out), "--format", "csv"])
    assert on_lake.exit_code == 0 and on_lake.stdout == on_db.stdout
    check_db = runner.invoke(app, ["check", "--db", str(sample_db), "--format", "json"])
    check_lake = runner.invoke(app, ["check", "--lake", str(out), "--format", "json"])
    assert check_lake.exit_code == check_db.exit_code == 1

    def outcome(text: str) -> list[tuple[Any, ...]]:
        report = json.loads(text)
        return sorted((r["suite"], r["check"], r["status"], json.dumps(r.get("failing_rows"),
                       sort_keys=True)) for r in report["results"])

    assert outcome(check_lake.stdout) == outcome(check_db.stdout)
    args = ["compare", "--run", "real-cpu-baseline-r1", "--run", "real-cpu-ngram-r1",
            "--format", "json"]
    on_db = runner.invoke(app, [*args, "--db", str(sample_db)])
    on_lake = runner.invoke(app, [*args, "--lake", str(out)])
    assert on_lake.exit_code == on_db.exit_code == 1
    assert json.loads(on_lake.stdout) == json.loads(on_db.stdout)


def _two_racks(tmp_path: Path) -> Path:
    """Logs of a fleet: racks of folders with the same names (run names collide), a
    folder with a benchmark record next to its server log, and a copy of one log in a
    third rack (the same content: a duplicate, read once)."""
    fleet_dir = tmp_path / "fleet"
    for rack in ("rack-a", "rack-b"):
        for node, src in (("node0", SAMPLES / "eras" / "v0.5.23.log"),
                          ("node1", SAMPLES / "eras" / "v0.5.5.log")):
            folder = fleet_dir / rack / node
            folder.mkdir(parents=True)
            text = src.read_text()
            if rack == "rack-b":  # another server, a day later: another first line
                # (the same lines at the same times would be a copy of rack-a's log)
                text = f"starting on {rack}/{node}\n" + text.replace("2026-03-01",
                                                                       "2026-03-02")
            (folder / "server.log").write_text(text)
    shutil.copytree(SAMPLES / "real-cpu" / "real-cpu-baseline-r1",
                    fleet_dir / "rack-a" / "bench-run")
    (fleet_dir / "rack-c" / "node0").mkdir(parents=True)
    shutil.copy(fleet_dir / "rack-a" / "node0" / "server.log",
                fleet_dir / "rack-c" / "node0" / "server.log")
    return fleet_dir


@pytest.mark.slow
def test_fleet_ingest_equals_one_process_ingest_and_adds_nothing_again(tmp_path: Path
                                                                        ) -> None:
    logs = _two_racks(tmp_path)
    db, single, out = tmp_path / "db.duckdb", tmp_path / "single", tmp_path / "lake"
    ingest_paths([logs], db)
    lake.export(db, single)
    result = fleet.ingest_to_lake([logs], out, runner="local")
    assert result.groups == 6 and not result.tasks_failed and not result.files_failed
    assert len(result.duplicates) == 1 and "rack-c" in result.duplicates[0]
    assert_same_tables(single, out)
    names = sorted(n for (n,) in open_db(out).all("SELECT name FROM runs"))
    assert "rack-b/node0" in names and len(set(names)) == len(names)  # named by its folder
    again = fleet.ingest_to_lake([logs], out, runner="local")
    # (the duplicate has no sources row, so its folder is read again, and dropped again)
    assert again.groups == 1 and again.groups_skipped == 5 and again.units_written == 0
    assert_same_tables(single, out)
    # one server went on (an append): its folder is read again, the lake follows the
    # database
    node = logs / "rack-a" / "node1" / "server.log"
    node.write_text(node.read_text() + node.read_text().splitlines(keepends=True)[-1])
    ingest_paths([logs], db)
    lake.export(db, single)
    third = fleet.ingest_to_lake([logs], out, runner="local")
    assert third.groups == 2 and 0 < third.units_written
    # every row alike; only sources.sha256 differs by definition: the database chains
    # the hash of the appended bytes to the earlier one, the lake's task read it whole
    assert_same_tables(single, out, skip=("ingested_at", "sha256"))
    with open_db(out) as store:
        assert store.one("SELECT sha256 FROM sources WHERE path = ?", [str(node.resolve())]
                         ) == (hashlib.sha256(node.read_bytes()).hexdigest(),)


@pytest.mark.slow
def test_a_failed_task_leaves_nothing_visible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    logs = _two_racks(tmp_path)
    out = tmp_path / "lake"
    real = fleet.ingest_group

    def dies_after_staging(pairs: list[tuple[str, str]], staging: str, done: Any,
                           options: Any) -> Any:
        outcome = real(pairs, staging, done, options)
        if "rack-b" in pairs[0][0]:
            assert any(Path(staging).rglob("*.parquet"))  # it had written its parts
            raise OSError("worker lost (injected)")
        return outcome

    monkeypatch.setattr(fleet, "ingest_group", dies_after_staging)
    result = fleet.ingest_to_lake([logs], out, runner="local")
    assert len(result.tasks_failed) == 2 and "worker lost" in result.tasks_failed[0]
    paths = {p for (p,) in open_db(out).all("SELECT DISTINCT source_path FROM batches")}
    assert paths and not any("rack-b" in p for p in paths)
    assert not any("rack-b" in str(p) for p in out.rglob("*.parquet"))
    assert not (out / lake.STAGING).exists()
    monkeypatch.setattr(fleet, "ingest_group", real)
    retry = fleet.ingest_to_lake([logs], out, runner="local")
    assert retry.groups == 3  # only the failed folders are read again (and the duplicate)
    paths = {p for (p,) in open_db(out).all("SELECT DISTINCT source_path FROM batches")}
    assert any("rack-b" in p for p in paths)


@pytest.mark.slow
def test_fleet_ingest_on_a_local_ray(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    logs = _two_racks(tmp_path)
    db, single, out = tmp_path / "db.duckdb", tmp_path / "single", tmp_path / "lake"
    ingest_paths([logs], db)
    lake.export(db, single)
    cli = runner.invoke(app, ["ingest", str(logs), "--lake", str(out), "--runner", "ray",
                              "--workers", "2"])
    assert cli.exit_code == 0, cli.output
    assert "with ray (2 workers): 6 folder(s) read" in cli.stdout
    assert_same_tables(single, out)
    # the old spelling still works, and says it is old
    again = runner.invoke(app, ["ingest", str(logs), "--lake", str(out), "--engine", "ray"])
    assert again.exit_code == 0 and "1 folder(s) read, 5 unchanged" in again.stdout
    assert "--engine is deprecated for ingest: use --runner ray" in again.output
    assert_same_tables(single, out)


def test_two_databases_export_into_one_lake_and_keep_each_others_rows(tmp_path: Path
                                                                       ) -> None:
    """A team lake: each engineer exports their own database.  The second export keeps
    what the first wrote (it used to drop it: "40 dropped"), a file that leaves one
    database leaves the lake, and --replace makes the lake one database's alone."""
    logs_a, logs_b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(SAMPLES / "eras", logs_a)
    shutil.copytree(SAMPLES / "mission", logs_b)
    db_a, db_b, out = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "lake"
    ingest_paths([logs_a], db_a)
    ingest_paths([logs_b], db_b)
    with open_db(db_a, read_only=True) as a, open_db(db_b, read_only=True) as b:
        want = {t: rows_of(a, t) + rows_of(b, t) for t in ("runs", "batches", "sources")}
    lake.export(db_a, out)
    second = lake.export(db_b, out)
    assert second.units_dropped == 0 and second.units_others > 0
    assert str(db_a.resolve()) in second.others
    text = runner.invoke(app, ["export", str(out), "--db", str(db_b)]).stdout
    assert "kept " in text and "other exports wrote" in text and "0 dropped" in text
    with open_db(out) as both:
        for table, rows in want.items():
            assert rows_of(both, table) == sorted(rows), table
    # a file removed from database a (and ingested with --replace) leaves the lake
    (logs_a / "v0.2.15.log").unlink()
    with open_db(db_a) as store:
        store.con.execute("DELETE FROM logpipe_internal.batches WHERE source_id IN (SELECT "
                          "source_id FROM sources WHERE path LIKE '%v0.2.15.log')")
    third = lake.export(db_a, out)
    assert third.units_others > 0  # b's units are still there
    with open_db(out) as both:
        assert not both.all("SELECT 1 FROM batches WHERE source_path LIKE '%v0.2.15.log'")
        assert both.all("SELECT count(*) FROM runs WHERE source_path LIKE '%/b/%'")[0][0]
    alone = runner.invoke(app, ["export", str(out), "--db", str(db_b), "--replace"])
    assert alone.exit_code == 0, alone.output
    with open_db(out) as only_b:
        assert not only_b.all("SELECT 1 FROM runs WHERE source_path LIKE '%/a/%'")


def test_plain_parquet_readers_count_what_the_database_counts(sample_db: Path,
                                                              exported: Path) -> None:
    """Read with pyarrow and with DuckDB alone (no logpipe views), the lake's public tables
    hold the database's public rows: a console summary that repeats a JSONL record is in
    `bench_results_all` only, as in the database, so no reader counts a benchmark twice."""
    import duckdb
    import pyarrow.dataset as ds

    con = duckdb.connect()
    for table in ("bench_results", "bench_results_all", "batches", "runs", "run_env"):
        want = query(sample_db, f"SELECT count(*) FROM {table}")[0][0]
        folder = exported / f"table={table}"
        assert ds.dataset(folder, format="parquet", partitioning="hive").count_rows() == want
        got = con.execute(f"SELECT count(*) FROM read_parquet('{folder}/**/*.parquet', "
                          "hive_partitioning = false)").fetchone()
        assert got == (want,), table
    public, every = (query(sample_db, f"SELECT count(*) FROM {t}")[0][0]
                     for t in ("bench_results", "bench_results_all"))
    assert every > public  # the samples hold console summaries that repeat a JSONL record
    with_dupes = con.execute(
        f"SELECT count(*) FROM read_parquet('{exported}/table=bench_results_all/**/*.parquet')"
        " WHERE duplicate_of IS NOT NULL").fetchone()
    assert with_dupes == (every - public,)
