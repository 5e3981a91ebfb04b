"""Benchmark outputs: ``bench_serving`` JSONL of every era (17 to 49 keys, one line per
run appended, ``server_info`` nested from 0.5.5) and its console summary ("Serving
Benchmark Result", including the misspelled ``Max reqeuest concurrency`` of 0.4.0–0.4.6),
plus the JSONL of ``bench_one_batch``, ``bench_one_batch_server`` and
``bench_offline_throughput`` (reference §5).

Files are small: they are parsed whole, kept whole (every key in ``extra``) and replaced
whole when they change.  A line that is not a JSON object is a reject.
"""

from __future__ import annotations

import json
import re
from typing import Any

from logpipe.redaction import redact
from logpipe.sources import Source, register
from logpipe.sources.records import first_json_object, json_objects, too_big

NUMERIC = {
    "request_rate": float, "max_concurrency": int, "completed": int, "num_prompts": int,
    "duration_s": float, "total_input_tokens": int, "total_output_tokens": int,
    "request_throughput": float, "input_throughput": float, "output_throughput": float,
    "total_throughput": float, "mean_ttft_ms": float, "median_ttft_ms": float,
    "p99_ttft_ms": float, "mean_tpot_ms": float, "median_tpot_ms": float, "p99_tpot_ms": float,
    "mean_itl_ms": float, "median_itl_ms": float, "p99_itl_ms": float,
    "mean_e2e_latency_ms": float, "median_e2e_latency_ms": float, "p99_e2e_latency_ms": float,
    "accept_length": float,
}
RENAMES = {"duration": "duration_s", "total_latency": "duration_s",
           "successful_requests": "completed", "acc_length": "accept_length",
           # vLLM 0.2x+ `--save-result`: tokens per draft-verify step, bonus token included,
           # as SGLang's accept length counts them
           "spec_decode_acceptance_length": "accept_length",
           "total_token_throughput": "total_throughput"}  # vLLM's name of it


VLLM_BENCH = "vllm bench serve"
"""``tool`` of vLLM's serving benchmark (``vllm bench serve``, ``benchmark_serving.py``):
its result JSON names the model and endpoint (``model_id``, ``endpoint_type``), its
console summary counts failed requests and peaks, where SGLang's prints its backend."""
VLLM_KEYS = frozenset({"model_id", "tokenizer_id", "endpoint_type"})


def tool_of(record: dict[str, Any]) -> str | None:
    keys = set(record)
    if "completed" in keys and len(VLLM_KEYS & keys) >= 2:
        return VLLM_BENCH
    if {"backend", "completed"} <= keys or {"backend", "output_throughput", "duration"} <= keys:
        return "bench_serving"
    if {"run_name", "batch_size", "prefill_latency"} <= keys:
        return "bench_one_batch"
    if {"run_name", "batch_size", "latency"} <= keys:
        return "bench_one_batch_server"
    if {"successful_requests", "total_latency"} <= keys:
        return "bench_offline_throughput"
    return None


def sniff_jsonl(head: str) -> bool:
    obj = first_json_object(head)
    return obj is not None and tool_of(obj) is not None


CONSOLE_BANNER = "Serving Benchmark Result"
"""The banner of a benchmark's console summary (``bench_serving``, ``vllm bench serve``)."""
BANNER_RE = re.compile(rf"^=+ {CONSOLE_BANNER} =+$", re.M)


def sniff_console(head: str) -> bool:
    return BANNER_RE.search(head) is not None


JSONL = register(Source(
    name="bench_jsonl",
    description="bench_serving / bench_one_batch(_server) / bench_offline_throughput JSONL",
    sniff=sniff_jsonl,
    samples=("mission/baseline-untuned/bench_serving.jsonl", "eras/bench_serving_v0.2.15.jsonl",
             "eras/bench_serving_v0.4.5.jsonl"),
    specificity=20,
    table="bench_results",
    parse=lambda text, keep_text: parse_jsonl(text),
))
CONSOLE = register(Source(
    name="bench_console",
    description="bench_serving console summary (Serving Benchmark Result)",
    sniff=sniff_console,
    samples=("mission/eagle3-untuned/bench_serving.txt",),
    specificity=30,
    table="bench_results",
    parse=lambda text, keep_text: (parse_console(text), []),
))


