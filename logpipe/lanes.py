"""The switch of every C lane and kernel (``LOGPIPE_FASTLANE=0``: none is used), read
without their imports: the parsers' lanes (:mod:`logpipe.engines.clane`), the judged
counts' kernel (:mod:`logpipe.classify`) and the copies test's line hashes
(:func:`logpipe.readers.line_hashes`), each of which then does what its Python does."""

from __future__ import annotations

import os


def lane_enabled() -> bool:
    """Whether the C lanes may be used (``LOGPIPE_FASTLANE=0``: none is)."""
    return os.environ.get("LOGPIPE_FASTLANE", "1") != "0"
