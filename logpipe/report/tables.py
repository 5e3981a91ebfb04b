"""Rows as text: rich tables, CSV, JSON and JSON lines; numbers as they are shown."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:  # importing ingest would pull polars into every command's start-up
    pass


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


# ------------------------------------------------------------------------- compare

def num_text(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "–"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)
