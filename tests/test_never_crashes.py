"""Property tests: arbitrary and mutated lines never crash the parser, and every line is
accounted for exactly once."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logpipe.engines.sglang.parser import LogState, parse_chunk
from tests.conftest import SAMPLES

REAL_LINES = [
    ln for p in sorted((SAMPLES / "eras").glob("*.log"))
    for ln in p.read_text().splitlines() if "batch" in ln or "server_args" in ln
][:400]


def check(lines: list[str]) -> None:
    text = "".join(ln.replace("\n", " ") + "\n" for ln in lines)
    chunk = parse_chunk(text, 1, LogState(), "2026-01-01")
    n = len(lines)
    line_nos = (
        chunk.batches["line_no"].to_list() + chunk.rejects["line_no"].to_list()
        + chunk.http["line_no"].to_list()
    )
    assert len(line_nos) == len(set(line_nos))  # no line is two records
    assert all(1 <= x <= n for x in line_nos)
    assert chunk.noise <= n
    assert chunk.batches.height + chunk.rejects.height <= n


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=200), min_size=1, max_size=20))
def test_arbitrary_text(lines: list[str]) -> None:
    check(lines)


def mutate(line: str, data: st.DataObject) -> str:
    ops = data.draw(st.lists(st.sampled_from(["cut", "insert", "delete", "swap", "dup"]),
                             min_size=1, max_size=4))
    for op in ops:
        if not line:
            break
        i = data.draw(st.integers(0, len(line) - 1))
        if op == "cut":
            line = line[:i]
        elif op == "insert":
            line = line[:i] + data.draw(st.sampled_from(
                [", ", ": ", "[", "]", "%", "=", "\x1b[31m", "\r", "\x00", "é", "(", ")"]
            )) + line[i:]
        elif op == "delete":
            line = line[:i] + line[i + 1:]
        elif op == "swap" and i + 1 < len(line):
            line = line[:i] + line[i + 1] + line[i] + line[i + 2:]
        elif op == "dup":
            line = line[:i] + line[i:] + line[i:]
    return line


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_real_lines(data: st.DataObject) -> None:
    picks = data.draw(st.lists(st.sampled_from(REAL_LINES), min_size=1, max_size=8))
    check([mutate(p, data) for p in picks])


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(REAL_LINES))
def test_unmutated_real_batch_lines_are_never_rejected(line: str) -> None:
    chunk = parse_chunk(line + "\n", 1, LogState(), "2026-01-01")
    assert chunk.rejects.height == 0
