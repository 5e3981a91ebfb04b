"""Input kinds behind one registry.

Each kind is a :class:`Source`: a name, a ``sniff`` that looks only at the head of a file
(the first 64 KiB, decoded), and the sample files it ships under ``sample_logs/``.  The
registry tries the most specific kinds first (lnav's rule) and every sample must be
detected as its own kind and no other (``tests/test_registry.py``).  Built-in kinds are
registered the same way a plugin would: by calling :func:`register`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Source:
    """One kind of input file."""

    name: str
    description: str
    sniff: Callable[[str], bool]
    samples: tuple[str, ...] = field(default=())
    """Paths under ``sample_logs/`` that must be detected as this kind."""
    specificity: int = 0
    """Higher runs first: a narrow format must win over a broad one."""


_REGISTRY: dict[str, Source] = {}


def register(source: Source) -> Source:
    """Add a kind to the registry (replacing one of the same name)."""
    _REGISTRY[source.name] = source
    return source


def registered() -> list[Source]:
    """All kinds, most specific first."""
    _load_builtins()
    return sorted(_REGISTRY.values(), key=lambda s: (-s.specificity, s.name))


def detect(head: str) -> Source | None:
    """The first kind whose sniff accepts ``head``, or None."""
    for source in registered():
        if source.sniff(head):
            return source
    return None


def _load_builtins() -> None:
    from logpipe.sources import (  # noqa: F401  (self-registering)
        bench,
        phases,
        request_metrics,
        sglang_kind,
        torch_trace,
    )


_VLLM_RE = re.compile(
    r"(?:^|\] |\s)(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?[\w./-]+\.py:\d+\]"
    r"|Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput"
    r"|vLLM API server version", re.MULTILINE)


def looks_like_vllm(head: str) -> bool:
    """The head of a file shows vLLM's own lines (its ``INFO MM-DD HH:MM:SS [file.py:N]``
    prefix, its periodic stats line): said when such a file is skipped."""
    return _VLLM_RE.search(head) is not None
