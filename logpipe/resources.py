"""Where the files shipped with logpipe are (standard library only: the record-only
commands that run on a bare GPU machine import this, not the store)."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def schemas_dir() -> Path:
    """``$LOGPIPE_SCHEMAS`` or the ``schemas/`` folder shipped inside the package (the
    repository's top-level ``schemas/`` is a link to it)."""
    env = os.environ.get("LOGPIPE_SCHEMAS")
    if env:
        return Path(env)
    return Path(str(files("logpipe"))) / "schemas"
