"""The ways rows reach the database give the same tables: a file's rows held in memory and
inserted at once, or spooled to Parquet and loaded (a large file), are the same rows in
every public table, a profiler trace included."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

import logpipe.ingest as ingest_module
from logpipe.engines.sglang import logparser
from logpipe.ingest import ahead, group, ingest_paths, logfile
from logpipe.store import spool
from logpipe.store.frames import FrameRows

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
# what differs by construction between two ingests of the same files
VOLATILE = ("ingested_at", "mtime", "device", "inode")


def _tables(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [n for (n,) in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_catalog = current_database() ORDER BY 1").fetchall()]
        out = {}
        for name in names:
            cols = [c for (c, *_) in con.execute(f"DESCRIBE main.{name}").fetchall()
                    if c not in VOLATILE]
            quoted = ", ".join(f'"{c}"' for c in cols)
            rows = con.execute(f"SELECT {quoted} FROM main.{name}").fetchall()
            # unordered tables; sums over them (summaries) may differ in the last bits
            out[name] = sorted((tuple(round(v, 6) if isinstance(v, float) else v for v in r)
                                for r in rows), key=repr)
        return out
    finally:
        con.close()


def test_held_and_spooled_rows_are_the_same_tables(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    logs = tmp_path / "logs"
    for part in ("real-gpu-profiled", "mission"):
        shutil.copytree(SAMPLES / part, logs / part)
    held, spooled = tmp_path / "held.duckdb", tmp_path / "spooled.duckdb"
    ingest_paths([logs], held)
    monkeypatch.setattr(spool, "HELD_BYTES", 0)  # every frame goes to Parquet at once
    monkeypatch.setattr(spool, "SMALL_TABLE_BYTES", 0)
    ingest_paths([logs], spooled)
    a, b = _tables(held), _tables(spooled)
    assert a.keys() == b.keys()
    assert sum(len(v) for v in a.values()) > 10_000  # not vacuous: batches and a trace
    assert a["trace_kernels"] and a["batches"]
    for name in a:
        assert a[name] == b[name], name


def test_small_tables_stay_in_memory_beside_spooled_ones(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    """Rows held in memory until the file's end, written to Parquet as they come (every
    table), or written to Parquet but for the tables that hold little (those stay in
    memory beside the others' files): the same tables, files read block by block."""
    logs = tmp_path / "logs"
    for part in ("real-vllm-cpu/real-vllm-cpu-baseline-r1", "mission/baseline-untuned"):
        shutil.copytree(SAMPLES / part, logs / part)
    from logpipe.engines.vllm.logparser import VLLMLogParser

    for module in (ahead, group):  # each file read by blocks, in a transaction of its own
        monkeypatch.setattr(module, "SMALL_FILE_BYTES", 16 * 1024)
    monkeypatch.setattr(VLLMLogParser, "block_bytes", 8 * 1024)  # a vLLM log's blocks
    held = tmp_path / "held.duckdb"
    ingest_paths([logs], held)
    a = _tables(held)
    assert a["batches"] and a["http_requests"] and a["vllm_stats"]
    monkeypatch.setattr(spool, "HELD_BYTES", 0)  # frames go to Parquet at once
    loaded: dict[str, set[str]] = {"memory": set(), "parquet": set()}
    insert_rows, files = FrameRows.insert_rows, spool.Spool.files

    def from_memory(self: Any, table: str, frame: Any) -> int:
        loaded["memory"].add(table)
        return insert_rows(self, table, frame)

    def from_parquet(self: Any, table: str) -> list[str]:
        out = files(self, table)
        if out:
            loaded["parquet"].add(table)
        return out

    monkeypatch.setattr(FrameRows, "insert_rows", from_memory)
    monkeypatch.setattr(spool.Spool, "files", from_parquet)
    # every table to Parquet; the small ones kept (the sample's batch rows are 15-17 KB
    # of frames, by lane; its vLLM stats rows less than 8 KB)
    for small_table in (0, 8 * 1024):
        monkeypatch.setattr(spool, "SMALL_TABLE_BYTES", small_table)
        for seen in loaded.values():
            seen.clear()
        spooled = tmp_path / f"spooled-{small_table}.duckdb"
        ingest_paths([logs], spooled)
        assert {"batches", "http_requests"} <= loaded["parquet"]
        # a vLLM log's stats rows are spooled, not inserted a block at a time: on disk
        # with the rest, or kept in memory as a small table and inserted from there
        assert ("vllm_stats" in loaded["memory"]) == (small_table > 0)
        assert ("vllm_stats" in loaded["parquet"]) == (small_table == 0)
        b = _tables(spooled)
        assert a.keys() == b.keys()
        for name in a:
            assert a[name] == b[name], (small_table, name)


def test_the_database_memory_bound_is_applied_and_rows_are_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "mission", logs / "mission")
    free, bounded = tmp_path / "free.duckdb", tmp_path / "bounded.duckdb"
    ingest_paths([logs], free)
    monkeypatch.setenv("LOGPIPE_DUCKDB_MEMORY", "300MB")
    ingest_paths([logs], bounded)
    from logpipe.store import Store

    with Store.open(bounded) as store:
        (limit,) = store.one("SELECT current_setting('memory_limit')") or ("",)
    assert limit == "286.1 MiB"  # 300 MB as DuckDB prints it (unbounded: ~80% of the RAM)
    assert _tables(free) == _tables(bounded)


