"""`logpipe compare`: the mission's comparisons, exit codes, and the statistics."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from logpipe.cli import app
from logpipe.engines.sglang.era import accept_rate_definition, span
from logpipe.ingest import ingest_paths
from logpipe.stats import compare_samples, min_p_two_sided, needed_per_run
from tests.conftest import load_generator, query

runner = CliRunner()


def cmp(db: Path, *args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["compare", *args, "--db", str(db), "--format", "json"])
    assert result.exit_code in (0, 1, 3, 4), result.output
    return result.exit_code, json.loads(result.stdout)


def test_eagle3_vs_same_environment_baseline(sample_db: Path) -> None:
    code, out = cmp(sample_db, "--run", "baseline-untuned", "--run", "eagle3-untuned")
    assert code == 0
    c = out["comparisons"][0]
    assert c["verdict"] == "improvement"
    decode = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    assert decode["stratum_running_req"] == 1
    assert decode["median"] == [62.9, 75.9]
    assert decode["verdict"] == "improvement"
    assert decode["ci95"][0] > 1.03 and decode["p_value"] < 0.05
    spec = c["speculation"]
    assert round(spec["speedup"] * 100, 1) == 20.7
    assert round(spec["break_even_accept_len"], 2) == 1.74
    assert spec["accept_len"] == pytest.approx(2.1)
    assert spec["same_environment"] is True
    assert spec["accept_rate_definition"] == "(accept_len − 1) / (num_draft_tokens − 1)"
    text = runner.invoke(app, ["compare", "--run", "baseline-untuned", "--run",
                               "eagle3-untuned", "--db", str(sample_db)]).stdout
    assert "speedup +20.7%" in text and "break-even accept length 1.74" in text


def test_eagle3_vs_tuned_baseline_is_refused(sample_db: Path) -> None:
    code, out = cmp(sample_db, "--run", "baseline-tuned", "--run", "eagle3-untuned")
    assert code == 3
    c = out["comparisons"][0]
    assert c["metrics"] == []
    identity = [d["key"] for d in c["environment"]["differences"] if d["tier"] == "identity"]
    assert identity == ["NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_PROTO"]
    # allowing exactly those keys gives a (stamped) verdict; allowing fewer does not
    code, out = cmp(sample_db, "--run", "baseline-tuned", "--run", "eagle3-untuned",
                    "--allow-env-diff", "NCCL_ALGO,NCCL_PROTO,NCCL_P2P_LEVEL")
    # one launch each and no launch noise measured: the drop is reported, not a regression
    assert code == 4 and out["comparisons"][0]["verdict"] == "unreplicated regression"
    assert out["comparisons"][0]["environment"]["allowed_keys"] == identity
    assert out["comparisons"][0]["speculation"]["same_environment"] is False
    code, _ = cmp(sample_db, "--run", "baseline-tuned", "--run", "eagle3-untuned",
                  "--allow-env-diff", "NCCL_ALGO")
    assert code == 3


def test_run_against_itself_is_an_error(sample_db: Path) -> None:
    for args in (["--run", "eagle3-untuned", "--run", "eagle3-untuned"],
                 ["--run", "baseline-untuned,eagle3-untuned", "--run", "eagle3-untuned"]):
        result = runner.invoke(app, ["compare", *args, "--db", str(sample_db)])
        assert result.exit_code == 2, result.output
        assert "eagle3-untuned" in result.output and "given twice" in result.output


def test_the_mission_keeps_its_verdict_and_is_labelled_unreplicated(sample_db: Path) -> None:
    code, out = cmp(sample_db, "--run", "baseline-untuned", "--run", "eagle3-untuned")
    c = out["comparisons"][0]
    assert code == 0 and c["verdict"] == "improvement"
    assert round(c["speculation"]["speedup"] * 100, 1) == 20.7
    assert c["replication"].startswith("unreplicated: launch noise unknown")
    assert "logpipe ab --rounds 3" in c["replication"]
    decode = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    assert decode["launch_level"]["method"] == "unreplicated"
    text = runner.invoke(app, ["compare", "--run", "baseline-untuned", "--run",
                               "eagle3-untuned", "--db", str(sample_db)]).output
    assert "IMPROVEMENT [unreplicated: launch noise unknown] (exit 0)" in text


def test_unknown_environment_is_said(sample_db: Path) -> None:
    code, out = cmp(sample_db, "--run", "plain", "--run", "crlf")
    assert code == 3
    assert "environment unknown for plain, crlf" in out["comparisons"][0]["notes"][0]
    code, out = cmp(sample_db, "--run", "plain", "--run", "crlf", "--allow-unknown-env")
    assert code == 0  # the same lines in two wrappers
    c = out["comparisons"][0]
    assert c["verdict"] == "no significant change"
    assert c["notes"] == ["environment unknown for plain, crlf: compared anyway "
                          "(--allow-unknown-env)"]


def test_unknown_run_and_ambiguous_prefix(sample_db: Path) -> None:
    result = runner.invoke(app, ["compare", "--run", "nope", "--run", "plain", "--db",
                                 str(sample_db)])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: no run named 'nope'")
    one = runner.invoke(app, ["compare", "--run", "plain", "--db", str(sample_db)])
    assert one.exit_code == 3  # one run: paired with a baseline, and plain is not speculative
    assert "plain is not a speculative run" in one.stdout
    ambiguous = runner.invoke(app, ["compare", "--run", "baseline-untuned", "--run",
                                    "eagle3-steps", "--db", str(sample_db)])
    assert ambiguous.exit_code == 2
    assert ambiguous.stderr.startswith("Error: run reference 'eagle3-steps' is ambiguous: "
                                       "6 runs match")
    assert "Hint: candidates: eagle3-steps1 (" in ambiguous.stderr
    unique = runner.invoke(app, ["compare", "--run", "baseline-untuned", "--run",
                                 "eagle3-unt", "--db", str(sample_db)])
    assert unique.exit_code == 0


def _write_run(root: Path, name: str, lines: list[str], manifest: dict) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "server.log").write_text("\n".join(lines) + "\n")
    (folder / "env.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def generated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gen = load_generator()
    root = tmp_path_factory.mktemp("gen")
    manifest = gen.mission_manifest(False, False, "2026-05-04T08:00:00+00:00")
    start = datetime(2026, 5, 4, 9, 0, 0)
    _write_run(root, "base", gen.mission_log(62.9, 0.7, seed=11, start=start), manifest)
    # a code change no setting shows, declared by the user's tag: not an A/A pair
    changed = {**manifest, "tags": {"build": "candidate"}}
    _write_run(root, "slower5", gen.mission_log(62.9 * 0.95, 0.7, seed=12, start=start),
               changed)
    _write_run(root, "noise", gen.mission_log(62.9, 0.7, seed=13, start=start),
               {**manifest, "tags": {"build": "another"}})

    tiny = gen.Log(gen.MISSION_ERA, start, gen.random.Random(5))
    gen.startup(tiny, gen.base_args(gen.MISSION_MODEL, tp_size=8, ep_size=8,
                                    mem_fraction_static=0.85, cuda_graph_max_bs=32),
                "Qwen3MoeForCausalLM", tp=8)
    gen.workload(tiny, requests=1, lines_per_req=3, tps=62.9, noise=0.7)
    tiny2 = gen.Log(gen.MISSION_ERA, start, gen.random.Random(6))
    gen.startup(tiny2, gen.base_args(gen.MISSION_MODEL, tp_size=8, ep_size=8,
                                     mem_fraction_static=0.85, cuda_graph_max_bs=32),
                "Qwen3MoeForCausalLM", tp=8)
    gen.workload(tiny2, requests=1, lines_per_req=3, tps=50.0, noise=0.7)
    profiled = gen.mission_log(62.9, 0.7, seed=14, start=start)
    mid = len(profiled) // 2
    profiled.insert(mid, "[2026-05-04 09:01:00 TP0 EP0] Profiling starts. Traces will be saved "
                         "to: /tmp/prof (with profile id: 1764000000.0)")
    profiled.insert(mid + 30, "[2026-05-04 09:01:30 TP0 EP0] Stop profiling...")
    _write_run(root, "profiled", profiled, manifest)
    # a profiler started and never stopped in the log: the whole launch is profiled
    open_ended = gen.mission_log(62.9, 0.7, seed=15, start=start)
    open_ended.insert(len(open_ended) // 2, "[2026-05-04 09:01:00 TP0 EP0] Profiling starts. "
                      "Traces will be saved to: /tmp/prof (with profile id: 1764000001.0)")
    _write_run(root, "profiled-open", open_ended, manifest)
    _write_run(root, "tiny-a", tiny.lines, {**manifest, "tags": {"build": "tiny-a"}})
    _write_run(root, "tiny-b", tiny2.lines, {**manifest, "tags": {"build": "tiny-b"}})
    db = root / "g.duckdb"
    assert not ingest_paths([root], db).failed
    return db


def test_generated_five_percent_regression(generated_db: Path) -> None:
    code, out = cmp(generated_db, "--run", "base", "--run", "slower5")
    assert code == 1
    decode = next(m for m in out["comparisons"][0]["metrics"]
                  if m["metric"] == "decode throughput")
    assert decode["verdict"] == "regression"
    assert decode["ratio"] == pytest.approx(0.95, abs=0.003)


def test_same_configuration_is_an_aa_pair_never_a_regression(tmp_path: Path) -> None:
    """The same 5% drop between two launches of one configuration (nothing but the launch
    differs) is launch noise: exit 0, said so, and the pair feeds launch_noise."""
    gen = load_generator()
    manifest = gen.mission_manifest(False, False, "2026-05-04T08:00:00+00:00")
    start = datetime(2026, 5, 4, 9, 0, 0)
    _write_run(tmp_path, "base", gen.mission_log(62.9, 0.7, seed=11, start=start), manifest)
    _write_run(tmp_path, "repeat", gen.mission_log(62.9 * 0.95, 0.7, seed=15, start=start),
               manifest)
    generated_db = tmp_path / "aa.duckdb"
    assert not ingest_paths([tmp_path], generated_db).failed
    code, out = cmp(generated_db, "--run", "base", "--run", "repeat")
    c = out["comparisons"][0]
    assert code == 0 and c["verdict"] == "same configuration" and c["same_configuration"]
    assert c["notes"][0].startswith("same configuration: the difference, -5.")
    assert "launch-to-launch variation" in c["notes"][0]
    decode = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    assert decode["verdict"] == "launch noise"
    assert decode["within_launch"]["verdict"] == "regression"  # what the lines alone say
    rows = query(generated_db, "SELECT launches, pairs, round(spread, 2) FROM launch_noise")
    assert rows == [(2, 1, 0.04)]


def test_same_distribution_is_no_change(generated_db: Path) -> None:
    code, out = cmp(generated_db, "--run", "base", "--run", "noise")
    assert code == 0
    assert out["comparisons"][0]["verdict"] == "no significant change"


def test_two_steady_samples_each_is_insufficient(generated_db: Path) -> None:
    code, out = cmp(generated_db, "--run", "tiny-a", "--run", "tiny-b")
    assert code == 4
    decode = next(m for m in out["comparisons"][0]["metrics"]
                  if m["metric"] == "decode throughput")
    assert decode["n"] == [2, 2]
    assert decode["within_launch"]["detail"].startswith(
        "insufficient data: need ≥ 4 samples per run")
    assert decode["detail"].startswith("no launch value in either arm (a launch needs ≥ 3")


def test_profiled_run_is_not_compared_with_unprofiled(generated_db: Path) -> None:
    code, out = cmp(generated_db, "--run", "base", "--run", "profiled-open")
    assert code == 3
    c = out["comparisons"][0]
    assert c["profiled"] == {"base": False, "profiled-open": True}
    assert "profiled-open ran with a profiler" in c["notes"][0]
    code, out = cmp(generated_db, "--run", "base", "--run", "profiled-open",
                    "--allow-profiled")
    assert code == 0
    excluded = out["comparisons"][0]["excluded_lines"]["profiled-open"]
    assert excluded["inside a profiled interval"] > 0


def test_a_bounded_profile_window_profiles_its_lines_not_the_launch(
        generated_db: Path) -> None:
    """`/start_profile` with num_steps: the log bounds the window (Profiling starts …
    Stop profiling), so only the lines inside it leave the steady state."""
    code, out = cmp(generated_db, "--run", "base", "--run", "profiled")
    assert code == 0, out
    c = out["comparisons"][0]
    assert c["profiled"] == {"base": False, "profiled": False}
    excluded = c["excluded_lines"]["profiled"]
    assert 0 < excluded["inside a profiled interval"] <= 29  # the lines between the two


def test_configured_warmup_drops_lines(generated_db: Path) -> None:
    _, plain = cmp(generated_db, "--run", "base", "--run", "noise")
    _, warm = cmp(generated_db, "--run", "base", "--run", "noise", "--warmup-lines", "10")
    n = next(m["n"] for m in plain["comparisons"][0]["metrics"]
             if m["metric"] == "decode throughput")
    n_warm = next(m["n"] for m in warm["comparisons"][0]["metrics"]
                  if m["metric"] == "decode throughput")
    assert n_warm == [n[0] - 10, n[1] - 10]


def test_several_candidates_report_the_most_severe_exit(sample_db: Path) -> None:
    code, out = cmp(sample_db, "--run", "baseline-untuned", "--run", "eagle3-untuned",
                    "--run", "baseline-tuned")
    assert code == 3
    assert [c["exit_code"] for c in out["comparisons"]] == [0, 3]


def test_markdown_output(sample_db: Path) -> None:
    result = runner.invoke(app, ["compare", "--run", "baseline-untuned", "--run",
                                 "eagle3-untuned", "--db", str(sample_db), "--format",
                                 "markdown"])
    assert result.stdout.startswith(
        "### eagle3-untuned vs baseline-untuned: **improvement** [unreplicated: launch noise "
        "unknown] (exit 0)")
    assert "| decode throughput @ 1 running | 1 / 1 | 1.207 | – | – | improvement | " \
        "88 / 88 | 62.90 → 75.90 | 2.2e-30 |" in result.stdout


# ------------------------------------------------------------------- the statistics

def test_attainability() -> None:
    assert min_p_two_sided(3, 3) == pytest.approx(0.1)
    assert min_p_two_sided(4, 4) == pytest.approx(2 / 70)
    # large samples (a long run's decode lines) must not overflow a float
    assert min_p_two_sided(40, 35) == pytest.approx(2 / math.comb(75, 40))
    assert min_p_two_sided(60_000, 60_000) == 0.0
    assert needed_per_run(0.05) == 4
    assert needed_per_run(0.01) == 5


def test_mann_whitney_finds_a_real_shift() -> None:
    rng = np.random.default_rng(1)
    a = rng.normal(100, 2, 40)
    b = rng.normal(92, 2, 40)
    t = compare_samples(a, b, higher_is_better=True)
    assert t.verdict == "regression"
    assert t.p_value is not None and t.p_value < 1e-6
    assert t.ci_high is not None and t.ci_high < 0.97


@pytest.mark.parametrize("seed", range(5))
def test_pure_noise_is_no_change(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    t = compare_samples(rng.normal(100, 5, 30), rng.normal(100, 5, 30),
                        higher_is_better=True)
    assert t.verdict == "no significant change"


def test_significant_but_small_is_no_change() -> None:
    rng = np.random.default_rng(7)
    t = compare_samples(rng.normal(100, 0.2, 200), rng.normal(101, 0.2, 200),
                        higher_is_better=True)
    assert t.p_value is not None and t.p_value < 1e-10
    assert t.verdict == "no significant change"  # +1% is inside δ = 3%


def test_latency_direction() -> None:
    rng = np.random.default_rng(3)
    t = compare_samples(rng.normal(10, 0.3, 50), rng.normal(12, 0.3, 50),
                        higher_is_better=False)
    assert t.verdict == "regression"


def test_bootstrap_is_deterministic() -> None:
    rng = np.random.default_rng(9)
    a, b = rng.normal(50, 3, 25), rng.normal(56, 3, 25)
    first = compare_samples(a, b, higher_is_better=True)
    second = compare_samples(a, b, higher_is_better=True)
    assert (first.ci_low, first.ci_high) == (second.ci_low, second.ci_high)


def test_accept_rate_definitions() -> None:
    assert accept_rate_definition("0.5.6", None) == "accepted / (steps + 1)"
    assert accept_rate_definition("0.5.10", None) == "accepted / num_draft_tokens"
    assert accept_rate_definition("0.5.23", None).startswith("(accept_len − 1)")
    assert accept_rate_definition(None, span("0.5.11", "0.5.12")).startswith("(accept_len")
    assert accept_rate_definition(None, span("0.5.9", "0.5.11")).startswith("ambiguous")


def test_bootstrap_of_long_runs_is_m_out_of_n_and_agrees_with_the_full_one() -> None:
    from logpipe.stats import bootstrap_ratio_ci

    rng = np.random.default_rng(7)
    a = rng.normal(100.0, 3.0, 8000)
    b = rng.normal(105.0, 3.0, 8000)
    full = bootstrap_ratio_ci(a, b, resamples=2000, max_n=10_000)
    fast = bootstrap_ratio_ci(a, b, resamples=2000, max_n=1000)
    assert full[0] < 1.05 < full[1] and fast[0] < 1.05 < fast[1]
    width_full, width_fast = full[1] - full[0], fast[1] - fast[0]
    assert abs(width_fast - width_full) < 0.25 * width_full
    assert abs((fast[0] + fast[1]) - (full[0] + full[1])) < 0.25 * width_full


def test_row_medians_are_numpys_medians_exactly() -> None:
    """The bootstrap's resampled medians by sorting rows are ``np.median``'s, bit for bit:
    odd and even rows, ties (throughputs printed to 0-2 decimals), one column, infinities,
    rows holding NaN, integers."""
    from logpipe.stats import row_medians

    rng = np.random.default_rng(17)
    for n in (1, 2, 3, 8, 13, 14, 99, 100, 1000):
        for places in (0, 1, 2, 9):
            x = np.round(rng.gamma(9.0, 6.0, (300, n)), places)
            np.testing.assert_array_equal(row_medians(x), np.median(x, axis=1))
    x = rng.normal(50, 5, (200, 10))
    x[3, 4], x[5, :6], x[7, :] = np.inf, np.inf, -np.inf
    np.testing.assert_array_equal(row_medians(x), np.median(x, axis=1))
    x[9, 2] = np.nan
    np.testing.assert_array_equal(row_medians(x), np.median(x, axis=1))
    ints = rng.integers(0, 40, (100, 12))
    np.testing.assert_array_equal(row_medians(ints), np.median(ints, axis=1))


def test_bootstrap_of_short_runs_resamples_draw_by_draw_as_before() -> None:
    """Short runs (the path of every launch under 1,000 lines) keep the CI the median of
    every resample gives: the same draws, the same medians, the same percentiles."""
    from logpipe.stats import RESAMPLES, SEED, bootstrap_ratio_ci

    def by_median(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
        rng = np.random.default_rng(SEED)
        ratios = np.empty(RESAMPLES)
        done = 0
        batch = max(1, min(RESAMPLES, 4_000_000 // max(len(a), len(b), 1)))
        while done < RESAMPLES:
            k = min(batch, RESAMPLES - done)
            ma = np.median(a[rng.integers(0, len(a), (k, len(a)))], axis=1)
            mb = np.median(b[rng.integers(0, len(b), (k, len(b)))], axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios[done:done + k] = mb / ma
            done += k
        tail = (1 - 0.95) / 2 * 100
        lo, hi = np.percentile(ratios[np.isfinite(ratios)], [tail, 100 - tail])
        return float(lo), float(hi)

    rng = np.random.default_rng(23)
    for n, m, places in ((8, 9, 2), (14, 14, 0), (133, 99, 1), (600, 1000, 2)):
        a = np.round(rng.normal(100, 8, n), places)
        b = np.round(rng.normal(104, 8, m), places)
        assert bootstrap_ratio_ci(a, b) == by_median(a, b)
    # a long run whose median is not positive is resampled draw by draw too
    a, b = rng.normal(-1, 8, 1500), rng.normal(3, 8, 1200)
    assert bootstrap_ratio_ci(a, b) == by_median(a, b)


def test_mann_whitney_of_long_runs_from_distinct_values_is_scipys() -> None:
    """A long run's Mann–Whitney p comes from its distinct values and their counts: scipy's
    normal approximation with tie and continuity corrections, to rounding, on samples with
    many ties (throughputs printed to 0-2 decimals), sorted or not, shifted or not."""
    from scipy.stats import mannwhitneyu

    from logpipe.stats import mannwhitney_p

    rng = np.random.default_rng(11)
    for trial in range(60):
        n1, n2 = int(rng.integers(9, 20_000)), int(rng.integers(1001, 20_000))
        places = trial % 3
        a = np.round(rng.normal(50, 5, n1), places)
        b = np.round(rng.normal(50 + rng.normal(0, 0.3), 5, n2), places)
        if trial % 2:
            a = np.sort(a)
        want = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
        assert mannwhitney_p(a, b) == pytest.approx(want, rel=1e-9, abs=1e-300)
    same = np.full(5000, 7.0)
    assert mannwhitney_p(same, same) == 1.0


def test_mann_whitney_of_short_runs_is_scipys_bit_for_bit() -> None:
    """Runs of 9 to 1,000 samples take scipy's normal approximation computed here (no
    ``scipy.stats`` import): the same p, bit for bit, with ties (0-2 decimals, a few
    integers), equal samples, shifted ones; smaller runs are scipy's own exact test."""
    from scipy.stats import mannwhitneyu

    from logpipe.stats import mannwhitney_p

    rng = np.random.default_rng(29)
    for trial in range(400):
        n1, n2 = int(rng.integers(9, 1001)), int(rng.integers(9, 1001))
        if trial % 5 == 0:
            a, b = (rng.integers(0, 4, n1).astype(float), rng.integers(0, 4, n2).astype(float))
        else:
            places = trial % 3
            a = np.round(rng.normal(50, 5, n1), places)
            b = np.round(rng.normal(50 + rng.normal(0, 1), 5, n2), places)
        want = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
        assert mannwhitney_p(a, b) == want, (n1, n2, trial)
    for a, b in ((np.full(40, 7.0), np.full(30, 7.0)), (np.arange(20.0), np.arange(20.0) + 100),
                 (np.arange(5.0), np.arange(9.0) + 2)):
        assert mannwhitney_p(a, b) == float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def test_launch_tests_quantiles_are_scipy_stats_ones() -> None:
    """The launch-level tests take Student's t and F through ``scipy.special``: the same
    values as ``scipy.stats``' distributions give, bit for bit."""
    from scipy import stats as sps
    from scipy.special import fdtri, stdtr, stdtrit

    rng = np.random.default_rng(31)
    for df in [1, 1.5, 2, 3, 7, 12, 30, 250, np.inf, *rng.uniform(1, 300, 20)]:
        for q in [0.5, 0.9, 0.95, 0.975, 0.995, *rng.uniform(0.01, 0.999, 10)]:
            assert float(stdtrit(df, q)) == float(sps.t.ppf(q, df))
            x = float(rng.exponential(2))
            assert float(2 * stdtr(df, -x)) == float(2 * sps.t.sf(x, df))
            for dfn in (1, 2, 4, 9):  # (NaN for both at an infinite df)
                np.testing.assert_equal(float(fdtri(dfn, df, q)), float(sps.f.ppf(q, dfn, df)))


