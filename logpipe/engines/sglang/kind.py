"""The SGLang server log as an input kind: its name, how the head of a file shows it, its
registry entry.

Apart from the parser (:mod:`logpipe.engines.sglang.parser`, polars and the C fast lane), so
that telling what a file is needs neither: an ingest of unchanged files imports no parser.
"""

from __future__ import annotations

import re

from logpipe.sources import Source, register

NAME = "sglang_server_log"

# A marker counts only where a message starts: at the line start (after indentation),
# after SGLang's "] " or after a logging prefix's ": ".  Prose mentioning the words does not.
_SNIFF_RE = re.compile(
    r"(?:^[ \t]*|\] |: )"
    r"(?:(?:Prefill|Decode) batch(?:[.,(]| ?\[\d)"
    r"|server_args\s*=\s*(?:ServerArgs\(|\{)"
    r"|The server is fired up and ready to roll"
    r"|Load weight begin\. avail mem="
    r"|KV Cache is allocated\."
    r"|Capture cuda graph begin\.)",
    re.MULTILINE,
)


def sniff(head: str) -> bool:
    """True when the head of a file shows SGLang server-log lines."""
    return _SNIFF_RE.search(head) is not None


SOURCE = register(
    Source(
        name=NAME,
        description="SGLang server log (launch_server / Engine output), any release",
        sniff=sniff,
        markers=(b"Decode batch", b"Prefill batch", b"] server_args=",
                 b"The server is fired up and ready to roll"),
        samples=(
            "eras/v0.2.15.log",
            "eras/v0.4.5.log",
            "eras/v0.5.10.log",
            "eras/v0.5.23.log",
            "mission/baseline-untuned/server.log",
        ),
        specificity=10,
    )
)
