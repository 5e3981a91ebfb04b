"""Idempotent, incremental, transactional ingest on a real DuckDB file."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from logpipe import readers
from logpipe.ingest import ingest_paths
from logpipe.store import Spool
from tests.conftest import SAMPLES, query

MISSION = SAMPLES / "mission" / "baseline-untuned" / "server.log"
TABLES = ("batches", "events", "http_requests", "rejects")


def counts(db: Path) -> dict[str, int]:
    return {t: query(db, f"SELECT count(*) FROM {t}")[0][0]
            for t in (*TABLES, "runs", "logpipe_internal.run_envs")}


def copy_log(tmp_path: Path, src: Path = MISSION, name: str = "server.log") -> Path:
    folder = tmp_path / "logs" / "exp1"
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / name
    shutil.copy(src, dst)
    return dst


def test_reingest_adds_nothing(sample_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    before = counts(db)
    result = ingest_paths([SAMPLES], db)
    assert result.count("unchanged") == len(result.files) - result.count("skipped")
    assert counts(db) == before
    assert result.rows("batches") == 0


def test_an_unchanged_reingest_imports_no_parser(sample_db: Path, tmp_path: Path) -> None:
    """Every kind of sample re-ingested unchanged by the CLI, in a fresh process: no parser
    is imported (polars, numpy and pyarrow take ~0.3 s of a process's start, more than
    the work of an unchanged re-ingest)."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "logpipe.cli", "ingest",
                          str(SAMPLES), "--db", str(db)], capture_output=True, text=True,
                         check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()
                if line.startswith("import time:")}
    assert {"duckdb", "logpipe.ingest", "logpipe.store"} <= imported
    assert not imported & {"polars", "numpy", "pyarrow", "logpipe.engines.sglang.parser",
                           "logpipe.engines.sglang.logparser", "logpipe.ingest.logfile"}
    summary = re.search(r"(\d+) file\(s\) \((\d+) unchanged, (\d+) skipped\)", out.stdout)
    assert summary is not None, out.stdout
    files, unchanged, skipped = map(int, summary.groups())
    assert unchanged > 0 and unchanged + skipped == files


def test_appended_lines_are_added_once(tmp_path: Path, db: Path) -> None:
    lines = MISSION.read_text().splitlines(keepends=True)
    log = copy_log(tmp_path)
    log.write_text("".join(lines[:100]))
    ingest_paths([log], db)
    first = counts(db)
    with log.open("a") as fh:
        fh.write("".join(lines[100:]))
    result = ingest_paths([log], db)
    assert result.files[0].status == "appended"
    assert result.files[0].lines == len(lines) - 100
    # same rows as ingesting the whole file at once
    whole = tmp_path / "whole.duckdb"
    ingest_paths([MISSION], whole)
    assert counts(db) == counts(whole)
    assert counts(db)["batches"] > first["batches"]
    assert query(db, "SELECT count(DISTINCT line_no) = count(*) FROM batches") == [(True,)]
    assert query(db, "SELECT lines FROM sources") == [(len(lines),)]


DOCKER = SAMPLES / "wrappers" / "docker-timestamps.log"
WARNING = ("2026-06-07T09:00:31.300000000Z /usr/lib/python3/dist-packages/torch/cuda/"
           "__init__.py:52: UserWarning: CUDA initialization: skipped\n")
"""A line of the docker log above with docker's stamp alone: earlier than the SGLang stamps
of its launch's first lines (two hours ahead, its local time)."""


