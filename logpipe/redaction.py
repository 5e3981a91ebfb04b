"""Which keys hold secrets: one rule for server arguments, environment variables and
manifests alike, whatever the engine."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_SECRET_WORDS = re.compile(
    r"(secret|password|passwd|credential|api_?key|private_?key|access_?key|(^|_)key($|_)|auth)",
    re.IGNORECASE,
)
# "token" names a secret (HF_TOKEN) unless the key counts tokens (max_total_tokens, ...)
# or names a measurement or a knob about them (SGLang 0.5's bucket_time_to_first_token,
# bucket_inter_token_latency and tbo_token_distribution_threshold: latency buckets and a
# two-batch-overlap setting, which a comparison must see).
_TOKEN_COUNT = re.compile(
    r"(tokens|tokenizer|num_|max_|min_|total|chunked|prefill|decode|reserved|budget|limit"
    r"|count|len|usage|ratio|token_?map|token_?ids|per_token|first_token|inter_token"
    r"|latency|threshold|distribution)",
    re.IGNORECASE,
)


@lru_cache(maxsize=8192)  # the same few thousand argument names, launch after launch
def is_secret_key(key: str) -> bool:
    """True for keys whose values look like credentials (``HF_TOKEN``, ``api_key``...)."""
    if _SECRET_WORDS.search(key):
        return True
    return "token" in key.lower() and not _TOKEN_COUNT.search(key)


def redact(args: dict[str, Any]) -> dict[str, Any]:
    """Replace values of secret-looking keys by ``'<redacted>'``, recursively."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if is_secret_key(key) and value not in (None, "", False):
            out[key] = "<redacted>"
        elif isinstance(value, dict):
            out[key] = redact(value)
        else:
            out[key] = value
    return out
