"""The launch is the unit (statistics.md §2b): campaigns with between-launch noise, the
statistics of arms of launches, and the checks that judge with the same rule."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from logpipe.analysis.launches import judge_launches, pool_noise, sign_flip_p
from logpipe.analysis.load import load_run, pool
from logpipe.checks import load_suites, run_checks
from logpipe.cli import app
from logpipe.ingest import ingest_paths
from logpipe.stats import compare_samples
from logpipe.store import Store
from tests.conftest import SAMPLES, load_generator

runner = CliRunner()

BASE = [100.0, 108.0, 92.0]
SAME = [106.0, 99.0, 110.0]
"""Differs from BASE only by launch noise: round ratios 1.06, 0.92, 1.20."""
FAST = [118.0, 127.0, 108.5]
"""Consistently ~18% faster than BASE, round by round."""


def _write(root: Path, name: str, tps: float, seed: int, tag: str, start: datetime) -> None:
    gen = load_generator()
    manifest = gen.mission_manifest(False, False, start.isoformat() + "+00:00")
    manifest["tags"] = {"build": tag}
    folder = root / name
    folder.mkdir(parents=True)
    # within a launch the lines vary by 0.7 tok/s: the launch-to-launch spread dominates
    (folder / "server.log").write_text(
        "\n".join(gen.mission_log(tps, 0.7, seed=seed, start=start)) + "\n")
    (folder / "env.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def campaign_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("campaign")
    t0 = datetime(2026, 6, 1, 9, 0, 0)
    for i, (b, s, f) in enumerate(zip(BASE, SAME, FAST, strict=True)):
        t = t0 + timedelta(hours=i)
        _write(root, f"base-r{i + 1}", b, 100 + i, "base", t)
        _write(root, f"same-r{i + 1}", s, 200 + i, "candidate", t + timedelta(minutes=10))
        _write(root, f"fast-r{i + 1}", f, 300 + i, "fast", t + timedelta(minutes=20))
    db = root / "c.duckdb"
    assert not ingest_paths([root], db).failed
    return db


def _compare(db: Path, *args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["compare", *args, "--db", str(db), "--format", "json"])
    assert result.exit_code in (0, 1, 3, 4), result.output
    return result.exit_code, json.loads(result.stdout)["comparisons"][0]


def _arm(name: str) -> str:
    return ",".join(f"{name}-r{i}" for i in (1, 2, 3))


def test_noise_between_launches_is_no_change(campaign_db: Path) -> None:
    code, c = _compare(campaign_db, "--run", _arm("base"), "--run", _arm("same"))
    assert code == 0 and c["verdict"] == "no significant change"
    decode = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    launch = decode["launch_level"]
    assert launch["method"].startswith("paired rounds")
    assert [round(r, 2) for r in launch["round_ratios"]] == [1.06, 0.92, 1.2]
    assert launch["ci95"][0] < 1 < launch["ci95"][1]
    # the lines of the three launches pooled would have called it an improvement
    assert decode["within_launch"]["verdict"] == "improvement"


def test_the_pooled_lines_method_calls_launch_noise_an_improvement(campaign_db: Path) -> None:
    with Store.open(campaign_db, read_only=True) as store:
        base = pool("base", [load_run(store, f"base-r{i}") for i in (1, 2, 3)])
        same = pool("same", [load_run(store, f"same-r{i}") for i in (1, 2, 3)])
    (stratum,) = base.decode
    pooled = compare_samples(base.decode[stratum], same.decode[stratum], higher_is_better=True)
    assert pooled.verdict == "improvement" and pooled.p_value is not None \
        and pooled.p_value < 1e-6


def test_a_consistent_gain_is_an_improvement(campaign_db: Path) -> None:
    code, c = _compare(campaign_db, "--run", _arm("base"), "--run", _arm("fast"))
    assert code == 0 and c["verdict"] == "improvement"
    launch = next(m for m in c["metrics"] if m["metric"] == "decode throughput")["launch_level"]
    assert launch["ci95"][0] > 1.03 and launch["p_value"] < 0.05
    assert launch["ratio"] == pytest.approx(1.18, abs=0.005)


def test_unpaired_arms_use_welch(campaign_db: Path) -> None:
    code, c = _compare(campaign_db, "--run", _arm("base"), "--run", "fast-r1,fast-r2")
    assert code == 0
    assert c["replication"].startswith("unpaired arms of 3 and 2 launches: Welch")
    launch = next(m for m in c["metrics"] if m["metric"] == "decode throughput")["launch_level"]
    assert launch["method"] == "welch"


def test_one_launch_each_is_judged_against_the_measured_noise(campaign_db: Path) -> None:
    """The database holds three repeats of each configuration: base-r1 against same-r1 is
    +6%, which the lines call significant and the launch noise (±7%) does not."""
    code, c = _compare(campaign_db, "--run", "base-r1", "--run", "same-r1")
    assert code == 0 and c["verdict"] == "no significant change"
    assert "launch noise, measured on 9 A/A pair(s)" in c["replication"]
    decode = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    assert decode["launch_level"]["method"] == "launch noise"
    assert decode["within_launch"]["verdict"] == "improvement"


def test_an_arm_must_repeat_one_configuration(campaign_db: Path) -> None:
    code, c = _compare(campaign_db, "--run", "base-r1,fast-r2", "--run", _arm("same"))
    assert code == 3
    assert "fast-r2 differs from base-r1 in tag.build" in c["notes"][-1]


def test_check_judges_speculation_against_the_launch_noise(tmp_path: Path) -> None:
    """Two launches of one baseline 8% apart measure the noise; a speculative launch 4%
    below the nearer baseline is a regression by its lines alone but not beyond the noise:
    the regression gate passes.  On the real campaign NGRAM's 65% drop fails it."""
    gen = load_generator()
    t0 = datetime(2026, 6, 1, 9, 0, 0)
    for i, (name, tps, spec) in enumerate([("b1", 100.0, False), ("b2", 108.0, False),
                                           ("s1", 96.0, True)]):
        start = t0 + timedelta(minutes=30 * i)
        folder = tmp_path / name
        folder.mkdir()
        lines = gen.mission_log(tps, 0.7, seed=40 + i, start=start,
                                accept=(2.1, 0.2) if spec else None)
        (folder / "server.log").write_text("\n".join(lines) + "\n")
        (folder / "env.json").write_text(json.dumps(
            gen.mission_manifest(False, spec, start.isoformat() + "+00:00")))
    db = tmp_path / "spec.duckdb"
    assert not ingest_paths([tmp_path], db).failed
    code, c = _compare(db, "--run", "b1", "--run", "s1")
    decode = next(m for m in c["metrics"] if m["metric"] == "decode throughput")
    assert decode["within_launch"]["verdict"] == "regression"
    assert decode["launch_level"]["method"] == "launch noise" and code == 0
    report = run_checks(db, load_suites(["regressions"]))
    spec = next(r for r in report.results if r.check.name.startswith("speculation is not"))
    assert spec.status == "PASS" and spec.evaluated == 1
    # an A/A pair alone (the real campaign's two baseline launches): the suite passes
    aa = tmp_path / "aa.duckdb"
    assert not ingest_paths([SAMPLES / "real-cpu" / "real-cpu-baseline-r1",
                             SAMPLES / "real-cpu" / "real-cpu-baseline-r2"], aa).failed
    assert run_checks(aa, load_suites(["regressions"])).exit_code == 0
    real = tmp_path / "real.duckdb"
    assert not ingest_paths([SAMPLES / "real-cpu"], real).failed
    report = run_checks(real, load_suites(["regressions"]))
    spec = next(r for r in report.results if r.check.name.startswith("speculation is not"))
    assert spec.status == "FAIL"
    # the campaign's NGRAM arm against its baseline arm, both launches of each, paired
    (row,) = spec.failing
    assert row["spec_run"] == "real-cpu-ngram" and row["baseline_run"] == "real-cpu-baseline"
    assert row["speedup"] < -0.3 and "2 rounds, paired" in row["detail"]
    assert "real-cpu-ngram-r1, real-cpu-ngram-r2" in row["detail"]


