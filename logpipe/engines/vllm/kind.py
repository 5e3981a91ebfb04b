"""The vLLM server log as an input kind: how the head of a file shows it.

Apart from the parser (:mod:`logpipe.engines.vllm.parser`), so that telling what a file is
imports no parser."""

from __future__ import annotations

import re

from logpipe.sources import Source, register

NAME = "vllm_server_log"

# vLLM's own prefix (``INFO 11-03 14:07:52 [loggers.py:87] ``; no brackets before 0.8)
# followed by one of its messages, or the messages themselves under a host program's
# logging format.  The prefix alone is not enough: other programs print ``file.py:N]``.
_SNIFF_RE = re.compile(
    r"(?:INFO|WARNING|DEBUG|ERROR) +\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\] "
    r"(?:.*(?:vLLM|vllm|LLM engine|KV cache|Avg prompt throughput|SpecDecoding metrics"
    r"|non-default args|Automatically detected platform|Speculative metrics: Draft))"
    r"|Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput"
    r"|vLLM API server version|Initializing an? (?:V1 )?LLM engine \(v",
    re.MULTILINE)


# what only a server prints: `vllm bench serve` imports vllm too, and its console starts with
# vLLM-prefixed lines of its own (platform detection, dataset sampling warnings)
_SERVER_RE = re.compile(
    r"Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput"
    r"|vLLM API server version|Initializing an? (?:V1 )?LLM engine \(v|non-default args: \{"
    r"|Starting vLLM (?:API )?server on|Application startup complete"
    r"|(?:INFO|WARNING|DEBUG|ERROR) +\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\] "
    r" *[▄█▀ ]+version \d")


def sniff(head: str) -> bool:
    """True when the head of a file shows vLLM server-log lines."""
    return _SNIFF_RE.search(head) is not None


def serves(head: str) -> bool:
    """True when the head shows what a vLLM server prints, not only a vLLM client."""
    return _SERVER_RE.search(head) is not None


SOURCE = register(
    Source(
        name=NAME,
        description="vLLM server log (vllm serve / api_server output), V0 and V1",
        sniff=sniff,
        markers=(b"Avg prompt throughput: ", b"vLLM API server version",
                 b"Speculative metrics: Draft acceptance rate", b"SpecDecoding metrics: "),
        samples=("eras/vllm/v0.3.1.log", "eras/vllm/v0.9.2.log", "eras/vllm/v0.33.0.log",
                 "real-vllm-cpu/real-vllm-cpu-ngram-r1/server.log",
                 "wrappers/vllm/docker-timestamps.log"),
        specificity=9,
        serves=serves,
    )
)