def test_median_spread_from_distinct_values_draws_what_one_tail_per_sample_draws() -> None:
    """The long-run bootstrap evaluates the binomial tail once per distinct value instead
    of once per sample: the medians drawn are exactly those of the tail per sample."""
    import math

    from scipy.stats import binom

    from logpipe.stats import _log_median_spread

    def per_sample(x: np.ndarray, med: float, seed: int) -> np.ndarray:
        n = len(x)
        m = n if n % 2 else n - 1
        k = (m + 1) // 2
        xs = np.sort(x)
        cdf = binom.sf(k - 1, m, np.arange(1, n + 1) / n)
        rng = np.random.default_rng(seed)
        idx = np.minimum(np.searchsorted(cdf, rng.random(2000), side="right"), n - 1)
        return (np.log(xs[idx]) - math.log(med)) * math.sqrt(m / n)

    rng = np.random.default_rng(5)
    for n, places in ((1500, 0), (4001, 1), (9000, 2), (3000, 6)):
        x = np.round(rng.gamma(9.0, 6.0, n), places) + 1
        med = float(np.median(x))
        got = _log_median_spread(x, med, 2000, np.random.default_rng(n), 1000)
        assert got is not None
        np.testing.assert_array_equal(got, per_sample(x, med, n))


def test_energy_split_is_the_e_divisive_statistic_of_every_split() -> None:
    """The O(n²) form picks the split the statistic's definition picks, which is
    k(n−k)/n · scipy's energy distance² between the two sides."""
    from scipy.stats import energy_distance

    from logpipe.changepoints import _energy_split

    rng = np.random.default_rng(3)
    for n in (12, 40, 120):
        for _ in range(10):
            x = np.concatenate([rng.normal(0, 1, n // 3), rng.normal(rng.uniform(0, 3), 1,
                                                                     n - n // 3)])
            stat = [k * (n - k) / n * energy_distance(x[:k], x[k:]) ** 2
                    for k in range(3, n - 3 + 1)]
            assert _energy_split(x, 3) == 3 + int(np.argmax(stat))


def test_a_refusal_never_suggests_allowing_the_model(sample_db: Path) -> None:
    code, out = cmp(sample_db, "--run", "baseline-untuned", "--run",
                    "qwen3-30b-baseline-tuned")
    assert code == 3
    note = out["comparisons"][0]["notes"][-1]
    assert "These are different experiments: they differ in arg.model_path" in note
    assert "--allow-env-diff" not in note
    code, out = cmp(sample_db, "--run", "baseline-untuned", "--run", "baseline-tuned")
    assert code == 3  # NCCL variables only: one experiment in two environments
    assert out["comparisons"][0]["notes"][-1].endswith(
        "Pass --allow-env-diff NCCL_ALGO,NCCL_P2P_LEVEL,NCCL_PROTO to compare anyway.")


def test_what_no_manifest_states_is_said(tmp_path: Path) -> None:
    """Two manifests with no packages and no GPU match, but only as far as they go."""
    gen = load_generator()
    manifest = gen.mission_manifest(False, False, "2026-05-04T08:00:00+00:00")
    bare = {k: v for k, v in manifest.items() if k not in ("packages", "gpu")}
    start = datetime(2026, 5, 4, 9, 0, 0)
    _write_run(tmp_path, "a", gen.mission_log(62.9, 0.7, seed=1, start=start), bare)
    _write_run(tmp_path, "b", gen.mission_log(62.9, 0.7, seed=2, start=start),
               {**bare, "tags": {"build": "b"}})
    db = tmp_path / "bare.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    text = runner.invoke(app, ["compare", "--run", "a", "--run", "b", "--db", str(db)]).stdout
    assert ("Environment: comparable as far as known (gpu.model, gpu.count, gpu.driver, "
            "cuda.version, pkg.sglang, pkg.torch unknown in both)") in text
    diff = runner.invoke(app, ["env", "diff", "--run", "a", "--run", "b", "--db", str(db)])
    assert "comparable as far as known" in diff.stdout


def _base_and_patched(root: Path, factor: float, **patched: object) -> None:
    """Two launches of the mission's command, the second tagged build=patched (and
    ``patched``'s manifest keys), its decode throughput ``factor`` times the first's."""
    gen = load_generator()
    manifest = gen.mission_manifest(False, False, "2026-05-04T08:00:00+00:00")
    start = datetime(2026, 5, 4, 9, 0, 0)
    _write_run(root, "base", gen.mission_log(62.9, 0.7, seed=11, start=start), manifest)
    _write_run(root, "patched", gen.mission_log(62.9 * factor, 0.7, seed=15, start=start),
               {**manifest, "tags": {"build": "patched"}, **patched})


def test_a_tagged_launch_of_one_command_is_unreplicated_and_shows_its_tag(tmp_path: Path
                                                                          ) -> None:
    """Two launches of one command, the second tagged (`--tag build=patched`): 5% slower by
    its lines, but one launch each with no launch noise measured is not evidence of a
    regression: exit 4 with its size, and the tag is the treatment shown first."""
    _base_and_patched(tmp_path, 0.95)
    db = tmp_path / "tag.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    code, out = cmp(db, "--run", "base", "--run", "patched")
    c = out["comparisons"][0]
    assert code == 4 and c["verdict"] == "unreplicated regression"
    assert c["notes"][0].startswith("unreplicated: -5.")
    assert any(t.startswith("tag.build") and "patched" in t for t in c["treatment"])
    text = runner.invoke(app, ["compare", "--run", "base", "--run", "patched", "--db",
                               str(db)]).stdout
    assert text.splitlines()[1].startswith("Treatment: ") and "tag.build" in text.splitlines()[1]
    assert text.splitlines()[2].startswith("Deciding metric: server decode throughput")


def _bench(folder: Path, tps: float, completed: int = 100, ttft: float = 50.0) -> None:
    record = {"backend": "sglang", "dataset_name": "random-ids", "request_rate": float("inf"),
              "max_concurrency": 1, "completed": completed, "duration": 100.0,
              "total_output_tokens": int(tps * 100), "output_throughput": tps,
              "request_throughput": completed / 100.0, "mean_ttft_ms": ttft,
              "median_ttft_ms": ttft, "p99_ttft_ms": ttft * 2, "median_tpot_ms": 1000 / tps,
              "median_itl_ms": 1000 / tps, "median_e2e_latency_ms": 1000.0}
    (folder / "bench_serving.jsonl").write_text(json.dumps(record) + "\n")


def test_the_client_decides_and_a_disagreement_is_said(tmp_path: Path) -> None:
    """The log says +1% while the client saw 0.6x: the client's output throughput decides
    by default (every launch has a benchmark of one workload), and one line says the two
    families disagree, naming the cause that applies (fewer requests completed)."""
    _base_and_patched(tmp_path, 1.01)
    _bench(tmp_path / "base", 100.0)
    _bench(tmp_path / "patched", 60.0, completed=60)
    db = tmp_path / "d.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    code, out = cmp(db, "--run", "base", "--run", "patched")
    c = out["comparisons"][0]
    assert c["deciding_metric"]["metric"] == "output_throughput"
    assert code == 4 and c["verdict"] == "unreplicated regression"  # one launch each
    assert c["disagreement"].startswith("server and client disagree: the server log says +")
    assert "0.60x output throughput" in c["disagreement"]
    assert "different completed requests: 100 against 60" in c["disagreement"]
    client = {m["metric"]: m for m in c["metrics"] if m["family"] == "client"}
    assert client["output throughput"]["secondary"] is False
    assert client["median TTFT"]["secondary"] is True
    server = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    assert server["secondary"] is True
    # declared, the server log decides instead, and the client stays beside it
    code, out = cmp(db, "--run", "base", "--run", "patched", "--primary", "decode_throughput")
    c = out["comparisons"][0]
    assert c["deciding_metric"] == {"metric": "decode_throughput", "why": "declared"}
    assert c["verdict"] != "unreplicated regression" and code == 0
    assert c["disagreement"] is not None
    bad = runner.invoke(app, ["compare", "--run", "base", "--run", "patched", "--db", str(db),
                              "--primary", "tokens"])
    assert bad.exit_code == 2 and "unknown deciding metric 'tokens'" in bad.output


def test_a_launch_that_profiled_during_its_bench_loses_its_client_values(tmp_path: Path
                                                                         ) -> None:
    _base_and_patched(tmp_path, 1.0, launch={"profile": {"steps": 5, "status": "done"}})
    _bench(tmp_path / "base", 100.0)
    _bench(tmp_path / "patched", 40.0)  # the profiler's stall is in the client's numbers
    db = tmp_path / "p.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    code, out = cmp(db, "--run", "base", "--run", "patched")
    c = out["comparisons"][0]
    assert not any(m["family"] == "client" for m in c["metrics"])
    assert c["deciding_metric"]["metric"] == "decode_throughput"
    assert any(n.startswith("client numbers of patched left out of the verdicts: a profiler "
                            "ran during their bench") for n in c["notes"])


def test_the_baseline_search_screens_by_identity_to_the_same_answer(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A speculative run's baseline search leaves unloaded the candidates whose identity
    differs (they can never pass): the baseline it chooses, its verdict and its nearest
    misses are those of loading and judging every candidate, and it loads fewer.  Runs:
    one that finds its baseline behind screened ones, one with nearest misses among many
    candidates, a profiled one, one whose nearest candidate matches."""
    import logpipe.analysis.compare as compare
    from logpipe.store import Store

    loaded: list[str] = []  # the candidates read beyond their environments' texts
    load_sides = compare.load_sides
    monkeypatch.setattr(compare, "load_sides",
                        lambda store, ids, *a: loaded.extend(ids) or load_sides(store, ids, *a))
    names = ("v0.5.5-2", "v0.11.0", "eagle3-profiled", "eagle3-steps1")

    def searched() -> tuple[list[tuple], int]:
        loaded.clear()
        with Store.open(sample_db, read_only=True) as store:
            out = []
            for name in names:
                c = compare.compare_with_baseline(store, name)
                out.append((c.verdict, c.reference, c.exit_code, c.notes,
                            [(m.name, m.stratum, m.test.ratio) for m in c.metrics]))
        return out, len(loaded)

    screened, fewer = searched()

    class _NoIdentity:  # every candidate loaded and judged, as before the screen
        def identity_keys(self) -> list[str]:
            return []

    monkeypatch.setattr(compare, "diff", lambda *a, **k: _NoIdentity())
    every, loads = searched()
    assert screened == every
    assert [v for v, *_ in screened] == ["improvement", "incomparable", "incomparable",
                                         "improvement"]
    assert sum("nearest misses" in n for n in screened[1][3]) == 1
    assert fewer + 20 < loads


def test_identity_differences_by_view_are_each_candidates_own(sample_db: Path,
                                                              tmp_path: Path) -> None:
    """The baseline search diffs one environment of each group of candidates alike in
    what decides their identity differences (``_IDENTITY_VIEW_SQL``): every candidate's
    count is the one its own environment gives.  On a quarter of the speculative runs of
    the samples against every other run, with and without an allowance; and on
    environments made to be alike in their identity values and to differ only in what
    else decides the count: an entry's source (a key one log states and the other does
    not is unknown there, not different), a key of the run's identity the candidate holds
    in another tier, whether the candidate's log listed NCCL's variables (one it does not
    list is unset); and candidates without entries in ``run_env``."""
    import shutil

    import logpipe.analysis.compare as compare
    from logpipe.analysis.load import load_run
    from logpipe.analysis.results import Options
    from logpipe.env import RunEnv, diff
    from logpipe.env.diff import NCCL_DEBUG_INFO
    from logpipe.env.model import Entry, render
    from logpipe.store import Store

    allow = (frozenset(), frozenset({"NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_LEVEL"}))

    def agree(store: Store, specs: list[str], others: list[str] | None = None
              ) -> tuple[int, int]:
        rows = store.all("SELECT run_id, name, env, env_complete FROM runs ORDER BY run_id")
        envs = {r: (name, RunEnv.from_json(env, bool(complete)))
                for r, name, env, complete in rows}
        checked = shared = 0
        for rid in specs:
            spec = load_run(store, rid)
            ids = [r for r in (others or envs) if r != rid]
            diffs = {r: set(diff(*envs[r], spec.name, spec.env).identity_keys()) for r in ids}
            for allowed in allow:
                got = compare._identity_differences(store, spec, ids,
                                                    Options(allow_env_diff=allowed))
                assert got == {r: len(diffs[r] - allowed) for r in ids}, spec.name
                checked += len(ids)
            shared += len(ids) - len({tuple(sorted(d)) for d in diffs.values()})
        return checked, shared

    with Store.open(sample_db, read_only=True) as store:
        specs = [r for (r,) in store.all("SELECT run_id FROM runs "
                                         "WHERE role = 'speculative' ORDER BY run_id")]
        checked, shared = agree(store, specs[::4])  # (every one: 13 s)
    assert checked > 1_500 and shared > 200

    db = tmp_path / "made.duckdb"
    shutil.copy(sample_db, db)
    with Store.open(db) as store:
        spec_id, *ids = [r for (r,) in store.all("SELECT run_id FROM runs ORDER BY run_id")][:7]
        spec = RunEnv.from_json(*store.one("SELECT env, env_complete FROM runs WHERE run_id = ?",
                                           [spec_id]))
        base = dict(spec.entries)
        base.pop(NCCL_DEBUG_INFO, None)
        made = {spec_id: {**base, "NCCL_MADE": Entry("1", "log", "identity"),
                          "made.identity": Entry("a", "manifest", "identity")}}
        made.update(zip(ids, (
            {**base, "made.only": Entry("x", "log", "identity")},  # unknown in the run
            {**base, "made.only": Entry("x", "manifest", "identity")},  # set in one only
            {**base, "made.identity": Entry("a", "manifest", "annotation")},  # another tier
            {**base},  # the run's identity key missing: differs
            {**base, NCCL_DEBUG_INFO: Entry(True, "log")},  # NCCL_MADE unset here
            {**base},
        ), strict=True))
        with store.transaction():
            store.set_run_envs([(r, render(RunEnv(e, True)), {"env_complete": True})
                                for r, e in made.items()])
        assert agree(store, [spec_id], ids)[0] == 2 * len(ids)
        # runs without rows in run_env (a database older than it): each diffed on its own
        store.con.execute("DELETE FROM run_env WHERE run_id IN (?, ?)", ids[:2])
        assert agree(store, [spec_id], ids)[0] == 2 * len(ids)
        store.con.execute("DELETE FROM run_env WHERE run_id = ?", [spec_id])
        assert agree(store, [spec_id], ids)[0] == 2 * len(ids)
