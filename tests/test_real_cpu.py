"""What logpipe reads from real engine output: the campaign in sample_logs/real-cpu/,
recorded by `logpipe ab` against the real SGLang 0.5.23 server on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.analysis.judge import compare_arms
from logpipe.analysis.load import load_run, noise_for
from logpipe.cli import app
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
                          "round(steady_gen_throughput, 1), steady_stratum, graph_coverage "
                          "FROM run_summary ORDER BY name")
    # one steady throughput per launch: the median at its steady stratum (4 running), the
    # value compare's per-launch verdicts use (not the median over every stratum)
    assert rows == [("real-cpu-baseline-r1", 141, 133, 717.3, 4, 0.0),
                    ("real-cpu-baseline-r2", 141, 133, 757.7, 4, 0.0),
                    ("real-cpu-ngram-r1", 107, 99, 250.9, 4, 0.0),
                    ("real-cpu-ngram-r2", 107, 99, 268.3, 4, 0.0)]
    assert query(real_db, "SELECT DISTINCT log_stratum FROM bench_vs_log") == [(4,)]


def test_one_benchmark_one_result(real_db: Path) -> None:
    rows = query(real_db, "SELECT r.name, b.format, round(b.output_throughput, 1), b.completed "
                          "FROM bench_results b JOIN runs r USING (run_id) "
                          "WHERE b.duplicate_of IS NULL ORDER BY 1")
    assert rows == [("real-cpu-baseline-r1", "jsonl", 474.9, 24),
                    ("real-cpu-baseline-r2", "jsonl", 501.3, 24),
                    ("real-cpu-ngram-r1", "jsonl", 252.8, 24),
                    ("real-cpu-ngram-r2", "jsonl", 258.1, 24)]
    # one benchmark, one row: the public view leaves the console copies out
    assert query(real_db, "SELECT count(*), count(*) FILTER (WHERE duplicate_of IS NULL) "
                          "FROM bench_results") == [(4, 4)]
    assert query(real_db, "SELECT count(*) FROM bench_results_all WHERE duplicate_of IS NOT "
                          "NULL AND format = 'console'") == [(4,)]
    assert query(real_db, "SELECT count(*) > 200 FROM request_metrics") == [(True,)]


def test_the_campaign_verdict_launch_by_launch(real_db: Path) -> None:
    """Two rounds, paired: the per-round ratios 0.350 and 0.354 are a replicated
    regression (statistics.md §2b), whichever way the arms are named."""
    with Store.open(real_db, read_only=True) as store:
        base = [load_run(store, n) for n in RUNS[:2]]
        ngram = [load_run(store, n) for n in RUNS[2:]]
        noise = noise_for(store, base[0].fingerprint, base[0].model)
    c = compare_arms(base, ngram, noise=noise)
    assert c.env_status == "comparable" and c.verdict == "regression" and c.exit_code == 1
    at4 = next(m for m in c.metrics if m.name == "decode throughput" and m.stratum == 4)
    assert at4.launch is not None and at4.launch.method.startswith("paired rounds")
    assert [round(r, 3) for r in at4.launch.round_ratios] == [0.350, 0.354]
    assert at4.launch.ci_high is not None and at4.launch.ci_high < 0.97
    assert at4.test.ratio == pytest.approx(0.355, abs=0.002)  # the lines, as detail
    assert c.speculation and round(c.speculation["speedup"] * 100, 1) == -64.8
    assert any(n.startswith("max_running_requests auto (2048 in effect) vs 48: derived from "
                            "the treatment") for n in c.notes)
    cli = CliRunner().invoke(app, ["compare", "--db", str(real_db), "--run",
                                   ",".join(RUNS[:2]), "--run", ",".join(RUNS[2:])])
    assert cli.exit_code == 1, cli.output
    assert "REGRESSION (exit 1)" in cli.output
    assert "round ratios @ 4 running (candidate / reference): 0.350, 0.354" in cli.output
    campaign = CliRunner().invoke(app, ["compare", "--db", str(real_db), "--campaign",
                                        "real-cpu", "--format", "json"])
    assert campaign.exit_code == 1, campaign.output
    out = json.loads(campaign.stdout)["comparisons"][0]
    assert out["arms"] == {"real-cpu-baseline": RUNS[:2], "real-cpu-ngram": RUNS[2:]}
    assert out["replication"].startswith("2 rounds, paired")
    assert out["deciding_metric"]["metric"] == "output_throughput"
    report = runner_report(real_db)
    assert "Campaign real-cpu" in report and "round ratios 0.350, 0.354" in report
    assert "Launch noise (A/A pairs" in report and "launch median (the verdict" in report


def test_two_launches_of_the_baseline_are_an_aa_pair(real_db: Path) -> None:
    """The lines alone (p = 0.046 at 4 running) would call the second launch 5.6% faster;
    it is the same command launched twice: launch noise, exit 0."""
    result = CliRunner().invoke(app, ["compare", "--db", str(real_db), "--run", RUNS[0],
                                      "--run", RUNS[1], "--format", "json"])
    assert result.exit_code == 0, result.output
    c = json.loads(result.stdout)["comparisons"][0]
    assert c["verdict"] == "same configuration" and c["same_configuration"]
    # the deciding metric is the client's (every launch has a bench of one workload): its
    # A/A difference is +5.5%; the server log's at 4 running is +5.6%
    assert c["deciding_metric"]["metric"] == "output_throughput"
    assert c["notes"][0].startswith("same configuration: the difference, +5.5% in client "
                                    "output throughput, is launch-to-launch variation")
    at4 = next(m for m in c["metrics"] if m["stratum_running_req"] == 4)
    assert at4["within_launch"]["n"] == [78, 81]
    assert at4["verdict"] == "launch noise"
    # the baseline pair (and the NGRAM pair) are this environment's launch noise
    rows = query(real_db, "SELECT stratum, launches, pairs, configurations, round(spread, 3) "
                          "FROM launch_noise ORDER BY stratum")
    assert [r[:4] for r in rows] == [(s, 4, 2, 2) for s in (1, 2, 3, 4)]
    assert rows[3][4] == pytest.approx(0.044, abs=0.001)
    with Store.open(real_db, read_only=True) as store:
        run = load_run(store, RUNS[0])
        python_side = noise_for(store, run.fingerprint, run.model)
    assert {s: round(n.log_sd, 6) for s, n in python_side.items()} == {
        s: round(sd, 6) for s, sd in query(real_db, "SELECT stratum, log_sd FROM launch_noise")}


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
