"""The C fast lane gives exactly the rows of the polars parser, on real and generated logs.

Every log is parsed twice, block by block as ingest does (``LOGPIPE_FASTLANE=1`` and
``=0``), and every output of every block is compared: batches, HTTP rows, events, rejects,
runs with their era features, noise, continuations, launches and the carried state.
"""

from __future__ import annotations

import io
import random
import shutil
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from logpipe.engines.sglang import fastlane
from logpipe.engines.sglang.events import UNANCHORED_EVENT_PHRASES
from logpipe.engines.sglang.parser import LogState, finish_chunk, prepare_block
from logpipe.readers import line_blocks

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"

needs_lane = pytest.mark.skipif(not fastlane.AVAILABLE, reason="C fast lane not built")


def test_extension_is_built_where_a_compiler_is():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the polars parser reads every line")
    assert fastlane.AVAILABLE, ("a C compiler is present but the C lane is off: "
                                + fastlane.UNAVAILABLE)


@needs_lane
def test_both_lanes_read_one_table_of_keys():
    """The printed keys are batches.CANONICAL's alone: the C lane gets them with every
    scan, and its typed slots are that table's columns."""
    from logpipe.engines.sglang.batches import CANONICAL, COLUMNS

    slots = [name for name, _ in fastlane._fastlane.CANON_SLOTS]
    assert [(k.decode(), slots[i]) for k, i in fastlane._KEYS] == [
        (k, col) for k, (col, _) in CANONICAL.items()]
    assert set(slots) <= set(COLUMNS)
    # a key the table gains is read by the C lane with no change to the C source
    line = b"[2026-03-01 10:00:24 TP0] Decode batch. #running-req: 3, #token: 9, " \
           b"gen throughput (token/s): 5.00, #queue-req: 0\n"
    renamed = tuple((b"#running" if k == b"#running-req" else k, i) for k, i in fastlane._KEYS)
    out = fastlane._fastlane.scan(line.replace(b"#running-req", b"#running"),
                                  fastlane._PHRASES, renamed, b" graph", fastlane.ANY_LINE,
                                  fastlane.RECORD_LIKE)
    running = fastlane._kept(out["batch"], fastlane._BATCH_KINDS)["running_req"].to_list()
    assert running == [3]


def test_a_lane_whose_slots_are_not_the_table_is_refused():
    class Lane:
        CANON_SLOTS = (("new_seq", "float"),)  # batches.COLUMNS says Int64

    with pytest.raises(ValueError, match="new_seq"):
        fastlane._keys(Lane)

    class Short:
        CANON_SLOTS = (("new_seq", "int"), ("cuda_graph", "bool"))

    with pytest.raises(ValueError, match="no C slot"):
        fastlane._keys(Short)


def _parse(data: bytes, block_bytes: int, monkeypatch: pytest.MonkeyPatch, fast: bool
           ) -> dict[str, object]:
    monkeypatch.setenv("LOGPIPE_FASTLANE", "1" if fast else "0")
    state, line_no = LogState(), 1
    out: dict[str, list] = {k: [] for k in ("batches", "http", "events", "rejects", "runs",
                                            "requests", "phases", "prefixes")}
    extras: list[object] = []
    taken = batches_taken = 0
    for block in line_blocks(io.BytesIO(data), block_bytes):
        prepared = prepare_block(block, line_no, "2026-01-01")
        if prepared.fast is not None:
            taken += prepared.fast.batches.height + prepared.fast.http.height
            batches_taken += prepared.fast.batches.height
        line_no += block.count(b"\n")
        chunk = finish_chunk(prepared, state)
        out["batches"].append(chunk.batches)
        out["http"].append(chunk.http)
        out["events"].append(chunk.events)
        out["rejects"].append(chunk.rejects)
        out["runs"].append(chunk.runs.sort("run_seq"))
        out["requests"].append(chunk.requests)
        out["phases"].append(chunk.phases)
        out["prefixes"].append(chunk.prefixes)
        extras.append((chunk.noise, chunk.continuation,
                       [(la.run_seq, la.line_no, la.redacted, la.args_json)
                        for la in chunk.launches],
                       state.to_json()))
    return {"frames": out, "extras": extras, "taken": taken, "batches_taken": batches_taken}


