"""Ingest's judged counts (numpy, :mod:`logpipe.classify`) are the SQL macro's
(``run_judged_counts_in``, which defines the steady-state rules): row for row, on every
run of the samples, alone and in one pass, and on the samples' lines damaged at every rule's
edge (nulls, lines out of order, idle lines, NaN and -0.0, graphs on and off, ready and
profiling events where none were)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import polars as pl
import pytest

from logpipe import classify, summaries
from logpipe.store import Store

KEY = ["run_id", "series", "stratum", "value", "label", "n"]


def _sql(store: Store, run_ids: list[str]) -> pl.DataFrame:
    return store.con.sql(f"SELECT {', '.join(KEY)} FROM run_judged_counts_in(NULL, ?)",
                         params=[run_ids]).pl()


def _equal(got: pl.DataFrame | None, want: pl.DataFrame) -> bool:
    assert got is not None
    a, b = (f.sort(KEY, nulls_last=True) for f in (got, want))
    return a.schema == b.schema and a.equals(b)


def _runs(store: Store) -> list[str]:
    return [r for (r,) in store.all("SELECT DISTINCT run_id FROM run_samples(NULL) ORDER BY 1")]


def _check_every_run(store: Store) -> int:
    """Every run in one pass, and alone the run of each engine and folder with the most
    lines (each run alone: test_a_pass_past_the_bound_is_counted_by_the_sql, through
    ingest's refresh)."""
    runs = _runs(store)
    assert _equal(classify.counts(store, runs), _sql(store, runs))
    biggest = [r for (r,) in store.all(
        "SELECT arg_max(run_id, n) FROM (SELECT run_id, count(*) AS n FROM run_samples(NULL) "
        "GROUP BY run_id) JOIN runs USING (run_id) "
        "GROUP BY engine, regexp_extract(source_path, 'sample_logs/([^/]+)', 1)")]
    assert len(biggest) >= 8
    differ = [r for r in biggest if not _equal(classify.counts(store, [r]), _sql(store, [r]))]
    assert differ == []
    return len(runs)


def test_counts_are_the_macros_on_every_run_of_the_samples(sample_db: Path) -> None:
    with Store.open(sample_db, read_only=True) as store:
        assert _check_every_run(store) > 90
        engines = {e for (e,) in store.all(
            "SELECT DISTINCT r.engine FROM runs r JOIN run_samples(NULL) s USING (run_id)")}
        assert engines >= {"sglang", "vllm"}
        # the samples reach the rules the damage below reaches again
        reasons = {r for (r,) in store.all(
            "SELECT DISTINCT reason FROM batch_states WHERE reason IS NOT NULL")}
        assert {"before the server was ready", "inside a profiled interval",
                "first decode line"} <= reasons


@pytest.mark.parametrize("seed", [1, 2])
def test_counts_are_the_macros_on_damaged_lines(sample_db: Path, tmp_path: Path,
                                                seed: int) -> None:
    db = tmp_path / "damaged.duckdb"
    shutil.copy(sample_db, db)
    rnd = random.Random(seed)
    with Store.open(db) as store:
        con = store.con
        con.execute("SET threads = 1")  # (random() repeatable under its seed)
        con.execute(f"SELECT setseed({seed / 10})")
        codes = dict(store.all("SELECT label, label_id FROM logpipe_internal.labels "
                               "WHERE label IN ('decode', 'prefill')"))
        p = [round(rnd.uniform(0.02, 0.08), 3) for _ in range(12)]
        con.execute(f"""
            UPDATE logpipe_internal.batches SET
              running_req = CASE WHEN random() < {p[0]} THEN NULL
                                 WHEN random() < {p[1]} THEN 0 ELSE running_req END,
              ts = CASE WHEN random() < {p[2]} THEN NULL
                        WHEN random() < {p[3]} THEN ts + INTERVAL (rnd_s) SECOND
                        ELSE ts END,
              gen_throughput = CASE WHEN random() < {p[4]} THEN 'NaN'::DOUBLE
                                    WHEN random() < {p[5]} THEN -0.0
                                    WHEN random() < {p[5]} THEN NULL ELSE gen_throughput END,
              accept_len = CASE WHEN random() < {p[6]} THEN NULL ELSE accept_len END,
              cuda_graph = CASE WHEN random() < {p[7]} THEN NULL
                                WHEN random() < {p[8]} THEN NOT cuda_graph ELSE cuda_graph END,
              kind_code = CASE WHEN random() < {p[9]} THEN
                            CASE WHEN kind_code = {codes['decode']} THEN {codes['prefill']}
                                 ELSE {codes['decode']} END ELSE kind_code END,
              line_no = CASE WHEN random() < {p[10]} THEN line_no * 2 - 3 ELSE line_no * 2 END,
              rank_tag_code = CASE WHEN random() < {p[11]} THEN NULL ELSE rank_tag_code END
            FROM (SELECT (random() * 300 - 60)::INTEGER AS rnd_s) r""")
        con.execute(f"""
            UPDATE logpipe_internal.vllm_stats SET
              running = CASE WHEN random() < {p[0]} THEN NULL
                             WHEN random() < {p[1]} THEN 0 ELSE running END,
              gen_tps = CASE WHEN random() < {p[4]} THEN 0 ELSE gen_tps END,
              ts = CASE WHEN random() < {p[2]} THEN NULL ELSE ts END""")
        # (lines out of order but never tied: the window's order is the lines' order, which
        # a tie leaves open, in SQL too)
        con.execute("UPDATE logpipe_internal.events SET line_no = line_no * 2")
        # ready and profiling events at lines of runs that had none there (a start whose
        # stop never comes too)
        con.execute(f"""
            INSERT INTO logpipe_internal.events (run_id, source_id, line_no, ts, kind)
            SELECT run_id, any_value(source_id), min(line_no) + (count(*) * 0.6)::BIGINT,
                   NULL, CASE WHEN hash(run_id) % 3 = 0 THEN 'ready'
                              ELSE 'profiling_start' END
            FROM logpipe_internal.batches GROUP BY run_id HAVING random() < 0.{seed + 3}""")
        con.execute("""
            INSERT INTO logpipe_internal.events (run_id, source_id, line_no, ts, kind)
            SELECT run_id, source_id, line_no + 81, NULL, 'profiling_stop'
            FROM logpipe_internal.events WHERE kind = 'profiling_start' AND random() < 0.5""")
        assert _check_every_run(store) > 90


def test_a_pass_past_the_bound_is_counted_by_the_sql(sample_db: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass of more lines than :data:`classify.MAX_LINES` is not held: the SQL counts
    it (and spills), and what ingest keeps is the same; passes within it are counted here
    (both kinds in one refresh)."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:
        sizes = sorted(n for (n,) in store.all(
            "SELECT count(*) FROM run_samples(NULL) GROUP BY run_id"))
        monkeypatch.setattr(classify, "MAX_LINES", sizes[len(sizes) // 2])
        monkeypatch.setattr(summaries, "PASS_LINES", 1)  # (every run a pass of its own)
        assert classify.counts(store, [r for r in _runs(store)]) is None
        counted: list[list[str]] = []
        count_lines = classify.count_lines

        def spy(samples, events):  # type: ignore[no-untyped-def]
            counted.append(sorted(set(samples["run_id"].to_list())))
            return count_lines(samples, events)

        monkeypatch.setattr(classify, "count_lines", spy)
        live = sorted(store.all(f"SELECT {', '.join(KEY)} FROM run_judged_counts(NULL)"),
                      key=repr)
        store.con.execute("DELETE FROM logpipe_internal.run_summary_cache")
        assert summaries.refresh(store) == len(store.all("SELECT run_id FROM runs"))
        kept = sorted(store.all(f"SELECT {', '.join(KEY)} "
                                "FROM logpipe_internal.run_judged_cache"), key=repr)
    assert kept == live
    assert 10 < len(counted) < len(sizes)  # some runs here, the biggest by the SQL
