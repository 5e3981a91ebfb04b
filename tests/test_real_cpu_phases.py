"""The recorded campaign with phase timings (sample_logs/real-cpu-phases): the hook's
records in every launch, its cost, and `explain` rebuilding the observed speedup."""

from __future__ import annotations

from pathlib import Path

import pytest

from logpipe.analysis.explain import explain_runs
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

REAL = SAMPLES / "real-cpu-phases"
SPEC = "real-cpu-phases-ngram-r1,real-cpu-phases-ngram-r2"
BASE = "real-cpu-phases-baseline-r1,real-cpu-phases-baseline-r2"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("phases") / "db.duckdb"
    result = ingest_paths([REAL], path)
    assert not result.failed and result.rows("rejects") == 0
    return path


def test_every_launch_logged_its_cycles_or_steps(db: Path) -> None:
    rows = query(db, "SELECT r.name, list(DISTINCT p.extra->>'kind'), "
                     "count(DISTINCT p.line_no), list(DISTINCT p.link_method) "
                     "FROM runs r JOIN phase_timings p USING (run_id) GROUP BY 1 ORDER BY 1")
    assert rows == [
        ("real-cpu-phases-baseline-r1", ["step"], 139, ["server log"]),
        ("real-cpu-phases-baseline-r2", ["step"], 138, ["server log"]),
        ("real-cpu-phases-ngram-r1", ["cycle"], 129, ["server log"]),
        ("real-cpu-phases-ngram-r2", ["cycle"], 130, ["server log"])]
    phases = dict(query(db, "SELECT extra->>'kind', list(DISTINCT phase ORDER BY phase) "
                            "FROM phase_timings GROUP BY 1"))
    assert phases == {"cycle": ["draft", "other", "verify"], "step": ["decode"]}
    # host timers: not synchronised, so no launch is profiled
    assert query(db, "SELECT count(*) FROM runs WHERE profiled") == [(0,)]


def test_the_hook_cost_is_under_one_percent_of_the_cycle(db: Path) -> None:
    (share,) = query(db, "SELECT sum(h) / sum(c) FROM (SELECT any_value(cycle_ms) AS c, "
                         "any_value((extra->>'hook_ms')::DOUBLE) AS h FROM phase_timings "
                         "GROUP BY source_path, line_no)")[0]
    assert 0 < share < 0.01
    assert round(share, 4) == 0.0039


def test_explain_rebuilds_the_observed_speedup_from_the_phases(db: Path) -> None:
    ex = explain_runs(str(db), [SPEC, BASE])
    assert ex.method == "phase dump" and ex.stratum == 4
    assert [p.phase for p in ex.phases] == ["verify", "other", "draft", "scheduler"]
    assert ex.base_step_ms == pytest.approx(7.63, abs=0.01)
    assert ex.cycle_ms == pytest.approx(11.03, abs=0.01)
    assert ex.observed_speedup == pytest.approx(-0.311, abs=0.001)
    assert ex.implied_speedup == pytest.approx(-0.308, abs=0.001)
    assert ex.agreement.startswith("the phases explain the observed speedup")
    assert "less its forward" in ex.sources["scheduler_ms"]
