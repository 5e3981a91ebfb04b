"""SGLang lines as they arrive in the wild, found by SGLang's own signature.

Each class below wraps the eleven batch lines of ``sample_logs/wrappers/plain.log`` the way
a real log arrives (lines composed here in those shapes): every class must give exactly
the plain log's values, with the C fast lane on and off, and keep what its outer prefix
says in ``line_prefixes``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logpipe.engines.sglang.parser import LogState, finish_chunk, parse_chunk, prepare_block
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

PLAIN = (SAMPLES / "wrappers" / "plain.log").read_text().splitlines()
VALUES = ("kind, forward_iter, new_seq, new_token, cached_token, running_req, queue_req, "
          "num_token, token_usage, cuda_graph, graph_label, gen_throughput, input_throughput, "
          "accept_len, accept_rate, CAST(extra AS VARCHAR)")


def _outer_stamp(line: str) -> str:
    """A host logger's stamp 9 hours ahead of SGLang's (another zone), then SGLang's."""
    hour = int(line[12:14])
    return f"[{line[1:11]} {(hour + 9) % 24:02d}{line[14:20]}] {line}"


CLASSES: dict[str, Callable[[str], str]] = {
    "compose": lambda ln: f"sglang-svc-1  | {ln}",
    "syslog": lambda ln: f"Jun 07 {ln[12:20]} node7 python3[4242]: {ln}",
    "two-stamps": _outer_stamp,
    "tqdm-glued": lambda ln: f"  7% 9/128 [00:11<02:37,  1.31s/it]{ln}",
    "quoted": lambda ln: f"> {ln}",
    "labelled": lambda ln: f"before: {ln}",
    "fence-glued": lambda ln: f"```{ln}",
    "supervisord": lambda ln: f"sglang:sglang_00 stdout | {ln}",
}


def wrap(style: str) -> str:
    f = CLASSES[style]
    return "\n".join(f(ln) if "] " in ln and ln.startswith("[") else ln for ln in PLAIN) + "\n"


def rows(db: Path, name: str, cols: str = VALUES) -> list[tuple]:
    return query(db, f"SELECT line_no, {cols} FROM batches b JOIN runs r USING (run_id) "
                     "WHERE r.name = ? ORDER BY line_no", [name])


@pytest.mark.parametrize("fast", ["1", "0"])
def test_every_class_gives_the_plain_values(tmp_path: Path, fast: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGPIPE_FASTLANE", fast)
    (tmp_path / "plain.log").write_text("\n".join(PLAIN) + "\n")
    for style in CLASSES:
        (tmp_path / f"{style}.log").write_text(wrap(style))
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert not result.failed
    plain = rows(db, "plain")
    assert len(plain) == 11
    for style in CLASSES:
        assert rows(db, style) == plain, style
        assert rows(db, style, "ts") == rows(db, "plain", "ts"), style
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]


def test_outer_prefixes_are_kept_with_what_they_say(tmp_path: Path) -> None:
    for style in ("compose", "syslog", "two-stamps"):
        (tmp_path / f"{style}.log").write_text(wrap(style))
    db = tmp_path / "db.duckdb"
    ingest_paths([tmp_path], db)
    svc = query(db, "SELECT DISTINCT p.service FROM line_prefixes p JOIN runs r USING (run_id) "
                    "WHERE r.name = 'compose'")
    assert svc == [("sglang-svc-1",)]
    pid = query(db, "SELECT DISTINCT p.pid FROM line_prefixes p JOIN runs r USING (run_id) "
                    "WHERE r.name = 'syslog'")
    assert pid == [(4242,)]
    # two clocks: SGLang's stamp is the line's time; the outer one is kept, 9 h ahead
    offsets = query(db, "SELECT DISTINCT round((epoch(p.outer_ts) - epoch(b.ts)) / 60) * 60 "
                        "FROM line_prefixes p JOIN batches b USING (run_id, line_no) "
                        "JOIN runs r USING (run_id) WHERE r.name = 'two-stamps'")
    assert [o for (o,) in offsets] == [9 * 3600.0]


