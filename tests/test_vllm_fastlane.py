"""The vLLM log's C lane (``logpipe/engines/vllm/_fastlane.c``) against the polars lane:
the same access rows for the same lines, edge lines included, and the same tables for
every vLLM log of the samples, whole and cut into small blocks."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from logpipe.engines.vllm import logparser
from logpipe.readers import line_blocks

SAMPLES = Path(__file__).resolve().parents[1] / "sample_logs"

pytestmark = pytest.mark.skipif(logparser._fastlane is None,
                                reason="the vLLM C lane is not built")

ROW = ["idx", "client", "method", "path", "protocol", "status", "status_text"]

EDGE_LINES = [
    'INFO:     127.0.0.1:40188 - "POST /v1/completions HTTP/1.1" 200 OK',
    '2026-12-04T15:00:09.457779063Z INFO:     127.0.0.1:40188 - "GET /health HTTP/1.1" 200 OK',
    '2026-12-04T15:00:09Z INFO:  10.0.0.1:1 - "GET /metrics HTTP/1.0" 404 Not Found',
    '2026-12-04T15:00:09.Z INFO:  10.0.0.1:1 - "GET /metrics HTTP/1.0" 404 Not Found',
    '2026-12-04 15:00:09.1Z INFO:  10.0.0.1:1 - "GET /metrics HTTP/1.0" 200 OK',
    'INFO:     ::1:8000 - "GET /v1/models HTTP/1.1" 200 OK',
    'INFO:     fe80::1:8000 - "GET /v1/models HTTP/2" 200',
    'INFO:     host:abc - "GET /v1/models HTTP/1.1" 200 OK',
    'INFO:     :8000 - "GET /v1/models HTTP/1.1" 200 OK',
    'INFO:     host: - "GET /v1/models HTTP/1.1" 200 OK',
    'INFO:     host:80:90 - "GET /x HTTP/1.1" 200 OK',
    'INFO: 127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK   ',
    'INFO: 127.0.0.1:5 - "GET /x HTTP/1.1" 200 ',
    'INFO: 127.0.0.1:5 - "GET /x HTTP/1.1" 200',
    'INFO: 127.0.0.1:5 - "GET /x HTTP/1.1" 2000',
    'INFO: 127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK 2',
    'INFO: 127.0.0.1:5 - "GET /x HTTP/1.1" 200 Too Many  Requests',
    'INFO:127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "get /x HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /x[1] HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /a"b HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET  /x HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /x HTTP/" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /x HTTPS/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /x HTTP/1.1"  200 OK',
    'INFO:     127.0.0.1:5 - "POST /start_profile HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "POST /stop_profile HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /start_profile HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "POST /stop_profiles HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK\r',
    'INFO:     127.0.0.1:5 - "GET /caf\u00e9 HTTP/1.1" 200 OK',
    '\x1b[32mINFO\x1b[0m:     127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK\tx',
    '(APIServer pid=1) INFO:     127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK',
    'INFO 12-04 15:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s',
    ' INFO:     127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK',
    'WARNING:  127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK',
    '',
    'INFO:',
    'INFO:     127.0.0.1:5 - "GET /x HTTP/1.1" 20',
]


def _equal(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    try:
        assert_frame_equal(a, b)
    except AssertionError:
        return False
    return True


def _both(lines: list[str]) -> tuple[pl.DataFrame, pl.DataFrame, logparser.Lines]:
    block = ("\n".join(lines) + "\n").encode()
    fast_lines, fast = logparser.split_block(block)
    slow = logparser.plain_access(lines)
    return fast, slow, fast_lines


def _plain(text: str) -> bool:
    return all(" " <= c <= "~" for c in text)


def _same_rows(fast: pl.DataFrame, slow: pl.DataFrame, lines: list[str]) -> None:
    """The C lane's rows are the polars lane's; the lines it leaves to the line parser
    that polars would take are lines with a control or non-ASCII character (a carriage
    return, an accent: the line parser reads those the same, line by line)."""
    ours = set(fast["idx"].to_list())
    left = slow.filter(~pl.col("idx").is_in(list(ours)))
    assert all(not _plain(lines[i]) for i in left["idx"].to_list())
    assert_frame_equal(fast.select(ROW), slow.filter(pl.col("idx").is_in(list(ours)))
                       .select(ROW))


def _tables(lines: list[str], fast: bool, monkeypatch: pytest.MonkeyPatch
            ) -> dict[str, pl.DataFrame]:
    monkeypatch.setenv("LOGPIPE_FASTLANE", "1" if fast else "0")
    parser = logparser.VLLMLogParser(None, "2026-12-06")
    block = ("\n".join(lines) + "\n").encode()
    chunk = parser.finish(parser.prepare(block, 1))
    # (rows in line order: the lanes append a stretch's rows after the parsed lines')
    return {name: frame.sort("line_no", maintain_order=True)
            for name, frame in chunk.tables.items()}


def test_edge_lines_read_as_the_polars_lane_reads_them(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    fast, slow, lines = _both(EDGE_LINES)
    _same_rows(fast, slow, EDGE_LINES)
    both = [_tables(EDGE_LINES, on, monkeypatch) for on in (True, False)]
    assert both[0].keys() == both[1].keys()
    for name in both[0]:
        assert _equal(both[0][name], both[1][name]), name
    taken = set(fast["idx"].to_list())
    # some lines of each kind: taken, and left to the line parser
    assert 5 < len(taken) < len(EDGE_LINES) - 10
    assert lines.slow_idx == [i for i in range(len(EDGE_LINES)) if i not in taken]
    assert lines.slow == [EDGE_LINES[i] for i in lines.slow_idx]
    for row, i in enumerate(fast["idx"].to_list()):  # each row knows its line's bytes
        assert lines.access_line(i, row) == EDGE_LINES[i]


def test_random_edits_of_access_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines of the access shape with a character replaced, inserted or removed: the
    lanes agree line by line on what is an access line and what its fields are."""
    rnd = random.Random(7)
    alphabet = ' "-:.[]/0123456789AZaz_\tOKHTP\u00e9'
    lines = []
    for _ in range(3000):
        text = list(rnd.choice(EDGE_LINES[:3]))
        for _ in range(rnd.randint(1, 2)):
            i = rnd.randrange(len(text) + 1)
            op = rnd.randrange(3)
            if op == 0 and i < len(text):
                text[i] = rnd.choice(alphabet)
            elif op == 1:
                text.insert(i, rnd.choice(alphabet))
            elif i < len(text):
                del text[i]
        lines.append("".join(text).replace("\n", ""))
    fast, slow, _ = _both(lines)
    assert fast.height > 300
    _same_rows(fast, slow, lines)
    both = [_tables(lines, on, monkeypatch) for on in (True, False)]
    for name in both[1]:
        assert _equal(both[0][name], both[1][name]), name