def test_a_file_is_written_under_the_write_bound_and_read_again_without_it_when_out_of_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A file read on its own is written with DuckDB's memory bounded (``WRITE_MEMORY``);
    where a statement runs out of that memory the file is rolled back and read again
    without the bound, ending with the rows of an unbounded ingest."""
    import duckdb

    import logpipe.ingest as ingest

    log = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"
    free = tmp_path / "free.duckdb"
    ingest_paths([log], free)
    limits: list[str] = []
    attach = ingest.attach_envs

    def attach_once_out_of_memory(store: Any, *args: Any) -> None:
        (limit,) = store.one("SELECT current_setting('memory_limit')") or ("",)
        limits.append(limit)
        if len(limits) == 1:
            raise duckdb.OutOfMemoryException("could not allocate (as a test)")
        attach(store, *args)

    monkeypatch.setattr(ingest, "attach_envs", attach_once_out_of_memory)
    retried = tmp_path / "retried.duckdb"
    result = ingest_paths([log], retried)
    assert [f.status for f in result.files] == ["new"]
    assert limits[0] == "244.1 MiB"  # 256 MB as DuckDB prints it
    assert len(limits) == 2 and limits[1] != limits[0]  # the second reading: unbounded
    assert _tables(free) == _tables(retried)


def _messy_folder(root: Path, parts: tuple[str, ...] = (
        "eras", "wrappers", "restarts", "damaged", "unpaired", "mission", "real-vllm-cpu")
                  ) -> Path:
    """Small logs of every era, wrapper and engine beside benchmarks, notes, a damaged
    log, an archive, a copy of a log and a file that is no log: what a fleet's folder holds."""
    logs = root / "logs"
    for part in parts:
        shutil.copytree(SAMPLES / part, logs / part)
    shutil.copy(SAMPLES / "eras" / "v0.5.23.log", logs / "copy-of-v0.5.23.log")
    (logs / "notes.md").write_text(
        "# what we tried\n\nThe decode line read\n\n```\n"
        + (SAMPLES / "eras" / "v0.5.23.log").read_text().splitlines()[-1] + "\n```\n")
    (logs / "todo.txt").write_text("nothing to see here\n")
    decode = next(line for line in (SAMPLES / "eras" / "v0.5.23.log").read_text()
                  .splitlines() if "Decode batch" in line)
    (logs / "chat.txt").write_text(  # a quotation among prose: its runs are taken back
        "We looked at the server this morning and it was slower than we hoped.\n"
        f"{decode}\nThe throughput above is lower than the one we measured last week.\n"
        "Next we will try another setting of the scheduler and compare the two.\n")
    run = SAMPLES / "real-cpu-levels" / "real-cpu-levels-baseline-r1"
    (logs / "script-output.log").write_text(  # a server's output and a bench's summary
        (run / "server.log").read_text()
        + (run / "bench_console-max_concurrency-1.txt").read_text())
    import gzip

    (logs / "old.log.gz").write_bytes(gzip.compress((SAMPLES / "eras" / "v0.5.1.log")
                                                    .read_bytes()))
    return logs


