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


def _v(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def env_show(name: str, env: Any, fmt: str) -> str:
    """A run's environment, identity first."""
    from logpipe.env import TIERS

    order = {t: i for i, t in enumerate(TIERS)}
    items = sorted(env.entries.items(), key=lambda kv: (order[kv[1].tier], kv[0]))
    if fmt == "json":
        return json.dumps({"run": name, "complete": env.complete,
                           "fingerprint": env.fingerprint(),
                           "env": {k: e.as_json() for k, e in items}}, indent=2,
                          default=str) + "\n"
    head = (f"Environment of {name}: fingerprint {env.fingerprint()}"
            + ("" if env.complete else " (incomplete: no captured manifest)") + "\n")
    rows = [(e.tier, k, _v(e.value), e.source, e.conflict or "") for k, e in items]
    return head + rows_text(["tier", "key", "value", "source", "conflict"], rows, "table")


def env_diff(d: Any, fmt: str) -> str:
    """An environment diff: identity differences first, each value with its source."""
    if fmt == "json":
        return json.dumps({
            "run_a": d.run_a, "run_b": d.run_b, "complete_a": d.complete_a,
            "complete_b": d.complete_b, "comparable": d.comparable,
            "differences": [{"key": i.key, "tier": i.tier, "a": i.a, "b": i.b,
                             "a_source": i.a_source, "b_source": i.b_source}
                            for i in d.items],
        }, indent=2, default=str) + "\n"
    lines = []
    for run, complete in ((d.run_a, d.complete_a), (d.run_b, d.complete_b)):
        if not complete:
            lines.append(f"Environment of {run} is unknown (no captured manifest): "
                         "comparability cannot be established.")
    ident = d.identity
    if ident:
        lines.append(f"Identity differs in {len(ident)} key(s): {d.run_a} and {d.run_b} "
                     "are not comparable.")
    elif d.complete_a and d.complete_b:
        lines.append(f"Identity tiers match: {d.run_a} and {d.run_b} are comparable.")
    for tier in ("identity", "treatment", "annotation"):
        items = [i for i in d.items if i.tier == tier]
        if not items:
            continue
        lines.append(f"{tier}:")
        for i in items:
            src = f"  [{i.a_source or '-'} → {i.b_source or '-'}]"
            lines.append(f"  {i.key}: {_v(i.a)} → {_v(i.b)}{src}")
    return "\n".join(lines) + "\n"
