"""logpipe: serving-engine logs, benchmarks and profiles as DuckDB tables tagged with their
environment.

The library is the product; ``logpipe.cli`` is a thin shell over it.  For notebooks and
scripts, :func:`open` gives a :class:`logpipe.api.Database` whose methods return the
result objects the CLI renders; everything else is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from logpipe._version import __version__

if TYPE_CHECKING:
    from pathlib import Path

    from logpipe.api import Database

__all__ = ["__version__", "open"]


def open(path: str | Path = "logpipe.duckdb") -> Database:  # noqa: A001 - logpipe.open
    """The logpipe database at ``path``: a DuckDB file or a Parquet lake."""
    from logpipe.api import open as _open

    return _open(path)