def test_releases_before_0_2_14_with_gpu_rank_and_no_time(tmp_path: Path) -> None:
    """0.1.20-0.2.8 printed "[gpu_id=N] ", 0.2.9-0.2.13 "[gpu=N] ", with no time (their
    logging format was the message alone)."""
    log = tmp_path / "v0.2.5.log"
    log.write_text(
        "[gpu_id=0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, "
        "cache hit rate: 0.00%, #running-req: 0, #queue-req: 0\n"
        "[gpu_id=0] Decode batch. #running-req: 1, #token: 48, token usage: 0.00, "
        "gen throughput (token/s): 61.25, #queue-req: 0\n"
        "[gpu=1] Decode batch. #running-req: 2, #token: 96, token usage: 0.01, "
        "gen throughput (token/s): 118.40, #queue-req: 0\n")
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    got = query(db, "SELECT kind, tp_rank, new_token, running_req, gen_throughput, ts "
                    "FROM batches ORDER BY line_no")
    assert got == [("prefill", 0, 7, 0, None, None), ("decode", 0, None, 1, 61.25, None),
                   ("decode", 1, None, 2, 118.4, None)]


def test_cut_lines_go_to_rejects_never_half_parsed(tmp_path: Path) -> None:
    line = next(ln for ln in PLAIN if "Decode batch" in ln and "True" in ln)
    cut = line[:60] + line[-40:]  # a terminal copy that dropped the middle
    log = tmp_path / "cut.log"
    log.write_text(f"sglang-svc-1  | {cut}\n> {cut}\n")
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    assert query(db, "SELECT count(*) FROM batches") == [(0,)]
    reasons = query(db, "SELECT line_no, reason FROM rejects ORDER BY line_no")
    assert [n for n, _ in reasons] == [1, 2] and all(r for _, r in reasons)


BATCH_LINES = [ln for ln in PLAIN if " batch" in ln]


def _batch_rows(text: str, fast: bool) -> pl.DataFrame:
    if fast:
        chunk = finish_chunk(prepare_block(text.encode(), 1, "2026-01-01"), LogState())
    else:
        chunk = parse_chunk(text, 1, LogState(), "2026-01-01")
    return chunk.batches.drop("run_seq").sort("line_no")


@functools.cache
def _plain_rows(which: int) -> pl.DataFrame:
    """The row of ``BATCH_LINES[which]`` as written (parsed once per line, not per example)."""
    return _batch_rows(BATCH_LINES[which] + "\n", fast=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=st.text(st.characters(min_codepoint=32, max_codepoint=126,
                                    exclude_characters="[]"), max_size=40),
       which=st.integers(0, len(BATCH_LINES) - 1))
def test_any_printable_prefix_before_a_line_gives_the_same_row(prefix: str, which: int
                                                                ) -> None:
    line = BATCH_LINES[which]
    want = _plain_rows(which)
    for fast in (False, True):
        got = _batch_rows(prefix + line + "\n", fast=fast)
        assert got.height == 1, (prefix, fast)
        assert got.drop("ts_raw").to_dicts() == want.drop("ts_raw").to_dicts(), (prefix, fast)


def _console(rec: dict) -> str:
    from tests.conftest import load_generator

    return load_generator().bench_console(rec)


def _record() -> dict:
    from tests.conftest import load_generator

    return load_generator().bench_record("0.5.12", output_tps=62.93, tpot_ms=15.89)


