"""What logpipe reads from a real GPU campaign: SGLang 0.5.23 on an H200 with CUDA graphs,
baseline against NGRAM, recorded with `ab --record-only` (sample_logs/real-gpu/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

REAL = SAMPLES / "real-gpu"
runner = CliRunner()


@pytest.fixture(scope="module")
def gpu_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("gpu") / "gpu.duckdb"
    result = ingest_paths([REAL], db)
    assert not result.failed and result.rows("rejects") == 0
    return db


def test_runs_graphs_and_speculation(gpu_db: Path) -> None:
    rows = query(gpu_db, "SELECT r.name, r.engine_version, r.env_complete, r.spec_algorithm, "
                         "s.graph_coverage, s.steady_stratum FROM runs r JOIN run_summary s "
                         "USING (run_id) ORDER BY r.name")
    assert [r[:4] for r in rows] == [
        ("real-gpu-baseline-r1", "0.5.23", True, None),
        ("real-gpu-baseline-r2", "0.5.23", True, None),
        ("real-gpu-ngram-r1", "0.5.23", True, "NGRAM"),
        ("real-gpu-ngram-r2", "0.5.23", True, "NGRAM")]
    assert all(r[4] == 1.0 for r in rows)  # every decode line after warm-up on the graph
    assert {r[5] for r in rows} <= {47, 48}
    assert query(gpu_db, "SELECT count(*) FROM batches WHERE kind = 'decode' AND cuda_graph")[
        0][0] == 146
    assert query(gpu_db, "SELECT count(*) FROM bench_results") == [(4,)]
    assert query(gpu_db, "SELECT count(*) FROM bench_results_all") == [(8,)]


def test_the_campaign_judged_launch_by_launch(gpu_db: Path) -> None:
    result = runner.invoke(app, ["compare", "--db", str(gpu_db), "--campaign", "real-gpu",
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    c = json.loads(result.stdout)["comparisons"][0]
    assert c["verdict"] == "no significant change"
    assert c["replication"].startswith("2 rounds, paired")
    assert c["deciding_metric"]["metric"] == "output_throughput"
    at48 = next(m for m in c["metrics"] if m["stratum_running_req"] == 48)
    assert [round(r, 3) for r in at48["launch_level"]["round_ratios"]] == [1.074, 1.673]
    assert at48["within_launch"]["n"] == [25, 12]
    assert any("the two rounds disagree" in n for n in c["notes"])
    assert 3.3 < c["speculation"]["accept_len"] < 3.6
    aa = runner.invoke(app, ["compare", "--db", str(gpu_db), "--run", "real-gpu-baseline-r1",
                             "--run", "real-gpu-baseline-r2"])
    assert aa.exit_code == 0 and "SAME CONFIGURATION" in aa.stdout
    assert "is launch-to-launch variation" in aa.stdout
