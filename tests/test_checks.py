"""`logpipe check`: suites fail on purpose, pairing, history, exit codes, outputs."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from logpipe.changepoints import change_points, judge_history
from logpipe.cli import app
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, load_generator, query

runner = CliRunner()


def check(db: Path, *args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["check", "--db", str(db), "--format", "json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def failing(out: dict, name: str) -> list[dict]:
    (r,) = [r for r in out["results"] if r["check"] == name]
    return r["failing_rows"]


def test_samples_fail_on_the_unpaired_run_and_the_real_ngram_regression(sample_db: Path
                                                                        ) -> None:
    code, out = check(sample_db)
    assert code == 1
    fails = [r for r in out["results"] if r["status"] == "FAIL"]
    assert [(r["suite"], r["check"]) for r in fails] == [
        ("pairing", "every speculative run has a same-environment baseline"),
        ("regressions", "speculation is not slower than its paired baseline")]
    rows = fails[0]["failing_rows"]
    assert [r for r in rows if r["status"] == "unpaired"] == [{
        "run": "qwen3-30b-eagle3-untuned", "status": "unpaired",
        "reason": "baseline qwen3-30b-baseline-tuned differs only in NCCL_ALGO, "
                  "NCCL_P2P_LEVEL, NCCL_PROTO"}]
    # vLLM's era fragments are bare logs: no manifest, so no pairing (never one across
    # engines: the SGLang era of the same model is not their baseline)
    assert sorted(r["run"] for r in rows if r["status"] == "unknown environment") == [
        "v0.11.0", "v0.33.0-bench", "v0.8.2", "v0.8.4", "v0.9.2"]
    assert len(rows) == 6
    # the real engines' campaigns: NGRAM on a random tiny model is a real regression (the
    # vLLM one by its counters: its log has too few windows)
    assert sorted((r["spec_run"], r["baseline_run"], r["verdict"])
                  for r in fails[1]["failing_rows"]) == [
        ("real-cpu-counters-ngram", "real-cpu-counters-baseline", "regression"),
        ("real-cpu-ngram", "real-cpu-baseline", "regression"),  # arm against arm
        ("real-vllm-cpu-counters-ngram", "real-vllm-cpu-counters-baseline", "regression")]
    (vllm,) = [r for r in fails[1]["failing_rows"] if r["spec_run"].startswith("real-vllm")]
    assert vllm["detail"].startswith("ratio 0.762 (output throughput (counters));")
    assert all(r["status"] in ("PASS", "WARN", "SKIP") for r in out["results"]
               if r not in fails)
    # a check over zero rows tested nothing: SKIP, never PASS
    skipped = [r for r in out["results"] if r["status"] == "SKIP"]
    assert all(r["evaluated_rows"] == 0 for r in skipped)
    assert all(r["evaluated_rows"] > 0 for r in out["results"] if r["status"] == "PASS")
    # the text output of the failing suite (the pairing suite alone: the regressions
    # suite's verdicts, its bootstraps, are half the check's ~10 s and judged above)
    text = runner.invoke(app, ["check", "--db", str(sample_db), "--suite", "pairing"]).stdout
    assert "PASS  pairing" not in text
    assert "FAIL  pairing: every speculative run has a same-environment baseline" in text


def test_matching_baseline_makes_check_pass(tmp_path: Path) -> None:
    g = load_generator()
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES, logs)
    small = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    run = logs / "unpaired" / "qwen3-30b-baseline-untuned"
    run.mkdir()
    (run / "server.log").write_text("\n".join(
        g.mission_log(130.0, 1.5, seed=31, start=datetime(2026, 5, 5, 13, 0), model=small))
        + "\n")
    (run / "env.json").write_text(json.dumps(
        g.mission_manifest(False, False, "2026-05-05T12:58:00+00:00", model=small)))
    for real in ("real-cpu", "real-cpu-phases", "real-cpu-counters",  # their NGRAM slowdowns
                 "real-vllm-cpu-counters"):  # are real, and
        shutil.rmtree(logs / real)  # not this test's
    for bare in ("vllm", "vllm-bench"):  # bare fragments, no manifest: cannot be paired
        shutil.rmtree(logs / "eras" / bare)
    db = tmp_path / "c.duckdb"
    ingest_paths([logs], db)
    junit = tmp_path / "junit.xml"
    code, out = check(db, "--junit", str(junit))
    assert code == 0, [r for r in out["results"] if r["status"] == "FAIL"]
    xml = junit.read_text()
    assert '<testsuite name="pairing" tests="1" failures="0" errors="0" skipped="0">' in xml


BAD = {
    # file name: (log text, the check that must fail, the failing row's run)
    "usage.log": ("[2026-01-01 00:00:10 TP0] Decode batch. #running-req: 1, #token: 9, "
                  "token usage: 1.50, cuda graph: True, gen throughput (token/s): 50.00, "
                  "#queue-req: 0\n", "token usage within [0, 1]"),
    "negative.log": ("[2026-01-01 00:00:10 TP0] Decode batch. #running-req: 1, #token: 9, "
                     "token usage: 0.10, cuda graph: True, gen throughput (token/s): -5.00, "
                     "#queue-req: 0\n", "throughput not negative"),
    "backwards.log": ("[2026-01-01 00:00:10 TP0] Decode batch. #running-req: 1, #token: 9, "
                      "token usage: 0.10, cuda graph: True, gen throughput (token/s): 5.00, "
                      "#queue-req: 0\n"
                      "[2026-01-01 00:00:02 TP0] Decode batch. #running-req: 1, #token: 9, "
                      "token usage: 0.10, cuda graph: True, gen throughput (token/s): 5.00, "
                      "#queue-req: 0\n", "timestamps non-decreasing per rank"),
    "nomodel.log": ("[2026-01-01 00:00:10 TP0] Decode batch. #running-req: 1, #token: 9, "
                    "token usage: 0.10, cuda graph: True, gen throughput (token/s): 5.00, "
                    "#queue-req: 0\n", "every run has a model|every run has a layout"),
    "rejects.log": ("[2026-01-01 00:00:10 TP0] Decode batch. #running-req: x\n"
                    "[2026-01-01 00:00:11 TP0] Decode batch. #running-req: 1, #token: 9, "
                    "token usage: 0.10, cuda graph: True, gen throughput (token/s): 5.00, "
                    "#queue-req: 0\n", "rejected lines below 0.05 of each file"),
}
SPEC_ARGS = ("[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1, "
             "speculative_algorithm='EAGLE', speculative_num_draft_tokens=3)\n")


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_data_quality_expectation_can_fail(tmp_path: Path, name: str) -> None:
    text, expected_check = BAD[name]
    if name != "nomodel.log":
        text = "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1)\n" + text
    (tmp_path / name).write_text(text)
    db = tmp_path / "q.duckdb"
    ingest_paths([tmp_path / name], db)
    code, out = check(db, "--suite", "data_quality")
    assert code == 1
    fails = [r["check"] for r in out["results"] if r["status"] == "FAIL"]
    assert fails == expected_check.split("|")


def test_incomplete_benchmark_fails(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "mission" / "baseline-untuned", run)
    record = json.loads((run / "bench_serving.jsonl").read_text())
    record.update(num_prompts=10, completed=7)
    (run / "bench_serving.jsonl").write_text(json.dumps(record) + "\n")
    db = tmp_path / "i.duckdb"
    ingest_paths([run], db)
    code, out = check(db, "--suite", "data_quality")
    assert code == 1
    name = "benchmark records complete (completed = requested prompts, when both are known)"
    (row,) = failing(out, name)
    assert (row["completed"], row["num_prompts"]) == (7, 10)


@pytest.mark.parametrize(("accepts", "expected_check"), [
    ((0.5, 2.0), "accept length at least 1 (speculative runs)"),
    ((2.0, 4.5), "accept length at most num_draft_tokens + 1 (speculative runs)"),
])
def test_accept_length_bounds(tmp_path: Path, accepts: tuple[float, float],
                              expected_check: str) -> None:
    lines = [SPEC_ARGS]
    for i, al in enumerate(accepts):
        lines.append(f"[2026-01-01 00:00:1{i} TP0] Decode batch. #running-req: 1, #token: 9, "
                     f"token usage: 0.10, accept len: {al:.2f}, cuda graph: True, "
                     "gen throughput (token/s): 50.00, #queue-req: 0\n")
    (tmp_path / "spec.log").write_text("".join(lines))
    db = tmp_path / "a.duckdb"
    ingest_paths([tmp_path / "spec.log"], db)
    code, out = check(db, "--suite", "data_quality")
    assert code == 1
    assert [r["check"] for r in out["results"] if r["status"] == "FAIL"] == [expected_check]
    assert failing(out, expected_check)[0]["run"] == "spec"


def test_unknown_environment_fails_pairing(tmp_path: Path) -> None:
    (tmp_path / "spec.log").write_text(
        SPEC_ARGS + "[2026-01-01 00:00:10 TP0] Decode batch. #running-req: 1, #token: 9, "
        "token usage: 0.10, accept len: 2.00, cuda graph: True, gen throughput (token/s): "
        "50.00, #queue-req: 0\n")
    db = tmp_path / "u.duckdb"
    ingest_paths([tmp_path / "spec.log"], db)
    code, out = check(db, "--suite", "pairing")
    assert code == 1
    assert failing(out, "every speculative run has a same-environment baseline") == [{
        "run": "spec", "status": "unknown environment",
        "reason": "environment unknown (no captured manifest): cannot be paired"}]


def _history(tmp_path: Path, series: list[tuple[float, bool]]) -> Path:
    """Baseline runs of the mission model, one per (tps, tuned), an hour apart."""
    g = load_generator()
    root = tmp_path / "hist"
    for i, (tps, tuned) in enumerate(series):
        folder = root / f"run{i:02d}"
        folder.mkdir(parents=True)
        start = datetime(2026, 6, 1, 0, 0) + timedelta(hours=i)
        log = g.Log(g.MISSION_ERA, start, g.random.Random(i))
        g.startup(log, g.base_args(g.MISSION_MODEL, tp_size=8, ep_size=8,
                                   mem_fraction_static=0.85, cuda_graph_max_bs=32),
                  "Qwen3MoeForCausalLM", tp=8)
        g.workload(log, requests=2, lines_per_req=6, tps=tps, noise=0.5)
        (folder / "server.log").write_text("\n".join(log.lines) + "\n")
        (folder / "env.json").write_text(json.dumps(
            g.mission_manifest(tuned, False, start.isoformat())))
    db = tmp_path / "h.duckdb"
    assert not ingest_paths([root], db).failed
    return db


def test_history_regression_within_one_environment(tmp_path: Path) -> None:
    db = _history(tmp_path, [(62.9, False)] * 8 + [(62.9 * 0.95, False)] * 4)
    code, out = check(db, "--suite", "regressions")
    assert code == 1
    rows = failing(out, "no regression after the last change point (per fingerprint and "
                        "workload)")
    assert len(rows) == 1 and rows[0]["status"] == "regression"
    assert rows[0]["runs"] == 12
    assert "-5.0% at run #9" in rows[0]["detail"]


def test_environment_switch_is_labelled_not_flagged(tmp_path: Path) -> None:
    db = _history(tmp_path, [(90.0, True)] * 6 + [(62.9, False)] * 6)
    code, out = check(db, "--suite", "regressions")
    assert code == 0
    (r,) = [r for r in out["results"] if r["check"].startswith("changes across")]
    assert r["status"] == "PASS"
    frame_rows = runner.invoke(app, ["check", "--db", str(db), "--suite", "regressions"]).stdout
    assert "PASS  regressions: changes across environments" in frame_rows
    from logpipe.checks.frames import history_across_environments
    from logpipe.store import Store

    with Store.open(db, read_only=True) as store:
        df = history_across_environments(store, {})
    assert df["status"].to_list() == ["environment shift"]
    assert "at run #7 (run06): environment shift" in df["detail"][0]


def test_change_points_on_synthetic_series() -> None:
    rng = np.random.default_rng(4)
    step = np.r_[rng.normal(100, 1.5, 20), rng.normal(95, 1.5, 20)]
    (cp,) = change_points(step, min_magnitude=0.03)
    assert abs(cp.index - 20) <= 2
    assert cp.magnitude == pytest.approx(-0.05, abs=0.015)
    for seed in range(5):
        noise = np.random.default_rng(seed).normal(100, 1.5, 40)
        assert change_points(noise, min_magnitude=0.03) == []
        assert judge_history(list(noise)).status == "ok"
    assert judge_history([1.0, 2.0]).status == "insufficient data"


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # (scipy's, constant a)
def test_welch_p_is_scipys_welch_t_test() -> None:
    """The change points' t-test, written on scipy.special, is scipy.stats' Welch test
    (sizes from two, scales far apart, one side constant)."""
    from scipy import stats as sps

    from logpipe.changepoints import welch_p

    rng = np.random.default_rng(7)
    for _ in range(300):
        na, nb = rng.integers(2, 30, 2)
        a = rng.normal(rng.uniform(-5, 5), rng.uniform(0.01, 3), na) * rng.choice([1, 1e6])
        b = rng.normal(rng.uniform(-5, 5), rng.uniform(0.01, 3), nb) * rng.choice([1, 1e6])
        if rng.random() < 0.1:
            a = np.full(na, 3.0)
        want = float(sps.ttest_ind(a, b, equal_var=False).pvalue)
        assert welch_p(a, b) == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_user_suite_and_unknown_suite(tmp_path: Path, sample_db: Path) -> None:
    suite = tmp_path / "mine.toml"
    (runs,), = query(sample_db, "SELECT count(*) FROM runs")
    suite.write_text('name = "mine"\n[[checks]]\nname = "too many runs"\n'
                     'query = "SELECT count(*) AS n FROM runs"\n'
                     'expectation = "expect_column_values_to_be_between"\n'
                     f'kwargs = {{ column = "n", min_value = {runs + 1} }}\nshow = ["n"]\n')
    code, out = check(sample_db, "--suite-file", str(suite), "--suite", "mine")
    assert code == 1
    assert failing(out, "too many runs") == [{"n": runs}]
    bad = runner.invoke(app, ["check", "--db", str(sample_db), "--suite", "nope"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("Error: unknown suite(s): nope")
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "broken"\n[[checks]]\nname = "x"\nquery = "SELECT nope"\n'
                      'expectation = "expect_column_values_to_not_be_null"\n'
                      'kwargs = { column = "x" }\n')
    result = runner.invoke(app, ["check", "--db", str(sample_db), "--suite-file", str(broken),
                                 "--suite", "broken"])
    assert result.exit_code == 2
    assert "ERROR broken: x" in result.stdout


def test_cached_run_summary_is_the_view_row_for_row(sample_db: Path, tmp_path: Path) -> None:
    from logpipe import summaries
    from logpipe.store import Store

    db = tmp_path / "s.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:
        assert summaries.stale(store) == []  # ingest kept them
        view = store.con.sql("SELECT * FROM run_summary ORDER BY run_id").fetchall()
        cached = store.con.sql(f"{summaries.SUMMARY_SQL} ORDER BY run_id").fetchall()
        one = [store.con.execute(f"{summaries.ONE_RUN_SQL}", [r[0], r[0]]).fetchone()
               for r in view]
        assert len(view) > 30 and view == cached == one
        # many stale runs are recomputed in one pass, to the same rows
        store.con.execute("DELETE FROM logpipe_internal.run_summary_cache")
        assert len(summaries.stale(store)) == len(view)
        assert summaries.refresh(store) == len(view) and summaries.stale(store) == []
        assert store.con.sql(f"{summaries.SUMMARY_SQL} ORDER BY run_id").fetchall() == view
        # a changed run is found stale and recomputed alone; a deleted one drops out
        # (a run with batch lines: run ids are hashes, the first one may be a vLLM run's)
        (rid,) = store.con.execute("SELECT min(run_id) FROM logpipe_internal.batches").fetchone()
        store.con.execute("DELETE FROM logpipe_internal.batches WHERE run_id = ? AND line_no = "
                          "(SELECT max(line_no) FROM batches WHERE run_id = ?)", [rid, rid])
        assert [r for r, _ in summaries.stale(store)] == [rid]
        assert summaries.refresh(store) == 1
        assert store.con.sql(f"{summaries.SUMMARY_SQL} ORDER BY run_id").fetchall() == \
            store.con.sql("SELECT * FROM run_summary ORDER BY run_id").fetchall()


def test_timestamp_steps_are_per_rank_and_skip_lines_without_a_time(tmp_path: Path) -> None:
    """ts_step_s compares each timestamped batch line with the previous timestamped line of
    the same rank: interleaved ranks with skewed clocks and an untimed line in between are
    not steps back; a rank whose clock goes back is, by exactly the amount."""
    line = ("{stamp}Decode batch. #running-req: 1, #token: 9, token usage: 0.10, "
            "cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0\n")
    log = tmp_path / "ranks.log"
    log.write_text(
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=2)\n"
        + line.format(stamp="[2026-01-01 00:00:10 TP0] ")
        + line.format(stamp="[2026-01-01 00:00:05 TP1] ")
        + line.format(stamp="")
        + line.format(stamp="[2026-01-01 00:00:11 TP0] ")
        + line.format(stamp="[2026-01-01 00:00:06 TP1] "))
    db = tmp_path / "r.duckdb"
    ingest_paths([log], db)
    assert query(db, "SELECT min_ts_step_s FROM run_summary") == [(1.0,)]
    code, out = check(db, "--suite", "data_quality")
    assert "timestamps non-decreasing per rank" not in [
        r["check"] for r in out["results"] if r["status"] == "FAIL"]
    log.write_text(log.read_text() + line.format(stamp="[2026-01-01 00:00:03 TP1] "))
    ingest_paths([log], db)
    assert query(db, "SELECT min_ts_step_s FROM run_summary") == [(-3.0,)]
    code, out = check(db, "--suite", "data_quality")
    (row,) = failing(out, "timestamps non-decreasing per rank")
    assert row["largest_step_back_s"] == -3.0


def test_run_pairs_differing_keys_are_the_identity_differences(sample_db: Path) -> None:
    """run_pairs diffs keys once per pair of distinct identities; every pair must still get
    exactly the keys whose values differ between its two runs (absent = NULL)."""
    pairs = query(sample_db, "SELECT spec_run_id, baseline_run_id, differing_keys "
                             "FROM run_pairs")
    identity: dict[str, dict[str, object]] = {}
    for run_id, key, value in query(sample_db, "SELECT run_id, key, value FROM run_env "
                                               "WHERE tier = 'identity'"):
        identity.setdefault(run_id, {})[key] = value
    for spec, base, differing in pairs:
        s, b = identity.get(spec, {}), identity.get(base, {})
        assert differing == sorted(k for k in {*s, *b} if s.get(k) != b.get(k)), (spec, base)
    assert len(pairs) > 3 and any(d for *_, d in pairs) and any(not d for *_, d in pairs)


def test_pairs_judged_on_threads_are_those_judged_one_by_one(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The speculation check judges its pairs on a thread per core: the same rows, in the
    same order, as one at a time, with and without keys to keep them by."""
    from logpipe.analysis.verdicts import VerdictCache
    from logpipe.checks import frames
    from logpipe.store import Store

    # (the campaigns' arms are judged by compare's own function, not on the threads: once,
    # for the three checks, ~5 s each)
    campaigns: dict[str, Any] = {}
    judge = frames.judge_campaign

    def judged_once(store: Store, plan: str, options: Any) -> Any:
        if plan not in campaigns:
            try:
                campaigns[plan] = judge(store, plan, options)
            except Exception as exc:  # noqa: BLE001 - raised again each time, as it was
                campaigns[plan] = exc
        if isinstance(campaigns[plan], Exception):
            raise campaigns[plan]
        return campaigns[plan]

    monkeypatch.setattr(frames, "judge_campaign", judged_once)
    with Store.open(sample_db, read_only=True) as store:
        monkeypatch.setattr(frames, "JUDGE_THREADS", 1)
        alone = frames.speculation_vs_baseline(store, {}, VerdictCache(store))
        monkeypatch.setattr(frames, "JUDGE_THREADS", 3)
        together = frames.speculation_vs_baseline(store, {}, VerdictCache(store))
        unkeyed = frames.speculation_vs_baseline(store, {})  # (no cache: no pair has a key)
    pairs = alone.filter(~alone["detail"].str.contains("launches "))  # (not campaign arms)
    assert pairs.height > 3 and pairs["detail"].n_unique() > 3
    assert together.equals(alone)
    assert unkeyed.equals(alone)


