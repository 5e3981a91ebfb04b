"""Request-log lines and plain-text phase records inside a server log.

The lines are written by hand from the formats reference (§3.5) and SGLang's request
logger, not produced by the sample generator.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from logpipe.engines.sglang.records import finish_meta_info
from logpipe.ingest import ingest_paths
from logpipe.phase_dump import PhaseRecorder
from tests.conftest import SAMPLES, query

HEAD = [
    "[2026-03-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, "
    "log_requests=True, log_requests_level=2)",
    "[2026-03-01 10:00:20] The server is fired up and ready to roll!",
]
# 0.4.1+ text, level 0/1: out without text
FINISH_L1 = (
    "[2026-03-01 10:00:25] Finish: obj=GenerateReqInput(rid='r-1', stream=False, "
    "return_logprob=False), out={'meta_info': {'id': 'r-1', 'finish_reason': {'type': "
    "'length', 'length': 128}, 'prompt_tokens': 812, 'completion_tokens': 128, "
    "'cached_tokens': 512, 'spec_verify_ct': 61, 'e2e_latency': 1.734}}")
# level 2: long text cut as 'head' ... 'tail' (not a Python literal), a long list too
FINISH_L2 = (
    "[2026-03-01 10:00:31] Finish: obj=GenerateReqInput(text='Write a poem about ' ... "
    "' the sea.', rid='r-2'), out={'text': 'The sea, the sea' ... 'and the end, out={', "
    "'meta_info': {'id': 'r-2', 'finish_reason': {'type': 'stop', 'matched': 151645}, "
    "'prompt_tokens': 30, 'completion_tokens': 2048, 'cached_tokens': 0, "
    "'output_token_logprobs': [(-0.1, 9707, None)] ... [(-0.3, 13, None)], "
    "'e2e_latency': 12.5, 'spec_accept_length': 2.41}}")
# 0.5.7+ --log-requests-format json, 0.5.8-0.5.11 with no prefix
JSON_EVENT = json.dumps({
    "timestamp": "2026-03-01T10:00:40.120000", "event": "request.finished", "rid": "r-3",
    "obj": {"rid": "r-3", "text": "secret prompt"},
    "out": {"text": "secret answer", "meta_info": {
        "id": "r-3", "prompt_tokens": 50, "completion_tokens": 7, "cached_tokens": 48,
        "e2e_latency": 0.21, "finish_reason": {"type": "stop"}}}})
# 0.2.15-0.4.0
OLD = ("[2026-03-01 10:00:45] in=GenerateReqInput(text='hi', rid='r-4'), out={'text': "
       "'hello', 'meta_info': {'prompt_tokens': 3, 'completion_tokens': 1, "
       "'completion_tokens_wo_jump_forward': 1, 'id': 'r-4', 'finish_reason': 'eos'}}")
BROKEN = "[2026-03-01 10:00:50] Finish: obj=GenerateReqInput(rid='r-5'), out={'text': 'x'}"
PHASE = ('[2026-03-01 10:00:55] phase_timings: {"v": 1, "ts": 1772359255.0, '
         '"batch_size": 1, "phases_ms": {"draft": 2.0, "verify": 24.0}, '
         '"accepted_tokens": 2, "synchronized": false}')


def test_request_and_phase_lines_land_in_their_tables(tmp_path: Path) -> None:
    log = tmp_path / "run" / "server.log"
    log.parent.mkdir()
    log.write_text("\n".join([*HEAD, FINISH_L1, FINISH_L2, JSON_EVENT, OLD, BROKEN,
                              PHASE]) + "\n")
    db = tmp_path / "r.duckdb"
    ingest_paths([log], db)
    rows = query(db, "SELECT line_no, rid, prompt_tokens, completion_tokens, cached_tokens, "
                     "e2e_latency_s, spec_verify_ct, spec_accept_length, finish_reason, "
                     "link_method, run_id IS NOT NULL FROM request_metrics ORDER BY line_no")
    stop = '{"type": "stop", "matched": 151645}'
    assert rows == [
        (3, "r-1", 812, 128, 512, 1.734, 61, None, '{"type": "length", "length": 128}',
         "server log", True),
        (4, "r-2", 30, 2048, 0, 12.5, None, 2.41, stop, "server log", True),
        (5, "r-3", 50, 7, 48, 0.21, None, None, '{"type": "stop"}', "server log", True),
        (6, "r-4", 3, 1, None, None, None, None, "eos", "server log", True),
    ]
    extra = json.loads(query(db, "SELECT extra FROM request_metrics WHERE rid = 'r-2'")[0][0])
    assert extra["output_token_logprobs"] == "[(-0.1, 9707, None)] ... [(-0.3, 13, None)]"
    assert "secret" not in str(query(db, "SELECT * FROM request_metrics"))
    assert query(db, "SELECT line_no, reason FROM rejects") == [
        (7, "Finish line without a readable meta_info")]
    assert query(db, "SELECT line_no, phase, ms, link_method FROM phase_timings "
                     "ORDER BY phase") == [(8, "draft", 2.0, "server log"),
                                           (8, "verify", 24.0, "server log")]
    assert query(db, "SELECT noise_lines FROM sources") == [(0,)]


def test_in_log_records_stay_with_their_run_when_other_files_link(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "mission" / "baseline-untuned", run)
    log = run / "server.log"
    lines = log.read_text().splitlines()
    lines.insert(len(lines) - 3, FINISH_L1)
    log.write_text("\n".join(lines) + "\n")
    db = tmp_path / "r.duckdb"
    ingest_paths([run], db)
    methods = query(db, "SELECT link_method, count(*) FROM request_metrics GROUP BY 1 "
                        "ORDER BY 1")
    assert methods == [("same folder", 8), ("server log", 1)]


def test_phase_recorder_writes_through_a_logger(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    logger = logging.getLogger("logpipe-test-worker")
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter("[%(asctime)s TP0] %(message)s",
                                           datefmt="%Y-%m-%d %H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        logger.info("server_args=ServerArgs(model_path='m', tp_size=1)")
        rec = PhaseRecorder(log=logger.info)
        for n in range(4):
            with rec.phase("draft"):
                pass
            with rec.phase("verify"):
                pass
            rec.cycle(batch_size=1, accepted_tokens=n + 1)
        rec.close()
    finally:
        logger.removeHandler(handler)
        handler.close()
    db = tmp_path / "p.duckdb"
    ingest_paths([log], db)
    assert query(db, "SELECT count(*), count(DISTINCT line_no), sum(accepted_tokens) / 2 "
                     "FROM phase_timings") == [(8, 4, 10)]


def test_meta_info_of_a_cut_line_is_read_key_by_key() -> None:
    meta = finish_meta_info(FINISH_L2[FINISH_L2.index("Finish: "):])
    assert meta is not None
    assert meta["completion_tokens"] == 2048 and meta["spec_accept_length"] == 2.41
    assert meta["finish_reason"] == {"type": "stop", "matched": 151645}


def test_text_is_kept_only_when_asked(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("\n".join([*HEAD, FINISH_L2, JSON_EVENT]) + "\n")
    db = tmp_path / "k.duckdb"
    ingest_paths([log], db, keep_request_text=True)
    rows = query(db, "SELECT rid, extra->>'prompt_text', extra->>'output_text' "
                     "FROM request_metrics ORDER BY line_no")
    assert rows == [("r-2", "'Write a poem about ' ... ' the sea.'",
                     "'The sea, the sea' ... 'and the end, out={'"),
                    ("r-3", "secret prompt", "secret answer")]



def _item_by_item(msg: str) -> object:
    """meta_info read as before the shortcut: out's items one by one."""
    from logpipe.engines.sglang import records

    saved = records._meta_info_last
    records._meta_info_last = lambda _msg: None  # type: ignore[assignment]
    try:
        return records.finish_meta_info(msg)
    finally:
        records._meta_info_last = saved


