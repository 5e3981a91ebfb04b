"""logpipe: SGLang logs, benchmarks and profiles as DuckDB tables tagged with their environment.

The library is the product; ``logpipe.cli`` is a thin shell over it.  Start with
:func:`logpipe.ingest.ingest_paths` (files → database) and :mod:`logpipe.store` (the schema).
"""

__version__ = "0.1.0"