def _vllm_logs() -> list[Path]:
    out = []
    for path in sorted(SAMPLES.rglob("*.log")):
        head = path.read_bytes()[:200_000]
        if "vllm" in str(path.relative_to(SAMPLES)).lower() or b"vLLM" in head:
            out.append(path)
    return out


def _parse(path: Path, block_bytes: int, fast: bool, monkeypatch: pytest.MonkeyPatch
           ) -> dict[str, pl.DataFrame]:
    monkeypatch.setenv("LOGPIPE_FASTLANE", "1" if fast else "0")
    parser = logparser.VLLMLogParser(None, "2026-12-06")
    tables: dict[str, list[pl.DataFrame]] = {}
    with open(path, "rb") as fh:
        chunks = [parser.finish(parser.prepare(block, 1))
                  for block in line_blocks(fh, block_bytes)]
    end = parser.end()
    for chunk in [*chunks, end] if end is not None else chunks:
        for name, frame in chunk.tables.items():
            tables.setdefault(name, []).append(frame)
    return {name: pl.concat(frames).sort("line_no", maintain_order=True)
            for name, frames in tables.items()}


@pytest.mark.parametrize("block_bytes", [1 << 22, 700])
def test_every_vllm_sample_parses_the_same_in_both_lanes(
        block_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = _vllm_logs()
    assert len(logs) >= 20
    access = 0
    for path in logs:
        fast = _parse(path, block_bytes, True, monkeypatch)
        slow = _parse(path, block_bytes, False, monkeypatch)
        assert fast.keys() == slow.keys(), path
        for name in fast:
            assert _equal(fast[name], slow[name]), f"{path.name}: {name}"
        access += fast["http_requests"].height if "http_requests" in fast else 0
    assert access > 0  # (the samples hold access lines: the lane had rows to take)


def test_arbitrary_bytes_split_into_lines_and_rows() -> None:
    """Random bytes (access-line pieces, controls, invalid UTF-8) never crash the scan;
    every line is a row or left to the line parser, once."""
    rnd = random.Random(11)
    pieces = [b"INFO:", b"     ", b"127.0.0.1:5", b" - \"", b"GET ", b"/x ", b"HTTP/1.1",
              b"\" ", b"200", b" OK", b"\n", b"\r", b"\x00", b"\xff\xfe", b"\xc3\xa9",
              b"2026-12-04T15:00:09.1Z ", b":", b"-", b"[", b"\""]
    for _ in range(300):
        block = b"".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 60))) + b"\n"
        lines, access = logparser.split_block(block)
        n = block.count(b"\n")
        assert lines.count == n
        assert sorted(access["idx"].to_list() + lines.slow_idx) == list(range(n))
        text = block.decode("utf-8", errors="replace").split("\n")
        assert lines.slow == [text[i] for i in lines.slow_idx]


def test_colour_codes_are_stripped_where_the_pattern_finds_them() -> None:
    """The line parser skips the colour substitution on lines that hold neither an ESC
    byte nor a lost one's ``[<digit>``: what it reads is what it reads once every code
    the pattern finds is stripped, ESC or not."""
    from datetime import date

    from logpipe.engines.vllm.parser import ANSI, LogState, Parser

    lines = [
        "\x1b[32mINFO\x1b[0m 12-04 15:00:01 [loggers.py:1] Engine 000: Avg prompt "
        "throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 "
        "reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, Prefix cache hit rate: 0.0%",
        "[32mINFO[0m 12-04 15:00:02 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 "
        "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 "
        "reqs, GPU KV cache usage: 3.0%, Prefix cache hit rate: 0.0%",
        "INFO 12-04 15:00:03 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 "
        "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 "
        "reqs, GPU KV cache usage: 3.0%, Prefix cache hit rate: 0.0%",
        "[1;33mWARNING[0m 12-04 15:00:04 [x.py:2] something [7] happened",
        "\x1b[33mWARNING\x1b[0m 12-04 15:00:05 [x.py:2] a [list] and [1] index",
        "WARNING 12-04 15:00:06 [x.py:2] [33mlow memory [0m(a lost code after a space)",
    ]

    def rows(texts: list[str]) -> dict[str, list[dict[str, object]]]:
        parser = Parser(LogState(), date(2026, 12, 6))
        for i, text in enumerate(texts):
            parser.feed(i + 1, text)
        out = parser.take()
        return {"stats": out.stats, "events": out.events}

    stripped = [ANSI.sub("", t) for t in lines]
    assert stripped != lines
    assert rows(lines) == rows(stripped)
    # (a lost code right after a word is not one the pattern strips: "WARNING[0m")
    assert len(rows(lines)["stats"]) == 3 and len(rows(lines)["events"]) == 2
