"""The vLLM log's C lane (``logpipe/engines/vllm/_fastlane.c``) against the polars lane
and the line parser: the same access rows for the same lines, the same stats and spec rows
for the lines it reads of those, edge lines included, and the same tables for every vLLM
log of the samples, whole and cut into small blocks."""

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


def _edited(rnd: random.Random, items: list, choices: list | str, edits: int) -> list:
    """``items`` (characters, pieces) with ``edits`` of them replaced, added or dropped at
    random places."""
    out = list(items)
    for _ in range(edits):
        i = rnd.randrange(len(out) + 1)
        op = rnd.randrange(3)
        if op == 0 and i < len(out):
            out[i] = rnd.choice(choices)
        elif op == 1:
            out.insert(i, rnd.choice(choices))
        elif i < len(out):
            del out[i]
    return out


def test_random_edits_of_access_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines of the access shape with a character replaced, inserted or removed: the
    lanes agree line by line on what is an access line and what its fields are."""
    rnd = random.Random(7)
    alphabet = ' "-:.[]/0123456789AZaz_\tOKHTP\u00e9'
    lines = []
    for _ in range(3000):
        text = _edited(rnd, list(rnd.choice(EDGE_LINES[:3])), alphabet, rnd.randint(1, 2))
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
        assert lines.stats is None and lines.spec is None  # (no piece makes one)
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


STATS = ("(APIServer pid=12692) INFO 12-04 15:00:10 [loggers.py:534] Engine 098: Avg prompt "
         "throughput: 183.1 tokens/s, Avg generation throughput: 611.7 tokens/s, Running: 7 "
         "reqs, Waiting: 0 reqs, CPU KV cache usage: 8.5%, Prefix cache hit rate: 0.0%")
SPEC = ("(APIServer pid=60424) INFO 12-04 15:00:10 [metrics.py:796] SpecDecoding metrics: "
        "Mean acceptance length: 5.73, Accepted throughput: 16.83 tokens/s, Drafted "
        "throughput: 78.23 tokens/s, Accepted: 434 tokens, Drafted: 231 tokens, Per-position "
        "acceptance rate: 0.880, 0.139, 0.567, 0.411, Avg Draft acceptance rate: 35.8%")
DOCKER = "2026-12-04T15:00:10.371243911Z "
RECORD_LINES = [
    STATS, SPEC, DOCKER + STATS, DOCKER + SPEC,
    "1999-12-04T15:00:10Z " + STATS,  # (a docker stamp of no 20xx year: no wrapper year)
    "2027-01-01T00:00:01Z " + STATS.replace("12-04 15:00:10", "12-31 23:59:59"),
    "2026-12-31T23:59:59Z " + STATS.replace("12-04 15:00:10", "01-01 00:00:01"),
    STATS.replace("Engine 098: ", ""), SPEC.replace("metrics: ", "metrics: Engine 003: "),
    SPEC.replace("metrics: ", "metrics:    "), STATS.replace("(APIServer pid=12692) ", ""),
    STATS.replace("(APIServer pid=12692)", "(EngineCore_DP0 rank=1 pid=7, ip=10.0.0.1)"),
    STATS.replace("(APIServer pid=12692)", "(Worker[0] pid=3)  "),
    STATS.replace("(APIServer pid=12692)", "(Bad-Name pid=3)"),
    STATS.replace("(APIServer pid=12692)", "(APIServer pid=)"),
    STATS.replace("INFO ", "INFO    "), STATS.replace("INFO ", "WARNING "),
    STATS.replace("15:00:10 ", "15:00:10.123 "), STATS.replace("15:00:10 ", "15:00:10. "),
    STATS.replace("[loggers.py:534]", "loggers.py:534]"),
    STATS.replace("[loggers.py:534]", "[loggers.py:534"),
    STATS.replace("[loggers.py:534]", "[.py:534]"), STATS.replace("[loggers.py:534]", "[a.py:]"),
    STATS.replace("[loggers.py:534]", "[vllm/v1/metrics/loggers.py:534]"),
    STATS.replace("12-04", "02-30"), STATS.replace("15:00:10", "25:00:10"),
    STATS.replace("183.1", "nan"), STATS.replace("611.7", "-0.0"),
    STATS.replace("8.5%", "nan%"), STATS.replace("8.5%", "0.12345%"),
    STATS.replace("8.5%", "100.0000%"), STATS.replace("8.5%", "1234567890%"),
    STATS.replace("183.1", "1234567890.1234567"), STATS.replace("183.1", "0.1000000000000001"),
    STATS.replace("183.1", "183."), STATS.replace("183.1", "1.8e2"),
    STATS.replace("Running: 7", "Running: 12345678901234567890"),
    STATS.replace("CPU KV", "INFO KV"), STATS.replace("CPU KV", "GPU KV"),
    STATS.replace("CPU KV", "XPUSE KV"), STATS.replace("CPU KV", "G KV"),
    STATS.replace(", Prefix cache hit rate: 0.0%", ""),
    STATS.replace(", Prefix cache hit rate: 0.0%", ", Prefix cache hit rate: 0.0%   "),
    STATS.replace("Engine 098", "Engine 98"), STATS.replace("Engine 098: ", "2 Engines "
                                                            "Aggregated: "),
    STATS.replace("Engine 098: ", "Engine 098:  "), STATS.replace("] Engine", "]  Engine"),
    STATS + ", Preemptions: 1", STATS.replace("Waiting", "Pending"),
    STATS + " vLLM", STATS.replace("tokens/s, Running", "tokens/s, Running:"),
    STATS.replace("(APIServer", "[31m(APIServer"), STATS + " [1]",
    STATS + " INFO 12-04 15:00:11 [x.py:1] again",
    SPEC.replace("0.880, 0.139, 0.567, 0.411, ", "nan, 0.5, "),
    SPEC.replace("0.880, 0.139, 0.567, 0.411, ", "0.880, 0.139"),
    SPEC.replace("0.880, 0.139, 0.567, 0.411, ", "0.8800.139, "),
    SPEC.replace("0.880, 0.139, 0.567, 0.411, ", ""),
    SPEC.replace("35.8%", "nan%"), SPEC.replace("5.73", "nan"),
    SPEC.replace("SpecDecoding metrics:", "Speculative metrics:"),
    SPEC.replace("Accepted: 434", "Accepted: -434"),
    SPEC + " Avg prompt throughput: 1.0 tokens/s",
    STATS[:150], STATS[150:],  # (a stats line a terminal wrapped, and its rest)
    STATS.replace("cache usage", "cache us"), "age: 8.5%, Prefix cache hit rate: 0.0%",
    STATS.replace("cache usage", "cache us"), STATS,  # (the rest is a whole stats line)
    "INFO 12-04 15:00:11 [loggers.py:1] Prefix cache hit rate: GPU: 1.0%, CPU: 2.0%",
    'INFO:     127.0.0.1:5 - "GET /x HTTP/1.1" 200 OK',
    "(APIServer pid=1) INFO 12-04 15:00:00 [api_utils.py:1] vLLM API server version 0.32.0",
    STATS, SPEC, SPEC, SPEC.replace("metrics: ", "metrics: Engine 098: "),
    STATS.replace("0.0%", "1.5%"),  # (V0's hit rate line sets the last stats row's)
    "INFO 12-04 15:00:11 [loggers.py:1] Prefix cache hit rate: GPU: 7.0%, CPU: 2.0%",
]


def _all_tables(lines: list[str], fast: bool, monkeypatch: pytest.MonkeyPatch,
                block_bytes: int = 1 << 22) -> dict[str, pl.DataFrame]:
    import io

    monkeypatch.setenv("LOGPIPE_FASTLANE", "1" if fast else "0")
    parser = logparser.VLLMLogParser(None, "2026-12-06")
    data = ("\n".join(lines) + "\n").encode()
    chunks = [parser.finish(parser.prepare(b, 1)) for b in line_blocks(io.BytesIO(data),
                                                                          block_bytes)]
    end = parser.end()
    tables: dict[str, list[pl.DataFrame]] = {}
    for chunk in [*chunks, end] if end is not None else chunks:
        for name, frame in chunk.tables.items():
            tables.setdefault(name, []).append(frame)
    return {name: pl.concat(frames).sort("line_no", maintain_order=True)
            for name, frames in tables.items()} | {"state": pl.DataFrame(
                {"state": [parser.state_json()]})}


@pytest.mark.parametrize("block_bytes", [1 << 22, 900])
def test_stats_and_spec_lines_read_as_the_line_parser_reads_them(
        block_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of the lane's stats and spec lines gives the line parser's row (its values,
    its stamp's year, its run, the stats line a spec line goes with), and the state after
    the block is the line parser's; the lines it cannot be sure of are left to it."""
    monkeypatch.setenv("LOGPIPE_FASTLANE", "1")
    lines, _ = logparser.split_block(("\n".join(RECORD_LINES) + "\n").encode())
    assert lines.stats is not None and lines.spec is not None
    taken = set(lines.stats["idx"].to_list()) | set(lines.spec["idx"].to_list())
    assert 20 < len(taken) < len(RECORD_LINES) - 30  # (of each: taken, and left)
    for i in taken:
        assert RECORD_LINES[i].isascii() and "[3" not in RECORD_LINES[i]
    both = [_all_tables(RECORD_LINES, on, monkeypatch, block_bytes) for on in (True, False)]
    assert both[0].keys() == both[1].keys()
    for name in both[0]:
        assert_frame_equal(both[0][name], both[1][name])
    assert both[0]["vllm_stats"].height > 40 and both[0]["vllm_spec_metrics"].height > 10
    assert both[0]["vllm_stats"]["prefix_hit_rate"][-1] == 0.07
    # (a count beyond 64 bits is a reject of its line, not a block that cannot be written)
    assert both[0]["rejects"]["reason"].str.contains("too big").sum() == 1


