"""What logpipe reads from real engine output: the campaign in sample_logs/real-cpu/,
recorded by `logpipe ab` against the real SGLang 0.5.23 server on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.compare import compare_runs, load_run, pool
from logpipe.ingest import ingest_paths
from logpipe.store import Store
from tests.conftest import SAMPLES, query

REAL = SAMPLES / "real-cpu"
RUNS = ["real-cpu-baseline-r1", "real-cpu-baseline-r2", "real-cpu-ngram-r1",
        "real-cpu-ngram-r2"]


@pytest.fixture(scope="module")
def real_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("real") / "real.duckdb"
    result = ingest_paths([REAL], db)
    assert not result.failed and result.rows("rejects") == 0
    assert [f for f in result.files if f.unread] == []
    return db


def test_runs_environments_and_clocks(real_db: Path) -> None:
    rows = query(real_db, "SELECT name, role, spec_algorithm, engine_version, env_complete, "
                          "utc_offset_s, clock_source FROM runs ORDER BY name")
    assert rows == [
        ("real-cpu-baseline-r1", "baseline", None, "0.5.23", True, 0, "manifest"),
        ("real-cpu-baseline-r2", "baseline", None, "0.5.23", True, 0, "manifest"),
        ("real-cpu-ngram-r1", "speculative", "NGRAM", "0.5.23", True, 0, "manifest"),
        ("real-cpu-ngram-r2", "speculative", "NGRAM", "0.5.23", True, 0, "manifest")]
    # the manifests were written by launch for the server's own interpreter
    fps = {fp for (fp,) in query(real_db, "SELECT env_fingerprint FROM runs")}
    assert len(fps) == 1
    pkgs = query(real_db, "SELECT DISTINCT value FROM run_env WHERE key = 'pkg.torch'")
    assert pkgs == [("2.14.1",)]


def test_what_sglang_says_about_itself_is_harvested(real_db: Path) -> None:
    said = dict(query(real_db, "SELECT e.key, e.value FROM run_env e JOIN runs r USING "
                               "(run_id) WHERE r.name = 'real-cpu-ngram-r1' AND e.source = "
                               "'log' AND e.key NOT LIKE 'startup.%'"))
    assert said == {
        "adjusted.disable_cuda_graph": "true", "adjusted.disable_overlap_schedule": "true",
        "adjusted.max_running_requests": "48",
        "adjusted.speculative_num_draft_tokens": "12", "adjusted.enable_mixed_chunk": "false",
        "effective.max_total_num_tokens": "8192", "effective.chunked_prefill_size": "4096",
        "effective.max_prefill_tokens": "16384", "effective.max_running_requests": "48",
        "effective.context_len": "4096", "effective.kv_cache_dtype": "torch.bfloat16",
        "effective.kv_cache_tokens": "8192", "effective.avail_mem_gb_at_load": "21.21",
        "effective.weight_mem_gb": "0.01"}
    timings = {k for (k,) in query(real_db, "SELECT e.key FROM run_env e JOIN runs r USING "
                                            "(run_id) WHERE r.name = 'real-cpu-ngram-r1' "
                                            "AND e.key LIKE 'startup.%'")}
    assert {"startup.load_weight_s", "startup.scheduler_e2e_s"} <= timings
    # stopped by SIGINT: its tracebacks are the shutdown, not errors
    assert query(real_db, "SELECT count(*) FROM events WHERE kind = 'error'") == [(0,)]


def test_graphless_runs_have_a_steady_state(real_db: Path) -> None:
    rows = query(real_db, "SELECT name, decode_lines, steady_decode_lines, "
                          "round(steady_gen_throughput, 1), graph_coverage FROM run_summary "
                          "ORDER BY name")
    assert rows == [("real-cpu-baseline-r1", 141, 133, 605.1, 0.0),
                    ("real-cpu-baseline-r2", 141, 133, 664.8, 0.0),
                    ("real-cpu-ngram-r1", 107, 99, 242.9, 0.0),
                    ("real-cpu-ngram-r2", 107, 99, 256.4, 0.0)]


def test_one_benchmark_one_result(real_db: Path) -> None:
    rows = query(real_db, "SELECT r.name, b.format, round(b.output_throughput, 1), b.completed "
                          "FROM bench_results b JOIN runs r USING (run_id) "
                          "WHERE b.duplicate_of IS NULL ORDER BY 1")
    assert rows == [("real-cpu-baseline-r1", "jsonl", 474.9, 24),
                    ("real-cpu-baseline-r2", "jsonl", 501.3, 24),
                    ("real-cpu-ngram-r1", "jsonl", 252.8, 24),
                    ("real-cpu-ngram-r2", "jsonl", 258.1, 24)]
    assert query(real_db, "SELECT count(*) FROM bench_results WHERE duplicate_of IS NOT "
                          "NULL AND format = 'console'") == [(4,)]
    assert query(real_db, "SELECT count(*) > 200 FROM request_metrics") == [(True,)]


def test_the_campaign_verdict_pooled_over_rounds(real_db: Path) -> None:
    with Store.open(real_db, read_only=True) as store:
        base = pool("base", [load_run(store, n) for n in RUNS[:2]])
        ngram = pool("ngram", [load_run(store, n) for n in RUNS[2:]])
    c = compare_runs(base, ngram)
    assert c.env_status == "comparable" and c.verdict == "regression"
    at4 = next(m for m in c.metrics if m.name == "decode throughput" and m.stratum == 4)
    assert at4.test.ratio == pytest.approx(0.355, abs=0.002)
    assert c.speculation and round(c.speculation["speedup"] * 100, 1) == -64.5
    assert any(n.startswith("max_running_requests auto (2048 in effect) vs 48: derived from "
                            "the treatment") for n in c.notes)
    report = runner_report(real_db)
    assert "Campaign real-cpu" in report


def runner_report(db: Path) -> str:
    out = db.parent / "real.html"
    result = CliRunner().invoke(app, ["report", "--db", str(db), "--plan", "real-cpu", "-o",
                                      str(out), "--no-checks"])
    assert result.exit_code == 0, result.output
    return out.read_text()


def test_the_recorded_launch_outcomes(real_db: Path) -> None:
    for name in RUNS:
        m = json.loads((REAL / name / "env.json").read_text())
        assert m["launch"]["status"] == "ok" and m["launch"]["bench_exit"] == 0
        assert m["packages"]["sglang"] == "0.5.23"
