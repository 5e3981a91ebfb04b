"""A worker function for the tests of :mod:`logpipe.workers`: its request back."""

from __future__ import annotations

from typing import Any


def echo(setup: Any, value: Any) -> Any:
    return value
