"""What ``logpipe doctor`` says of a vLLM log: every line parsed as ingest parses it, with
counts by what it became and the record-like lines nothing read."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from logpipe.engines.vllm.parser import SPEC_HEADS, STATS_HEAD, LogState, Parser
from logpipe.readers import open_binary

SHOWN = 10


def diagnose(path: Path) -> dict[str, Any]:
    """``lines, counts, events, rejects, rejects_total, unread, unread_total`` of ``path``."""
    parser = Parser(LogState(), datetime.fromtimestamp(path.stat().st_mtime).date())
    counts: Counter[str] = Counter()
    events: Counter[str] = Counter()
    rejects: list[tuple[int, str, str]] = []
    unread: list[tuple[int, str]] = []
    unread_total = rejects_total = 0
    heads = (STATS_HEAD, *SPEC_HEADS)
    with open_binary(path) as fh:
        for n, raw in enumerate(fh, start=1):
            text = raw.decode("utf-8", errors="replace")
            parser.feed(n, text)
            out = parser.take()
            counts.update({"stats lines": len(out.stats), "spec-decode lines": len(out.spec),
                           "events": len(out.events), "HTTP access lines": len(out.http),
                           "rejected": len(out.rejects), "noise": out.noise})
            events.update(e["kind"] for e in out.events)
            rejects_total += len(out.rejects)
            for r in out.rejects[:SHOWN - len(rejects)]:
                rejects.append((r["line_no"], r["reason"], r["raw"][:200]))
            read = {r["line_no"] for r in out.stats + out.spec + out.rejects}
            if any(h in text for h in heads) and n not in read and \
                    parser.state.pending is None:
                unread_total += 1
                if len(unread) < SHOWN:
                    unread.append((n, text.rstrip("\r\n")[:200]))
    parser.finish()
    return {"lines": parser.state.lines, "counts": {k: v for k, v in counts.items()},
            "events": dict(events), "rejects": rejects, "rejects_total": rejects_total,
            "unread": unread, "unread_total": unread_total}