def _same(data: bytes, block_bytes: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Both lanes give the same outputs; returns the lines the C lane took."""
    return _same_counts(data, block_bytes, monkeypatch)[0]


def _same_counts(data: bytes, block_bytes: int, monkeypatch: pytest.MonkeyPatch
                 ) -> tuple[int, int]:
    """As :func:`_same`; returns the lines and the batch lines the C lane took."""
    slow = _parse(data, block_bytes, monkeypatch, fast=False)
    fast = _parse(data, block_bytes, monkeypatch, fast=True)
    assert slow["extras"] == fast["extras"]
    for name, frames in slow["frames"].items():  # type: ignore[union-attr]
        for i, (a, b) in enumerate(zip(frames, fast["frames"][name], strict=True)):  # type: ignore[index]
            if "line_no" in a.columns:  # the lanes' rows are concatenated, not interleaved
                a, b = a.sort("line_no"), b.sort("line_no")
            try:
                assert_frame_equal(a, b)
            except AssertionError as exc:
                raise AssertionError(f"{name}, block {i}: {exc}") from None
    return int(fast["taken"]), int(fast["batches_taken"])  # type: ignore[call-overload]


def _sample_logs() -> list[object]:
    """Every sample log; of the real engines' recordings (the largest, one shape of line
    each) one runs by default and the others are ``slow`` (run by ``.ci/run``)."""
    keep = SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log"
    return [pytest.param(p, marks=pytest.mark.slow)
            if p.relative_to(SAMPLES).parts[0].startswith("real-") and p != keep else p
            for p in sorted(p for p in SAMPLES.rglob("*.log") if p.is_file())]


def _sample_id(p: object) -> str:
    return str(Path(str(p)).relative_to(SAMPLES))


@needs_lane
@pytest.mark.parametrize("path", _sample_logs(), ids=_sample_id)
def test_every_sample_log_parses_the_same(path: Path, monkeypatch: pytest.MonkeyPatch):
    data = path.read_bytes()
    _, batches = _same_counts(data, 1 << 20, monkeypatch)
    # many block boundaries, over the first 64 KiB (the whole of all but the real
    # recordings, which repeat one shape of line for 160 KB)
    head = data[: data.rfind(b"\n", 0, 1 << 16) + 1] if len(data) > 1 << 16 else data
    _same(head, 700, monkeypatch)
    if batches == 0:  # then both runs above read every line with polars: nothing compared
        rel = path.relative_to(SAMPLES)
        batch_lines = data.count(b"Prefill batch") + data.count(b"Decode batch")
        # only lines wrapped by another program (docker, kubectl, Ray, Python logging,
        # CRLF), left to polars, which unwraps them, or no SGLang batch line at all
        assert batch_lines == 0 or rel.parts[0] == "wrappers", \
            f"the C lane took none of the {batch_lines} batch lines of {rel}"
        pytest.skip("the C lane took no batch line of this file (wrapped lines or no "
                    "SGLang batch line): the comparison is vacuous")


@needs_lane
def test_the_lane_takes_the_plain_lines(monkeypatch: pytest.MonkeyPatch):
    data = (SAMPLES / "mission" / "eagle3-untuned" / "server.log").read_bytes()
    taken = _same(data, 1 << 20, monkeypatch)
    batch_lines = data.count(b"] Prefill batch") + data.count(b"] Decode batch")
    assert taken >= batch_lines * 0.9


def _fuzz_log(seed: int, n: int = 2500) -> bytes:
    """Lines of every shape the lane must take or refuse, in random order."""
    rnd = random.Random(seed)

    def stamp() -> str:
        if rnd.random() < 0.85:
            ms = rnd.choice(["", f".{rnd.randint(0, 999):03d}", ".5", f".{rnd.randint(0, 99)}"])
            date = rnd.choice(["2026-03-01 ", "2026-03-01 ", ""])  # "": time-only (≤0.3.2)
            return f"[{date}{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:" \
                   f"{rnd.randint(0, 59):02d}{ms}{rnd.choice(['', ' TP0', ' DP1 TP1 EP1'])}]"
        date = rnd.choice(["2026-03-01", "2026-02-29", "2024-02-29", "2026-13-01",
                           "2026-04-31"])
        t = f"{rnd.randint(0, 24):02d}:{rnd.randint(0, 59):02d}:{rnd.randint(0, 60):02d}"
        ms = rnd.choice(["", "", f".{rnd.randint(0, 999):03d}", ".5", ".1234567"])
        ranks = rnd.choice(["", " TP0", " TP1 EP1", " DP1 TP1 EP1", " PP0 TP3",
                            " ATTN_CP0 MOE_DP1 TP2", " TP12345678901", " TP0 TP1",
                            " tp0", " X_1"])
        if rnd.random() < 0.05:
            return f"[{t}{ranks}]"  # time-only: the polars parser's
        return f"[{date} {t}{ms}{ranks}]"

    def value() -> str:
        return rnd.choice([str(rnd.randint(0, 5000)), f"{rnd.random() * 100:.2f}",
                           f"{rnd.random():.4f}%", "-3", "1e5", "007", "04.06", "-03.5",
                           "0.50", "True", "False", "None", "abc", "", "1.", "full=12, swa=3",
                           "x=1", "inf", '"q"', "a\\b", "[1, 2]", "12.0", "5%"])

    keys = ["#new-seq", "#new-token", "#cached-token", "#running-req", "#queue-req",
            "#token", "#full token", "token usage", "full token usage",
            "gen throughput (token/s)", "input throughput (token/s)", "accept len",
            "accept rate", "cuda graph", "cpu graph", "cache hit rate", "#pending-token",
            "fwd occupancy", "mamba usage", "#swa token", "swa token usage", "largest-len"]

    def batch() -> str:
        head = rnd.choice(["Decode batch.", "Decode batch,", "Prefill batch.", "Prefill batch,",
                           "Decode batch [12],", "Prefill batch[7],",
                           "Prefill batch(mixed #running-req: 3)."])
        if rnd.random() < 0.05:
            head = rnd.choice(["Decode batch [x],", "Prefill batch(mixed #running-req: ).",
                               "Decode batches.", "Decode batch"])
        pairs = []
        for _ in range(rnd.randint(0, 7)):
            k = rnd.choice(keys)
            plain = (str(rnd.randint(0, 400)) if k.startswith("#") or k == "largest-len"
                     else f"{rnd.random() * 90:.2f}")
            v = plain if rnd.random() < 0.98 else value()
            if k.endswith(" graph"):
                v = rnd.choice(["True", "False", "True", "maybe"])
            pairs.append(f"{k}: {v}")
        if rnd.random() < 0.02:
            pairs.append("no colon here")
        if rnd.random() < 0.02:
            pairs.append(rnd.choice(UNANCHORED_EVENT_PHRASES) + ": 1")
        tail = rnd.choice(["", ", ", ",", " ", ", , "])
        return f"{head} {', '.join(pairs)}{tail}"

    def http() -> str:
        return rnd.choice([
            f'INFO:     127.0.0.1:{rnd.randint(1000, 65000)} - "POST /generate HTTP/1.1" 200 OK',
            'INFO:     10.0.0.2:5000 - "GET /health HTTP/1.1" 503 Service Unavailable',
            'WARNING:  10.0.0.2:5000 - "GET /v1/models HTTP/1.0" 404',
            'ERROR:    10.0.0.2:5000 - "GET /x HTTP/1.1" 500 Internal Server Error',
            'INFO:     1.2.3.4:1 - "GET /a HTTP/1.1" 200 Received sigquit',
            'INFO:     1.2.3.4:1 - "GET /a HTTP/1.1" 2000 OK',
            'INFO:     1.2.3.4:1 - "get /a HTTP/1.1" 200 OK',
        ])

    def outer() -> str:
        return rnd.choice([
            f"Dec 04 13:00:{rnd.randint(0, 59):02d} node7 python3[{rnd.randint(1, 99999)}]: ",
            "Jul  2 09:04:11 host sglang[12]: ", "sglang-1  | ", "sglang-1  |", "svc: ",
            "node7 app[12]: [12:00:00] x ",  # a bracketed time that is not the signature
            "host: [2026-03-01 10:00:00]  ",  # a stamp followed by two spaces: not it either
            "host: [2026-03-01 10:00:00] [12] ", "lbl[2026-03-01 10:00:00]", "x ",
            "INFO: ", "a [99:99:99 TP0] ",
        ])

    lines: list[str] = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.7:
            line = f"{stamp()} {batch()}"
        elif r < 0.8:  # with SGLang's prefix, or as uvicorn prints it
            line = f"{stamp()} {http()}" if rnd.random() < 0.5 else http()
        elif r < 0.82:
            line = rnd.choice(["Traceback (most recent call last):",
                               '  File "x.py", line 1, in <module>', "ValueError: boom",
                               "node-1:1:1 [0] NCCL INFO Bootstrap", ""])
        elif r < 0.83:
            line = f"{stamp()} Scheduler hit an exception: Traceback (most recent call last):"
        elif r < 0.86:
            line = (f"{stamp()} server_args=ServerArgs(model_path='m', tp_size=1, "
                    f"speculative_algorithm={rnd.choice(['None', repr('EAGLE3')])})")
        elif r < 0.88:
            line = f"{stamp()} Load weight begin. avail mem=78.54 GB"
        elif r < 0.90:
            line = f"2026-06-07T10:59:31.123456789Z {stamp()} {batch()}"
        elif r < 0.91:
            line = f"(Actor pid=12) {stamp()} {batch()} [repeated 3x across cluster]"
        elif r < 0.92:  # an outer prefix no known wrapper explains: journald, compose, ...
            line = f"{outer()}{stamp()} {batch() if rnd.random() < 0.7 else http()}"
        else:
            line = f"{stamp()} {batch()}"
            bad = rnd.choice(["\r", "\x1b[32m", "é", "\t", "\x00"])
            pos = rnd.randint(0, len(line))
            line = line[:pos] + bad + line[pos:]
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


@needs_lane
@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow)
                                         for s in (2, 3, 4, 5))])
def test_generated_logs_parse_the_same(seed: int, monkeypatch: pytest.MonkeyPatch):
    data = _fuzz_log(seed)
    taken = _same(data, 1 << 20, monkeypatch)
    assert taken > 200  # the comparison is not vacuous
    _same(data, 4096, monkeypatch)


@needs_lane
@pytest.mark.parametrize("line", [
    b"[2026-03-01 10:00:24 TP0] Decode batch. #running-req: 1, #token: 5\r",
    b"[2026-03-01 10:00:24 TP0] Decode batch. #running-req: 1, note: hit an exception",
    b"[2026-03-01 10:00:24 TP0] Decode batch. #token: full=12, swa=3",
    b"[2026-03-01 10:00:24 TP0] Decode batch. #running-req: 1.5",
    b"[2026-03-01 10:00:24 TP0] Decode batch. gen throughput (token/s): 5.",
    "[2026-03-01 10:00:24 TP0] Decode batch. note: caf\u00e9".encode(),
    # ingest looks for bench_serving summaries among the slow lines only
    b"[2026-03-01 10:00:24 TP0] Decode batch. note: Serving Benchmark Result",
])
def test_unusual_lines_are_left_to_the_polars_parser(line: bytes):
    lanes = fastlane.split_block(line + b"\n" + b"noise\n", 1, "2026-01-01")
    assert lanes.batches.height == 0
    assert list(lanes.slow_line_nos) == [1, 2]


@needs_lane
def test_time_only_stamps_take_the_date_and_roll_over_with_the_slow_lines(
        monkeypatch: pytest.MonkeyPatch):
    data = (b"[23:59:58 TP0] Decode batch. #running-req: 1, #token: 5\n"
            b"[23:59:59.25 TP0] Decode batch. #running-req: 1, #token: 6\n"
            b"[00:00:01 TP0] Load weight begin. avail mem=1.00 GB\n"
            b"[00:00:02 TP0] Decode batch. #running-req: 1, #token: 7\n"
            b"[00:00:03 TP0] Decode batch. #running-req: 1, #token: 8\n")
    monkeypatch.setenv("LOGPIPE_FASTLANE", "1")
    prepared = prepare_block(data, 1, "2026-01-01")
    # lines 1, 2, 4 and 5 (line 2 is not read by both: the slow line after it starts with
    # SGLang's stamp, so it continues nothing)
    assert prepared.fast is not None and prepared.fast.batches.height == 4
    rows = finish_chunk(prepared, LogState()).batches.sort("line_no")
    stamps = [(t.isoformat(sep=" "), raw) for t, raw in
              zip(rows["ts"], rows["ts_raw"], strict=True)]
    assert stamps == [("2026-01-01 23:59:58", "23:59:58"),
                      ("2026-01-01 23:59:59.250000", "23:59:59.25"),
                      ("2026-01-02 00:00:02", "00:00:02"), ("2026-01-02 00:00:03", "00:00:03")]
    _same(data, 1 << 20, monkeypatch)


@needs_lane
def test_mixed_chunk_heads_are_read_by_the_lane():
    line = b"[2026-03-01 10:00:24 TP0] Prefill batch(mixed #running-req: 3). #new-seq: 1\n"
    row = fastlane.split_block(line * 2, 1, "2026-01-01").batches.row(0, named=True)
    assert row["mixed_chunk"] is True and row["running_req"] == 3 and row["new_seq"] == 1


@needs_lane
def test_fast_rows_are_typed_like_the_table():
    line = (b"[2026-03-01 10:00:24.250 DP1 TP2 EP3] Decode batch [40], #running-req: 7, "
            b"#token: 812, token usage: 0.25%, cuda graph: True, gen throughput (token/s): "
            b"61.25, #queue-req: 0, accept len: 2.50, spec: \"x\", flag: None, \n")
    # the second line is handed on with the noise after it
    lanes = fastlane.split_block(line + line + b"noise\n", 10, "2026-01-01")
    row = lanes.batches.row(0, named=True)
    assert row["line_no"] == 10 and row["kind"] == "decode" and row["forward_iter"] == 40
    assert (row["dp_rank"], row["tp_rank"], row["pp_rank"], row["ep_rank"]) == (1, 2, None, 3)
    assert row["ts"].isoformat() == "2026-03-01T10:00:24.250000"
    assert row["token_usage"] == 0.25 and row["cuda_graph"] is True
    assert row["graph_label"] == "cuda graph" and row["accept_len"] == 2.5
    assert row["extra"] == '{"spec": "\\"x\\"", "flag": null}'
    assert lanes.batches.schema["dp_rank"] == pl.Int32


# ------------------------------------------------------------- hypothesis feeds the lane

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.test_never_crashes import REAL_LINES, mutate  # noqa: E402


@needs_lane
@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_real_lines_parse_the_same_in_both_lanes(data: st.DataObject,
                                                         monkeypatch: pytest.MonkeyPatch):
    picks = data.draw(st.lists(st.sampled_from(REAL_LINES), min_size=1, max_size=6))
    lines = [mutate(p, data) if data.draw(st.booleans()) else p for p in picks]
    text = "".join(ln.replace("\n", " ").replace("\r", " ") + "\n" for ln in lines)
    _same(text.encode(), 1 << 20, monkeypatch)


@needs_lane
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_scan_without_a_crash_and_every_line_once(data: bytes):
    """Arbitrary bytes straight into the C scan (under the sanitizer script, out-of-bounds
    reads fail it): every line is a batch row, an HTTP row, a quiet row or a slow line,
    once."""
    out = fastlane._fastlane.scan(data, fastlane._PHRASES, fastlane._KEYS, b" graph",
                                  fastlane.ANY_LINE, fastlane.RECORD_LIKE)
    taken = [fastlane._kept(out[t], kinds)["idx"].to_list()
             for t, kinds in (("batch", fastlane._BATCH_KINDS), ("http", fastlane._HTTP_KINDS),
                              ("quiet", fastlane._QUIET_KINDS))]
    import numpy as np

    slow = np.frombuffer(out["slow_idx"], dtype=np.int64).tolist()
    every = sorted(taken[0] + taken[1] + taken[2] + slow)
    assert every == sorted(set(every))
    assert out["lines"] == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert all(0 <= i < max(out["lines"], 1) for i in every)


@needs_lane
@pytest.mark.parametrize("wrap", [
    lambda i: f"2026-06-07T09:00:{i % 60:02d}.{i:09d}Z ",  # docker logs --timestamps
    lambda i: f"Jun 07 11:00:{i % 60:02d} node7 python3[4242]: ",  # journalctl
    lambda i: "sglang-1  | ",  # docker compose
], ids=["docker", "journald", "compose"])
def test_wrapped_batch_lines_take_the_lane(wrap, monkeypatch: pytest.MonkeyPatch):
    """A real log whose every line a container runtime, journald or compose wrapped: the
    C lane takes its batch lines (and the outer prefixes it keeps are the polars
    parser's ``line_prefixes`` rows, compared with the rest)."""
    plain = (SAMPLES / "mission" / "eagle3-untuned" / "server.log").read_text().splitlines()
    data = "".join(wrap(i) + line + "\n" for i, line in enumerate(plain)).encode()
    taken = _same(data, 1 << 20, monkeypatch)
    _same(data, 2048, monkeypatch)
    batch_lines = data.count(b"] Prefill batch") + data.count(b"] Decode batch")
    assert taken >= batch_lines * 0.9
    monkeypatch.setenv("LOGPIPE_FASTLANE", "1")
    chunk = finish_chunk(prepare_block(bytearray(data), 1, "2026-01-01"), LogState())
    outer = wrap(0).strip() != "" and not wrap(0)[0].isdigit()
    assert (chunk.prefixes.height >= batch_lines) == outer


@needs_lane
def test_blocks_of_slow_lines_make_the_next_blocks_smaller(monkeypatch: pytest.MonkeyPatch):
    """A block mostly of lines the C lane leaves to the polars parser (a launch's startup,
    a traceback) makes the next blocks ``SLOW_BLOCK_BYTES``: their frames are many times
    their size; a block of batch lines (or a request log's lines, the C lane's too) makes
    them ``PARSE_BLOCK_BYTES`` again; without the C lane every block is of slow lines."""
    from logpipe.engines.sglang import logparser

    monkeypatch.setattr(fastlane, "enabled", lambda: True)
    log = (SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log").read_bytes()
    lines = log.splitlines(keepends=True)
    startup = b"".join(line for line in lines if b"batch" not in line
                       and b"] Receive: " not in line and b"] Finish: " not in line)
    batches = b"".join(line for line in lines if b"Decode batch" in line) * 20
    parser = logparser.SGLangLogParser(None, "2026-12-01")
    assert parser.block_bytes == logparser.PARSE_BLOCK_BYTES  # a file's first block
    parser.prepare(startup, 1)
    assert parser.block_bytes == logparser.SLOW_BLOCK_BYTES < logparser.PARSE_BLOCK_BYTES
    parser.prepare(batches, 1 + startup.count(b"\n"))
    assert parser.block_bytes == logparser.PARSE_BLOCK_BYTES
    monkeypatch.setattr(fastlane, "enabled", lambda: False)
    assert logparser.SGLangLogParser(None, "2026-12-01").block_bytes == \
        logparser.SLOW_BLOCK_BYTES


@needs_lane
def test_a_stamped_slow_line_takes_no_context(monkeypatch: pytest.MonkeyPatch):
    """A slow line that starts with SGLang's stamp, or with docker's, or has SGLang's
    dated stamp behind journald's prefix, is a leader of its own (the stamp is a prefix),
    so the fast line before it is not handed to the polars parser too; a line without a
    stamp may continue the one before (a traceback), and the fast line before it is read
    by both.  Either way the lanes' tables are the same."""
    real = (SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log").read_text()
    lines = [line for line in real.splitlines() if line]
    first = next(i for i, line in enumerate(lines) if "batch" in line)
    plain = lines[first:first + 400]  # (a stretch of batch lines and request records)
    assert sum("Decode batch" in line for line in plain) > 60
    stamped, bare = [], []  # a request record after batch lines; a traceback instead
    for i, line in enumerate(plain):
        stamped.append(line)
        bare.append(line)
        if "batch" in line and i % 3 == 2:
            stamped.append(line[:line.index("]") + 1] + " Ignore import error when loading "
                           f"sglang.srt.models.m{i}: no module")
            bare += ["Traceback (most recent call last):", "ValueError: boom"]
    docker = [f"2026-06-07T09:00:{i % 60:02d}.{i:09d}Z {line}" for i, line in enumerate(bare)]
    journald = [f"Jun 07 09:00:{i % 60:02d} node7 python3[4242]: {line}"
                for i, line in enumerate(stamped)]
    journald_bare = [f"Jun 07 09:00:{i % 60:02d} node7 python3[4242]: {line}"
                     for i, line in enumerate(bare)]
    for lines, context in ((stamped, False), (docker, False), (journald, False),
                           (bare, True), (journald_bare, True)):
        data = ("\n".join(lines) + "\n").encode()
        _same(data, 1 << 20, monkeypatch)
        lanes = fastlane.split_block(data, 1, "2026-06-07")
        slow = lanes.slow_text.splitlines()
        assert sum("Ignore import error" in line or "Traceback" in line for line in slow) > 20
        handed = sum("Decode batch" in line or "Prefill batch" in line for line in slow)
        assert (handed > 20) == context, (context, handed)


_RECEIVE = ("Receive: obj=GenerateReqInput(rid='{rid}', session_id=None, text='{text}', "
            "sampling_params={{'temperature': 0.0, 'max_new_tokens': 8}}, stream=False)")


@needs_lane
@pytest.mark.parametrize("text, quiet", [
    ("hello", True),
    ("a wrapper's ] [2026-01-01 00:00:00] stamp inside", True),
    ("maximise THROUGHPUT please", False),  # record-like (any case): counted as not read
    ("a Decode Batch of words", False),
    ("#pending-token: 3", False),  # what an era feature reads in any line
    ("MAMBA USAGE: 0.5", False),
    ("KV Cache is allocated. #tokens: 9", False),
    ("The server is fired up and ready to roll", False),  # an event phrase
    ("caf\u00e9", False),  # not plain ASCII
    ("tab\there", False),
])
def test_a_request_receipt_is_quiet_unless_it_says_what_the_parser_reads(text: str,
                                                                         quiet: bool):
    """A request log's ``Receive:`` line is a quiet row of the C lane (its stamp, no
    table), unless it holds what the polars parser would count or read in it."""
    line = "[2026-03-01 10:00:24 TP0] " + _RECEIVE.format(rid="0" * 32, text=text)
    lanes = fastlane.split_block((line + "\n").encode(), 1, "2026-01-01")
    assert lanes.quiet.height == int(quiet)
    assert list(lanes.slow_line_nos) == ([] if quiet else [1])
    assert set(fastlane.RECORD_LIKE) >= {b"throughput"}
    assert set(fastlane.ANY_LINE) >= {b"#pending-token: "}


_FINISH = ("Finish: obj=GenerateReqInput(rid='{rid}', text='{text}', sampling_params="
           "{{'max_new_tokens': 8}}), out={{'text': 'out', 'meta_info': {{'id': '{rid}', "
           "'finish_reason': {{'type': 'length', 'length': 8}}, 'prompt_tokens': 5, "
           "'completion_tokens': 8, 'cached_tokens': 0, 'e2e_latency': 0.25}}}}")


@needs_lane
@pytest.mark.parametrize("text, lane", [
    ("hello", "record"),
    ("maximise THROUGHPUT please", "record"),  # a record is read: no count of it not read
    ("#pending-token: 3", "slow"),  # what an era feature reads in any line
    ("Gracefully exiting", "slow"),  # an event phrase
    ("caf\u00e9", "slow"),  # not plain ASCII
])
def test_a_request_record_is_read_by_the_lane_unless_it_says_what_the_parser_reads(
        text: str, lane: str):
    """A request log's ``Finish:`` line is a quiet row of the C lane whose text the records'
    reader reads (no pass of the polars parser over it), unless it holds what the polars
    parser would read in any line."""
    line = "[2026-03-01 10:00:24 TP0] " + _FINISH.format(rid="0" * 32, text=text)
    lanes = fastlane.split_block((line + "\n").encode(), 1, "2026-01-01")
    assert lanes.records == ([line.split("] ", 1)[1]] if lane == "record" else [])
    assert list(lanes.slow_line_nos) == ([] if lane == "record" else [1])


def _receipts(lines: list[str]) -> list[str]:
    """``lines`` with a request receipt after every fifth stamped line and a request record
    after every seventh (with its stamp and rank tag), some saying what the polars parser
    reads, one record that cannot be read (a reject)."""
    texts = ["hello", "maximise Throughput", "x" * 300, "#swa token: 1", "ok"]
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        cut = line.find("] ")
        if cut < 0 or not line.lstrip().startswith(("[", "2")):
            continue
        if i % 5 == 0:
            out.append(line[:cut + 2] + _RECEIVE.format(rid=f"{i:032x}", text=texts[i % 5]))
        if i % 7 == 0:
            record = _FINISH.format(rid=f"{i:032x}", text=texts[i % 5])
            out.append(line[:cut + 2] + (record[:-40] if i % 21 == 0 else record))
    return out


@needs_lane
def test_quiet_rows_give_the_runs_of_the_polars_parser(monkeypatch: pytest.MonkeyPatch):
    """Request receipts and records among a real log's lines, in two launches (one the
    first line of a run, one the last), behind docker's and journald's prefixes, with
    time-only stamps across midnight, before a traceback and at a block's end, one record
    unreadable: the lanes' tables (requests, rejects and outer prefixes included), runs
    (spans, era features) and counts are the same, and the C lane took the receipts and
    records (the ingest's tables: ``test_log_records.py``)."""
    real = (SAMPLES / "real-cpu" / "real-cpu-baseline-r1" / "server.log").read_text()
    lines = real.splitlines()
    launch = next(i for i, line in enumerate(lines) if "server_args=" in line)
    two = lines + lines[launch:]  # a second launch: its first line after server_args
    two.insert(len(lines), lines[launch][:lines[launch].index("] ") + 2]
               + _RECEIVE.format(rid="f" * 32, text="last of run 1"))
    plain = _receipts(two)
    docker = [f"2026-12-01T09:17:{i % 60:02d}.{i:09d}Z {line}" for i, line in enumerate(plain)]
    journald = [f"Dec 01 09:17:{i % 60:02d} node7 python3[4242]: {line}"
                for i, line in enumerate(plain)]
    clock = ["[23:59:58 TP0] Decode batch. #running-req: 1, #token: 5",
             "[23:59:59.5 TP0] " + _RECEIVE.format(rid="1" * 32, text="before midnight"),
             "[00:00:01 TP0] " + _RECEIVE.format(rid="2" * 32, text="after midnight"),
             "[00:00:02 TP1] " + _RECEIVE.format(rid="3" * 32, text="before a traceback"),
             "Traceback (most recent call last):", "ValueError: boom",
             "[00:00:03 TP0] Decode batch. #running-req: 1, #token: 6",
             "[00:00:03 TP0] " + _FINISH.format(rid="5" * 32, text="a record")[:-30],
             "[00:00:04 TP0] " + _FINISH.format(rid="6" * 32, text="before a traceback"),
             "Traceback (most recent call last):", "ValueError: boom",
             "[00:00:04 EP1 TP0] " + _RECEIVE.format(rid="4" * 32, text="the last line")]
    # a block of the C lane's lines alone: a batch line and records, one unreadable
    alone = ["[2026-12-01 09:00:00 TP0] Decode batch. #running-req: 1, #token: 5",
             "[2026-12-01 09:00:01 TP0] " + _FINISH.format(rid="7" * 32, text="alone"),
             "[2026-12-01 09:00:02 TP0] " + _FINISH.format(rid="8" * 32, text="cut")[:-20]]
    for log in (plain, docker, journald, clock, alone):
        data = ("\n".join(log) + "\n").encode()
        _same(data, 1 << 20, monkeypatch)
        _same(data[: data.rfind(b"\n", 0, 1 << 15) + 1], 900, monkeypatch)
        lanes = fastlane.split_block(data, 1, "2026-12-01")
        receipts = sum("Receive:" in line for line in log)
        assert lanes.quiet.height - len(lanes.records) >= receipts // 2, log[0]
        assert len(lanes.records) >= sum("] Finish:" in line for line in log) // 2, log[0]
        # a line before an unstamped line is read by both lanes: only the slow one's
        assert not set(lanes.quiet["line_no"]) & set(lanes.slow_line_nos.tolist())

