"""Several new SGLang logs parsed as one block give, file by file, what each gives parsed
alone: rows, runs, state, noise (:func:`logpipe.engines.sglang.logparser.parse_files`)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from logpipe.engines.parsing import Chunk
from logpipe.engines.sglang import fastlane, logparser
from logpipe.ingest import ahead
from logpipe.ingest.logfile import parse_whole
from logpipe.readers import line_blocks

SAMPLES = Path(__file__).resolve().parents[1] / "sample_logs"
DAY = "2026-12-01"

DECODE = ("[{t} TP0] Decode batch. #running-req: 1, #token: 1005, token usage: 0.00, "
          "gen throughput (token/s): 78.13, #queue-req: 0")
ARGS = "[{t} TP0] server_args=ServerArgs(model_path='m', tp_size=1, speculative_algorithm=None)"
ERROR = "[{t} TP0] Scheduler hit an exception: Traceback (most recent call last):"
EDGES = {
    # a traceback still open at the file's end
    "open_error": [ARGS.format(t="23:59:50"), DECODE.format(t="23:59:55"),
                   ERROR.format(t="23:59:58"), '  File "x.py", line 1, in <module>',
                   "ValueError: x"],
    # unprefixed lines first (they would continue the file before's traceback), midnight
    "unprefixed_head": ['  File "z.py", line 3', "RuntimeError: y", DECODE.format(t="23:59:59"),
                        DECODE.format(t="00:00:02"), DECODE.format(t="00:00:05")],
    # a KeyboardInterrupt first (the one before must not be taken as chained into it)
    "interrupt_first": [ERROR.format(t="10:00:00"), '  File "x.py", line 1, in <module>',
                        "KeyboardInterrupt", DECODE.format(t="10:00:01")],
    "chained_last": [ARGS.format(t="09:00:00"), DECODE.format(t="09:00:01"),
                     "[09:00:02 TP0] Traceback (most recent call last):",
                     '  File "y.py", line 2, in f', "ValueError: boom", "",
                     "During handling of the above exception, another exception occurred:"],
    # fast lines before the first launch, two launches
    "two_launches": [DECODE.format(t="08:00:00"), ARGS.format(t="08:00:01"),
                     DECODE.format(t="08:00:02"), ARGS.format(t="08:00:03"),
                     DECODE.format(t="08:00:04")],
    # the clock back by a night, a traceback, a fast line last
    "error_then_fast": [DECODE.format(t="23:00:00"), DECODE.format(t="01:00:00"),
                        ERROR.format(t="01:00:01"), '  File "x.py", line 1, in <module>',
                        DECODE.format(t="01:00:02")],
}


def _block(data: bytes) -> bytearray | None:
    blocks = list(line_blocks(io.BytesIO(data), 1 << 24))
    return blocks[0] if len(blocks) == 1 else None


def _sample_blocks() -> list[tuple[str, bytearray]]:
    out = []
    for path in sorted(SAMPLES.rglob("*.log")):
        block = _block(path.read_bytes())
        if block is not None and len(block) <= ahead.TOGETHER_BYTES:
            out.append((str(path.relative_to(SAMPLES)), block))
    out += [(name, bytearray(("\n".join(lines) + "\n").encode()))
            for name, lines in EDGES.items()]
    return out


def _alone(block: bytearray) -> tuple[logparser.SGLangLogParser, Chunk]:
    parser = logparser.make_parser(None, DAY)
    return parser, parser.finish(parser.prepare(block, 1))


def _runs(chunk: Chunk) -> list[tuple]:
    return sorted((r.seq, r.first_line, r.first_ts, r.last_ts, sorted(r.era.items()),
                   sorted(r.facts.items(), key=str)) for r in chunk.runs)


def _same(name: str, alone: tuple[logparser.SGLangLogParser, Chunk],
          together: tuple[logparser.SGLangLogParser, Chunk]) -> None:
    (pa, a), (pt, t) = alone, together
    assert pa.state_json() == pt.state_json(), name
    assert (a.noise, a.unread, a.continuation, a.may_hold_console) == \
        (t.noise, t.unread, t.continuation, t.may_hold_console), name
    assert a.tables.keys() == t.tables.keys(), name
    for table, frame in a.tables.items():
        other = t.tables[table]
        assert frame.height == other.height, (name, table)
        if frame.height == 0:
            continue
        # rows are stored unordered; a column of nulls alone is typed Null, among other
        # files' values by their type: the same NULLs in the table
        other = other.cast({c: pl.Null for c in frame.columns if frame[c].dtype == pl.Null})
        try:
            assert_frame_equal(frame.sort(frame.columns, nulls_last=True),
                               other.sort(other.columns, nulls_last=True))
        except AssertionError as exc:
            raise AssertionError(f"{name} {table}: {exc}") from None
    assert _runs(a) == _runs(t), name


@pytest.mark.parametrize("lane", ["fast", "polars"])
@pytest.mark.parametrize("seed", [1, 2])
def test_files_parsed_together_are_each_as_parsed_alone(lane: str, seed: int,
                                                        monkeypatch: pytest.MonkeyPatch):
    if lane == "fast" and not fastlane.AVAILABLE:
        pytest.skip("C fast lane not built")
    monkeypatch.setenv("LOGPIPE_FASTLANE", "1" if lane == "fast" else "0")
    blocks = _sample_blocks()
    assert len(blocks) > 60  # every era, wrapper, restart and engine of the samples
    rnd = random.Random(seed)
    rnd.shuffle(blocks)
    together = 0
    while blocks:
        n = rnd.randint(2, 25)
        group, blocks = blocks[:n], blocks[n:]
        parsed = logparser.parse_files([b for _, b in group], DAY)
        assert len(parsed) == len(group)
        for (name, block), one in zip(group, parsed, strict=True):
            _same(name, _alone(block), one)
            together += 1
    assert together > 60


def test_edge_files_in_every_order_of_two():
    """Each edge file after each other one: nothing of a file reaches the next."""
    edges = [(name, bytearray(("\n".join(lines) + "\n").encode()))
             for name, lines in EDGES.items()]
    for first in edges:
        for second in edges:
            parsed = logparser.parse_files([first[1], second[1]], DAY)
            for (name, block), one in zip((first, second), parsed, strict=True):
                _same(f"{first[0]}+{second[0]}: {name}", _alone(block), one)


def test_files_that_cannot_be_parsed_together_are_parsed_alone(tmp_path: Path):
    """Logs of none but fast lines have no slow line to number runs by: the worker's look
    parses each alone, and the result is each file's parse."""
    decode = [DECODE.format(t=f"08:00:0{i}") for i in range(5)]
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"only-decode-{i}.log")
        paths[-1].write_text("\n".join(decode[: i + 2]) + "\n")
    if fastlane.enabled():
        with pytest.raises(ValueError):
            logparser.parse_files([_block(p.read_bytes()) for p in paths], DAY)
    looked = ahead._look_many(paths, False, set())
    for path, found in zip(paths, looked, strict=True):
        assert found is not None and found.parsed is not None
        parsed = found.parsed
        whole = parse_whole(path, path.stat(), ahead.engine_for_kind(found.kind), False)
        assert parsed.stat == whole.stat
        assert parsed.parser.state_json() == whole.parser.state_json()
        assert parsed.blocks[0][0] == whole.blocks[0][0]
        _same(path.name, (whole.parser, whole.blocks[0][2]),
              (parsed.parser, parsed.blocks[0][2]))