@pytest.mark.parametrize("cut", [2, 10])
def test_a_runs_id_is_the_same_however_its_lines_arrive(tmp_path: Path, cut: int) -> None:
    """A run's id does not depend on how much of it one read saw: a live log read in two
    parts (the second an append) gives each run the id a read of the whole file gives.
    Lines here carry two clocks (docker's UTC stamp alone on a warning, SGLang's local
    stamp two hours ahead on the others), so the earliest stamp of a run's lines depends
    on which of its lines a read saw."""
    lines = DOCKER.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if "Decode batch" in ln)
    lines.insert(at, WARNING)
    live = copy_log(tmp_path, DOCKER)
    live.write_text("".join(lines))
    ingest_paths([live], tmp_path / "whole.duckdb")
    live.write_text("".join(lines[:cut]))  # (the same path: a run's id hashes it)
    ingest_paths([live], tmp_path / "live.duckdb")
    with live.open("a") as fh:
        fh.write("".join(lines[cut:]))
    assert ingest_paths([live], tmp_path / "live.duckdb").files[0].status == "appended"
    sql = "SELECT run_seq, run_id, first_line, started_at FROM runs ORDER BY 1"
    runs = query(tmp_path / "whole.duckdb", sql)
    assert runs and runs == query(tmp_path / "live.duckdb", sql)
    # (the warning's stamp is the run's earliest: what made the ids differ)
    assert str(runs[0][3]).startswith("2026-06-07 09:00:31.3")


