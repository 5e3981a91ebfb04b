"""Ingest's judged counts (:mod:`logpipe.classify`, by its C kernel and by its numpy one)
are the SQL macro's (``run_judged_counts_in``, which defines the steady-state rules): row
for row, on every run of the samples, alone and in one pass, and on the samples' lines
damaged at every rule's edge (nulls, lines out of order, idle lines, NaN and -0.0, graphs
on and off, ready and profiling events where none were); and the two kernels give the
same rows on random lines (partitions out of order, ties, stamps missing, spans)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from logpipe import classify, summaries
from logpipe.store import Store

KEY = ["run_id", "series", "stratum", "value", "label", "n"]

KERNELS = ["c", "numpy"]


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The kernel :func:`classify.count_lines` classifies with (``c`` skips where the
    extension was not built)."""
    if request.param == "c":
        if classify._classify is None:
            pytest.skip("logpipe._classify was not built (no C compiler at install)")
        monkeypatch.setattr(classify, "_c_kernel", lambda: True)
    else:
        monkeypatch.setattr(classify, "_c_kernel", lambda: False)
    return str(request.param)


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
    # the runs of one engine with a coded read (SGLang's) in one pass: read by it
    sglang = [r for (r,) in store.all(
        "SELECT DISTINCT run_id FROM run_samples(NULL) JOIN runs USING (run_id) "
        "WHERE engine = 'sglang' ORDER BY 1")]
    lines = classify.read(store, sglang)
    assert lines is not None and lines.labels is not None and len(sglang) > 50
    assert _equal(classify.count_lines(*lines), _sql(store, sglang))
    biggest = [r for (r,) in store.all(
        "SELECT arg_max(run_id, n) FROM (SELECT run_id, count(*) AS n FROM run_samples(NULL) "
        "GROUP BY run_id) JOIN runs USING (run_id) "
        "GROUP BY engine, regexp_extract(source_path, 'sample_logs/([^/]+)', 1)")]
    assert len(biggest) >= 8
    differ = [r for r in biggest if not _equal(classify.counts(store, [r]), _sql(store, [r]))]
    assert differ == []
    coded = [r for r in biggest if (classify.read(store, [r]) or lines).labels is not None]
    assert 4 <= len(coded) < len(biggest)  # (SGLang's runs alone, by the coded read)
    return len(runs)


def test_counts_are_the_macros_on_every_run_of_the_samples(sample_db: Path, kernel: str
                                                           ) -> None:
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


# (numpy's kernel on one damage: the two kernels are held equal on random lines below)
@pytest.mark.parametrize(("kernel", "seed"), [("c", 1), ("c", 2), ("numpy", 1)],
                         indirect=["kernel"])
def test_counts_are_the_macros_on_damaged_lines(sample_db: Path, tmp_path: Path,
                                                seed: int, kernel: str) -> None:
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

        def spy(*lines):  # type: ignore[no-untyped-def]
            counted.append(sorted(classify.Lines(*lines).run_ids))
            return count_lines(*lines)

        monkeypatch.setattr(classify, "count_lines", spy)
        live = sorted(store.all(f"SELECT {', '.join(KEY)} FROM run_judged_counts(NULL)"),
                      key=repr)
        store.con.execute("DELETE FROM logpipe_internal.run_summary_cache")
        assert summaries.refresh(store) == len(store.all("SELECT run_id FROM runs"))
        kept = sorted(store.all(f"SELECT {', '.join(KEY)} "
                                "FROM logpipe_internal.run_judged_cache"), key=repr)
    assert kept == live
    assert 10 < len(counted) < len(sizes)  # some runs here, the biggest by the SQL


