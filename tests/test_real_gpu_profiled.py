"""The profiled real GPU campaign (sample_logs/real-gpu-profiled): what logpipe reads from
it, pinned (the traces themselves were too big to keep; see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query
from tests.test_compare import cmp

REAL = SAMPLES / "real-gpu-profiled"


@pytest.fixture(scope="module")
def prof_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("gpuprof") / "db.duckdb"
    assert not ingest_paths([REAL], db).failed
    return db


def test_each_arms_first_launch_took_its_profile() -> None:
    for run, taken in (("baseline-r1", True), ("ngram-r1", True), ("ngram-r2", False),
                       ("baseline-r2", False)):
        launch = json.loads((REAL / f"real-gpu-prof-{run}" / "env.json").read_text())["launch"]
        assert ("profile" in launch) is taken, run
        if taken:
            assert launch["profile"]["status"] == "done"
            assert launch["profile"]["activities"] == ["CPU", "GPU"]
            assert len(launch["profile"]["traces"]) == 1


def test_the_profile_window_is_bounded_so_only_its_lines_are_profiled(prof_db: Path) -> None:
    rows = query(prof_db, "SELECT r.name, r.profiled, count(*) FILTER (state = 'profiled') "
                          "FROM runs r JOIN batch_states b USING (run_id) GROUP BY ALL "
                          "ORDER BY 1")
    assert rows == [("real-gpu-prof-baseline-r1", False, 3),
                    ("real-gpu-prof-baseline-r2", False, 0),
                    ("real-gpu-prof-ngram-r1", False, 3), ("real-gpu-prof-ngram-r2", False, 0)]


def test_the_campaign_verdict_is_on_launches(prof_db: Path) -> None:
    code, out = cmp(prof_db, "--campaign", "real-gpu-prof")
    assert code == 0
    c = out["comparisons"][0]
    assert c["verdict"] == "no significant change"
    assert c["replication"].startswith("2 rounds, paired by recorded round")
    at48 = next(m for m in c["metrics"] if m["stratum_running_req"] == 48)
    assert [round(r, 3) for r in at48["launch_level"]["round_ratios"]] == [1.137, 1.103]
