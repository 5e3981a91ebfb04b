"""Phase-timing dumps: the helper's output round-trips; profiled runs and their cost."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from logpipe.ingest import ingest_paths
from logpipe.phase_dump import PhaseRecorder
from tests.conftest import SAMPLES, query


def test_mission_profile_shares(sample_db: Path) -> None:
    rows = dict(query(sample_db, "SELECT phase, round(share, 3) FROM phase_summary "
                      "WHERE run = 'eagle3-profiled'"))
    assert rows == {"verify": 0.898, "draft": 0.072, "draft_extend": 0.02, "other": 0.01}
    implied = dict(query(sample_db, "SELECT run, round(any_value(implied_tps), 1) "
                         "FROM phase_summary WHERE run LIKE 'eagle3-%' GROUP BY run"))
    assert {k: v for k, v in implied.items() if not k.startswith("eagle3-steps")} == {
        "eagle3-profiled": 33.0, "eagle3-untuned": 75.9}
    # the step sweep's dumps imply each launch's measured throughput (steps 1 has none)
    sweep = {k: v for k, v in implied.items() if k.startswith("eagle3-steps")}
    measured = dict(query(sample_db, "SELECT name, steady_gen_throughput FROM run_summary "
                                     "WHERE name LIKE 'eagle3-steps%'"))
    assert sorted(sweep) == [f"eagle3-steps{k}" for k in range(2, 7)]
    assert all(abs(v - measured[k]) <= 0.3 for k, v in sweep.items()), (sweep, measured)


def test_synchronised_dump_marks_the_run_profiled_and_costs_are_reported(
        sample_db: Path) -> None:
    profiled = dict(query(sample_db, "SELECT name, profiled FROM runs WHERE name IN "
                          "('eagle3-profiled', 'eagle3-untuned')"))
    assert profiled == {"eagle3-profiled": True, "eagle3-untuned": False}
    (factor,) = query(sample_db, "SELECT round(overhead_factor, 1) FROM profiling_overhead "
                      "WHERE unprofiled_run = 'eagle3-untuned'")[0]
    assert factor == 2.3


def test_helper_output_round_trips(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "mission" / "baseline-untuned", run)
    ticks = iter(range(1000))
    with PhaseRecorder(str(run / "phases.jsonl"), synchronize=lambda: next(ticks)) as rec:
        for cycle in range(3):
            for phase in ("draft", "verify"):
                with rec.phase(phase):
                    sum(range(1000))
            rec.cycle(batch_size=1, accepted_tokens=cycle + 1, note="x")
    lines = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]
    assert [set(x["phases_ms"]) for x in lines] == [{"draft", "verify"}] * 3
    assert all(x["synchronized"] for x in lines)
    db = tmp_path / "p.duckdb"
    ingest_paths([run], db)
    assert query(db, "SELECT count(*), count(DISTINCT line_no), bool_and(synchronized), "
                 "min(link_method) FROM phase_timings") == [(6, 3, True, "same folder")]
    assert query(db, "SELECT DISTINCT extra->>'note' FROM phase_timings") == [("x",)]
    assert query(db, "SELECT profiled FROM runs") == [(True,)]


def test_launch_blocking_or_tag_marks_profiled(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "mission" / "baseline-untuned", run)
    db = tmp_path / "b.duckdb"
    ingest_paths([run], db, env={"CUDA_LAUNCH_BLOCKING": "1"})
    assert query(db, "SELECT profiled FROM runs") == [(True,)]
    other = tmp_path / "other"
    shutil.copytree(SAMPLES / "mission" / "baseline-tuned", other)
    db2 = tmp_path / "t.duckdb"
    ingest_paths([other], db2, tags={"profiled": "true"})
    assert query(db2, "SELECT profiled FROM runs") == [(True,)]


def test_request_metrics_without_text(sample_db: Path) -> None:
    rows = query(sample_db, "SELECT count(*), min(link_method), sum(completion_tokens), "
                 "bool_and(request_parameters->>'text' IS NULL) FROM request_metrics "
                 "JOIN runs USING (run_id) WHERE name = 'baseline-untuned'")
    assert rows == [(8, "same folder", 8 * 480, True)]
    dump = str(query(sample_db, "SELECT * FROM request_metrics"))
    assert "never stored" not in dump