def _random_rows(rnd: np.random.Generator, n: int, runs: int, ranks: int) -> classify._Rows:
    """Lines of ``runs`` runs of ``ranks`` ranks each: partitions arriving in a few ordered
    stretches (as DuckDB's scans hand them over) or shuffled, line numbers tied (some with
    their stamps tied too), stamps, running counts and graphs missing, idle and prefill
    lines, a ready line and profiled spans (one without its stop) in some runs."""
    run = rnd.integers(0, runs, n).astype(np.int32)
    part = run.astype(np.int64) * ranks + rnd.integers(0, ranks, n)
    line = np.sort(rnd.integers(0, n // 2 + 1, n)).astype(np.int64)
    if rnd.random() < 0.5:  # a few stretches, each in order
        cut = np.sort(rnd.integers(0, n, 3))
        line = np.concatenate([line[cut[2]:], line[cut[0]:cut[2]], line[:cut[0]]])
    else:
        rnd.shuffle(line)
    us = 1_700_000_000_000_000 + line * 50_000 + rnd.integers(0, 3, n) * 1_000_000 * \
        (rnd.random(n) < 0.05)
    us[rnd.random(n) < 0.2] = us[0]  # (stamps tied)
    ready = np.full(runs, np.iinfo(np.int64).max, dtype=np.int64)
    has_ready = rnd.random(runs) < 0.5
    ready[has_ready] = rnd.integers(0, n // 4 + 1, int(has_ready.sum()))
    spans = [(int(rnd.integers(0, runs)), int(a), int(a + rnd.integers(1, n // 8 + 2)))
             for a in rnd.integers(0, n // 2 + 1, int(rnd.integers(0, 4)))]
    if spans and rnd.random() < 0.5:
        spans.append((spans[0][0], spans[0][1] + 3, int(np.iinfo(np.int64).max)))
    return classify._Rows(
        part=part, parts=runs * ranks, line=line, us=us.astype(np.int64),
        no_ts=rnd.random(n) < 0.1,
        running=(rnd.integers(0, 4, n) * (rnd.random(n) < 0.7)).astype(np.int64),
        no_running=rnd.random(n) < 0.05, graph=rnd.random(n) < 0.8,
        no_graph=rnd.random(n) < 0.1,
        kind=rnd.choice(np.array([0, 1, 2, 3], dtype=np.int8), n, p=[0.1, 0.5, 0.2, 0.2]),
        run=run, ready=ready, has_ready=has_ready,
        spans=np.array(spans, dtype=np.int64).reshape(-1, 3))


@pytest.mark.skipif(classify._classify is None, reason="logpipe._classify was not built")
@pytest.mark.parametrize("seed", range(40))
def test_the_c_kernel_classifies_as_numpys(seed: int) -> None:
    rnd = np.random.default_rng(seed)
    n = int(rnd.choice([1, 2, 7, 300, 5_000]))
    rows = _random_rows(rnd, n, runs=int(rnd.integers(1, 4)), ranks=int(rnd.integers(1, 5)))
    got, want = classify._classify_c(rows), classify._classify_numpy(rows)
    assert np.array_equal(got[0], want[0])  # the reasons
    assert np.array_equal(got[1], want[1])  # past the warm-up
    assert np.array_equal(got[2], want[2], equal_nan=True)  # the steps between stamps
    if n >= 300:  # (the lines reach the rules)
        assert len(set(got[0].tolist())) >= 5


def test_the_c_kernel_refuses_rows_out_of_range() -> None:
    if classify._classify is None:
        pytest.skip("logpipe._classify was not built")
    rows = _random_rows(np.random.default_rng(0), 50, runs=2, ranks=2)
    with pytest.raises(ValueError, match="partition or run out of range"):
        classify._classify_c(rows._replace(parts=1))
    with pytest.raises(ValueError, match="bytes, expected"):
        classify._classify_c(rows._replace(line=rows.line[:-1]))


def test_a_gap_is_long_past_three_times_the_interpolated_median() -> None:
    """The gaps 1, 1, 1, 1, 2, 2 s and then 4.5 and 4.6 s: their median is 1.5 (DuckDB's
    interpolated, not the lower 1), so the 4.6 s gap is past three times it and the 4.5 s
    gap is not."""
    steps = [1, 1, 1, 1, 2, 2, 4.5, 4.6]
    us = np.cumsum([1_700_000_000_000_000, *(int(s * 1_000_000) for s in steps)])
    n = len(us)
    rows = classify._Rows(
        part=np.zeros(n, np.int64), parts=1, line=np.arange(1, n + 1, dtype=np.int64),
        us=us.astype(np.int64), no_ts=np.zeros(n, bool), running=np.ones(n, np.int64),
        no_running=np.zeros(n, bool), graph=np.ones(n, bool), no_graph=np.zeros(n, bool),
        kind=np.full(n, classify.DECODE, np.int8), run=np.zeros(n, np.int32),
        ready=np.full(1, np.iinfo(np.int64).max), has_ready=np.zeros(1, bool),
        spans=np.zeros((0, 3), np.int64))
    gap_reason = classify.REASONS.index("first decode after a gap (window includes the idle "
                                        "time)")
    kernels = [classify._classify_numpy]
    if classify._classify is not None:
        kernels.append(classify._classify_c)
    for kernel in kernels:
        reason = kernel(rows)[0].tolist()
        assert reason == [4] + [-1] * 7 + [gap_reason], kernel.__name__
