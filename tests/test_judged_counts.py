"""What judging reads of a run, counted (``run_judged_counts``): the counts ingest keeps
are those of the lines, compare rebuilds from them exactly the samples the lines give, and
the statistics computed from counts are those of the lines.  (Judging a run of a million
lines reads a few thousand counted rows: benchmarks/RESULTS-report.md.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from logpipe import summaries
from logpipe.analysis.load import count_lines, judged_counts, judged_samples
from logpipe.analysis.steady import DECODE_KINDS, JUDGED, NO_WARMUP, Warmup, steady_lines
from logpipe.store import Store

COLS = "run_id, series, stratum, value, label, n"


def _rows(store: Store, sql: str, params: list | None = None) -> list[tuple]:
    return sorted(store.all(sql, params or []), key=repr)


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        if key == "decode":
            assert value.keys() == b[key].keys()
            for s, arr in value.items():
                np.testing.assert_array_equal(arr, b[key][s])
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, b[key])
        else:
            assert value == b[key], key


def _runs_with_lines(store: Store) -> list[str]:
    return [r for (r,) in store.all("SELECT DISTINCT run_id FROM run_samples(NULL) ORDER BY 1")]


def test_ingest_keeps_the_counts_of_the_lines(sample_db: Path) -> None:
    with Store.open(sample_db, read_only=True) as store:
        live = _rows(store, f"SELECT {COLS} FROM run_judged_counts(NULL)")
        kept = _rows(store, f"SELECT {COLS} FROM logpipe_internal.run_judged_cache")
        assert len(live) > 200 and kept == live
        ids = [r for (r,) in store.all("SELECT run_id FROM runs")]
        assert summaries.current(store, ids)
        # the lines counted, every series: each line once in `lines`, every non-steady
        # line once among `excluded`
        (lines, not_steady) = store.one(
            "SELECT count(*), count(*) FILTER (WHERE state <> 'steady') FROM batch_states")
        assert sum(n for _, series, *_, n in live if series == "lines") == lines
        assert sum(n for _, series, *_, n in live if series == "excluded") == not_steady


def test_runs_classified_in_passes_keep_the_counts_of_one_pass(
        sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs are classified in passes of a bounded number of lines, a big run by a
    statement of its own: the kept counts are those of one pass over every run, whichever
    runs share a pass."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:
        live = _rows(store, f"SELECT {COLS} FROM run_judged_counts(NULL)")
        lines = {str(r): int(n) for r, n in store.all(
            "SELECT run_id, count(*) FROM logpipe_internal.batches GROUP BY run_id")}
        sizes = sorted(lines.values())
        # (passes that could hold the biggest run, and six runs big enough to go alone)
        monkeypatch.setattr(summaries, "PASS_LINES", sizes[-1] + 1)
        monkeypatch.setattr(summaries, "ALONE_LINES", sizes[-6])
        ids = [r for (r,) in store.all("SELECT run_id FROM runs ORDER BY 1")]
        statements = summaries.counts_of(ids, lines)
        shared = [p for _, (p,) in statements if isinstance(p, list)]
        alone = [p for _, (p,) in statements if not isinstance(p, list)]
        assert len(shared) >= 2 and len(alone) >= 6 and sum(map(len, shared)) + len(alone) \
            == len(ids)
        assert all(sum(lines.get(r, 0) for r in p) <= summaries.PASS_LINES for p in shared)
        assert {r for r in ids if lines.get(r, 0) >= summaries.ALONE_LINES} <= set(alone)
        store.con.execute("DELETE FROM logpipe_internal.run_summary_cache")
        assert summaries.refresh(store) > 10
        kept = _rows(store, f"SELECT {COLS} FROM logpipe_internal.run_judged_cache")
    assert kept == live


def test_samples_from_counts_are_the_lines_values(sample_db: Path) -> None:
    """For every run with batch lines: the samples from the kept counts, from counts
    computed now and from the lines counted in polars (the configured warm-up's path) are
    equal, and they are the steady lines' own values, sorted."""
    with Store.open(sample_db, read_only=True) as store:
        runs = _runs_with_lines(store)
        assert len(runs) > 30
        now: dict[str, list] = {}
        for row in store.all(f"SELECT {COLS} FROM run_judged_counts(NULL)"):
            now.setdefault(row[0], []).append(row[1:])
        seen_strata = 0
        for rid in runs:
            kept = judged_samples(judged_counts(store, rid))
            lines = steady_lines(store, rid, NO_WARMUP, JUDGED)
            _same(kept, judged_samples(now[rid]))
            _same(kept, judged_samples(count_lines(lines)))
            steady = lines.filter((pl.col("state") == "steady")
                                  & pl.col("kind").is_in(DECODE_KINDS))
            for s, arr in kept["decode"].items():
                want = steady.filter(pl.col("running_req") == s)["gen_throughput"]
                np.testing.assert_array_equal(arr, np.sort(want.drop_nulls().to_numpy()))
                seen_strata += 1
            np.testing.assert_array_equal(
                kept["accept_len"], np.sort(steady["accept_len"].drop_nulls().to_numpy()))
            graphed = lines.filter(pl.col("kind").is_in(DECODE_KINDS)
                                   & pl.col("cuda_graph").is_not_null() & pl.col("past_warmup"))
            assert (kept["graph_on"], kept["graph_total"]) == (
                int(graphed["cuda_graph"].sum()), graphed.height)
            assert sum(kept["excluded"].values()) == lines.filter(
                pl.col("state") != "steady").height
        assert seen_strata > 30


def test_a_configured_warmup_counts_the_lines_it_leaves(sample_db: Path) -> None:
    with Store.open(sample_db, read_only=True) as store:
        (rid,) = store.one("SELECT run_id FROM runs WHERE name = 'baseline-untuned'")
        plain = judged_samples(judged_counts(store, rid))
        later = judged_samples(judged_counts(store, rid, Warmup(lines=5)))
        assert sum(map(len, later["decode"].values())) == \
            sum(map(len, plain["decode"].values())) - 5
        assert later["excluded"]["configured warm-up (first 5 lines)"] == 5


def test_statistics_and_launch_values_from_kept_counts_are_those_of_the_lines(
        sample_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:
        ids = [r for (r,) in store.all("SELECT run_id FROM runs")]
        live = _rows(store, "SELECT * FROM launch_values")
        assert len(live) > 30
        assert _rows(store, "SELECT * FROM launch_values_of_counts(NULL, ?)", [ids]) == live
        assert _rows(store, "SELECT * FROM run_summary_stats_of(NULL, ?)", [ids]) == \
            _rows(store, "SELECT * FROM run_summary_stats(NULL)")
        # a run whose lines changed is no longer read from the kept counts, until refreshed
        (rid,) = store.one("SELECT min(run_id) FROM logpipe_internal.batches")
        store.con.execute("DELETE FROM logpipe_internal.batches WHERE run_id = ? AND line_no "
                          "= (SELECT max(line_no) FROM batches WHERE run_id = ?)", [rid, rid])
        assert not summaries.current(store, [rid])
        now = [r[1:] for r in _rows(store, f"SELECT {COLS} FROM run_judged_counts(?)", [rid])]
        assert sorted(judged_counts(store, rid), key=repr) == now
        assert summaries.refresh(store) == 1 and summaries.current(store, [rid])
        assert _rows(store, f"SELECT {COLS} FROM logpipe_internal.run_judged_cache "
                            "WHERE run_id = ?", [rid]) == \
            _rows(store, f"SELECT {COLS} FROM run_judged_counts(?)", [rid])


def test_read_commands_read_the_kept_rows_and_leave_no_shadow(sample_db: Path,
                                                               tmp_path: Path) -> None:
    """Within ``shadowed`` the views of every run's statistics (and those reading them)
    give what they give without it, from the kept rows; a run changed since ingest is
    classified for the read; nothing stays over the views after it."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:  # one run's last steady decode line deleted by hand
        # (a run whose decode lines are SGLang batch lines: a vLLM run's steady lines are
        # its stats lines, not in that table, and the run ids, from the samples' paths,
        # put one first in some checkouts)
        (rid,) = store.one("SELECT min(run_id) FROM launch_values WHERE run_id IN "
                           "(SELECT run_id FROM logpipe_internal.batches)")
        (last,) = store.one(  # (a line a launch value counts: one of its strata's)
            "SELECT max(line_no) FROM steady_decode WHERE run_id = ? AND running_req IN "
            "(SELECT stratum FROM launch_values WHERE run_id = ?)", [rid, rid])
        store.con.execute("DELETE FROM logpipe_internal.batches WHERE run_id = ? AND line_no "
                          "= ?", [rid, last])
    views = ("run_summary", "launch_values", "launch_noise", "profiling_overhead",
             "spec_pairing")
    with Store.open(db, read_only=True) as store:
        assert [r for r, _ in summaries.stale(store)] == [rid]
        live = {v: _rows(store, f"SELECT * FROM {v}") for v in views}
        assert all(live.values())
        kept = _rows(store, "SELECT * FROM launch_values_of_counts(NULL, ?)", [[rid]])
        assert kept != [r for r in live["launch_values"] if r[0] == rid]  # the cache is stale
        ids = sorted({r[0] for r in live["launch_values"]})
        by_run = summaries.launch_values(store, ids)  # kept rows, and the stale run's now
        assert [(r, s, v) for r in ids for s, v in by_run[r]] == \
            [(r, int(s), float(v)) for r, s, _, v in sorted(live["launch_values"])]
        with summaries.shadowed(store):
            temp = {t for (t,) in store.all(
                "SELECT table_name FROM duckdb_tables() WHERE temporary")}
            assert temp == set(summaries.SHADOWED)
            for v in views:  # (sums of floats in another order: to rounding)
                got = _rows(store, f"SELECT * FROM {v}")
                assert len(got) == len(live[v]), v
                for a, b in zip(got, live[v], strict=True):
                    for x, y in zip(a, b, strict=True):
                        assert x == (pytest.approx(y, rel=1e-12)
                                     if isinstance(y, float) else y), v
        assert not store.all("SELECT table_name FROM duckdb_tables() WHERE temporary")


def _same_run(a: object, b: object) -> None:
    """Two loaded runs field by field (arrays by value)."""
    import dataclasses

    for f in dataclasses.fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "decode":
            assert x.keys() == y.keys(), f.name
            for s in x:
                np.testing.assert_array_equal(x[s], y[s])
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        elif f.name == "env":
            assert x.entries == y.entries and x.complete == y.complete
        else:
            assert x == y, f.name


def test_runs_loaded_together_are_each_loaded_alone(sample_db: Path, tmp_path: Path) -> None:
    """A check or a campaign loads its runs together (a few statements for all of them):
    runs of every engine and folder of the samples, by name or id, repeated, one of them
    changed since ingest (its kept counts stale), with and without a configured warm-up,
    are what each is loaded alone."""
    from logpipe.analysis.load import load_runs

    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:  # one run's kept counts made stale by hand
        (stale,) = store.one("SELECT min(run_id) FROM logpipe_internal.batches")
        store.con.execute("DELETE FROM logpipe_internal.batches WHERE run_id = ? AND line_no "
                          "= (SELECT max(line_no) FROM logpipe_internal.batches "
                          "WHERE run_id = ?)", [stale, stale])
    with Store.open(db, read_only=True) as store:
        assert stale in {r for r, _ in summaries.stale(store)}
        # (a run of each engine and source of the samples, the stale one first: ~10 s for
        # every run of the samples, alone and together, is more than the suite can spend)
        ids = [stale, *(r for (r,) in store.all(
            "SELECT min(run_id) FROM runs WHERE run_id <> ? GROUP BY engine, "
            "regexp_extract(source_path, 'sample_logs/([^/]+)', 1) ORDER BY 1", [stale]))]
        assert len(ids) >= 10
        (name,) = store.one("SELECT name FROM runs WHERE run_id = ?", [ids[1]])
        refs = [*ids, name, ids[0]]  # a name and repeats, in the order asked
        together = load_runs(store, refs)
        assert [r.run_id for r in together] == [*ids, ids[1], ids[0]]
        for ref, run in zip(refs, together, strict=True):
            _same_run(run, load_runs(store, [ref])[0])
        warm = Warmup(lines=3)  # (counted from the lines, run by run)
        for ref, run in zip(refs[:3], load_runs(store, refs[:3], warm), strict=True):
            _same_run(run, load_runs(store, [ref], warm)[0])


@pytest.mark.parametrize("appended_again", [False, True])
def test_an_ingest_stopped_before_its_end_is_settled_by_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, appended_again: bool) -> None:
    """Ingest compares the kept ranges, not every line, to find the runs whose statistics
    changed: a log appended to and read by an ingest stopped after the file's commit but
    before its last transaction (ranges and statistics not brought up to date) is settled
    by the next ingest, whether it reads no line of it (unchanged since) or only the lines
    appended again since, as a clean ingest of the whole log would be; and an ingest that
    changed nothing recomputes nothing."""
    from logpipe.ingest import IngestInterrupted, ingest_paths
    from tests.conftest import SAMPLES

    lines = (SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log").read_text(
        ).splitlines(keepends=True)
    log = tmp_path / "logs" / "server.log"
    log.parent.mkdir()
    cut = 280 if appended_again else len(lines)
    log.write_text("".join(lines[:200]))
    db = tmp_path / "db.duckdb"
    ingest_paths([log.parent], db)
    with log.open("a") as f:
        f.write("".join(lines[200:cut]))

    def stop(store: Store, kept: bool = False) -> int:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(summaries, "refresh", stop)
        with pytest.raises(IngestInterrupted):
            ingest_paths([log.parent], db)
    with Store.open(db, read_only=True) as store:  # the append committed, not settled
        assert store.one("SELECT lines FROM sources") == (cut,)
        assert summaries.stale(store) and not summaries.stale(store, kept=True)
    with log.open("a") as f:
        f.write("".join(lines[cut:]))
    again = ingest_paths([log.parent], db)
    assert [f.status for f in again.files] == ["appended" if appended_again else "unchanged"]
    clean = tmp_path / "clean.duckdb"
    ingest_paths([log.parent], clean)
    for path in (db, clean):
        with Store.open(path, read_only=True) as store:
            assert summaries.stale(store) == [] and summaries.stale(store, kept=True) == []
            assert summaries.ranges_drifted(store, "main.run_batch_ranges") == []
            assert _rows(store, f"SELECT {COLS} FROM logpipe_internal.run_judged_cache") == \
                _rows(store, f"SELECT {COLS} FROM run_judged_counts(NULL)")
            assert len(_rows(store, "SELECT * FROM run_judged_counts(NULL)")) > 20
    calls: list[object] = []
    refresh, fold = summaries.refresh, summaries.fold_ranges
    monkeypatch.setattr(summaries, "refresh",
                        lambda store, kept=False: calls.append(refresh(store, kept)) or 0)
    monkeypatch.setattr(summaries, "fold_ranges",
                        lambda store, files: calls.append(files) or fold(store, files))
    ingest_paths([log.parent], db)
    assert calls == [[], 0]  # no file's ranges folded, no run recomputed


@pytest.mark.parametrize("one_by_one", [0, 1000])
def test_current_runs_are_found_by_a_list_or_run_by_run(
        sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        one_by_one: int) -> None:
    """Whether a run's kept rows are current is read from its own lines (a statement a
    run, for a few) or from a list of runs (one pass): the same answer, a changed run not
    current either way, and a run named twice or unknown changes nothing."""
    monkeypatch.setattr(summaries, "KEYS_ONE_BY_ONE", one_by_one)
    db = tmp_path / "copy.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:
        ids = [r for (r,) in store.all("SELECT run_id FROM runs ORDER BY 1")]
        assert len(ids) > 30 and summaries.kept_of(store, ids) == set(ids)
        (rid,) = store.one("SELECT min(run_id) FROM logpipe_internal.batches")
        store.con.execute("DELETE FROM logpipe_internal.batches WHERE run_id = ? AND line_no "
                          "= (SELECT max(line_no) FROM batches WHERE run_id = ?)", [rid, rid])
        assert summaries.kept_of(store, [*ids, ids[0], "no such run"]) == set(ids) - {rid}
        assert summaries.kept_of(store, [rid, rid]) == set()
        other = next(r for r in ids if r != rid)
        assert not summaries.current(store, [rid]) and summaries.current(store, [other])
    # a read-only store answers each run once, whatever it is asked with: the same answers
    with Store.open(db, read_only=True) as store:
        assert summaries.kept_of(store, [rid, other]) == {other}
        assert summaries.kept_of(store, [*ids, "no such run"]) == set(ids) - {rid}
        assert summaries.kept_of(store, [other, rid, rid]) == {other}
        assert store.read_once["kept"][rid] is False and store.read_once["kept"][other]
        assert not summaries.current(store, [rid, other]) and summaries.current(store, [other])
