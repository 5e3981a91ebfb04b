"""The engines' own Prometheus counters: real ``/metrics`` text of both engines parsed whole
by the maintained parser (``prometheus_client``), a damaged snapshot losing only its bad
lines, a user's saved ``curl`` output read beside a run, and the campaigns whose server
log has too few windows judged from the counters ``launch`` scraped around each level."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from logpipe.analysis.client_metrics import COUNTERS_PRIMARY
from logpipe.analysis.compare import compare_campaign
from logpipe.analysis.results import Options
from logpipe.engines import counters
from logpipe.ingest import ingest_paths
from tests.conftest import SAMPLES, query

VLLM = SAMPLES / "real-vllm-cpu-counters"
SGLANG = SAMPLES / "real-cpu-counters"
VLLM_SNAPSHOT = VLLM / "real-vllm-cpu-counters-ngram-r1" / "metrics" / \
    "max_concurrency-4-after.prom"
SGLANG_SNAPSHOT = SGLANG / "real-cpu-counters-ngram-r1" / "metrics" / \
    "max_concurrency-4-after.prom"


def _sample_lines(text: str) -> list[tuple[int, str]]:
    return [(i, line) for i, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize(("path", "engine", "neutral"), [
    (VLLM_SNAPSHOT, "vllm", {"generated_tokens", "prompt_tokens", "requests", "spec_drafts",
                             "spec_draft_tokens", "spec_accepted_tokens", "iteration_tokens",
                             "ttft_seconds", "itl_seconds", "tpot_seconds", "e2e_seconds",
                             "queue_seconds"}),
    (SGLANG_SNAPSHOT, "sglang", {"generated_tokens", "prompt_tokens", "requests",
                                 "spec_drafts", "ttft_seconds", "itl_seconds",
                                 "tpot_seconds", "e2e_seconds", "queue_seconds"}),
])
def test_a_real_snapshot_is_read_whole(path: Path, engine: str, neutral: set[str]) -> None:
    """Every sample line of a real snapshot is one row on its own line, nothing rejected;
    the engine's families carry their neutral names; values are the printed ones."""
    text = path.read_text()
    assert counters.sniff(text[:65536])
    rows, rejects = counters.parse(text)
    assert rejects == []
    assert [n for n, _ in rows] == [i for i, _ in _sample_lines(text)]
    assert {r["metric"] for _, r in rows if r["metric"]} == neutral
    assert {r["engine"] for _, r in rows if r["family"].startswith(engine + ":")} == {engine}
    assert {r["engine"] for _, r in rows if r["family"].startswith("python_")} <= {None}
    # the value on the line of each generated-tokens sample, read back by line number
    lines = dict(_sample_lines(text))
    gen = [(n, r) for n, r in rows if r["metric"] == "generated_tokens"]
    assert gen and all(float(lines[n].rsplit(" ", 1)[1]) == r["value"] for n, r in gen)
    assert all(lines[n].startswith(r["sample"]) for n, r in rows)
    head = counters._header(text.splitlines()[0])
    assert head["phase"] == "after" and head["level"] == 4
    buckets = [r for _, r in rows if r["metric"] == "ttft_seconds" and r["le"] is not None]
    assert buckets and max(r["le"] for r in buckets) == float("inf")


def test_a_damaged_snapshot_loses_only_its_bad_lines() -> None:
    """A label without quotes inside a histogram and a line cut short at the end: those two
    lines go to rejects with their line numbers; every other sample is kept, with its
    family's type (the block is re-read line by line with its comments)."""
    lines = VLLM_SNAPSHOT.read_text().splitlines()
    samples = _sample_lines("\n".join(lines))
    bucket = next(i for i, line in samples if "time_to_first_token_seconds_bucket" in line)
    lines[bucket - 1] = lines[bucket - 1].replace('engine="0"', "engine=0")
    lines.append('vllm:generation_tokens_total{engine="0",model_na')
    rows, rejects = counters.parse("\n".join(lines) + "\n")
    assert [(n, reason.split(":")[0]) for n, reason, _ in rejects] == [
        (bucket, "not a Prometheus sample"), (len(lines), "not a Prometheus sample")]
    assert len(rows) == len(samples) - 1
    kept = [r for n, r in rows if r["family"] == "vllm:time_to_first_token_seconds"]
    assert kept and {r["type"] for r in kept} == {"histogram"}