def test_random_edits_of_stats_and_spec_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stats and spec lines with a character replaced, inserted or removed, among
    access lines: the same tables in both lanes."""
    rnd = random.Random(5)
    alphabet = " -:.,%[]()0123456789AEIINOSZaenps_\t\u00e9"
    base = [STATS, SPEC, DOCKER + STATS, DOCKER + SPEC]
    lines = []
    for _ in range(3000):
        text = _edited(rnd, list(rnd.choice(base)), alphabet, rnd.randint(0, 2))
        lines.append("".join(text).replace("\n", ""))
        if rnd.random() < 0.3:
            lines.append(EDGE_LINES[0])
    split, _ = logparser.split_block(("\n".join(lines) + "\n").encode())
    assert split.stats is not None and split.stats.height > 500
    assert split.spec is not None and split.spec.height > 500
    assert len(split.slow) > 500
    both = [_all_tables(lines, on, monkeypatch) for on in (True, False)]
    assert both[0].keys() == both[1].keys()
    for name in both[0]:
        assert_frame_equal(both[0][name], both[1][name])


def test_numbers_read_as_python_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throughputs, rates and percentages of every length the lane reads (and some it
    leaves): the same doubles as ``float()`` and ``_pct``'s rounding give."""
    rnd = random.Random(3)

    def number(max_int: int, max_frac: int) -> str:
        text = str(rnd.randrange(10 ** rnd.randint(1, max_int)))
        frac = rnd.randint(0, max_frac)
        return text + ("." + "".join(rnd.choice("0123456789") for _ in range(frac))
                       if frac else "")

    lines = []
    for _ in range(2000):
        lines.append(STATS.replace("183.1", number(12, 8)).replace("611.7", number(3, 14))
                     .replace("8.5%", number(9, 6) + "%").replace("0.0%", number(3, 4) + "%"))
        lines.append(SPEC.replace("5.73", number(2, 13)).replace("0.139", number(1, 15))
                     .replace("35.8%", number(3, 5) + "%"))
    split, _ = logparser.split_block(("\n".join(lines) + "\n").encode())
    assert split.stats is not None and 500 < split.stats.height < 2000  # (some left)
    assert split.spec is not None and 500 < split.spec.height < 2000
    both = [_all_tables(lines, on, monkeypatch) for on in (True, False)]
    for name in both[0]:
        assert_frame_equal(both[0][name], both[1][name], check_exact=True)


