"""Each source kind's samples are detected as that kind and no other (lnav's rule)."""

from __future__ import annotations

import pytest

from logpipe.readers import read_head
from logpipe.sources import HEAD_BYTES, registered
from tests.conftest import ROOT, SAMPLES

KINDS = registered()
CASES = [(s.name, sample) for s in KINDS for sample in s.samples]


def head(path) -> str:
    """What ingest sniffs: the first 64 KiB, decompressed."""
    return read_head(path, HEAD_BYTES).decode("utf-8", errors="replace")


def test_every_kind_ships_samples() -> None:
    assert KINDS
    for source in KINDS:
        assert source.samples, f"{source.name} ships no samples"


@pytest.mark.parametrize(("kind", "sample"), CASES)
def test_sample_detected_as_its_own_kind_only(kind: str, sample: str) -> None:
    text = head(SAMPLES / sample)
    matching = [s.name for s in KINDS if s.sniff(text)]
    assert matching == [kind]


@pytest.mark.parametrize("path", ["README.md", "pyproject.toml", "schemas/README.md",
                                  "sample_logs/README.md"])
def test_other_text_is_not_detected(path: str) -> None:
    text = head(ROOT / path)
    assert [s.name for s in KINDS if s.sniff(text)] == []


def test_bench_console_decode_lines_are_not_server_logs() -> None:
    text = ("Prefill. latency: 0.03 s, throughput:  16000.00 token/s\n"
            "Decode 3. Batch size: 1, latency: 0.01000 s, throughput:    100.00 token/s\n")
    assert [s.name for s in KINDS if s.sniff(text)] == []