def test_a_users_saved_snapshot_is_read_beside_its_run(tmp_path: Path) -> None:
    """``curl .../metrics > metrics.txt`` in a run's folder (no header: no time, level or
    phase): its samples link to the run by folder and are totals since the server
    started; no delta is made of one snapshot."""
    run = tmp_path / "mine"
    shutil.copytree(VLLM / "real-vllm-cpu-counters-ngram-r1", run,
                    ignore=shutil.ignore_patterns("metrics"))
    (run / "metrics.txt").write_text(
        VLLM_SNAPSHOT.read_text().split("\n", 1)[1])  # as curl saves it: no header line
    db = tmp_path / "db.duckdb"
    result = ingest_paths([run], db)
    assert not result.failed
    assert [f.kind for f in result.files if f.path.endswith("metrics.txt")] == [
        "prometheus_metrics"]
    rows = query(db, "SELECT count(*), count(DISTINCT run_id), any_value(link_method), "
                     "count(phase), count(taken_at) FROM metric_snapshots")
    assert rows == [(len(_sample_lines(VLLM_SNAPSHOT.read_text())), 1, "same folder", 0, 0)]
    assert query(db, "SELECT count(*) FROM counter_deltas") == [(0,)]


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("counters") / "counted.duckdb"
    result = ingest_paths([VLLM, SGLANG], db)
    assert not result.failed and result.rows("rejects") == 0
    return db


def test_the_vllm_counters_per_level_are_the_bench_clients_own(counted: Path) -> None:
    """vLLM's bench computes its acceptance length from the same counters, scraped just
    inside logpipe's window: per launch and level, logpipe's acceptance length (1 +
    accepted / drafts over the level's window) is the one the bench printed."""
    ours = query(counted, """
        SELECT run, level, 1 + max(delta) FILTER (WHERE metric = 'spec_accepted_tokens')
                              / max(delta) FILTER (WHERE metric = 'spec_drafts')
        FROM counter_deltas WHERE run LIKE 'real-vllm-cpu-counters-ngram-%'
        AND part = 'total' GROUP BY ALL ORDER BY 1, 2""")
    assert len(ours) == 6
    for run, level, accept in ours:
        console = (VLLM / run / f"bench_console-max_concurrency-{level:g}.txt").read_text()
        printed = float(re.search(r"Acceptance length:\s+([\d.]+)", console).group(1))
        assert accept == pytest.approx(printed, abs=0.006), (run, level)
    # tokens: what the bench counted at each level is what the server counted
    tokens = query(counted, """
        SELECT d.run, d.level, d.delta, b.total_output_tokens FROM counter_deltas d
        JOIN bench_results b ON b.run_id = d.run_id AND b.max_concurrency = d.level
        WHERE d.metric = 'generated_tokens' AND b.duplicate_of IS NULL
        AND d.run LIKE 'real-vllm-cpu-counters-%' ORDER BY 1, 2""")
    assert len(tokens) == 12 and all(delta == out for _, _, delta, out in tokens)


