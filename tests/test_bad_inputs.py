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
