"""One folder per bad input: ``input.log`` and what must come of it (``expected.json``).

Bad input never crashes the ingest and nothing is lost: malformed records go to
``rejects`` with their line and reason, noise is counted, good lines still land.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logpipe.ingest import ingest_paths
from tests.conftest import query

CASES = sorted(p for p in (Path(__file__).parent / "bad_inputs").iterdir() if p.is_dir())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Path, db: Path) -> None:
    expected = json.loads((case / "expected.json").read_text())
    result = ingest_paths([case / "input.log"], db)
    assert [f.status for f in result.files] == ["new"]
    assert query(db, "SELECT count(*) FROM batches") == [(expected["batches"],)]
    rejects = query(db, "SELECT line_no, reason FROM rejects ORDER BY line_no")
    assert [list(r) for r in rejects] == expected["rejects"]
    raw_lines = (case / "input.log").read_bytes().split(b"\n")
    for line_no, raw in query(db, "SELECT line_no, raw FROM rejects"):
        assert raw == raw_lines[line_no - 1].decode("utf-8", errors="replace")
    assert query(db, "SELECT rejected FROM sources") == [(len(expected["rejects"]),)]
    if "noise" in expected:
        assert query(db, "SELECT noise_lines FROM sources") == [(expected["noise"],)]
    for kind, attrs in expected.get("events", []):
        got = query(db, "SELECT attrs FROM events WHERE kind = ?", [kind])
        assert [json.loads(a) for (a,) in got] == [attrs]


def test_a_line_nested_too_deeply_is_that_lines_problem_alone(tmp_path: Path,
                                                               db: Path) -> None:
    """A line whose JSON or repr nests thousands deep (a damaged or hostile record: the
    decoders give up with a RecursionError) costs that line alone, in every reader that
    decodes a line: an SGLang launch line (its event says the arguments were unreadable),
    a vLLM ``non-default args`` line (its other arguments are read), a benchmark's and a
    request-metrics file's JSON line (a reject naming it), a counters scrape's header.
    Before, each of these failed its whole file and kept none of its good lines."""
    from tests.conftest import SAMPLES

    deep = "[" * 5000 + "]" * 5000
    logs = tmp_path / "logs"

    def write(rel: str, source: Path, edit: object) -> Path:
        path = logs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = source.read_text().splitlines(keepends=True)
        path.write_text("".join(edit(lines)))  # type: ignore[operator]
        return path

    def launch_line(lines: list[str]) -> list[str]:
        return [ln[:ln.index("server_args=")] + "server_args={'model_path': 'm', 'x': "
                + deep + "}\n" if "server_args=" in ln else ln for ln in lines]

    def vllm_args(lines: list[str]) -> list[str]:
        at = "non-default args: {"
        return [ln.replace(at, at + "'deep': " + "-" * 5000 + "1, ") if at in ln else ln
                for ln in lines]

    def json_line(lines: list[str]) -> list[str]:
        return [*lines[:1], '{"prompt_tokens": 1, "x": ' + deep + "}\n", *lines[1:]]

    def header(lines: list[str]) -> list[str]:
        return [lines[0].rstrip().removesuffix("}") + ', "x": ' + deep + "}\n", *lines[1:]]

    real_cpu = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"
    vllm = SAMPLES / "real-vllm-cpu-counters" / "real-vllm-cpu-counters-baseline-r1"
    mission = SAMPLES / "mission" / "baseline-untuned"
    sglang_log = write("sglang/server.log", real_cpu, launch_line)
    vllm_log = write("vllm/server.log", vllm / "server.log", vllm_args)
    bench = write("bench/bench_serving.jsonl", mission / "bench_serving.jsonl", json_line)
    metrics = write("metrics/sglang-request-metrics-20260504_09.log",
                    mission / "sglang-request-metrics-20260504_09.log", json_line)
    scrape = write("counters/max_concurrency-4-after.prom",
                   SAMPLES / "real-vllm-cpu-counters" / "real-vllm-cpu-counters-baseline-r2"
                   / "metrics" / "max_concurrency-4-after.prom", header)
    assert deep in sglang_log.read_text() and "-" * 5000 in vllm_log.read_text()
    assert deep in scrape.read_text().splitlines()[0]

    result = ingest_paths([logs], db)
    assert not result.failed, result.failed
    text = sglang_log.read_text()
    assert query(db, "SELECT count(*) FROM batches WHERE source_path = ?",
                 [str(sglang_log)]) == [
        (text.count("] Prefill batch") + text.count("] Decode batch"),)]
    assert query(db, "SELECT attrs FROM events WHERE kind = 'server_args'") == [
        ('{"parse_error": true}',)]
    (args,) = query(db, "SELECT server_args FROM runs WHERE source_path = ?", [str(vllm_log)])
    read = json.loads(args[0])
    assert read["deep"] == "-" * 5000 + "1" and len(read) > 1  # (its other arguments too)
    for path, table in ((bench, "bench_results"), (metrics, "request_metrics")):
        records = len(path.read_text().splitlines()) - 1
        assert query(db, f"SELECT count(*) FROM {table} WHERE source_path = ?",
                     [str(path)]) == [(records,)], table
    assert sorted(query(db, "SELECT source_path, line_no, reason FROM rejects")) == sorted(
        [(str(bench), 2, "not JSON: nested too deeply to read"),
         (str(metrics), 2, "not JSON: nested too deeply to read")])
    samples = [ln for ln in scrape.read_text().splitlines() if ln and not ln.startswith("#")]
    assert query(db, "SELECT count(*) FROM metric_snapshots") == [(len(samples),)]


def _vllm_log_with(tmp_path: Path, stats_key: str, spec_key: str, number: str
                   ) -> tuple[Path, int, int, list[str]]:
    """A real vLLM log whose first stats line holding ``stats_key`` and first
    speculative-decoding line holding ``spec_key`` have ``number`` put after the key: the
    log, the two lines' indexes and its lines."""
    from tests.conftest import SAMPLES

    source = SAMPLES / "real-vllm-cpu" / "real-vllm-cpu-ngram-r1" / "server.log"
    lines = source.read_text().splitlines(keepends=True)
    stats = next(i for i, ln in enumerate(lines) if stats_key in ln)
    spec = next(i for i, ln in enumerate(lines) if spec_key in ln)
    lines[stats] = lines[stats].replace(stats_key, stats_key + number, 1)
    lines[spec] = lines[spec].replace(spec_key, spec_key + number, 1)
    log = tmp_path / "server.log"
    log.write_text("".join(lines))
    return log, stats, spec, lines