def _serial(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file read by the ingest itself and written in its own transaction."""
    monkeypatch.setattr(ahead, "AHEAD_FILES", 0)
    monkeypatch.setattr(group, "GROUP_FILES", 1)


@pytest.fixture(scope="module")
def messy_serial(tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[Path, list[tuple[str, str]], dict[str, list[tuple]]]:
    """A messy folder, and what a serial ingest of it gives: statuses and tables."""
    root = tmp_path_factory.mktemp("messy")
    logs = _messy_folder(root)
    with pytest.MonkeyPatch.context() as m:
        _serial(m)
        result = ingest_paths([logs], root / "serial.duckdb")
    return logs, sorted((f.path, f.status) for f in result.files), _tables(
        root / "serial.duckdb")


@pytest.mark.parametrize("workers", ["threads", "processes"])
def test_parallel_and_serial_ingest_are_the_same_tables(
        tmp_path: Path, workers: str, monkeypatch: pytest.MonkeyPatch,
        messy_serial: tuple[Path, list[tuple[str, str]], dict[str, list[tuple]]]):
    """Small files parsed ahead (on threads, or in worker processes for many files) and
    written in groups give, byte for byte, the public tables of files read and written
    one by one."""
    logs, statuses, b = messy_serial
    parallel = tmp_path / "parallel.duckdb"
    parsed: list[bool] = []
    real_take = ahead.ParseAhead.take

    def take(self: ahead.ParseAhead, index: int) -> ahead.Ahead | None:
        found = real_take(self, index)
        parsed.append(found is not None and found.parsed is not None)
        return found

    together: list[int] = []
    real_parse_files = logparser.parse_files

    def parse_files(blocks: list[bytearray], *args: object) -> list:
        together.append(len(blocks))
        return real_parse_files(blocks, *args)

    monkeypatch.setattr(ahead.ParseAhead, "take", take)
    monkeypatch.setattr(logparser, "parse_files", parse_files)  # (seen on threads)
    monkeypatch.setattr(ahead, "PROCESS_FILES", 1 if workers == "processes" else 10**9)
    first = ingest_paths([logs], parallel)
    assert sum(parsed) > 20  # not vacuous: files were parsed ahead
    if workers == "threads":  # ... and many of them together
        assert sum(n for n in together if n > 1) > 20
    assert sorted((f.path, f.status) for f in first.files) == statuses
    assert {f.status for f in first.files} >= {"new", "duplicate", "skipped"}
    a = _tables(parallel)
    assert a.keys() == b.keys()
    assert a["batches"] and a["runs"] and a["rejects"] and a["bench_results"]
    assert any("quoted among" in str(row) for row in a["rejects"])
    for name in a:
        assert a[name] == b[name], name


def test_a_file_that_fails_in_a_group_fails_alone(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch):
    """One file of a group fails while it is written: the group is rolled back and its
    files read again one by one, so that only that file fails and the others' rows are
    those of a serial ingest without it."""
    logs = _messy_folder(tmp_path, ("eras",))
    bad = (logs / "eras" / "v0.4.7.log").resolve()
    real_record = logfile.record_log_source

    def record_log_source(store, key, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if key == str(bad):
            raise RuntimeError("disk full")
        return real_record(store, key, *args, **kwargs)

    monkeypatch.setattr(logfile, "record_log_source", record_log_source)
    grouped = tmp_path / "grouped.duckdb"
    calls: list[int] = []
    real_group = ingest_module._ingest_group

    def ingest_group(store, members, *args):  # noqa: ANN001, ANN002, ANN202
        calls.append(len(members))
        return real_group(store, members, *args)

    with monkeypatch.context() as m:
        m.setattr(ingest_module, "_ingest_group", ingest_group)
        result = ingest_paths([logs], grouped)
    assert calls and max(calls) > 10  # the bad file was read in a group
    failed = [f for f in result.files if f.status == "failed"]
    assert [f.path for f in failed] == [str(bad)] and "disk full" in (failed[0].detail or "")
    _serial(monkeypatch)
    bad.unlink()
    serial = tmp_path / "serial.duckdb"
    ingest_paths([logs], serial)
    a, b = _tables(grouped), _tables(serial)
    for name in a:
        assert a[name] == b[name], name


def test_files_parsed_ahead_are_bounded_by_bytes(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``AHEAD_BYTES`` of files wait parsed (one file beyond it at most, so that
    the next one is always started), whatever their number; every file is still found."""
    seed = (SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log").read_bytes()
    paths = []
    for i in range(12):
        path = tmp_path / f"server-{i:02d}.log"
        path.write_bytes(seed)
        paths.append(path)
    size = len(seed)
    monkeypatch.setattr(ahead, "AHEAD_BYTES", 3 * size)
    parse = ahead.ParseAhead(paths, set(), set(), False)
    try:
        most = 0
        for i in range(len(paths)):
            found = parse.take(i)
            assert found is not None and found.parsed is not None, i
            most = max(most, parse._held)
            assert parse._held == sum(s for _, _, s in parse._started.values())
        assert size <= most <= 3 * size + size  # (bounded, and some were held ahead)
    finally:
        parse.close()


@pytest.mark.parametrize(("keep_text", "blocks_before"), [(False, 0), (True, 2)])
def test_slow_lines_read_by_a_worker_are_the_same_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_text: bool,
        blocks_before: int) -> None:
    """A big log's request records and event lines read by a worker process (blocks of
    many; the first blocks in process where the worker starts later) give the rows the
    ingest's own process gives them, in every public table, the request text included
    where kept; no worker is left running."""
    launches = [SAMPLES / "real-cpu" / name / "server.log" for name in (
        "real-cpu-baseline-r1", "real-cpu-baseline-r2", "real-cpu-ngram-r1",
        "real-cpu-ngram-r2")]
    big = tmp_path / "logs" / "launches.log"  # over the small-file size: read in blocks
    big.parent.mkdir()
    with big.open("wb") as out:
        while out.tell() <= group.SMALL_FILE_BYTES * 3 // 2:
            for path in launches:
                out.write(path.read_bytes())
    for size in ("PARSE_BLOCK_BYTES", "SLOW_BLOCK_BYTES"):  # several blocks
        monkeypatch.setattr(logparser, size, 1024 * 1024)
    monkeypatch.setattr(logparser, "RECORDS_FOR_WORKER", 16)
    monkeypatch.setattr(logparser, "EVENTS_FOR_WORKER", 16)
    monkeypatch.setattr(logparser, "BLOCKS_BEFORE_WORKER", blocks_before)
    sent: list[tuple[int, int]] = []
    send = logparser.SGLangLogParser._send_slow_lines

    def counted(self: Any, prepared: Any) -> Any:
        out = send(self, prepared)
        sent.append((0, 0) if out is None else (len(out[0]), len(out[1])))
        return out

    monkeypatch.setattr(logparser.SGLangLogParser, "_send_slow_lines", counted)
    by_worker, here = tmp_path / "worker.duckdb", tmp_path / "here.duckdb"
    assert not ingest_paths([big], by_worker, keep_request_text=keep_text).failed
    # the records and events went to the worker, but for the first blocks of many (the
    # blocks are prepared on two threads, so ``sent`` is in the order they finished: a
    # later block may come before an earlier one, as seen once under a loaded test run)
    assert len(sent) >= 6 and sent.count((0, 0)) >= blocks_before
    assert sum(r for r, _ in sent) >= 500 and sum(e for _, e in sent) >= 300
    monkeypatch.setenv("LOGPIPE_RECORD_WORKERS", "0")
    sent.clear()
    assert not ingest_paths([big], here, keep_request_text=keep_text).failed
    assert len(sent) >= 6 and sent == [(0, 0)] * len(sent)
    a, b = _tables(by_worker), _tables(here)
    assert len(a["request_metrics"]) >= 500 and len(a["events"]) >= 300
    assert len(a["runs"]) >= 20
    con = duckdb.connect(str(by_worker), read_only=True)
    (kept,) = con.execute("SELECT count(*) FILTER (WHERE extra::VARCHAR LIKE "
                          "'%\"prompt_text\":%') FROM request_metrics").fetchone() or (0,)
    (args,) = con.execute("SELECT count(*) FROM runs WHERE server_args IS NOT NULL"
                          ).fetchone() or (0,)
    con.close()
    assert kept == (len(a["request_metrics"]) if keep_text else 0)
    assert args == len(a["runs"])  # every launch's arguments, read by the worker
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name
    import os
    import subprocess
    # (this process's own workers: a test on the other test process may have its own now)
    ps = subprocess.run(["ps", "-eo", "ppid=,args="], capture_output=True, text=True).stdout
    ours = [ln for ln in ps.splitlines() if ln.split(None, 1)[0] == str(os.getpid())]
    assert not [ln for ln in ours if "logpipe.workers" in ln]


def _runs_written(logs: Path, db: Path) -> dict[str, list[tuple]]:
    """The tables of a group of small files and of a file read alone, in several blocks."""
    with pytest.MonkeyPatch.context() as patch:
        for size in ("PARSE_BLOCK_BYTES", "SLOW_BLOCK_BYTES"):  # several blocks
            patch.setattr(logparser, size, 64 * 1024)
        ingest_paths([logs], db)
        ingest_paths([SAMPLES / "real-cpu-levels" / "real-cpu-levels-ngram-r1" / "server.log"],
                     db)
    return _tables(db)


@pytest.fixture(scope="module")
def runs_written_plainly(tmp_path_factory: pytest.TempPathFactory
                         ) -> tuple[Path, dict[str, list[tuple]]]:
    """The logs, and :func:`_runs_written` of them the plain ways: a new launch's facts
    updated after its row, a run's wide columns updated in place, all runs read at once
    for their environments."""
    from logpipe.ingest import environment
    from logpipe.store import runs

    tmp = tmp_path_factory.mktemp("plainly")
    logs = tmp / "logs"
    for part in ("restarts", "mission", "real-cpu"):
        shutil.copytree(SAMPLES / part, logs / part)
    add_runs = runs.RunRows.add_runs

    def add_runs_then_facts(self: Any, rows: Any, *, engine: str, facts: Any = ()) -> list:
        add_runs(self, rows, engine=engine)
        return list(facts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs.RunRows, "add_runs", add_runs_then_facts)
        patch.setattr(runs, "WIDE_RUN_COLUMNS", frozenset())
        patch.setattr(environment, "ENV_RUNS_PER_WRITE", 10**6)
        return logs, _runs_written(logs, tmp / "plain.duckdb")


@pytest.mark.parametrize("pages", [100, 2])
def test_the_ways_runs_are_written_are_the_same_tables(
        tmp_path: Path, pages: int, monkeypatch: pytest.MonkeyPatch,
        runs_written_plainly: tuple[Path, dict[str, list[tuple]]]):
    """A new launch's facts written with its row, a run's arguments and environment written
    by deleting and inserting its row again (``WIDE_RUN_COLUMNS``, which DuckDB can spill)
    and a file's runs read a page at a time for their environments (of 100 runs, or 2)
    give the tables of the plain ways.  In a group of small files and in a file read alone,
    of several blocks."""
    from logpipe.ingest import environment

    monkeypatch.setattr(environment, "ENV_RUNS_PER_WRITE", pages)
    logs, a = runs_written_plainly
    b = _runs_written(logs, tmp_path / "other.duckdb")
    assert len(a["runs"]) >= 8 and len(a["run_env"]) > 1000  # not vacuous
    assert sum(1 for r in a["runs"] if "speculative" in repr(r)) > 0  # facts were written
    assert a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name


def test_a_failed_environment_write_on_its_thread_fails_the_file_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environments of a file of many runs are written on a thread of their own: a
    write that fails there fails its file (nothing of it kept), the other files are
    written, the interpreter's switch interval is as it was and no thread is left."""
    import sys
    import threading

    from logpipe.ingest import environment
    from logpipe.store import runs

    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "restarts", logs / "restarts")
    shutil.copytree(SAMPLES / "mission", logs / "mission")
    bad = next(p for p in sorted((logs / "restarts").glob("*.log"))
               if p.read_text().count("server_args=") >= 2)
    monkeypatch.setattr(environment, "ENV_RUNS_PER_WRITE", 1)
    write = runs.RunRows.write_run_envs
    threads: set[str] = set()

    def fails_on_its_thread(self: Any, rows: Any) -> None:
        threads.add(threading.current_thread().name)
        if rows.envs["run_id"].to_list() and self.one(
                "SELECT source_path FROM runs WHERE run_id = ?",
                [rows.envs["run_id"][0]])[0] == str(bad.resolve()) \
                and threading.current_thread() is not threading.main_thread():
            raise RuntimeError("disk full")
        write(self, rows)

    monkeypatch.setattr(runs.RunRows, "write_run_envs", fails_on_its_thread)
    before = sys.getswitchinterval()
    db = tmp_path / "db.duckdb"
    result = ingest_paths([logs], db)
    assert any(name.startswith("logpipe-env") for name in threads)
    failed = [f for f in result.files if f.status == "failed"]
    assert [f.path for f in failed] == [str(bad.resolve())], result.files
    assert "disk full" in (failed[0].detail or "")
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM runs WHERE source_path = ?",
                           [str(bad.resolve())]).fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] > 0  # type: ignore[index]
    finally:
        con.close()
    assert sys.getswitchinterval() == before
    assert not [t for t in threading.enumerate() if t.name.startswith("logpipe-env")]
