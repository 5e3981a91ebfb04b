"""vLLM's plain access lines are read a stretch at a time; every table is what the line
parser alone makes of the same lines, on the real recordings, every wrapper sample and a
busy generated log, at block sizes that cut stretches anywhere."""

from __future__ import annotations

import io
import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from logpipe.engines.vllm import logparser
from logpipe.readers import line_blocks

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


def _parse(data: bytes, block: int, bulk: bool, monkeypatch: pytest.MonkeyPatch
           ) -> tuple[dict[str, pl.DataFrame], list, int, str]:
    if not bulk:
        none = logparser.plain_access([])
        monkeypatch.setattr(logparser, "plain_access", lambda lines: none)
    parser = logparser.VLLMLogParser(None, "2026-12-04")
    tables: dict[str, list[pl.DataFrame]] = {}
    runs, noise = [], 0
    chunks = [parser.finish(parser.prepare(b, parser.lines + 1))
              for b in line_blocks(io.BytesIO(data), block)]
    last = parser.end()
    for chunk in [*chunks, *([last] if last is not None else [])]:
        for name, frame in chunk.tables.items():
            tables.setdefault(name, []).append(frame)
        runs.extend(chunk.runs)
        noise += chunk.noise
    monkeypatch.undo()
    return ({k: pl.concat(v).sort("line_no") for k, v in tables.items()}, runs, noise,
            parser.state_json())


def _same(data: bytes, block: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Both ways give the same rows, runs, noise and state; returns the access rows."""
    slow = _parse(data, block, False, monkeypatch)
    fast = _parse(data, block, True, monkeypatch)
    assert slow[0].keys() == fast[0].keys()
    for name in slow[0]:
        assert_frame_equal(slow[0][name], fast[0][name])
    assert slow[1:] == fast[1:]
    return slow[0]["http_requests"].height if "http_requests" in slow[0] else 0


def _vllm_logs() -> list[Path]:
    return sorted(p for p in SAMPLES.rglob("*.log") if "vllm" in str(p.relative_to(SAMPLES))
                  and p.is_file())


@pytest.mark.parametrize("path", _vllm_logs(), ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_vllm_sample_reads_the_same(path: Path, monkeypatch: pytest.MonkeyPatch):
    data = path.read_bytes()
    _same(data, 1 << 20, monkeypatch)
    _same(data[: data.rfind(b"\n", 0, 1 << 15) + 1], 500, monkeypatch)


def _busy_log(seed: int) -> bytes:
    """A busy server: stretches of access lines (plain, behind docker, odd ones the
    stretches must leave to the line parser), stats and spec lines between them, a stats
    line cut by a terminal wrap, a profiler POST, a restart."""
    rnd = random.Random(seed)
    real = (SAMPLES / "real-vllm-cpu-counters" / "real-vllm-cpu-counters-ngram-r1"
            / "server.log").read_text().splitlines()
    stats = next(ln for ln in real if "Engine 000:" in ln)
    spec = next(ln for ln in real if "SpecDecoding metrics" in ln)
    out = list(real[:60])
    for i in range(3000):
        r = rnd.random()
        port = rnd.randint(1000, 65000)
        if r < 0.8:
            out.append(f'INFO:     127.0.0.1:{port} - "POST /v1/completions HTTP/1.1" 200 OK')
        elif r < 0.85:
            out.append(f'2026-12-04T15:00:{i % 60:02d}.123456789Z INFO:     10.0.0.{i % 9}:'
                       f'{port} - "GET /health HTTP/1.1" 200 OK')
        elif r < 0.88:
            out.append(rnd.choice([
                f'INFO:     [::1]:{port} - "GET /metrics HTTP/1.1" 200 OK',
                f'INFO:     127.0.0.1:{port} - "POST /start_profile HTTP/1.1" 200 OK',
                f'INFO:     127.0.0.1:{port} - "GET /x HTTP/1.1" 404 Not Found  ',
                f'INFO:     127.0.0.1:{port} - "GET /x HTTP/1.1" 503',
                f'\x1b[32mINFO\x1b[0m:     127.0.0.1:{port} - "GET /y HTTP/1.1" 200 OK',
                f'INFO:     127.0.0.1:{port} - "GET /y HTTP/1.1" 200 OK\r',
                'INFO:     Application startup complete.',
            ]))
        elif r < 0.95:
            out.append(stats)
            if rnd.random() < 0.5:
                out.append(spec)
        elif r < 0.97:  # a stats line cut by a terminal wrap: its rest on the next line
            cut = rnd.randint(len(stats) // 2, len(stats) - 5)
            out.extend([stats[:cut], stats[cut:]])
        elif r < 0.975:
            out.extend(real[:5])  # a restart's first lines
        else:
            out.append(rnd.choice(["", "noise", "Traceback (most recent call last):"]))
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_busy_generated_log_reads_the_same(seed: int, monkeypatch: pytest.MonkeyPatch):
    data = _busy_log(seed)
    assert _same(data, 1 << 20, monkeypatch) > 2000  # not vacuous
    _same(data, 3000, monkeypatch)
    _same(data, 40_000, monkeypatch)


def test_the_stretches_take_the_plain_lines():
    lines = _busy_log(0).decode().split("\n")[:-1]
    taken = logparser.plain_access(lines).height
    plain = sum(1 for ln in lines if ln.startswith('INFO:     127.0.0.1:') and ln.endswith(" OK")
                and "/start_profile" not in ln)
    assert taken >= plain


def test_access_lines_before_any_stamp_have_no_time(monkeypatch: pytest.MonkeyPatch):
    """A log cut by rotation may open with access lines: no stamp has been seen, so their
    time is NULL both ways, and the stretch after a stamped line takes its time."""
    real = (SAMPLES / "real-vllm-cpu-counters" / "real-vllm-cpu-counters-ngram-r1"
            / "server.log").read_text().splitlines()
    stats = next(ln for ln in real if "Engine 000:" in ln)
    access = [f'INFO:     127.0.0.1:{p} - "POST /v1/completions HTTP/1.1" 200 OK'
              for p in range(1000, 1040)]
    data = ("\n".join([*access, stats, *access]) + "\n").encode()
    assert _same(data, 1 << 20, monkeypatch) == 80
    tables = _parse(data, 1 << 20, True, monkeypatch)[0]
    ts = tables["http_requests"]["ts"]
    assert ts[:40].null_count() == 40 and ts[40:].null_count() == 0
    assert ts[40:].n_unique() == 1 and ts[40] == tables["vllm_stats"]["ts"][0]