def test_a_vllm_count_too_long_for_any_number_is_that_lines_reject(tmp_path: Path,
                                                                    db: Path) -> None:
    """A vLLM stats or speculative-decoding line whose count runs to 5,000 digits (past
    Python's 4,300-digit limit, where ``int`` raises) is a reject naming the count, as a
    count of 20 digits is; the file's other lines land.  Before, such a line failed its
    whole file."""
    log, stats, spec, lines = _vllm_log_with(tmp_path, "Running: ", "Accepted: ", "9" * 5000)
    pristine_stats = sum("Running: " in ln for ln in lines)
    pristine_spec = sum("SpecDecoding metrics" in ln for ln in lines)

    result = ingest_paths([log], db)
    assert not result.failed, result.failed
    assert query(db, "SELECT line_no, reason FROM rejects ORDER BY line_no") == sorted([
        (stats + 1, "a vLLM stats line whose running is too big for its column"),
        (spec + 1, "a vLLM speculative-decoding line whose accepted_tokens is too big for "
                   "its column")])
    assert query(db, "SELECT count(*) FROM vllm_stats") == [(pristine_stats - 1,)]
    assert query(db, "SELECT count(*) FROM vllm_spec_metrics") == [(pristine_spec - 1,)]


@pytest.mark.parametrize("fast", ["1", "0"])
def test_a_vllm_number_past_a_doubles_range_is_that_lines_reject(
        tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch, fast: str) -> None:
    """A vLLM throughput or acceptance length of 400 digits read as inf (``float``): the
    line is a reject naming it, in both lanes, not an infinity the log never printed."""
    monkeypatch.setenv("LOGPIPE_FASTLANE", fast)
    log, stats, spec, _ = _vllm_log_with(tmp_path, "Avg generation throughput: ",
                                         "Mean acceptance length: ", "9" * 400)
    result = ingest_paths([log], db)
    assert not result.failed, result.failed
    assert query(db, "SELECT line_no, reason FROM rejects ORDER BY line_no") == sorted([
        (stats + 1, "a vLLM stats line whose gen_tps is too big for a double"),
        (spec + 1, "a vLLM speculative-decoding line whose mean_acceptance_length is too "
                   "big for a double")])
    assert query(db, "SELECT count(*) FROM vllm_stats WHERE isinf(gen_tps)") == [(0,)]