# ------------------------------------------------------------------ the statistics alone

def test_paired_rounds_interval_and_exact_sign_flip() -> None:
    t = judge_launches(["a1", "a2"], [717.0, 758.0], ["b1", "b2"], [251.0, 268.0],
                       higher_is_better=True, paired=True, noise=None)
    assert t.method == "paired rounds" and t.df == 1 and t.verdict == "regression"
    assert t.ci_high < 0.97
    # six rounds all in one direction: the smallest exact p, 2 / 2^6
    assert sign_flip_p([0.1, 0.12, 0.09, 0.11, 0.1, 0.13]) == pytest.approx(2 / 64)
    assert sign_flip_p([0.1, -0.1, 0.1, -0.1]) == 1.0
    six = judge_launches([f"a{i}" for i in range(6)], [100.0] * 6,
                         [f"b{i}" for i in range(6)], [110, 111, 109, 112, 110, 108],
                         higher_is_better=True, paired=True, noise=None)
    assert six.p_value == pytest.approx(2 / 64) and six.verdict == "improvement"


def test_a_round_far_from_the_others_is_named() -> None:
    t = judge_launches(["a1", "a2", "a3", "a4"], [100.0, 101, 99, 100],
                       ["b1", "b2", "b3", "b4"], [90.0, 91, 89, 125],
                       higher_is_better=True, paired=True, noise=None)
    assert t.disagreeing is not None and t.disagreeing.startswith("round 4 (a4) disagrees")


