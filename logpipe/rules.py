"""The version of the rules that turn data into statistics and verdicts.

Every cache of a computed result (per-run statistics, pair verdicts) is keyed on the data
it was computed from *and* on :func:`rules_key`: the steady-state and pairing rules
(``schemas/views.sql``), the tiers (``schemas/tiers.toml``) and :data:`RULES_VERSION`,
which is raised whenever the judging code changes what it decides (not when a comment
or a name changes).  Cached rows of other rules are never served.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from logpipe.store import schemas_dir, views_sql

RULES_VERSION = 4
"""Raise when compare, pairing, stats or steady-state code changes a verdict or a
statistic (1: to 0.1.0; 2: capacity keys judged against the load, diagnostics never
gate, graph-less runs have a steady state; 3: verdicts on one value per launch; 4: the
client's launch noise borrowed from repeats of the judged workload only, load levels)."""


@lru_cache(maxsize=1)
def rules_key() -> str:
    h = hashlib.sha256(f"rules {RULES_VERSION}".encode())
    views = views_sql()  # with the engines' fragments of the samples view
    if views is not None:
        h.update(views.encode())
    path = schemas_dir() / "tiers.toml"
    if path.exists():
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