def test_pair_verdicts_are_kept_and_judged_again_when_an_input_changes(tmp_path: Path
                                                                       ) -> None:
    import duckdb

    from logpipe.analysis.verdicts import VerdictCache
    from logpipe.checks.frames import speculation_vs_baseline
    from logpipe.store import Store

    db = tmp_path / "v.duckdb"  # the pairs of a real campaign and of the mission
    assert not ingest_paths([SAMPLES / "real-cpu", SAMPLES / "mission"], db).failed
    check(db, "--suite", "regressions")  # read-only: judges every pair, keeps nothing
    assert query(db, "SELECT count(*) FROM logpipe_internal.pair_verdict_cache") == [(0,)]
    check(db, "--suite", "regressions", "--update-cache")  # keeps the verdicts
    kept = query(db, "SELECT spec_run_id, baseline_run_id, pair_key, detail "
                     "FROM logpipe_internal.pair_verdict_cache ORDER BY ALL")
    assert len(kept) >= 1  # the mission's pair (a campaign is judged arm against arm)
    with Store.open(db, read_only=True) as store:
        fresh = speculation_vs_baseline(store, {})  # judged now, no cache
        cache = VerdictCache(store)
        assert speculation_vs_baseline(store, {}, cache).equals(fresh)
        assert cache.new == []  # every verdict came from the cache
        cache = VerdictCache(store)
        speculation_vs_baseline(store, {"threshold": 0.5}, cache)
        assert len(cache.new) == len(kept)  # other options: judged again
    # a pair judged within its launches alone (the mission's): a changed line of a real
    # campaign's launch also moves the launch noise, and with it its neighbours' verdicts
    spec = next(k[0] for k in kept if "unreplicated" in k[3])
    con = duckdb.connect(str(db))
    con.execute("UPDATE logpipe_internal.pair_verdict_cache SET detail = 'kept' "
                "WHERE spec_run_id = ?", [spec])
    con.close()
    with Store.open(db, read_only=True) as store:  # the check reports the kept verdict...
        assert "kept" in speculation_vs_baseline(store, {}, VerdictCache(store))["detail"]
    con = duckdb.connect(str(db))  # ...until an input of the pair changes (here by hand)
    con.execute("UPDATE logpipe_internal.batches SET gen_throughput = gen_throughput * 1.5 "
                "WHERE run_id = ? "
                "AND line_no = (SELECT max(line_no) FROM batches WHERE run_id = ? "
                "AND kind = 'decode')", [spec, spec])
    con.close()
    check(db, "--suite", "regressions", "--update-cache")  # a value changed in place...
    assert "kept" in [r[0] for r in query(
        db, "SELECT detail FROM logpipe_internal.pair_verdict_cache")]
    check(db, "--suite", "regressions", "--rescan", "--update-cache")  # ...until every
    # line is read
    after = query(db, "SELECT spec_run_id, baseline_run_id, pair_key, detail "
                      "FROM logpipe_internal.pair_verdict_cache ORDER BY ALL")
    assert [r[:2] for r in after] == [r[:2] for r in kept]  # replaced, not added
    assert [r[2] != k[2] for r, k in zip(after, kept, strict=True)] == [
        r[0] == spec for r in kept]
    assert "kept" not in [r[3] for r in after]


