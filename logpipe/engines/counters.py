"""The engines' Prometheus counters: a ``GET /metrics`` snapshot read into
``metric_snapshots``, every sample kept, each engine's own metric names mapped to one
engine-neutral meaning (:data:`NEUTRAL`) by its :class:`logpipe.engines.CounterRules`.

A snapshot is the text format both SGLang (``--enable-metrics``) and vLLM serve, parsed
with ``prometheus_client``'s parser, one family block at a time: a block it refuses goes
to ``rejects`` line by line, the rest of the file is kept.  ``logpipe launch`` writes one
snapshot before and one after each bench (level), with a first comment line that says
when and where (:data:`HEADER`); a user's own ``curl .../metrics > file`` has none, and
its rows then carry no time, level or phase (its counters are totals since the server
started).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from logpipe.sources import Source, register
from logpipe.sources.records import loads

HEADER = "# logpipe-scrape: "
"""First line of a snapshot ``launch`` took: this prefix, then a JSON object with
``taken_at`` (UTC, ISO), ``phase`` (``before``/``after``), ``level`` and ``level_by``
(absent for a launch benched once) and ``url``.  The text format treats it as a comment."""

NEUTRAL: dict[str, str] = {
    "generated_tokens": "output tokens generated (counter)",
    "prompt_tokens": "prompt tokens processed (counter)",
    "requests": "requests finished (counter, every finish reason)",
    "spec_drafts": "speculative verify steps: drafts proposed, one per request per step "
                   "(counter)",
    "spec_draft_tokens": "draft tokens proposed (counter)",
    "spec_accepted_tokens": "draft tokens accepted (counter)",
    "iteration_tokens": "tokens per engine step (histogram: its count is the engine steps)",
    "ttft_seconds": "time to first token per request (histogram)",
    "itl_seconds": "inter-token latency (histogram)",
    "tpot_seconds": "time per output token per request (histogram)",
    "e2e_seconds": "end-to-end request latency (histogram)",
    "queue_seconds": "time a request waited in the queue (histogram)",
}
"""The engine-neutral counter names (``metric_snapshots.metric``) and what they count."""

def _prefixes() -> dict[str, tuple[str, dict[str, str]]]:
    """Metric-name prefix → (engine, its name map), from the registered engines."""
    from logpipe.engines import engines

    return {e.counters.prefix: (e.name, dict(e.counters.names)) for e in engines()
            if e.counters.prefix}


def sniff(head: str) -> bool:
    """The text exposition format: ``# TYPE`` lines and samples of a known engine's
    metrics (a Prometheus dump of another program is not an engine's)."""
    if "# TYPE " not in head:
        return False
    lines = head.splitlines()
    types = sum(1 for line in lines if line.startswith("# TYPE "))
    if types < 2:
        return False
    prefixes = tuple(_prefixes())
    return any(line.startswith(prefixes) for line in lines if not line.startswith("#"))


SOURCE = register(Source(
    name="prometheus_metrics",
    description="an engine's /metrics snapshot (Prometheus text format)",
    sniff=sniff,
    samples=("real-vllm-cpu-counters/real-vllm-cpu-counters-ngram-r1/metrics/"
             "max_concurrency-4-after.prom",),
    specificity=28,
    table="metric_snapshots",
    parse=lambda text, keep_text: parse(text),
))


def _header(line: str) -> dict[str, Any]:
    try:
        info = loads(line[len(HEADER):])
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when


def _blocks(lines: list[str]) -> list[list[tuple[int, str]]]:
    """The file cut before each ``# HELP``/``# TYPE`` that names a new family: each block
    one family's comments and samples, with their line numbers (from 1)."""
    blocks: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    name = None
    for i, line in enumerate(lines, 1):
        if line.startswith(("# HELP ", "# TYPE ")):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[2] != name:
                if current:
                    blocks.append(current)
                current, name = [], parts[2]
        current.append((i, line))
    if current:
        blocks.append(current)
    return blocks


def _samples(block: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(i, line) for i, line in block if line.strip() and not line.startswith("#")]


def parse(text: str) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str, str]]]:
    """One row per sample of the snapshot, with its family, type and labels as the parser
    read them and the neutral name its engine maps the family to; rejects for lines the
    parser refuses."""
    from prometheus_client.parser import text_string_to_metric_families

    lines = text.splitlines()
    info = _header(lines[0]) if lines and lines[0].startswith(HEADER) else {}
    base = {"taken_at": _when(info.get("taken_at")), "phase": info.get("phase"),
            "level": float(info["level"]) if isinstance(info.get("level"), int | float)
            else None, "level_by": info.get("level_by")}
    prefixes = _prefixes()
    rows: list[tuple[int, dict[str, Any]]] = []
    rejects: list[tuple[int, str, str]] = []
    for block in _blocks(lines):
        samples = _samples(block)
        if not samples:
            continue
        try:
            families = list(text_string_to_metric_families(
                "\n".join(line for _, line in block) + "\n"))
            parsed = [(f, s) for f in families for s in f.samples]
            if len(parsed) != len(samples):
                raise ValueError("samples and lines do not match")
        except ValueError:
            parsed = []
            comments = [line for _, line in block if line.startswith("#")]
            for i, line in samples:  # the block refused: each line alone, to keep the rest
                try:
                    one = [(f, s) for f in text_string_to_metric_families(
                        "\n".join([*comments, line]) + "\n") for s in f.samples]
                except ValueError as exc:
                    rejects.append((i, f"not a Prometheus sample: {exc}", line[:2000]))
                    continue
                parsed.extend(one[:1])
                if not one:
                    rejects.append((i, "no sample read", line[:2000]))
            samples = [(i, line) for i, line in samples if i not in {r[0] for r in rejects}]
        for (i, _), (family, sample) in zip(samples, parsed, strict=False):
            labels = dict(sample.labels)
            le = labels.pop("le", None) if sample.name.endswith("_bucket") else None
            engine, names = next(((e, n) for p, (e, n) in prefixes.items()
                                  if family.name.startswith(p)), (None, {}))
            rows.append((i, {**base, "engine": engine, "family": family.name,
                             "type": family.type, "sample": sample.name,
                             "labels": json.dumps(labels, sort_keys=True),
                             "le": _float(le), "value": float(sample.value),
                             "metric": names.get(family.name)}))
    return rows, rejects


def _float(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
