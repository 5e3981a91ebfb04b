"""The metrics a verdict may be decided by, by name: the client's benchmark metrics and the
server log's decode throughput.  Standard library only: a plan's ``primary`` is checked by
``ab --record-only`` on a bare machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from logpipe.errors import InputError


@dataclass(frozen=True)
class ClientMetric:
    column: str
    name: str
    unit: str
    higher_is_better: bool


CLIENT_METRICS = (
    ClientMetric("output_throughput", "output throughput", "tok/s", True),
    ClientMetric("request_throughput", "request throughput", "req/s", True),
    ClientMetric("median_ttft_ms", "median TTFT", "ms", False),
    ClientMetric("p99_ttft_ms", "p99 TTFT", "ms", False),
    ClientMetric("median_tpot_ms", "median TPOT", "ms", False),
    ClientMetric("p99_tpot_ms", "p99 TPOT", "ms", False),
    ClientMetric("median_itl_ms", "median ITL", "ms", False),
    ClientMetric("p99_itl_ms", "p99 ITL", "ms", False),
    ClientMetric("median_e2e_latency_ms", "median E2E latency", "ms", False),
    ClientMetric("p99_e2e_latency_ms", "p99 E2E latency", "ms", False),
)
"""The client's metrics of a launch, each judged per launch (latencies lower-is-better)."""

BY_COLUMN = {m.column: m for m in CLIENT_METRICS}
SERVER_PRIMARY = "decode_throughput"
"""The server family's deciding metric: steady decode throughput per running-request level
(the strata taken through Holm's correction)."""
DEFAULT_CLIENT_PRIMARY = "output_throughput"
COUNTERS_PRIMARY = "counter_output_throughput"
"""The engine's own counters: output tokens over each bench's window
(:mod:`logpipe.analysis.counters`); decides for the server where its log has too few
windows."""
PRIMARY_CHOICES = (SERVER_PRIMARY, COUNTERS_PRIMARY, *BY_COLUMN)


def parse_primary(value: str | None) -> str | None:
    """``--primary`` / the plan's ``primary``: a client metric's column (``output_throughput``,
    ``p99_ttft_ms``, with or without ``client.``), ``decode_throughput`` (the server log)
    or ``counter_output_throughput`` (``counters``: the engine's own counters)."""
    if value is None or not value.strip():
        return None
    key = value.strip().lower().replace("-", "_").replace(" ", "_")
    key = key.removeprefix("client.").removeprefix("server.")
    aliases = {"server": SERVER_PRIMARY, "log": SERVER_PRIMARY, "client": DEFAULT_CLIENT_PRIMARY,
               "counters": COUNTERS_PRIMARY}
    key = aliases.get(key, key)
    if key not in PRIMARY_CHOICES:
        raise InputError(f"unknown deciding metric {value!r}",
                         hint="use one of: " + ", ".join(PRIMARY_CHOICES))
    return key


def higher_is_better(key: str) -> bool:
    """Whether more is better for a deciding metric (the throughputs; not latencies)."""
    return key in (SERVER_PRIMARY, COUNTERS_PRIMARY) or BY_COLUMN[key].higher_is_better


def metric_label(key: str) -> str:
    if key == SERVER_PRIMARY:
        return "server decode throughput"
    if key == COUNTERS_PRIMARY:
        return "server counters' output throughput"
    return f"client {BY_COLUMN[key].name}"