def test_a_kept_verdict_is_judged_again_when_a_benchmark_is_linked_later(tmp_path: Path
                                                                         ) -> None:
    """The client's numbers are an input of a pair's verdict: a benchmark ingested after
    the verdict was kept (no batch line changed) gives the pair a new key."""
    import duckdb

    from logpipe.analysis.verdicts import VerdictCache
    from logpipe.checks.frames import speculation_vs_baseline
    from logpipe.store import Store

    logs = tmp_path / "mission"
    shutil.copytree(SAMPLES / "mission", logs)
    held = tmp_path / "held"
    held.mkdir()
    benches = [logs / "baseline-untuned" / "bench_serving.jsonl",
               logs / "eagle3-untuned" / "bench_serving.txt"]
    for bench in benches:
        shutil.move(bench, held / bench.parent.name)
    db = tmp_path / "m.duckdb"
    assert not ingest_paths([logs], db).failed
    with Store.open(db, read_only=True) as store:
        cache = VerdictCache(store)
        speculation_vs_baseline(store, {}, cache)
    assert cache.save(db) == 1  # the mission's pair
    con = duckdb.connect(str(db))
    con.execute("UPDATE logpipe_internal.pair_verdict_cache SET detail = 'kept'")
    con.close()
    with Store.open(db, read_only=True) as store:  # served while nothing changed
        assert speculation_vs_baseline(store, {}, VerdictCache(store))["detail"].to_list() \
            == ["kept"]
    for bench in benches:
        shutil.move(held / bench.parent.name, bench)
    result = ingest_paths([logs], db)
    assert not result.failed
    assert query(db, "SELECT count(*) FROM bench_results WHERE run_id IS NOT NULL") == [(2,)]
    with Store.open(db, read_only=True) as store:
        cache = VerdictCache(store)
        frame = speculation_vs_baseline(store, {}, cache)
    assert frame["detail"].to_list() != ["kept"] and len(cache.new) == 1


