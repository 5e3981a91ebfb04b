"""`launch --profile 5` on the real SGLang CPU engine (sample_logs/real-cpu-profiled): a
linked trace, a bounded profiled window, and the steady lines outside it that compare still
uses, pinned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query
from tests.test_compare import cmp

REAL = SAMPLES / "real-cpu-profiled"
PROFILED, PLAIN = "real-cpu-profiled-baseline", "real-cpu-profiled-plain"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cpuprof") / "db.duckdb"
    res = ingest_paths([REAL], path)
    assert not res.failed and not res.unlinked
    return path


def test_the_launch_asked_for_five_steps_and_got_a_trace() -> None:
    profile = json.loads((REAL / PROFILED / "env.json").read_text())["launch"]["profile"]
    assert (profile["steps"], profile["status"], profile["activities"],
            profile["with_stack"]) == (5, "done", ["CPU"], False)
    (trace,) = profile["traces"]
    assert (REAL / PROFILED / trace).is_file()
    assert "profile" not in json.loads((REAL / PLAIN / "env.json").read_text())["launch"]


def test_the_trace_links_by_profile_id(db: Path) -> None:
    assert query(db, "SELECT r.name, t.link_method FROM traces t JOIN runs r USING (run_id)") \
        == [(PROFILED, "profile id")]


def test_only_the_window_is_profiled_and_the_rest_is_steady(db: Path) -> None:
    rows = query(db, "SELECT r.name, r.profiled, count(*) FILTER (state = 'profiled'), "
                     "count(*) FILTER (state = 'steady') FROM runs r "
                     "JOIN batch_states b USING (run_id) GROUP BY ALL ORDER BY 1")
    assert rows == [(PROFILED, False, 4, 250), (PLAIN, False, 0, 261)]
    # the profiled lines lie between the profiler's start and stop lines of the log
    (inside,) = query(db, """
        SELECT bool_and(b.line_no > s.line_no AND b.line_no < e.line_no)
        FROM batch_states b JOIN events s ON s.run_id = b.run_id AND s.kind = 'profiling_start'
        JOIN events e ON e.run_id = b.run_id AND e.kind = 'profiling_stop'
        WHERE b.state = 'profiled'""")[0]
    assert inside is True
    assert query(db, "SELECT name, round(steady_gen_throughput, 1), steady_stratum "
                     "FROM run_summary ORDER BY 1") == [(PROFILED, 432.9, 4), (PLAIN, 406.4, 4)]


def test_compare_uses_the_profiled_launchs_steady_lines_as_an_a_a_pair(db: Path) -> None:
    code, out = cmp(db, "--run", PROFILED, "--run", PLAIN)
    assert code == 0
    (c,) = out["comparisons"]
    assert c["verdict"] == "same configuration"
    at4 = next(m for m in c["metrics"] if m.get("stratum_running_req") == 4)
    assert at4["ratio"] == pytest.approx(406.41 / 432.885, abs=0.001)


def test_several_and_overlapping_profiled_spans(db: Path, tmp_path: Path) -> None:
    """A line is profiled where some profiler start lies before it and the first stop
    after that start lies after it: with starts without stops, two starts before one
    stop, a stop before any start and a start on a stop's line, the states are the rule's
    (computed here from the events) and every other line keeps the state it had."""
    import shutil

    from logpipe.store import Store

    copy = tmp_path / "spans.duckdb"
    shutil.copy(db, copy)
    with Store.open(copy) as store:
        (rid, sid, lo, hi) = store.one(
            "SELECT b.run_id, any_value(b.source_id), min(b.line_no), max(b.line_no) "
            "FROM logpipe_internal.batches b JOIN runs r USING (run_id) "
            "WHERE r.name = ? GROUP BY 1", [PLAIN])
        before = dict(store.all("SELECT line_no, state FROM batch_states WHERE run_id = ?",
                                [rid]))
        step = (hi - lo) // 20
        spans = [(lo + 2 * step, "profiling_stop"), (lo + 3 * step, "profiling_start"),
                 (lo + 4 * step, "profiling_start"), (lo + 6 * step, "profiling_stop"),
                 (lo + 9 * step, "profiling_start"), (lo + 12 * step, "profiling_stop"),
                 (lo + 12 * step, "profiling_start"), (lo + 13 * step, "profiling_stop"),
                 (lo + 18 * step, "profiling_start")]
        for line, kind in spans:
            store.con.execute("INSERT INTO logpipe_internal.events (run_id, source_id, "
                              "line_no, kind) VALUES (?, ?, ?, ?)", [rid, sid, line, kind])
        after = dict(store.all("SELECT line_no, state FROM batch_states WHERE run_id = ?",
                               [rid]))
    starts = [ln for ln, k in spans if k == "profiling_start"]
    stops = [ln for ln, k in spans if k == "profiling_stop"]

    def profiled(line: int) -> bool:
        return any(s < line < min([e for e in stops if e > s], default=2**63)
                   for s in starts)

    assert after.keys() == before.keys()
    inside = {ln for ln in after if profiled(ln)}
    assert len(inside) > 20 and len(after) - len(inside) > 20
    assert {ln for ln, s in after.items() if s == "profiled"} == inside
    assert all(after[ln] == before[ln] for ln in after if ln not in inside)