def test_a_runs_id_is_the_same_wherever_blocks_end(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A big log of many launches, its lines with two clocks as above, read in blocks of
    two sizes (so that blocks end inside different launches): every run has the same id,
    first line and start."""
    from logpipe.engines.sglang import logparser
    from logpipe.ingest import ahead, group

    lines = DOCKER.read_text().splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if "Decode batch" in ln)
    launch = "".join(lines[:at]) + WARNING + "".join(lines[at:])
    log = copy_log(tmp_path, DOCKER)
    log.write_text(launch * 12)
    for module in (ahead, group):  # (a big file: read in blocks)
        monkeypatch.setattr(module, "SMALL_FILE_BYTES", 16 * 1024)
    sql = "SELECT run_seq, run_id, first_line, started_at FROM runs ORDER BY 1"
    got = []
    for size in (3000, 64 * 1024):
        for name in ("PARSE_BLOCK_BYTES", "SLOW_BLOCK_BYTES"):
            monkeypatch.setattr(logparser, name, size)
        db = tmp_path / f"blocks-{size}.duckdb"
        assert not ingest_paths([log], db).failed
        got.append(query(db, sql))
    assert len(got[0]) == 12 and got[0] == got[1]


def test_partial_last_line_waits_for_its_newline(tmp_path: Path, db: Path) -> None:
    log = copy_log(tmp_path)
    text = log.read_text()
    last_decode = [ln for ln in text.splitlines() if "Decode batch" in ln][-1]
    body = text + last_decode[:60]  # a line still being written
    log.write_text(body)
    ingest_paths([log], db)
    n = query(db, "SELECT count(*) FROM batches")[0][0]
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]
    log.write_text(body + last_decode[60:] + "\n")
    result = ingest_paths([log], db)
    assert result.files[0].status == "appended"
    assert query(db, "SELECT count(*) FROM batches")[0][0] == n + 1
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]


def test_rewritten_file_is_replaced_only_with_replace(tmp_path: Path, db: Path) -> None:
    log = copy_log(tmp_path)
    ingest_paths([log], db)
    before = counts(db)
    # same inode, content changed in place and not shorter: kept as it was, reported
    other = (SAMPLES / "eras" / "v0.5.23.log").read_bytes()
    log.write_bytes(other + b"\n" * max(0, MISSION.stat().st_size - len(other)))
    result = ingest_paths([log], db)
    assert result.files[0].status == "changed"
    assert "--replace" in (result.files[0].detail or "")
    assert counts(db) == before
    result = ingest_paths([log], db, replace=True)
    assert result.files[0].status == "rewritten"
    fresh = tmp_path / "fresh.duckdb"
    ingest_paths([log], fresh)
    assert counts(db) == counts(fresh)


def test_copytruncate_keeps_rows_and_run_and_reads_the_new_content(tmp_path: Path,
                                                                   db: Path) -> None:
    """logrotate's copytruncate: the log is copied to .1, then cut to zero and written on.
    Nothing ingested is lost, the launch goes on with the same run, and the rotated copy
    is recognised as what was already read."""
    lines = MISSION.read_text().splitlines(keepends=True)
    decode = [ln for ln in lines if "Decode batch" in ln]
    log = copy_log(tmp_path)
    ingest_paths([log], db)
    before = counts(db)
    (run_id,) = query(db, "SELECT run_id FROM runs")[0]
    shutil.copy(log, log.with_name("server.log.1"))
    with log.open("w") as fh:  # same inode, truncated, then the server writes on
        fh.write("".join(decode[-5:]))
    result = ingest_paths([tmp_path / "logs"], db)
    assert [f.status for f in result.files] == ["truncated", "duplicate"]
    assert "rotated copy" in (result.files[1].detail or "")
    after = counts(db)
    assert after["batches"] == before["batches"] + 5
    assert after["runs"] == before["runs"]
    assert query(db, "SELECT DISTINCT run_id FROM batches") == [(run_id,)]
    assert query(db, "SELECT count(DISTINCT line_no) = count(*) FROM batches") == [(True,)]
    assert query(db, "SELECT generations FROM sources WHERE path = ?",
                 [str(log.resolve())]) == [(1,)]
    # and reading on after the truncation is an ordinary append
    with log.open("a") as fh:
        fh.write("".join(decode[:3]))
    assert ingest_paths([log], db).files[0].status == "appended"
    assert counts(db)["batches"] == before["batches"] + 8
    assert ingest_paths([tmp_path / "logs"], db).count("unchanged") == 1


def test_rotation_by_rename_then_a_new_file(tmp_path: Path, db: Path) -> None:
    """logrotate's default: server.log is renamed to server.log.1 and a new server.log is
    created.  The old rows follow the rotated copy; the new file is a new run."""
    log = copy_log(tmp_path)
    ingest_paths([log], db)
    before = counts(db)
    (run_id, name) = query(db, "SELECT run_id, name FROM runs")[0]
    log.rename(log.with_name("server.log.1"))
    shutil.copy(SAMPLES / "eras" / "v0.5.23.log", log)
    result = ingest_paths([tmp_path / "logs"], db)
    assert [f.status for f in result.files] == ["new", "moved"]
    assert query(db, "SELECT name FROM runs WHERE run_id = ?", [run_id]) == [(name,)]
    assert query(db, "SELECT count(*) FROM batches WHERE run_id = ?", [run_id]) == [
        (before["batches"],)]
    assert query(db, "SELECT count(*) FROM sources WHERE path LIKE '%replaced file%'") == [
        (0,)]
    assert counts(db)["runs"] > before["runs"]


def test_a_new_file_that_starts_as_the_rotated_one_did_gets_new_ids(
        tmp_path: Path, db: Path) -> None:
    """A run's id hashes its path, the file's first line and the run's first line number:
    a new server.log that starts with the line the rotated one did (a banner without a
    stamp) would hash as the moved runs do.  Its runs get ids of their own, and both files'
    rows are kept."""
    banner = "Starting the inference server (no stamp on this line)\n"
    log = copy_log(tmp_path)
    log.write_text(banner + MISSION.read_text())
    ingest_paths([log], db)
    old = query(db, "SELECT run_id, name FROM runs ORDER BY 1")
    log.rename(log.with_name("server.log.1"))
    log.write_text(banner + (SAMPLES / "eras" / "v0.5.23.log").read_text())
    result = ingest_paths([tmp_path / "logs"], db)
    assert [f.status for f in result.files] == ["new", "moved"]
    runs = query(db, "SELECT run_id, name, source_path FROM runs ORDER BY source_path")
    assert len(runs) == len(old) + 1 and len({r for r, _, _ in runs}) == len(runs)
    assert {(r, n) for r, n, _ in runs} >= set(old)
    assert query(db, "SELECT count(DISTINCT run_id) FROM batches") == [(len(runs),)]


def test_rotated_file_keeps_its_rows_and_runs(tmp_path: Path, db: Path) -> None:
    log = copy_log(tmp_path)
    ingest_paths([log], db)
    before = counts(db)
    run_ids = query(db, "SELECT run_id, name FROM runs")
    log.rename(log.with_name("server.log.1"))
    result = ingest_paths([tmp_path / "logs"], db)
    assert [f.status for f in result.files] == ["moved"]
    assert counts(db) == before
    assert query(db, "SELECT run_id, name FROM runs") == run_ids
    assert query(db, "SELECT DISTINCT source_path FROM batches") == [
        (str(log.with_name("server.log.1").resolve()),)]


def test_copy_of_an_ingested_file_is_a_duplicate(tmp_path: Path, db: Path) -> None:
    log = copy_log(tmp_path)
    ingest_paths([log], db)
    before = counts(db)
    twin = copy_log(tmp_path, name="again.log")
    result = ingest_paths([twin], db)
    assert result.files[0].status == "duplicate"
    assert str(log.resolve()) in (result.files[0].detail or "")
    assert counts(db) == before


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_logs(tmp_path: Path, db: Path, suffix: str) -> None:
    data = MISSION.read_bytes()
    path = tmp_path / "exp" / f"server.log{suffix}"
    path.parent.mkdir()
    if suffix == ".gz":
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(zstandard.ZstdCompressor().compress(data))
    ingest_paths([path], db)
    plain = tmp_path / "plain.duckdb"
    ingest_paths([MISSION], plain)
    assert counts(db) == counts(plain)
    assert query(db, "SELECT name FROM runs") == [("exp",)]
    assert ingest_paths([path], db).files[0].status == "unchanged"


def test_failure_mid_file_leaves_database_as_it_was(tmp_path: Path, db: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    log = copy_log(tmp_path)
    other = copy_log(tmp_path, SAMPLES / "eras" / "v0.4.7.log", name="v0.4.7.log")
    ingest_paths([other], db)
    before = counts(db)
    sources_before = query(db, "SELECT * FROM sources")

    # small blocks so the file is written in several chunks; fail on the third
    monkeypatch.setattr(readers, "BLOCK_BYTES", 4096)
    original = Spool.add
    calls = {"n": 0}

    def failing(self: Spool, table: str, frame, **kw):  # type: ignore[no-untyped-def]
        if table == "batches" and frame.height:
            calls["n"] += 1
            if calls["n"] == 3:
                raise OSError("disk full (injected)")
        return original(self, table, frame, **kw)

    monkeypatch.setattr(Spool, "add", failing)
    from logpipe.ingest import logfile as ingest_mod

    monkeypatch.setattr(ingest_mod, "line_blocks",
                        lambda fh, _size=0: readers.line_blocks(fh, block_bytes=4096))
    result = ingest_paths([log], db)
    assert result.files[0].status == "failed"
    assert "disk full" in (result.files[0].detail or "")
    assert calls["n"] == 3
    assert counts(db) == before
    assert query(db, "SELECT * FROM sources") == sources_before


def test_chunked_parse_equals_whole_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    from logpipe.ingest import logfile as ingest_mod

    whole = tmp_path / "whole.duckdb"
    ingest_paths([SAMPLES / "eras"], whole)
    monkeypatch.setattr(ingest_mod, "line_blocks",
                        lambda fh, _size=0: readers.line_blocks(fh, block_bytes=700))
    small = tmp_path / "small.duckdb"
    ingest_paths([SAMPLES / "eras"], small)
    sql = ("SELECT source_path, line_no, ts, kind, running_req, gen_throughput, "
           "CAST(extra AS VARCHAR) FROM batches ORDER BY 1, 2")
    assert query(small, sql) == query(whole, sql)
    ev = "SELECT source_path, line_no, kind, message FROM events ORDER BY 1, 2"
    assert query(small, ev) == query(whole, ev)
    runs = "SELECT name, started_at, ended_at, format_era, model FROM runs ORDER BY 1"
    assert query(small, runs) == query(whole, runs)


def test_two_launches_in_one_file_are_two_runs(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT name, run_seq, first_line, "
                 "(SELECT count(*) FROM batches b WHERE b.run_id = r.run_id) "
                 "FROM runs r WHERE name LIKE 'restarts%' ORDER BY run_seq")
    assert [r[:2] for r in rows] == [("restarts", 0), ("restarts-2", 1)]
    assert rows[0][3] > 0 and rows[1][3] > 0
    assert rows[1][2] > rows[0][2]


def test_traceback_is_attached_to_its_error(sample_db: Path) -> None:
    (message, attrs), = query(
        sample_db, "SELECT message, attrs->>'exception' FROM events WHERE kind = 'error' "
        "AND source_path LIKE '%v0.4.7.log' AND message LIKE 'Scheduler hit%'")
    assert message.count("\n") == 3
    assert attrs.startswith("torch.OutOfMemoryError")


def test_midnight_rollover_of_time_only_stamps(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT ts FROM batches WHERE source_path LIKE '%v0.2.15.log' "
                 "ORDER BY line_no")
    stamps = [r[0] for r in rows]
    assert stamps == sorted(stamps)
    assert stamps[-1].date() > stamps[0].date()


def test_run_facts_from_server_args(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT name, model, tp_size, ep_size, spec_algorithm, "
                 "spec_num_steps, spec_num_draft_tokens, role FROM runs "
                 "WHERE name IN ('eagle3-untuned', 'baseline-untuned', 'baseline-tuned') "
                 "ORDER BY name")
    model = "Qwen/Qwen3-235B-A22B-Instruct-2507"
    assert rows == [
        ("baseline-tuned", model, 8, 8, None, None, None, "baseline"),
        ("baseline-untuned", model, 8, 8, None, None, None, "baseline"),
        ("eagle3-untuned", model, 8, 8, "EAGLE3", 2, 3, "speculative"),
    ]


def test_format_eras_of_samples(sample_db: Path) -> None:
    eras = dict(query(sample_db, "SELECT name, format_era FROM runs"))
    # each sample's true release lies inside the inferred era, which is narrow
    from logpipe.engines.sglang import era

    for name, version in [("v0.2.15", "0.2.15"), ("v0.3.6", "0.3.6"), ("v0.4.5", "0.4.5"),
                          ("v0.4.7", "0.4.7"), ("v0.5.1", "0.5.1"), ("v0.5.5", "0.5.5"),
                          ("v0.5.10", "0.5.10"), ("v0.5.16", "0.5.16"), ("v0.5.23", "0.5.23")]:
        first, _, last = eras[name].partition("–")
        last = last or first
        assert era.RELEASES.index(first) <= era.RELEASES.index(version) \
            <= era.RELEASES.index(last), name
    assert eras["v0.5.10"] == "0.5.10"
    assert eras["v0.4.5"] == "0.4.5" or eras["v0.4.5"] == "0.4.4–0.4.5"


def test_secrets_never_reach_the_database(tmp_path: Path, db: Path) -> None:
    log = tmp_path / "secret.log"
    log.write_text(
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', api_key='sk-live-123', "
        "tp_size=1, max_total_tokens=None)\n"
        "[2026-01-01 00:00:01] The server is fired up and ready to roll!\n")
    ingest_paths([log], db)
    dump = str(query(db, "SELECT * FROM runs")) + str(query(db, "SELECT * FROM events"))
    assert "sk-live-123" not in dump
    assert query(db, "SELECT server_args->>'api_key' FROM runs") == [("<redacted>",)]


@pytest.mark.slow
def test_two_concurrent_ingests_wait_for_each_other_and_never_corrupt(tmp_path: Path,
                                                                      db: Path) -> None:
    """DuckDB lets one process write a database file: the second ingest waits (and says
    so), then adds its rows; the result equals the two ingests one after the other."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "LOGPIPE_LOCK_WAIT": "300"}
    procs = [subprocess.Popen([sys.executable, "-m", "logpipe.cli", "ingest", str(SAMPLES / d),
                               "--db", str(db)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
             for d in ("eras", "mission")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    serial = tmp_path / "serial.duckdb"
    ingest_paths([SAMPLES / "eras"], serial)
    ingest_paths([SAMPLES / "mission"], serial)
    assert counts(db) == counts(serial)
    assert query(db, "SELECT count(*) FROM sources") == query(serial,
                                                             "SELECT count(*) FROM sources")


@pytest.mark.slow
def test_kill_9_at_random_points_converges_to_the_right_rows(tmp_path: Path) -> None:
    """An ingest killed with SIGKILL at random moments (mid-parse, mid-load, mid-commit)
    leaves a database that opens, holds either none or all of a file's rows, and the next
    ingest completes it to exactly the rows of an uninterrupted ingest."""
    import random
    import signal
    import subprocess
    import sys
    import time

    lines = MISSION.read_text().splitlines(keepends=True)
    decode = next(ln for ln in lines if "Decode batch" in ln and "cuda graph: True" in ln)
    head, tail = lines[:-3], lines[-3:]
    log = copy_log(tmp_path)
    body = [decode.replace("#token: ", f"#token: {i % 9000}") for i in range(120_000)]
    log.write_text("".join(head + body + tail))
    clean = tmp_path / "clean.duckdb"
    ingest_paths([log.parent], clean)
    whole = counts(clean)["batches"]
    db = tmp_path / "killed.duckdb"
    rng = random.Random(7)
    cmd = [sys.executable, "-m", "logpipe.cli", "ingest", str(log.parent), "--db", str(db)]
    for _ in range(4):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if db.exists():  # whatever was committed is whole: every line of the file, or none
            n = query(db, "SELECT count(*) FROM batches")[0][0]
            assert n in (0, whole)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert counts(db) == counts(clean)
    assert query(db, "SELECT count(DISTINCT line_no) = count(*) FROM batches") == [(True,)]


def test_a_compressed_log_rewritten_is_changed_not_truncated(tmp_path: Path, db: Path) -> None:
    """A .gz file's size is not comparable with the bytes read from it: a new content is
    an edit (kept until --replace), never taken for a truncation."""
    path = tmp_path / "exp" / "server.log.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(MISSION.read_bytes()))
    ingest_paths([path], db)
    before = counts(db)
    path.write_bytes(gzip.compress((SAMPLES / "eras" / "v0.5.23.log").read_bytes()))
    assert ingest_paths([path], db).files[0].status == "changed"
    assert counts(db) == before
    assert ingest_paths([path], db, replace=True).files[0].status == "rewritten"


def test_a_small_log_cut_mid_line_goes_on_when_appended(tmp_path: Path) -> None:
    """A log under 4 KiB read while its last line was half written: the rest of the file
    is an append, not a change in place (the head hash covers the bytes read)."""
    whole = (SAMPLES / "eras" / "v0.5.23.log").read_bytes()
    log = tmp_path / "server.log"
    log.write_bytes(whole[:3000])
    assert b"\n" != whole[2999:3000]
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    log.write_bytes(whole[:3500])
    assert ingest_paths([log], db).files[0].status == "appended"
    log.write_bytes(whole)
    assert ingest_paths([log], db).files[0].status == "appended"
    fresh = tmp_path / "fresh.duckdb"
    ingest_paths([log], fresh)
    for table in ("batches", "events", "http_requests", "rejects"):
        assert query(db, f"SELECT count(*) FROM {table}") == \
            query(fresh, f"SELECT count(*) FROM {table}"), table