def test_campaign_verdicts_are_kept_until_a_launch_of_their_environment_changes(
        tmp_path: Path) -> None:
    """Two real campaigns of one environment: their verdicts are kept and served while
    nothing changed; a benchmark of one campaign's launch changes the other's verdict
    inputs too (its launch noise is borrowed from the environment's repeats): both are
    judged again."""
    import duckdb

    from logpipe.analysis.results import Options
    from logpipe.analysis.verdicts import VerdictCache
    from logpipe.checks.frames import speculation_vs_baseline
    from logpipe.store import Store

    db = tmp_path / "c.duckdb"
    assert not ingest_paths([SAMPLES / "real-cpu", SAMPLES / "real-cpu-counters"], db).failed
    with Store.open(db, read_only=True) as store:
        cache = VerdictCache(store)
        fresh = speculation_vs_baseline(store, {}, cache)
    assert fresh["spec_run"].to_list() == ["real-cpu-ngram", "real-cpu-counters-ngram"]
    assert cache.save(db) == 2
    con = duckdb.connect(str(db))
    con.execute("UPDATE logpipe_internal.campaign_verdict_cache SET detail = 'kept'")
    con.close()
    with Store.open(db, read_only=True) as store:
        cache = VerdictCache(store)
        kept = speculation_vs_baseline(store, {}, cache)
        assert kept["detail"].to_list() == ["kept", "kept"] and cache.new_campaigns == []
        assert kept.drop("detail").equals(fresh.drop("detail"))
        assert cache.campaign_key("real-cpu", Options(threshold=0.5)) \
            != cache.campaign_key("real-cpu", Options(threshold=0.03))  # other options
    con = duckdb.connect(str(db))  # a launch of the counters campaign, benched anew
    con.execute("UPDATE logpipe_internal.bench_results SET output_throughput = "
                "output_throughput * 1.01 WHERE run_id = (SELECT run_id FROM runs "
                "WHERE name = 'real-cpu-counters-baseline-r1')")
    con.close()
    with Store.open(db, read_only=True) as store:
        cache = VerdictCache(store)
        again = speculation_vs_baseline(store, {}, cache)
    assert "kept" not in again["detail"].to_list()
    assert [plan for _, plan, _ in cache.new_campaigns] == ["real-cpu", "real-cpu-counters"]