def test_a_number_no_column_holds_is_its_records_problem_alone(tmp_path: Path,
                                                                db: Path) -> None:
    """A record whose count no column holds (20 digits; a fraction, text, inf or nan where
    a count goes) is a reject naming the field, in a benchmark's, a request-metrics and a
    phase-timing JSON Lines file; a phase record's time of nan is no time; a vLLM launch
    whose tensor parallel size runs to 20 digits has no tp_size (its arguments keep it as
    printed).  Each file's other records land; before, each failed its whole file."""
    from tests.conftest import SAMPLES

    mission = SAMPLES / "mission" / "baseline-untuned"
    logs = tmp_path / "logs"
    big = 10 ** 20

    def jsonl(rel: str, source: Path, edits: list[dict[str, object]]) -> Path:
        lines = source.read_text().splitlines()
        first = json.loads(lines[0])
        path = logs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([*lines, *(json.dumps({**first, **e}) for e in edits)])
                        + "\n")
        return path

    bench = jsonl("bench/bench_serving.jsonl", mission / "bench_serving.jsonl",
                  [{"completed": big}])
    metrics = jsonl("metrics/sglang-request-metrics-20260504_09.log",
                    mission / "sglang-request-metrics-20260504_09.log",
                    [{"prompt_tokens": big}, {"completion_tokens": float("nan")}])
    phases = jsonl("phases/phase_timings.jsonl",
                   SAMPLES / "profiles" / "eagle3-profiled" / "phase_timings.jsonl",
                   [{"rank": 2 ** 40}, {"batch_size": 1.5}, {"accepted_tokens": "x"},
                    {"batch_size": float("inf")}, {"ts": float("nan")}, {"batch_size": 4.0}])
    vllm = logs / "vllm" / "server.log"
    vllm.parent.mkdir(parents=True)
    vllm.write_text((SAMPLES / "real-vllm-cpu" / "real-vllm-cpu-ngram-r1" / "server.log")
                    .read_text().replace("non-default args: {", "non-default args: "
                                         "{'tensor_parallel_size': " + str(big) + ", ", 1))

    result = ingest_paths([logs], db)
    assert not result.failed, result.failed
    n = {p: len(p.read_text().splitlines()) for p in (bench, metrics, phases)}
    assert sorted(query(db, "SELECT source_path, line_no, reason FROM rejects")) == sorted([
        (str(bench), n[bench], "a benchmark record whose completed is too big for its "
                               "column"),
        (str(metrics), n[metrics] - 1, "a request record whose prompt_tokens is too big "
                                       "for its column"),
        (str(phases), n[phases] - 5, "a phase record whose rank is too big for its column"),
        (str(phases), n[phases] - 4, "a phase record whose batch_size is not a count"),
        (str(phases), n[phases] - 3, "a phase record whose accepted_tokens is not a count"),
        (str(phases), n[phases] - 2, "a phase record whose batch_size is not a count")])
    assert query(db, "SELECT count(*) FROM bench_results") == [(n[bench] - 1,)]
    assert query(db, "SELECT count(*), count(completion_tokens) FROM request_metrics "
                 "WHERE line_no = ?", [n[metrics]]) == [(1, 0)]  # (nan: no count)
    assert query(db, "SELECT count(*), count(ts) FROM phase_timings WHERE line_no = ?",
                 [n[phases] - 1]) != [(0, 0)]
    assert query(db, "SELECT count(ts) FROM phase_timings WHERE line_no = ?",
                 [n[phases] - 1]) == [(0,)]
    assert query(db, "SELECT DISTINCT batch_size FROM phase_timings WHERE line_no = ?",
                 [n[phases]]) == [(4,)]
    (run,) = query(db, "SELECT tp_size, server_args FROM runs WHERE source_path = ?",
                   [str(vllm)])
    assert run[0] is None and json.loads(run[1])["tensor_parallel_size"] == big


def test_a_file_that_fails_names_the_lines_it_failed_in(tmp_path: Path, db: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every damaged line the fuzzing found is now its line's reject; a failure left in a
    reader (here made by hand: the parse of the block holding a marked line raises) fails
    its file alone, rolled back, and the message names the block's lines, where to look."""
    import re
    import shutil

    from logpipe.engines.sglang import logparser
    from logpipe.readers import line_blocks
    from tests.conftest import SAMPLES

    folder = tmp_path / "logs"
    folder.mkdir()
    lines = (SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log").read_text(
        ).splitlines(keepends=True)
    marker = "a line this test's parser fails on\n"
    log = folder / "server.log"  # (past the small files' size: read block by block)
    lines = lines * 30
    at = len(lines) // 2
    log.write_text("".join([*lines[:at], marker, *lines[at:]]))
    shutil.copy(SAMPLES / "real-cpu" / "real-cpu-baseline-r2" / "server.log",
                folder / "other.log")
    size = 512 * 1024
    monkeypatch.setattr(logparser, "PARSE_BLOCK_BYTES", size)
    monkeypatch.setattr(logparser, "SLOW_BLOCK_BYTES", size)
    prepare = logparser.SGLangLogParser.prepare

    def failing(self, data, first_line_no):  # type: ignore[no-untyped-def]
        if marker.encode() in data:
            raise ValueError("a reader's own failure")
        return prepare(self, data, first_line_no)

    monkeypatch.setattr(logparser.SGLangLogParser, "prepare", failing)
    result = ingest_paths([folder], db)
    assert sorted((Path(f.path).name, f.status) for f in result.files) == [
        ("other.log", "new"), ("server.log", "failed")]
    (failed,) = [f for f in result.files if f.status == "failed"]
    found = re.search(r"a reader's own failure \(in the block of lines (\d+)-(\d+)\)",
                      failed.detail or "")
    assert found, failed.detail
    first = 1
    with open(log, "rb") as fh:
        for block in line_blocks(fh, lambda: size):
            last = first + bytes(block).count(b"\n") - 1
            if marker.encode() in block:
                break
            first = last + 1
    assert (int(found[1]), int(found[2])) == (first, last)
    assert 1 < first <= at + 1 <= last
    assert query(db, "SELECT count(*) FROM sources WHERE path LIKE '%server.log'") == [(0,)]