def test_a_campaign_whose_log_has_too_few_windows_is_judged_on_its_counters(
        counted: Path, tmp_path: Path) -> None:
    """The plan declares the server's measure; vLLM's stats line every 10 s leaves a short
    launch too few windows: the counters decide, named as the source, per level too.
    The same folders without their snapshots are insufficient data (exit 4)."""
    (c,) = compare_campaign(counted, "real-vllm-cpu-counters")
    assert c.primary == COUNTERS_PRIMARY
    assert "too few steady windows" in c.primary_reason
    assert "vllm:generation_tokens_total over each bench's duration" in c.primary_reason
    assert c.verdict not in ("insufficient data", "unreplicated regression")
    deciding = next(m for m in c.metrics if m.key == COUNTERS_PRIMARY)
    assert deciding.family == "counters" and deciding.launch is not None
    assert deciding.launch.method.startswith("paired rounds")
    assert [r.metric for r in c.levels] == [COUNTERS_PRIMARY] * 3
    assert [r.level.concurrency for r in c.levels] == [1, 4, 16] and c.crossover
    said = next(n for n in c.notes if n.startswith("accept length from the engine's"))
    assert re.search(r"ngram \d\.\d\d \(concurrency 1 \d\.\d\d, concurrency 4 ", said)

    bare = tmp_path / "bare"
    shutil.copytree(VLLM, bare, ignore=shutil.ignore_patterns("metrics"))
    db = tmp_path / "bare.duckdb"
    assert not ingest_paths([bare], db).failed
    (b,) = compare_campaign(db, "real-vllm-cpu-counters")
    assert b.verdict == "insufficient data" and b.exit_code == 4
    # declared, the counters decide a campaign whose log would decide too
    (s,) = compare_campaign(counted, "real-cpu-counters",
                            Options(primary=COUNTERS_PRIMARY))
    assert s.primary == COUNTERS_PRIMARY and s.verdict != "insufficient data"


def test_the_snapshots_split_the_server_log_by_level(counted: Path) -> None:
    """The snapshots around each bench time the levels: each launch's windows follow one
    another in the plan's order, the log's lines inside them are its lines at that level,
    and a campaign the server log decides is judged level by level on those lines."""
    windows = query(counted, "SELECT run, level, began_at, ended_at FROM level_windows "
                             "WHERE run LIKE 'real-cpu-counters-%' ORDER BY run, began_at")
    assert len(windows) == 12
    for i in range(0, 12, 3):
        launch = windows[i:i + 3]
        assert [lv for _, lv, _, _ in launch] == [1, 4, 16]
        assert all(a[3] <= b[2] for a, b in zip(launch, launch[1:], strict=False))
    lines = dict(query(counted, """
        SELECT level, count(*) FROM level_samples s JOIN runs r USING (run_id)
        WHERE r.name LIKE 'real-cpu-counters-%' AND s.kind = 'decode' GROUP BY 1"""))
    assert set(lines) == {1, 4, 16} and min(lines.values()) > 10
    # a decode line of a level's window ran at most that many requests
    over = query(counted, """
        SELECT count(*) FROM level_samples s JOIN runs r USING (run_id)
        WHERE r.name LIKE 'real-cpu-counters-%' AND s.kind = 'decode'
        AND s.running_req > s.level""")
    assert over == [(0,)]
    (c,) = compare_campaign(counted, "real-cpu-counters")
    assert c.primary == "decode_throughput"
    assert [r.metric for r in c.levels] == ["decode_throughput"] * 3
    medians = dict(query(counted, """
        SELECT level, median(gen_throughput) FROM level_samples s JOIN runs r USING (run_id)
        WHERE r.name = 'real-cpu-counters-baseline-r1' AND kind = 'decode'
        AND state = 'steady' GROUP BY 1"""))
    assert [r.test.values_a[0] for r in c.levels] == pytest.approx(
        [medians[1], medians[4], medians[16]])
    said = next(n for n in c.notes if n.startswith("accept length from the engine's"))
    value = float(re.search(r"ngram (\d+\.\d+)", said).group(1))
    assert 1.0 < value < 12.0  # generated tokens per verify step, 12 draft tokens at most


def test_every_engine_maps_to_documented_neutral_names() -> None:
    """An engine's counter names map only to the neutral names ``metric_snapshots``
    documents, and each engine says how its acceptance length is counted."""
    from logpipe.engines import engines

    mapped = [e for e in engines() if e.counters.prefix]
    assert {e.name for e in mapped} >= {"sglang", "vllm"}
    for engine in mapped:
        assert set(engine.counters.names.values()) <= set(counters.NEUTRAL), engine.name
        assert all(n.startswith(engine.counters.prefix) for n in engine.counters.names)
        assert engine.counters.accept_length in ("accepted", "generated")
    documented = (Path(__file__).parent.parent / "schemas" / "README.md").read_text()
    assert all(f"| {name} |" in documented for name in counters.NEUTRAL)