def test_a_pairs_verdict_in_check_is_the_one_compare_gives(tmp_path: Path) -> None:
    """A speculative launch paired in check, in an environment whose baselines were
    launched twice with a benchmark: check borrows the environment's launch noise of both
    families as `compare --run BASELINE --run CANDIDATE` does, and says what it says (the
    client's noise was left out: 'unreplicated regression' where compare said
    'regression')."""
    from logpipe.analysis.compare import compare, compare_with_baseline
    from logpipe.checks.frames import speculation_vs_baseline
    from logpipe.store import Store

    logs = tmp_path / "real-cpu"
    shutil.copytree(SAMPLES / "real-cpu", logs)
    for manifest in logs.glob("real-cpu-ngram-r*/env.json"):  # launches, not a campaign
        data = json.loads(manifest.read_text())
        del data["launch"]
        manifest.write_text(json.dumps(data))
    db = tmp_path / "p.duckdb"
    assert not ingest_paths([logs], db).failed
    with Store.open(db, read_only=True) as store:
        rows = speculation_vs_baseline(store, {}).to_dicts()
    assert [(r["spec_run"], r["baseline_run"]) for r in rows] == [
        ("real-cpu-ngram-r1", "real-cpu-baseline-r1"),
        ("real-cpu-ngram-r2", "real-cpu-baseline-r2")]
    for row in rows:
        (said,) = compare(db, [row["baseline_run"], row["spec_run"]])
        assert row["verdict"] == said.verdict == "regression", (row, said.replication)
    # and `compare --run CANDIDATE`, which finds the baseline itself
    found = compare_with_baseline(db, "real-cpu-ngram-r1")
    assert (found.reference, found.verdict) == ("real-cpu-baseline-r1", "regression")