def test_meta_info_read_from_the_end_is_the_one_read_item_by_item() -> None:
    """meta_info is read from the line's end where it is out's last item: on every
    request line of the samples it is taken that way and is what reading out's items one
    by one gives; lines where the end is not meta_info (meta_info quoted inside the
    output text, nested inside itself, not last, cut) are read item by item, the same."""
    from logpipe.engines.sglang.records import _meta_info_last

    lines = [line.split("] ", 1)[1] for path in SAMPLES.rglob("*.log")
             for line in path.read_text(errors="replace").splitlines()
             if "] Finish: " in line or "] in=" in line]
    assert len(lines) > 100
    for msg in lines:
        assert _meta_info_last(msg) is not None
        assert finish_meta_info(msg) == _item_by_item(msg)
    head = "Finish: obj=GenerateReqInput(rid='r1', text='hi'), out="
    meta = "{'id': 'r1', 'prompt_tokens': 3, 'completion_tokens': 2, 'e2e_latency': 0.5}"
    tricky = [
        head + "{'text': \"x, 'meta_info': {'prompt_tokens': 99}}\", 'meta_info': " + meta
        + "}",
        head + "{'meta_info': " + meta[:-1] + ", 'meta_info': {'prompt_tokens': 7}}}",
        head + "{'meta_info': " + meta + ", 'text': \"ends, 'meta_info': {}}\"}",
        head + "{'text': 'ok', 'meta_info': {'prompt_tokens': 5, 'x': 'abc' ... 'xyz'}}",
        head + "{'text': \"a}}\", 'meta_info': " + meta + "}   ",
        head + "{'meta_info': " + meta + "}, headers={'meta_info': {'prompt_tokens': 8}}",
    ]
    got = [finish_meta_info(msg) for msg in tricky]
    assert got == [_item_by_item(msg) for msg in tricky]
    assert got[0] is not None and got[0]["prompt_tokens"] == 3
    assert got[1] is not None and got[1]["prompt_tokens"] == 3  # (the outer one)
    assert got[2] is not None and got[2]["prompt_tokens"] == 3
    assert got[5] is not None and got[5]["prompt_tokens"] == 3  # (out's, not the headers')