def test_pieces_of_records_split_into_lines_and_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random runs of the pieces of stats and spec lines (and controls, invalid UTF-8):
    every line is an access, stats or spec row or left to the line parser, once, and the
    tables are the line parser's."""
    rnd = random.Random(13)
    pieces = [b"(APIServer pid=1) ", b"(W[0] rank=2 pid=3, ip=x) ", b"INFO ", b"INFO  ",
              b"12-04 15:00:10", b".5", b" [a.py:1] ", b"[b.py:2] ", b"Engine 000: ",
              b"Avg prompt throughput: ", b"1.5", b"nan", b"-2", b" tokens/s, ",
              b"Avg generation throughput: ", b"Running: ", b"7", b" reqs, Waiting: ",
              b" reqs, ", b"GPU", b" KV cache usage: ", b"%", b", Prefix cache hit rate: ",
              b"SpecDecoding metrics: ", b"Mean acceptance length: ", b", ",
              b"Accepted throughput: ", b"Drafted throughput: ", b"Accepted: ",
              b" tokens, Drafted: ", b" tokens, Per-position acceptance rate: ",
              b"Avg Draft acceptance rate: ", b"2026-12-04T15:00:09.1Z ", b"\n", b"\r",
              b"\x00", b"\xff", b"\xc3\xa9", b"[1", b" "]
    stats = [b"(APIServer pid=1) ", b"INFO ", b"12-04 15:00:10", b" [a.py:1] ",
             b"Engine 000: ", b"Avg prompt throughput: ", b"1.5", b" tokens/s, ",
             b"Avg generation throughput: ", b"nan", b" tokens/s, ", b"Running: ", b"7",
             b" reqs, Waiting: ", b"7", b" reqs, ", b"GPU", b" KV cache usage: ", b"1.5", b"%",
             b", Prefix cache hit rate: ", b"-2", b"%"]
    spec = [b"2026-12-04T15:00:09.1Z ", b"INFO ", b"12-04 15:00:10", b" [a.py:1] ",
            b"SpecDecoding metrics: ", b"Mean acceptance length: ", b"1.5", b", ",
            b"Accepted throughput: ", b"1.5", b" tokens/s, ", b"Drafted throughput: ", b"nan",
            b" tokens/s, ", b"Accepted: ", b"7", b" tokens, Drafted: ", b"7",
            b" tokens, Per-position acceptance rate: ", b"1.5", b", ", b"nan", b", ",
            b"Avg Draft acceptance rate: ", b"1.5", b"%"]
    blocks = []
    for _ in range(400):
        lines = []
        for _ in range(rnd.randint(1, 8)):
            line = _edited(rnd, rnd.choice([stats, spec]), pieces, rnd.choice([0, 0, 1, 2, 3]))
            lines.append(b"".join(line) + b"\n")
        blocks.append(b"".join(lines))
    taken = 0
    for block in blocks:
        lines, access = logparser.split_block(block)
        n = block.count(b"\n")
        assert lines.count == n
        records = [i for t in (lines.stats, lines.spec) if t is not None
                   for i in t["idx"].to_list()]
        taken += len(records)
        assert sorted(access["idx"].to_list() + lines.slow_idx + records) == list(range(n))
    assert taken > 100
    text = b"".join(blocks).decode("utf-8", errors="replace").replace("\r", "").split("\n")
    both = [_all_tables(text, on, monkeypatch, 2048) for on in (True, False)]
    assert both[0].keys() == both[1].keys()
    for name in both[0]:
        assert_frame_equal(both[0][name], both[1][name])