@pytest.mark.parametrize("bench_first", [False, True])
def test_a_file_with_server_lines_and_a_bench_summary_yields_both(tmp_path: Path,
                                                                  bench_first: bool) -> None:
    """A run script sent the server's output and bench_serving's summary to one file."""
    server = "\n".join(PLAIN) + "\n"
    summary = _console(_record())
    text = summary + server if bench_first else server + summary
    run = tmp_path / "exp1"
    run.mkdir()
    (run / "run.log").write_text(text)
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert not result.failed
    assert query(db, "SELECT count(*) FROM batches") == [(11,)]
    got = query(db, "SELECT r.name, b.format, b.link_method, b.output_throughput, b.completed "
                    "FROM bench_results b JOIN runs r USING (run_id)")
    assert got == [("exp1", "console", "server log", 62.93, 8)]


@pytest.mark.parametrize("block_bytes", [700, 1500, 4096])
def test_a_summary_among_many_fast_blocks_is_found_once(tmp_path: Path, block_bytes: int,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Summaries are looked for among the slow lane's lines only: one printed between
    many blocks of plain batch lines, cut by a block boundary or not, is still found."""
    import logpipe.engines.sglang.logparser as logfile

    for size in ("PARSE_BLOCK_BYTES", "SLOW_BLOCK_BYTES"):
        monkeypatch.setattr(logfile, size, block_bytes)
    server = "\n".join(PLAIN) + "\n"
    batch = next(ln for ln in PLAIN if "Decode batch" in ln) + "\n"
    text = server + batch * 60 + _console(_record()) + batch * 60
    run = tmp_path / "exp1"
    run.mkdir()
    (run / "run.log").write_text(text)
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    assert query(db, "SELECT count(*) FROM batches") == [(131,)]
    assert query(db, "SELECT format, link_method, output_throughput FROM bench_results") == [
        ("console", "server log", 62.93)]


def test_console_and_jsonl_of_one_benchmark_are_one_result(tmp_path: Path) -> None:
    import json

    rec = _record()
    run = tmp_path / "exp1"
    run.mkdir()
    (run / "server.log").write_text("\n".join(PLAIN) + "\n")
    (run / "bench_serving.jsonl").write_text(json.dumps(rec) + "\n")
    (run / "bench_console.txt").write_text(_console(rec))
    other = dict(rec, output_throughput=70.5, duration=rec["duration"] * 0.9)
    (run / "second_bench.txt").write_text(_console(other))  # another measurement
    db = tmp_path / "db.duckdb"
    result = ingest_paths([tmp_path], db)
    assert [(Path(a).name, Path(b).name) for a, b in result.duplicates] == [
        ("bench_console.txt:3", "bench_serving.jsonl:1")]
    kept = query(db, "SELECT format, output_throughput FROM bench_results "
                     "WHERE duplicate_of IS NULL ORDER BY 1, 2")
    assert kept == [("console", 70.5), ("jsonl", 62.93)]
    assert query(db, "SELECT count(*) FROM bench_vs_log") == [(2,)]


def test_doctor_finds_nothing_lost_in_the_samples() -> None:
    from logpipe.doctor import diagnose

    logs = [p for p in SAMPLES.rglob("*") if p.is_file() and p.suffix in (".log", "")
            and "damaged" not in p.parts]
    seen = 0
    for path in logs:
        d = diagnose(path)
        if d.kind != "sglang_server_log":
            continue
        seen += 1
        assert d.unread_total == 0, (path, d.unread)
        assert d.rejects_total == 0, (path, d.rejects)
    assert seen >= 20


def test_doctor_cli_lists_what_was_lost(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from logpipe.cli import app

    line = next(ln for ln in PLAIN if "Decode batch" in ln and "True" in ln)
    log = tmp_path / "pasted.log"
    log.write_text(f"> {line}\n{line[:60] + line[-40:]}\n"
                   "the gen throughput (token/s) was about 80 here\n")
    result = CliRunner().invoke(app, ["doctor", str(log)])
    assert result.exit_code == 1
    out = result.stdout
    assert "batch lines: 1" in out and "rejected lines: 1" in out
    assert "outer prefix found by SGLang's signature (1 lines)" in out
    assert "lines that look like records but were not read: 1" in out
    assert "line 3: the gen throughput (token/s) was about 80 here" in out
