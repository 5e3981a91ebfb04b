"""Load levels on real engine output: sample_logs/real-cpu-levels-seeded/ (a campaign at
concurrency 1, 4 and 16, each level with its own prompts), sample_logs/real-cpu-levels/
(the same levels replaying one set of prompts: NGRAM's n-gram store learns them) and
sample_logs/real-cpu-levels-loop/ (one server per arm benched at the three levels by a
shell loop).  All recorded from the real SGLang 0.5.23 CPU server."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from logpipe.analysis.compare import compare, compare_campaign
from logpipe.cli import app
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

runner = CliRunner()
FOLDERS = ["real-cpu-levels-seeded", "real-cpu-levels", "real-cpu-levels-loop"]


@pytest.fixture(scope="module")
def levels_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("levels") / "levels.duckdb"
    result = ingest_paths([SAMPLES / f for f in FOLDERS], db)
    assert not result.failed and result.rows("rejects") == 0
    return db


def table(c) -> list[tuple[str, str, list[float], list[float]]]:  # type: ignore[no-untyped-def]
    return [(r.level.label, r.test.verdict, [round(v, 1) for v in r.test.values_a],
             [round(v, 1) for v in r.test.values_b]) for r in c.levels]


def test_a_campaign_at_three_levels_is_judged_level_by_level(levels_db: Path) -> None:
    (c,) = compare_campaign(str(levels_db), "real-cpu-levels-seeded")
    assert table(c) == [
        ("concurrency 1", "no significant change", [216.2, 242.8], [221.7, 218.1]),
        ("concurrency 4", "no significant change", [418.9, 530.6], [439.5, 491.3]),
        ("concurrency 16", "no significant change", [807.7, 931.0], [733.4, 736.7])]
    assert all(r.test.method.startswith("paired rounds") for r in c.levels)
    assert c.crossover == ("no level differs significantly (concurrency 1 to concurrency "
                           "16): no crossover in range")
    out = runner.invoke(app, ["compare", "--campaign", "real-cpu-levels-seeded", "--db",
                              str(levels_db)])
    assert "By load level (client output throughput" in out.stdout
    assert "Crossover: no level differs significantly" in out.stdout


def test_levels_that_replay_one_seed_show_a_warm_ngram_store(levels_db: Path) -> None:
    """The trap the warning is about: the later levels resend the first level's prompts,
    NGRAM drafts their known continuations, and it looks 2.2x faster at concurrency 4."""
    (c,) = compare_campaign(str(levels_db), "real-cpu-levels")
    assert [(label, verdict) for label, verdict, _, _ in table(c)] == [
        ("concurrency 1", "no significant change"), ("concurrency 4", "improvement"),
        ("concurrency 16", "no significant change")]
    accept = dict(query(levels_db, """
        SELECT b.running_req, round(avg(b.accept_len), 1) FROM batches b JOIN runs r
        USING (run_id) WHERE r.name = 'real-cpu-levels-ngram-r2' AND b.kind = 'decode'
        AND b.running_req IN (1, 4, 16) GROUP BY 1"""))
    assert accept == {1: 1.4, 4: 7.7, 16: 10.6}
    # recorded with their bench command: not A/A partners of the seeded campaign's
    workloads = dict(query(levels_db, "SELECT name, workload FROM run_configs WHERE name IN "
                                      "('real-cpu-levels-baseline-r1', "
                                      "'real-cpu-levels-seeded-baseline-r1')"))
    assert "--seed 1" in workloads["real-cpu-levels-baseline-r1"]
    assert "--seed '{level}'" in workloads["real-cpu-levels-seeded-baseline-r1"]
    seeded = dict(query(levels_db, """
        SELECT b.running_req, round(avg(b.accept_len), 1) FROM batches b JOIN runs r
        USING (run_id) WHERE r.name = 'real-cpu-levels-seeded-ngram-r1' AND b.kind = 'decode'
        AND b.running_req IN (1, 4, 16) GROUP BY 1"""))
    assert all(1.0 < v < 1.6 for v in seeded.values()) and len(seeded) == 3
    dry = runner.invoke(app, ["ab", str(SAMPLES / "real-cpu-levels" / "plan.toml"),
                              "--dry-run"], env={"SGLANG_CPU": "/nonexistent"})
    assert "warning: every load level of a launch replays the same prompts" in dry.stdout
    dry = runner.invoke(app, ["ab", str(SAMPLES / "real-cpu-levels-seeded" / "plan.toml"),
                              "--dry-run"], env={"SGLANG_CPU": "/nonexistent"})
    assert dry.exit_code == 0 and "warning" not in dry.stdout


def test_a_shell_loop_over_concurrencies_gives_the_same_per_level_table(
        levels_db: Path) -> None:
    """One server per arm, benched at 1, 4 and 16 by a shell loop (one record each): the
    levels come from the records themselves; one launch a side is unreplicated."""
    (c,) = compare(str(levels_db), ["real-cpu-loop-baseline", "real-cpu-loop-ngram"])
    assert [r.level.label for r in c.levels] == ["concurrency 1", "concurrency 4",
                                                 "concurrency 16"]
    assert all(r.test.method == "unreplicated" for r in c.levels)
    assert (c.crossover or "").startswith("no crossover located: no level has the launches")
