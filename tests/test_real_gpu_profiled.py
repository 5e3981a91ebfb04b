"""The profiled real GPU campaign (sample_logs/real-gpu-profiled): what logpipe reads from
it, pinned, traces included (trimmed to their GPU side by scripts/trim_trace.py; see its
README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query
from tests.test_compare import app, cmp, runner

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
    assert [round(r, 3) for r in at48["launch_level"]["round_ratios"]] == [1.132, 0.816]


def test_the_traces_are_linked_by_profile_id_and_marked_trimmed(prof_db: Path) -> None:
    rows = query(prof_db, "SELECT r.name, t.link_method, t.kernels, "
                          "json_extract(t.metadata, '$.logpipeTrimmed.kept_events')::INT > 0 "
                          "FROM traces t JOIN runs r USING (run_id) ORDER BY 1")
    assert rows == [("real-gpu-prof-baseline-r1", "profile id", 1505, True),
                    ("real-gpu-prof-ngram-r1", "profile id", 2069, True)]


def test_trace_steps_gives_each_marked_step_its_kind_size_and_kernel_time(prof_db: Path
                                                                          ) -> None:
    rows = query(prof_db, "SELECT run, step_kind, batch_size, extend_tokens, kernels "
                          "FROM trace_steps ORDER BY run, step_no")
    assert rows == [
        ("real-gpu-prof-baseline-r1", "EXTEND", 1, 1, 230),
        ("real-gpu-prof-baseline-r1", "EXTEND", 24, 4409, 234),
        ("real-gpu-prof-baseline-r1", "EXTEND", 23, 3605, 234),
        ("real-gpu-prof-baseline-r1", "DECODE", 48, None, 225),
        ("real-gpu-prof-baseline-r1", "DECODE", 48, None, 225),
        ("real-gpu-prof-ngram-r1", "EXTEND", 1, 1, 230),
        ("real-gpu-prof-ngram-r1", "EXTEND", 18, 3279, 234),
        ("real-gpu-prof-ngram-r1", "EXTEND", 29, 4735, 234),
        ("real-gpu-prof-ngram-r1", "VERIFY", 48, None, 232),
        ("real-gpu-prof-ngram-r1", "VERIFY", 48, None, 232)]
    # the class split adds up to the step's kernel time, and the kernels lie in its span
    bad = query(prof_db, "SELECT run, step_no FROM trace_steps WHERE abs(kernel_ms - "
                         "list_sum(map_values(kernel_ms_by_class))) > 1e-9 "
                         "OR kernel_ms > gpu_span_ms OR cpu_ms IS NULL")
    assert bad == []
    # a verify step of NGRAM (12 draft tokens per request) spends more in attention than
    # a plain decode step at the same batch size
    att = dict(query(prof_db, "SELECT step_kind, median(kernel_ms_by_class['attention']) "
                              "FROM trace_steps WHERE batch_size = 48 GROUP BY 1"))
    assert att["VERIFY"] > 3 * att["DECODE"]


def test_compare_reports_per_phase_time_from_the_trace_steps(prof_db: Path) -> None:
    code, out = cmp(prof_db, "--campaign", "real-gpu-prof")
    phases = out["comparisons"][0]["phases"]
    base = {p["kind"]: p for p in phases["real-gpu-prof-baseline"]}
    ngram = {p["kind"]: p for p in phases["real-gpu-prof-ngram"]}
    assert set(base) == {"EXTEND", "DECODE"} and set(ngram) == {"EXTEND", "VERIFY"}
    assert base["DECODE"]["steps"] == 2 and base["DECODE"]["batch_size"] == 48
    assert 0 < base["DECODE"]["busy"] < 1
    assert ngram["VERIFY"]["kernel_ms"] > base["DECODE"]["kernel_ms"]
    text = runner.invoke(app, ["compare", "--db", str(prof_db), "--campaign",
                               "real-gpu-prof"]).output
    assert "Per-phase time per step, from the profiler traces (trace_steps" in text
    assert "VERIFY ×2 (bs 48): span" in text and "DECODE ×2 (bs 48): span" in text


def test_cuda_graph_captures_are_events_with_their_numbers(prof_db: Path) -> None:
    rows = query(prof_db, "SELECT r.name, e.attrs->>'graph', "
                          "json_array_length(e.attrs->'bs'), (e.attrs->>'elapsed_s')::DOUBLE, "
                          "(e.attrs->>'mem_usage_gb')::DOUBLE FROM events e JOIN runs r "
                          "USING (run_id) WHERE e.kind = 'graph_capture' "
                          "AND e.attrs->>'phase' = 'end' AND r.name LIKE '%-r1' ORDER BY 1")
    assert rows == [("real-gpu-prof-baseline-r1", "decode", 12, 15.08, 0.05),
                    ("real-gpu-prof-ngram-r1", "target_verify", 23, 8.18, 0.11)]
    timings = query(prof_db, "SELECT r.name, (e.attrs->>'cuda_graph_decode_s')::DOUBLE, "
                             "(e.attrs->>'cuda_graph_target_verify_s')::DOUBLE FROM events e "
                             "JOIN runs r USING (run_id) WHERE e.kind = 'startup_timings' "
                             "AND r.name LIKE '%-r1' ORDER BY 1")
    assert timings == [("real-gpu-prof-baseline-r1", 15.08, 0.0),
                       ("real-gpu-prof-ngram-r1", 0.0, 8.18)]
    # every launch's decode batches fit its captured sizes: all on the graph
    cover = query(prof_db, "SELECT name, graph_coverage FROM run_summary ORDER BY 1")
    assert [c for _, c in cover] == [1.0, 1.0, 1.0, 1.0]