def test_every_pair_check_judges_is_the_one_compare_finds(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rules find a speculative run's baseline: the `spec_pairing` view (check) and
    the environment judgement of `compare --run CANDIDATE`.  On every pair of the samples
    they choose the same baseline, and the verdicts are the same."""
    from logpipe.analysis.compare import compare_with_baseline
    from logpipe.checks import frames
    from logpipe.store import Store

    # (the campaigns' launches are judged arm against arm, not as pairs: not judged here)
    monkeypatch.setattr(frames, "judge_campaign", lambda *args: [])
    with Store.open(sample_db, read_only=True) as store:
        rows = frames.speculation_vs_baseline(store, {}).to_dicts()
        assert len(rows) >= 5
        for row in rows:
            found = compare_with_baseline(store, row["spec_run"])
            assert (found.reference, found.verdict) == (row["baseline_run"], row["verdict"])


def test_check_updates_a_database_of_an_older_logpipe_only_when_asked(sample_db: Path,
                                                                 tmp_path: Path) -> None:
    import duckdb

    from logpipe.store import Store

    db = tmp_path / "old.duckdb"
    shutil.copy(sample_db, db)
    con = duckdb.connect(str(db))  # views of another release
    con.execute("DROP VIEW run_batch_ranges")
    con.execute("UPDATE logpipe_internal.schema_views SET sha256 = 'older'")
    con.close()
    with Store.open(db, read_only=True) as store:
        assert store.outdated()
    # read commands never write: the check says what to do
    result = runner.invoke(app, ["check", "--db", str(db), "--suite", "data_quality"])
    assert result.exit_code == 2
    assert "written by an older logpipe" in result.output and "--update-cache" in result.output
    with Store.open(db, read_only=True) as store:
        assert store.outdated()
    code, out = check(db, "--suite", "data_quality", "--update-cache")
    assert [r["status"] for r in out["results"] if r["status"] == "ERROR"] == []
    with Store.open(db, read_only=True) as store:
        assert not store.outdated() and store.columns("run_batch_ranges")


def test_ingest_keeps_batch_ranges_equal_to_the_view(tmp_path: Path) -> None:
    """Ingest folds each file's new lines into run_batch_ranges_cache: after a new, an
    appended, a moved, a truncated and a rewritten file it equals the view computed from
    every line."""
    lines = (SAMPLES / "mission" / "baseline-untuned" / "server.log").read_text() \
        .splitlines(keepends=True)
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "server.log"
    db = tmp_path / "k.duckdb"

    def ingest(text: str, replace: bool = False) -> str:
        log.write_text(text)
        (res,) = ingest_paths([logs], db, replace=replace).files
        kept = query(db, "SELECT * FROM logpipe_internal.run_batch_ranges_cache ORDER BY run_id")
        assert kept == query(db, "SELECT * FROM run_batch_ranges ORDER BY run_id")
        assert kept
        assert sum(k[1] for k in kept) == query(db, "SELECT count(*) FROM batches")[0][0]
        return res.status

    assert ingest("".join(lines[:70])) == "new"
    assert ingest("".join(lines)) == "appended"
    moved = logs / "renamed.log"
    log.rename(moved)
    log = moved
    assert ingest("".join(lines) + lines[-3]) == "moved"
    shorter = "".join(lines[:40]).replace("gen throughput (token/s): ",
                                          "gen throughput (token/s): 1")
    assert ingest(shorter) == "truncated"  # kept, and read on as a new launch
    edited = shorter.replace("token usage: 0.00", "token usage: 0.01")  # same size
    assert ingest(edited) == "changed"  # rows kept as they were until --replace
    assert ingest(edited, replace=True) == "rewritten"


def test_check_reads_every_line_when_the_kept_ranges_drifted(sample_db: Path,
                                                           tmp_path: Path) -> None:
    import duckdb

    from logpipe import summaries
    from logpipe.store import Store

    db = tmp_path / "d.duckdb"
    shutil.copy(sample_db, db)
    check(db, "--suite", "data_quality")
    con = duckdb.connect(str(db))  # by hand: a run's usage out of range, one line fewer
    (run_id, line_no), = con.execute(
        "SELECT run_id, max(line_no) FROM batches WHERE token_usage IS NOT NULL "
        "GROUP BY run_id ORDER BY run_id LIMIT 1").fetchall()
    con.execute("UPDATE logpipe_internal.batches SET token_usage = 1.5 WHERE run_id = ? "
                "AND line_no = (SELECT min(line_no) FROM batches WHERE run_id = ? "
                "AND token_usage IS NOT "
                "NULL)", [run_id, run_id])
    con.execute("DELETE FROM logpipe_internal.batches WHERE run_id = ? AND line_no = ?",
                [run_id, line_no])
    con.close()
    with Store.open(db, read_only=True) as store:
        assert summaries.ranges_drifted(store) == [run_id]
    code, out = check(db, "--suite", "data_quality")
    (row,) = failing(out, "token usage within [0, 1]")
    assert row["max_token_usage"] == 1.5
    with Store.open(db, read_only=True) as store:  # read-only: nothing repaired
        assert summaries.ranges_drifted(store) == [run_id]
    code, out = check(db, "--suite", "data_quality", "--update-cache")
    (row,) = failing(out, "token usage within [0, 1]")
    assert row["max_token_usage"] == 1.5
    with Store.open(db, read_only=True) as store:  # repaired when asked
        assert summaries.ranges_drifted(store) == []
        assert store.all(
            "SELECT * FROM logpipe_internal.run_batch_ranges_cache ORDER BY run_id") == \
            store.all("SELECT * FROM run_batch_ranges ORDER BY run_id")


def test_check_and_report_never_write_the_database(tmp_path: Path) -> None:
    """Read commands open the database read-only: on a read-only file they work, and the
    file's bytes are the same afterwards (stale statistics are computed for the check
    alone)."""
    import hashlib
    import os
    import stat

    import duckdb

    db = tmp_path / "ro.duckdb"
    assert not ingest_paths([SAMPLES / "real-cpu", SAMPLES / "mission", SAMPLES / "unpaired"],
                            db).failed
    con = duckdb.connect(str(db))  # statistics gone stale (as by an older logpipe)
    con.execute("DELETE FROM logpipe_internal.run_summary_cache WHERE run_id IN "
                "(SELECT run_id FROM runs WHERE name LIKE 'real-cpu-%')")
    con.close()
    os.chmod(db, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    code, out = check(db)
    assert code == 1 and out["results"]
    report = runner.invoke(app, ["report", "--db", str(db), "-o", str(tmp_path / "r.html")])
    assert report.exit_code in (0, 1), report.output
    compare = runner.invoke(app, ["compare", "--db", str(db), "--run", "baseline-untuned",
                                  "--run", "eagle3-untuned"])
    assert compare.exit_code == 0, compare.output
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not (tmp_path / "ro.duckdb.wal").exists()


def test_a_check_over_zero_rows_is_a_skip(tmp_path: Path) -> None:
    """Server logs without any benchmark: the benchmark check tested nothing."""
    db = tmp_path / "w.duckdb"
    ingest_paths([SAMPLES / "wrappers"], db)
    _, out = check(db, "--suite", "data_quality")
    (bench,) = [r for r in out["results"] if r["check"].startswith("benchmark records")]
    assert (bench["status"], bench["evaluated_rows"]) == ("SKIP", 0)
    assert all(r["evaluated_rows"] > 0 for r in out["results"] if r["status"] == "PASS")
