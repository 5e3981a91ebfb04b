"""Benchmark results: every era, console tables, linking to runs, reconciliation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.ingest import ingest_paths
from logpipe.sources.bench import parse_console, parse_jsonl
from tests.conftest import SAMPLES, query

runner = CliRunner()


def test_three_eras_of_jsonl(sample_db: Path) -> None:
    rows = query(sample_db, """
        SELECT regexp_extract(source_path, '[^/]+/[^/]+$'), line_no, output_throughput,
               median_tpot_ms IS NOT NULL, max_concurrency, sglang_version,
               json_array_length(json_keys(extra))
        FROM bench_results WHERE format = 'jsonl' AND source_path NOT LIKE '%/real-%'
          AND source_path NOT LIKE '%/eras/vllm/%' AND source_path NOT LIKE '%/eras/vllm-bench/%'
        ORDER BY 1, 2""")
    assert [(r[0], r[1], r[2], r[6]) for r in rows] == [
        ("baseline-untuned/bench_serving.jsonl", 1, 61.2, 42),  # server_info kept apart
        ("eras/bench_serving_v0.2.15.jsonl", 1, 80.0, 17),
        ("eras/bench_serving_v0.2.15.jsonl", 2, 79.0, 17),
        ("eras/bench_serving_v0.4.5.jsonl", 1, 140.0, 35),
    ]
    assert rows[0][5] == "0.5.12"
    assert rows[1][3] is False  # 0.2.15 printed no TPOT


def test_console_table(sample_db: Path) -> None:
    (row,) = query(sample_db, """
        SELECT tool, format, max_concurrency, completed, output_throughput, accept_length,
               round(median_tpot_ms, 2), link_method
        FROM bench_results WHERE format = 'console' AND source_path NOT LIKE '%/real-%'
          AND tool = 'bench_serving'""")
    assert row == ("bench_serving", "console", 1, 8, 73.8, 2.1, 13.18, "same folder")


def test_misspelled_label_of_040_046() -> None:
    text = ("{:=^50}\n".format(" Serving Benchmark Result ")
            + "{:<40} {:<10}\n".format("Backend:", "sglang")
            + "{:<40} {:<10}\n".format("Max reqeuest concurrency:", "16")
            + "{:<40} {:<10}\n".format("Output token throughput (tok/s):", "812.50")
            + "=" * 50 + "\n")
    ((line, row),) = parse_console(text)
    assert line == 1  # the banner's line
    assert (row["max_concurrency"], row["output_throughput"]) == (16, 812.5)


def test_bad_jsonl_lines_are_rejected_not_fatal() -> None:
    rows, rejects = parse_jsonl('{"backend": "sglang", "completed": 3, "duration": 1.5}\n'
                                "not json\n[1, 2]\n{\"foo\": 1}\n")
    assert [n for n, _ in rows] == [1]
    assert [(n, r.split(":")[0]) for n, r, _ in rejects] == [
        (2, "not JSON"), (3, "not a JSON object"), (4, "not a benchmark record (unknown keys)")]


def test_bench_vs_log(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT run, log_steady_tps, bench_output_tps, "
                 "round(tpot_implied_tps, 1), round(bench_gap, 3) FROM bench_vs_log "
                 "WHERE run NOT LIKE 'real-%' AND run NOT LIKE '%-bench' ORDER BY run")
    assert rows == [("baseline-untuned", 62.9, 61.2, 62.9, -0.027),
                    ("eagle3-untuned", 75.9, 73.8, 75.9, -0.028)]


def test_unlinked_records_are_reported_and_explicit_links_win(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "mission" / "baseline-untuned", logs / "baseline-untuned")
    lonely = tmp_path / "elsewhere" / "bench.jsonl"
    lonely.parent.mkdir()
    shutil.copy(SAMPLES / "eras" / "bench_serving_v0.4.5.jsonl", lonely)
    db = tmp_path / "b.duckdb"
    result = runner.invoke(app, ["ingest", str(logs), str(lonely), "--db", str(db)])
    assert result.exit_code == 0
    assert f"unlinked benchmark records (1): {lonely.resolve()}:1" in result.stdout
    assert query(db, "SELECT count(*) FROM bench_results WHERE run_id IS NULL") == [(1,)]
    result = runner.invoke(app, ["ingest", str(lonely), "--db", str(db), "--run",
                                 "baseline-untuned"])
    assert result.exit_code == 0
    assert "unlinked benchmark records" not in result.stdout
    assert query(db, "SELECT link_method, count(*) FROM bench_results GROUP BY 1 ORDER BY 1") \
        == [("explicit", 1), ("same folder", 1)]
    assert query(db, "SELECT engine_version FROM runs") == [("0.5.12",)]


def test_appended_bench_record_replaces_the_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "mission" / "baseline-untuned", run)
    db = tmp_path / "a.duckdb"
    ingest_paths([run], db)
    bench = run / "bench_serving.jsonl"
    record = json.loads(bench.read_text())
    record["output_throughput"] = 60.0
    with bench.open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    result = ingest_paths([run], db)
    assert [f.status for f in result.files if f.kind == "bench_jsonl"] == ["rewritten"]
    assert query(db, "SELECT line_no, output_throughput FROM bench_results ORDER BY 1") == [
        (1, 61.2), (2, 60.0)]
    assert ingest_paths([run], db).files[0].status == "unchanged"