def test_unreplicated_keeps_the_within_launch_verdict_with_its_label() -> None:
    within = compare_samples(np.full(40, 62.9) + np.linspace(-1, 1, 40),
                             np.full(40, 75.9) + np.linspace(-1, 1, 40), higher_is_better=True)
    t = judge_launches(["a"], [62.9], ["b"], [75.9], higher_is_better=True, paired=False,
                       noise=None, within=within)
    assert t.method == "unreplicated" and t.verdict == "improvement"
    assert t.label == "unreplicated: launch noise unknown"


def test_pool_noise_is_the_pooled_sd_of_log_values() -> None:
    n = pool_noise([[100.0, 108.0, 92.0], [50.0, 55.0], [70.0]])
    assert n is not None and n.df == 3 and n.launches == 5 and n.pairs == 4
    logs = [np.log([100, 108, 92]), np.log([50, 55])]
    ss = sum(float(((g - g.mean()) ** 2).sum()) for g in logs)
    assert n.log_sd == pytest.approx(math.sqrt(ss / 3))
    assert pool_noise([[1.0], [2.0]]) is None


# client output throughput (tok/s) of 14 launches of one configuration of the real SGLang
# CPU engine (benchmarks/data/real-cpu-aa): the third ran while a test run loaded the box
REAL_AA_CLIENT = [499.67, 624.97, 201.51, 604.21, 518.13, 625.69, 559.37, 484.57, 544.28,
                  588.3, 549.34, 547.6, 573.44, 631.44]


def test_a_disturbed_launch_judged_alone_is_out_of_family() -> None:
    """The 0.35x launch against a quiet one of the same configuration, the environment's
    noise from the other twelve: without the check it reads as a regression."""
    rest = [v for i, v in enumerate(REAL_AA_CLIENT) if i not in (0, 2)]
    noise = pool_noise({"aa": rest})
    assert noise is not None and len(noise.launches_of("aa")) == 12
    plain = judge_launches(["a"], [REAL_AA_CLIENT[0]], ["b"], [REAL_AA_CLIENT[2]],
                           higher_is_better=True, paired=False, noise=noise)
    assert plain.method == "launch noise" and plain.verdict == "regression"
    t = judge_launches(["a"], [REAL_AA_CLIENT[0]], ["b"], [REAL_AA_CLIENT[2]],
                       higher_is_better=True, paired=False, noise=noise,
                       configs=("aa", "aa"))
    assert t.verdict == "insufficient data" and t.label == "out of family"
    assert t.detail.startswith("b (201.5) lies outside the 12 other launches")
    assert "it would read: regression" in t.detail
    # the quiet reference launch is in family: only the stray is named
    assert "a (499.7)" not in t.detail


def test_in_family_launches_and_new_configurations_are_judged_as_before() -> None:
    """Quiet launches (the disturbed one left out of the noise, which it would swamp)."""
    rest = [v for i, v in enumerate(REAL_AA_CLIENT) if i not in (1, 2, 4)]
    noise = pool_noise({"aa": rest})
    t = judge_launches(["a"], [REAL_AA_CLIENT[1]], ["b"], [REAL_AA_CLIENT[4]],
                       higher_is_better=True, paired=False, noise=noise,
                       configs=("aa", "aa"))
    assert t.label is None and t.verdict == "no significant change"
    # a candidate configuration with no earlier launch has nothing to be out of family with
    scaled = judge_launches(["a"], [REAL_AA_CLIENT[1]], ["b"], [REAL_AA_CLIENT[1] * 0.5],
                            higher_is_better=True, paired=False, noise=noise,
                            configs=("aa", "new"))
    assert scaled.label is None and scaled.verdict == "regression"
