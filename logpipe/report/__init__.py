"""Formatting results for humans and machines: the only place that does.

Library functions return plain result objects; these functions turn them into text
(rich tables, CSV, JSON, JSON lines).  Nothing here computes a number.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.table import Table

from logpipe.ingest import IngestResult

FORMATS = ("table", "csv", "json", "jsonl")


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


def rows_text(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str,
              title: str | None = None, width: int | None = None) -> str:
    """Render a result set as ``table``, ``csv``, ``json`` (a list) or ``jsonl``."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in r] for r in rows])
        return buf.getvalue()
    if fmt in ("json", "jsonl"):
        dicts = [{c: _jsonable(v) for c, v in zip(columns, r, strict=True)} for r in rows]
        if fmt == "json":
            return json.dumps(dicts, indent=2, default=str) + "\n"
        return "".join(json.dumps(d, default=str) + "\n" for d in dicts)
    table = Table(title=title, show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*[_cell(v) for v in r])
    console = Console(file=io.StringIO(), width=width or 160, force_terminal=False,
                      color_system=None)
    console.print(table)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return out + f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n"


def ingest_summary(result: IngestResult) -> str:
    """A few lines saying what an ingest did."""
    statuses = ["new", "appended", "rewritten", "moved", "unchanged", "duplicate", "skipped",
                "failed"]
    seen = ", ".join(f"{result.count(s)} {s}" for s in statuses if result.count(s))
    lines = [
        f"Ingested into {result.db}: {len(result.files)} file(s) ({seen or 'none'})",
        f"  runs: {result.runs_created} new",
        "  rows: " + ", ".join(
            f"{result.rows(t)} {t}" for t in ("batches", "events", "http_requests")
        ),
        f"  rejects: {result.rows('rejects')} line(s)"
        + ("  (see the rejects table)" if result.rows("rejects") else ""),
        f"  noise: {sum(f.noise for f in result.files)} line(s) counted in sources",
        f"  time: {result.seconds:.2f} s",
    ]
    for f in result.files:
        if f.status in ("failed", "duplicate"):
            lines.append(f"  {f.status}: {f.path}: {f.detail}")
    return "\n".join(lines) + "\n"