def test_records_the_c_lane_reads_give_the_polars_parsers_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real request log behind journald's and docker's prefixes, one record cut (a
    reject), ingested with the records' text kept: the C lane reads its ``Finish:`` lines
    (and its ``Receive:`` lines), and every table they touch is the polars parser's."""
    from logpipe.engines.sglang import fastlane

    real = (SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log").read_text()
    lines = real.splitlines()
    lines.append(next(line for line in lines if "] Finish: " in line)[:-40])
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "journald.log").write_text("".join(
        f"Dec 01 09:17:{i % 60:02d} node7 python3[4242]: {line}\n"
        for i, line in enumerate(lines)))
    (logs / "docker.log").write_text("".join(
        f"2026-12-01T09:17:{i % 60:02d}.{i:09d}Z {line}\n" for i, line in enumerate(lines)))
    if fastlane.enabled():
        for path in logs.iterdir():
            lanes = fastlane.split_block(path.read_bytes(), 1, "2026-12-01")
            assert len(lanes.records) >= 20, path.name
    tables = []
    for lane in ("1", "0"):
        monkeypatch.setenv("LOGPIPE_FASTLANE", lane)
        db = tmp_path / f"lane-{lane}.duckdb"
        assert not ingest_paths([logs], db, keep_request_text=True).failed
        tables.append({t: query(db, f"SELECT * FROM {t} ORDER BY ALL") for t in (
            "request_metrics", "rejects", "line_prefixes", "runs", "events")})
    assert len(tables[0]["request_metrics"]) >= 40 and tables[0]["rejects"]
    assert any("prompt_text" in repr(row) for row in tables[0]["request_metrics"])
    assert tables[0]["line_prefixes"]
    assert tables[0] == tables[1]