def normalise(record: dict[str, Any], tool: str, fmt: str) -> dict[str, Any]:
    """A record as a row of ``bench_results`` (minus location and link)."""
    row: dict[str, Any] = {"tool": tool, "format": fmt}
    for key, value in record.items():
        col = RENAMES.get(key, key)
        if col in NUMERIC and value is not None:
            try:
                row[col] = NUMERIC[col](value)
            except (TypeError, ValueError, OverflowError):  # (an int column's inf or nan)
                pass
        elif col in ("backend", "dataset_name"):
            row[col] = None if value is None else str(value)
    info = record.get("server_info")
    if isinstance(info, dict):
        row["sglang_version"] = info.get("version")
        row["server_info"] = json.dumps(redact(info), default=str)
    safe = {k: v for k, v in record.items() if k not in ("server_info", "generated_texts")}
    row["extra"] = json.dumps(redact(safe), default=str)
    return row


def parse_jsonl(text: str) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str, str]]]:
    """(line number, row) pairs and (line, reason, raw) rejects."""
    rows: list[tuple[int, dict[str, Any]]] = []
    rejects: list[tuple[int, str, str]] = []
    for i, obj, line in json_objects(text, rejects):
        tool = tool_of(obj)
        if tool is None:
            rejects.append((i, "not a benchmark record (unknown keys)", line[:2000]))
            continue
        row = normalise(obj, tool, "jsonl")
        big = too_big(row)
        if big is not None:
            rejects.append((i, f"a benchmark record whose {big} is too big for its column",
                            line[:2000]))
            continue
        rows.append((i, row))
    return rows, rejects


CONSOLE_LABELS = {
    "backend": "backend", "traffic request rate": "request_rate",
    "max request concurrency": "max_concurrency", "max reqeuest concurrency": "max_concurrency",
    "successful requests": "completed", "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens", "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "total token throughput (tok/s)": "total_throughput",
    "mean e2e latency (ms)": "mean_e2e_latency_ms",
    "median e2e latency (ms)": "median_e2e_latency_ms",
    "p99 e2e latency (ms)": "p99_e2e_latency_ms",
    "mean ttft (ms)": "mean_ttft_ms", "median ttft (ms)": "median_ttft_ms",
    "p99 ttft (ms)": "p99_ttft_ms", "mean tpot (ms)": "mean_tpot_ms",
    "median tpot (ms)": "median_tpot_ms", "p99 tpot (ms)": "p99_tpot_ms",
    "mean itl (ms)": "mean_itl_ms", "median itl (ms)": "median_itl_ms",
    "p99 itl (ms)": "p99_itl_ms", "accept length": "accept_length",
    "maximum request concurrency": "max_concurrency",
    "request rate configured (rps)": "request_rate", "acceptance length": "accept_length",
    "failed requests": "failed", "peak output token throughput (tok/s)": "peak_output_throughput",
    "peak concurrent requests": "peak_concurrent_requests",
}
SGLANG_CONSOLE_LABELS = frozenset({"backend", "traffic request rate"})
"""Rows of SGLang's ``bench_serving`` table in every release of the format reference.  vLLM's
(``benchmark_serving.py`` 0.2-0.10, ``vllm bench serve`` 0.9+) has neither: it prints
``Traffic request rate:`` as a plain line before its progress bar, and no backend."""


def console_tool(labels: set[str]) -> str:
    """Whose serving benchmark printed a table with these (lower-cased) row labels.  The
    rows vLLM added later (``Failed requests:``, peaks, ``Request rate configured``) are
    not needed to tell: a 0.4 table has none of them, and no ``Backend:`` either."""
    return "bench_serving" if labels & SGLANG_CONSOLE_LABELS else VLLM_BENCH


_ROW_RE = re.compile(r"^(?P<label>[^:]+):\s+(?P<value>\S.*?)\s*$")


def parse_console(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Every "Serving Benchmark Result" table in a console capture."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if BANNER_RE.match(lines[i].strip()):
            start, record = i + 1, {}
            labels: set[str] = set()
            i += 1
            while i < len(lines) and not re.fullmatch(r"=+", lines[i].strip()):
                m = _ROW_RE.match(_plain_markup(lines[i].strip()))
                if m:
                    label = m.group("label").strip().lower()
                    labels.add(label)
                    key = CONSOLE_LABELS.get(label)
                    value = m.group("value")
                    if key:
                        record[key] = value if key == "backend" else _num(value)
                    else:
                        record["console:" + m.group("label").strip()] = value
                i += 1
            out.append((start, normalise(record, console_tool(labels), "console")))
        i += 1
    return out


_MARKUP_RE = re.compile(r"(\*\*|__|`)(?P<inner>[^*_`]+?)\1")


def _plain_markup(line: str) -> str:
    """A table row pasted into Markdown, its label or value set in **bold**, __bold__ or
    `code`: the row as the benchmark printed it."""
    return _MARKUP_RE.sub(lambda m: m.group("inner"), line)


def _num(text: str) -> Any:
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return text
